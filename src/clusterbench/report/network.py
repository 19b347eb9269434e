"""Network section: one-way latency and bandwidth against message size, one line per benchmark,
interconnect and host count (and whatever else varies: a placement, a tag), with min-max bars
over repeats, and the tables at the sizes people quote.

Unlike things are never pooled: shared memory, TCP and InfiniBand, one host and two, are separate
lines (analysis/shape.py decides from what varies; more than 8 lines become small multiples).

What it draws is what the benchmarks declare (bench/declare.py): every metric with a `network`
use, in the role `latency` or `bandwidth`, labelled with the message size (`bytes`). Sources
speak different units: clusterbench's ping-pong and OSU report MB/s (10^6 byte/s), IMB reports
"Mbytes/sec" meaning MiB/s (2^20 byte/s). Everything here is MB/s, converted from the unit each
metric declares (IMB values are multiplied by 1.048576). All three time the one-way trip
(round trip / 2).
"""

from __future__ import annotations

import pandas as pd

from clusterbench.analysis import shape
from clusterbench.analysis.dataset import Dataset
from clusterbench.bench import registry
from clusterbench.report import repeats
from clusterbench.report.figures import axis_label, shaped_figure, size_label
from clusterbench.report.model import Figure, Section, Table

UNITS = {"latency": "us", "bandwidth": "MB/s"}  # what each role is drawn in
# The batch cluster and host group of an imported job report are machines of their own (two host groups of
# one LSF cluster are different hardware): never one line, whatever else they share.
SERIES = ("benchmark", "interconnect", "nodes", "system", "cluster", "host_group", "net_if", "map_by", "bind_to",
          "rank_by", "pinning", *shape.DEFAULT_SERIES)
RANGE_KEYS = ("min_bytes", "max_bytes", "min_log2", "max_log2", "tests", "iter", "iterations", "warmup", "iter_policy")
# the sizes a run swept (the x axis's range) and how long it measured each: how, not what, it measured
FAMILY = shape.Family(x=("bytes",), series=tuple(dict.fromkeys(SERIES)), nuisance=RANGE_KEYS,
                      always=("benchmark", "nodes"))
QUOTED_SIZES = (0, 1024, 8192, 32768)
MACHINE_KEYS = ("cluster", "host_group")  # identity keys every value carries, so that they split lines
FIGURES = {"latency": ("network-latency", "One-way latency against message size", "latency (us)"),
           "bandwidth": ("network-bandwidth", "Bandwidth against message size", "bandwidth (MB/s)")}
TABLES = {"latency": ("network-latency-table", "Latency (us) at quoted sizes"),
          "bandwidth": ("network-bandwidth-table", "Bandwidth (MB/s) at quoted sizes")}


def sources() -> dict[str, list[registry.Drawn]]:
    """benchmark -> its latency and bandwidth metrics, in the order the section draws them."""
    out: dict[str, list[registry.Drawn]] = {}
    for d in registry.drawn("network"):
        if d.use.role in UNITS:
            out.setdefault(d.benchmark, []).append(d)
    return out


def metrics() -> set[str]:
    return {d.spec.name for drawn in sources().values() for d in drawn}


def values_of(data: Dataset) -> tuple[dict[str, pd.DataFrame], dict[str, str], dict[str, list[str]]]:
    """role -> every drawn value in the role's unit (one frame over all sources), benchmark ->
    the title its values are drawn under (IMB PingPong), role -> the metric names drawn."""
    frames: dict[str, list[pd.DataFrame]] = {role: [] for role in UNITS}
    titles: dict[str, str] = {}
    names: dict[str, list[str]] = {role: [] for role in UNITS}
    for bench, drawn in sources().items():
        if not data.runs_of(bench):
            continue
        for d in drawn:
            rows = data.of(d.spec.name)
            rows = rows[rows["benchmark"] == bench]
            names[d.use.role].append(d.spec.name)
            if rows.empty:
                continue
            shown = d.spec.shown(d.use, UNITS[d.use.role])
            values = shape.frame(data, rows, shown(rows["value"].astype(float)), label_keys=d.spec.labels)
            values = repeats.with_identity(values, data, MACHINE_KEYS, shape.RUN)
            for key, wanted in d.use.where:  # IMB: PingPong only (a value without the label is drawn)
                if key in values:
                    values = values[values[key].isna() | (values[key] == wanted)]
            titles[bench] = d.use.title or bench
            frames[d.use.role].append(values)
    joined = {role: pd.concat(parts, ignore_index=True) for role, parts in frames.items() if parts}
    return {role: v for role, v in joined.items() if len(v)}, titles, names


