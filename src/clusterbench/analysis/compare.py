"""Baseline against candidate: per metric, the means of two selections, the change in %, and
whether the difference stands out of the noise.

Every run is one sample. Values are matched on the metric and on the labels that name what
was measured (message size, STREAM kernel, HPL N/NB/P/Q), never on the timing or residual
labels. The test is Welch's t-test (unequal variances) by default, or Mann-Whitney U when
the samples cannot be assumed normal; with fewer than `MIN_REPEATS` valid samples on a side
no verdict is given, whatever the p-value would say.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from clusterbench.analysis.dataset import load
from clusterbench.analysis.select import Selection
from clusterbench.analysis.stats import describe
from clusterbench.errors import UserInputError
from clusterbench.store.db import Store

MIN_REPEATS = 3
IDENTITY_LABELS = ("test", "kernel", "bytes", "n", "nb", "p", "q", "tv")
TESTS = ("welch", "mannwhitney")


@dataclass
class Row:
    metric: str
    labels: str  # "bytes=1024", "" when the metric has no identifying labels
    unit: str
    higher_is_better: bool
    a: dict  # describe(): n, mean, std, ...
    b: dict
    a_runs: list[str]
    b_runs: list[str]
    change_pct: float | None
    p_value: float | None
    verdict: str


def compare(store: Store, a: Selection, b: Selection, test: str = "welch", alpha: float = 0.05,
            metrics: list[str] | None = None, with_unitless: bool = False) -> list[Row]:
    """One row per metric (and identifying labels) that both sides measured validly."""
    side_a, side_b = _samples(store, a, metrics, "baseline"), _samples(store, b, metrics, "candidate")
    rows = []
    for key in sorted(side_a.keys() & side_b.keys()):
        metric, labels, unit, hib = key
        if not unit and not with_unitless and not metrics:  # HPCC echoes its parameters as unitless values
            continue
        (va, ia), (vb, ib) = side_a[key], side_b[key]
        da, db = describe(va), describe(vb)
        change = 100.0 * (db["mean"] - da["mean"]) / da["mean"] if da["mean"] else None
        p = p_value(va, vb, test)
        rows.append(Row(metric, labels, unit, hib, da, db, ia, ib, change, p, verdict(va, vb, p, alpha, hib)))
    return rows


def p_value(a: list[float], b: list[float], test: str = "welch") -> float | None:
    """Two-sided p-value of the difference; None when it is undefined (too few or constant samples)."""
    from scipy import stats

    if len(a) < 2 or len(b) < 2 or (len(set(a)) == 1 and len(set(b)) == 1):
        return None
    if test == "mannwhitney":
        result = stats.mannwhitneyu(a, b, alternative="two-sided")
    else:
        result = stats.ttest_ind(a, b, equal_var=False)
    p = float(result.pvalue)
    return None if math.isnan(p) else p


def verdict(a: list[float], b: list[float], p: float | None, alpha: float, higher_is_better: bool) -> str:
    if min(len(a), len(b)) < MIN_REPEATS:
        return f"not enough repeats (n < {MIN_REPEATS} on a side)"
    if p is None:
        return "identical samples" if set(a) == set(b) else "no test possible"
    if p >= alpha:
        return "no significant difference"
    better = (sum(b) / len(b) > sum(a) / len(a)) == higher_is_better
    return "better" if better else "worse"


def _samples(store: Store, selection: Selection, metrics: list[str] | None, side: str) -> dict:
    """(metric, labels, unit, higher is better) -> (values, run ids), valid values only."""
    data = load(store, selection, names=set(metrics) if metrics else None)
    if not data.runs:
        raise UserInputError(f"the {side} selection {selection.describe()!r} matches no stored run")
    out: dict = {}
    for rec in data.metrics[data.metrics["valid"]].itertuples(index=False):
        labels = ", ".join(f"{k}={rec.labels[k]}" for k in IDENTITY_LABELS if k in rec.labels)
        values, ids = out.setdefault((rec.name, labels, rec.unit, rec.higher_is_better), ([], []))
        values.append(rec.value)
        ids.append(rec.run_id)
    return out

