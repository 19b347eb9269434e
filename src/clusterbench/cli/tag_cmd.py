"""`clusterbench tag` and `untag`: label stored runs after the fact.

An imported folder often says only later what it was ("these were the InfiniBand runs"), and a
campaign's runs may deserve a label nobody thought of before. A tag added here is a tag like
one given with `--tag` at import: selections, reports, comparisons and `--group-by` see it.
"""


from typing import Annotated

import typer
from rich.markup import escape

from clusterbench.cli.app import app, console, open_store, parse_assignments
from clusterbench.errors import UserInputError

SelectionArg = Annotated[str, typer.Argument(
    help="The runs: ONE argument of comma-separated selection terms, e.g. campaign:nb-sweep,blas=blis or "
         "source:import,tag:system=pi4. See `clusterbench results --help` for the terms.",
    show_default=False)]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Only say how many runs would change.")]


@app.command()
def tag(
    selection: SelectionArg,
    assignments: Annotated[list[str], typer.Argument(
        metavar="KEY=VALUE...", help="Tags to set (a key the run has already gets the new value).",
        show_default=False)],
    dry_run: DryRun = False,
) -> None:
    """Set tags on the stored runs a selection holds: clusterbench tag source:import system=pi4-cluster."""
    for item in assignments:
        key, sep, _value = item.partition("=")
        if not sep or not key.strip():
            raise UserInputError(f"invalid tag {item!r}: not KEY=VALUE",
                                 hint="write each tag as KEY=VALUE, e.g. clusterbench tag source:import system=pi4")
    _change(selection, parse_assignments(assignments), [], dry_run)


@app.command()
def untag(
    selection: SelectionArg,
    keys: Annotated[list[str], typer.Argument(metavar="KEY...", help="Tag keys to remove.", show_default=False)],
    dry_run: DryRun = False,
) -> None:
    """Remove tags from the stored runs a selection holds: clusterbench untag campaign:old system."""
    bad = [k for k in keys if "=" in k]
    if bad:
        raise UserInputError(f"untag takes tag keys, not KEY=VALUE: {bad[0]!r}",
                             hint=f"write the key alone: clusterbench untag SELECTION {bad[0].split('=')[0]}")
    _change(selection, {}, keys, dry_run)


def _change(selection_text: str, add: dict, remove: list[str], dry_run: bool) -> None:
    from clusterbench.analysis.select import no_match_error, parse_selection, select_rows
    from clusterbench.store.curation import check_tag_key, check_tag_value

    for key, value in add.items():  # refused before the database is opened, let alone written
        check_tag_value(check_tag_key(key), value)
    for key in remove:
        check_tag_key(key)
    if not selection_text.strip():
        raise UserInputError("an empty selection would change every stored run",
                             hint="name the runs, e.g. source:import or campaign:NAME (source:import,source:run "
                                  "is every run)")
    with open_store(read_only=True) as store:  # a selection that matches nothing creates or upgrades nothing
        selection = parse_selection(selection_text, store)
        rows = select_rows(store, selection)
        if not rows:
            raise no_match_error(store, selection)
        ids = [row["id"] for row in rows]
        what = _what(add, remove)
        if dry_run:
            changing = _would_change(rows, add, remove)
            console.print(f"would change {changing} of the {len(ids)} selected runs ({escape(what)}); nothing written",
                          highlight=False)
            return
    with open_store() as store:
        changed = store.update_tags(ids, add, remove)
    unchanged = len(ids) - changed
    console.print(f"changed {changed} of the {len(ids)} selected runs ({escape(what)})"
                  + (f"; {unchanged} had them already" if unchanged else ""), highlight=False)


def _what(add: dict, remove: list[str]) -> str:
    parts = [f"{k}={v}" for k, v in add.items()] + [f"-{k}" for k in remove]
    text = " ".join(parts)
    return text if len(text) <= 120 else text[:117] + "..."


def _would_change(rows, add: dict, remove: list[str]) -> int:
    """What update_tags would count, without writing: runs whose tags differ afterwards."""
    import json

    count = 0
    for row in rows:
        try:
            tags = json.loads(row["tags"] or "{}")
        except ValueError:
            tags = {}
        tags = tags if isinstance(tags, dict) else {}
        new = {k: v for k, v in tags.items() if k not in remove} | add
        count += json.dumps(new, sort_keys=True) != json.dumps(tags, sort_keys=True)
    return count
