"""What `clusterbench results` prints: the runs table, one run in full, the exports and the statistics.

Typer-free (rich only), so that cli/plain.py can answer a plain listing without importing typer
and pydantic; cli/results_cmd.py declares the command's options for typer and calls `show`.
"""


import csv
import json
import math
import sys
from dataclasses import dataclass
from enum import Enum

from rich.markup import escape
from rich.table import Table

from clusterbench.cli.shared import console, open_store
from clusterbench.errors import UserInputError

TABLE_LIMIT = 50  # runs the table shows unless --limit says otherwise; an export has every run selected
GAP = 2  # spaces between two columns of a listing
CELL_CHARS = 60  # a reason or note in a table cell: longer ones are cut ('...'), `results RUN` shows them whole


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


def show(run_id: str | None = None, benchmark: str | None = None, campaign: str | None = None,
         status: str | None = None, metric: str | None = None, select: list[str] | None = None,
         limit: int | None = None, fmt: Format = Format.table, group_by: str | None = None,
         stat: str | None = None, cv_warn: float = 0.05, wide: bool = False) -> None:
    """`clusterbench results` with its options parsed (the defaults are the command's). `wide`: every
    column, however wide the terminal (else the least useful columns that do not fit are left out)."""
    from clusterbench.analysis.listing import list_runs
    from clusterbench.cli.shared import modules_loaded

    modules_loaded()
    with open_store(read_only=True) as store:
        if run_id:
            _show_run(store, run_id, fmt)
            return
        selection = None
        if select:  # selection terms import analysis.identity (pandas): a plain listing does not need them
            from clusterbench.analysis.select import parse_selection

            selection = parse_selection(select, store)
        if group_by is not None or stat is not None:
            _print_stats(store, campaign, benchmark, metric, group_by, stat, cv_warn, fmt, selection, wide)
            return
        if limit is None:
            limit = TABLE_LIMIT if fmt == Format.table else 0
        if limit < 0:
            raise UserInputError(f"--limit {limit} is negative", hint="give a number of runs, or 0 for all")
        listing = list_runs(store, benchmark, campaign, status, metric, limit or None, selection,
                            with_records=fmt != Format.table)
        if fmt == Format.json:
            print(json.dumps(listing.records, indent=2))
        elif fmt == Format.csv:
            _write_csv(listing.records)
        else:
            _print_runs(store, listing.runs, wide, listing.empty_note)
            if listing.shown_note:
                console.print(listing.shown_note, highlight=False)


def _print_stats(store, campaign, benchmark, metric, group_by, stat, cv_warn, fmt, selection=None,
                 wide: bool = False) -> None:
    from clusterbench.analysis.stats import config_columns, parse_stats, stats_table
    from clusterbench.report import csvsafe

    stats = parse_stats(stat)
    keys = [g.strip() for g in group_by.split(",") if g.strip()] if group_by else None
    if selection is not None:
        table = _selected_stats(store, selection, stats, campaign, benchmark, metric, keys, cv_warn)
    else:
        table = stats_table(store, stats, campaign, benchmark, metric, keys, cv_warn)
    if fmt in (Format.json, Format.csv):  # an unknown key is null for a program ('not stated' is for people)
        from clusterbench.analysis.identity import UNKNOWN_TEXT

        keys = config_columns(table)
        table[keys] = table[keys].astype(object).where(table[keys] != UNKNOWN_TEXT, None)
        if fmt == Format.json:
            print(table.to_json(orient="records", indent=2))
        else:
            csvsafe.frame(table).to_csv(sys.stdout, index=False)
        return
    records = table.to_dict("records")
    for rec in records:  # pandas fills a missing warning with NaN (a float), not None
        rec["warning"] = rec["warning"] if isinstance(rec["warning"], str) else None
    _in_readable_units(records)
    config = config_columns(table)
    constant = [c for c in ("benchmark", "metric", "unit") if len({rec[c] for rec in records}) <= 1]
    note = ", ".join(f"{c} {records[0][c]}" for c in constant if records and records[0][c])
    shown = [c for c in config if c not in constant]
    columns = [Column(c, [escape(_cell(rec[c], c)) for rec in records], wrap=10) for c in shown]
    ranked = [c for c in STAT_RANKS if c in stats]
    columns += [Column(c, [escape(_cell(rec[c], c)) for rec in records], rank=1 + ranked.index(c), justify="right")
                for c in stats]
    columns.append(Column("n_invalid", [escape(_cell(rec["n_invalid"], "n_invalid")) for rec in records],
                          rank=len(ranked) + 1, justify="right"))
    out, dropped, _ = fitted_table(columns, console.width, wide, [
        "yellow" if rec["warning"] else None for rec in records],
        title=f"Statistics over valid repeats{f' - campaign {campaign}' if campaign else ''}"
              f"{f' ({note})' if note else ''}")
    if dropped:
        out.caption = f"--stat NAMES or --wide shows what is left out here: {', '.join(dropped)}"
    print_table(out, wide)
    for rec in records:
        if rec["warning"]:
            label = " ".join(f"{c}={rec[c]}" for c in shown if c not in ("benchmark", "unit"))
            console.print(f"[yellow]warning[/]: {escape(label)}: {escape(rec['warning'])}")


