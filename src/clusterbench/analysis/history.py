"""The history of one metric: per system and configuration, its values over time, their change
points, and whether the newest change is a regression.

A series is one configuration (analysis/identity.py, THE definition of "the same configuration")
ordered by the time each run ran:

- its identity keys: benchmark, system, batch cluster and host group (facts.job), node count,
  every parameter (ranks, threads, BLAS, N, NB, grid...), the BLAS really loaded, the launcher's
  effective placement. Runs that differ in any of them are different series even when one ran
  right after the other: two host groups of one LSF cluster are two machines, never a regression.
  A key a run does not state is a value of its own ("not stated"), never a default;
- where it ran when identity does not say (the campaign, or the folder an imported file was in);
- the metric's identifying labels: those its benchmark declares (HPL's T/V, N, NB, P, Q; IMB's
  test and message size), never timing or residual labels, nor `bytes` of a peak bandwidth;
  `NAME[label=value,...]` keeps only the values with those labels;
- tags do NOT split a series unless asked (`by_tag`, the command's `--by-tag K`): a tag such as
  `kernel=6.8` is the kind of change a history is meant to show across time.

Values are ordered by the run's start (an imported run: the start its output states, else the
output file's modification time, noted as such). Only counted values enter a series: a run that
analysis/flags.counts refuses (failed, invalid, truncated, suspect, disturbed, excluded) is listed
as skipped with its flags and reason, never a point.

Verdicts (Group.verdict), one per series:
- "too few values to judge (need at least K)": K = changepoint.min_points(alpha), the shortest
  series whose most extreme arrangement can reach p <= alpha (10 at 0.01). Never "no change";
- "regression" / "improvement": the newest change point (E-Divisive means, permutation test at
  p <= alpha, analysis/changepoint.py) that moves the metric by more than `min_change` (default
  5%) moves it in its bad / good direction (a smaller change found after it, within the noise of
  the new level, does not undo it);
- "no change beyond the noise": judged, and no change point passes those bars.

The noise floor (analysis/noise.py: the spread of one run of a configuration, learned from stored
repeats) raises the bar of a series that has one: a change point must move the metric by more than
the larger of `min_change` and the widest floor of the series' configurations; one that passes
`min_change` but not the floor is "within the noise floor (X%)". A series with no known floor is
judged as before, and the history says once that no floor is known.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache

import numpy as np
import pandas as pd

from clusterbench.analysis import changepoint, noise
from clusterbench.analysis.compare import IDENTITY_LABELS
from clusterbench.analysis.dataset import Dataset, load, origin
from clusterbench.analysis.flags import counts, run_flags
from clusterbench.analysis.identity import configuration_ids, run_identity
from clusterbench.analysis.listing import suggest
from clusterbench.analysis.select import Selection
from clusterbench.errors import UserInputError
from clusterbench.store.db import Store
from clusterbench.store.importer import output_time_iso

MIN_POINTS = changepoint.min_points(changepoint.ALPHA)  # shorter series can never reach the test's level
DEFAULT_MIN_CHANGE = 0.05
MAX_GROUPS = 2000  # series analysed in one history; more is a selection to narrow, not a page to read
MAX_METRIC_CHARS = 400
MAX_LABEL_TERMS = 20
NOT_SERIES_KEYS = frozenset({"benchmark", "system"})  # keys a series already holds in its own fields
MAX_BY_TAG = 20
TOO_FEW = "too few values to judge (need at least {k})"
NO_CHANGE = "no change beyond the noise"
OUTCOME_LABELS = {"peak_bandwidth": frozenset({"bytes"})}  # labels that say where a value was found
_METRIC = re.compile(r"^\s*([^\[\]\s]+)\s*(?:\[(.*)\])?\s*$", re.DOTALL)


@dataclass(frozen=True)
class MetricChoice:
    """A metric name, and the label values a series must have (empty: one series per combination)."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        inside = ",".join(f"{k}={v}" for k, v in self.labels.items())
        return f"{self.name}[{inside}]" if inside else self.name


