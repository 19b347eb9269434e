"""`clusterbench benchmarks [NAME]` (what can run here, one benchmark's parameters) and
`clusterbench bench NAME -p key=value`.

`bench`'s options, for typer; what it runs and prints is cli/bench_run.py, which cli/plain.py
calls directly for the plain command lines. The listing keeps each name whole at 80 columns:
a table of five columns folded `swap_threshold` in the middle, so what, where and the parameters
share one wrapped column; `benchmarks NAME` gives each parameter its help, default and range.
"""


import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from clusterbench.cli.app import app, console
from clusterbench.cli.bench_run import run


def _param_entry(p) -> dict:
    """A declared parameter (bench/params.py Param) as `benchmarks --json` gives it."""
    from clusterbench.bench.params import REQUIRED

    return {"name": p.name, "type": p.kind.__name__, "required": p.default is REQUIRED,
            "default": None if p.default is REQUIRED else p.default, "help": p.help,
            "choices": list(p.choices) if p.choices else None, "minimum": p.minimum, "maximum": p.maximum}


def _entry(name: str, cls) -> dict:
    ok, why = cls.available()
    return {"name": name, "available": ok, "detail": why, "summary": cls.summary(),
            "open_parameters": bool(cls.open_parameters), "parameters": [_param_entry(p) for p in cls.parameters]}


@app.command()
def benchmarks(
    name: Annotated[str | None, typer.Argument(
        help="One benchmark: each of its parameters with its help, default and range.", show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The benchmark modules, whether each can run on this machine, and their parameters.

    With NAME, that benchmark alone: each parameter with its type, default, range or choices, and what it
    means."""
    if name is not None:
        from clusterbench.bench.registry import benchmark_class

        entry = _entry(name, benchmark_class(name))  # an unknown name: refused with the close ones
        if as_json:
            print(json.dumps(entry, indent=2, default=str))
        else:
            _print_one(entry)
        return
    from clusterbench.bench.registry import BENCHMARKS

    rows = [_entry(key, cls) for key, cls in BENCHMARKS.items()]
    if as_json:
        print(json.dumps(rows, indent=2, default=str))
        return
    # Three columns: a name and yes/no never wrap, and the third (what it is, what it would use here,
    # its parameters) wraps between words, so no name is cut in two at 80 columns.
    table = Table(title="benchmarks", title_justify="left")
    table.add_column("name", no_wrap=True)
    table.add_column("here", no_wrap=True)
    table.add_column("what, what it uses here, parameters (* required)", overflow="fold")
    for r in rows:
        names = ", ".join(p["name"] + ("*" if p["required"] else "") for p in r["parameters"])
        table.add_row(escape(r["name"]), "[green]yes[/]" if r["available"] else "[red]no[/]",
                      _cell(f"{escape(r['summary'])}\n[dim]{escape(r['detail'])}[/]\n{escape(names) or '-'}"))
    console.print(table)
    console.print("Each parameter with its help, default and range: clusterbench benchmarks NAME. "
                  "Run one: clusterbench bench NAME -p key=value ...; sweep: see docs/campaigns.md",
                  highlight=False, emoji=False)


def _cell(markup: str) -> Text:
    """A cell of declared text: markup ours, the text as written (no `:name:` turned into an emoji)."""
    return Text.from_markup(markup, emoji=False)


def default_text(param: dict) -> str:
    """A parameter's default as `benchmarks NAME` says it."""
    if param["required"]:
        return "required"
    value = param["default"]
    if value is None:
        return "none: the benchmark chooses"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def range_text(param: dict) -> str:
    """The values a parameter takes beyond its type: its choices, or its bounds ('' when any value of
    its type)."""
    if param["choices"]:
        return "one of " + ", ".join(param["choices"])
    if param["type"] == "bool":
        return "true or false"
    low, high = param["minimum"], param["maximum"]
    if low is not None and high is not None:
        return f"{_number(low)} to {_number(high)}"
    if low is not None:
        return f"at least {_number(low)}"
    if high is not None:
        return f"at most {_number(high)}"
    return ""


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _print_one(entry: dict) -> None:
    """One benchmark: what it is, whether it runs here, then a row per parameter (name and type never
    wrap; its help, default and range wrap between words)."""
    here = "[green]can run here[/]" if entry["available"] else "[red]cannot run here[/]"
    console.print(f"[bold]{escape(entry['name'])}[/]: {escape(entry['summary'])}", highlight=False, emoji=False)
    console.print(f"{here}: {escape(entry['detail'])}", highlight=False, emoji=False)
    table = Table(title=f"parameters of {escape(entry['name'])} (* required)", title_justify="left")
    table.add_column("parameter", no_wrap=True)
    table.add_column("type", no_wrap=True)
    table.add_column("meaning, default and range", overflow="fold")
    for p in entry["parameters"]:
        bounds = range_text(p)
        facts = f"default: {default_text(p)}" + (f"; range: {bounds}" if bounds else "")
        table.add_row(escape(p["name"] + ("*" if p["required"] else "")), p["type"],
                      _cell((f"{escape(p['help'])}\n" if p["help"] else "") + f"[dim]{escape(facts)}[/]"))
    if entry["parameters"]:
        console.print(table)
    else:
        console.print("no declared parameters", highlight=False)
    if entry["open_parameters"]:
        console.print("Any other plain key=value is accepted too (a template's own names).", highlight=False)
    console.print(f"Run it: clusterbench bench {escape(entry['name'])} -p key=value ...", highlight=False, emoji=False)


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