SCALED_STATS = ("mean", "std", "min", "max", "median", "ci95")  # the statistics in the metric's unit
STAT_RANKS = ("n", "mean", "cv", "median", "std", "min", "max", "ci95")  # kept first at 80 columns


def _in_readable_units(records: list[dict]) -> None:
    """Each metric's statistics in a unit they read well in, the same for every row of that unit (so the
    rows compare at a glance): the unit its largest mean moves up to (analysis.listing.scaled, MB/s ->
    GB/s), the records changed in place. The unit is chosen from each row's mean (else its median, max or min)."""
    from clusterbench.analysis.listing import scaled

    largest: dict[str, float] = {}
    for rec in records:
        typical = next((rec[s] for s in ("mean", "median", "max", "min") if isinstance(rec.get(s), int | float)
                        and math.isfinite(rec[s])), None)
        if typical is not None:
            largest[rec["unit"]] = max(largest.get(rec["unit"], 0.0), abs(typical))
    for unit, size in largest.items():
        value, shown_unit = scaled(size, unit)
        if shown_unit == unit or not value:
            continue
        factor = size / value
        for rec in records:
            if rec["unit"] != unit:
                continue
            rec["unit"] = shown_unit
            for stat in SCALED_STATS:
                if isinstance(rec.get(stat), int | float):
                    rec[stat] = rec[stat] / factor


def _selected_stats(store, selection, stats, campaign, benchmark, metric, keys, cv_warn):
    """stats_table over the runs a --select holds for: the same table, fewer samples."""
    from clusterbench.analysis.listing import no_match
    from clusterbench.analysis.select import no_match_error, select_rows
    from clusterbench.analysis.stats import config_columns, metric_frame, summarise

    frame = metric_frame(store, campaign, benchmark, metric)
    if frame.empty:
        if not store.run_count():
            raise UserInputError(f"no runs stored yet in {store.path}", hint="store some with `clusterbench run`")
        raise no_match(store, campaign=campaign, benchmark=benchmark, metric=metric)
    ids = {row["id"] for row in select_rows(store, selection)}
    if not ids:
        raise no_match_error(store, selection)
    frame = frame[frame["run_id"].isin(ids)]
    if frame.empty:
        raise UserInputError(f"the runs {selection.describe()!r} selects have no value of the metrics asked for",
                             hint="drop --metric/--benchmark/--campaign, or list them: clusterbench results "
                                  f"--select {selection.describe().replace(' ', ',')}")
    table = summarise(frame, keys, cv_warn)
    extra = ["ci95_low", "ci95_high"] if "ci95" in stats else []
    return table[config_columns(table) + stats + extra + ["n_invalid", "warning"]]


def _cell(value, column: str) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if column == "cv":
        return f"{value:.1%}"
    if isinstance(value, float):
        from clusterbench.analysis.listing import significant

        if column not in STAT_RANKS and value.is_integer() and abs(value) < 1e15:
            return str(int(value))  # a parameter (n=100000.0): its value, not 3 digits of it
        if column in STAT_RANKS:
            return significant(value)
        shown = significant(value, 4)  # a parameter's value: 0.5, not 0.5000
        return shown.rstrip("0").rstrip(".") if "." in shown else shown
    return str(value)


def _write_csv(records: list[dict]) -> None:
    """Export records (analysis.listing) as CSV: dict cells as sorted JSON, text made formula-safe."""
    from clusterbench.report import csvsafe

    cols = ["run_id", "benchmark", "campaign", "status", "run_valid", "started_at", "params", "metric",
            "value", "unit", "labels", "metric_valid", "flags", "excluded", "notes"]
    w = csv.DictWriter(sys.stdout, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for rec in records:  # notes are free text (commas and all): a JSON list, not 'a, b'
        w.writerow({k: csvsafe.cell(json.dumps(v) if k == "notes" else _csv_value(v)) for k, v in rec.items()})


def _csv_value(value):
    """A CSV cell's value: dicts as sorted JSON, flag lists as 'a, b', numbers as plain Python numbers
    (a numpy scalar would otherwise print as np.float64(...) inside a container)."""
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=_plain)
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return _plain(value) if hasattr(value, "item") else value


