"""`clusterbench run -w NODESET` as one library call: check the nodes, build what is missing, plan,
run the plan through the engine, and read the verdicts back from the store.

The CLI parses the options, calls `run_cluster_job` once and prints what its events and the
result say; the job never returns to the CLI half-way (it used to go cli -> suite -> cli three
times: for the preflight, the plan and the run). What the CLI shows while the job works, it is
told through `ClusterJobEvents`; everything the job decides (refuse after a failed preflight, go on
without HPL when xhpl cannot be built) is decided here.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from clusterbench.analysis.cluster import ClusterView
from clusterbench.analysis.golden import drain_list, judged_view
from clusterbench.analysis.outliers import Rule
from clusterbench.bench.registry import benchmark_class
from clusterbench.cluster.preflight import Preflight, check_cluster
from clusterbench.errors import EnvironmentProblem
from clusterbench.execution.loop import QuietReporter, Reporter
from clusterbench.launch.hosts import Inventory
from clusterbench.store.db import Store
from clusterbench.suite.cluster import ClusterPlan, ClusterResult, check_inventory, plan_cluster, run_cluster
from clusterbench.suite.xhpl import build_xhpl
from clusterbench.system.discover import discover


@dataclass(frozen=True)
class ClusterJobOptions:
    """What `run -w` was asked for (cli/run_cmd.py's options, parsed)."""

    budget_s: float
    interconnect: str = "auto"
    mpi: str | None = None
    hpl: bool = True
    xhpl: str | None = None  # a given xhpl; None: found, else built once
    iperf: bool = False
    rule: Rule = field(default_factory=Rule)
    force: bool = False  # run even when the preflight finds problems
    dry_run: bool = False  # plan only
    stage: bool = False  # copy what the nodes cannot see to each node first (cluster/staging.py)
    pairs: bool = True
    drain_list: Path | None = None  # write the Slurm drain commands for the failing nodes here (never run)


class ClusterJobEvents(Protocol):
    """What the job tells whoever shows it, in order."""

    def building(self, what: str) -> AbstractContextManager: ...
    def build_failed(self, what: str, why: str) -> None: ...
    def preflight_node(self, done: int, total: int) -> None: ...  # (0, total) first, then one per node
    def preflight_done(self, preflight: Preflight, inv: Inventory, proceeds: bool) -> None: ...
    def planned(self, plan: ClusterPlan) -> None: ...
    def runs(self, plan: ClusterPlan) -> AbstractContextManager[Reporter]: ...  # the engine's reporter


class QuietEvents:
    """Events that show nothing (a library caller, a test)."""

    def building(self, what: str) -> AbstractContextManager:
        return nullcontext()

    def build_failed(self, what: str, why: str) -> None:
        pass

    def preflight_node(self, done: int, total: int) -> None:
        pass

    def preflight_done(self, preflight: Preflight, inv: Inventory, proceeds: bool) -> None:
        pass

    def planned(self, plan: ClusterPlan) -> None:
        pass

    def runs(self, plan: ClusterPlan) -> AbstractContextManager[Reporter]:
        return nullcontext(QuietReporter())


@dataclass
class ClusterJob:
    """What the job did: the preflight and the plan always; the runs and the stored verdicts unless
    it was a dry run."""

    preflight: Preflight
    plan: ClusterPlan
    result: ClusterResult | None = None
    view: ClusterView | None = None
    drain_list: DrainList | None = None  # what --drain-list wrote


@dataclass
class DrainList:
    """The drain list written (or not: `error`), and the nodes it names."""

    path: Path
    nodes: list[str]
    error: str | None = None


class PreflightFailed(EnvironmentProblem):
    """The nodes are not fit to run together, and --force was not given (exit 1)."""

    def __init__(self, preflight: Preflight):
        super().__init__("the preflight found problems: fix them, or run anyway with --force")
        self.preflight = preflight


def run_cluster_job(store: Store, inv: Inventory, options: ClusterJobOptions,
                    events: ClusterJobEvents | None = None) -> ClusterJob:
    """The whole-cluster job, from the node list to the stored verdicts (see the module docstring)."""
    events = events or QuietEvents()
    check_inventory(inv)
    if options.stage:  # CLUSTERBENCH_STAGE=1 asks for it too
        from clusterbench.cluster.staging import request

        request()
    local = discover()
    binary = _xhpl(options, events) if options.hpl else None
    done = [0]
    events.preflight_node(0, len(inv.hosts))

    def one_node_checked(_facts) -> None:
        done[0] += 1
        events.preflight_node(done[0], len(inv.hosts))

    preflight = check_cluster(inv, [binary] if binary else [], mpi_hello=True, on_node=one_node_checked,
                              mpis=(options.mpi,), shared_dir=store.runs_dir)
    proceeds = preflight.ok or options.force
    events.preflight_done(preflight, inv, proceeds)
    if not proceeds:
        raise PreflightFailed(preflight)
    plan = plan_cluster(inv, preflight, local, options.budget_s, interconnect=options.interconnect,
                        mpi=options.mpi, hpl_binary=binary, hpl=options.hpl, iperf=options.iperf,
                        pairs=options.pairs)
    events.planned(plan)
    if options.dry_run:
        return ClusterJob(preflight, plan)
    with events.runs(plan) as reporter:
        result = run_cluster(store, plan, reporter, options.rule)
    job = ClusterJob(preflight, plan, result, judged_view(store, result.cluster_run, options.rule))
    if options.drain_list is not None:
        job.drain_list = write_drain_list(options.drain_list, job.view)
    return job


def write_drain_list(path: Path, view: ClusterView) -> DrainList:
    """The drain list (analysis/golden.drain_list) written to `path` atomically: a temporary file beside
    it, then renamed over it, so a reader never sees half a list. Never executed, never made executable.
    A failure to write is returned, not raised: the cluster run is stored and its verdicts are printed."""
    text, nodes = drain_list(view, datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"))
    path = Path(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        return DrainList(path, [], f"{path}: {exc.strerror or exc}")
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return DrainList(path, nodes)


def _xhpl(options: ClusterJobOptions, events: ClusterJobEvents) -> str | None:
    """The xhpl of the run: given, found, else built once (the build cache keeps it); None (no HPL
    in this run, said through the events) when it cannot be built. A dry run builds nothing."""
    found = benchmark_class("hpl").find_binary(options.xhpl, options.mpi)
    if found or options.dry_run:
        return found
    built, why = build_xhpl(events.building, options.mpi)
    if built is None:
        events.build_failed("xhpl", why)
        return None
    return str(built.binary)

