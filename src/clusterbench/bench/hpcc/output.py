"""Parser for HPCC's hpccoutf.txt: the Summary section (every key) and the validity checks.

Each summary key becomes a metric with its unit. The run is valid only when HPCC itself says
so: HPL's residual PASSED (the HPL section is parsed with the HPL parser), PTRANS passed,
STREAM 'Solution Validates', RandomAccess error fraction within HPCC's 1% rule, and the
FFT and DGEMM checks reported no failing node. A summary value that is not a finite number
(`nan`, `inf`) invalidates the run (`Outcome.check_values`), and so do HPL figures that cannot
be true (see `hpl_output.implausible`).

Sections are found with plain string searches, in time linear in the size of the output even
when a hostile file repeats a `Begin of ... section.` marker a million times.

Declared here for the importer and the report: `FORMAT` (an hpccoutf.txt, one imported run;
tried before HPL's, as it holds an HPL section) and `METRICS` (HPL's, and the summary keys the
HPC Challenge section tabulates, in its row order).
"""

from __future__ import annotations

import functools
import re

from clusterbench.bench.declare import MetricSpec, OutputFormat, ReportUse, Result, merit, not_merit
from clusterbench.bench.hpl.output import METRICS as HPL_METRICS
from clusterbench.bench.hpl.output import check_rpeak, hpl_outcome, implausible
from clusterbench.bench.metrics import Metric, Outcome, is_finite

_SUMMARY_BEGIN, _SUMMARY_END = "Begin of Summary section.", "\nEnd of Summary section."
_TO_LINE_END = re.compile(r"[^\S\n]*\n")  # blanks, then the end of the marker's line

# (regex on the key, unit, higher is better), first match wins.
_UNITS = [
    (r"^HPL_Tflops$", "Tflop/s", True),
    (r"_Gflops$", "Gflop/s", True),
    (r"GUPs$", "GUP/s", True),
    (r"^(Star|Single)STREAM_(Copy|Scale|Add|Triad)$", "GB/s", True),
    (r"^PTRANS_GBs$", "GB/s", True),
    (r"Bandwidth_GBytes$", "GB/s", True),
    (r"Latency_usec$", "us", False),
    (r"(_time|_CheckTime|_time\d)$", "s", False),
    (r"_TimeBound$", "s", False),
]
# Keys that describe the build or the input rather than a measurement.
_INFO_KEYS = re.compile(r"^(Version|sizeof_|LANG|CPS_|HPL_dMACH|HPL_sMACH|dweps|sweps|HPL_c|"
                        r"HPL_order|M_OPENMP|omp_|Mem|FFTE)")


def _summary_body(text: str) -> str | None:
    """The lines between `Begin of Summary section.` and `End of Summary section.` (None if absent)."""
    begin = text.find(_SUMMARY_BEGIN)
    while begin != -1:
        start = begin + len(_SUMMARY_BEGIN)
        lead = _TO_LINE_END.match(text, start)
        if lead:
            end = text.find(_SUMMARY_END, lead.end() - 1)
            return text[lead.end():end] if end != -1 else None  # no end here: none further on either
        begin = text.find(_SUMMARY_BEGIN, start)
    return None


def parse_summary(text: str) -> dict[str, str]:
    body = _summary_body(text)
    if not body:
        return {}
    summary = {}
    for line in body.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            summary[k.strip()] = v.strip()
    return summary


@functools.lru_cache(maxsize=4096)
def _unit(key: str) -> tuple[str, bool]:
    """The unit of a summary key (asked again for each of the hundred keys of every HPCC output)."""
    for rx, unit, hib in _UNITS:
        if re.search(rx, key):
            return unit, hib
    return "", True


@functools.lru_cache(maxsize=4096)
def _is_info(key: str) -> bool:
    """Does a summary key describe the build or the input (asked for the hundred keys of every output)?"""
    return _INFO_KEYS.match(key) is not None


def section(text: str, name: str) -> str | None:
    """The text between `Begin of <name> section.` (and its newline) and `End of <name> section.`."""
    marker = f"Begin of {name} section.\n"
    begin = text.find(marker)
    if begin == -1:
        return None
    start = begin + len(marker)
    end = text.find(f"End of {name} section.", start)
    return text[start:end] if end != -1 else None