@dataclass
class Value:
    run_id: str
    date: str  # ISO 8601, UTC
    value: float
    dated_by: str = "start"  # or "file time": an imported output that states no start


@dataclass
class Skipped:
    run_id: str
    reason: str


@dataclass
class Change:
    """A change point of a series, with the run and date where the new segment starts."""

    index: int  # position in the series' values
    run_id: str
    date: str
    before: float
    after: float
    change_pct: float | None  # (after - before) / |before| in %
    p_value: float
    worse: bool  # in the bad direction by more than min_change


@dataclass
class Group:
    system: str
    benchmark: str
    configuration: dict  # the parameters and identifying labels every value of the series shares
    label: str  # a short name: the benchmark and the settings that tell it from the other series
    unit: str
    higher_is_better: bool
    values: list[Value] = field(default_factory=list)  # oldest first
    skipped: list[Skipped] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    judged: bool = False
    note: str = ""
    analysed_from: int = 0  # values before this index were not searched (over changepoint.MAX_POINTS)
    needed: int = MIN_POINTS  # values the test needs to be able to reach its level
    improved: bool = False  # the newest change point is better by more than the threshold, significant

    decisive: int | None = None  # position in `changes` of the newest change beyond the threshold
    noise_floor: float | None = None  # the widest noise floor of the series' configurations (a fraction)
    min_change: float = DEFAULT_MIN_CHANGE  # the threshold it was judged with (before the floor)

    @property
    def regression(self) -> bool:
        """The newest change point beyond the threshold lowers the metric's quality (a smaller change
        found after it, within the noise of the new level, does not undo it)."""
        return self.decisive is not None and self.changes[self.decisive].worse

    @property
    def verdict(self) -> str:
        """'regression', 'improvement', 'no change beyond the noise' or 'too few values to judge
        (need at least K)': the same words in the command, its JSON and the report."""
        if not self.judged:
            if len(self.values) >= self.needed and self.note:  # long enough, left unsearched (a budget)
                return f"not judged: {self.note}"
            return TOO_FEW.format(k=self.needed)
        if self.regression:
            return "regression"
        return "improvement" if self.improved else NO_CHANGE

    def segments(self) -> list[tuple[int, int, float]]:
        """(first index, end index, mean) of the segments between change points (the analysed part)."""
        bounds = [self.analysed_from, *(c.index for c in self.changes), len(self.values)]
        out = []
        for a, b in zip(bounds, bounds[1:], strict=False):
            if b > a:
                out.append((a, b, sum(v.value for v in self.values[a:b]) / (b - a)))
        return out


@dataclass
class History:
    metric: str
    selection: str
    min_change_pct: float
    alpha: float
    groups: list[Group]
    dropped_groups: int = 0  # series over MAX_GROUPS, not analysed (the smallest)
    by_tag: list[str] = field(default_factory=list)  # tags that split series (asked for)
    needed: int = MIN_POINTS  # values a series needs to be judged at this alpha
    noise_note: str = ""  # said once: no series has a known noise floor

    @property
    def regressions(self) -> list[Group]:
        return [g for g in self.groups if g.regression]


def parse_metric(text: str) -> MetricChoice:
    """'imb_bandwidth[test=PingPong,bytes=1024]' -> the name and the label values asked for."""
    if not text or len(text) > MAX_METRIC_CHARS:
        raise UserInputError(f"a metric is 1 to {MAX_METRIC_CHARS} characters, got {len(text or '')}",
                             hint="e.g. -m hpl_gflops or -m 'imb_bandwidth[test=PingPong,bytes=1024]'")
    m = _METRIC.match(text)
    if not m:
        raise UserInputError(f"cannot read the metric {text[:80]!r}",
                             hint="write NAME or NAME[label=value,...], e.g. imb_bandwidth[bytes=1024]")
    labels: dict[str, str] = {}
    terms = [t.strip() for t in (m.group(2) or "").split(",") if t.strip()]
    if len(terms) > MAX_LABEL_TERMS:
        raise UserInputError(f"{len(terms)} label terms in {m.group(1)!r}: at most {MAX_LABEL_TERMS}")
    for term in terms:
        key, sep, value = term.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UserInputError(f"label term {term[:80]!r} of {m.group(1)!r} needs label=value",
                                 hint="e.g. imb_bandwidth[test=PingPong,bytes=1024]")
        labels[key.strip()] = value.strip()
    return MetricChoice(m.group(1), labels)