def _plain(value):
    """A numpy scalar as the Python number it holds; anything else as text."""
    return value.item() if hasattr(value, "item") else str(value)


@dataclass(eq=False)
class Column:
    """One column a listing may show. `rank` 0: always shown (the id, what a command is given); else the
    lower the rank the longer it is kept on a narrow terminal. `wrap` 0: never wrapped (shown whole or
    left out); else the narrowest it may be wrapped to, and `most` the widest it grows to (0: its longest
    cell). A column whose every cell is blank ('' or '-') is not shown at all."""

    header: str
    cells: list[str]  # Rich markup, one per row
    rank: int = 0
    wrap: int = 0
    most: int = 0
    justify: str = "left"
    width: int = 0  # as fitted


def cell_width(markup: str) -> int:
    """The widest line of a cell, in terminal columns."""
    from rich.text import Text

    return max((line.cell_len for line in Text.from_markup(markup).split("\n")), default=0)


def _blank(markup: str) -> bool:
    from rich.text import Text

    return Text.from_markup(markup).plain.strip() in ("", "-")


def fit(columns: list[Column], width: int, wide: bool = False) -> tuple[list[Column], list[Column]]:
    """(the columns shown, in their order, with their widths set; the columns left out) on a terminal
    `width` wide: the rank-0 columns, then the others by rank while they fit at their narrowest, the
    space left given to the wrapping ones, most useful first. `wide`: every column at its full width.
    Why here and not Rich's own shrinking: Rich cuts every column it cannot fit ('20261…'), ids too."""
    present = [c for c in columns if c.rank == 0 or not all(_blank(cell) for cell in c.cells)]
    least = {}
    for c in present:
        natural = max(cell_width(text) for text in [c.header, *c.cells])
        c.width = natural if wide or not c.wrap else min(natural, max(c.most or natural, c.wrap))
        least[c] = c.width if wide or not c.wrap else min(c.width, c.wrap)
    if wide:
        return present, []
    kept = [c for c in present if c.rank == 0]
    used = sum(least[c] for c in kept) + GAP * max(0, len(kept) - 1)
    dropped = []
    for c in sorted((c for c in present if c.rank), key=lambda c: c.rank):
        if used + GAP + least[c] <= width:
            kept.append(c)
            used += GAP + least[c]
        else:
            dropped.append(c)
    spare = width - used
    for c in sorted(kept, key=lambda c: c.rank):  # the space left: to the most useful wrapping columns first
        grow = max(0, min(spare, c.width - least[c]))
        c.width, spare = least[c] + grow, spare - grow
    return [c for c in present if c in kept], dropped


def fitted_table(columns: list[Column], width: int, wide: bool = False, styles: list | None = None,
                 title: str | None = None):
    """(a borderless Rich table of `fit`'s columns, the headers of the columns left out, its width)."""
    shown, dropped = fit(columns, width, wide)
    table = Table(box=None, pad_edge=False, padding=(0, 1), header_style="bold", title=title, title_justify="left",
                  caption_justify="left")
    for c in shown:
        table.add_column(c.header, width=c.width, no_wrap=not c.wrap, overflow="fold", justify=c.justify)
    for i, row in enumerate(zip(*(c.cells for c in shown), strict=True)):
        table.add_row(*row, style=styles[i] if styles else None)
    return table, [c.header for c in dropped], sum(c.width for c in shown) + GAP * max(0, len(shown) - 1)


def print_table(table, wide: bool) -> None:
    """A fitted table; with --wide at its own width, however wide the terminal (a pager or a file
    shows the long lines whole; a terminal wraps them). Rich prints no wider than its console, so a
    wide table goes through a console of its width, on the same file with the same colours."""
    needed = sum(c.width or 0 for c in table.columns) + GAP * max(0, len(table.columns) - 1)
    if not wide or needed <= console.width:
        console.print(table)
        return
    from rich.console import Console

    Console(width=needed, file=console.file, force_terminal=console.is_terminal, color_system=console.color_system,
            no_color=console.no_color).print(table)


