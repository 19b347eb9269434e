"""The one engine that runs plans: planned runs one after another here or through mpirun, as batch
jobs (Slurm, LSF, PBS: execution/batch_jobs.py), or in phases of runs started together.

`campaign run`, `bench`, `run` and the tuner's trials go through `run_all` (runs one after
another); `run -w` goes through `run_phases` (each phase: runs started at one start line, each on
nodes of its own, execution/together.py; the plan may change between phases: a size learned from
the first results, runs measured again). Both make each run's benchmark instance, start it
through the executor (which stores it), report progress to one `Reporter`, and turn Ctrl-C,
SIGTERM and SIGHUP into one `errors.Interrupted` once the runs in flight are stored as
interrupted, which the CLI reports in one place. `run_all` also gives an ETA that corrects itself
from measured durations and spaces repeat rounds over time when asked (`spread`: here by waiting,
for batch jobs by the begin time each job is submitted with). What is particular to a command
(its lock, skipping finished runs, fresh ids, its tags, when to resize or measure again) is
decided by the caller, before the engine or in its hooks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from clusterbench.bench.base import Benchmark
from clusterbench.errors import Interrupted, UserInputError
from clusterbench.execution import quiet
from clusterbench.execution.executor import RunRequest, RunResult, changes_nodes, execute, prefetch_state
from clusterbench.execution.request import PlannedRun
from clusterbench.execution.together import run_together
from clusterbench.launch.process import signals_as_interrupt
from clusterbench.launch.site import LOCAL, Site
from clusterbench.store.db import Store


class Reporter(Protocol):
    def start(self, pending: list[PlannedRun], done: int, eta: Eta) -> None: ...
    def run_started(self, run: PlannedRun) -> None: ...
    def tick(self, run: PlannedRun, elapsed: float, detail: str | None) -> None: ...
    def run_finished(self, run: PlannedRun, result: RunResult, eta: Eta) -> None: ...
    def waiting(self, seconds: float, reason: str) -> None: ...
    # Optional (run_phases): `phase_started(phase, done_s, planned_s)`, before each phase's runs start.


class QuietReporter:
    """A reporter that says nothing: callers that show only part of the progress override those hooks."""

    def start(self, pending: list[PlannedRun], done: int, eta: Eta) -> None:
        pass

    def run_started(self, run: PlannedRun) -> None:
        pass

    def tick(self, run: PlannedRun, elapsed: float, detail: str | None) -> None:
        pass

    def run_finished(self, run: PlannedRun, result: RunResult, eta: Eta) -> None:
        pass

    def waiting(self, seconds: float, reason: str) -> None:
        pass


@dataclass
class Eta:
    """Remaining time from the planned estimates, corrected by how long finished runs took.

    Estimates are scaled by (sum of measured durations / sum of their estimates) over the runs
    already done; runs of a benchmark without an estimate take the mean measured duration of
    its finished runs in the same block.
    """

    pending: dict[str, PlannedRun]
    measured: list[tuple[PlannedRun, float]] = field(default_factory=list)

    def add(self, run: PlannedRun, seconds: float) -> None:
        self.pending.pop(run.id, None)
        self.measured.append((run, seconds))

    def ratio(self) -> float:
        pairs = [(d, r.estimate_s) for r, d in self.measured if r.estimate_s]
        return sum(d for d, _ in pairs) / sum(e for _, e in pairs) if pairs else 1.0

    def seconds(self) -> float | None:
        """None while some pending run has neither an estimate nor a measured sibling."""
        ratio, total = self.ratio(), 0.0
        sums: dict[tuple[str, str], list[float]] = {}  # (block, benchmark) -> [seconds, runs]
        for r, d in self.measured:
            acc = sums.setdefault((r.block, r.benchmark), [0.0, 0])
            acc[0] += d
            acc[1] += 1
        for run in self.pending.values():
            if run.estimate_s is not None:
                total += run.estimate_s * ratio
                continue
            acc = sums.get((run.block, run.benchmark))
            if not acc:
                return None
            total += acc[0] / acc[1]
        return total


@dataclass
class Spread:
    """Space repeat rounds `interval_s` apart (round r starts r x interval after the first pending)."""

    interval_s: float
    rounds: int


def run_all(store: Store, runs: list[PlannedRun], reporter: Reporter, *, site: Site = LOCAL,
            system_id: str | None = None, eta: Eta | None = None, done: int = 0, spread: Spread | None = None,
            one_off: bool = False, tags: dict | None = None,
            unavailable: Callable[[PlannedRun, UserInputError], None] | None = None) -> list[RunResult]:
    """Run every planned run and store each; returns their results in order.

    `one_off`: the runs belong to no campaign (`bench`, `run`): each gets a new time-ordered id
    instead of its planned one; `tags` replaces the planned tags; `unavailable`, when given, is told about a run whose
    benchmark cannot be made here (no compiler, a kernel that does not build) and the loop goes on
    without it, else that error stops the loop."""
    eta = eta or Eta({r.id: r for r in runs})
    reporter.start(runs, done, eta)
    results: list[RunResult] = []

    def finished(run: PlannedRun, result: RunResult) -> None:
        results.append(result)
        eta.add(run, result.duration_s)
        reporter.run_finished(run, result, eta)

    try:
        with signals_as_interrupt():
            _run_each(store, runs, reporter, finished, site, system_id, spread, one_off, tags, unavailable)
    except KeyboardInterrupt:
        raise Interrupted(f"{len(results)} run(s) finished here are stored; the run in flight is stored as "
                          "interrupted (see `clusterbench results`).") from None
    return results


def _run_each(store: Store, runs: list[PlannedRun], reporter: Reporter,
              finished: Callable[[PlannedRun, RunResult], None], site: Site, system_id: str | None,
              spread: Spread | None, one_off: bool, tags: dict | None,
              unavailable: Callable[[PlannedRun, UserInputError], None] | None) -> None:
    """run_all's loop: each run executed and stored in turn, or all handed to the batch scheduler."""
    if site.batch():
        from clusterbench.execution.batch_jobs import run_jobs  # here: Slurm, LSF and PBS only when asked for

        run_jobs(store, runs, system_id, site, reporter.run_started, reporter.tick, finished,
                 spread_s=spread.interval_s if spread and spread.interval_s else None)
        return
    t0, first_round = time.monotonic(), runs[0].repeat if runs else 0
    for run in runs:
        if spread and spread.interval_s:
            wait = t0 + (run.repeat - first_round) * spread.interval_s - time.monotonic()
            if wait > 0:
                reporter.waiting(wait, f"--spread: repeat {run.repeat + 1} of {spread.rounds}")
                time.sleep(wait)
        if not changes_nodes(run.settings):  # the state read overlaps making the run (execute takes it)
            prefetch_state(site, run.env)
        try:
            bench = run.bench_class().from_point(run.params)
        except UserInputError as exc:
            if unavailable is None:
                raise
            unavailable(run, exc)
            continue
        quiet.check_sites([site], reporter.waiting)
        reporter.run_started(run)
        request = RunRequest.planned(run, bench, site, system_id, one_off=one_off, tags=tags)
        result = execute(store, request, tick=lambda elapsed, detail, run=run: reporter.tick(run, elapsed, detail))
        finished(run, result)