def history(store: Store, selection: Selection, metric: str, min_change: float = DEFAULT_MIN_CHANGE,
            alpha: float = changepoint.ALPHA, by_tag: list[str] | None = None) -> History:
    """The history of `metric` over the selected runs. Refused (UserInputError) when the metric is
    stored nowhere, the selection holds no run, or none of its runs has the metric."""
    choice = parse_metric(metric)
    check_min_change(min_change)
    by_tag = check_by_tag(by_tag)
    stored = store.metric_names()
    if choice.name not in stored:
        raise UserInputError(f"no metric {choice.name!r} is stored", hint=_known(choice.name, stored))
    data = load(store, selection, {choice.name})
    if not data.runs:
        raise UserInputError(f"no stored runs match {selection.describe()!r}",
                             hint="list campaigns with `clusterbench campaign list`, runs with `clusterbench results`")
    if data.metrics.empty:
        here = store.metric_names(data.runs)
        raise UserInputError(f"none of the {len(data.runs)} selected runs has the metric {choice.name!r}",
                             hint=_known(choice.name, here, "metrics of these runs") if here
                             else "the selected runs have no metric values")
    floors = noise.Floors.of(store, metrics={choice.name})
    groups, dropped = analyse(data, choice, min_change, alpha, by_tag=by_tag, floors=floors)
    note = noise.UNKNOWN_NOTE if groups and all(g.noise_floor is None for g in groups) else ""
    return History(choice.describe(), selection.describe(), 100 * min_change, alpha, groups, dropped, by_tag,
                   changepoint.min_points(alpha), note)


def check_by_tag(by_tag: list[str] | None) -> list[str]:
    """The tag keys that split series, checked: at most MAX_BY_TAG short names."""
    keys = [k.strip() for k in (by_tag or []) if k and k.strip()]
    if len(keys) > MAX_BY_TAG:
        raise UserInputError(f"{len(keys)} --by-tag keys: at most {MAX_BY_TAG}")
    for key in keys:
        if len(key) > 100 or "=" in key:
            raise UserInputError(f"--by-tag takes a tag name, got {key[:80]!r}", hint="e.g. --by-tag kernel")
    return keys


def check_min_change(min_change: float) -> None:
    if not 0 <= min_change <= 10:
        raise UserInputError(f"the smallest change that counts must be 0% to 1000%, got {100 * min_change:g}%")


def _known(name: str, known: list[str], what: str = "stored metrics") -> str:
    close = suggest(name, known, what)
    listed = ", ".join(known[:30]) + (f" and {len(known) - 30} more" if len(known) > 30 else "")
    return close if close.startswith(what) else f"{close}; {what}: {listed}"


def analyse(data: Dataset, choice: MetricChoice, min_change: float = DEFAULT_MIN_CHANGE,
            alpha: float = changepoint.ALPHA, max_groups: int = MAX_GROUPS,
            by_tag: list[str] | None = None, floors: noise.Floors | None = None) -> tuple[list[Group], int]:
    """Every series of one metric in a dataset, each searched for change points (`judge`), each held to
    its noise floor when `floors` knows one. Returns the series (regressions first, then those with
    change points) and how many of the shortest were left out over `max_groups`."""
    groups = series(data, choice, by_tag=by_tag)
    dropped = max(0, len(groups) - max_groups)
    groups = groups[:max_groups]
    for group in groups:
        if floors:
            group.noise_floor = floor_of(group, data, choice.name, floors)
        judge(group, min_change, alpha)
    groups.sort(key=lambda g: (not g.regression, not g.changes, g.system, g.label))
    return groups, dropped


