"""The tuner's search engine on synthetic landscapes: no processes, a fake clock, no sleeping.

The HPL-like landscape: NB with a smooth optimum that moves to smaller NB at smaller N (low fidelity is
biased, as in HPL), a process grid, two BLAS, six broadcasts and three look-ahead depths, a small
deterministic interaction per configuration, 5% multiplicative noise and 5% of runs 25% slow.
A trial's cost grows as 3**level and is slower for slower configurations."""

from __future__ import annotations

import itertools
import math
import random
import statistics
import zlib

import pytest

from clusterbench.errors import UserInputError
from clusterbench.tune.search import Config, Sample, Space, median_interval, search

NB = [32, 48, 64, 96, 128, 160, 192, 224, 256, 288, 320, 384]
FACTORS = {
    "grid": {"1x4": 0.94, "2x2": 1.0, "4x1": 0.85},
    "blas": {"openblas": 1.0, "blis": 0.97},
    "bcast": {"1rg": 0.985, "1rM": 1.0, "2rg": 0.99, "2rM": 0.995, "Lng": 0.97, "LnM": 0.98},
    "depth": {0: 0.97, 1: 1.0, 2: 0.99},
}
LEVELS = 3


def hpl_space() -> Space:
    return Space({"nb": list(NB), **{name: list(f) for name, f in FACTORS.items()}})


def true_value(config: Config, level: int = LEVELS - 1) -> float:
    """Noise-free value: what the search should find at the top level."""
    d = config.as_dict()
    best_nb = 7 - (LEVELS - 1 - level)  # small N prefers smaller NB
    out = 100.0 * (0.5 + 0.5 * level / (LEVELS - 1)) * (1 - 0.006 * (NB.index(d["nb"]) - best_nb) ** 2)
    for name, f in FACTORS.items():
        out *= f[d[name]]
    spread = 0.01 if level == LEVELS - 1 else 0.03  # interactions the main effects do not explain
    u = zlib.crc32(f"{config.key()}|{level}".encode()) / 2**32
    return out * (1 + spread * (2 * u - 1))


class Landscape:
    """A fake HPL: noisy values, costs on a fake clock, estimates 20% high, optional invalid configs."""

    def __init__(self, seed: int, invalid=lambda c: False, stored: dict | None = None):
        self.rng = random.Random(seed)
        self.now = 0.0
        self.invalid = invalid
        self.stored = stored or {}  # (config, level, repeat) -> Sample: replayed at no cost
        self.calls: list[tuple[Config, int, int]] = []
        self.real: list[tuple[Config, int, int]] = []

    def estimate_s(self, config: Config, level: int) -> float:
        return 12.0 * 3**level

    def evaluate(self, config: Config, level: int, repeat: int) -> Sample:
        key = (config, level, repeat)
        self.calls.append(key)
        if key in self.stored:
            old = self.stored[key]
            return Sample(config, level, repeat, old.value, old.seconds, old.valid, replayed=True)
        self.real.append(key)
        value = true_value(config, level) * (1 + self.rng.gauss(0, 0.05))
        if self.rng.random() < 0.05:
            value *= 0.75
        seconds = 10.0 * 3**level * (100.0 * (0.5 + 0.5 * level / (LEVELS - 1))) / value
        self.now += seconds
        if self.invalid(config):
            return Sample(config, level, repeat, math.nan, seconds, False)
        return Sample(config, level, repeat, value, seconds, True)


def all_configs(space: Space) -> list[Config]:
    return [Config.of(dict(zip(space.dims, combo, strict=True))) for combo in itertools.product(*space.dims.values())]


def sweep(space: Space, seed: int) -> tuple[float, Config]:
    """The exhaustive sweep the tuner is measured against: every point at the top level, three repeats.

    Returns its wall time and its pick (the best median of three)."""
    ev = Landscape(seed)
    medians = {c: statistics.median(ev.evaluate(c, LEVELS - 1, r).value for r in range(3)) for c in all_configs(space)}
    return ev.now, max(medians, key=medians.__getitem__)


def prior(config: Config) -> float:
    """A rough analytic model: knows the grid and BLAS, nothing of the broadcast or depth, NB only roughly."""
    d = config.as_dict()
    return FACTORS["grid"][d["grid"]] * FACTORS["blas"][d["blas"]] * (1 - 0.003 * (NB.index(d["nb"]) - 5) ** 2)


