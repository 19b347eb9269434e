"""`clock`: what one core sustains on vector FMAs, the node's real clock as the FPU sees it (own C kernel).

A node that throttles (heat, a power cap, a powersave governor) runs every benchmark slower
without any error; its FMA rate says so in a fraction of a second, and the whole-cluster run
compares it across nodes. The kernel is the node-state script's fmaclock (native/src/fmaclock.c):
independent FMA chains at the widest vector width, in slices, the best slice and the mean over
all slices reported. The best slice is the clock when nothing else ran; the mean also feels
whatever shares the core.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from clusterbench.bench.declare import MetricSpec, ReportUse
from clusterbench.bench.metrics import Metric, Outcome
from clusterbench.bench.native import KERNEL_PARAMS, NativeKernel
from clusterbench.bench.params import Param

_LINE = re.compile(r"^(\w+) (-?[\d.]+(?:[eE][-+]?\d+)?)$", re.M)
MAX_PLAUSIBLE_GFLOPS = 1000.0  # one core: 2 x 512-bit FMA pipes at 8 GHz is 256; beyond this the timer lied


class Clock(NativeKernel):
    name = "clock"
    kernel = "fmaclock"
    default_ranks = 1
    threaded_default = False
    # A cluster run compares nodes on the mean over the slices (analysis/cluster.py says why).
    metrics = (MetricSpec("clock_gflops", "Gflop/s", True, uses=(ReportUse("ceiling", "fma"),)),  # a core's FMA peak
               MetricSpec("clock_gflops_mean", "Gflop/s", True,
                          uses=(ReportUse("cluster", "node", "FMA rate (one core)", "Gflop/s", order=40,
                                          key="clock"),)))
    parameters = (
        Param("ms", int, 300, "how long the kernel runs, in milliseconds", minimum=10, maximum=5000),
        *KERNEL_PARAMS,
    )

    def arguments(self) -> list[str]:
        return ["--ms", str(self.point["ms"])]

    @classmethod
    def estimate_s(cls, point: dict, system) -> float | None:
        return 0.2 + point["ms"] / 1000

    def parse(self, workdir: Path) -> Outcome:
        values = {k: float(v) for k, v in _LINE.findall(self.stdout(workdir))}
        out = Outcome(facts={k: values[k] for k in ("vector_doubles", "chains", "fma", "cpu", "slices")
                             if k in values})
        best, mean = values.get("gflops"), values.get("gflops_mean")
        if best is None or mean is None:
            out.invalidate("fmaclock printed no rate (it did not finish)")
            return out
        if not all(math.isfinite(v) and 0 < v < MAX_PLAUSIBLE_GFLOPS for v in (best, mean)):
            out.invalidate(f"impossible FMA rate (best {best}, mean {mean} Gflop/s)")
        out.metrics.append(Metric("clock_gflops", best, "Gflop/s", True, {}, out.valid))
        out.metrics.append(Metric("clock_gflops_mean", mean, "Gflop/s", True, {}, out.valid))
        return out
