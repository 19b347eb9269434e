"""`clusterbench db check|backup|migrate|delete`: look after the results database itself."""


from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from clusterbench.cli.app import app, console, open_store

db_app = typer.Typer(help="The results database: check its integrity, back it up, upgrade its schema, delete runs.",
                     no_args_is_help=True)
app.add_typer(db_app, name="db")


@db_app.command("check")
def db_check() -> None:
    """Integrity (SQLite's integrity_check), foreign keys and schema version, read-only: prints ok
    or each problem (exit 1). Nothing is repaired."""
    from clusterbench.errors import EnvironmentProblem
    from clusterbench.store.db import default_db_path
    from clusterbench.store.doctor import check

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
    from clusterbench.store.db import default_db_path
    from clusterbench.store.opening import inspect_file
    from clusterbench.store.schema import SCHEMA_VERSION

    if inspect_file(default_db_path()) is None:
        raise UserInputError("no database here: nothing to upgrade", where=str(default_db_path()))
    with open_store() as store:
        before = store.migrated_from
    if before is None:
        console.print(f"{escape(str(store.path))}: schema version {SCHEMA_VERSION}, nothing to do", highlight=False)
    else:
        console.print(f"{escape(str(store.path))}: schema version {before} -> {SCHEMA_VERSION}", highlight=False)


@db_app.command("delete")
def db_delete(
    selection: Annotated[list[str], typer.Argument(
        metavar="SELECTION...", help="The runs: selection terms as `report` and `results --select` take them, "
                                     "e.g. run:ID or campaign:old-tests.", show_default=False)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking.")] = False,
) -> None:
    """Remove runs for good: their results, stored outputs, notes and their run directories under
    the store's runs folder (an imported file's own folder is never touched). Asks first, unless
    --yes. To keep a run but not count it, use `clusterbench exclude`."""
    from collections import Counter

    from clusterbench.cli.curate_cmd import ids_text, plural, selected_ids

    ids = selected_ids(selection, "delete")
    with open_store(read_only=True) as store:
        rows = store.runs_by_id(ids)
        kinds = Counter(row["benchmark"] for row in rows.values())
        where = store.path
    what = ", ".join(f"{count} {name}" for name, count in kinds.most_common(8))
    console.print(f"{plural(len(ids), 'run')} selected ({escape(what)}): {escape(ids_text(ids))}", highlight=False)
    if not yes:
        try:
            agreed = typer.confirm(f"Delete them from {where} with their files? This cannot be undone", default=False)
        except (typer.Abort, EOFError):  # no answer (end of input): no
            console.print()
            agreed = False
        if not agreed:
            console.print("nothing deleted (answer y, or add --yes)", highlight=False)
            raise typer.Exit(1)
    with open_store() as store:
        done = store.delete_runs(ids)
    console.print(
        f"deleted {plural(done.runs, 'run')}: {plural(done.metrics, 'metric value')}, "
        f"{plural(done.artifacts, 'stored output')} ({plural(done.blobs, 'stored file content')} no other run "
        f"shared, freed), {plural(done.notes, 'note')}, {plural(done.excluded, 'exclusion')}", highlight=False)
    size = f" ({done.dir_bytes / 2**20:.1f} MiB)" if done.dir_bytes else ""
    console.print(f"removed {plural(len(done.dirs), 'run directory', 'run directories')}{size}"
                  + (f" under {escape(str(store.runs_dir))}" if done.dirs else ""), highlight=False)
    for kept in list(dict.fromkeys(done.kept_dirs))[:10]:
        why = "" if kept.endswith(")") else ": not a run directory of this store (e.g. an imported file's folder)"
        console.print(f"left {escape(kept)} as it is{why}", highlight=False)
