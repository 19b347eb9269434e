"""Multi-fidelity, budgeted, noise-aware search over a discrete space.

Interface fixed by the integrator; the helper may add to it, not change what is below.

How it searches, and why:

- Brackets of successive halving. A bracket's candidates run once at the cheapest level; the best
  1/eta go up one level, and so on to the top level, which is the one that decides. The survivors
  of the top level are the bracket's finalists: they get `final_repeats` samples there. Cheap trials
  prune the clearly bad configurations; only a few ever cost a top-level run.
- Promotion by group. Given `group` (HPL: a configuration's layout), each level promotes the best 1/eta
  of each group (so at least the best of each), and the top level sends each group's best to the finals:
  a small N can rank the groups otherwise than the top N (two single-thread ranks beat one rank of two
  threads at N=3000, not at N=8000), and a group pruned at a small N would never show where it wins.
  When the budget is short, the promoted are cut from the end (each group's best stays first), so a
  bracket always keeps a finalist whose repeats fit (_affordable).
- Trials that do not count. A sample marked `uncounted` (the run finished but analysis/flags.counts
  refuses it: disturbed by other work, suspect, ...) is no evidence: it is neither a value nor a
  failure. The configuration is measured again (the next repeat); after MAX_UNCOUNTED such trials at
  one level it is dropped.
- The space may pair dimensions (Space.joint: HPL's serial BLAS only with one thread per rank): a
  point outside the pairs is never a candidate or a neighbour.
- No best from one sample. Only a configuration with `final_repeats` valid top-level samples can be
  the incumbent, and the incumbent is their median. After each bracket a race gives more samples
  (three rounds of one, up to `10 * final_repeats` each) to the incumbent and to the best eta-1
  finalists whose intervals overlap it: with a 5% noise, a median of three among dozens of finalists
  is a lucky draw as often as a good configuration.
- The schedule depends on the budget only where the budget cuts it, and a resume repeats those cuts:
  the sequence of evaluate() calls is a function of the space, levels, seed, prior and the sample
  values, except that a bracket too costly for what is left is cut to fewer candidates (_fitting), a
  level's promoted are cut so its finals' repeats fit (_affordable), and a trial starts only if its
  estimate fits. A second call, whose stored trials are replayed at no cost, makes the first call's
  cuts from what is stored (a bracket is its candidates whose level-0 trial is stored, a promotion
  its configurations whose next trial is stored), so it walks the same path and continues where the
  first one stopped.
- Fresh candidates come a share by the prior's rank, the rest at random. After each bracket the
  incumbent's neighbours (one dimension moved one step) that never ran at the top level run there
  once, the best 1/eta going to the finals: NB has a smooth optimum, and its small-N optimum is not
  the large-N one, so local refinement is done where it is decided. A configuration already measured
  at a level is not run there again: its stored median takes part in the new comparison.
- The space is exhausted when a round of bracket, refinement and race has nothing left to run.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from clusterbench.errors import UserInputError

MAX_POINTS = 10**7
MAX_LEVELS = 8
ENUMERATE_UP_TO = 20_000  # a space this small is listed and shuffled once; a larger one is sampled
PRIOR_POOL = 5_000  # how many configurations of a large space the prior ranks
PRIOR_SHARE = 0.5  # share of a bracket's fresh candidates chosen by the prior's rank
RACE_ROUNDS = 3  # race rounds after each bracket: about as many top-level trials as the bracket's own
RACE_CAP = 10  # the race stops at RACE_CAP * final_repeats samples per configuration
MAX_UNCOUNTED = 3  # trials of a configuration at a level that did not count (disturbed...) before it is dropped


def bracket_trials(candidates: int, levels: int, eta: int, final_repeats: int, groups: int = 1) -> list[int]:
    """How many trials a bracket of `candidates` runs at each level (the top's count includes the finals'
    repeats of its survivors): 1/eta of each group promoted per level (_Search._promote: at most 1/eta of all
    and one more per other group), the top's survivors being the finalists. What the search spends and what
    the session's minimum budget is computed from."""
    out, alive = [], candidates
    for level in range(levels):
        survivors = min(alive, math.ceil(alive / eta) + max(groups - 1, 0))
        out.append(alive if level < levels - 1 else alive + survivors * (final_repeats - 1))
        alive = survivors
    return out


