"""Memory section: STREAM rates against the number of threads or tasks, per placement.

x is threads x ranks (the processes and threads that share the memory system), y the rate
in GB/s (10^9 byte/s, STREAM's own MB/s divided by 1000). Triad is drawn; the table gives
all four kernels.
"""

from __future__ import annotations

from clusterbench.analysis.dataset import Dataset, describe, tag_keys, varying
from clusterbench.report.figures import aggregate, range_text
from clusterbench.report.model import Figure, Section, Table

STREAM_KERNELS = ("copy", "scale", "add", "triad")
METRICS = {f"stream_{k}" for k in STREAM_KERNELS}
PLACEMENT_KEYS = ("node_count", "origin", "bind_to", "map_by", "places")


def workers(run: dict) -> int:
    p = run["params"]
    return int(p.get("threads") or 1) * int(p.get("ranks") or 1)


def section(data: Dataset, _options) -> Section | None:
    runs = data.runs_of("stream")
    rows = data.of(*(f"stream_{k}" for k in STREAM_KERNELS))
    rows = rows[rows["benchmark"] == "stream"]
    if rows.empty:
        return None
    keys = varying(runs, PLACEMENT_KEYS + tag_keys(runs))
    samples: dict[str, list] = {k: [] for k in STREAM_KERNELS}
    for rec in rows.itertuples(index=False):
        run = data.runs[rec.run_id]
        label = describe(run, keys) or "STREAM"
        samples[rec.name.removeprefix("stream_")].append((label, workers(run), rec.value / 1000.0, rec.run_id))
    per_kernel = {k: aggregate(v) for k, v in samples.items()}
    out = Section("memory", "Memory bandwidth (STREAM)", [
        "Best-of-iterations rate as STREAM reports it, in GB/s = 10^9 byte/s. Points are means over "
        "repeats; bars span the minimum and maximum."])
    if per_kernel["triad"]:
        out.figures.append(Figure("memory-stream-triad", "STREAM Triad against threads x tasks",
                                  "threads x tasks", "Triad (GB/s)", per_kernel["triad"], x_integer=True))
    table = Table("memory-stream-table", "STREAM rates (GB/s): mean (min-max)",
                  ["placement", "threads x tasks", *STREAM_KERNELS, "runs"], [])
    index: dict[tuple, dict] = {}
    for kernel, series in per_kernel.items():
        for s in series:
            for p in s.points:
                index.setdefault((s.label, p.x), {})[kernel] = p
    for (label, x), cells in sorted(index.items()):
        runs_here = sorted({r for p in cells.values() for r in p.runs})
        table.rows.append([label, int(x), *[range_text(cells.get(k)) for k in STREAM_KERNELS], runs_here])
    out.tables.append(table)
    return out