def section(data: Dataset, options) -> Section | None:
    values, titles, names = values_of(data)
    if not values:
        return None
    out = Section("network", "Network", [
        "One-way times (half the round trip). Bandwidth in MB/s = 10^6 byte/s; IMB's MiB/s are converted. "
        "Points are means over repeats, bars the minimum and maximum; 0-byte messages appear in the tables "
        "only (a log axis has no zero). Different interconnects, host counts, benchmarks, batch clusters and "
        "host groups (different hardware) are never averaged together; the tables give n and CV per line."])
    tables = []
    for role in UNITS:
        if role not in values:
            continue
        choice = options.choice_for(names[role]) if options is not None else None
        found = shape.infer(values[role], FAMILY, choice)
        drawing = shape.draw(values[role], found, names={"benchmark": titles})
        slug, title, y_label = FIGURES[role]
        by_size = found.x == "bytes"
        figure, table = shaped_figure(slug, choice.title if choice and choice.title else title,
                                      axis_label(found.x), y_label, drawing, x_log=2 if by_size else None,
                                      y_log=10 if by_size else None, x_bytes=by_size, x_integer=not by_size)
        if figure and by_size:
            _positive(figure)
        out.figures += [figure] if figure else []
        out.tables += [table] if table else []
        if by_size:
            tables.append(_at_sizes(*TABLES[role], drawing, values[role], data))
    out.tables = [t for t in tables if t.rows] + out.tables
    return out


def _positive(figure: Figure) -> None:
    """A log axis has no zero: 0-byte points (and any value <= 0) stay in the tables and the CSV only."""
    for panel in figure.all_panels():
        for s in panel.series:
            s.points = [p for p in s.points if p.x > 0 and p.y > 0]


def _at_sizes(slug: str, title: str, drawing: shape.Drawing, values: pd.DataFrame, data: Dataset) -> Table:
    """Per line: mean (min-max), n and CV over its counted repeats at 0 B, 1 KiB, 8 KiB, 32 KiB and the
    largest size measured; a flagged run (truncated, suspect, disturbed, excluded) is never averaged and
    is named in the last column with its flags."""
    table = Table(slug, title, ["series", *[size_label(s) for s in QUOTED_SIZES], "largest size", "spread",
                                "flagged runs (not averaged)", "runs"], [], note=repeats.note())
    x = drawing.shape.x
    ok = repeats.counted_mask(data, values[shape.RUN])
    counted_rows = values[ok]
    per = repeats.values_by_x(counted_rows[x], counted_rows[shape.RUN], counted_rows[shape.VALUE])  # size, run
    for panel in drawing.panels:
        for s in panel.series:
            runs = sorted({r for p in s.points for r in p.runs})
            flagged = [r for r in runs if not repeats.counted(data, r)]
            stats = {p.x: repeats.describe(repeats.point_values(per.get(p.x, {}), p.runs)) for p in s.points}
            cells = [repeats.cell_text(stats[float(size)]) if float(size) in stats else None for size in QUOTED_SIZES]
            top = next((p.x for p in reversed(s.points) if stats[p.x]["n"]), None)
            high = [size_label(x) for x, st in stats.items() if st["high"]]
            label = f"{panel.title}, {s.label}" if panel.title else s.label
            table.rows.append([label, *cells, f"{repeats.cell_text(stats[top])} at {size_label(top)}"
                               if top is not None else None,
                               f"{repeats.HIGH_CV} at {', '.join(high)}" if high else "",
                               repeats.runs_flags(data, flagged), runs])
    return table
