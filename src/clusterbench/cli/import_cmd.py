"""`clusterbench import PATH...`: old output files become stored, queryable runs.

Each file is imported in its own transaction. A bad file (unreadable, binary, empty, a number
its parser cannot read, ...) is skipped and named with its reason; its neighbours are stored.
Exit 0 when every file is fine, or when some were skipped but at least one file's results are
in the store (a warning names the skipped ones); exit 2 when no file could be imported and at
least one was skipped (or with `--strict`, when any file was skipped); exit 1 when the database
fails. Outputs whose names do not fit `--name-pattern` are counted and named in the summary; with
`--strict` they are refused (exit 2) before anything is stored. Importing the same files again
with another pattern or other tags updates the results stored before and says how many changed.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from clusterbench.cli.app import app, console, err_console, open_store, parse_assignments


@app.command("import")
def import_outputs(
    paths: Annotated[list[str], typer.Argument(help="Files, folders (searched recursively) or globs.")],
    tag: Annotated[list[str] | None, typer.Option(
        "--tag", help="Tag every imported run: --tag system=pi4-cluster (repeatable).")] = None,
    name_pattern: Annotated[str | None, typer.Option(
        help="Read fields from file names: 'HPL.out.{nodes}_node_{n}_{nb}_{grids}.{blas}'; a type may be "
             "given as {field:type} (int, float, str, grid, grids, blas, interconnect).")] = None,
    campaign: Annotated[str | None, typer.Option(help="Group the imported runs under this campaign name.")] = None,
    rpeak_node: Annotated[float | None, typer.Option(
        "--rpeak-node", help="Rpeak of one node of the system the files come from (Gflop/s): an HPL or HPCC "
                             "result above 10x Rpeak x nodes is stored as invalid.")] = None,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Exit 2 if any file was skipped (the good ones are stored all the same), or if an "
                         "output's name does not fit --name-pattern (then nothing is stored).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the totals and the skipped files.")] = False,
) -> None:
    """Recognise HPL, HPCC, HPCG, IMB, OSU and STREAM outputs by content and store each result.

    Importing the same files again stores nothing new (a content hash identifies each result) but
    corrects what the import adds: with another --name-pattern, the fields read from the names; with
    --tag, the tags ("retagged"); and the validity that depends on them. The summary says how many
    stored results changed.
    """
    from clusterbench.bench.metrics import is_finite
    from clusterbench.errors import UserInputError
    from clusterbench.store.importer import MAX_NAMES_LISTED, bounded_list, expand_paths, import_files

    if rpeak_node is not None and not (is_finite(rpeak_node) and rpeak_node > 0):
        raise UserInputError(f"--rpeak-node must be a positive number of Gflop/s, got {rpeak_node:g}")
    tags = parse_assignments(tag or [], "--tag", "system=pi4-cluster")
    files = expand_paths(paths)
    with open_store() as store, Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(),
                                         console=console, transient=True,
                                         disable=quiet or as_json) as progress:
        task = progress.add_task("import", total=len(files))
        report = import_files(store, files, tags, name_pattern, campaign,
                              on_file=lambda rep: progress.advance(task), rpeak_node_gflops=rpeak_node,
                              refuse_name_mismatches=strict)
    skipped = report.skipped
    mismatched = report.name_mismatches
    updated, duplicates = report.total("updated"), report.total("duplicates")
    if as_json:
        print(json.dumps({
            "database": str(store.path), "files": len(report.files), "stored": report.total("stored"),
            "already_stored": duplicates, "retagged": report.total("retagged"),
            "updated": updated, "unchanged": duplicates - updated, "changed": report.changed(),
            "name_mismatches": len(mismatched), "name_mismatch_files": mismatched[:MAX_NAMES_LISTED],
            "invalid": report.total("invalid"),
            "files_imported": report.imported,
            "skipped": [{"file": f.path, "reason": f.skipped} for f in skipped],
            "ignored": [{"file": f.path, "reason": f.note} for f in report.files if f.note and not f.skipped],
            "per_file": [f.as_dict() for f in report.files]}, indent=2))
    else:
        if not quiet:
            table = Table(title=f"Imported into {escape(str(store.path))}", title_justify="left")
            columns = ("file", "recognised as", "stored", "already stored", *(("retagged",) if tags else ()),
                       "invalid", "note")
            for col in columns:
                table.add_column(col)
            for f in report.files:
                note = f"skipped: {f.skipped}" if f.skipped else (f.note or "; ".join(
                    (["name does not match --name-pattern"] if f.name_mismatch else []) + f.invalid_reasons[:2]))
                retagged = (str(f.retagged),) if tags else ()
                table.add_row(escape(_short(f.path)), f.kind or "-", str(f.stored), str(f.duplicates), *retagged,
                              str(f.invalid), escape(note), style="yellow" if f.skipped else None)
            console.print(table)
        retagged = f" ({report.total('retagged')} retagged)" if tags and duplicates else ""
        console.print(f"{report.total('stored')} result(s) stored, {duplicates} already stored"
                      f"{retagged}, {report.total('invalid')} invalid, from {len(report.files)} file(s)"
                      + (f"; {len(skipped)} file(s) skipped" if skipped else ""), soft_wrap=True)
        if duplicates:
            console.print(_updated_line(updated, duplicates, report.changed()), soft_wrap=True, highlight=False)
        if mismatched:
            console.print(f"[yellow]{len(mismatched)} output file(s) do not match --name-pattern[/] "
                          f"{escape(repr(name_pattern))}: nothing was read from their names: "
                          f"{escape(bounded_list(mismatched))}", soft_wrap=True, highlight=False)
    if skipped:
        err_console.print(f"[yellow]warning:[/] {len(skipped)} file(s) skipped, nothing of them stored:",
                          soft_wrap=True, highlight=False)
        for f in skipped:
            err_console.print(f"  skipped {escape(f.path)}: {escape(f.skipped or '')}", soft_wrap=True,
                              highlight=False)
        if report.imported == 0:
            raise UserInputError(f"no file could be imported: {len(skipped)} of {len(report.files)} file(s) "
                                 "skipped, each named above with its reason")
        if strict:
            raise UserInputError(f"--strict: {len(skipped)} file(s) skipped (named above); the results of the "
                                 f"other {len(report.files) - len(skipped)} file(s) are stored")


def _updated_line(updated: int, duplicates: int, changed: dict[str, int]) -> str:
    """'12 results updated: fields from names/tags changed (params 12, tags 12); 3 unchanged'."""
    if not updated:
        return f"{duplicates} result(s) stored before: unchanged"
    what = ", ".join(f"{key} {count}" for key, count in sorted(changed.items()))
    return (f"{updated} result(s) updated: fields from names/tags changed ({what}); "
            f"{duplicates - updated} unchanged")


def _short(path: str) -> str:
    parts = path.split("/")
    return "/".join(parts[-2:])
