"""The noise floor of a configuration: how much identical runs of it differ, learned from repeats.

On a shared VM two identical HPL runs differ by up to 25%: a 4% "regression" there is no news,
however small a p-value a t-test gives it (the test takes every run as an independent draw; the
noise of a neighbour's job is not independent from run to run). So `compare` and `history` call a
difference significant only when it is beyond the floor of the configurations it is about, as well
as statistically significant.

What a floor is, per (system, benchmark, configuration, metric, unit):

- a *configuration* is analysis/identity.py's: every key a run states (parameters, nodes, BLAS,
  tags, system...). Runs are pooled only when their identities are equal, a key one does not
  state counting as a value of its own: a run whose identity differs or is unknown is never
  pooled with another;
- a run that does not say which machine ran it (no system: an imported file without a host name
  or a `system` tag) or on how many nodes gives no floor: two such files may come from two
  machines, and their spread would be the machines' difference, not noise;
- its *repeat groups* are the values of one metric with one combination of identifying labels
  (a ping-pong message size, an HPL line's N and NB): each counted run (analysis/flags.counts:
  a failed, invalid, truncated, suspect, disturbed or excluded run never counts) gives one value
  per group (the median when it stores several);
- a group with at least MIN_REPEATS values has a *robust CV*: 1.4826 x MAD / |median|, the
  coefficient of variation a normal sample would have, but not inflated by the one slow run in
  ten that a standard deviation squares;
- the **floor** is the CVs of the configuration's groups pooled as variances are,
  sqrt(sum((n_i - 1) cv_i^2) / sum(n_i - 1)): the relative spread of one run, in the units a
  change is given in. It is a point estimate, not an upper bound: with 3 repeats the 95% upper
  bound of a CV is 4.4 times the estimate, which would hide any real change of a configuration
  measured three times; the count (`n`) is stored beside it so a reader can weigh it.

The robust CV also keeps a series' own change from hiding itself: a history's floor is learned from
the runs it shows, and a clean step of d between two halves of them gives a MAD of d/2, a floor
of about 0.74 d: below the step, which stays a change.

A difference of two means smaller than the spread of a single run is called "within the noise
floor (X%)". Floors are learned and stored (store/noise.py) by analysis/learn_noise.py `refresh`,
which `bench` calls after its repeats and `history --noise` on demand; `compare` and `history` only
read them here (they open the store read-only), and say once when no floor is known.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from clusterbench.analysis.identity import key_text
from clusterbench.store import noise as stored
from clusterbench.store.db import Store

MIN_REPEATS = 3
HARDWARE_KEYS = ("system", "nodes")  # a run that does not state both has no floor: which machine ran it is unknown
MAD_TO_SD = 1.4826  # MAD x this estimates a normal sample's standard deviation
UNKNOWN_NOTE = "no noise floor known (history --noise learns them from 3+ repeats)"


@dataclass
class Floor:
    system: str | None
    benchmark: str
    configuration: str  # the identity as canonical JSON text (benchmark apart)
    metric: str
    unit: str
    floor: float  # pooled robust CV: the relative spread of one run
    n: int  # counted values it comes from
    groups: int  # repeat groups (label combinations) pooled
    runs: list[str] = field(default_factory=list)

    def as_row(self) -> dict:
        return {"benchmark": self.benchmark, "configuration": self.configuration, "metric": self.metric,
                "unit": self.unit, "system": self.system, "floor": self.floor, "n": self.n, "groups": self.groups,
                "runs": self.runs}


word = key_text  # a key's value as text, as identities are compared: 13440.0 is 13440; None and NaN unknown


def configuration_text(ident: dict) -> str:
    """An identity (identity.run_identity) as the floor's key: every stated key but the benchmark, as
    text, sorted. A key the run does not state is absent, so it never matches a run that states it."""
    kept = {str(k): w for k, v in ident.items() if k != "benchmark" and (w := word(v)) is not None}
    return json.dumps(kept, sort_keys=True)


def robust_cv(values: list[float]) -> float | None:
    """1.4826 x MAD / |median|, None for fewer than MIN_REPEATS values or a zero median."""
    if len(values) < MIN_REPEATS:
        return None
    series = pd.Series(values, dtype=float)
    median = float(series.median())
    if not median:
        return None
    mad = float((series - median).abs().median())
    return MAD_TO_SD * mad / abs(median)


def pooled(cvs: list[tuple[float, int]]) -> float | None:
    """CVs of groups of n values each, pooled as variances are (weights n - 1)."""
    weight = sum(n - 1 for _cv, n in cvs)
    if weight <= 0:
        return None
    return math.sqrt(sum((n - 1) * cv * cv for cv, n in cvs) / weight)


def read(store: Store, benchmarks: Iterable[str] | None = None, metrics: Iterable[str] | None = None) -> list[Floor]:
    """The stored floors (none when nothing was ever refreshed)."""
    return [Floor(r["system"], r["benchmark"], r["configuration"], r["metric"], r["unit"], float(r["floor"]),
                  int(r["n"]), int(r["groups"]), list(r["runs"]))
            for r in stored.read_floors(store, benchmarks, metrics)]


class Floors:
    """The stored floors by key, for looking up the floor of a run's configuration."""

    def __init__(self, floors: list[Floor]):
        self.by_key = {(f.benchmark, f.configuration, f.metric, f.unit): f for f in floors}

    @classmethod
    def of(cls, store: Store, benchmarks: Iterable[str] | None = None,
           metrics: Iterable[str] | None = None) -> Floors:
        return cls(read(store, benchmarks, metrics))

    def __bool__(self) -> bool:
        return bool(self.by_key)

    def floor(self, benchmark: str, ident: dict, metric: str, unit: str) -> Floor | None:
        return self.by_key.get((benchmark, configuration_text(ident), metric, unit or ""))

    def widest(self, benchmark: str, identities: Iterable[dict], metric: str, unit: str) -> Floor | None:
        """The largest known floor of these configurations (a difference must clear the noise of each side)."""
        known = [f for ident in identities if (f := self.floor(benchmark, ident, metric, unit)) is not None]
        return max(known, key=lambda f: f.floor) if known else None


def within(change: float | None, floor: Floor | None) -> bool:
    """Is a relative change (a fraction, signed) within the floor? False when either is unknown."""
    return change is not None and floor is not None and abs(change) <= floor.floor


WITHIN = "within the noise floor"


def within_words(floor: Floor) -> str:
    return f"{WITHIN} ({percent(floor.floor)})"


def percent(fraction: float) -> str:
    return f"{100 * fraction:.2g}%" if 100 * fraction < 10 else f"{100 * fraction:.0f}%"