@dataclass(frozen=True, order=True)
class Config:
    """One point of the space: (key, value) pairs sorted by key; hashable, stable across processes."""

    items: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, values: dict[str, Any]) -> Config:
        return cls(tuple(sorted(values.items())))

    def as_dict(self) -> dict[str, Any]:
        return dict(self.items)

    def key(self) -> str:
        """A stable text form, e.g. 'bcast=1rm,depth=1,nb=192': used in run ids and tags."""
        return ",".join(f"{k}={v}" for k, v in self.items)


@dataclass
class Space:
    """Discrete dimensions, each an ordered list of values (order matters for neighbours).

    `joint`: dimensions whose values only go together in the combinations listed, e.g. HPL's
    ("blas", "grid"): a serial BLAS only with one thread per rank, a threaded layout only with a threaded
    BLAS. The space is then the product of the other dimensions and of these combinations: a point
    outside them is never a candidate, a neighbour or counted in `size`. `dropped`: sentences saying what
    the declaration left out and why (shown with the space)."""

    dims: dict[str, list[Any]]
    joint: dict[tuple[str, ...], list[tuple]] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)

    def _units(self) -> list[tuple[tuple[str, ...], list[tuple]]]:
        """The independent parts of the space: each free dimension alone, each joint group's combinations
        (those whose values are all still in the dimensions)."""
        grouped = {k for keys in self.joint for k in keys}
        units = [((name,), [(v,) for v in values]) for name, values in self.dims.items() if name not in grouped]
        for keys, combos in self.joint.items():
            units.append((keys, [c for c in dict.fromkeys(tuple(c) for c in combos)
                                 if all(k in self.dims and v in self.dims[k] for k, v in zip(keys, c, strict=True))]))
        return units

    @property
    def size(self) -> int:
        out = 1
        for _keys, values in self._units():
            out *= len(values)
        return out

    def configs(self) -> Iterator[Config]:
        """Every point, in the dimensions' order (only for a space small enough to list)."""
        units = self._units()
        for combo in itertools.product(*(values for _keys, values in units)):
            yield Config.of({k: v for (keys, _), part in zip(units, combo, strict=True)
                             for k, v in zip(keys, part, strict=True)})

    def random(self, rng: random.Random) -> Config:
        return Config.of({k: v for keys, values in self._units() for k, v in zip(keys, rng.choice(values),
                                                                                strict=True)})

    def allowed(self, values: dict[str, Any]) -> bool:
        """Whether a point (or a partial one: groups it does not fully state are not checked) is in the space."""
        for keys, combos in self.joint.items():
            if all(k in values for k in keys) and tuple(values[k] for k in keys) not in {tuple(c) for c in combos}:
                return False
        return True

    def neighbours(self, config: Config) -> list[Config]:
        """Configurations with one dimension moved one step in its ordered values (those in the space)."""
        out = []
        values = config.as_dict()
        for name in sorted(self.dims):
            ordered = self.dims[name]
            if values.get(name) not in ordered:
                continue
            i = ordered.index(values[name])
            for j in (i - 1, i + 1):
                if 0 <= j < len(ordered) and self.allowed({**values, name: ordered[j]}):
                    out.append(Config.of({**values, name: ordered[j]}))
        return out


@dataclass(frozen=True)
class Sample:
    """One measurement: a configuration at a fidelity level. `value` is NaN when the run was invalid."""

    config: Config
    level: int
    repeat: int
    value: float  # higher is better (Gflop/s)
    seconds: float  # the trial's wall time, harness included
    valid: bool
    run_id: str | None = None
    replayed: bool = False  # found in the store: costs no budget
    # The run finished but does not count (analysis/flags.counts: disturbed by other work, suspect,
    # truncated, excluded): its figure is no evidence either way, so it is measured again (a new repeat),
    # neither promoted on nor held against the configuration, up to MAX_UNCOUNTED times.
    uncounted: bool = False


class Evaluator(Protocol):
    """Runs trials. It may also have `is_stored(config, level, repeat) -> bool`: when it says a trial is
    stored, the search calls evaluate() without a budget check, so a replay is never cut short."""

    def estimate_s(self, config: Config, level: int) -> float: ...
    def evaluate(self, config: Config, level: int, repeat: int) -> Sample: ...


@dataclass
class Incumbent:
    """A configuration's top-level median with a distribution-free interval.

    The interval is a pair of order statistics [x(j), x(n+1-j)] of the n samples, the narrowest whose
    binomial coverage of the true median is at least 95%. It assumes nothing about the noise (HPL's is
    skewed: slow outliers, never fast ones) and needs no random numbers. With fewer than 6 samples no
    pair reaches 95%: the interval is then [min, max] and `ci_level` says what it covers (75% for 3)."""

    config: Config
    level: int
    median: float
    ci_low: float
    ci_high: float
    samples: list[float]
    ci_level: float = 0.0  # the interval's actual coverage of the median