def tune_vs_sweep(fraction: float, seeds=range(10), use_prior: bool = False) -> list[tuple[float, float]]:
    """Per seed: (tuner's true value / true optimum, tuner's true value / true value of the sweep's pick)."""
    space = hpl_space()
    optimum = max(true_value(c) for c in all_configs(space))
    out = []
    for seed in seeds:
        cost, pick = sweep(space, 5000 + seed)
        ev = Landscape(1000 + seed)
        res = search(space, LEVELS, ev, fraction * cost, seed=seed, prior=prior if use_prior else None,
                     clock=lambda ev=ev: ev.now)
        # A trial starts only if its estimate fits; only the last one can overrun, by its own error.
        assert res.spent_s - res.trials[-1].seconds <= fraction * cost
        got = true_value(res.best.config) if res.best else 0.0
        out.append((got / optimum, got / true_value(pick)))
    return out


def test_reaches_99_percent_of_the_sweep_with_15_percent_of_its_time():
    """The issue's acceptance: the tuner's pick is worth >= 99% of the sweep's pick (true values, i.e.
    re-measured without end), in most seeds. Against the true optimum the figure is printed, not
    asserted: with 5% noise even the sweep's own pick (best median of three) rarely reaches 99% of it."""
    for use_prior in (False, True):
        got = tune_vs_sweep(0.15, use_prior=use_prior)
        print(f"prior={use_prior}, 15% of the sweep: true value / optimum:", [f"{a:.3f}" for a, _ in got],
              "/ sweep's pick:", [f"{b:.3f}" for _, b in got])
        assert sum(b >= 0.99 for _, b in got) >= 7, got


def small_space() -> Space:
    return Space({"nb": NB[4:10], "grid": ["1x4", "2x2"], "blas": ["openblas"], "bcast": ["1rM", "2rM"],
                  "depth": [1]})


def test_resume_replays_the_first_call_and_continues():
    space = hpl_space()
    first = Landscape(7)
    one = search(space, LEVELS, first, 8_000.0, seed=3, clock=lambda: first.now)
    assert one.stopped.startswith("budget") and one.best is not None
    stored = {(s.config, s.level, s.repeat): s for s in one.trials}
    second = Landscape(8, stored=stored)
    two = search(space, LEVELS, second, 20_000.0, seed=3, clock=lambda: second.now)
    assert second.calls[: len(first.calls)] == first.calls  # the first call's decisions, replayed
    assert len(second.calls) > len(first.calls)
    assert not set(second.real) & set(first.real)  # nothing run twice
    assert len(set(second.calls)) == len(second.calls)
    assert two.spent_s == pytest.approx(second.now)  # replayed trials cost nothing
    assert all(s.replayed for s in two.trials[: len(one.trials)])


def test_a_replay_is_not_cut_by_a_small_budget_when_the_evaluator_says_trials_are_stored():
    first = Landscape(7)
    one = search(hpl_space(), LEVELS, first, 8_000.0, seed=3, clock=lambda: first.now)
    stored = {(s.config, s.level, s.repeat): s for s in one.trials}
    again = Landscape(8, stored=stored)
    again.is_stored = lambda config, level, repeat: (config, level, repeat) in stored
    res = search(hpl_space(), LEVELS, again, 1.0, seed=3, clock=lambda: again.now)
    assert again.calls == first.calls and again.real == []
    assert "budget" in res.stopped and res.best == one.best


def test_timing_does_not_change_the_decisions():
    """Same values, different trial durations: the same evaluate() calls in the same order."""
    runs = []
    for scale in (1.0, 3.7):
        ev = Landscape(11)
        res = search(small_space(), LEVELS, ev, 1e9, seed=5, clock=lambda ev=ev, scale=scale: ev.now * scale)
        runs.append(ev.calls)
        assert res.stopped == "space exhausted"
    assert runs[0] == runs[1]


def test_a_small_space_is_not_rerun_at_level_0():
    ev = Landscape(2)
    res = search(small_space(), LEVELS, ev, 1e9, seed=1, clock=lambda: ev.now)
    level0 = [c for c, level, _ in ev.calls if level == 0]
    assert len(level0) == len(set(level0)) == small_space().size
    assert res.stopped == "space exhausted" and res.best is not None


