"""History section: each benchmark's figure of merit over time, per system and configuration, with
the change points E-Divisive means finds (analysis/history.py, analysis/changepoint.py).

It appears when the selection holds runs of one system and configuration at MIN_DATES or more
different times: a nightly or weekly run of the same benchmark. Each such series is searched for
change points; a figure per series (at most MAX_DRAWN: regressions first, then the series with
change points, then the longest) shows the values against their date, a vertical line where a new
segment starts and each segment's mean as a horizontal line, with the CSV of the drawn values
beside it. The table lists every series analysed, including those not drawn.

Cheap on a large store: only the figure-of-merit metric of each benchmark is read, series with
fewer than MIN_DATES dates are dropped before any search, and the search (O(n^2) per shuffle) has a
budget: series are searched newest first while the sum of their searched values squared stays
within SEARCH_BUDGET (and at most MAX_ANALYSED series); the others are listed as not searched, and
`clusterbench history` searches them all. A figure draws the searched window (the newest
changepoint.MAX_POINTS values).
"""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime

import pandas as pd

from clusterbench.analysis.changepoint import ALPHA, MAX_POINTS
from clusterbench.analysis.dataset import Dataset
from clusterbench.analysis.history import (
    DEFAULT_MIN_CHANGE,
    MIN_POINTS,
    Group,
    MetricChoice,
    change_verdict,
    judge,
    search_cost,
    series,
)
from clusterbench.bench import registry
from clusterbench.bench.declare import FIGURE_OF_MERIT
from clusterbench.report import csvsafe
from clusterbench.report.figures import _STYLE, svg_element
from clusterbench.report.looks import OKABE_ITO
from clusterbench.report.model import Picture, Section, Table

MIN_DATES = 6
MAX_DRAWN = 8
MAX_ANALYSED = 200
SEARCH_BUDGET = 10 * MAX_POINTS**2  # values squared searched in all: ten series of the longest window
MAX_TABLE_ROWS = 1000
CSV_COLUMNS = ("date_utc", "run", "value", "unit", "segment_mean", "new_segment", "p_value")


def headlines() -> dict[str, str]:
    """benchmark -> its figure of merit, whose history the section shows: as each benchmark declares it
    (bench/declare.py `merit`), so that a new benchmark needs no line here. Asked each time: a benchmark may
    be registered while the process runs (bench/registry.py `register`)."""
    return {d.benchmark: d.spec.name for d in registry.drawn(FIGURE_OF_MERIT.section, FIGURE_OF_MERIT.role)}


def metrics() -> set[str]:
    return set(headlines().values())


def section(data: Dataset, _options, store=None) -> Section | None:
    """The section, or None when no series of the selection was measured at MIN_DATES different times."""
    data = _with_headlines(data, store)
    candidates: list[tuple[str, Group]] = []
    heads = headlines()
    for name in sorted(set(heads.values())):
        if (data.metrics["name"] == name).any():
            benchmarks = {b for b, m in heads.items() if m == name}
            candidates += [(name, g) for g in series(data, MetricChoice(name), benchmarks, MIN_DATES)]
    if not candidates:
        return None
    searched = _search(candidates)
    groups = sorted(candidates, key=lambda mg: (not mg[1].regression, not mg[1].changes, not mg[1].judged,
                                                -len(mg[1].values)))
    drawn = groups[:MAX_DRAWN]
    out = Section("history", "History", [
        "Each benchmark's figure of merit over time, per configuration: every identifying key of the runs "
        "(system, batch cluster and host group, nodes, parameters, BLAS...; tags do not split a series), so "
        "runs on different hardware are different series even when one ran after the other. Series measured at "
        f"{MIN_DATES} or more different times are shown. Change points are found by E-Divisive means (Matteson & "
        "James 2014): the split that most separates the distributions on either side, accepted when a "
        f"permutation test (fixed seed) gives p <= {ALPHA:g}, repeated in the new segments; the newest "
        f"{MAX_POINTS} values of a series are searched. Verdicts: regression or improvement (the newest change "
        f"point moves the metric by more than {100 * DEFAULT_MIN_CHANGE:g}%), no change beyond the noise, or too "
        f"few values to judge: below {MIN_POINTS} values no arrangement can reach p <= {ALPHA:g}. Runs that do "
        "not count (failed, invalid, truncated, suspect, disturbed, excluded) are skipped and listed with their "
        "flags. `clusterbench history -m METRIC` gives the same per metric, and exits 1 on a regression with "
        "--fail-on-regression."])
    regressions = [f"{g.label} on {g.system} ({name})" for name, g in groups if g.regression]
    if regressions:
        out.paragraphs.append(f"Series whose newest change is a regression: {', '.join(regressions[:20])}"
                              + (" and more." if len(regressions) > 20 else "."))
    shown = (f"{len(drawn)} of {len(groups)} series drawn (regressions first, then those with change points, "
             "then the longest); the table lists them all.")
    if searched < len(groups):
        shown += (f" {searched} of the {len(groups)} series were searched for change points (those with the "
                  "newest values first, within the report's budget); `clusterbench history` searches them all.")
    out.paragraphs.append(shown)
    for i, (name, group) in enumerate(drawn):
        out.pictures.append(_picture(f"history-{i}", name, group))
    out.tables.append(_table(groups))
    return out


