"""The Typer application and the options shared by every command."""


import os
from enum import Enum
from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(
    name="clusterbench",
    help="Measure, tune and compare the performance of HPC systems: HPL, HPCC, STREAM, DGEMM, "
         "ping-pong. Start with `clusterbench run`.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)


def eta_progress(quiet: bool = False):
    """The bar of a job sized by a time budget (`run`, `run -w`): what runs, how far, elapsed, ETA.
    Transient, and silent with `quiet` (--json)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                    TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                    console=console, transient=True, disable=quiet)


class MpiChoice(str, Enum):
    """The MPI implementations a run or a build can name (each with its own mpirun and mpicc)."""

    openmpi = "openmpi"
    mpich = "mpich"


MpiOpt = Annotated[MpiChoice | None, typer.Option(
    "--mpi", help="MPI: openmpi or mpich (default: the mpirun and mpicc on PATH).")]


def _show_version(value: bool) -> None:
    """--version when the app runs in-process (the `clusterbench` command answers it in cli.main,
    before typer is imported)."""
    if value:
        from clusterbench.cli import version

        console.print(f"clusterbench {version()}", highlight=False)
        raise typer.Exit()


@app.callback()
def main_options(
    db: Annotated[str | None, typer.Option(
        "--db", help="Results database (default: $CLUSTERBENCH_DB or "
                     "$XDG_DATA_HOME/clusterbench/results.db).")] = None,
    limit: Annotated[list[str] | None, typer.Option(
        "--limit", metavar="NAME=VALUE",
        help="Raise or lower one of the bounds on what input may make clusterbench build, for this command "
             "(repeatable), e.g. --limit max_runs=200000.")] = None,
    show_version: Annotated[bool, typer.Option(
        "--version", "-V", is_eager=True, callback=_show_version, help="Print the version and exit.")] = False,
) -> None:
    from clusterbench import limits
    from clusterbench.errors import UserInputError

    if db:
        os.environ["CLUSTERBENCH_DB"] = db
    for item in limit or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UserInputError(f"invalid --limit {item!r}",
                                 hint="write --limit NAME=VALUE, e.g. --limit max_runs=200000; limits: "
                                      + ", ".join(sorted(limits.LIMITS)))
        limits.override(name.strip(), value.strip())


def open_store(read_only: bool = False):
    """The results database. Read commands pass read_only=True: SQLite's read-only mode, which also
    reads a database on a read-only mount, and never creates a database that does not exist."""
    from clusterbench.store.db import Store

    return Store(read_only=read_only)


def parse_assignments(items: list[str], option: str = "-p", example: str = "n=2000") -> dict:
    """['n=2000', 'bind_to=core'] -> {'n': 2000, 'bind_to': 'core'}: values read as YAML scalars,
    as they would be in a campaign file."""
    import yaml

    from clusterbench.errors import UserInputError

    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UserInputError(f"invalid {option} {item!r}",
                                 hint=f"write {option} key=value, e.g. {option} {example}")
        try:
            out[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            out[key.strip()] = raw
    return out
