"""The HPL evaluator: one trial is one stored `hpl` run, looked up in the store before it is run.

A trial's run id is a hash of the session, the configuration's key, the level (and its N) and the
repeat, so the same call made again finds every trial it already finished and replays it from the
store at no cost: that is how an interrupted session continues. A trial that failed, timed out or
gave no valid result is a NaN sample, replayed as such; one left 'running' by a runner that died
is settled first (its processes are gone) and run again.

Time estimates and the prior come from the analytic model (bench/hpl/model.py) fed with the rates
measured on this system (tune/rates.py), plus the start-up of one run. The estimates are then
corrected by what finished trials really took (the median ratio of measured to estimated), so a
machine slower than its rates, or a harness with more overhead, does not overspend the budget.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import time
from dataclasses import dataclass, field

from clusterbench.bench.hpl.benchmark import Hpl
from clusterbench.bench.hpl.model import Problem, Rates, predict
from clusterbench.bench.hpl.timing import PLANNING_STARTUP_S, hpl_flops
from clusterbench.campaign.engine import settle_unfinished
from clusterbench.errors import EnvironmentProblem, MissingToolError, UserInputError
from clusterbench.execution.loop import QuietReporter, Reporter, run_all
from clusterbench.execution.request import PlannedRun
from clusterbench.launch.site import LOCAL, Site
from clusterbench.store.db import Store
from clusterbench.system.discover import SystemInfo
from clusterbench.tune.rates import rates_for
from clusterbench.tune.search import Config, Sample
from clusterbench.tune.space import Grid, HplSpace

FINISHED = ("ok", "invalid", "failed", "timeout")
BLOCK = "tune"
_DEFAULTS = {p.name: p.default for p in Hpl.parameters if p.default is not None and not p.required}
_PARAMS = {p.name: p for p in Hpl.parameters}


def system_rates(store: Store | None, system: SystemInfo, nodes: int) -> tuple[Rates, str]:
    """The measured rates of this system (tune.rates) and the sentence saying where they come from."""
    return rates_for(store, system, nodes)


def measured_startup(store: Store | None, system_id: str | None, rates: Rates) -> float | None:
    """The harness's cost of one hpl run on this system: the median over its recent stored runs of the
    run's duration minus the model's solve time (None when nothing is stored)."""
    if store is None or not system_id:
        return None
    rows = store.hpl_durations(system_id, limit=30)
    overheads = []
    for row in rows:
        try:
            p = json.loads(row["params"])
            solve = predict(Problem(int(p["n"]) * 1, int(p["nb"]), int(p["p"]), int(p["q"]), int(p.get("nodes") or 1),
                                    int(p.get("threads") or 1)), rates).seconds * int(p.get("samples") or 1)
        except (KeyError, TypeError, ValueError):
            continue
        overheads.append(float(row["duration_s"]) - solve)
    if len(overheads) < 3:
        return None
    return min(max(statistics.median(overheads), 0.1), 3 * PLANNING_STARTUP_S)


def trial_id(session: str, config: Config, level: int, n: int, repeat: int) -> str:
    blob = json.dumps([session, config.key(), level, n, repeat], sort_keys=True, default=str)
    return f"{session}-hpl-{hashlib.sha256(blob.encode()).hexdigest()[:12]}-r{repeat}"


def config_params(config: Config) -> dict:
    """The hpl parameters of a configuration: its grid value split into layout, p and q."""
    out = {}
    for key, value in config.items:
        if key == "grid":
            g = Grid.parse(value)
            out.update(layout=g.layout, p=g.p, q=g.q)
        else:
            out[key] = value
    return out


def median_gflops(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


@dataclass
class HplEvaluator:
    """Evaluator of search(): trials as stored hpl runs of one session."""

    store: Store
    session: str
    hspace: HplSpace
    system: SystemInfo
    rates: Rates
    site: Site = field(default_factory=lambda: LOCAL)
    system_id: str | None = None
    reporter: Reporter = field(default_factory=QuietReporter)
    timeout_s: float | None = None
    env: dict = field(default_factory=dict)
    startup_s: float = PLANNING_STARTUP_S
    ran: int = 0
    replayed: int = 0
    invalid: int = 0
    run_ids: list[str] = field(default_factory=list)  # every trial's run, in order, ran or replayed
    _points: dict = field(default_factory=dict)

    # ------------------------------------------------------------ points and runs

    def point(self, config: Config, level: int) -> dict:
        """The resolved hpl point of a trial (ranks, threads, binding, BLAS filled in; memory checked)."""
        key = (config, level)
        if key not in self._points:
            point = _DEFAULTS | self.hspace.fixed | config_params(config) | {"n": self.hspace.ns[level],
                                                                            "nodes": self.hspace.nodes}
            for name, value in list(point.items()):
                if name in _PARAMS:
                    point[name] = _PARAMS[name].check(value)
            Hpl.resolve(point, self.system)
            self._points[key] = point
        return dict(self._points[key])

    def planned(self, config: Config, level: int, repeat: int) -> PlannedRun:
        point = self.point(config, level)
        return PlannedRun(trial_id(self.session, config, level, point["n"], repeat), self.session, BLOCK, "hpl",
                          point, repeat, dict(self.env), self.timeout_s,
                          {"tune": self.session, "tune_level": level}, self.estimate_s(config, level))

    def preflight(self, config: Config) -> None:
        """Make the benchmark instance of one trial: no xhpl is a failing environment (exit 1), now."""
        try:
            Hpl.from_point(self.point(config, 0))
        except MissingToolError as exc:
            raise EnvironmentProblem(exc.message, hint=exc.hint) from None

    # ------------------------------------------------------------ the model

    def model_s(self, config: Config, level: int, threads_from_blas: bool = False) -> float:
        point = self.point(config, level)
        threads = point.get("threads") or 1
        if threads_from_blas and "serial" in str(point.get("blas")):
            threads = 1  # a serial BLAS under a threaded rank runs on one core
        problem = Problem(point["n"], point["nb"], point["p"], point["q"], self.hspace.nodes, threads)
        return predict(problem, self.rates).seconds

    def estimate_s(self, config: Config, level: int) -> float:
        """Start-up plus the model's solve time. Not corrected here: the search scales the estimates by what
        its trials really took, and a stable estimate keeps its schedule the same on a second call."""
        return self.startup_s + self.model_s(config, level, threads_from_blas=True)

    def is_stored(self, config: Config, level: int, repeat: int) -> bool:
        """Whether this trial is finished in the store (the search lets a replayed bracket start)."""
        row = self.store.run(self.planned(config, level, repeat).id)
        return row is not None and row["status"] in FINISHED

    def prior(self, config: Config) -> float:
        """Predicted Gflop/s at the top level: the order in which the search tries configurations."""
        point = self.point(config, len(self.hspace.ns) - 1)
        return hpl_flops(point["n"]) / self.model_s(config, len(self.hspace.ns) - 1, True) / 1e9

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
        values = [m.value for m in result.outcome.metrics if m.name == "hpl_gflops" and m.valid]
        valid = result.status == "ok" and result.valid and bool(values)
        self.ran += 1
        self.invalid += not valid
        self.run_ids.append(run.id)
        return Sample(config, level, repeat, median_gflops(values) if valid else math.nan, seconds, valid, run.id)

    def _replay(self, config: Config, level: int, repeat: int, run: PlannedRun, row) -> Sample:
        values = [r["value"] for r in self.store.metrics(run.id) if r["name"] == "hpl_gflops" and r["valid"]]
        valid = row["status"] == "ok" and bool(row["valid"]) and bool(values)
        seconds = float(row["duration_s"] or 0.0)
        self.replayed += 1
        self.invalid += not valid
        self.run_ids.append(run.id)
        return Sample(config, level, repeat, median_gflops(values) if valid else math.nan, seconds, valid, run.id,
                      replayed=True)


def check_trial(evaluator: HplEvaluator, config: Config, option: str) -> None:
    """Resolve one configuration at every level before anything runs, saying where a refusal comes from."""
    for level in range(len(evaluator.hspace.ns)):
        try:
            evaluator.point(config, level)
        except UserInputError as exc:
            raise UserInputError(f"{option}: {exc.message}", hint=exc.hint) from None
