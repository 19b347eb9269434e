"""Parser for McCalpin's STREAM output (stream.c 5.x): four kernels, validation, threads.

STREAM's MB/s are 10^6 bytes per second, computed from the *best* of its repetitions. The
run is valid only if STREAM printed `Solution Validates`.

Declared here for the importer and the report: `FORMAT` (a STREAM output file, one imported run,
stored as a `stream` run) and the kernels' `METRICS`: a `stream` run's are drawn in the memory
section (`METRICS`); `stream-binary` runs declare them undrawn (`BINARY_METRICS`), as the memory
section has always drawn only `stream` runs.
"""

from __future__ import annotations

import dataclasses
import re

from clusterbench.bench.declare import MetricSpec, OutputFormat, ReportUse, Result, merit
from clusterbench.bench.metrics import Metric, Outcome

_VERSION = re.compile(r"STREAM version \$Revision:\s*([\d.]+)")
_ROW = re.compile(r"^(Copy|Scale|Add|Triad):\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", re.M)
_ARRAY = re.compile(r"Array size\s*=\s*(\d+)")
_THREADS = re.compile(r"Number of Threads counted\s*=\s*(\d+)")
_REQUESTED = re.compile(r"Number of Threads requested\s*=\s*(\d+)")
_BYTES = re.compile(r"This system uses (\d+) bytes per array element")


def _int(rx: re.Pattern, text: str) -> int | None:
    m = rx.search(text)
    return int(m.group(1)) if m else None


def stream_facts(text: str) -> dict:
    version = _VERSION.search(text)
    return {"stream_version": version.group(1) if version else None, "array_size": _int(_ARRAY, text),
            "threads": _int(_THREADS, text), "threads_requested": _int(_REQUESTED, text),
            "bytes_per_element": _int(_BYTES, text)}


def stream_outcome(text: str) -> Outcome:
    out = Outcome(facts=stream_facts(text))
    # Triad first: STREAM's figure of merit is what `bench` prints on top and what anything that shows a
    # run's first metric shows (stream.c prints Copy, Scale, Add, Triad; the report's table keeps that order)
    rows = sorted(_ROW.findall(text), key=lambda row: row[0] != "Triad")
    for kernel, rate, avg, tmin, tmax in rows:
        labels = {"kernel": kernel.lower(), "avg_time_s": float(avg), "min_time_s": float(tmin),
                  "max_time_s": float(tmax)}
        out.metrics.append(Metric(f"stream_{kernel.lower()}", float(rate), "MB/s", True, labels))
    if not rows:
        out.invalidate("no STREAM result rows (Copy/Scale/Add/Triad)")
    if "Solution Validates" not in text:
        out.invalidate("STREAM did not print 'Solution Validates' (validation failed or output truncated)")
    return out.check_values()


def split_results(text: str, max_results: int) -> list[Result]:
    """A STREAM output file as one imported `stream` run, with its threads and array size."""
    outcome = stream_outcome(text)
    params = {k: outcome.facts[k] for k in ("threads", "array_size") if outcome.facts.get(k) is not None}
    return [Result("stream", params, outcome)]


def recognise(text: str) -> bool:
    return "STREAM version" in text and "Triad" in text


KERNELS = ("copy", "scale", "add", "triad")  # the memory section's table columns, in this order
# A stream run's headline in `results` listings: its Triad, as HPL's is its Gflop/s (bench/hpl/output.py).
LISTING_HEADLINE = ReportUse("listing", "headline", "Triad", "GB/s")
# Where else a `stream` run's Triad is drawn: the pinning section's figure and first column, and a
# cluster run's per-node figure (sustained over the repetitions: see analysis/cluster.py).
TRIAD_USES = (
    ReportUse("pinning", "figure", "STREAM Triad against CPUs used, per strategy", "GB/s", order=10,
              key="pinning-stream", axis="Triad (GB/s)"),
    ReportUse("pinning", "column", "Triad", "GB/s", order=10),
    ReportUse("cluster", "node", "STREAM Triad", "GB/s", order=10, key="stream_triad", sustained=True),
    ReportUse("ceiling", "memory"),  # the node's memory ceiling at a thread count (analysis/ceilings.py)
)


def _declared(spec: MetricSpec) -> MetricSpec:
    """Triad is STREAM's figure of merit (its history follows it) and a run's headline in `results` (not
    Copy, the first line stream.c prints), the kernel's and the official binary's alike."""
    if spec.name != "stream_triad":
        return spec
    return merit(dataclasses.replace(spec, uses=(*spec.uses, LISTING_HEADLINE)))


# The memory section's table gives every kernel; Triad is also drawn, as its figure.
MEMORY_FIGURE = ReportUse("memory", "triad", "STREAM Triad", key="memory-stream-triad", axis="Triad (GB/s)")
METRICS = tuple(_declared(MetricSpec(f"stream_{k}", "MB/s", True,
                                     uses=(MEMORY_FIGURE, *TRIAD_USES) if k == "triad" else (ReportUse("memory", k),)))
                for k in KERNELS)
BINARY_METRICS = tuple(_declared(MetricSpec(m.name, m.unit, m.higher_is_better, m.labels)) for m in METRICS)
# The `stream` kernel's own figures with several ranks (parsed in kernel.py): per-rank min/avg/max,
# and the figure HPCC's StarSTREAM would print.
KERNEL_METRICS = (*METRICS, *(MetricSpec(f"stream_{k}_per_rank", "MB/s", True, ("stat",)) for k in KERNELS),
                  *(MetricSpec(f"stream_{k}_hpcc_star", "MB/s", True) for k in KERNELS))
FORMAT = OutputFormat("stream", recognise, split_results, title="STREAM")
