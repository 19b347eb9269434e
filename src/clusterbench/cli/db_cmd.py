"""`clusterbench db check|backup|migrate`: look after the results database itself."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from clusterbench.cli.app import app, console, open_store

db_app = typer.Typer(help="The results database: check its integrity, back it up, upgrade its schema.",
                     no_args_is_help=True)
app.add_typer(db_app, name="db")


@db_app.command("check")
def db_check() -> None:
    """Integrity (SQLite's integrity_check), foreign keys and schema version, read-only: prints ok
    or each problem (exit 1). Nothing is repaired."""
    from clusterbench.errors import EnvironmentProblem
    from clusterbench.store.db import check, default_db_path

    path = default_db_path()
    report = check(path)
    for problem in report.problems:
        console.print(f"[red]problem[/]: {escape(problem)}", highlight=False)
    if report.problems:
        raise EnvironmentProblem(f"{len(report.problems)} problem(s) found in the database", where=str(path),
                                 hint=report.hint)
    console.print(f"ok: {escape(str(path))}: " + escape(", ".join(report.notes)), highlight=False)


@db_app.command("backup")
def db_backup(
    dest: Annotated[Path, typer.Argument(help="New file for the copy.", show_default=False)],
    force: Annotated[bool, typer.Option("--force", help="Replace DEST if it exists.")] = False,
) -> None:
    """A consistent copy of the database into a new file, while other processes may keep writing
    (SQLite's online backup). An existing DEST is replaced only with --force."""
    with open_store(read_only=True) as store:
        size = store.backup(dest, force)
        console.print(f"backed up {escape(str(store.path))} to {escape(str(dest))} ({size} bytes, checked)",
                      highlight=False)


@db_app.command("migrate")
def db_migrate() -> None:
    """Upgrade the database to this clusterbench's schema version (every write command does it too)."""
    from clusterbench.errors import UserInputError
    from clusterbench.store.db import SCHEMA_VERSION, default_db_path, inspect_file

    if inspect_file(default_db_path()) is None:
        raise UserInputError("no database here: nothing to upgrade", where=str(default_db_path()))
    with open_store() as store:
        before = store.migrated_from
    if before is None:
        console.print(f"{escape(str(store.path))}: schema version {SCHEMA_VERSION}, nothing to do", highlight=False)
    else:
        console.print(f"{escape(str(store.path))}: schema version {before} -> {SCHEMA_VERSION}", highlight=False)
