"""`stream`: memory bandwidth by the STREAM method (clusterbench's own C kernel).

Copy, Scale, Add and Triad over three arrays; the best of NTIMES repetitions excluding the
first; MB/s of 10^6 bytes counted as STREAM counts them; validation of the results. Arrays are
sized as stream.c 5.10 sizes them for a valid run, unless `n` is given: at least its default of
10,000,000 elements, and at least four times the node's total last-level cache (STREAM's rule;
smaller arrays partly stay in cache and read too fast, or time so briefly that the noise of a
shared VM decides the best repetition). Threads are OpenMP threads; with several ranks every
rank runs its own arrays at the same time, every kernel between two barriers as in HPCC's
StarSTREAM; the table reports the aggregate (all bytes over the slowest rank's time), with per-
rank min/avg/max, and the figure HPCC itself would print (`stream_<kernel>_hpcc_star`: one
rank's bytes over the fastest rank's time, which is why HPCC's StarSTREAM x ranks exceeds what
the node sustains).
"""

from __future__ import annotations

import re
from pathlib import Path

from clusterbench.bench.metrics import Metric, Outcome
from clusterbench.bench.native import GUESS_MEMORY_BYTES_S, GUESS_START_S, KERNEL_PARAMS, NativeKernel, memory_limit
from clusterbench.bench.params import Param
from clusterbench.bench.stream import output
from clusterbench.bench.stream.output import stream_outcome
from clusterbench.errors import UserInputError
from clusterbench.system.discover import SystemInfo
from clusterbench.units import format_bytes

MIN_ELEMENTS = 10_000_000  # stream.c's STREAM_ARRAY_SIZE default
_PER_RANK = re.compile(r"^Per-rank (\w+):\s+min ([\d.]+) avg ([\d.]+) max ([\d.]+) MB/s", re.M)
_HPCC_STAR = re.compile(r"^HPCC-star (\w+):\s+([\d.]+) MB/s", re.M)


def elements_for(system: SystemInfo) -> int:
    """STREAM's rule: each array at least 4 x the total last-level cache of the node, and no
    smaller than stream.c's default array."""
    llc = system.topology.last_level_cache_bytes() or 0
    return max(MIN_ELEMENTS, -(-4 * llc // 8))


class Stream(NativeKernel):
    name = "stream"
    kernel = "stream"
    openmp = True
    default_ranks = 1
    output_formats = (output.FORMAT,)  # an imported STREAM output is stored as a `stream` run
    metrics = output.KERNEL_METRICS
    parameters = (
        Param("n", int, None, "elements per array (default: 4 x last-level cache, at least 1e7)", minimum=1000),
        Param("ntimes", int, 10, "repetitions of each kernel (the first is not counted)", minimum=2),
        *KERNEL_PARAMS,
    )

    @classmethod
    def check(cls, point: dict, system: SystemInfo) -> None:
        point["n"] = point.get("n") or elements_for(system)
        need = 3 * 8 * point["n"] * point["ranks"]
        limit = memory_limit(system)
        if limit is not None and need > limit:
            raise UserInputError(f"n={point['n']}: the arrays need {format_bytes(need)} over {point['ranks']} "
                                 f"rank(s), more than the {format_bytes(limit)} this node can spare",
                                 hint=f"use n <= {limit // (24 * point['ranks'])}")

    @classmethod
    def default_n(cls, system: SystemInfo) -> int:
        """Elements per array when `n` is not given: STREAM's rule (`elements_for`)."""
        return elements_for(system)

    @classmethod
    def estimate_s(cls, point: dict, system: SystemInfo) -> float | None:
        """Bytes moved (first touch and the ten words of the four kernels per repetition)."""
        moved = 8 * point["n"] * point["ranks"] * (5 + 10 * point["ntimes"])
        return GUESS_START_S + moved / GUESS_MEMORY_BYTES_S

    def arguments(self) -> list[str]:
        return [str(self.point["n"]), str(self.point["ntimes"])]

    def parse(self, workdir: Path) -> Outcome:
        text = self.stdout(workdir)
        out = stream_outcome(text)
        for kernel, lo, avg, hi in _PER_RANK.findall(text) if self.point["ranks"] > 1 else ():
            for stat, value in (("min", lo), ("avg", avg), ("max", hi)):
                out.metrics.append(Metric(f"stream_{kernel.lower()}_per_rank", float(value), "MB/s", True,
                                          {"stat": stat}))
        for kernel, value in _HPCC_STAR.findall(text) if self.point["ranks"] > 1 else ():
            out.metrics.append(Metric(f"stream_{kernel.lower()}_hpcc_star", float(value), "MB/s", True))
        return out.whole_run_validity()
