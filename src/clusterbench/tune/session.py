"""One tuning session of a benchmark: from the options (or a campaign block) to the search, its refusals
and outputs. What is the benchmark's (its space, fidelity levels, model, input file) its tuning
declaration says (bench/declare.py's `Tuning`; HPL's in bench/hpl/tuning.py).

Everything that can be refused is refused here, before anything runs (exit 2, saying which option or
which line of the campaign file): an unknown or out-of-bounds space key, a fidelity (HPL: an N) that
does not fit in memory, a budget smaller than the cheapest trial or than the smallest bracket (the
minimum budget, stated). The session's name is a hash of what decides its trials (system, site, space,
fixed values, levels' fidelities, seed), so the same call made again is the same session and replays
what it finished. What a session began with (model inputs, start-up cost, the levels' fidelities) is
kept under the request's key as it begins and read back by the same call made again: the fidelities are
never recomputed from a model refitted on the session's own runs (`note()` says "resuming session S").
The CLI and benchmarks/tuner_vs_sweep.py both go through here.
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.bench.declare import Tuning
from clusterbench.errors import Interrupted, UserInputError
from clusterbench.launch.process import signals_as_interrupt
from clusterbench.launch.site import LOCAL, Site
from clusterbench.store.db import Store
from clusterbench.system.discover import SystemInfo
from clusterbench.tune.rates import DEFAULT_BENCHMARK, declared, rates_for
from clusterbench.tune.search import Config, Sample, SearchResult, bracket_trials, search
from clusterbench.tune.space import TuneSpace, build_space
from clusterbench.tune.trials import TrialEvaluator, check_trial, measured_startup

MAX_BUDGET_S = 7 * 24 * 3600.0
MAX_REPEATS = 20
MAX_LEVELS = 6


@dataclass
class TuneOptions:
    budget_s: float = 600.0
    n: int | None = None
    nodes: int = 1
    space: dict = field(default_factory=dict)  # key -> values as written
    fixed: dict = field(default_factory=dict)  # parameters every trial shares (a campaign block's params:)
    levels: int = 3
    eta: int = 3
    seed: int = 0
    repeats: int = 3
    name: str | None = None
    final_n: int | None = None
    timeout_s: float | None = None
    env: dict = field(default_factory=dict)
    option: Callable[[str], str] = field(default=lambda key: f"--space {key}")  # where a key was written
    where: Callable[[str], str] = field(default=lambda opt: opt)  # where an option was written ('--n', ...)
    tuning: Tuning | None = None  # the benchmark's tuning declaration (None: rates.DEFAULT_BENCHMARK's)


@dataclass
class TuneSession:
    name: str
    options: TuneOptions
    tspace: TuneSpace
    evaluator: TrialEvaluator
    rates_source: str
    site: Site
    request: str = ""  # the key its model inputs are kept under once it runs (_request_key)
    asked: dict = field(default_factory=dict)  # what the call asked for (_asked): kept under the session's name
    stored_trials: int = 0  # finished trials of this session already in the store when it was prepared
    resumed: bool = False  # its fidelities and model inputs are those kept when it began
    why_new: str = ""  # for a new session: how it differs from the newest earlier session of the benchmark

    def note(self) -> str:
        """One line saying whether this call resumes a stored session or starts one, and why a new one."""
        if self.stored_trials or self.resumed:
            return f"resuming session {self.name} ({self.stored_trials} trials stored)"
        return f"new session {self.name}" + (f" ({self.why_new})" if self.why_new else "")

    @property
    def levels(self) -> int:
        return len(self.tspace.fidelities)

    @property
    def tuning(self) -> Tuning:
        return self.evaluator.tuning

    def cheapest(self) -> tuple[float, Config]:
        """The cheapest level-0 trial's estimate (over the declaration's cost_keys, HPL's NB x grid x BLAS;
        the other knobs do not change it)."""
        best: tuple[float, Config] | None = None
        for config in _cost_configs(self.tspace, self.tuning):
            cost = self.evaluator.estimate_s(config, 0)
            if best is None or cost < best[0]:
                best = (cost, config)
        assert best is not None
        return best

    def sweep_estimate_s(self, repeats: int = 1) -> float:
        """Every point of the space once (or `repeats` times) at the top level, by the model."""
        others = self.tspace.space.size // max(len(list(_cost_configs(self.tspace, self.tuning))), 1)
        top = self.levels - 1
        return sum(self.evaluator.estimate_s(c, top) for c in _cost_configs(self.tspace, self.tuning)) * others \
            * repeats

    def group(self):
        """The declaration's promotion group of a configuration (HPL: its layout), or None: see search._promote."""
        from clusterbench.bench.declare import Tuning

        if type(self.tuning).promotion_group is Tuning.promotion_group:  # declares no groups
            return None
        return lambda config: self.tuning.promotion_group(config.as_dict())

    def first_round_s(self) -> tuple[float, str]:
        """The smallest bracket the search runs (search.bracket_trials of min(eta, points) candidates: one
        promoted per level and per layout, the finalists' repeats), by the mean estimate
        of each level: below it nothing useful runs. A larger budget starts with a larger bracket (up to
        eta^levels candidates); a smaller one is cut down to this one (search._fitting), never refused."""
        eta, repeats, levels = self.options.eta, self.options.repeats, self.levels
        configs = list(_cost_configs(self.tspace, self.tuning))
        candidates = min(eta, self.tspace.space.size)
        group = self.group()
        groups = min(candidates, len({group(c) for c in configs})) if group is not None else 1
        counts = bracket_trials(candidates, levels, eta, repeats, groups)
        cost, parts = 0.0, []
        for level, count in enumerate(counts):
            cost += count * sum(self.evaluator.estimate_s(c, level) for c in configs) / len(configs)
            parts.append(f"{count} at {self.fidelity_text(level)}")
        return cost, ", ".join(parts)

    def check_budget(self) -> None:
        cost, config = self.cheapest()
        budget = f"{self.options.where('--budget')} {duration_text(self.options.budget_s)}"
        if self.options.budget_s < cost:
            raise UserInputError(f"{budget} is less than one trial (about {duration_text(cost)}: "
                                 f"{self.fidelity_text(0)} at level 0)",
                                 hint=f"give --budget {duration_text(cost * 1.5, up=True)} or more, or a smaller --n")
        first, parts = self.first_round_s()
        if self.options.budget_s < first and not self.evaluator.is_stored(config, 0, 0):
            raise UserInputError(f"{budget} is less than the search's first round: the minimum budget here is about "
                                 f"{duration_text(first)} (trials {parts})",
                                 hint=f"give --budget {duration_text(first * 1.2, up=True)} or more, fewer "
                                 "--levels, or a smaller --n")

    def keep_inputs(self) -> None:
        """Keep what decides the session's trials under the request's key as it begins (`prepare` reads them on
        a resume): the model's inputs, the start-up cost and the levels' fidelities (HPL: N per level), so a
        second call never recomputes them from a model refitted on the session's own trials; and what the
        session was asked for under its name (what a later new session says it differs from)."""
        ev = self.evaluator
        if ev.store is not None and self.request:
            ev.store.keep_first(self.request, {"rates": self.tuning.inputs_dict(ev.rates), "source": self.rates_source,
                                               "startup_s": ev.startup_s, "fidelities": self.tspace.fidelities,
                                               "session": self.name})
            ev.store.keep_first(SESSION_KEY + self.name, self.asked)

    def fidelity_text(self, level: int) -> str:
        """A level's fidelity as messages write it ('N=1000' for HPL's n)."""
        return f"{self.tuning.fidelity.upper()}={self.tspace.fidelities[level]}"

    def run(self, progress: Callable[[Sample, SearchResult], None] | None = None) -> SearchResult:
        cost, config = self.cheapest()
        self.evaluator.preflight(config)
        self.keep_inputs()
        try:
            with signals_as_interrupt():  # SIGTERM/SIGHUP between trials stop it like Ctrl-C
                return search(self.tspace.space, self.levels, self.evaluator, self.options.budget_s,
                              seed=self.options.seed, prior=self.evaluator.prior, eta=self.options.eta,
                              final_repeats=self.options.repeats, progress=progress, group=self.group())
        except (KeyboardInterrupt, Interrupted):
            raise Interrupted(f"finished trials are stored; run the same command again to continue session "
                              f"{self.name}") from None