@dataclass
class Phase:
    """Runs started together at one start line, each on nodes of its own (a per-node benchmark on
    every node, a round of disjoint node pairs, HPL across all nodes); a phase of one run is a run
    made alone. `sites[i]` and `tags[i]` are where run i goes and the tags it is stored with."""

    label: str
    kind: str
    runs: list[PlannedRun]
    sites: list[Site]
    tags: list[dict]
    estimate_s: float = 0.0


def run_phases(store: Store, phases: list[Phase], reporter: Reporter, *, system_id: str | None = None,
               before: Callable[[Phase, list[RunResult]], bool] | None = None,
               after: Callable[[Phase, list[RunResult], list[Phase]], list[Phase]] | None = None,
               make_bench: Callable[[Phase, PlannedRun], Benchmark] | None = None) -> list[RunResult]:
    """Every phase in turn, the runs of a phase at once, each stored as a one-off run; their results.

    `before(phase, results so far)` may change the phase's runs (a size learned from what ran) and
    returns False to skip it; `after(phase, results so far, phases left)` returns phases to run next
    (measuring again what looks out of line); `make_bench(phase, run)` makes a run's benchmark
    instance when the phase needs more than `from_point`. The reporter's optional `phase_started`
    is told each phase with the seconds done and planned (the estimates of the phases, corrected by
    the time each took)."""
    queue = list(phases)
    results: list[RunResult] = []
    done_s, planned_s = 0.0, sum(p.estimate_s for p in queue)
    eta = Eta({r.id: r for p in queue for r in p.runs})
    reporter.start([r for p in queue for r in p.runs], 0, eta)
    phase_started = getattr(reporter, "phase_started", None)
    try:
        with signals_as_interrupt():
            while queue:
                phase = queue.pop(0)
                if before is not None and not before(phase, results):
                    continue
                if not phase.runs:
                    continue
                if phase_started:
                    phase_started(phase, done_s, planned_s)
                started = time.monotonic()
                results += _run_phase(store, phase, reporter, eta, system_id, make_bench)
                done_s += time.monotonic() - started
                planned_s = max(planned_s, done_s + sum(p.estimate_s for p in queue))
                if after is not None:
                    again = after(phase, results, queue)
                    queue[:0] = again
                    planned_s += sum(p.estimate_s for p in again)
    except KeyboardInterrupt:
        raise Interrupted(f"{len(results)} run(s) finished here are stored; the runs in flight are stored as "
                          "interrupted (see `clusterbench results`).") from None
    return results


def _run_phase(store: Store, phase: Phase, reporter: Reporter, eta: Eta, system_id: str | None,
               make_bench: Callable[[Phase, PlannedRun], Benchmark] | None) -> list[RunResult]:
    """One phase's runs started together (through the one executor, each in a thread of its own)."""
    requests = []
    for run, site, tags in zip(phase.runs, phase.sites, phase.tags, strict=True):
        bench = make_bench(phase, run) if make_bench else run.bench_class().from_point(run.params)
        requests.append(RunRequest.planned(run, bench, site, system_id, one_off=True, tags=tags))
    quiet.check_sites(phase.sites, reporter.waiting)
    for run in phase.runs:
        reporter.run_started(run)
    ran = run_together(store, requests, lambda i, elapsed, detail: reporter.tick(phase.runs[i], elapsed, detail))
    finished = []
    for run, result in zip(phase.runs, ran, strict=True):
        if result is not None:
            finished.append(result)
            eta.add(run, result.duration_s)
            reporter.run_finished(run, result, eta)
    return finished