@dataclass
class SearchResult:
    best: Incumbent | None
    trials: list[Sample] = field(default_factory=list)
    history: list[tuple[float, float]] = field(default_factory=list)  # (elapsed s, best-so-far median)
    stopped: str = ""  # why the search ended: budget, space exhausted, ...
    spent_s: float = 0.0
    # Every configuration with final_repeats valid top-level samples, best median first.
    finalists: list[Incumbent] = field(default_factory=list)
    # The finalists other than the best whose interval overlaps the best's: not distinguishable from it.
    indistinguishable: list[Config] = field(default_factory=list)


def median_interval(values: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """(low, high, coverage): order-statistic interval for the median (see Incumbent)."""
    xs = sorted(values)
    n = len(xs)

    def coverage(j: int) -> float:
        return 1.0 - 2.0 * sum(math.comb(n, i) for i in range(j)) / 2.0**n

    j = 1
    while j + 1 <= n - j and coverage(j + 1) >= level:
        j += 1
    return xs[j - 1], xs[n - j], coverage(j)


class _Stop(Exception):
    """Raised inside the search when it must end; carries the reason for `stopped`."""


def _check(space: Space, levels: int, budget_s: float, eta: int, final_repeats: int) -> None:
    if not isinstance(eta, int) or eta < 2:
        raise UserInputError(f"eta {eta!r} is too small", hint="use an integer >= 2 (3 is usual)",
                             where="tune search")
    if not isinstance(levels, int) or not 1 <= levels <= MAX_LEVELS:
        raise UserInputError(f"{levels!r} fidelity levels", hint=f"use 1 to {MAX_LEVELS} levels",
                             where="tune search")
    if not isinstance(final_repeats, int) or not 2 <= final_repeats <= 20:
        raise UserInputError(f"final_repeats {final_repeats!r} is out of range",
                             hint="use 2 to 20 repeats (a best is never one sample)", where="tune search")
    empty = [name for name, values in space.dims.items() if not values]
    if not space.dims or empty:
        raise UserInputError(f"the search space has an empty dimension: {', '.join(empty) or '(none given)'}",
                             hint="give every dimension at least one value", where="tune search")
    if space.size > MAX_POINTS:
        raise UserInputError(f"the search space has {space.size} points, more than {MAX_POINTS}",
                             hint="give fewer values per dimension", where="tune search")
    if not budget_s > 0 or math.isinf(budget_s):
        raise UserInputError(f"time budget {budget_s!r} s", hint="give a positive, finite budget",
                             where="tune search")


class _Search:
    """The state of one search call: samples so far, the budget account and the candidate streams."""

    def __init__(self, space: Space, levels: int, evaluator: Evaluator, budget_s: float, seed: int,
                 prior: Callable[[Config], float] | None, eta: int, final_repeats: int,
                 progress: Callable[[Sample, SearchResult], None] | None, clock: Callable[[], float],
                 group: Callable[[Config], Any] | None = None):
        self.space, self.levels, self.ev, self.budget = space, levels, evaluator, budget_s
        self.group = group
        self.uncounted: dict[tuple[Config, int], int] = {}  # trials per (config, level) that did not count
        self.eta, self.repeats, self.progress, self.clock = eta, final_repeats, progress, clock
        self.top = levels - 1
        self.rng = random.Random(seed)
        self.values: dict[tuple[Config, int], list[float]] = {}  # valid values per (config, level)
        self.calls: dict[tuple[Config, int], int] = {}  # evaluate() calls per (config, level): the repeat
        self.dead: set[Config] = set()  # a config with an invalid run is never measured again
        self.entered: set[Config] = set()  # configs that have been in a bracket
        self.order: dict[Config, int] = {}  # first-entry order: the deterministic tie-break
        self.measured_s = self.estimated_s = 0.0  # for the estimate correction
        self.result = SearchResult(best=None)
        self.fresh = self._fresh(prior)

    # --- candidates -------------------------------------------------------------------------------------------

    def _random_config(self) -> Config:
        return self.space.random(self.rng)

    def _fresh(self, prior: Callable[[Config], float] | None) -> Iterator[Config]:
        """Configurations not yet entered: by the prior's rank (a share) interleaved with random ones."""
        small = self.space.size <= ENUMERATE_UP_TO
        if small:
            shuffled = list(self.space.configs())
            self.rng.shuffle(shuffled)
        else:
            shuffled = []
        ranked: list[Config] = []
        if prior is not None:
            pool = shuffled or list(dict.fromkeys(self._random_config() for _ in range(PRIOR_POOL)))
            ranked = sorted(pool, key=prior, reverse=True)  # stable: equal predictions keep shuffled order
        by_prior, at_random = iter(ranked), iter(shuffled)
        given: set[Config] = set()
        taken = 0
        misses = 0
        while True:
            use_prior = bool(ranked) and math.floor((taken + 1) * PRIOR_SHARE) > math.floor(taken * PRIOR_SHARE)
            source = by_prior if use_prior else at_random
            config = next(source, None)
            if config is None and use_prior:
                ranked = []
                continue
            if config is None:
                if small:
                    return
                config = self._random_config()
            if config in self.entered or config in given:  # the prior's and the random stream meet
                misses += 1
                if not small and misses > 1000:  # a huge space that random draws keep missing: give up
                    return
                continue
            misses = 0
            taken += 1
            given.add(config)  # a batch is entered only once taken whole (_candidates): no twice in one bracket
            yield config

    def _candidates(self, count: int) -> list[Config]:
        """A bracket's fresh configurations, in the order the fresh stream gives them."""
        out = list(itertools.islice(self.fresh, count))
        self._enter(out)
        return out

    def _enter(self, configs: list[Config]) -> None:
        for config in configs:
            self.entered.add(config)
            self.order.setdefault(config, len(self.order))

    # --- measuring --------------------------------------------------------------------------------------------

    def _ratio(self) -> float:
        """Measured over estimated wall time so far: corrects the evaluator's estimates for the budget."""
        return self.measured_s / self.estimated_s if self.estimated_s > 0 else 1.0

    def _measure(self, config: Config, level: int) -> None:
        """One more trial of `config` at `level`, unless the budget cannot take it."""
        repeat = self.calls.get((config, level), 0)
        estimate = max(0.0, float(self.ev.estimate_s(config, level)))
        is_stored = getattr(self.ev, "is_stored", None)
        stored = bool(is_stored(config, level, repeat)) if is_stored is not None else False
        if not stored and self.result.spent_s + estimate * self._ratio() > self.budget:
            raise _Stop(f"budget: the next trial ({config.key()}, level {level}) needs about "
                        f"{estimate * self._ratio():.0f} s, {self.budget - self.result.spent_s:.0f} s left")
        start = self.clock()
        sample = self.ev.evaluate(config, level, repeat)
        took = self.clock() - start
        self.calls[(config, level)] = repeat + 1
        if not sample.replayed:
            self.result.spent_s += took
        if estimate > 0:
            self.measured_s += sample.seconds if sample.replayed else took
            self.estimated_s += estimate
        self.result.trials.append(sample)
        if sample.uncounted:  # no evidence: measured again next time it is asked for, dropped after a few
            self.uncounted[(config, level)] = self.uncounted.get((config, level), 0) + 1
            if self.uncounted[(config, level)] >= MAX_UNCOUNTED:
                self.dead.add(config)
        elif sample.valid and not math.isnan(sample.value):
            self.values.setdefault((config, level), []).append(float(sample.value))
        else:
            self.dead.add(config)
        self._update_best()
        if self.progress is not None:
            self.progress(sample, self.result)

    def _value(self, config: Config, level: int) -> float | None:
        """The median at `level`, measuring once if there is no sample yet; None for a dropped config."""
        while config not in self.dead and (config, level) not in self.values:
            self._measure(config, level)  # a trial that did not count is measured again (MAX_UNCOUNTED bounds it)
        if config in self.dead:
            return None
        return statistics.median(self.values[(config, level)])

    # --- the incumbent ----------------------------------------------------------------------------------------

    def _incumbent(self, config: Config) -> Incumbent:
        samples = list(self.values[(config, self.top)])
        low, high, level = median_interval(samples)
        return Incumbent(config, self.top, statistics.median(samples), low, high, samples, level)

    def _update_best(self) -> None:
        """Rank the finalists by median (earlier entry wins ties) and note when the best changes."""
        finalists = [self._incumbent(c) for (c, level), vals in self.values.items()
                     if level == self.top and c not in self.dead and len(vals) >= self.repeats]
        finalists.sort(key=lambda inc: (-inc.median, self.order.get(inc.config, 0)))
        res = self.result
        old = res.best
        res.finalists = finalists
        res.best = finalists[0] if finalists else None
        res.indistinguishable = ([f.config for f in finalists[1:] if f.ci_high >= res.best.ci_low]
                                 if res.best else [])
        if res.best and (old is None or (old.config, old.median) != (res.best.config, res.best.median)):
            res.history.append((res.spent_s, res.best.median))

    # --- brackets ---------------------------------------------------------------------------------------------

    def _groups(self, configs: list[Config]) -> int:
        return len({self.group(c) for c in configs}) if self.group is not None else 1

    def _bracket_cost(self, candidates: list[Config]) -> float:
        """Estimated cost of a bracket up to its finals' repeats (trials at level 0 already measured cost 0);
        the race is optional, checked trial by trial."""
        counts = bracket_trials(len(candidates), self.levels, self.eta, self.repeats, self._groups(candidates))
        cost = 0.0
        for level, count in enumerate(counts):
            mean = statistics.fmean(self.ev.estimate_s(c, level) for c in candidates)
            if level == 0:
                count = min(count, len([c for c in candidates if (c, 0) not in self.values]))
            cost += mean * count
        return cost * self._ratio()

    def _promote(self, scored: list[tuple[float, int, Config]], level: int) -> list[Config]:
        """The best 1/eta of a level go up (from the top: to the finals); with groups (HPL: layouts), the best
        1/eta of each group. A small N can rank the layouts otherwise than the top N does (at N=3000 two
        ranks beat one rank of two threads, at N=8000 the reverse): a layout pruned at a small N would never
        show where it wins, and one top-level sample each is too few to decide between layouts a few
        percent apart, so each layout's best is a finalist (its repeats and the race decide)."""
        keep = [c for _, _, c in scored[: math.ceil(len(scored) / self.eta)]]
        if self.group is None:
            return keep
        by_group: dict = {}
        for _, _, config in scored:
            by_group.setdefault(self.group(config), []).append(config)
        ranks = [configs[: math.ceil(len(configs) / self.eta)] for configs in by_group.values()]
        # each group's best first, then each group's second...: what the budget trims last (_affordable)
        return [r[i] for i in range(max(map(len, ranks), default=0)) for r in ranks if i < len(r)]

    def _stored_next(self, config: Config, level: int) -> bool:
        """Whether the evaluator says the next trial of `config` at `level` (the top for the finals) is stored."""
        is_stored = getattr(self.ev, "is_stored", None)
        level = min(level, self.top)
        return bool(is_stored and is_stored(config, level, self.calls.get((config, level), 0)))

    def _affordable(self, alive: list[Config], level: int) -> list[Config]:
        """The promoted configurations cut from the end (the best of each group stay first) until the rest of
        the bracket, from `level` to the finals' repeats, fits the budget left by the estimates: an estimate
        that was low (the ratio is known only once trials ran) must not leave a bracket without finalists.
        On a resume (the first promoted's next trial is stored) the cut is the first call's: the promoted
        whose next trial is stored, so the replay makes the first call's decisions."""
        if alive and self._stored_next(alive[0], level):  # a resume: the first call's promotion, as it was cut
            while len(alive) > 1 and not self._stored_next(alive[-1], level):
                alive = alive[:-1]
            return alive
        left = self.budget - self.result.spent_s
        while len(alive) > 1:
            if level > self.top:  # the finals: their repeats at the top
                cost = (self.repeats - 1) * sum(self.ev.estimate_s(c, self.top) for c in alive)
            else:
                counts = bracket_trials(len(alive), self.levels - level, self.eta, self.repeats,
                                        self._groups(alive))
                cost = sum(count * statistics.fmean(self.ev.estimate_s(c, level + i) for c in alive)
                           for i, count in enumerate(counts))
            if cost * self._ratio() <= left:
                break
            alive = alive[:-1]
        return alive

    def _bracket(self, candidates: list[Config], start: int = 0) -> None:
        """Successive halving from level `start` to the top, then the finals: repeats of the survivors."""
        alive = candidates
        for level in range(start, self.levels):
            scored = [(v, i, c) for i, c in enumerate(alive) if (v := self._value(c, level)) is not None]
            scored.sort(key=lambda t: (-t[0], t[1]))
            alive = self._promote(scored, level)
            alive = self._affordable(alive, level + 1)
        for config in alive:
            while config not in self.dead and len(self.values.get((config, self.top), [])) < self.repeats:
                self._measure(config, self.top)

    def _refine(self) -> None:
        """The incumbent's neighbours not yet measured at the top level go straight there.

        Straight to the top, not through the cheap levels: the small-N optimum of NB is not the large-N
        one, so a neighbour pruned at level 0 may well be the better configuration where it matters."""
        if self.result.best is None:
            return
        near = [c for c in self.space.neighbours(self.result.best.config)
                if c not in self.dead and (c, self.top) not in self.values]
        self._enter(near)
        self._bracket(near, start=self.top)

    def _race(self) -> None:
        """One more top-level sample each for the incumbent and the eta-1 best finalists overlapping it."""
        best = self.result.best
        if best is None:
            return
        rivals = [best] + [f for f in self.result.finalists[1:] if f.ci_high >= best.ci_low]
        for inc in rivals[: self.eta]:
            if len(inc.samples) < RACE_CAP * self.repeats and inc.config not in self.dead:
                self._measure(inc.config, self.top)

    def run(self) -> SearchResult:
        size = self.eta ** self.levels  # so that about one configuration per bracket reaches the finals
        try:
            while True:
                before = len(self.result.trials)
                candidates = self._candidates(size)
                if candidates and self._replaying(candidates):
                    # a resume: the first call's bracket, as its budget cut it (its stored trials at level 0)
                    candidates = candidates[: self._stored_prefix(candidates)]
                elif candidates:
                    need = self._bracket_cost(candidates)
                    if self.result.spent_s + need > self.budget:
                        candidates = self._fitting(candidates)
                        if not candidates:
                            self._tail()
                            raise _Stop(f"budget: the next bracket needs about {need:.0f} s, "
                                        f"{self.budget - self.result.spent_s:.0f} s left")
                if candidates:
                    self._bracket(candidates)
                self._refine()
                for _ in range(RACE_ROUNDS):
                    self._race()
                if len(self.result.trials) == before:
                    raise _Stop("space exhausted")
        except _Stop as stop:
            self.result.stopped = str(stop)
        return self.result

    def _fitting(self, candidates: list[Config]) -> list[Config]:
        """The bracket's first candidates (best by prior first) cut down until the bracket fits what is
        left: a smaller successive halving still spends the end of the budget on new configurations.
        Fewer than eta candidates is no halving at all: none then."""
        left = self.budget - self.result.spent_s
        while len(candidates) > self.eta and self._bracket_cost(candidates) > left:
            fewer = len(candidates) // self.eta * (self.eta - 1) or len(candidates) - 1
            candidates = candidates[: max(fewer, self.eta)]  # eta is the smallest halving: always tried
        return candidates if len(candidates) >= self.eta and self._bracket_cost(candidates) <= left else []

    def _tail(self) -> None:
        """What is left of the budget, trial by trial: the incumbent's neighbours and the race, until a
        trial no longer fits (_measure raises _Stop) or nothing is left to measure."""
        while True:
            before = len(self.result.trials)
            self._refine()
            self._race()
            if len(self.result.trials) == before:
                return

    def _replaying(self, candidates: list[Config]) -> bool:
        """Whether the evaluator says the bracket's first trial is stored: then a resume replays it."""
        return self._stored_next(candidates[0], 0)

    def _stored_prefix(self, candidates: list[Config]) -> int:
        """How many of the bracket's first candidates have their level-0 trial stored: the bracket the first
        call ran (cut by its budget, or interrupted: it then promoted nothing from this level)."""
        count = 0
        while count < len(candidates) and self._stored_next(candidates[count], 0):
            count += 1
        return count


def search(space: Space, levels: int, evaluator: Evaluator, budget_s: float, *, seed: int = 0,
           prior: Callable[[Config], float] | None = None, eta: int = 3, final_repeats: int = 3,
           progress: Callable[[Sample, SearchResult], None] | None = None,
           clock: Callable[[], float] = time.monotonic, group: Callable[[Config], Any] | None = None) -> SearchResult:
    """Search `space` for the configuration with the highest top-level median within `budget_s`.

    `budget_s` counts the wall time (by `clock`) of evaluate() calls that were not replayed, nothing
    else. The result's `stopped` says why the search ended; `best` is None when no configuration got
    `final_repeats` valid samples at the top level. `group` (HPL: a configuration's layout): below the top,
    the best of each group is promoted besides the best 1/eta (_Search._promote)."""
    _check(space, levels, budget_s, eta, final_repeats)
    return _Search(space, levels, evaluator, budget_s, seed, prior, eta, final_repeats, progress, clock,
                   group).run()
