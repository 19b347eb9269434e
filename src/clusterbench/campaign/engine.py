"""Execute a campaign's runs: skip what is stored, run the rest, survive any interruption.

Every finished run is committed by the executor before the next starts, so Ctrl-C, SIGTERM,
`kill -9` or a power cut lose at most the run in flight. Run ids are deterministic, so the
next `campaign run` of the same file skips every run already finished (ok, invalid, failed or
timed out) and redoes only unfinished ones. A failed or timed-out run is a result too
(recorded with its reason); `retry_failed` runs those again.

Runs go repeat-major (all configurations, then all again), and `spread_s` spaces those rounds
over time, as the STFC cloud study did with cron to average out noisy neighbours.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from clusterbench.bench.base import Benchmark
from clusterbench.campaign.batch import run_jobs
from clusterbench.campaign.expand import PlannedRun
from clusterbench.launch.process import signals_as_interrupt
from clusterbench.launch.site import LOCAL, Site
from clusterbench.store.db import Store
from clusterbench.suite.executor import RunResult, execute

FINISHED = ("ok", "invalid", "failed", "timeout")


class Reporter(Protocol):
    def start(self, pending: list[PlannedRun], done: int, eta: Eta) -> None: ...
    def run_started(self, run: PlannedRun) -> None: ...
    def tick(self, run: PlannedRun, elapsed: float, detail: str | None) -> None: ...
    def run_finished(self, run: PlannedRun, result: RunResult, eta: Eta) -> None: ...
    def waiting(self, seconds: float, reason: str) -> None: ...


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
class CampaignOutcome:
    total: int
    skipped: int
    results: list[RunResult] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)


def finished_ids(store: Store, runs: list[PlannedRun], retry_failed: bool = False) -> set[str]:
    return store.finished_ids([r.id for r in runs], ("ok", "invalid") if retry_failed else FINISHED)


def learned_durations(store: Store, runs: list[PlannedRun]) -> list[tuple[PlannedRun, float]]:
    """Durations of this campaign's runs finished earlier, so a resumed ETA starts informed."""
    if not runs:
        return []
    measured = store.durations(runs[0].campaign)
    return [(r, measured[r.id]) for r in runs if r.id in measured]


def block_instances(runs: list[PlannedRun]) -> list[Benchmark]:
    """One benchmark instance per block (its first run): what it will start, built or found."""
    first: dict[str, PlannedRun] = {}
    for run in runs:
        first.setdefault(run.block, run)
    return [run.bench_class().from_point(run.params) for run in first.values()]


def preflight(runs: list[PlannedRun]) -> None:
    """Build one instance per block before anything runs: a missing binary stops the
    campaign now (exit code 2), not after hours of other runs."""
    block_instances(runs)


def run_campaign(store: Store, runs: list[PlannedRun], system_id: str | None, reporter: Reporter,
                 spread_s: float | None = None, retry_failed: bool = False, site: Site = LOCAL) -> CampaignOutcome:
    """Every pending run, here/through mpirun one after another, or queued as Slurm jobs."""
    done = finished_ids(store, runs, retry_failed)
    pending = [r for r in runs if r.id not in done]
    preflight(pending)
    eta = Eta({r.id: r for r in pending}, learned_durations(store, runs))
    outcome = CampaignOutcome(total=len(runs), skipped=len(done))
    reporter.start(pending, len(done), eta)
    rounds = max((r.repeat for r in runs), default=0) + 1
    interval = spread_s / rounds if spread_s else 0.0
    t0 = time.monotonic()
    first_round = pending[0].repeat if pending else 0
    if site.slurm:
        def finished(run: PlannedRun, result: RunResult) -> None:
            outcome.results.append(result)
            eta.add(run, result.duration_s)
            reporter.run_finished(run, result, eta)

        with signals_as_interrupt():
            run_jobs(store, pending, system_id, site, reporter.run_started, reporter.tick, finished)
        return outcome
    with signals_as_interrupt():
        for run in pending:
            if interval:
                wait = t0 + (run.repeat - first_round) * interval - time.monotonic()
                if wait > 0:
                    reporter.waiting(wait, f"--spread: repeat {run.repeat + 1} of {rounds}")
                    time.sleep(wait)
            bench = run.bench_class().from_point(run.params)
            reporter.run_started(run)
            result = execute(store, bench, system_id, run_id=run.id, campaign=run.campaign,
                             repeat=run.repeat, timeout_s=run.timeout_s, tags=run.tags | {"block": run.block},
                             tick=lambda elapsed, detail, run=run: reporter.tick(run, elapsed, detail),
                             params=run.params, extra_env=run.env, site=site)
            outcome.results.append(result)
            eta.add(run, result.duration_s)
            reporter.run_finished(run, result, eta)
    return outcome
