"""Memory section: STREAM rates against the number of threads (or threads x tasks), one line per
pinning strategy (places, bind_to, pinning, a tag: whatever tells the runs apart), the JSC
study's figure.

x is the threads (or threads x ranks, the processes and threads that share the memory system),
y the rate in GB/s (10^9 byte/s, STREAM's own MB/s divided by 1000). Triad is drawn; the table
gives all four kernels. What it draws is what the benchmarks declare (bench/declare.py): every
metric with a `memory` use, its role the kernel (the table's columns, in declared order); the
kernel whose use names a figure (its `key`, title and axis) is drawn. The
shape (x, lines, panels) is inferred once from what varies (analysis/shape.py) and used for
every kernel, so the table's rows are the figure's points.
"""

from __future__ import annotations

import pandas as pd

from clusterbench.analysis import shape
from clusterbench.analysis.dataset import Dataset
from clusterbench.bench import registry
from clusterbench.report import repeats
from clusterbench.report.figures import axis_label, shaped_figure
from clusterbench.report.model import Section, Table

UNIT = "GB/s"
SERIES = ("pinning", "places", "proc_bind", "bind", "bind_to", "map_by", "rank_by", "system", "cluster", "host_group",
          *shape.DEFAULT_SERIES)  # a batch cluster's host groups are machines of their own: never one line
MACHINE_KEYS = ("cluster", "host_group")
FAMILY = shape.Family(x=("workers", "threads", "ranks"), series=tuple(dict.fromkeys(SERIES)))


def metrics() -> set[str]:
    return {d.spec.name for d in registry.drawn("memory")}


def workers(run: dict) -> int:
    p = run["params"]
    return int(p.get("threads") or 1) * int(p.get("ranks") or 1)


def section(data: Dataset, options) -> Section | None:
    drawn = registry.drawn("memory")
    kernels = list(dict.fromkeys(d.use.role for d in drawn))
    per_kernel: dict[str, list[pd.DataFrame]] = {k: [] for k in kernels}
    names: dict[str, list[str]] = {k: [] for k in kernels}
    figure_use = next((d.use for d in drawn if d.use.key), None)  # the one kernel drawn as a figure
    drawn_kernel = figure_use.role if figure_use else None
    for d in drawn:
        rows = data.of(d.spec.name)
        rows = rows[rows["benchmark"] == d.benchmark]
        names[d.use.role].append(d.spec.name)
        if len(rows):
            shown = d.spec.shown(d.use, UNIT)
            per_kernel[d.use.role].append(repeats.with_identity(
                shape.frame(data, rows, shown(rows["value"].astype(float)), label_keys=d.spec.labels), data,
                MACHINE_KEYS, shape.RUN))
    values = {k: pd.concat(v, ignore_index=True) for k, v in per_kernel.items() if v}
    if not values:
        return None
    first = drawn_kernel if drawn_kernel in values else next(iter(values))
    choice = next((options.choice_for(names[k]) for k in values if options.choice_for(names[k])), None)
    found = shape.infer(values[first], FAMILY, choice)
    drawings = {k: shape.draw(_with(v, values[first]), found, default_label="STREAM") for k, v in values.items()}
    out = Section("memory", "Memory bandwidth (STREAM)", [
        "Best-of-iterations rate as STREAM reports it, in GB/s = 10^9 byte/s. Points are means over "
        "repeats; bars span the minimum and maximum."])
    if figure_use and drawn_kernel in drawings:
        what = axis_label(found.x)
        figure, table = shaped_figure(figure_use.key, choice.title if choice and choice.title else
                                      f"{figure_use.title} against {what}", what, figure_use.axis,
                                      drawings[drawn_kernel], x_integer=True)
        out.figures += [figure] if figure else []
        out.tables += [table] if table else []
    out.tables.insert(0, _table(drawings, values, data, kernels, axis_label(found.x)))
    return out


def _with(values: pd.DataFrame, like: pd.DataFrame) -> pd.DataFrame:
    """`values` with every key column `like` has (missing ones empty): one shape fits all kernels."""
    missing = [c for c in like.columns if c not in values.columns]
    return values.assign(**{c: None for c in missing}) if missing else values


def _table(drawings: dict[str, shape.Drawing], values: dict[str, pd.DataFrame], data: Dataset, kernels: list[str],
           x_label: str) -> Table:
    """One row per line and x value: every kernel's mean (min-max), n and CV over counted repeats, the
    flagged runs apart (never averaged), and the runs behind them."""
    index: dict[tuple, dict] = {}
    per: dict[str, dict] = {}
    for kernel, drawing in drawings.items():
        frame, x = values[kernel], drawing.shape.x
        ok = repeats.counted_mask(data, frame[shape.RUN])
        if x is not None:
            kept = frame[ok]
            per[kernel] = repeats.values_by_x(kept[x], kept[shape.RUN], kept[shape.VALUE])  # x -> run -> values
        for panel in drawing.panels:
            for s in panel.series:
                label = f"{panel.title}, {s.label}" if panel.title else s.label
                for p in s.points:
                    index.setdefault((label, p.x), {})[kernel] = p
    table = Table("memory-stream-table", "STREAM rates (GB/s): mean (min-max), n, CV over counted repeats",
                  ["placement", x_label, *kernels, "spread", "flagged runs (not averaged)", "runs"], [],
                  note=repeats.note())
    for (label, x), cells in sorted(index.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        runs_here = sorted({r for p in cells.values() for r in p.runs})
        stats = {k: repeats.describe(repeats.point_values(per.get(k, {}).get(p.x, {}), p.runs))
                 for k, p in cells.items()}
        high = [k for k, st in stats.items() if st["high"]]
        flagged = [r for r in runs_here if not repeats.counted(data, r)]
        table.rows.append([label, shape.plain(x), *[repeats.cell_text(stats[k]) if k in stats else None
                                                    for k in kernels],
                           f"{repeats.HIGH_CV} ({', '.join(high)})" if high else "",
                           repeats.runs_flags(data, flagged), runs_here])
    return table
