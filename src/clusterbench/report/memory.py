"""Memory section: STREAM rates against the number of threads or tasks, per placement.

x is threads x ranks (the processes and threads that share the memory system), y the rate
in GB/s (10^9 byte/s, STREAM's own MB/s divided by 1000). Triad is drawn; the table gives
all four kernels. What it draws is what the benchmarks declare (bench/declare.py): every metric
with a `memory` use, its role the kernel (the table's columns, in declared order).
"""

from __future__ import annotations

from clusterbench.analysis.dataset import Dataset, describe, tag_keys, varying
from clusterbench.bench import registry
from clusterbench.report.figures import aggregate, range_text
from clusterbench.report.model import Figure, Section, Table

UNIT = "GB/s"
DRAWN_KERNEL = "triad"  # the one kernel drawn as a figure
PLACEMENT_KEYS = ("node_count", "origin", "bind_to", "map_by", "places")


def metrics() -> set[str]:
    return {d.spec.name for d in registry.drawn("memory")}


def workers(run: dict) -> int:
    p = run["params"]
    return int(p.get("threads") or 1) * int(p.get("ranks") or 1)


def section(data: Dataset, _options) -> Section | None:
    drawn = registry.drawn("memory")
    benchmarks = list(dict.fromkeys(d.benchmark for d in drawn))
    kernels = list(dict.fromkeys(d.use.role for d in drawn))
    by_name = {d.spec.name: (d.use.role, d.spec.shown(d.use, UNIT)) for d in drawn}
    runs = data.runs_of(*benchmarks)
    rows = data.of(*by_name)
    rows = rows[rows["benchmark"].isin(benchmarks)]
    if rows.empty:
        return None
    keys = varying(runs, PLACEMENT_KEYS + tag_keys(runs))
    samples: dict[str, list] = {k: [] for k in kernels}
    for rec in rows.itertuples(index=False):
        run = data.runs[rec.run_id]
        label = describe(run, keys) or "STREAM"
        kernel, shown = by_name[rec.name]
        samples[kernel].append((label, workers(run), shown(rec.value), rec.run_id))
    per_kernel = {k: aggregate(v) for k, v in samples.items()}
    out = Section("memory", "Memory bandwidth (STREAM)", [
        "Best-of-iterations rate as STREAM reports it, in GB/s = 10^9 byte/s. Points are means over "
        "repeats; bars span the minimum and maximum."])
    if per_kernel.get(DRAWN_KERNEL):
        out.figures.append(Figure("memory-stream-triad", "STREAM Triad against threads x tasks",
                                  "threads x tasks", "Triad (GB/s)", per_kernel[DRAWN_KERNEL], x_integer=True))
    table = Table("memory-stream-table", "STREAM rates (GB/s): mean (min-max)",
                  ["placement", "threads x tasks", *kernels, "runs"], [])
    index: dict[tuple, dict] = {}
    for kernel, series in per_kernel.items():
        for s in series:
            for p in s.points:
                index.setdefault((s.label, p.x), {})[kernel] = p
    for (label, x), cells in sorted(index.items()):
        runs_here = sorted({r for p in cells.values() for r in p.runs})
        table.rows.append([label, int(x), *[range_text(cells.get(k)) for k in kernels], runs_here])
    out.tables.append(table)
    return out

