"""`affinity`: where each rank and thread really runs (own MPI + OpenMP C kernel).

Prints, for every thread of every rank, the host, the CPU it runs on and the CPUs it may run
on. Stored as facts (one entry per thread), with metrics that make a placement checkable at a
glance: how many distinct CPUs the threads run on, and the largest allowed set.
"""

from __future__ import annotations

import re
from pathlib import Path

from clusterbench.bench.declare import MetricSpec
from clusterbench.bench.metrics import Metric, Outcome
from clusterbench.bench.native import KERNEL_PARAMS, NativeKernel
from clusterbench.bench.params import Param
from clusterbench.system.topology import parse_cpulist

_LINE = re.compile(r"^host=(\S+) rank=(\d+) thread=(\d+) cpu=(-?\d+) allowed=(\S*)$", re.M)


def parse_affinity(text: str) -> list[dict]:
    return [{"host": h, "rank": int(r), "thread": int(t), "cpu": int(c), "allowed": parse_cpulist(a)}
            for h, r, t, c, a in _LINE.findall(text)]


class Affinity(NativeKernel):
    name = "affinity"
    kernel = "affinity"
    needs_mpi = True
    openmp = True
    default_ranks = 0  # one per core
    threaded_default = False
    parameters = (*KERNEL_PARAMS, Param("hold_ms", int, 0, "each thread stays busy this long after reporting, so "
                                        "the placement probe sees every thread in place", minimum=0, maximum=60_000))
    metrics = (MetricSpec("distinct_cpus", "", True), MetricSpec("max_allowed_cpus", "", False))
    # The probe's lines read back (host, rank, thread, cpu, allowed): the preflight's MPI hello-world
    # runs this kernel too, and asks the registry for it rather than importing this module.
    placement_lines = staticmethod(parse_affinity)

    def arguments(self) -> list[str]:
        return [str(self.point.get("hold_ms") or 0)]

    def parse(self, workdir: Path) -> Outcome:
        rows = parse_affinity(self.stdout(workdir))
        out = Outcome(facts={"placement": rows})
        expected = self.point["ranks"] * self.point["threads"]
        if len(rows) != expected:
            out.invalidate(f"expected {expected} rank/thread lines, found {len(rows)}")
        if rows:
            out.metrics.append(Metric("distinct_cpus", len({(r["host"], r["cpu"]) for r in rows}), "", True))
            out.metrics.append(Metric("max_allowed_cpus", max(len(r["allowed"]) for r in rows), "", False))
        return out
