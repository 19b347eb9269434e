"""The one run loop: planned runs, one after another here or through mpirun, or as batch jobs
(Slurm, LSF, PBS: execution/batch_jobs.py).

`campaign run`, `bench` and `run` all go through `run_all`: it makes each run's benchmark
instance, starts it through the executor (which stores it), reports progress and an ETA that
corrects itself from measured durations, spaces repeat rounds over time when asked (`spread`:
here by waiting, for batch jobs by the begin time each job is submitted with),
and turns SIGTERM/SIGHUP into an interrupt so the run in flight is stored as interrupted.
What is particular to a command (its lock, skipping finished runs, fresh ids, its tags) is
decided by the caller before the loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from clusterbench.errors import Interrupted, UserInputError
from clusterbench.execution.executor import RunRequest, RunResult, changes_nodes, execute, prefetch_state
from clusterbench.execution.request import PlannedRun
from clusterbench.launch.process import signals_as_interrupt
from clusterbench.launch.site import LOCAL, Site
from clusterbench.store.db import Store


class Reporter(Protocol):
    def start(self, pending: list[PlannedRun], done: int, eta: Eta) -> None: ...
    def run_started(self, run: PlannedRun) -> None: ...
    def tick(self, run: PlannedRun, elapsed: float, detail: str | None) -> None: ...
    def run_finished(self, run: PlannedRun, result: RunResult, eta: Eta) -> None: ...
    def waiting(self, seconds: float, reason: str) -> None: ...


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
        reporter.run_started(run)
        request = RunRequest.planned(run, bench, site, system_id, one_off=one_off, tags=tags)
        result = execute(store, request, tick=lambda elapsed, detail, run=run: reporter.tick(run, elapsed, detail))
        finished(run, result)
