"""`clusterbench import PATH...`: old output files become stored, queryable runs."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from clusterbench.cli.app import app, console, open_store, parse_assignments


@app.command("import")
def import_outputs(
    paths: Annotated[list[str], typer.Argument(help="Files, folders (searched recursively) or globs.")],
    tag: Annotated[list[str] | None, typer.Option(
        "--tag", help="Tag every imported run: --tag system=pi4-cluster (repeatable).")] = None,
    name_pattern: Annotated[str | None, typer.Option(
        help="Read fields from file names: 'HPL.out.{nodes}_node_{n}_{nb}_{grids}.{blas}'.")] = None,
    campaign: Annotated[str | None, typer.Option(help="Group the imported runs under this campaign name.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the totals.")] = False,
) -> None:
    """Recognise HPL, HPCC, HPCG, IMB, OSU and STREAM outputs by content and store each result.

    Importing the same files again stores nothing new (a content hash identifies each result).
    """
    from clusterbench.store.importer import expand_paths, import_paths

    tags = parse_assignments(tag or [], "--tag", "system=pi4-cluster")
    files = expand_paths(paths)
    with open_store() as store, Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(),
                                         console=console, transient=True, disable=quiet) as progress:
        task = progress.add_task("import", total=len(files))
        report = import_paths(store, [str(f) for f in files], tags, name_pattern, campaign,
                              on_file=lambda rep: progress.advance(task))
    if not quiet:
        table = Table(title=f"Imported into {escape(str(store.path))}", title_justify="left")
        for col in ("file", "recognised as", "stored", "already stored", "invalid", "note"):
            table.add_column(col)
        for f in report.files:
            table.add_row(escape(_short(f.path)), f.kind or "-", str(f.stored), str(f.duplicates), str(f.invalid),
                          escape(f.note or ""))
        console.print(table)
    console.print(f"{report.total('stored')} result(s) stored, {report.total('duplicates')} already stored, "
                  f"{report.total('invalid')} invalid, from {len(report.files)} file(s)")


def _short(path: str) -> str:
    parts = path.split("/")
    return "/".join(parts[-2:])
