"""`dgemm`: the rate of the BLAS DGEMM a run loads, for an N x N product (own C kernel).

Calls `dgemm_` from libblas.so.3, so the `blas` parameter picks what is measured (and the
loader trace records what was loaded). Best of `reps` calls after a warm-up, Gflop/s =
2 N^3 / time; 64 sampled entries are checked against plain dot products. With several ranks
each multiplies its own matrices at once (HPCC's StarDGEMM): aggregate and per-rank figures.
"""

from __future__ import annotations

import re
from pathlib import Path

from clusterbench.bench.declare import MetricSpec, ReportUse, merit
from clusterbench.bench.metrics import Metric, Outcome
from clusterbench.bench.native import KERNEL_PARAMS, NativeKernel, have_library, memory_limit
from clusterbench.bench.params import Param
from clusterbench.bench.placement import BLAS_PARAM
from clusterbench.errors import UserInputError
from clusterbench.system.discover import SystemInfo
from clusterbench.units import format_bytes

_PER_RANK = re.compile(r"per-rank Gflop/s: min ([\d.]+) avg ([\d.]+) max ([\d.]+)")
_TOTAL = re.compile(r"aggregate Gflop/s: ([\d.]+)")
_ERROR = re.compile(r"max relative error of sampled entries: ([\d.eE+-]+)")


class Dgemm(NativeKernel):
    name = "dgemm"
    kernel = "dgemm"
    libs = ("blas",)
    uses_blas = True
    default_ranks = 1
    threaded_default = False
    metrics = (merit(MetricSpec("dgemm_gflops", "Gflop/s", True, ("n",),  # a cluster run's per-node figure:
                                uses=(ReportUse("cluster", "node", "DGEMM", "Gflop/s", order=20, key="dgemm"),
                                      ReportUse("ceiling", "dgemm")))),
               MetricSpec("dgemm_gflops_per_rank", "Gflop/s", True, ("n", "stat")))
    parameters = (
        Param("n", int, 2000, "matrix order N", minimum=1),
        Param("reps", int, 3, "timed calls (the best counts)", minimum=1),
        *KERNEL_PARAMS,
        BLAS_PARAM,
    )

    @classmethod
    def check(cls, point: dict, system: SystemInfo) -> None:
        need = 3 * 8 * point["n"] ** 2 * point["ranks"]
        limit = memory_limit(system)
        if limit is not None and need > limit:
            raise UserInputError(f"n={point['n']}: three N x N matrices per rank need {format_bytes(need)}, more "
                                 f"than the {format_bytes(limit)} this node can spare")

    @classmethod
    def available(cls) -> tuple[bool, str]:
        ok, why = super().available()
        if ok and not have_library("blas"):
            return False, "libblas.so not found (apt-get install libopenblas-dev)"
        return ok, why

    def arguments(self) -> list[str]:
        return [str(self.point["n"]), str(self.point["reps"])]

    def parse(self, workdir: Path) -> Outcome:
        text = self.stdout(workdir)
        out = Outcome()
        total, per_rank, error = _TOTAL.search(text), _PER_RANK.search(text), _ERROR.search(text)
        if not total or not per_rank:
            out.invalidate("no DGEMM rate printed (the kernel did not finish)")
            return out
        if "Check PASSED" not in text:
            out.invalidate(f"DGEMM result check failed (max relative error {error.group(1) if error else '?'})")
        labels = {"n": self.point["n"]}
        out.metrics.append(Metric("dgemm_gflops", float(total.group(1)), "Gflop/s", True, labels, out.valid))
        for stat, value in zip(("min", "avg", "max"), per_rank.groups(), strict=True):
            out.metrics.append(Metric("dgemm_gflops_per_rank", float(value), "Gflop/s", True,
                                      labels | {"stat": stat}, out.valid))
        if error:
            out.facts["max_relative_error"] = float(error.group(1))
        return out