def series(data: Dataset, choice: MetricChoice, benchmarks: set[str] | None = None,
           min_dates: int = 0, by_tag: list[str] | None = None) -> list[Group]:
    """The series of one metric (of these benchmarks' runs when given), not searched yet, the
    longest first; those with fewer than `min_dates` distinct dates are left out (the report
    shows only series measured at several times)."""
    rows = data.of(choice.name, valid=None)
    if benchmarks is not None:
        rows = rows[rows["benchmark"].isin(benchmarks)]
    if min_dates > 1 and not choice.labels:
        rows = _may_reach(data, rows, min_dates)
    groups = _grouped(data, rows, choice, by_tag or [])
    if min_dates:
        groups = [g for g in groups if len({v.date for v in g.values}) >= min_dates]
    _name(groups)
    groups.sort(key=lambda g: (-len(g.values), g.system, g.label))
    return groups


def _may_reach(data: Dataset, rows: pd.DataFrame, min_dates: int) -> pd.DataFrame:
    """The rows whose series may have `min_dates` dates: the others are left out before any series is
    worked out (a study's 80,000 HPL lines are that many configurations of one to three runs each).

    A series has at most as many dates as runs, and its runs share every identity key but the tags,
    the system and the benchmark (`_settings`: equal texts are equal keys, and configuration_ids
    counts equal keys as one): fewer runs than `min_dates` in such a configuration means none of its
    series can reach them. Counted per run on the dataset's identity frame, without a dict per row."""
    own = getattr(data, "identity", None)
    frame = own() if callable(own) and len(rows) else None
    if not isinstance(frame, pd.DataFrame) or not len(frame):
        return rows
    at = frame.index.get_indexer(rows["run_id"].to_numpy(dtype=object))
    if (at < 0).any():  # a run the dataset does not hold: nothing is left out
        return rows
    keys = [c for c in frame.columns if c not in NOT_SERIES_KEYS and not str(c).startswith("tag:")]
    config = configuration_ids(frame, keys).to_numpy()[at]
    runs = pd.DataFrame({"config": config, "run": at}).drop_duplicates()
    enough = runs.groupby("config")["run"].size()
    keep = np.isin(config, enough.index[enough.to_numpy() >= min_dates].to_numpy())
    return rows if keep.all() else rows[keep]


def floor_of(group: Group, data: Dataset, metric: str, floors: noise.Floors) -> float | None:
    """The widest stored noise floor of the configurations of a series' counted runs (a series may span
    configurations that differ only in tags), None when none is known."""
    identities = {}
    for value in group.values:
        run = data.runs.get(value.run_id)
        if run is not None:
            ident = _identity_of(run, data)
            identities[noise.configuration_text(ident)] = ident
    found = floors.widest(group.benchmark, identities.values(), metric, group.unit)
    return None if found is None else found.floor


def search_cost(group: Group) -> int:
    """What searching a series costs, in units of values squared (the statistic is O(n^2))."""
    return min(len(group.values), changepoint.MAX_POINTS) ** 2


