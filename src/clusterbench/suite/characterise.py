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

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clusterbench.bench.layout import Layout, layouts
from clusterbench.bench.metrics import Metric
from clusterbench.bench.registry import benchmark_class
from clusterbench.campaign.expand import expand
from clusterbench.campaign.precision import AutoRepeats
from clusterbench.campaign.spec import BenchmarkBlock, Campaign, CampaignError
from clusterbench.errors import UserInputError
from clusterbench.execution.executor import RunResult
from clusterbench.execution.loop import QuietReporter, Reporter, run_all
from clusterbench.execution.request import PlannedRun
from clusterbench.launch.mpirun import require_mpirun
from clusterbench.store.db import Store
from clusterbench.system.discover import SystemInfo
from clusterbench.tune.known import best_known

if TYPE_CHECKING:
    from clusterbench.bench.declare import TimeModel

FULL_FRACTION = 0.80
PINGPONG_MAX_LOG2 = 22  # 4 MiB: past HPCC's 2,000,000-byte messages, quick on any node
MIN_HPCC_BUDGET_S = 10.0
KERNEL_SHARE = 0.25  # of the budget, at most, for the STREAM thread scaling
HPCC_SHARE = 0.2  # of the budget for HPCC when a standalone HPL runs too (HPCC's other figures need no large N)
XHPL_BUILD_S = 20.0  # `clusterbench build hpl` from Debian's hpcc source: 14-20 s on the 2-core VM
MIN_XHPL_BUDGET_S = 8.0
MIN_XHPL_N = 2000
STREAM_NTIMES_STEPS = (None, 6, 4, 3)  # None: the kernel's default (10), as STREAM itself


@dataclass
class SuitePlan:
    n: int
    nb: int
    p: int
    q: int
    layout: Layout
    estimate_s: float
    model: Any  # HPCC's run time model (the Hpcc class's `run_time`: HPL's plus the other tests')
    reason: str
    kernels: list[PlannedRun] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # kernels that cannot run here, with why
    hpl: StandaloneHpl | None = None

    @property
    def xhpl(self) -> str | None:
        """The standalone HPL's binary (None: no standalone HPL, or not built yet)."""
        return self.hpl.binary if self.hpl else None


@dataclass
class SuiteResult:
    plan: SuitePlan
    runs: list[RunResult] = field(default_factory=list)
    repeats: dict | None = None  # the headline run's repeats (suite/repeat_headline.py), when asked for

    def best(self, name: str) -> tuple[Metric, str] | None:
        """The best valid value of `name` over the suite's runs, with its run id.

        Failed and timed-out runs have all their metrics marked invalid by the executor, so
        validity per metric is the only filter needed.
        """
        from clusterbench.analysis.flags import counts
        from clusterbench.campaign.precision import run_as_dict

        best: tuple[Metric, str] | None = None
        for run in self.runs:
            if not counts(run_as_dict(run)):  # a disturbed or suspect run is never the best (analysis/flags.py)
                continue
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


@dataclass
class StandaloneHpl:
    """The suite's standalone HPL run: its binary (None: built first), point, and why these values."""

    point: dict  # the hpl parameters: n, nb, p, q, layout and whatever the known configuration sets
    layout: Layout
    estimate_s: float
    reason: str  # why this N
    config_source: str  # where NB, grid, layout, BLAS and the knobs come from
    binary: str | None = None
    build_s: float = 0.0  # expected time of `clusterbench build hpl` when binary is None
    time_model: XhplTimeModel | None = None

    def to_dict(self) -> dict:
        """The standalone HPL's plan as `run --dry-run --json` and the summary print it."""
        return {"point": self.point, "binary": self.binary, "build_s": self.build_s, "estimate_s": self.estimate_s,
                "reason": self.reason, "config_source": self.config_source}


@dataclass(frozen=True)
class XhplTimeModel:
    """Wall time of one xhpl run: HPL's one time model (the Hpl class's `time_model`) in its measured use,
    with the start-up and the matrix's generation and check (about c x N^2) measured for xhpl, and the
    solve at this rate.

    The rate is the best evidence at hand: the known configuration's measured median, else HPL's
    efficiency learned from this system's HPCC runs, else the default efficiency. A rate measured at
    a smaller N underestimates the large-N rate, so the N it picks errs on the short side."""

    gflops: float
    source: str

    @staticmethod
    def model() -> TimeModel:
        return benchmark_class("hpl").time_model.measured()

    def seconds(self, n: int) -> float:
        return self.model().seconds(n, self.gflops)

    def largest_n(self, budget_s: float, nb: int, n_max: int) -> int:
        """The largest multiple of NB (at most n_max) whose run fits the budget; 0 when none does."""
        return self.model().largest_n(budget_s, self.gflops, nb, n_max=n_max)


