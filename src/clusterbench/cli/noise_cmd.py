"""`clusterbench noise`: the noise floor of every configuration and metric, learned again from the stored
repeats (analysis/noise.py): how much one run of it moves, below which `compare` and `history` call no
difference significant."""

from __future__ import annotations

from typing import Annotated

import typer

from clusterbench.cli.app import app
from clusterbench.cli.history_cmd import SELECTION_HELP


@app.command("noise")
def noise(
    selection: Annotated[list[str] | None, typer.Argument(help=SELECTION_HELP, show_default=False)] = None,
    metric: Annotated[str | None, typer.Option("--metric", "-m", help="Only this metric's floors.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Every floor as JSON (with its runs).")] = False,
) -> None:
    """The noise floor per system, benchmark, configuration and metric, from 3+ counted repeats."""
    from clusterbench.cli.noise_view import show_floors

    show_floors(selection, metric, as_json)
