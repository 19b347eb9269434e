"""`clusterbench benchmarks` (what can run here) and `clusterbench bench NAME -p key=value`.

`bench`'s options, for typer; what it runs and prints is cli/bench_run.py, which cli/plain.py
calls directly for the plain command lines.
"""


import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from clusterbench.cli.app import app, console
from clusterbench.cli.bench_run import run


@app.command()
def benchmarks(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """The benchmark modules, whether each can run on this machine, and their parameters."""
    from clusterbench.bench.params import REQUIRED
    from clusterbench.bench.registry import BENCHMARKS

    rows = []
    for name, cls in BENCHMARKS.items():
        ok, why = cls.available()
        params = [{"name": p.name, "type": p.kind.__name__, "required": p.default is REQUIRED,
                   "default": None if p.default is REQUIRED else p.default, "help": p.help} for p in cls.parameters]
        rows.append({"name": name, "available": ok, "detail": why, "summary": cls.summary(), "parameters": params})
    if as_json:
        print(json.dumps(rows, indent=2, default=str))
        return
    table = Table(title="benchmarks", title_justify="left")
    for col in ("name", "available", "what", "here", "parameters"):
        table.add_column(col, overflow="fold")
    for r in rows:
        names = ", ".join(p["name"] + ("*" if p["required"] else "") for p in r["parameters"])
        table.add_row(r["name"], "[green]yes[/]" if r["available"] else "[red]no[/]", escape(r["summary"]),
                      escape(r["detail"]), escape(names))
    console.print(table)
    console.print("* required. Run one: clusterbench bench NAME -p key=value ...; sweep: see docs/campaigns.md")


@app.command()
def bench(
    name: Annotated[str, typer.Argument(help="Benchmark module (see `clusterbench benchmarks`).")],
    param: Annotated[list[str] | None, typer.Option(
        "--param", "-p", help="A parameter: -p n=4000 -p bind_to=core (repeatable).")] = None,
    repeats: Annotated[str, typer.Option(
        help="Runs of this point: a number, or auto: until the 95% interval of the headline metric's mean is "
             "within --precision (at least 3 runs, at most --max-repeats; only runs that count are samples).")] = "1",
    timeout: Annotated[str | None, typer.Option(help="Per-run limit (e.g. 10m); the process tree is killed.")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="Tag the runs: --tag key=value.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the runs and metrics as JSON.")] = False,
    precision: Annotated[str | None, typer.Option(
        help="With --repeats auto: the 95% interval's half-width to reach, of the mean (default 2%).")] = None,
    max_repeats: Annotated[int | None, typer.Option(
        help="With --repeats auto: the most runs (default 10, 3 to 100).")] = None,
) -> None:
    """Run one benchmark once (or --repeats times), store it like any run, print its metrics.

    With --repeats auto the point is run again until the 95% interval of its headline metric (its
    figure of merit) is within --precision of the mean, and one line says why the repeats stopped.
    The noise floors of what ran (docs/history.md) are learned again from the stored repeats."""
    run(name, param, repeats, timeout, tag, as_json, precision, max_repeats)