def _grouped(data: Dataset, rows: pd.DataFrame, choice: MetricChoice, by_tag: list[str]) -> list[Group]:
    """One Group per configuration (identity keys, where it ran, identifying labels), values in time
    order, runs that do not count skipped with their flags."""
    if choice.labels:
        wanted = choice.labels
        keep = rows["labels"].map(lambda labels: isinstance(labels, dict)
                                  and all(str(labels.get(k)) == v for k, v in wanted.items()))
        if not keep.any():
            raise UserInputError(f"no value of {choice.name!r} has the labels {choice.describe()}",
                                 hint=_label_hint(rows))
        rows = rows[keep]
    per_run: dict[str, tuple] = {}
    groups: dict[tuple, Group] = {}
    counted = _counts_of(data)
    texts: dict[tuple, str] = {}  # identity -> its settings text, for this call (see _settings)
    for rec in rows.itertuples(index=False):
        run = data.runs[rec.run_id]
        if rec.run_id not in per_run:
            per_run[rec.run_id] = (system_of(run, data.systems), *date_of(run), _settings(run, data, by_tag, texts))
        system, date, dated_by, settings = per_run[rec.run_id]
        identity = identity_labels(rec.benchmark, rec.name)
        labels = {k: v for k, v in rec.labels.items() if k in identity} if isinstance(rec.labels, dict) else {}
        key = (system, rec.benchmark, settings, _key(labels), rec.unit, rec.higher_is_better)
        group = groups.get(key)
        if group is None:
            configuration = json.loads(settings) | labels
            group = groups[key] = Group(system, rec.benchmark, configuration, "", rec.unit, rec.higher_is_better)
        value = _finite(rec.value)
        if not counted(rec.run_id, run):
            group.skipped.append(Skipped(rec.run_id, why_not_counted(run)))
        elif not rec.valid:
            group.skipped.append(Skipped(rec.run_id, _why_invalid(run)))
        elif date is None:
            group.skipped.append(Skipped(rec.run_id, dated_by))
        elif value is None:  # a store written by something else: a text or an infinity marked valid
            group.skipped.append(Skipped(rec.run_id, f"not a finite number: {str(rec.value)[:40]!r}"))
        else:
            group.values.append(Value(rec.run_id, date, value, dated_by))
    for group in groups.values():
        group.values.sort(key=lambda v: (v.date, v.run_id))
    return list(groups.values())


def _counts_of(data: Dataset):
    """(run id, run) -> may it be a history point (flags.counts): the dataset's own verdict when it has
    one (each run's flags decided once for the whole report), else decided here."""
    own = getattr(data, "counts", None)
    if callable(own):
        return lambda run_id, _run: own(run_id)
    return lambda _run_id, run: counts(run)


def _finite(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _key(labels: dict) -> tuple | str:
    """A hashable key of the identifying labels: their sorted items (JSON text for a value that
    is not hashable, such as a list)."""
    items = tuple(sorted(labels.items()))
    try:
        hash(items)
    except TypeError:
        return json.dumps(labels, sort_keys=True, default=str)
    return items


def why_not_counted(run: dict) -> str:
    """'truncated: the output ends before...', 'excluded: rerun after the fix': the run's flags, each
    with its reason where the run has one."""
    facts = run.get("facts") or {}
    reasons = {"excluded": run.get("excluded"), "suspect": run.get("suspect") or facts.get("suspect"),
               "disturbed": facts.get("disturbed"), "failed": run.get("reason"),
               "invalid": run.get("reason"), "truncated": run.get("reason")}
    out = []
    for flag in run_flags(run):
        reason = reasons.get(flag)
        out.append(f"{flag}: {str(reason)[:160]}" if isinstance(reason, str) and reason.strip() else flag)
    return "; ".join(out)[:400] or "not counted"


def _why_invalid(run: dict) -> str:
    """'invalid: HPL residual FAILED', 'failed: exit code 1', or the value's own flag."""
    if run.get("valid"):
        return "the value is marked invalid"
    status, reason = run.get("status") or "not valid", run.get("reason")
    return f"{status}: {str(reason)[:200]}" if reason else str(status)


def _label_hint(rows: pd.DataFrame) -> str:
    seen: dict[str, set[str]] = {}
    for labels in rows["labels"].head(20_000):
        for k, v in (labels.items() if isinstance(labels, dict) else ()):
            if len(seen.setdefault(k, set())) < 12:
                seen[k].add(str(v))
    if not seen:
        return "this metric has no labels: write the name alone"
    return "its labels: " + "; ".join(f"{k}: {', '.join(sorted(vs))}" for k, vs in sorted(seen.items()))


def system_of(run: dict, systems: dict[str, dict]) -> str:
    """The stored system's hostname, else the `system` tag, else the campaign or imported folder."""
    stored = systems.get(run.get("system_id") or "")
    if stored and stored.get("hostname"):
        return str(stored["hostname"])
    tag = run["tags"].get("system") if isinstance(run.get("tags"), dict) else None
    if tag not in (None, ""):
        return str(tag)
    return origin(run) or "unknown system"


def date_of(run: dict) -> tuple[str | None, str]:
    """(ISO date in UTC, how it is known), or (None, why there is none). An imported run is dated by
    the start its output states, else by the output file's modification time (its import time is no
    measurement date); a time without a zone is read as UTC."""
    facts = run["facts"] if isinstance(run.get("facts"), dict) else {}
    stamp, how = run.get("started_at"), "start"
    # an imported output that states no readable start keeps `stated_start` (None or the text) in its facts
    if run.get("source") == "import" and "stated_start" in facts and not output_time_iso(facts["stated_start"]):
        stamp, how = facts.get("file_mtime"), "file time"
    if not isinstance(stamp, str) or not stamp:
        return None, "no start time stored"
    utc = _utc(stamp)
    return (utc, how) if utc else (None, f"unreadable start time {stamp[:40]!r}")


@lru_cache(maxsize=4096)  # runs of one campaign step often share a start second
def _utc(stamp: str) -> str | None:
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="seconds")