def _search(candidates: list[tuple[str, Group]]) -> int:
    """Search the series for change points, those whose newest value is the most recent first (then
    the longest), while the report's budget lasts; returns how many were searched."""
    order = sorted(candidates, key=lambda mg: (mg[1].values[-1].date, len(mg[1].values)), reverse=True)
    spent = searched = 0
    for _name, group in order:
        cost = search_cost(group)
        if searched >= MAX_ANALYSED or (searched and spent + cost > SEARCH_BUDGET):
            group.note = "not searched: over the report's budget (see `clusterbench history`)"
            continue
        judge(group)
        spent += cost
        searched += 1
    return searched


def _with_headlines(data: Dataset, store) -> Dataset:
    """The dataset with the headline metrics' values: read from the store when the report loaded
    none of them (only the selected runs' values are kept)."""
    names = metrics()
    if store is None or data.metrics["name"].isin(names).any() or not data.runs:
        return data
    records = []
    for row in store.metric_values(names):
        run = data.runs.get(row["run_id"])
        if run is not None:
            records.append({"run_id": row["run_id"], "benchmark": run["benchmark"], "name": row["name"],
                            "value": row["value"], "unit": row["unit"], "labels": _labels(row["labels"]),
                            "valid": bool(row["valid"]) and bool(run["valid"]), "nodes": run.get("node_count", 1),
                            "higher_is_better": bool(row["higher_is_better"])})
    if not records:
        return data
    extra = pd.DataFrame(records, columns=data.metrics.columns)
    return Dataset(data.runs, pd.concat([data.metrics, extra], ignore_index=True), data.systems)


def _labels(text: str | None) -> dict:
    try:
        labels = json.loads(text or "{}")
    except ValueError:  # a store written by something else
        return {}
    return labels if isinstance(labels, dict) else {}


def _table(groups: list[tuple[str, Group]]) -> Table:
    rows = []
    for name, g in groups:
        first = g.values[0].date[:10] if g.values else None
        last = g.values[-1] if g.values else None
        common = [g.system, g.label, name, g.unit, len(g.values), first, last.date[:10] if last else None,
                  last.value if last else None]
        if not g.changes:
            rows.append([[last.run_id] if last else [], *common, None, None, None, None, _skipped(g), g.verdict])
        for c in g.changes:
            rows.append([[c.run_id], *common, c.date[:16].replace("T", " "), f"{c.before:.5g} -> {c.after:.5g}",
                         None if c.change_pct is None else round(c.change_pct, 2), round(c.p_value, 4),
                         _skipped(g), change_verdict(g, c)])
    note = ("runs: the run where the new segment starts (the newest run when there is no change point). "
            "change %: of the segment mean after against before. p: permutation p-value when it was accepted.")
    if len(rows) > MAX_TABLE_ROWS:
        note += f" Only the first {MAX_TABLE_ROWS} of {len(rows)} rows are listed."
        rows = rows[:MAX_TABLE_ROWS]
    return Table("history-table", "Series over time and their change points",
                 ["runs", "system", "series", "metric", "unit", "n", "first", "last", "last value", "change point",
                  "before -> after", "change %", "p", "skipped", "verdict"], rows, note=note)