def _print_runs(store, rows, wide: bool = False, empty_note: str | None = None) -> None:
    """The runs table, its columns chosen for the terminal's width (`fit`): a run id is never cut (it is
    what `results RUN`, `diff` and `compare run:ID` are given), the least useful columns are left out
    first and the table says which; `--wide` shows them all. Ids too long to leave room for a result
    beside them are printed each on a line of its own, the run's other columns under it (`_print_stacked`)."""
    from clusterbench.analysis.listing import curation, headline, placement, row_flags, significant

    ids = [escape(shown_text(r["id"])) for r in rows]
    verdicts = [placement(r)[0] for r in rows]
    results = [escape(headline(store, r["id"], r["benchmark"])) for r in rows]
    # the flags after the status, less the one that repeats it (a failed run is flagged "failed")
    flags = [_flags_cell([f for f in row_flags(r) if f != r["status"]], *curation(r)) for r in rows]
    statuses = [f"[{'green' if r['status'] == 'ok' else 'red'}]{escape(shown_text(r['status']))}[/]" for r in rows]

    def status_cells(mismatch: bool) -> list[str]:
        """A run's status with its flags after it (the first on its line: what a reader scans for), and the
        placement's alarm when its own column is left out."""
        alarm = "[bold red]placement MISMATCH[/]"
        return [" ".join(filter(None, (s, alarm if mismatch and v == "mismatch" else "", f)))
                for s, v, f in zip(statuses, verdicts, flags, strict=True)]

    placed = Column("placement", ["[bold red]MISMATCH[/]" if v == "mismatch" else escape(v) for v in verdicts], rank=7)
    status = Column("status", status_cells(False), rank=2, wrap=12, most=CELL_CHARS + 12)
    columns = [
        Column("run id", ids),
        Column("benchmark", [escape(shown_text(r["benchmark"])) for r in rows], rank=3),
        status,
        Column("result", results, rank=1),
        Column("params", [escape(_short_params(r["params"])) for r in rows], rank=4, wrap=12, most=40),
        placed,
        Column("duration", [f"{significant(r['duration_s'])} s" if r["duration_s"] is not None else "-"
                            for r in rows], rank=6, justify="right"),
        Column("started (UTC)", [(r["started_at"] or "")[:16].replace("T", " ") for r in rows], rank=5),
    ]
    title = f"Runs in {escape(str(store.path))}"
    width = console.width
    if not rows:
        console.print(title, highlight=False)
        console.print(escape(empty_note) if empty_note else  # a selection that holds nothing: exit 0, said
                      f"no runs stored yet in {escape(str(store.path))}: try `clusterbench run`", highlight=False)
        return
    stacked = not wide and max(map(cell_width, ids)) + GAP + max(map(cell_width, results)) > width
    if stacked or placed not in fit(columns, width, wide)[0]:
        status.cells = status_cells(True)
    if stacked:
        _print_stacked(title, columns)
        return
    table, dropped, _ = fitted_table(columns, width, wide, title=title)
    if dropped:
        table.caption = f"`results RUN` or --wide shows what is left out here: {', '.join(dropped)}"
    print_table(table, wide)


def _print_stacked(title: str, columns: list[Column]) -> None:
    """The runs table for ids longer than the terminal leaves room for: each id whole on a line of its own
    (soft-wrapped by the terminal when it is wider still, so it is copied whole), the run's other columns
    that fit on the lines under it, indented, the most useful first (the result, then the status and flags)."""
    from rich.padding import Padding
    from rich.text import Text

    console.print(title, highlight=False)
    ids, others = columns[0], [c for c in columns[1:] if c.rank and c.rank <= 4]
    present = sorted((c for c in others if not all(_blank(cell) for cell in c.cells)), key=lambda c: c.rank)
    for i, run_id in enumerate(ids.cells):
        console.print(Text.from_markup(run_id), soft_wrap=True, highlight=False)
        details = "  ".join(c.cells[i].replace("\n", "; ") for c in present if not _blank(c.cells[i]))
        if details:
            console.print(Padding(Text.from_markup(details), (0, 0, 0, 2), expand=False), highlight=False)
    left_out = [c.header for c in columns[1:] if c not in others and not all(_blank(cell) for cell in c.cells)]
    if left_out:
        console.print(f"`results RUN` or --wide shows what is left out here: {', '.join(left_out)}", highlight=False)


def _short_params(params_json: str | None) -> str:
    """The parameters a reader tells runs apart by (size, grid, ranks, threads), in one line."""
    try:
        params = json.loads(params_json or "{}")
    except ValueError:
        return ""
    if not isinstance(params, dict):
        return ""
    return shown_text(" ".join(f"{k}={v}" for k, v in params.items() if k in ("n", "nb", "p", "q", "ranks", "threads")))


