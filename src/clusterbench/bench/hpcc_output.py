"""Parser for HPCC's hpccoutf.txt: the Summary section (every key) and the validity checks.

Each summary key becomes a metric with its unit. The run is valid only when HPCC itself says
so: HPL's residual PASSED (the HPL section is parsed with the HPL parser), PTRANS passed,
STREAM 'Solution Validates', RandomAccess error fraction within HPCC's 1% rule, and the
FFT and DGEMM checks reported no failing node.
"""

from __future__ import annotations

import re

from clusterbench.bench.hpl_output import hpl_outcome
from clusterbench.bench.metrics import Metric, Outcome

_SUMMARY = re.compile(r"Begin of Summary section\.\s*\n(.*?)\nEnd of Summary section\.", re.S)
_SECTION = "Begin of {0} section.\n(.*?)End of {0} section."

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


def parse_summary(text: str) -> dict[str, str]:
    m = _SUMMARY.search(text)
    if not m:
        return {}
    summary = {}
    for line in m.group(1).splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            summary[k.strip()] = v.strip()
    return summary


def _unit(key: str) -> tuple[str, bool]:
    for rx, unit, hib in _UNITS:
        if re.search(rx, key):
            return unit, hib
    return "", True


def section(text: str, name: str) -> str | None:
    m = re.search(_SECTION.format(re.escape(name)), text, re.S)
    return m.group(1) if m else None


def hpcc_outcome(text: str) -> Outcome:
    summary = parse_summary(text)
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
        if _INFO_KEYS.match(key):
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        unit, hib = _unit(key)
        outcome.metrics.append(Metric(key, value, unit, hib))
    _checks(text, summary, outcome)
    hpl_valid = all(m.valid for m in hpl.metrics) and bool(hpl.metrics)
    for m in outcome.metrics:
        if m.name.startswith("HPL_"):
            m.valid = hpl_valid
    return outcome


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
        if key in summary and float(summary[key]) > 0.01:
            outcome.invalidate(f"{key}={summary[key]} exceeds HPCC's 1% limit")
    for name in ("StarDGEMM", "SingleDGEMM", "StarFFT", "SingleFFT", "StarSTREAM",
                 "StarRandomAccess", "SingleRandomAccess"):
        body = section(text, name)
        m = re.search(r"Node\(s\) with error (\d+)", body or "")
        if m and int(m.group(1)) > 0:
            outcome.invalidate(f"{name}: {m.group(1)} node(s) with error")