def test_no_best_from_one_sample_and_the_uncertainty_is_shown():
    seen = []

    def progress(sample: Sample, partial) -> None:
        best = partial.best
        seen.append(sample)
        if best is not None:
            assert len(best.samples) >= 4 and best.median == statistics.median(best.samples)
            assert best.ci_low <= best.median <= best.ci_high

    ev = Landscape(4)
    res = search(hpl_space(), LEVELS, ev, 20_000.0, seed=2, final_repeats=4, progress=progress,
                 clock=lambda: ev.now)
    assert seen == res.trials and res.best is not None
    assert res.finalists[0] == res.best and all(len(f.samples) >= 4 for f in res.finalists)
    assert all(c in {f.config for f in res.finalists} for c in res.indistinguishable)
    assert res.history and res.history[-1][1] == res.best.median
    assert [t for t, _ in res.history] == sorted(t for t, _ in res.history)


def test_invalid_runs_never_become_best_and_their_config_is_dropped():
    bad = {224, 192, 256}  # the neighbourhood of the optimum fails its residual check
    ev = Landscape(5, invalid=lambda c: c.as_dict()["nb"] in bad)
    res = search(hpl_space(), LEVELS, ev, 30_000.0, seed=0, clock=lambda: ev.now)
    assert res.best is not None and res.best.config.as_dict()["nb"] not in bad
    assert all(f.config.as_dict()["nb"] not in bad for f in res.finalists)
    invalid = [s.config for s in res.trials if not s.valid]
    assert invalid and len(invalid) == len(set(invalid))  # one invalid run and the config is never run again
    assert not {s.config for s in res.trials if s.valid} & set(invalid)


def test_a_budget_smaller_than_any_trial_gives_no_best():
    ev = Landscape(0)
    res = search(hpl_space(), LEVELS, ev, 5.0, seed=0, clock=lambda: ev.now)
    assert res.best is None and "budget" in res.stopped and ev.calls == [] and res.spent_s == 0


def test_a_prior_chooses_the_first_candidates():
    ev = Landscape(0)
    search(hpl_space(), LEVELS, ev, 3_000.0, seed=0, prior=prior, clock=lambda: ev.now)
    best_by_prior = max(all_configs(hpl_space()), key=prior)
    first_bracket = [c for c, level, _ in ev.calls[:27] if level == 0]
    assert best_by_prior in first_bracket


def test_a_huge_space_is_sampled_not_listed():
    space = Space({f"d{i}": list(range(10)) for i in range(7)})  # 10**7 points, the limit

    class Smooth:
        now = 0.0

        def estimate_s(self, config, level):
            return 3.0**level

        def evaluate(self, config, level, repeat):
            self.now += 3.0**level
            return Sample(config, level, repeat, -sum((v - 6) ** 2 for _, v in config.items), 3.0**level, True)

    ev = Smooth()
    res = search(space, 2, ev, 400.0, seed=1, prior=lambda c: -abs(c.as_dict()["d0"] - 6), clock=lambda: ev.now)
    assert res.best is not None and res.stopped.startswith("budget")


@pytest.mark.parametrize("kwargs, what", [
    ({"eta": 1}, "eta"), ({"levels": 0}, "levels"), ({"levels": 9}, "levels"),
    ({"final_repeats": 1}, "final_repeats"), ({"final_repeats": 21}, "final_repeats"),
    ({"budget_s": 0.0}, "budget"), ({"budget_s": -1.0}, "budget"), ({"budget_s": math.nan}, "budget"),
    ({"space": Space({"nb": []})}, "empty"), ({"space": Space({})}, "empty"),
    ({"space": Space({f"d{i}": list(range(10)) for i in range(7)} | {"x": [1, 2]})}, "points"),
])
def test_bounds_are_refused(kwargs, what):
    args = {"space": small_space(), "levels": 2, "evaluator": Landscape(0), "budget_s": 100.0} | kwargs
    levels, space, ev, budget = args.pop("levels"), args.pop("space"), args.pop("evaluator"), args.pop("budget_s")
    with pytest.raises(UserInputError, match=what):
        search(space, levels, ev, budget, **args)


def test_median_interval_is_order_statistics():
    assert median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0, 0.75)
    low, high, level = median_interval([float(i) for i in range(1, 11)])
    assert (low, high) == (2.0, 9.0) and level >= 0.95
