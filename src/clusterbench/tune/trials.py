"""The evaluator: one trial is one stored run of the tuned benchmark, looked up in the store before it is run.

A trial's run id is a hash of the session, the configuration's key, the level (and its fidelity value)
and the repeat, so the same call made again finds every trial it already finished and replays it from
the store at no cost: that is how an interrupted session continues. A trial that failed, timed out or
gave no valid result is a NaN sample, replayed as such; one left 'running' by a runner that died
is settled first (its processes are gone) and run again.

A trial's parameter point is the benchmark's defaults, the fixed values, the configuration (through the
tuning declaration's `config_params`) and the level's fidelity value, checked and completed by the
benchmark class itself (its parameters, `resolve`, `from_point`). Time estimates and the prior come from
the declaration's model (e.g. HPL's analytic model) fed with the inputs measured on this system
(tune/rates.py), plus the start-up of one run. The estimates are then corrected by what finished trials
really took (the median ratio of measured to estimated), so a machine slower than its rates, or a
harness with more overhead, does not overspend the budget.

A finished trial whose run does not count (analysis/flags.counts: disturbed by other work on its CPUs,
suspect, truncated, excluded) is an `uncounted` sample: the search measures its configuration again
and never promotes (or drops) it on that figure.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import time
from dataclasses import dataclass, field

from clusterbench.bench.base import Benchmark
from clusterbench.bench.declare import Tuning
from clusterbench.bench.registry import benchmark_class
from clusterbench.campaign.engine import settle_unfinished
from clusterbench.errors import EnvironmentProblem, MissingToolError, UserInputError
from clusterbench.execution.loop import QuietReporter, Reporter, run_all
from clusterbench.execution.request import PlannedRun
from clusterbench.launch.site import LOCAL, Site
from clusterbench.store.db import Store
from clusterbench.system.discover import SystemInfo
from clusterbench.tune.search import Config, Sample
from clusterbench.tune.space import TuneSpace

FINISHED = ("ok", "invalid", "failed", "timeout")
BLOCK = "tune"
MAX_STARTUP_FACTOR = 3  # a measured start-up is at most this many times the declaration's assumed one


def measured_startup(store: Store | None, system_id: str | None, tuning: Tuning, inputs) -> float | None:
    """The harness's cost of one run of the benchmark on this system: the median over its recent stored runs
    of the run's duration minus the model's time of its work (None when nothing is stored)."""
    if store is None or not system_id:
        return None
    rows = store.run_durations(tuning.benchmark, system_id, limit=30)
    overheads = []
    for row in rows:
        try:
            solve = tuning.stored_solve_s(json.loads(row["params"]), inputs)
        except (TypeError, ValueError):
            continue
        if solve is None:
            continue
        overheads.append(float(row["duration_s"]) - solve)
    if len(overheads) < 3:
        return None
    return min(max(statistics.median(overheads), 0.1), MAX_STARTUP_FACTOR * tuning.startup_s)


def trial_id(session: str, benchmark: str, config: Config, level: int, value, repeat: int) -> str:
    blob = json.dumps([session, config.key(), level, value, repeat], sort_keys=True, default=str)
    return f"{session}-{benchmark}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}-r{repeat}"


def median_value(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


@dataclass
class TrialEvaluator:
    """Evaluator of search(): trials as stored runs of the tuned benchmark, of one session."""

    store: Store
    session: str
    tuning: Tuning
    tspace: TuneSpace
    system: SystemInfo
    rates: object  # the declaration's model inputs (HPL: bench/hpl/model.py's Rates)
    site: Site = field(default_factory=lambda: LOCAL)
    system_id: str | None = None
    reporter: Reporter = field(default_factory=QuietReporter)
    timeout_s: float | None = None
    env: dict = field(default_factory=dict)
    startup_s: float | None = None  # None: the declaration's assumed start-up
    ran: int = 0
    replayed: int = 0
    invalid: int = 0
    uncounted: int = 0  # trials that finished but do not count (disturbed, suspect, ...): measured again
    run_ids: list[str] = field(default_factory=list)  # every trial's run, in order, ran or replayed
    _points: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.startup_s is None:
            self.startup_s = self.tuning.startup_s

    @property
    def benchmark(self) -> type[Benchmark]:
        return benchmark_class(self.tuning.benchmark)

    # ------------------------------------------------------------ points and runs

    def point(self, config: Config, level: int) -> dict:
        """The resolved point of a trial (for HPL: ranks, threads, binding, BLAS filled in; memory checked)."""
        key = (config, level)
        if key not in self._points:
            cls, t = self.benchmark, self.tuning
            params = {p.name: p for p in cls.parameters}
            defaults = {p.name: p.default for p in cls.parameters if p.default is not None and not p.required}
            point = defaults | self.tspace.fixed | t.config_params(config.as_dict()) | {
                t.fidelity: self.tspace.fidelities[level], "nodes": self.tspace.nodes}
            for name, value in list(point.items()):
                if name in params:
                    point[name] = params[name].check(value)
            cls.resolve(point, self.system)
            self._points[key] = point
        return dict(self._points[key])

    def planned(self, config: Config, level: int, repeat: int) -> PlannedRun:
        point = self.point(config, level)
        name = self.tuning.benchmark
        return PlannedRun(trial_id(self.session, name, config, level, point[self.tuning.fidelity], repeat),
                          self.session, BLOCK, name, point, repeat, dict(self.env), self.timeout_s,
                          {"tune": self.session, "tune_level": level}, self.estimate_s(config, level))

    def preflight(self, config: Config) -> None:
        """Make the benchmark instance of one trial: no program (HPL's xhpl) is a failing environment
        (exit 1), now."""
        try:
            self.benchmark.from_point(self.point(config, 0))
        except MissingToolError as exc:
            raise EnvironmentProblem(exc.message, hint=exc.hint) from None

    # ------------------------------------------------------------ the model

    def model_s(self, config: Config, level: int, threads_from_blas: bool = False) -> float:
        return self.tuning.solve_s(self.point(config, level), self.tspace.nodes, self.rates,
                                   blas_threads=threads_from_blas)

    def estimate_s(self, config: Config, level: int) -> float:
        """Start-up plus the model's solve time. Not corrected here: the search scales the estimates by what
        its trials really took, and a stable estimate keeps its schedule the same on a second call."""
        return self.startup_s + self.model_s(config, level, threads_from_blas=True)

    def is_stored(self, config: Config, level: int, repeat: int) -> bool:
        """Whether this trial is finished in the store (the search lets a replayed bracket start)."""
        row = self.store.run(self.planned(config, level, repeat).id)
        return row is not None and row["status"] in FINISHED

    def prior(self, config: Config) -> float:
        """Predicted merit (HPL: Gflop/s) at the top level: the order in which the search tries configurations."""
        top = len(self.tspace.fidelities) - 1
        return self.tuning.predicted_merit(self.point(config, top), self.model_s(config, top, True))

    # ------------------------------------------------------------ trials

    def stored(self, run_id: str):
        return self.store.run(run_id)

    def evaluate(self, config: Config, level: int, repeat: int) -> Sample:
        run = self.planned(config, level, repeat)
        row = self.store.run(run.id)
        if row is not None and row["status"] in FINISHED:
            return self._replay(config, level, repeat, run, row)
        if row is not None and row["status"] == "running":
            settle_unfinished(self.store, [run])
        started = time.monotonic()
        results = run_all(self.store, [run], self.reporter, site=self.site, system_id=self.system_id)
        seconds = time.monotonic() - started
        if not results:
            raise EnvironmentProblem(f"trial {run.id} did not run")
        result = results[0]
        if result.status == "interrupted":
            raise KeyboardInterrupt
        values = [m.value for m in result.outcome.metrics if m.name == self.tuning.merit and m.valid]
        valid = result.status == "ok" and result.valid and bool(values)
        uncounted = valid and not self.counts(run.id)
        self.ran += 1
        self.invalid += not valid
        self.uncounted += uncounted
        self.run_ids.append(run.id)
        return Sample(config, level, repeat, median_value(values) if valid and not uncounted else math.nan, seconds,
                      valid and not uncounted, run.id, uncounted=uncounted)

    def counts(self, run_id: str) -> bool:
        """Whether the stored run counts (analysis/flags.counts): a run disturbed by other work (facts.disturbed),
        suspect, truncated or excluded is no evidence of its configuration's speed, so the search measures it
        again instead of promoting it (or dropping it) on its figure."""
        from clusterbench.analysis.flags import counts

        row = self.store.run(run_id)
        if row is None:
            return False
        run = {k: row[k] for k in row.keys()}
        try:
            run["facts"] = json.loads(run.get("facts") or "{}")
        except (TypeError, ValueError):
            run["facts"] = {}
        return counts(run)

    def _replay(self, config: Config, level: int, repeat: int, run: PlannedRun, row) -> Sample:
        values = [r["value"] for r in self.store.metrics(run.id) if r["name"] == self.tuning.merit and r["valid"]]
        valid = row["status"] == "ok" and bool(row["valid"]) and bool(values)
        uncounted = valid and not self.counts(run.id)  # flagged since it ran (e.g. excluded): replayed as such
        seconds = float(row["duration_s"] or 0.0)
        self.replayed += 1
        self.invalid += not valid
        self.uncounted += uncounted
        self.run_ids.append(run.id)
        return Sample(config, level, repeat, median_value(values) if valid and not uncounted else math.nan, seconds,
                      valid and not uncounted, run.id, replayed=True, uncounted=uncounted)


def check_trial(evaluator: TrialEvaluator, config: Config, option: str) -> None:
    """Resolve one configuration at every level before anything runs, saying where a refusal comes from."""
    for level in range(len(evaluator.tspace.fidelities)):
        try:
            evaluator.point(config, level)
        except UserInputError as exc:
            raise UserInputError(f"{option}: {exc.message}", hint=exc.hint) from None
