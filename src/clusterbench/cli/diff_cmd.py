"""`clusterbench diff RUN_A RUN_B`: what differs between two runs, section by section."""


import json
from dataclasses import asdict
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from clusterbench.cli.app import app, console, open_store


@app.command()
def diff(
    run_a: Annotated[str, typer.Argument(help="The first run's id (see `clusterbench results`).")],
    run_b: Annotated[str, typer.Argument(help="The second run's id.")],
    measured: Annotated[bool, typer.Option(
        "--measured", help="Also figures measured every run (the core clock), which always differ a little.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the differences as JSON.")] = False,
) -> None:
    """What differs between two runs: parameters, the nodes' settings, MPI parameters, hardware,
    software, environment and launcher.

    The nodes' state is what each node reported just before the run started (kernel, governor,
    THP, NIC MTU/coalescing/offloads/RPS, TCP, route rto_min, Open MPI parameters, ...). Runs on
    differently named nodes are matched node by node in the order they used them.
    """
    from clusterbench.analysis.diff import diff as run_diff

    with open_store(read_only=True) as store:
        found = run_diff(store, run_a, run_b, measured)
    if as_json:
        print(json.dumps([asdict(d) for d in found], indent=2))
        return
    if not found:
        console.print(f"{escape(run_a)} and {escape(run_b)} differ in nothing recorded"
                      + ("" if measured else " (measured figures aside: --measured)"))
        return
    console.print(differences_table(f"{run_a} vs {run_b}", found, "A", "B"))


def differences_table(title: str, found: list, a: str, b: str) -> Table:
    table = Table(title=escape(title), title_justify="left")
    for column in ("section", "key", a, b):
        table.add_column(escape(column), overflow="fold")
    for d in found:
        table.add_row(escape(d.section), escape(d.key), escape(d.a), escape(d.b))
    return table