def _settings(run: dict, data: Dataset, by_tag: list[str], texts: dict | None = None) -> str:
    """The run's identity (identity.run_identity) as JSON text: every key but its tags, except the
    tags asked to split series (`tag:K`); benchmark and system are the series' own fields.

    With `texts` (one `_grouped` call's), a run whose identity the dataset holds already is put in words
    once per distinct identity (80,000 HPL lines of a study have a few thousand): keyed by the keys it
    states and their values with their types (True, 1 and 1.0 are one key to a dict, not to JSON). An
    identity with a float is worded each time (-0.0 and 0.0 are equal and written apart)."""
    signature = texts is not None and "id" in run and getattr(data, "identity_signature", None)
    found = signature(run["id"]) if signature else None
    if found is not None:
        types = tuple([v.__class__ for v in found[1]])
        if float not in types:
            memo = (*found, types)
            try:
                text = texts.get(memo)
            except TypeError:  # a value that cannot be a key (a list from a plugin): worded below
                memo = text = None
            if text is not None:
                return text
            if memo is not None:
                text = texts[memo] = _settings_text(_identity_of(run, data), by_tag)
                return text
    return _settings_text(_identity_of(run, data), by_tag)


def _identity_of(run: dict, data: Dataset) -> dict:
    """identity.run_identity of the run: the dataset's when it has worked them out already."""
    known = data.known_identity(run["id"]) if "id" in run and hasattr(data, "known_identity") else None
    if known is None:
        hostname = (data.systems.get(run.get("system_id") or "") or {}).get("hostname")
        known = run_identity(run, hostname)
    return known


def _settings_text(known: dict, by_tag: list[str]) -> str:
    wanted = {f"tag:{k}" for k in by_tag}
    kept = {k: v for k, v in known.items()
            if k not in NOT_SERIES_KEYS and (not str(k).startswith("tag:") or k in wanted)}
    for key in wanted - kept.keys():  # asked to split by it, and the run does not say: unknown
        kept[key] = None
    return json.dumps(kept, sort_keys=True, default=str)


@lru_cache(maxsize=256)
def identity_labels(benchmark: str, metric: str) -> frozenset[str]:
    """The labels that name what a value measured: those the benchmark declares for the metric
    (the compare command's list for a metric no benchmark declares), minus result labels."""
    from clusterbench.bench.registry import benchmark_class

    try:
        spec = next((s for s in benchmark_class(benchmark).metrics if s.name == metric), None)
    except UserInputError:  # a benchmark from a plugin that is not installed here
        spec = None
    declared = frozenset(spec.labels) if spec is not None else frozenset(IDENTITY_LABELS)
    return declared - OUTCOME_LABELS.get(metric, frozenset())


def _name(groups: list[Group]) -> None:
    """Each series' label: benchmark, its labels, and the parameters that differ between series of
    the same benchmark (a parameter every series shares says nothing about which one it is)."""
    by_benchmark: dict[str, list[Group]] = {}
    for g in groups:
        by_benchmark.setdefault(g.benchmark, []).append(g)
    for benchmark, members in by_benchmark.items():
        keys = sorted({k for g in members for k in g.configuration})
        varying = [k for k in keys if len({_word(g.configuration.get(k)) for g in members}) > 1]
        for g in members:
            shown = [f"{k}={g.configuration[k]}" for k in varying if k in g.configuration]
            g.label = " ".join([benchmark, *shown])[:200]


