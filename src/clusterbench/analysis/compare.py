"""Baseline against candidate, paired by configuration: one overall verdict, then per pair the
means of each side, the change in %, and whether the difference stands out of the noise.

The keys under study are the ones the selections name (`blas=openblas` against `blas=mkl`), else
the keys in which the two sides differ as wholes (one value on each side, not the same). Every
other identifying key (analysis/identity.py, with the value's identifying labels: message size,
STREAM kernel, HPL N/NB/P/Q) must match within a pair (analysis/baseline.py): two BLAS each run at
its own N and NB are never compared, the comparison is refused with the nearest pairs. With
`match_on` the user allows fewer keys to match: then the best value of each side is compared per
metric and those keys, labelled as best against best (no test).

The overall verdict is the geometric mean of candidate/baseline over all matched pairs (time-like
metrics inverted, so above 1 is better), with a 95% t interval on the log ratios, and the number of
pairs significantly better or worse. Within a pair every run is one sample; the test is Welch's
t-test (unequal variances) by default, or Mann-Whitney U; with fewer than `MIN_REPEATS` valid
samples on a side no verdict is given for that pair, whatever the p-value would say.
Flagged runs (analysis/flags.NOT_COUNTED) are on neither side; how many were left out is kept.

A significant pair is also held against the noise floor of its configurations (analysis/noise.py:
the spread of one run, learned from stored repeats): a change no larger than the widest floor of
the runs on either side is "within the noise floor (X%)", not better or worse. Where no floor is
known the verdicts are the test's alone, and the comparison says once that no floor is known.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from clusterbench.analysis import baseline, identity, noise
from clusterbench.analysis.dataset import load
from clusterbench.analysis.select import Selection
from clusterbench.analysis.stats import describe
from clusterbench.errors import UserInputError
from clusterbench.store.db import Store

MIN_REPEATS = 3
IDENTITY_LABELS = ("test", "kernel", "bytes", "n", "nb", "p", "q", "tv")
TESTS = ("welch", "mannwhitney")
CONFIDENCE = 0.95
MAX_MATCH_ON = 16
BEST_VS_BEST = "best vs best (no test)"


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
    configuration: str = ""  # the pair's values of the keys that vary within the selections
    ratio: float | None = None  # candidate mean / baseline mean
    noise_floor: float | None = None  # the widest noise floor of the pair's configurations (a fraction), if known


@dataclass
class Summary:
    """The one answer: geometric mean of the performance ratio (above 1: candidate better)."""

    pairs: int
    ratio: float | None
    low: float | None
    high: float | None
    better: int
    worse: int
    not_significant: int
    untested: int  # pairs with fewer than MIN_REPEATS values on a side
    single: int  # pairs with a single value on a side
    per_metric: list[tuple[str, str, int, float | None, float | None, float | None]] = field(default_factory=list)
    within_noise: int = 0  # pairs significant by the test, but within their noise floor
    noise_floor: float | None = None  # the widest floor of the pairs, when every pair has one

    @property
    def word(self) -> str:
        word = self._word
        if word in ("better", "worse") and self.noise_floor is not None and self.ratio is not None \
                and abs(self.ratio - 1) <= self.noise_floor:
            return f"{noise.WITHIN} ({noise.percent(self.noise_floor)})"
        return word

    @property
    def _word(self) -> str:
        if self.ratio is None:
            return "no verdict"
        if self.low is None or self.high is None:
            return "one pair, no interval"
        if self.low > 1:
            return "better"
        if self.high < 1:
            return "worse"
        return "no clear change"


@dataclass
class Comparison:
    rows: list[Row]
    summary: Summary
    under_study: list[str]  # the keys the sides differ in by design
    match_on: list[str] | None  # None: every other key matched (paired); else best vs best on these
    left_out: dict[str, dict[str, int]]  # side -> flag -> runs left out
    noise_note: str = ""  # said once: no noise floor is known for any pair

    @property
    def paired(self) -> bool:
        return self.match_on is None


def compare(store: Store, a: Selection, b: Selection, test: str = "welch", alpha: float = 0.05,
            metrics: list[str] | None = None, with_unitless: bool = False,
            match_on: list[str] | None = None) -> Comparison:
    """Pairs of the same configuration (but the keys under study) that both sides measured validly.
    Raises UserInputError, naming the differing keys and the nearest pairs, when there is none."""
    if match_on is not None and not 0 < len(match_on) <= MAX_MATCH_ON:
        raise UserInputError(f"--match-on takes 1 to {MAX_MATCH_ON} keys")
    side_a, side_b = _Side(store, a, metrics, "baseline"), _Side(store, b, metrics, "candidate")
    under_study = _under_study(a, b, side_a, side_b)
    hidden = baseline.study_keys(under_study)
    values_a = side_a.values(hidden, with_unitless or bool(metrics))
    values_b = side_b.values(hidden, with_unitless or bool(metrics))
    left_out = {"baseline": dict(side_a.left_out), "candidate": dict(side_b.left_out)}
    common_metrics = {k[:3] for k in values_a} & {k[:3] for k in values_b}
    if not common_metrics:
        raise UserInputError("the two selections have no metric in common",
                             hint="check the selections with `clusterbench results --select TERMS`")
    if match_on is not None:
        rows = _best_vs_best(values_a, values_b, match_on)
    else:
        shown_keys = _varying(values_a, values_b)
        rows = []
        for key in sorted(values_a.keys() & values_b.keys()):
            metric, unit, hib, _conf_text = key
            (va, ia, conf), (vb, ib, _) = values_a[key], values_b[key]
            rows.append(_row(metric, unit, hib, conf, va, vb, ia, ib, test, alpha, shown_keys))
        if not rows:
            raise _refused(values_a, values_b, common_metrics, under_study)
    note = "" if match_on is not None else _held_to_noise(store, rows, side_a, side_b)
    return Comparison(rows, summarise(rows, alpha), under_study, match_on, left_out, note)


def _held_to_noise(store: Store, rows: list[Row], side_a: _Side, side_b: _Side) -> str:
    """Give each pair the widest stored noise floor of its runs' configurations, and turn a significant
    change within it into "within the noise floor (X%)". Returns the note to say once when no pair
    has a floor ("" when some has)."""
    floors = noise.Floors.of(store, metrics={r.metric for r in rows})
    known = 0
    for row in rows:
        identities = [side_a.identities[i] for i in row.a_runs] + [side_b.identities[i] for i in row.b_runs]
        by_benchmark: dict[str, list[dict]] = {}
        for ident in identities:
            by_benchmark.setdefault(str(ident.get("benchmark")), []).append(ident)
        found = [f for b, idents in by_benchmark.items() if (f := floors.widest(b, idents, row.metric, row.unit))]
        if not found:
            continue
        floor = max(found, key=lambda f: f.floor)
        row.noise_floor = floor.floor
        known += 1
        change = None if row.change_pct is None else row.change_pct / 100
        if row.verdict in ("better", "worse") and noise.within(change, floor):
            row.verdict = noise.within_words(floor)
    return "" if known else noise.UNKNOWN_NOTE


class _Side:
    """One selection: its counted runs, their identities, and how many flagged runs were left out."""

    def __init__(self, store: Store, selection: Selection, metrics: list[str] | None, name: str):
        self.data = load(store, selection, names=set(metrics) if metrics else None)
        if not self.data.runs:
            raise UserInputError(f"the {name} selection {selection.describe()!r} matches no stored run")
        self.runs, self.left_out = baseline.counted(self.data.runs)
        if not self.runs:
            raise UserInputError(f"every run of the {name} selection {selection.describe()!r} is flagged "
                                 f"({', '.join(sorted(self.left_out))}): none may be compared",
                                 hint="see `clusterbench results --select TERMS`; `include` undoes an exclude")
        hosts = {sid: s.get("hostname") for sid, s in self.data.systems.items()}
        self.identities = {rid: identity.run_identity(run, hosts.get(run.get("system_id") or ""))
                           for rid, run in self.runs.items()}

    def values(self, hidden: set[str], with_unitless: bool) -> dict:
        """(metric, unit, higher is better, configuration text) -> (values, run ids, configuration)."""
        out: dict = {}
        frame = self.data.metrics
        if frame.empty:
            return out
        for rec in frame[frame["valid"]].itertuples(index=False):
            if rec.run_id not in self.identities or (not rec.unit and not with_unitless):
                continue  # HPCC echoes its parameters as unitless values
            if rec.value is None or not math.isfinite(rec.value):
                continue
            labels = {k: rec.labels[k] for k in IDENTITY_LABELS if k in (rec.labels or {})}
            conf = baseline.configuration(self.identities[rec.run_id], labels, hidden)
            values, ids, _ = out.setdefault((rec.name, rec.unit, bool(rec.higher_is_better), baseline.text(conf)),
                                            ([], [], conf))
            values.append(float(rec.value))
            ids.append(rec.run_id)
        return out

    def constant(self) -> dict[str, str | None]:
        """The identity keys that take one value over all this side's runs (unknown is a value)."""
        keys = set().union(*self.identities.values()) if self.identities else set()
        out = {}
        for key in keys:
            found = {identity.shown(i.get(key)) for i in self.identities.values()}
            if len(found) == 1:
                out[key] = found.pop()
        return out


