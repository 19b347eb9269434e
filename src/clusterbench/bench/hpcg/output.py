"""Parser for the HPCG report file (HPCG-Benchmark_3.x_<date>.txt): `::`-keyed lines.

The rating is `Final Summary::HPCG result is VALID with a GFLOP/s rating of=<x>`; an INVALID
result is stored as invalid. A valid run shorter than the official 1800 s is still a valid
measurement but not eligible for the HPCG list, which is recorded as a fact. A rating that
cannot be true (not finite, <= 0, or above 10^7 Gflop/s per process) makes the result invalid.

The report states no date of the run; its file name does (`HPCG-Benchmark_3.1_2017-03-27_15-44-28.txt`,
written at the end of the run): the importer reads it from there (`store/filenames.time_in_name`).

Declared here for the importer and the report: `FORMAT` (the report file, one imported run),
`LOG_FORMAT` (HPCG's log file: recognised, stored as nothing) and `METRICS`.
"""

from __future__ import annotations

import re

from clusterbench.bench.declare import MetricSpec, OutputFormat, ReportUse, Result, merit
from clusterbench.bench.metrics import MAX_GFLOPS_PER_PROCESS, Metric, Outcome, is_finite

_LOG_LINE = re.compile(r"^Call \[\d+\] Number of Iterations", re.M)
_RATING = re.compile(r"HPCG result is (VALID|INVALID) with a GFLOP/s rating of=\s*([\d.eE+-]+)")


def parse_hpcg(text: str) -> dict[str, str]:
    """Every `A::B::C=value` line as {'A::B::C': 'value'} (section headers have empty values)."""
    keys = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and "::" in key:
            keys.setdefault(key.strip(), value.strip())
    return keys


def _num(keys: dict, key: str) -> float | None:
    try:
        return float(keys[key])
    except (KeyError, ValueError):
        return None


def hpcg_params(keys: dict) -> dict:
    as_int = {"ranks": "Machine Summary::Distributed Processes", "threads": "Machine Summary::Threads per processes",
              "nx": "Local Domain Dimensions::nx", "ny": "Local Domain Dimensions::ny",
              "nz": "Local Domain Dimensions::nz", "npx": "Processor Dimensions::npx",
              "npy": "Processor Dimensions::npy", "npz": "Processor Dimensions::npz"}
    return {name: int(v) for name, key in as_int.items() if (v := _num(keys, key)) is not None and is_finite(v)}


def hpcg_outcome(text: str, keys: dict[str, str] | None = None) -> Outcome:
    """The report's verdict and figures (`keys`: its `parse_hpcg`, when the caller has it already)."""
    keys = parse_hpcg(text) if keys is None else keys
    version = re.search(r"^version=(\S+)", text, re.M)
    time_s = _num(keys, "Benchmark Time Summary::Total")
    minimum = _num(keys, "Final Summary::Official results execution time (sec) must be at least")
    # HPCG names its report file when it writes it, at the end of the run (HPCG-Benchmark_3.1_<date>.txt,
    # local time): a date the importer reads from the name is this run's end.
    out = Outcome(facts={"hpcg_version": version.group(1) if version else None,
                         "list_eligible": bool(time_s and minimum and time_s >= minimum),
                         "official_minimum_s": minimum, "file_name_time_is": "end"})
    rating = _RATING.search(text)
    if rating:
        gflops = float(rating.group(2))
        out.metrics.append(Metric("hpcg_gflops", gflops, "Gflop/s", True))
        if rating.group(1) != "VALID":
            out.invalidate("HPCG reports its result INVALID")
        elif is_finite(gflops) and gflops <= 0:
            out.invalidate(f"HPCG rating {gflops:g} Gflop/s is impossible (no work measured)")
        ranks = _num(keys, "Machine Summary::Distributed Processes")
        if is_finite(gflops) and ranks and is_finite(ranks) and gflops > MAX_GFLOPS_PER_PROCESS * max(ranks, 1):
            out.invalidate(f"HPCG rating {gflops:.4g} Gflop/s from {ranks:g} process(es) is above "
                           f"{MAX_GFLOPS_PER_PROCESS:.0e} Gflop/s per process, which no machine reaches")
    else:
        out.invalidate("no 'HPCG result is VALID/INVALID' line (run aborted or output truncated)")
    for key, name, unit in (("GFLOP/s Summary::Raw Total", "hpcg_raw_gflops", "Gflop/s"),
                            ("GB/s Summary::Raw Total B/W", "hpcg_bandwidth", "GB/s"),
                            ("Benchmark Time Summary::Total", "hpcg_time", "s")):
        value = _num(keys, key)
        if value is not None:
            out.metrics.append(Metric(name, value, unit, name != "hpcg_time"))
    for key in keys:
        if key.endswith("::Result") and keys[key] == "FAILED":
            out.invalidate(f"HPCG check failed: {key}")
    out.check_values()
    if not out.valid:
        for m in out.metrics:
            m.valid = False
    return out


def split_results(text: str, max_results: int) -> list[Result]:
    """An HPCG report file as one imported run, with the ranks, threads and grids it states."""
    keys = parse_hpcg(text)
    return [Result("hpcg", hpcg_params(keys), hpcg_outcome(text, keys))]


def recognise(text: str) -> bool:
    # the substring first: lstrip copies the whole text, and every file of an import is asked
    return "HPCG result is" in text or ("HPCG-Benchmark" in text and text.lstrip().startswith("HPCG-Benchmark"))


def recognise_log(text: str) -> bool:
    # the substring first (a search for a line start scans every character of every file asked)
    return "Number of Iterations" in text and bool(_LOG_LINE.search(text))


METRICS = (
    merit(MetricSpec("hpcg_gflops", "Gflop/s", True, uses=(ReportUse("energy", "hpcg"),))),
    MetricSpec("hpcg_raw_gflops", "Gflop/s", True),
    MetricSpec("hpcg_bandwidth", "GB/s", True),
    MetricSpec("hpcg_time", "s", False),
)
FORMAT = OutputFormat("hpcg", recognise, split_results, title="HPCG", priority=10)
LOG_FORMAT = OutputFormat("hpcg-log", recognise_log, None, priority=10,
                          note="HPCG log file: the results are in the HPCG-Benchmark report file")
