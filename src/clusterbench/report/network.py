"""Network section: one-way latency and bandwidth against message size, per placement or
interconnect, with min-max bars over repeats, and the tables at the sizes people quote.

What it draws is what the benchmarks declare (bench/declare.py): every metric with a `network`
use, in the role `latency` or `bandwidth`, labelled with the message size (`bytes`). Sources
speak different units: clusterbench's ping-pong and OSU report MB/s (10^6 byte/s), IMB reports
"Mbytes/sec" meaning MiB/s (2^20 byte/s). Everything here is MB/s, converted from the unit each
metric declares (IMB values are multiplied by 1.048576). All three time the one-way trip
(round trip / 2).
"""

from __future__ import annotations

from clusterbench.analysis.dataset import Dataset, describe, tag_keys, varying
from clusterbench.bench import registry
from clusterbench.report.figures import aggregate, range_text, size_label
from clusterbench.report.model import Figure, Section, Series, Table

UNITS = {"latency": "us", "bandwidth": "MB/s"}  # what each role is drawn in
PLACEMENT_KEYS = ("node_count", "origin", "interconnect", "net_if", "map_by", "bind_to", "rank_by")
QUOTED_SIZES = (0, 1024, 8192, 32768)


def sources() -> dict[str, list[registry.Drawn]]:
    """benchmark -> its latency and bandwidth metrics, in the order the section draws them."""
    out: dict[str, list[registry.Drawn]] = {}
    for d in registry.drawn("network"):
        if d.use.role in UNITS:
            out.setdefault(d.benchmark, []).append(d)
    return out


def metrics() -> set[str]:
    return {d.spec.name for drawn in sources().values() for d in drawn}


def section(data: Dataset, _options) -> Section | None:
    samples: dict[str, list] = {role: [] for role in UNITS}
    for bench, drawn in sources().items():
        runs = data.runs_of(bench)
        if not runs:
            continue
        keys = varying(runs, PLACEMENT_KEYS + tag_keys(runs)) or ["node_count"]
        by_name = {d.spec.name: (d.use, d.spec.shown(d.use, UNITS[d.use.role])) for d in drawn}
        for rec in data.of(*by_name).itertuples(index=False):
            use, shown = by_name[rec.name]
            if not use.selects(rec.labels):  # IMB: PingPong only
                continue
            series = f"{use.title}, {describe(data.runs[rec.run_id], keys)}"
            size = float(rec.labels.get("bytes", 0))
            samples[use.role].append((series, size, shown(rec.value), rec.run_id))
    latency, bandwidth = samples["latency"], samples["bandwidth"]
    if not latency and not bandwidth:
        return None
    lat_series, bw_series = aggregate(latency), aggregate(bandwidth)
    out = Section("network", "Network", [
        "One-way times (half the round trip). Bandwidth in MB/s = 10^6 byte/s; IMB's MiB/s are converted. "
        "Points are means over repeats, bars the minimum and maximum; 0-byte messages appear in the tables "
        "only (a log axis has no zero)."])
    if lat_series:
        out.figures.append(Figure("network-latency", "One-way latency against message size", "message size",
                                  "latency (us)", _positive(lat_series), x_log=2, y_log=10, x_bytes=True))
    if bw_series:
        out.figures.append(Figure("network-bandwidth", "Bandwidth against message size", "message size",
                                  "bandwidth (MB/s)", _positive(bw_series), x_log=2, y_log=10, x_bytes=True))
    out.tables += [t for t in (_at_sizes("network-latency-table", "Latency (us) at quoted sizes", lat_series),
                               _at_sizes("network-bandwidth-table", "Bandwidth (MB/s) at quoted sizes", bw_series))
                   if t.rows]
    return out


def _positive(series: list[Series]) -> list[Series]:
    return [Series(s.label, [p for p in s.points if p.x > 0 and p.y > 0]) for s in series]


def _at_sizes(slug: str, title: str, series: list[Series]) -> Table:
    """Mean (min-max) at 0 B, 1 KiB, 8 KiB, 32 KiB and the largest size measured."""
    table = Table(slug, title, ["series", *[size_label(s) for s in QUOTED_SIZES], "largest size", "runs"], [])
    for s in series:
        by_x = {p.x: p for p in s.points}
        cells = [range_text(by_x.get(float(size))) for size in QUOTED_SIZES]
        top = s.points[-1] if s.points else None
        runs = sorted({r for p in s.points for r in p.runs})
        table.rows.append([s.label, *cells, f"{range_text(top)} at {size_label(top.x)}" if top else None, runs])
    return table