def _skipped(group: Group) -> str | None:
    """'2: r1 (truncated: ...); r7 (excluded: rerun)': the runs kept out of the series, and why."""
    if not group.skipped:
        return None
    shown = "; ".join(f"{s.run_id} ({s.reason})" for s in group.skipped[:5])
    more = f"; and {len(group.skipped) - 5} more" if len(group.skipped) > 5 else ""
    return f"{len(group.skipped)}: {shown}{more}"


def _picture(slug: str, name: str, group: Group) -> Picture:
    title = f"{name} on {group.system}: {group.label} ({group.verdict})"
    start = _first_drawn(group)
    caption = (f"{len(group.values) - start} valid values of {name} ({group.unit}) by start date (UTC); vertical "
               "lines: change points (between the last run of a segment and the first of the next); horizontal "
               "lines: segment means.")
    caption += f" Verdict: {group.verdict}."
    if not group.judged and group.note:
        caption += f" ({group.note})."
    if start:
        caption += f" The oldest {start} values are not drawn: only the newest {MAX_POINTS} are searched."
    if group.skipped:
        caption += f" Skipped (not counted): {_skipped(group)}."
    if any(v.dated_by != "start" for v in group.values[start:]):
        caption += " Some imported outputs state no start: they are dated by their file's modification time."
    return Picture(slug, title[:300], _svg(slug, title[:300], name, group, start), caption, csv=_csv(group, start))


def _first_drawn(group: Group) -> int:
    """The index of the oldest value drawn: the searched window (the newest MAX_POINTS values)."""
    return max(group.analysed_from, len(group.values) - MAX_POINTS)


def _csv(group: Group, start: int) -> str:
    means = {}
    for a, b, mean in group.segments() if group.judged else ():
        for i in range(a, b):
            means[i] = mean
    starts = {c.index: c for c in group.changes}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for i, v in enumerate(group.values[start:], start):
        c = starts.get(i)
        w.writerow([v.date, csvsafe.cell(v.run_id), repr(v.value), csvsafe.cell(group.unit),
                    repr(means[i]) if i in means else "", 1 if c else 0, repr(c.p_value) if c else ""])
    return buf.getvalue()


def _svg(slug: str, title: str, name: str, group: Group, start: int) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    dates = [datetime.fromisoformat(v.date).replace(tzinfo=None) for v in group.values]
    ys = [v.value for v in group.values]
    with matplotlib.rc_context(_STYLE | {"svg.hashsalt": slug}):
        figure, ax = plt.subplots(figsize=(7.5, 3.8), layout="constrained")
        ax.plot(dates[start:], ys[start:], color=OKABE_ITO[0], marker="o", markersize=3.5, linewidth=0.8,
                label="valid values")
        for a, b, mean in group.segments() if group.judged else ():
            ax.hlines(mean, dates[a], dates[b - 1], colors=OKABE_ITO[1], linewidth=2.2, label="segment mean")
        for c in group.changes:
            at = dates[c.index - 1] + (dates[c.index] - dates[c.index - 1]) / 2
            ax.axvline(at, color=OKABE_ITO[3] if c.worse else OKABE_ITO[2], linestyle="--", linewidth=1.2,
                       label="change point (worse)" if c.worse else "change point")
        locator = mdates.AutoDateLocator(minticks=3, maxticks=8)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        ax.set_xlabel("start date (UTC)")
        ax.set_ylabel(f"{name} ({group.unit})" if group.unit else name)
        ax.set_title(title, fontsize=9.5)
        ax.grid(True, color="#dddddd", linewidth=0.6)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))  # one entry per kind of line
        figure.legend(unique.values(), unique.keys(), loc="outside lower center", ncol=4, frameon=False, fontsize=8)
        return svg_element(figure)