def _under_study(a: Selection, b: Selection, side_a: _Side, side_b: _Side) -> list[str]:
    """The keys the selections name with '=' (tag, parameter or bare key terms), else the keys that
    take one value on each side and not the same one: the change the user asks about."""
    named = {t.key for sel in (a, b) for t in sel.conditions if t.op == "=" and t.kind in ("tag", "param", "auto")}
    stated = set().union(*side_a.identities.values(), *side_b.identities.values())
    named = {k for k in named if baseline.twins(k) & stated}  # campaign=, status=: not a configuration key
    if named:
        return sorted(named)
    const_a, const_b = side_a.constant(), side_b.constant()
    differ = sorted(k for k in const_a.keys() & const_b.keys() if const_a[k] != const_b[k])
    # A key one side states and the other does not, stated alike on all of its runs, differs too.
    differ += sorted(k for k in const_a.keys() ^ const_b.keys()
                     if (k in const_a and all(k not in i for i in side_b.identities.values()))
                     or (k in const_b and all(k not in i for i in side_a.identities.values())))
    return sorted(set(differ))


def _varying(values_a: dict, values_b: dict) -> list[str]:
    """The configuration keys that take more than one value over both sides: shown per pair."""
    confs = [v[2] for v in values_a.values()] + [v[2] for v in values_b.values()]
    keys = set().union(*confs) if confs else set()
    return sorted(k for k in keys if len({identity.shown(c.get(k)) for c in confs}) > 1
                  and k not in IDENTITY_LABELS)