def hpcc_outcome(text: str, summary: dict[str, str] | None = None) -> Outcome:
    """The run's metrics and verdict (`summary`: its `parse_summary`, when the caller has it already)."""
    summary = parse_summary(text) if summary is None else summary
    hpl_text = section(text, "HPL") or ""
    hpl = hpl_outcome(hpl_text) if hpl_text else Outcome()
    outcome = Outcome(metrics=list(hpl.metrics), facts={"hpcc_summary": summary} | hpl.facts)
    if not summary:
        outcome.invalidate("no HPCC Summary section (truncated or aborted run)")
    if not hpl_text:
        outcome.invalidate("no HPL section in the HPCC output")
    for reason in hpl.reasons:
        outcome.invalidate(f"HPL: {reason}")
    for key, raw in summary.items():
        if _is_info(key):
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        unit, hib = _unit(key)
        outcome.metrics.append(Metric(key, value, unit, hib))
    _checks(text, summary, outcome)
    summary_problems = _hpl_summary_problems(summary)
    for problem in summary_problems:
        outcome.invalidate(f"HPL summary: {problem}")
    outcome.check_values()
    hpl_valid = all(m.valid for m in hpl.metrics) and bool(hpl.metrics) and not summary_problems
    for m in outcome.metrics:
        if m.name.startswith("HPL_"):
            m.valid = hpl_valid
    return outcome


def _number(summary: dict[str, str], key: str) -> float | None:
    try:
        return float(summary[key])
    except (KeyError, ValueError):
        return None


def _hpl_summary_problems(summary: dict[str, str]) -> list[str]:
    """HPL_Tflops and HPL_time of the summary checked as an HPL result line is (exact time, %g)."""
    tflops, time_s, n = _number(summary, "HPL_Tflops"), _number(summary, "HPL_time"), _number(summary, "HPL_N")
    if tflops is None or time_s is None:
        return []
    return implausible(n if n is not None else 0, time_s, tflops * 1000, _number(summary, "CommWorldProcs"),
                       time_resolution=0.0)


def _checks(text: str, summary: dict[str, str], outcome: Outcome) -> None:
    if summary.get("Success") not in (None, "1"):
        outcome.invalidate(f"HPCC reports Success={summary.get('Success')}")
    for name in ("StarSTREAM",):
        body = section(text, name)
        if body is not None and "Solution Validates" not in body:
            outcome.invalidate(f"{name}: STREAM solution did not validate")
    body = section(text, "PTRANS")
    if body is not None and re.search(r"\bFAILED\b", body):
        outcome.invalidate("PTRANS: a test FAILED")
    for key in ("MPIRandomAccess_ErrorsFraction", "MPIRandomAccess_LCG_ErrorsFraction"):
        fraction = _number(summary, key)
        if key in summary and (fraction is None or not is_finite(fraction)):
            outcome.invalidate(f"{key}={summary[key]} is not a number")
        elif fraction is not None and fraction > 0.01:
            outcome.invalidate(f"{key}={summary[key]} exceeds HPCC's 1% limit")
    for name in ("StarDGEMM", "SingleDGEMM", "StarFFT", "SingleFFT", "StarSTREAM",
                 "StarRandomAccess", "SingleRandomAccess"):
        body = section(text, name)
        m = re.search(r"Node\(s\) with error (\d+)", body or "")
        if m and int(m.group(1)) > 0:
            outcome.invalidate(f"{name}: {m.group(1)} node(s) with error")


_CURRENT_TIME = re.compile(r"^Current time \(([0-9]{1,12})\) is ([^\n]{1,64})$", re.M)
_END_OF_TESTS = "End of HPC Challenge tests."


def run_times(text: str) -> tuple[str | None, str | None, float | None]:
    """(start, end, seconds) as HPCC prints them: its first `Current time (<epoch>) is <date>` line is
    the start, the one after `End of HPC Challenge tests.` the end (absent when the run was cut short).
    The dates are the text HPCC printed (the machine's local time, like HPL's); the seconds come
    from the two epochs."""
    first = _CURRENT_TIME.search(text)
    if first is None:
        return None, None, None
    end_at = text.rfind(_END_OF_TESTS)
    last = _CURRENT_TIME.search(text, end_at) if end_at != -1 else None
    if last is None:
        return first.group(2).strip(), None, None
    seconds = int(last.group(1)) - int(first.group(1))
    return first.group(2).strip(), last.group(2).strip(), float(seconds) if seconds >= 0 else None


