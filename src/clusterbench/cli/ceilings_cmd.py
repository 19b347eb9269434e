"""`clusterbench ceilings` and `clusterbench explain RUN`: what this node can do, and a run placed against it.

The ceilings are the best counted figures of the `clock`, `dgemm` and `stream` kernels per system,
cores and BLAS (analysis/ceilings.py); `explain` holds one run's figure against them and names the
bottleneck with its evidence. Both read the store only: they measure nothing.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from clusterbench.cli.app import app
from clusterbench.cli.shared import console, open_store
from clusterbench.errors import UserInputError

MEASURE_HINT = ("measure them: clusterbench bench clock; clusterbench bench dgemm -p ranks=1 -p threads=1 "
                "(and -p ranks=<cores>); clusterbench bench stream -p threads=1 (and more threads)")


@app.command("ceilings")
def ceilings_command(
    as_json: Annotated[bool, typer.Option("--json", help="Every ceiling as JSON.")] = False,
) -> None:
    """What each stored system can do: FMA peak, DGEMM per cores and BLAS, STREAM Triad per thread count."""
    from clusterbench.analysis.ceilings import ceilings

    with open_store() as store:
        found = ceilings(store)
    if as_json:
        print(json.dumps([c.__dict__ for c in found], indent=2))
        return
    if not found:
        raise UserInputError("no ceiling is stored: no counted clock, dgemm or stream run", hint=MEASURE_HINT)
    table = Table(title=f"node ceilings (best counted run): {len(found)}", title_justify="left")
    for column, justify in (("system", "left"), ("ceiling", "left"), ("value", "right"), ("runs", "right"),
                            ("newest", "left")):
        table.add_column(column, justify=justify, overflow="fold")
    for c in found:
        table.add_row(escape(c.system_id[:8]), escape(c.label()), _value(c.value, c.unit), str(c.runs),
                      escape(c.newest[:10]))
    console.print(table)
    console.print("best run of each: clusterbench ceilings --json", highlight=False)


@app.command("explain")
def explain_command(
    run_id: Annotated[str, typer.Argument(help="A stored run id (clusterbench results lists them).")],
    as_json: Annotated[bool, typer.Option("--json", help="The placement as JSON.")] = False,
) -> None:
    """A run against its node's ceilings (DGEMM x cores, FMA peak, Rpeak; Triad) and its bottleneck."""
    from clusterbench.analysis.ceilings import place

    with open_store() as store:
        placed = place(store, run_id)
    if placed is None:
        raise UserInputError(f"no stored run {run_id!r}", hint="clusterbench results lists the run ids")
    if as_json:
        print(json.dumps(placed.as_dict(), indent=2))
        return
    figure = _value(placed.value, placed.unit) if placed.value is not None else "no figure"
    console.print(f"{escape(placed.run_id)}  {escape(placed.benchmark)}  {escape(placed.figure)} {figure}",
                  highlight=False)
    for what, value, unit, fraction, source in placed.against:
        console.print(f"  {fraction:4.0%} of {_value(value, unit)}: {escape(what)}", highlight=False)
        console.print(f"        {escape(source)}", style="dim", highlight=False)
    console.print(f"bottleneck: {escape(placed.bottleneck)}", style="bold", highlight=False)
    for line in placed.evidence:
        console.print(f"  {escape(line)}", highlight=False)
    for line in placed.facts:
        console.print(f"fact: {escape(line)}", highlight=False)
    for line in placed.missing:
        console.print(f"not stored: {escape(line)}", highlight=False)


def _value(value: float, unit: str) -> str:
    """3 significant digits with the unit; MB/s above 1000 as GB/s."""
    if unit == "MB/s" and value >= 1000:
        value, unit = value / 1000, "GB/s"
    return f"{value:.3g} {unit}" if value < 1000 else f"{value:,.0f} {unit}"