def _row(metric, unit, hib, conf, va, vb, ia, ib, test, alpha, shown_keys) -> Row:
    da, db = describe(va), describe(vb)
    change = 100.0 * (db["mean"] - da["mean"]) / da["mean"] if da["mean"] else None
    ratio = db["mean"] / da["mean"] if da["mean"] and da["mean"] > 0 and db["mean"] > 0 else None
    p = p_value(va, vb, test)
    labels = ", ".join(f"{k}={identity.shown(conf[k])}" for k in IDENTITY_LABELS if k in conf)
    configuration = baseline.shown(conf, [k for k in shown_keys if k in conf], limit=200)
    return Row(metric, labels, unit, hib, da, db, ia, ib, change, p, verdict(va, vb, p, alpha, hib),
               configuration, ratio)


def _best_vs_best(values_a: dict, values_b: dict, match_on: list[str]) -> list[Row]:
    """Per metric and the values of the `match_on` keys: each side's best value, no test."""
    def best(values: dict) -> dict:
        out: dict = {}
        for (metric, unit, hib, _t), (vals, ids, conf) in values.items():
            kept = {k: conf.get(k) for k in match_on}
            key = (metric, unit, hib, baseline.text({k: v for k, v in kept.items() if v is not None}))
            for value, rid in zip(vals, ids, strict=True):
                current = out.get(key)
                if current is None or (value > current[0] if hib else value < current[0]):
                    out[key] = (value, rid, conf)
        return out

    best_a, best_b = best(values_a), best(values_b)
    rows = []
    for key in sorted(best_a.keys() & best_b.keys()):
        metric, unit, hib, _t = key
        (xa, ra, ca), (xb, rb, cb) = best_a[key], best_b[key]
        da, db = describe([xa]), describe([xb])
        change = 100.0 * (xb - xa) / xa if xa else None
        ratio = xb / xa if xa > 0 and xb > 0 else None
        differ = identity.differing_keys(ca, cb, match_on)
        configuration = f"baseline {baseline.shown(ca, differ, 90)}; candidate {baseline.shown(cb, differ, 90)}"
        rows.append(Row(metric, baseline.shown({k: ca.get(k) for k in match_on}), unit, hib, da, db, [ra], [rb],
                        change, None, BEST_VS_BEST, configuration, ratio))
    return rows


