"""What `clusterbench results` prints: the runs table, one run in full, the exports and the statistics.

Typer-free (rich only), so that cli/plain.py can answer a plain listing without importing typer
and pydantic; cli/results_cmd.py declares the command's options for typer and calls `show`.
"""


import csv
import json
import sys
from enum import Enum

from rich.markup import escape
from rich.table import Table

from clusterbench.cli.shared import console, open_store
from clusterbench.errors import UserInputError

TABLE_LIMIT = 50  # runs the table shows unless --limit says otherwise; an export has every run selected
WIDE_COLUMNS = 140  # narrower terminals get the runs table's four-column layout (a run id is never cut)
CELL_CHARS = 60  # a reason or note in a table cell: longer ones are cut ('...'), `results RUN` shows them whole


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


def show(run_id: str | None = None, benchmark: str | None = None, campaign: str | None = None,
         status: str | None = None, metric: str | None = None, select: list[str] | None = None,
         limit: int | None = None, fmt: Format = Format.table, group_by: str | None = None,
         stat: str | None = None, cv_warn: float = 0.05) -> None:
    """`clusterbench results` with its options parsed (the defaults are the command's)."""
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
            _print_stats(store, campaign, benchmark, metric, group_by, stat, cv_warn, fmt, selection)
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
            _print_runs(store, listing.runs)
            if listing.shown_note:
                console.print(listing.shown_note, highlight=False)


def _print_stats(store, campaign, benchmark, metric, group_by, stat, cv_warn, fmt, selection=None) -> None:
    from clusterbench.analysis.stats import STATS, config_columns, parse_stats, stats_table
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
    constant = [c for c in ("benchmark", "metric", "unit") if table[c].nunique() <= 1]
    note = ", ".join(f"{c} {table[c].iloc[0]}" for c in constant if table[c].iloc[0])
    shown = [c for c in config_columns(table) if c not in constant]
    out = Table(title=f"Statistics over valid repeats{f' - campaign {campaign}' if campaign else ''}"
                      f"{f' ({note})' if note else ''}", title_justify="left")
    for col in shown + stats + ["n_invalid"]:
        out.add_column(col, justify="right" if col in STATS or col == "n_invalid" else "left")
    records = table.to_dict("records")
    for rec in records:  # pandas fills a missing warning with NaN (a float), not None
        rec["warning"] = rec["warning"] if isinstance(rec["warning"], str) else None
    for rec in records:
        cells = [escape(_cell(rec[c], c)) for c in shown + stats + ["n_invalid"]]
        out.add_row(*cells, style="yellow" if rec["warning"] else None)
    console.print(out)
    for rec in records:
        if rec["warning"]:
            label = " ".join(f"{c}={rec[c]}" for c in shown if c not in ("benchmark", "unit"))
            console.print(f"[yellow]warning[/]: {escape(label)}: {escape(rec['warning'])}")


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
        return f"{value:.4g}"
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


def _print_runs(store, rows) -> None:
    """The runs table. A run id is never cut: on a terminal narrower than WIDE_COLUMNS (80 columns, or a
    pipe) the table keeps four columns (id, what ran, headline, flags) and says where the rest is."""
    from clusterbench.analysis.listing import curation, headline, placement, row_flags

    wide = console.width >= WIDE_COLUMNS
    table = Table(title=f"Runs in {escape(str(store.path))}", title_justify="left")
    id_width = max((len(r["id"]) for r in rows), default=6)
    table.add_column("run id", no_wrap=True, min_width=id_width)
    columns = ("benchmark", "status", "params", "headline", "placement", "flags", "duration", "started (UTC)")
    for col in columns if wide else ("run", "headline", "flags"):
        table.add_column(col, overflow="fold")
    for r in rows:
        params = json.loads(r["params"])
        short = " ".join(f"{k}={v}" for k, v in params.items() if k in ("n", "nb", "p", "q", "ranks", "threads"))
        status = f"[{'green' if r['status'] == 'ok' else 'red'}]{r['status']}[/]"
        verdict = placement(r)[0]
        shown = "[bold red]MISMATCH[/]" if verdict == "mismatch" else escape(verdict)
        flags = _flags_cell(row_flags(r), *curation(r))
        value = escape(headline(store, r["id"], r["benchmark"]))
        if wide:
            table.add_row(r["id"], r["benchmark"], status, escape(short), value, shown, flags,
                          f"{r['duration_s']:.1f} s" if r["duration_s"] is not None else "-",
                          (r["started_at"] or "")[:19])
        else:
            if verdict == "mismatch":
                flags = "\n".join(filter(None, ("[bold red]placement MISMATCH[/]", flags)))
            table.add_row(r["id"], f"{escape(r['benchmark'])} {status}\n{escape(short)}".rstrip(), value, flags)
    if not wide and rows:
        table.caption = (f"{console.width} columns: placement, duration and start in `results RUN`, or with "
                         f"{WIDE_COLUMNS}+ columns (COLUMNS={WIDE_COLUMNS})")
        table.caption_justify = "left"
    console.print(table)
    if not rows:
        console.print(f"no runs stored yet in {escape(str(store.path))}: try `clusterbench run`")


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
    table = Table("metric", "value", "unit", "labels", "valid")
    for m in run.metrics:
        table.add_row(m["name"], f"{m['value']:.6g}", m["unit"], escape(m["labels"]), str(bool(m["valid"])))
    console.print(table)
    for a in data["artifacts"]:
        console.print(f"output: {escape(a['name'])} ({a['size']} bytes, sha256 {a['sha256'][:12]}) {escape(a['path'])}")
