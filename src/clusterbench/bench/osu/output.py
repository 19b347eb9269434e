"""Parser for OSU Micro-Benchmarks output (osu_latency, osu_bw, osu_bibw, ...).

A `# OSU MPI <Name> Test vX.Y` header, a `# Size  <column>` line and one row per message
size (OSU starts at 1 byte). OSU's MB/s are 10^6 bytes per second.

Declared here for the importer and the report: `FORMAT` (an OSU output file, one imported run)
and `METRICS` (the latencies and bandwidths the network section draws).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clusterbench.bench.declare import MetricSpec, OutputFormat, ReportUse, Result, merit
from clusterbench.bench.metrics import Metric, Outcome

_MARK = re.compile(r"^#\s*OSU MPI", re.M)
_HEADER = re.compile(r"^#\s*OSU MPI(?:-\w+)?\s+(.+?)\s+Test\s+v?(\S+)", re.M)
_COLUMNS = re.compile(r"^#\s*Size\s+(.+?)\s*$", re.M)
_ROW = re.compile(r"^\s*(\d+)\s+([\d.]+(?:[eE][+-]?\d+)?)\s*$", re.M)


@dataclass
class OsuOutput:
    test: str | None
    version: str | None
    column: str | None
    rows: list[tuple[int, float]] = field(default_factory=list)


def parse_osu(text: str) -> OsuOutput:
    header, columns = _HEADER.search(text), _COLUMNS.search(text)
    start = columns.end() if columns else 0
    rows = [(int(m.group(1)), float(m.group(2))) for m in _ROW.finditer(text, start)]
    return OsuOutput(header.group(1) if header else None, header.group(2) if header else None,
                     columns.group(1) if columns else None, rows)


def osu_outcome(parsed: OsuOutput) -> Outcome:
    out = Outcome(facts={"osu_version": parsed.version, "osu_test": parsed.test, "column": parsed.column})
    if not parsed.rows:
        out.invalidate("OSU output has no result rows")
        return out
    column = (parsed.column or "").lower()
    test = (parsed.test or "osu").lower().replace(" ", "_")
    if "latency" in column:
        for size, value in parsed.rows:
            out.metrics.append(Metric("osu_latency_us", value, "us", False, {"test": test, "bytes": size}))
        size, value = parsed.rows[0]
        out.metrics.append(Metric("latency_us", value, "us", False, {"test": test, "bytes": size}))
    else:
        unit = "MB/s" if "mb/s" in column else (parsed.column or "")
        for size, value in parsed.rows:
            out.metrics.append(Metric("osu_bandwidth", value, unit, True, {"test": test, "bytes": size}))
        size, value = max(parsed.rows, key=lambda r: r[1])
        out.metrics.append(Metric("peak_bandwidth", value, unit, True, {"test": test, "bytes": size}))
    return out.check_values()


def split_results(text: str, max_results: int) -> list[Result]:
    """An OSU output file as one imported run, with its test and message sizes."""
    parsed = parse_osu(text)
    sizes = [s for s, _ in parsed.rows]
    params = {"test": (parsed.test or "").lower()} | (
        {"min_bytes": min(sizes), "max_bytes": max(sizes)} if sizes else {})
    return [Result("osu", params, osu_outcome(parsed))]


def recognise(text: str) -> bool:
    # the substring first (a search for a line start scans every character of every file asked)
    return "OSU MPI" in text and bool(_MARK.search(text))


SIZED = ("test", "bytes")  # a value of one test at one message size
METRICS = (
    MetricSpec("osu_latency_us", "us", False, SIZED,
               negative_not_applicable=True, uses=(ReportUse("network", "latency", "OSU", order=30),)),
    MetricSpec("osu_bandwidth", "MB/s", True, SIZED,
               negative_not_applicable=True, uses=(ReportUse("network", "bandwidth", "OSU", order=30),)),
    MetricSpec("latency_us", "us", False, SIZED, negative_not_applicable=True),
    merit(MetricSpec("peak_bandwidth", "MB/s", True, SIZED, negative_not_applicable=True)),
)
FORMAT = OutputFormat("osu", recognise, split_results, title="OSU")
