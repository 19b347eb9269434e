"""The main job, `clusterbench run`: what can this machine do?

Discover the node, plan an HPCC run that fits the time budget (or fills memory with
`--full`), run it with a progress bar, store everything, and summarise Rpeak, Rmax,
efficiency, DGEMM, STREAM and ping-pong from that run. With a user-provided `xhpl`, HPL also
runs standalone and Rmax comes from the best valid result of either.

Before HPCC, the built-in kernels add what HPCC alone cannot say: STREAM Triad as the
thread count grows (1, 2, 4, ... cores; arrays by STREAM's 4 x LLC rule, where HPCC sizes
them from the HPL matrix and a small N leaves them partly in cache) and the ping-pong time
and bandwidth across message sizes 0..4 MiB. A kernel that cannot build or run here is
skipped with its reason; it never stops the suite.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from clusterbench.bench.hpcc.benchmark import find_hpcc
from clusterbench.bench.hpcc.budget import HpccTimeModel
from clusterbench.bench.hpl.planner import check_problem, grids, n_for_memory
from clusterbench.bench.layout import Layout, layouts
from clusterbench.bench.metrics import Metric
from clusterbench.bench.registry import benchmark_class
from clusterbench.campaign.expand import expand
from clusterbench.campaign.spec import BenchmarkBlock, Campaign, CampaignError
from clusterbench.errors import UserInputError
from clusterbench.execution.executor import RunResult
from clusterbench.execution.loop import QuietReporter, run_all
from clusterbench.execution.request import PlannedRun
from clusterbench.launch.mpirun import require_mpirun
from clusterbench.store.db import Store
from clusterbench.system.discover import SystemInfo

FULL_FRACTION = 0.80
PINGPONG_MAX_LOG2 = 22  # 4 MiB: past HPCC's 2,000,000-byte messages, quick on any node
MIN_HPCC_BUDGET_S = 10.0
KERNEL_SHARE = 0.4  # of the budget, at most, for the STREAM thread scaling
STREAM_NTIMES_STEPS = (None, 6, 4, 3)  # None: the kernel's default (10), as STREAM itself


@dataclass
class SuitePlan:
    n: int
    nb: int
    p: int
    q: int
    layout: Layout
    estimate_s: float
    model: HpccTimeModel
    reason: str
    xhpl: str | None = None
    kernels: list[PlannedRun] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # kernels that cannot run here, with why


@dataclass
class SuiteResult:
    plan: SuitePlan
    runs: list[RunResult] = field(default_factory=list)

    def best(self, name: str) -> tuple[Metric, str] | None:
        """The best valid value of `name` over the suite's runs, with its run id.

        Failed and timed-out runs have all their metrics marked invalid by the executor, so
        validity per metric is the only filter needed.
        """
        best: tuple[Metric, str] | None = None
        for run in self.runs:
            m = run.outcome.best(name)
            if m and (best is None or (m.value > best[0].value) == m.higher_is_better):
                best = (m, run.id)
        return best

    def metric(self, name: str) -> Metric | None:
        found = self.best(name)
        return found[0] if found else None

    def rmax(self) -> tuple[Metric, str] | None:
        return self.best("hpl_gflops")


def thread_counts(cores: int) -> list[int]:
    """1, 2, 4, ... up to the core count, and the core count itself."""
    return sorted({*(2**k for k in range(cores.bit_length()) if 2**k <= cores), cores})


def plan_kernels(system: SystemInfo, budget_s: float | None = None) -> tuple[list[PlannedRun], list[str]]:
    """The kernel runs of the suite, and a reason for each kernel left out.

    STREAM's arrays follow its rule (4 x the last-level cache), which on a node reporting a large
    L3 makes each run long; within a `budget_s`, the STREAM runs get at most KERNEL_SHARE of it:
    fewer repetitions first (never under 3), then none, with the reason printed."""
    cores = max(system.topology.cores_total, 1)
    skipped: list[str] = []
    runs = _stream_runs(system, budget_s, skipped, cores)
    if cores >= 2:
        runs += _kernel_runs(BenchmarkBlock(benchmark="pingpong", params={"max_log2": PINGPONG_MAX_LOG2}),
                             system, skipped)
    else:
        skipped.append("pingpong: one core, no second rank to talk to")
    return runs, skipped


def _stream_runs(system: SystemInfo, budget_s: float | None, skipped: list[str], cores: int) -> list[PlannedRun]:
    space = {"threads": thread_counts(cores)}
    runs = _kernel_runs(BenchmarkBlock(benchmark="stream", space=space), system, skipped)
    if not budget_s or not runs:
        return runs
    share = KERNEL_SHARE * budget_s
    for ntimes in STREAM_NTIMES_STEPS:
        fitting = runs if ntimes is None else _kernel_runs(
            BenchmarkBlock(benchmark="stream", params={"ntimes": ntimes}, space=space), system, skipped)
        if sum(r.estimate_s or 0 for r in fitting) <= share:
            return fitting
    need = sum(r.estimate_s or 0 for r in fitting)
    skipped.append(f"stream: its arrays ({runs[0].params['n']:,} elements each, STREAM's 4 x LLC rule) need "
                   f"about {need:.0f} s even at 3 repetitions, more than {KERNEL_SHARE:.0%} of the budget; "
                   f"raise --budget")
    return []


def _kernel_runs(block: BenchmarkBlock, system: SystemInfo, skipped: list[str]) -> list[PlannedRun]:
    ok, why = benchmark_class(block.benchmark).available()
    if not ok:
        skipped.append(f"{block.benchmark}: {why}")
        return []
    try:
        return expand(Campaign(name="run", benchmarks=[block]), None, system)
    except CampaignError as exc:
        skipped.append(f"{block.benchmark}: {exc.message}")
        return []


def plan_suite(system: SystemInfo, store: Store, budget_s: float, full: bool = False,
               n: int | None = None, nb: int = 192, layout_name: str = "mpi",
               xhpl: str | None = None, kernels: bool = True) -> SuitePlan:
    """Choose N, NB, grid and layout; refuse (exit 2) anything that cannot run."""
    find_hpcc()
    require_mpirun()
    topo = system.topology
    all_layouts = layouts(system.nodes, topo.sockets, topo.cores_per_socket)
    if layout_name not in all_layouts:
        raise UserInputError(f"unknown layout {layout_name!r}", hint=f"choose one of: {', '.join(all_layouts)}")
    layout = all_layouts[layout_name]
    p, q = grids(layout.ranks)[0]
    rpeak = system.rpeak_total_gflops or 10.0
    model = HpccTimeModel.learned(rpeak, store.hpcc_history(system.fingerprint()))
    available = system.memory.available_bytes if system.memory else system.memory_bytes()
    total = system.memory_bytes() or available
    memory_n = n_for_memory(total, FULL_FRACTION, nb) if total else 10 * nb
    kernel_runs, skipped = plan_kernels(system, None if full or n else budget_s) if kernels else ([], [])
    kernel_s = sum(r.estimate_s or 0 for r in kernel_runs)
    if n is not None:
        reason = "N given with --n"
    elif full:
        n = memory_n
        reason = f"N fills {FULL_FRACTION:.0%} of memory (list-grade run)"
    else:
        hpcc_budget = max(budget_s * 0.9 - kernel_s, MIN_HPCC_BUDGET_S)
        n = model.largest_n(hpcc_budget, nb, memory_n)
        reason = (f"largest N whose HPCC run fits {hpcc_budget:.0f} s of the {budget_s:.0f} s budget "
                  f"({model.source})")
    check_problem(n, nb, p, q, layout.ranks, available)
    plan = SuitePlan(n, nb, p, q, layout, model.seconds(n) + kernel_s, model, reason,
                     kernels=kernel_runs, skipped=skipped)
    if xhpl:
        plan.xhpl = xhpl
        plan.estimate_s += model.hpl_seconds(n) + 2
    return plan


class _Ticks(QuietReporter):
    """The run loop's reporter for the suite: each run's elapsed time, under a label, to `tick`."""

    def __init__(self, callback: Callable[[str, float, str | None], None] | None) -> None:
        self.callback = callback

    @staticmethod
    def label(run: PlannedRun) -> str:
        if run.benchmark in ("hpcc", "hpl"):
            return "xhpl" if run.benchmark == "hpl" else "hpcc"
        return f"{run.benchmark} " + ", ".join(f"{k}={run.params[k]}" for k in ("threads", "ranks"))

    def tick(self, run, elapsed, detail) -> None:
        if self.callback:
            self.callback(self.label(run), elapsed, detail)


def hpl_runs(system: SystemInfo, plan: SuitePlan, timeout_s: float) -> list[PlannedRun]:
    """HPCC (and standalone HPL with a given xhpl) at the plan's N, NB, grid and layout."""
    point = {"n": plan.n, "nb": plan.nb, "p": plan.p, "q": plan.q, "layout": plan.layout.name}
    blocks = [BenchmarkBlock(benchmark="hpcc", params=point)]
    if plan.xhpl:
        blocks.append(BenchmarkBlock(benchmark="hpl", params=point | {"binary": plan.xhpl}))
    runs = expand(Campaign(name="run", benchmarks=blocks), None, system)
    for run in runs:
        run.timeout_s = timeout_s
    return runs


def run_suite(system: SystemInfo, store: Store, plan: SuitePlan,
              tick: Callable[[str, float, str | None], None] | None = None,
              timeout_factor: float = 5.0) -> SuiteResult:
    """The kernels (each skipped with its reason if it cannot be built here), then HPCC and HPL,
    through the one run loop; every run stored, tagged suite=run."""
    system_id = store.remember_system(system)
    for run in plan.kernels:
        run.timeout_s = max(60.0, (run.estimate_s or 10) * 10)
    runs = [*plan.kernels, *hpl_runs(system, plan, max(120.0, plan.estimate_s * timeout_factor))]

    def unavailable(run: PlannedRun, exc: UserInputError) -> None:  # no compiler, a kernel that does not build
        if run.benchmark in ("hpcc", "hpl"):
            raise exc
        plan.skipped.append(f"{run.benchmark}: {exc.message}")

    results = run_all(store, runs, _Ticks(tick), system_id=system_id, one_off=True, tags={"suite": "run"},
                      unavailable=unavailable)
    return SuiteResult(plan, results)