def _flags_cell(flags: list[str], excluded: str | None, notes: list[str]) -> str:
    """A run's flags for the table, 'excluded (REASON)' with its reason, and how many notes it has
    (the notes themselves: `results RUN`)."""
    parts = [f"excluded ({shown_text(excluded, CELL_CHARS)})" if flag == "excluded" and excluded else flag
             for flag in flags]
    text = f"[yellow]{escape(', '.join(parts))}[/]" if parts else ""
    if notes:
        text += ("\n" if text else "") + escape(f"{len(notes)} note{'s' if len(notes) > 1 else ''}: "
                                                 + shown_text(notes[-1], CELL_CHARS))
    return text


def shown_text(text, most: int | None = None) -> str:
    """Stored free text (a reason, a note) as a terminal may show it: control characters as '?'
    (a hostile database cannot move the cursor or recolour the screen), cut to `most` characters.
    Rich markup is escaped by the caller."""
    text = "".join(c if c.isprintable() else "?" for c in str(text))
    return text if most is None or len(text) <= most else text[:most - 3] + "..."


def _show_run(store, run_id: str, fmt: Format) -> None:
    from clusterbench.analysis.listing import (
        activity_lines,
        as_bool,
        blas_lines,
        disturbance_lines,
        migrations,
        placement,
        readable,
        run_details,
        state_lines,
    )

    run = run_details(store, run_id)
    r, data = run.row, run.to_dict()
    if fmt != Format.table:
        print(json.dumps(data, indent=2, default=str))
        return
    status = escape(f"[{r['status']}]")  # not Rich markup: "[ok]" would vanish as an unknown tag
    console.print(f"[bold]{escape(run_id)}[/] {escape(r['benchmark'])} {status} valid={as_bool(r['valid'])}")
    if data["flags"]:
        console.print(f"flags: [yellow]{escape(', '.join(data['flags']))}[/]")
    if r["reason"]:
        console.print(f"reason: {escape(r['reason'])}")
    if data.get("excluded"):
        when = f" (since {str(data['excluded_at'])[:19]} UTC)" if data.get("excluded_at") else ""
        console.print(f"[yellow]excluded[/]: {escape(shown_text(data['excluded']))}{when}; "
                      f"`clusterbench include {escape(run_id)}` counts it again", highlight=False)
    for i, note in enumerate(data["notes"]):
        at = data.get("notes_at", [])[i] if i < len(data.get("notes_at", [])) else None
        console.print(f"note{f' ({str(at)[:19]} UTC)' if at else ''}: {escape(shown_text(note))}", highlight=False)
    verdict, problems = placement(r)
    if verdict != "-":
        style = "bold red" if verdict == "mismatch" else "green" if verdict == "match" else "yellow"
        moved = migrations(r)
        moves = f" ({moved} thread migrations between CPUs)" if moved is not None else ""
        console.print(f"placement: [{style}]{escape(verdict)}[/]{moves}"
                      + "".join(f"\n  {escape(p)}" for p in problems))
    for line in disturbance_lines(r):
        flagged = line.startswith("DISTURBED")
        console.print(escape(line if flagged else f"disturbance: {line}"), style="bold red" if flagged else None)
    for line in blas_lines(r):
        console.print(f"blas: {escape(line)}", style="bold red" if line.startswith("FALLBACK") else None)
    for line in state_lines(r):
        console.print(f"state: {escape(line)}")
    for line in activity_lines(r):
        style = "bold red" if line.startswith("THROTTLED") else None
        console.print(f"nodes: {escape(line)}", style=style)
    console.print(f"command: {escape(r['command'] or '')}")
    console.print(f"workdir: {escape(r['workdir'] or '')}")
    ms = run.metrics
    table, _, _ = fitted_table([
        Column("metric", [escape(shown_text(m["name"])) for m in ms]),
        Column("value", [escape(readable(m["value"], shown_text(m["unit"] or ""))) for m in ms], rank=1,
               justify="right"),
        Column("labels", [escape(shown_text(m["labels"])) for m in ms], rank=2, wrap=16),
        Column("valid", [str(bool(m["valid"])) for m in ms], rank=3)], console.width)
    console.print(table)
    for a in data["artifacts"]:
        console.print(f"output: {escape(a['name'])} ({a['size']} bytes, sha256 {a['sha256'][:12]}) {escape(a['path'])}")