_WORDED_AS_THEMSELVES = (str, int, bool, type(None))  # equal as JSON exactly when equal as (type, value)


def _word(value) -> object:
    """A configuration value as `_name` compares it: its JSON text, or for a text, an integer, a boolean
    or None (every identity value but a float) the value with its type, equal exactly when their JSON
    texts are: 6,000 series of ten keys each cost a second of json.dumps."""
    kind = type(value)
    return (kind, value) if kind in _WORDED_AS_THEMSELVES else json.dumps(value, default=str)


def judge(group: Group, min_change: float = DEFAULT_MIN_CHANGE, alpha: float = changepoint.ALPHA,
          min_points: int | None = None) -> None:
    """Search the series for change points and mark those in the bad direction; a series with fewer
    values than the test needs to reach `alpha` (changepoint.min_points) is left unjudged: its
    verdict is "too few values to judge (need at least K)"."""
    n = len(group.values)
    group.min_change = min_change
    bar = max(min_change, group.noise_floor or 0.0)  # a change within one run's spread is noise
    group.needed = max(min_points or 0, changepoint.min_points(alpha))
    if n < group.needed:
        group.note = (f"{n} counted value{'s' if n != 1 else ''}: the test cannot reach p <= {alpha:g} "
                      f"with fewer than {group.needed}" if n else "no counted value")
        return
    found = changepoint.detect([v.value for v in group.values], alpha=alpha,
                               permutations=changepoint.permutations_for(min(n, changepoint.MAX_POINTS), alpha))
    group.judged = True
    group.analysed_from = found.analysed_from
    if found.analysed_from:
        group.note = f"the newest {n - found.analysed_from} of {n} values searched (the limit)"
    for cp in found.change_points:
        at = group.values[cp.index]
        pct = None if cp.change is None else 100 * cp.change
        group.changes.append(Change(cp.index, at.run_id, at.date, cp.before, cp.after, pct, cp.p_value,
                                    is_worse(cp, group.higher_is_better, bar, alpha)))
    group.judged = True
    beyond = [i for i, cp in enumerate(found.change_points)
              if is_worse(cp, group.higher_is_better, bar, alpha)
              or is_worse(cp, not group.higher_is_better, bar, alpha)]
    if beyond:
        group.decisive = beyond[-1]
        group.improved = not group.changes[group.decisive].worse


def is_worse(cp: changepoint.ChangePoint, higher_is_better: bool, min_change: float = DEFAULT_MIN_CHANGE,
             alpha: float = changepoint.ALPHA) -> bool:
    """A change point that moves the metric in its bad direction by more than `min_change`, significant."""
    if cp.change is None or cp.p_value > alpha:
        return False
    bad = cp.change < 0 if higher_is_better else cp.change > 0
    return bad and abs(cp.change) > min_change


def change_verdict(group: Group, change: Change) -> str:
    """The words for one change point, the same in the command and the report: the newest one beyond
    the threshold carries the series' verdict; an older one is 'worse' or 'better (an older change)';
    one within the threshold is 'within threshold'."""
    if group.decisive is not None and change is group.changes[group.decisive]:
        return group.verdict
    if change.worse:
        return "worse (an older change)"
    if _within_noise(group, change):
        return f"{noise.WITHIN} ({noise.percent(group.noise_floor)})"
    if change.change_pct and (change.change_pct > 0) == group.higher_is_better:
        return "better (an older change)"
    return "within threshold"


def _within_noise(group: Group, change: Change) -> bool:
    """A significant change beyond the threshold asked for, but not beyond the series' noise floor."""
    if group.noise_floor is None or change.change_pct is None or change.p_value > changepoint.ALPHA:
        return False
    size = abs(change.change_pct) / 100
    return group.min_change < size <= group.noise_floor