def _cost_configs(tspace: TuneSpace, tuning: Tuning):
    """One configuration per combination of the declaration's cost_keys (HPL: nb, grid, blas): the dimensions
    the model's cost depends on; the other dimensions at their first value."""
    dims = tspace.space.dims
    rest = {k: v[0] for k, v in dims.items() if k not in tuning.cost_keys}
    for combo in itertools.product(*(dims.get(k, [None]) for k in tuning.cost_keys)):
        values = rest | {k: v for k, v in zip(tuning.cost_keys, combo, strict=True) if v is not None}
        if tspace.space.allowed(values):  # a pairing the space dropped (HPL: a serial BLAS with threads) costs nothing
            yield Config.of(values)


def duration_text(seconds: float, up: bool = False) -> str:
    """A duration as --budget takes it: '45s', '2m23s', '1h05m' (143 s is 2m23s, not 3m). `up`: rounded up to
    the unit shown (a budget the hint proposes is never less than what it is computed from)."""
    if not math.isfinite(seconds):
        return "?"
    whole = math.ceil(seconds) if up else round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s" if whole % 60 else f"{whole // 60}m"
    minutes = math.ceil(whole / 60) if up else round(whole / 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes % 60 else f"{minutes // 60}h"


SESSION_KEY = "tune-session:"  # + a session's name: what its call asked for (_asked), kept as it began


def _asked(system: SystemInfo, site_key: str, o: TuneOptions, tuning: Tuning) -> dict:
    """What a call asks for, as far as it decides the session's trials. The budget counts only without --n
    (it then sizes the top level): a call made again with another budget continues the same session."""
    return {"system": system.fingerprint(), "site": site_key, "space": o.space, "fixed": o.fixed, "n": o.n,
            "budget_s": None if o.n else o.budget_s, "nodes": o.nodes, "levels": o.levels, "eta": o.eta,
            "seed": o.seed, "name": o.name, "benchmark": tuning.benchmark}


def _request_key(system: SystemInfo, site_key: str, o: TuneOptions, tuning: Tuning) -> str:
    """The key of what a call asks for (_asked). The benchmark counts when it is not the default one, so the
    default's keys stay those its sessions began with."""
    a = _asked(system, site_key, o, tuning)
    asked = [a["system"], site_key, o.space, o.fixed, o.n, a["budget_s"], o.nodes, o.levels, o.eta, o.seed, o.name]
    if tuning.benchmark != DEFAULT_BENCHMARK:
        asked.append(tuning.benchmark)
    blob = json.dumps(asked, sort_keys=True, default=str)
    return f"tune-inputs:{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


_ASKED_WORDS = {"system": "the system (its hardware or software)", "site": "where it runs", "space": "the space",
                "fixed": "the fixed parameters", "n": "--n", "budget_s": "the budget (it sizes the top N)",
                "nodes": "--nodes", "levels": "--levels", "eta": "--eta", "seed": "--seed", "name": "--name"}


def why_new(store: Store | None, asked: dict) -> str:
    """How this call differs from the newest earlier tuning session of the benchmark ('' when none is stored
    or it cannot tell): why it starts a new session instead of resuming that one."""
    if store is None:
        return ""
    last = None
    for row in store.runs(benchmark=asked["benchmark"], limit=200):  # newest first: the newest tuning trial's session
        try:
            last = json.loads(row["tags"] or "{}").get("tune")
        except (TypeError, ValueError, AttributeError):
            continue
        if last:
            break
    before = store.first_kept(SESSION_KEY + last) if last else None
    if not before:
        return "no earlier tuning session found" if last is None else ""
    now = json.loads(json.dumps(asked, sort_keys=True, default=str))
    differ = [_ASKED_WORDS.get(k, k) for k in now if k != "benchmark" and before.get(k) != now[k]]
    if not differ:
        return ""
    return f"the newest earlier session, {last}, differs in {', '.join(differ)}"


@dataclass
class _Kept:
    """What a session of a request began with: the model's inputs and their source, the start-up cost and the
    levels' fidelities (None in a store written before they were kept: then recomputed from the kept inputs)."""

    inputs: object
    source: str
    startup_s: float
    fidelities: list | None


def _kept_inputs(store: Store | None, request: str, tuning: Tuning) -> _Kept | None:
    """The model's inputs (rates), their source, the start-up cost and the fidelities a session of this
    request began with.

    A resumed session must decide as the first call did: the rates and the start-up cost are fitted from
    the store, which by then holds the session's own trials, and refitted they reorder the candidates,
    change which trials fit the budget and (sized from the budget) the top N itself, so finished trials
    would not be replayed."""
    kept = store.first_kept(request) if store is not None else None
    try:
        if not kept:
            return None
        fidelities = kept.get("fidelities")
        if fidelities is not None and (not isinstance(fidelities, list) or not 1 <= len(fidelities) <= MAX_LEVELS):
            fidelities = None
        return _Kept(tuning.inputs_from(kept["rates"]), f"{kept['source']} (as when this session began)",
                     float(kept["startup_s"]), fidelities)
    except (KeyError, TypeError, ValueError):
        return None


def session_name(system: SystemInfo, site_key: str, tspace: TuneSpace, seed: int, benchmark: str) -> str:
    blob = json.dumps([system.fingerprint(), site_key, tspace.space.dims, tspace.fixed, tspace.fidelities,
                       tspace.nodes, seed], sort_keys=True, default=str)
    return f"tune-{benchmark}-{hashlib.sha256(blob.encode()).hexdigest()[:10]}"


def prepare(store: Store | None, options: TuneOptions, system: SystemInfo, *, site: Site = LOCAL,
            site_key: str = "", system_id: str | None = None, reporter=None) -> TuneSession:
    """The session for these options, every refusal made (nothing has run)."""
    o = options
    tuning = o.tuning or declared()
    if not 0 < o.budget_s <= MAX_BUDGET_S:
        raise UserInputError(f"{o.where('--budget')}: must be positive and at most 7 days")
    if not 1 <= o.levels <= MAX_LEVELS:
        raise UserInputError(f"{o.where('--levels')} {o.levels}: must be 1 to {MAX_LEVELS}")
    if not 2 <= o.eta <= 10:
        raise UserInputError(f"{o.where('--eta')} {o.eta}: must be 2 to 10")
    if not 2 <= o.repeats <= MAX_REPEATS:
        raise UserInputError(f"{o.where('--repeats')} {o.repeats}: must be 2 to {MAX_REPEATS} "
                             "(a best is never one sample)")
    if not 1 <= o.nodes <= 4096:
        raise UserInputError(f"{o.where('--nodes')} {o.nodes}: must be 1 to 4096")
    space, fixed = build_space(tuning, system, o.nodes, o.space, option=o.option, fixed=o.fixed)
    request = _request_key(system, site_key, o, tuning)
    kept = _kept_inputs(store, request, tuning)
    rates, source = (kept.inputs, kept.source) if kept else rates_for(store, system, o.nodes, tuning=tuning)
    if kept and kept.fidelities:  # fixed when the session began: never recomputed from a refitted model
        tuning.levels(space, system, o.nodes, kept.fidelities[-1], o.budget_s, rates, o.levels, o.eta, o.option,
                      o.where)  # narrows the space as the first call's levels did (HPL: no NB above the lowest N)
        fidelities = list(kept.fidelities)
    else:
        fidelities = tuning.levels(space, system, o.nodes, o.n, o.budget_s, rates, o.levels, o.eta, o.option,
                                   o.where)
    tspace = TuneSpace(space, fixed, fidelities, o.nodes)
    if o.final_n is not None:
        tuning.check_fidelity(o.final_n, system, o.nodes, o.where("--final-n"))
    name = o.name or session_name(system, site_key, tspace, o.seed, tuning.benchmark)
    startup_s = kept.startup_s if kept else measured_startup(store, system_id, tuning, rates) or tuning.startup_s
    evaluator = TrialEvaluator(store, name, tuning, tspace, system, rates, site, system_id, timeout_s=o.timeout_s,
                               env=dict(o.env), startup_s=startup_s)
    if reporter is not None:
        evaluator.reporter = reporter
    asked = _asked(system, site_key, o, tuning)
    session = TuneSession(name, o, tspace, evaluator, source, site, request, asked,
                          stored_trials=store.count_runs(campaign=name) if store is not None else 0,
                          resumed=kept is not None)
    if not session.stored_trials and not session.resumed:
        session.why_new = why_new(store, asked)
    for config in _cost_configs(tspace, tuning):
        check_trial(evaluator, config, o.option("space"))
    session.check_budget()
    return session


# ---------------------------------------------------------------- statistics and outputs


@dataclass
class Finalist:
    config: Config
    median: float
    ci_low: float
    ci_high: float
    ci_level: float  # what the interval covers (below 95% with fewer than 6 samples: see search.Incumbent)
    samples: int
    indistinguishable: bool  # its interval overlaps the best's


def finalists(result: SearchResult) -> list[Finalist]:
    """The search's finalists (final_repeats valid top-level samples each), best median first."""
    same = set(result.indistinguishable)
    return [Finalist(f.config, f.median, f.ci_low, f.ci_high, f.ci_level, len(f.samples),
                     i == 0 or f.config in same) for i, f in enumerate(result.finalists)]


def trial_points(result: SearchResult) -> list[tuple[float, float, int, bool]]:
    """(budget seconds spent when it ended, Gflop/s, level, replayed) per trial: replayed ones cost nothing."""
    spent, out = 0.0, []
    for s in result.trials:
        if not s.replayed:
            spent += s.seconds
        out.append((spent, s.value, s.level, s.replayed))
    return out


def best_point(session: TuneSession, config: Config, fidelity) -> dict:
    """The top level's point of a configuration at another fidelity (--final-n)."""
    point = session.evaluator.point(config, session.levels - 1)
    point[session.tuning.fidelity] = fidelity
    return point


def trials_csv(session: TuneSession, result: SearchResult) -> str:
    dims = list(session.tspace.space.dims)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["order", "run_id", "level", "n", "repeat", *dims, "gflops", "valid", "counted", "seconds",
                "replayed"])
    for i, s in enumerate(result.trials):
        values = s.config.as_dict()
        w.writerow([i, s.run_id or "", s.level, session.tspace.fidelities[s.level], s.repeat,
                    *[values.get(d, "") for d in dims], "" if not math.isfinite(s.value) else f"{s.value:.4f}",
                    int(s.valid), int(not s.uncounted), f"{s.seconds:.2f}", int(s.replayed)])
    return buf.getvalue()


def tag_best(store: Store, session: TuneSession, result: SearchResult) -> int:
    """Tag the incumbent's top-level runs `tune_best=<session>` (what tune/known.py reads)."""
    if result.best is None:
        return 0
    ids = [s.run_id for s in result.trials if s.config == result.best.config and s.level == result.best.level
           and s.run_id and s.valid]
    others = [r for r in session.evaluator.run_ids if r not in ids]  # an earlier call's best, if it changed
    store.update_tags(others, {}, remove=["tune_best"])
    return store.update_tags(ids, {"tune_best": session.name})


def summary(session: TuneSession, result: SearchResult) -> dict:
    ev = session.evaluator
    best = result.best
    return {
        "session": session.name, "levels_n": session.tspace.fidelities, "space": session.tspace.space.dims,
        "space_size": session.tspace.space.size, "fixed": session.tspace.fixed, "rates": session.rates_source,
        "best": None if best is None else {
            "config": best.config.as_dict(), "params": session.tuning.config_params(best.config.as_dict()),
            "level": best.level, "n": session.tspace.fidelities[best.level], "median_gflops": best.median,
            "ci95": [best.ci_low, best.ci_high], "ci_coverage": best.ci_level, "samples": best.samples},
        "finalists": [{"config": f.config.as_dict(), "median_gflops": f.median, "ci95": [f.ci_low, f.ci_high],
                       "ci_coverage": f.ci_level, "samples": f.samples,
                       "indistinguishable_from_best": f.indistinguishable} for f in finalists(result)],
        "trials": {"ran": ev.ran, "replayed": ev.replayed, "invalid": ev.invalid, "uncounted": ev.uncounted},
        "space_dropped": session.tspace.space.dropped,
        "budget_s": session.options.budget_s, "spent_s": result.spent_s, "stopped": result.stopped,
        "sweep_estimate_s": session.sweep_estimate_s(),
    }


def write_outputs(session: TuneSession, result: SearchResult, out: Path) -> dict[str, Path]:
    """The benchmark's input file for the best configuration (HPL.dat, at --final-n, default the top level's),
    trials.csv and summary.json."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"trials": out / "trials.csv", "summary": out / "summary.json"}
    paths["trials"].write_text(trials_csv(session, result))
    paths["summary"].write_text(json.dumps(summary(session, result), indent=2, default=str))
    if result.best is not None:
        tuning = session.tuning
        fidelity = session.options.final_n or session.tspace.fidelities[-1]
        key, filename = tuning.best_input
        paths[key] = out / filename
        paths[key].write_text(tuning.render_input(best_point(session, result.best.config, fidelity)))
    return paths