def split_results(text: str, max_results: int) -> list[Result]:
    """An HPCC output file as one imported run, with the HPL N, NB, P, Q and ranks its summary states,
    and the start and end times it prints."""
    summary = parse_summary(text)
    outcome = hpcc_outcome(text, summary)
    params = {}
    for name, key in (("n", "HPL_N"), ("nb", "HPL_NB"), ("p", "HPL_nprow"), ("q", "HPL_npcol"),
                      ("ranks", "CommWorldProcs")):
        try:
            params[name] = int(float(summary[key]))
        except (KeyError, ValueError, OverflowError):  # absent, not a number, nan or inf
            pass
    started, ended, seconds = run_times(text)
    return [Result("hpcc", params, outcome, started, ended, seconds)]


def recognise(text: str) -> bool:
    return "Begin of Summary section" in text or "HPC Challenge Benchmark" in text


def _summary(key: str, title: str, shown: str = "", *roles: str) -> MetricSpec:
    """A summary key as the HPC Challenge section shows it (a row `title`, in `shown` units), and
    the other `roles` it plays there; its unit and direction are the parser's (`_unit`)."""
    unit, higher_is_better = _unit(key)
    return MetricSpec(key, unit, higher_is_better,
                      uses=(ReportUse("hpcc", "summary", title, shown), *(ReportUse("hpcc", r) for r in roles)),
                      **NOT_RUN)


def _measured(key: str) -> MetricSpec:
    """A summary figure no section draws, declared for what its -1 means."""
    unit, higher_is_better = _unit(key)
    return MetricSpec(key, unit, higher_is_better, **NOT_RUN)


# HPCC starts every figure of its summary at -1 and prints -1 for a test it did not run (ping-pong
# and ring figures with one process): "not applicable", never a measurement. No figure it times
# or rates can be negative either.
NOT_RUN = {"not_applicable": (-1.0,), "negative_not_applicable": True}


# The summary rows, in the section's order; the balance is ring-bandwidth / (hpl-rate / processes).
SUMMARY = (
    merit(_summary("HPL_Tflops", "HPL", "Gflop/s", "hpl-rate")),
    _summary("StarDGEMM_Gflops", "DGEMM per process (star)"),
    _summary("SingleDGEMM_Gflops", "DGEMM single process"),
    _summary("PTRANS_GBs", "PTRANS"),
    _summary("MPIRandomAccess_GUPs", "RandomAccess (MPI)"),
    _summary("StarRandomAccess_GUPs", "RandomAccess per process (star)"),
    _summary("StarSTREAM_Triad", "STREAM Triad per process (star)"),
    _summary("SingleSTREAM_Triad", "STREAM Triad single process"),
    _summary("MPIFFT_Gflops", "FFT (MPI)"),
    _summary("StarFFT_Gflops", "FFT per process (star)"),
    _summary("MinPingPongLatency_usec", "Ping-pong latency, min"),
    _summary("MaxPingPongBandwidth_GBytes", "Ping-pong bandwidth, max"),
    _summary("RandomlyOrderedRingLatency_usec", "Random-ring latency"),
    _summary("RandomlyOrderedRingBandwidth_GBytes", "Random-ring bandwidth", "", "ring-bandwidth"),
)
# The summary figures no section draws, declared for their -1: the other ping-pong and ring figures,
# the other STREAM kernels, FFT, DGEMM and RandomAccess rates and the times.
MEASURED = tuple(_measured(key) for key in (
    "MaxPingPongLatency_usec", "AvgPingPongLatency_usec", "NaturallyOrderedRingLatency_usec",
    "MinPingPongBandwidth_GBytes", "AvgPingPongBandwidth_GBytes", "NaturallyOrderedRingBandwidth_GBytes",
    "StarSTREAM_Copy", "StarSTREAM_Scale", "StarSTREAM_Add", "SingleSTREAM_Copy", "SingleSTREAM_Scale",
    "SingleSTREAM_Add", "SingleFFT_Gflops", "MPIRandomAccess_LCG_GUPs", "StarRandomAccess_LCG_GUPs",
    "SingleRandomAccess_LCG_GUPs", "SingleRandomAccess_GUPs", "HPL_time", "PTRANS_time", "MPIFFT_time",
    "MPIRandomAccess_time", "MPIRandomAccess_LCG_time"))
PROCESSES = MetricSpec("CommWorldProcs", "", True, uses=(ReportUse("hpcc", "processes"),))
METRICS = (*(not_merit(m) for m in HPL_METRICS), *SUMMARY, *MEASURED, PROCESSES)
FORMAT = OutputFormat("hpcc", recognise, split_results, title="HPCC", priority=20, rpeak_check=check_rpeak)