def plan_suite(system: SystemInfo, store: Store, budget_s: float, full: bool = False,
               n: int | None = None, nb: int | None = None, layout_name: str | None = None,
               xhpl: str | None = None, kernels: bool = True, standalone: bool = True) -> SuitePlan:
    """Choose N, NB, grid and layout of HPCC and of the standalone HPL; refuse (exit 2) anything
    that cannot run. `standalone`: run xhpl too (`xhpl` given, found, or built first); it gets most
    of the budget, with the best configuration known for this system."""
    hpcc = benchmark_class("hpcc")
    hpcc.find_binary()
    require_mpirun()
    topo = system.topology
    all_layouts = layouts(system.nodes, topo.sockets, topo.cores_per_socket)
    if layout_name is not None and layout_name not in all_layouts:
        raise UserInputError(f"unknown layout {layout_name!r}", hint=f"choose one of: {', '.join(all_layouts)}")
    layout = all_layouts[layout_name or "mpi"]
    hpcc_nb = nb or hpcc.sizing.default_nb
    p, q = hpcc.grids(layout.ranks)[0]
    rpeak = system.rpeak_total_gflops or 10.0
    model = hpcc.run_time.learned_from(rpeak, store.recent_figures("hpcc", system.fingerprint(),
                                                                hpcc.run_time.HISTORY_METRICS))
    available = system.memory.available_bytes if system.memory else system.memory_bytes()
    total = system.memory_bytes() or available
    memory_n = hpcc.n_for_memory(total, FULL_FRACTION, hpcc_nb) if total else 10 * hpcc_nb
    kernel_runs, skipped = plan_kernels(system, None if full or n else budget_s) if kernels else ([], [])
    kernel_s = sum(r.estimate_s or 0 for r in kernel_runs)
    hpl = _standalone_config(system, store, all_layouts, nb, layout_name, xhpl, model) if standalone else None
    build_s = hpl.build_s if hpl else 0.0
    if n is not None:
        hpcc_n, reason = n, "N given with --n"
    elif full and not hpl:
        hpcc_n, reason = memory_n, f"N fills {FULL_FRACTION:.0%} of memory (list-grade run)"
    else:
        share = HPCC_SHARE if hpl else 0.9
        hpcc_budget = max(min(budget_s * share, budget_s * 0.9 - kernel_s - build_s), MIN_HPCC_BUDGET_S)
        hpcc_n = model.largest_n(hpcc_budget, hpcc_nb, memory_n)
        reason = (f"largest N whose HPCC run fits {hpcc_budget:.0f} s of the {budget_s:.0f} s budget "
                  f"({model.source})")
    hpcc.check_problem(hpcc_n, hpcc_nb, p, q, layout.ranks, available)
    plan = SuitePlan(hpcc_n, hpcc_nb, p, q, layout, model.seconds(hpcc_n) + kernel_s, model, reason,
                     kernels=kernel_runs, skipped=skipped)
    if hpl:
        left = budget_s * 0.95 - plan.estimate_s - build_s
        if _size_standalone(hpl, n, full, left, total, available, skipped):
            plan.hpl = hpl
            plan.estimate_s += hpl.estimate_s + build_s
    return plan


def _standalone_config(system: SystemInfo, store: Store, all_layouts: dict[str, Layout], nb: int | None,
                       layout_name: str | None, xhpl: str | None, model: Any) -> StandaloneHpl:
    """The standalone HPL's configuration: the best known for this system (tune/known.py) unless the
    user's --nb or --layout says otherwise, else the planner's defaults."""
    known = best_known(store, system.fingerprint())
    config: dict = {}
    measured = None  # the known configuration, when it runs as it was measured (its rate then applies)
    source = "the planner's defaults (nothing tuned or measured twice on this system yet)"
    if known:
        cand = dict(known.params)
        lay = all_layouts.get(cand.get("layout", "mpi"))
        fits = lay is not None and cand.get("p", 1) * cand.get("q", 1) == lay.ranks
        if fits and (layout_name is None or layout_name == cand.get("layout", "mpi")):
            config, source, measured = cand, known.source, known
            if nb and nb != cand.get("nb"):
                config["nb"], measured = nb, None
                source += f", NB={nb} from --nb"
    config.setdefault("layout", layout_name or "mpi")
    hpl = benchmark_class("hpl")
    config.setdefault("nb", nb or hpl.sizing.default_nb)
    lay = all_layouts[config["layout"]]
    if "p" not in config:
        config["p"], config["q"] = hpl.grids(lay.ranks)[0]
    rate = (XhplTimeModel(measured.gflops, f"the measured {measured.gflops:.1f} Gflop/s of {measured.source}")
            if measured else XhplTimeModel(model.rpeak_gflops * model.efficiency,
                                           f"{model.efficiency:.0%} of Rpeak ({model.source})"))
    return StandaloneHpl(point=config, layout=lay, estimate_s=0.0, reason=rate.source, config_source=source,
                         binary=xhpl, build_s=0.0 if xhpl else XHPL_BUILD_S, time_model=rate)


