"""`clusterbench tune hpl`: the budgeted HPL tuner (helper C2 writes this module)."""

from __future__ import annotations

import typer

from clusterbench.cli.app import app

tune_app = typer.Typer(help="Find the best configuration of a benchmark within a time budget (HPL).",
                       no_args_is_help=True)
app.add_typer(tune_app, name="tune")
