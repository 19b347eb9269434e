"""The main job, `clusterbench run`: what can this machine do?

Discover the node, plan an HPCC run that fits the time budget (or fills memory with
`--full`), run it with a progress bar, store everything, and summarise Rpeak, Rmax,
efficiency, DGEMM, STREAM and ping-pong from that run. With a user-provided `xhpl`, HPL also
runs standalone and Rmax comes from the best valid result of either.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from clusterbench.bench.hpcc import Hpcc, find_hpcc
from clusterbench.bench.hpl import Hpl
from clusterbench.bench.metrics import Metric
from clusterbench.bench.placement import blas_dir, choose_blas
from clusterbench.errors import UserInputError
from clusterbench.launch.mpirun import require_mpirun
from clusterbench.plan.budget import HpccTimeModel
from clusterbench.plan.hpl import Layout, check_problem, grids, layouts, n_for_memory
from clusterbench.plan.hplinput import HplInput
from clusterbench.store.db import Store
from clusterbench.suite.executor import RunResult, execute
from clusterbench.system.discover import SystemInfo

FULL_FRACTION = 0.80


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


def _history(store: Store, system_id: str) -> list[tuple[int, float, float, float]]:
    """(N, total s, HPL s, HPL Gflop/s) of the last valid HPCC runs on this system."""
    rows = store.conn.execute(
        "SELECT r.params, r.duration_s,"
        " (SELECT value FROM metrics WHERE run_id=r.id AND name='HPL_time') AS hpl_s,"
        " (SELECT value FROM metrics WHERE run_id=r.id AND name='hpl_gflops') AS gflops"
        " FROM runs r WHERE r.benchmark='hpcc' AND r.system_id=? AND r.status='ok'"
        " ORDER BY r.started_at DESC LIMIT 5", (system_id,)).fetchall()
    return [(int(json.loads(r["params"])["n"]), float(r["duration_s"]), float(r["hpl_s"]),
             float(r["gflops"])) for r in rows if r["hpl_s"] and r["gflops"] and r["duration_s"]]


def plan_suite(system: SystemInfo, store: Store, budget_s: float, full: bool = False,
               n: int | None = None, nb: int = 192, layout_name: str = "mpi",
               xhpl: str | None = None) -> SuitePlan:
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
    model = HpccTimeModel.learned(rpeak, _history(store, system.fingerprint()))
    available = system.memory.available_bytes if system.memory else system.memory_bytes()
    total = system.memory_bytes() or available
    memory_n = n_for_memory(total, FULL_FRACTION, nb) if total else 10 * nb
    if n is not None:
        reason = "N given with --n"
    elif full:
        n = memory_n
        reason = f"N fills {FULL_FRACTION:.0%} of memory (list-grade run)"
    else:
        n = model.largest_n(budget_s * 0.9, nb, memory_n)
        reason = f"largest N whose HPCC run fits {budget_s:.0f} s ({model.source})"
    check_problem(n, nb, p, q, layout.ranks, available)
    plan = SuitePlan(n, nb, p, q, layout, model.seconds(n), model, reason)
    if xhpl:
        plan.xhpl = xhpl
        plan.estimate_s += model.hpl_seconds(n) + 2
    return plan


def run_suite(system: SystemInfo, store: Store, plan: SuitePlan,
              tick: Callable[[str, float, str | None], None] | None = None,
              timeout_factor: float = 5.0) -> SuiteResult:
    system_id = system.fingerprint()
    store.save_system(system_id, system.topology.hostname, system.fingerprint_facts(), system.to_dict())
    result = SuiteResult(plan)
    timeout = max(120.0, plan.estimate_s * timeout_factor)
    blas = choose_blas(None, plan.layout.threads_per_rank)  # serial BLAS for pure MPI
    placement = {"blas": blas, "blas_dir": blas_dir(blas)}
    hpcc = Hpcc(plan.n, plan.nb, plan.p, plan.q, plan.layout, **placement)
    result.runs.append(execute(store, hpcc, system_id, timeout_s=timeout, tags={"suite": "run"},
                               tick=lambda e, s: tick and tick("hpcc", e, s)))
    if plan.xhpl:
        hpl = Hpl(HplInput(ns=[plan.n], nbs=[plan.nb], grids=[(plan.p, plan.q)]),
                  plan.layout, binary=plan.xhpl, **placement)
        result.runs.append(execute(store, hpl, system_id, timeout_s=timeout, tags={"suite": "run"},
                                   tick=lambda e, s: tick and tick("xhpl", e, s)))
    return result