def _size_standalone(hpl: StandaloneHpl, n: int | None, full: bool, budget_s: float, total: int | None,
                     available: int | None, skipped: list[str]) -> bool:
    """N of the standalone HPL: --n, or 80% of memory with --full, or the largest N whose run fits
    what the budget leaves. False (with the reason in `skipped`) when the budget leaves too little."""
    rate = hpl.time_model
    nb = hpl.point["nb"]
    planner = benchmark_class("hpl")
    memory_n = planner.n_for_memory(total, FULL_FRACTION, nb) if total else 10 * nb
    if n is not None:
        size, why = n, "N given with --n"
    elif full:
        size, why = memory_n, f"N fills {FULL_FRACTION:.0%} of memory (list-grade run)"
    else:
        size = rate.largest_n(budget_s, nb, memory_n)
        if size < MIN_XHPL_N or budget_s < MIN_XHPL_BUDGET_S:
            skipped.append(f"hpl: the budget leaves {max(budget_s, 0):.0f} s for standalone HPL, too little "
                           f"for a useful N; raise --budget (HPCC's HPL phase gives Rmax)")
            return False
        why = f"largest N whose xhpl run fits the {budget_s:.0f} s the budget leaves (rate: {rate.source})"
    planner.check_problem(size, nb, hpl.point["p"], hpl.point["q"], hpl.layout.ranks, available,
                          require_multiple=False)
    hpl.point["n"] = size
    hpl.estimate_s = rate.seconds(size)
    hpl.reason = why
    return True


def suite_label(run: PlannedRun) -> str:
    """How the suite's progress names a run: xhpl, hpcc, or the kernel with its threads and ranks."""
    if run.benchmark in ("hpcc", "hpl"):
        return "xhpl" if run.benchmark == "hpl" else "hpcc"
    return f"{run.benchmark} " + ", ".join(f"{k}={run.params[k]}" for k in ("threads", "ranks"))


def hpl_runs(system: SystemInfo, plan: SuitePlan, timeout_factor: float) -> list[PlannedRun]:
    """HPCC at the plan's N, NB, grid and layout, then the standalone HPL with its own point."""
    point = {"n": plan.n, "nb": plan.nb, "p": plan.p, "q": plan.q, "layout": plan.layout.name}
    blocks = [BenchmarkBlock(benchmark="hpcc", params=point)]
    if plan.hpl and plan.hpl.binary:
        blocks.append(BenchmarkBlock(benchmark="hpl", params=plan.hpl.point | {"binary": plan.hpl.binary}))
    runs = expand(Campaign(name="run", benchmarks=blocks), None, system)
    for run in runs:
        estimate = plan.hpl.estimate_s if run.benchmark == "hpl" and plan.hpl else plan.model.seconds(plan.n)
        run.timeout_s = max(120.0, estimate * timeout_factor)
    return runs


def run_suite(system: SystemInfo, store: Store, plan: SuitePlan, reporter: Reporter | None = None,
              timeout_factor: float = 5.0, repeats: int = 1, auto: AutoRepeats | None = None,
              deadline: float | None = None, say=None) -> SuiteResult:
    """The kernels (each skipped with its reason if it cannot be built here), then HPCC and HPL,
    through the one run loop; every run stored, tagged suite=run. `repeats`/`auto`: the headline run
    made again (suite/repeat_headline.py), within `deadline` (monotonic) for auto."""
    system_id = store.remember_system(system)
    for run in plan.kernels:
        run.timeout_s = max(60.0, (run.estimate_s or 10) * 10)
    runs = [*plan.kernels, *hpl_runs(system, plan, timeout_factor)]

    def unavailable(run: PlannedRun, exc: UserInputError) -> None:  # no compiler, a kernel that does not build
        if run.benchmark in ("hpcc", "hpl"):
            raise exc
        plan.skipped.append(f"{run.benchmark}: {exc.message}")

    reporter = reporter or QuietReporter()
    results = run_all(store, runs, reporter, system_id=system_id, one_off=True,
                      tags={"suite": "run"}, unavailable=unavailable)
    outcome = SuiteResult(plan, results)
    if repeats > 1 or auto is not None:
        from clusterbench.suite.repeat_headline import repeat_headline

        outcome.repeats = repeat_headline(store, runs, results, reporter, system_id, count=repeats, auto=auto,
                                          deadline=deadline, say=say)
    return outcome
