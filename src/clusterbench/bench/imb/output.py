"""Parser for Intel MPI Benchmarks (IMB-MPI1) output: every benchmark section and its table.

Each `# Benchmarking <Name>` section has a header row (`#bytes #repetitions t[usec]
Mbytes/sec` for PingPong-like tests, `t_min[usec] t_max[usec] t_avg[usec]` for collectives)
and one row per message size. IMB's "Mbytes/sec" is 2^20 bytes per second, so it is stored as
MiB/s. Latency is the time at the smallest size (0 bytes); the peak bandwidth is reported with
the size where it occurs. Some job scripts add a `#HOSTS=<n>` first line; it is kept.

Declared here for the importer and the report: `FORMAT` (an IMB output file, one imported run
per benchmark section) and `METRICS` (the PingPong times and bandwidths the network section draws).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clusterbench.bench.declare import MetricSpec, OutputFormat, ReportUse, Result, merit
from clusterbench.bench.metrics import Metric, Outcome, TooManyResults

_MARK = re.compile(r"Intel\s*\(R\)\s*MPI Benchmarks")
_VERSION = re.compile(r"Intel\s*\(R\)\s*MPI Benchmarks\s+(\d[\w.]*)")
_SECTION = re.compile(r"^#\s*Benchmarking\s+(\S+)", re.M)
_PROCS = re.compile(r"#processes\s*=\s*(\d+)")
_DATE = re.compile(r"^#\s*Date\s*:\s*(.+?)\s*$", re.M)
_HOSTS = re.compile(r"^#HOSTS=(\d+)", re.M)
# Blank-only runs between the lines ([^\S\n]), so a hostile run of a million newlines costs linear time.
_CALL = re.compile(r"# Calling sequence was:[^\S\n]*\n[^\S\n]*\n#[^\S\n]*([^\n]+?)[^\S\n]*\n"
                   r"(?:#[^\S\n]{5,}([^\n]+?)[^\S\n]*\n)?")
_NUMBER_ROW = re.compile(r"^\s*\d+(\s+[\d.]+(?:[eE][+-]?\d+)?)+\s*$")


@dataclass
class ImbSection:
    name: str
    processes: int | None
    columns: list[str]
    rows: list[list[float]] = field(default_factory=list)

    def column(self, name: str) -> list[float] | None:
        return [r[self.columns.index(name)] for r in self.rows] if name in self.columns else None


@dataclass
class ImbOutput:
    version: str | None
    date: str | None
    hosts: int | None
    command: str | None
    sections: list[ImbSection]
    finalized: bool


def parse_imb(text: str, max_results: int | None = None) -> ImbOutput:
    """Every benchmark section; `max_results` stops a hostile file early (TooManyResults)."""
    sections: list[ImbSection] = []
    starts = []
    for m in _SECTION.finditer(text):
        starts.append(m)
        if max_results is not None and len(starts) > max_results:
            raise TooManyResults("IMB benchmark sections", max_results)
    for i, m in enumerate(starts):
        body = text[m.end(): starts[i + 1].start() if i + 1 < len(starts) else len(text)]
        procs = _PROCS.search(body)
        section = ImbSection(m.group(1), int(procs.group(1)) if procs else None, [])
        for line in body.splitlines():
            stripped = line.strip()
            if stripped.startswith("#bytes") or stripped.startswith("#repetitions"):
                section.columns = stripped.lstrip("#").split()
            elif section.columns and _NUMBER_ROW.match(line):
                values = [float(v) for v in line.split()]
                if len(values) == len(section.columns):
                    section.rows.append(values)
        sections.append(section)
    call = _CALL.search(text)
    command = " ".join(p.strip() for p in call.groups() if p) if call else None
    version, date, hosts = _VERSION.search(text), _DATE.search(text), _HOSTS.search(text)
    return ImbOutput(version.group(1) if version else None, date.group(1) if date else None,
                     int(hosts.group(1)) if hosts else None, command, sections,
                     "All processes entering MPI_Finalize" in text)


def section_outcome(parsed: ImbOutput, section: ImbSection) -> Outcome:
    """Metrics of one IMB benchmark section: per-size times and bandwidths, latency, peak."""
    out = Outcome(facts={"imb_version": parsed.version, "date": parsed.date, "command": parsed.command})
    if not parsed.finalized:
        out.reasons.append("output ends before 'All processes entering MPI_Finalize' (truncated?)")
    sizes = section.column("bytes")
    if not section.rows or sizes is None:
        out.invalidate(f"IMB {section.name}: no result rows")
        return out
    times = section.column("t[usec]") or section.column("t_avg[usec]")
    bandwidth = section.column("Mbytes/sec")
    test = section.name
    for k, size in enumerate(sizes):
        labels = {"test": test, "bytes": int(size)}
        if times is not None:
            out.metrics.append(Metric("imb_time_us", times[k], "us", False, labels))
        if bandwidth is not None:
            out.metrics.append(Metric("imb_bandwidth", bandwidth[k], "MiB/s", True, labels))
    if times is not None:
        out.metrics.append(Metric("latency_us", times[0], "us", False, {"test": test, "bytes": int(sizes[0])}))
    if bandwidth is not None:
        k = max(range(len(bandwidth)), key=bandwidth.__getitem__)
        out.metrics.append(Metric("peak_bandwidth", bandwidth[k], "MiB/s", True,
                                  {"test": test, "bytes": int(sizes[k])}))
    return out.check_values()


def split_results(text: str, max_results: int) -> list[Result]:
    """An IMB output file as imported runs: one per benchmark section, with its test, ranks and sizes."""
    parsed = parse_imb(text, max_results=max_results)
    out = []
    for section in parsed.sections:
        params = {"test": section.name, "ranks": section.processes}
        if parsed.hosts is not None:
            params["hosts"] = parsed.hosts
        sizes = section.column("bytes")
        if sizes:
            params |= {"min_bytes": int(min(sizes)), "max_bytes": int(max(sizes))}
        out.append(Result("imb", params, section_outcome(parsed, section), parsed.date))
    return out


def recognise(text: str) -> bool:
    return "MPI Benchmarks" in text and bool(_MARK.search(text))


SIZED = ("test", "bytes")  # a value of one test at one message size
_PINGPONG = {"title": "IMB PingPong", "where": (("test", "PingPong"),), "order": 20}  # the network section's
METRICS = (
    MetricSpec("imb_time_us", "us", False, SIZED,
               negative_not_applicable=True, uses=(ReportUse("network", "latency", **_PINGPONG),)),
    MetricSpec("imb_bandwidth", "MiB/s", True, SIZED,
               negative_not_applicable=True, uses=(ReportUse("network", "bandwidth", **_PINGPONG),)),
    MetricSpec("latency_us", "us", False, SIZED, negative_not_applicable=True),
    merit(MetricSpec("peak_bandwidth", "MiB/s", True, SIZED, negative_not_applicable=True)),
)
FORMAT = OutputFormat("imb", recognise, split_results, title="IMB")
