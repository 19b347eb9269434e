"""`clusterbench exclude`, `include` and `note`: curate what counts, without deleting anything.

A run measured while a node was misconfigured is still a fact worth keeping, but not evidence:
`exclude` keeps it stored and listed, flagged `excluded` with the reason given, and out of
bests, baselines, history and the tuner (analysis.flags.counts). `include` undoes it. A note
says something about a run that its file does not ("rerun after the BIOS update"); the report
and `results RUN` show it. Removing runs for good is `clusterbench db delete`.
"""


from typing import Annotated

import typer
from rich.markup import escape

from clusterbench.cli.app import app, console, open_store
from clusterbench.errors import UserInputError

SelectionArgs = Annotated[list[str], typer.Argument(
    metavar="SELECTION...", help="The runs: selection terms as `report` and `results --select` take them, e.g. "
                                 "run:ID, campaign:nb-sweep, blas=blis,nodes>=4. See `clusterbench results --help`.",
    show_default=False)]
MAX_IDS_SHOWN = 10


def selected_ids(words: list[str], verb: str) -> list[str]:
    """The ids of the stored runs a selection holds, oldest first; an empty selection (every run)
    and one that matches nothing are refused before anything is written or created."""
    from clusterbench.analysis.select import no_match_error, parse_selection, select_rows

    if not any(word.strip(" ,") for word in words):
        raise UserInputError(f"an empty selection would {verb} every stored run",
                             hint="name the runs, e.g. run:ID or campaign:NAME (source:import,source:run is "
                                  "every run)")
    with open_store(read_only=True) as store:
        selection = parse_selection(words, store)
        rows = select_rows(store, selection)
        if not rows:
            raise no_match_error(store, selection)
        return [row["id"] for row in rows]


def ids_text(ids: list[str]) -> str:
    """'a, b, c' or the first MAX_IDS_SHOWN and how many more."""
    shown = ", ".join(ids[:MAX_IDS_SHOWN])
    return shown + (f" and {len(ids) - MAX_IDS_SHOWN} more" if len(ids) > MAX_IDS_SHOWN else "")


def plural(count: int, word: str, words: str | None = None) -> str:
    """'1 run', '3 runs' ('run directory', 'run directories' with `words`)."""
    return f"{count:,} {word if count == 1 else words or word + 's'}"


@app.command()
def exclude(
    selection: SelectionArgs,
    reason: Annotated[str, typer.Option(
        "--reason", help="Why they do not count (shown wherever they appear), e.g. 'node3 ran at 1.2 GHz'.",
        show_default=False)],
) -> None:
    """Keep runs stored but out of bests, baselines, history and the tuner, with a reason.

    They stay listed, flagged `excluded (REASON)`; `clusterbench include` counts them again."""
    from clusterbench.store.curation import MAX_REASON_CHARS, check_curation_text

    reason = check_curation_text(reason, "reason", MAX_REASON_CHARS)  # refused before the database is opened
    ids = selected_ids(selection, "exclude")
    with open_store() as store:
        new, changed = store.exclude_runs(ids, reason)
    same = len(ids) - new - changed
    console.print(f"excluded {plural(new, 'run')} of the {len(ids):,} selected ({escape(ids_text(ids))}): "
                  f"{escape(reason)}", highlight=False)
    if changed:
        console.print(f"{plural(changed, 'run')} excluded before now give this reason instead", highlight=False)
    if same:
        console.print(f"{plural(same, 'run')} had been excluded with this reason already", highlight=False)


@app.command()
def include(selection: SelectionArgs) -> None:
    """Count excluded runs again (undoes `clusterbench exclude`)."""
    ids = selected_ids(selection, "include")
    with open_store() as store:
        count = store.include_runs(ids)
    rest = len(ids) - count
    console.print(f"counted again: {plural(count, 'run')} of the {len(ids):,} selected"
                  + (f"; {plural(rest, 'run')} had not been excluded" if rest else ""), highlight=False)


@app.command()
def note(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="The run's id (see `clusterbench results`).",
                                          show_default=False)],
    text: Annotated[list[str], typer.Argument(metavar="TEXT...", help="The note (words are joined by a blank).",
                                              show_default=False)],
) -> None:
    """Add a note to a stored run: `results RUN` and the report show it."""
    from clusterbench.store.curation import MAX_NOTE_CHARS, check_curation_text

    words = " ".join(text)
    words = check_curation_text(words, "note", MAX_NOTE_CHARS)
    with open_store(read_only=True) as store:  # an unknown run creates or upgrades nothing
        if store.run(run_id) is None:
            raise UserInputError(f"no run with id {run_id!r}", where=str(store.path),
                                 hint="list run ids with `clusterbench results`")
    with open_store() as store:
        count = store.add_note(run_id, words)
    console.print(f"noted on run {escape(run_id)} ({plural(count, 'note')}): {escape(words)}", highlight=False)