def _refused(values_a: dict, values_b: dict, common: set, under_study: list[str]) -> UserInputError:
    """No pair: name what keeps the sides apart and the nearest pairs."""
    def configurations(values: dict) -> dict:
        out: dict = {}
        for (metric, unit, hib, conf_text), (_v, ids, conf) in values.items():
            if (metric, unit, hib) in common:
                entry = out.setdefault(conf_text, (conf, []))
                entry[1].extend(i for i in ids if i not in entry[1])
        return out

    nearest = baseline.nearest_pairs(configurations(values_a), configurations(values_b))
    studied = ", ".join(under_study) if under_study else "nothing named"
    lines = [f"no pair to compare: the sides differ in more than {studied}",
             "nearest pairs (baseline vs candidate):"]
    for pair in nearest:
        lines += [f"  differ in {', '.join(pair.differ)}:", f"    baseline  {baseline.shown(pair.a, pair.differ)}",
                  f"    candidate {baseline.shown(pair.b, pair.differ)}"]
    return UserInputError("\n".join(lines),
                          hint="select runs of the same configuration, or allow fewer keys to match with "
                               "--match-on KEYS (best against best per metric, no test)")


def summarise(rows: list[Row], alpha: float) -> Summary:
    """The geometric mean of the performance ratio over the pairs (time-like metrics inverted), its
    95% t interval on the log ratios, and the count of significant changes either way."""
    logs = [_performance_log(r) for r in rows]
    logs = [x for x in logs if x is not None]
    ratio, low, high = _geometric(logs)
    per_metric = []
    for metric, unit in sorted({(r.metric, r.unit) for r in rows}):
        found = [x for r in rows if (r.metric, r.unit) == (metric, unit) and (x := _performance_log(r)) is not None]
        per_metric.append((metric, unit, len(found), *_geometric(found)))
    verdicts = Counter(r.verdict for r in rows)
    untested = sum(1 for r in rows if min(r.a["n"], r.b["n"]) < MIN_REPEATS)
    single = sum(1 for r in rows if min(r.a["n"], r.b["n"]) == 1)
    within_noise = sum(1 for r in rows if r.verdict.startswith(noise.WITHIN))
    floors = [r.noise_floor for r in rows if _performance_log(r) is not None]
    floor = max(floors) if floors and all(f is not None for f in floors) else None
    return Summary(len(logs), ratio, low, high, verdicts["better"], verdicts["worse"],
                   verdicts["no significant difference"], untested, single, per_metric, within_noise, floor)


def _performance_log(row: Row) -> float | None:
    if row.ratio is None or row.ratio <= 0:
        return None
    return math.log(row.ratio) if row.higher_is_better else -math.log(row.ratio)


def _geometric(logs: list[float]) -> tuple[float | None, float | None, float | None]:
    if not logs:
        return None, None, None
    mean = sum(logs) / len(logs)
    if len(logs) < 2:
        return math.exp(mean), None, None
    from scipy import stats

    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, len(logs) - 1)) * sd / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


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
