"""The Typer application and the options shared by every command."""


from enum import Enum
from typing import Annotated

import typer

from clusterbench.cli.shared import apply_main_options, console
from clusterbench.cli.shared import err_console as err_console  # the commands import these four from here
from clusterbench.cli.shared import open_store as open_store
from clusterbench.cli.shared import parse_assignments as parse_assignments

app = typer.Typer(
    name="clusterbench",
    help="Measure, tune and compare the performance of HPC systems: HPL, HPCC, STREAM, DGEMM, "
         "ping-pong. Start with `clusterbench run`.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _flags_show_no_type() -> None:
    """A flag's row in `COMMAND --help` without a type: typer 0.29's rich help gives every option a type
    column, flags too (`--json <bool>`), which reads as if the flag took a value (`--json true`), though
    it takes none. Its plain help and its usage line already leave a flag's type out; this does the
    same for the rich one, for every command at once. Older typers (no display_type_rich) are left as
    they are."""
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "flags_show_no_type", False):
        return

    def display_type_rich(self, ctx):
        return None if getattr(self, "is_flag", False) or getattr(self, "count", False) else shown(self, ctx)

    display_type_rich.flags_show_no_type = True
    TyperOption.display_type_rich = display_type_rich


_flags_show_no_type()


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
    quiet_check: Annotated[str | None, typer.Option(
        "--quiet-check", metavar="LIMIT",
        help="Before each run, wait up to LIMIT (e.g. 2m) for its nodes to be quiet (no other work on their "
             "CPUs, no steal), else refuse with what keeps them busy (exit 1).")] = None,
    show_version: Annotated[bool, typer.Option(
        "--version", "-V", is_eager=True, callback=_show_version, help="Print the version and exit.")] = False,
) -> None:
    apply_main_options(db, limit, quiet_check)
