"""The figure engine: what a figure shows is decided by what varies in the runs it draws.

A figure is a metric (its values, possibly filtered by a label: IMB's PingPong) drawn against
an x key, one line per value of its *series* keys, one small panel per value of its *facet*
keys, and every other key that varies is *combined*: either the best value wins (the studies'
way for HPL: per point the best over P x Q, the T/V variant and N, the winner's values written
beside it) or the values are averaged with their minimum and maximum as a bar (repeats).

Keys address what a value was measured with: its labels (bytes, n, nb, p, q, tv), the run's
parameters (blas, threads, ranks, layout, pinning, interconnect, tuning, grids, ...), its tags
(`tag:K`, or K alone when no parameter has that name) and derived keys: `nodes` (node count),
`grid` ('PxQ'), `ppn` (ranks per node), `workers` (threads x ranks), `system` (host name),
`origin` (campaign or imported folder) and `benchmark`.

Without instructions the engine infers, from the values themselves:

- x: the first key of the figure's preference list that is a number and takes two values;
- facets: the numbers that vary beyond x (node count, ranks, threads), each only when it splits
  the values further than the keys before it (a key that merely repeats another adds nothing);
- series: the text keys that vary (BLAS, tuning, pinning, interconnect, tags, system, origin),
  again only those that split further than the facets;
- the figure's nuisance keys (HPL: grid, P, Q, T/V, N; always: repeats) are combined.

The two failures this replaces: a series per N, grid and node count (34 one-point lines under a
34-entry legend), and unlike things pooled into one line (shm, TCP and InfiniBand averaged into a
0-byte latency 'range' of 0.11 to 91 us). A panel with more than 8 series is split into small
multiples by one of its series keys; if one key alone still has more than 8 values, the figure
becomes a table. At most 24 panels are drawn, the rest are tabulated. Everything is a pandas or
numpy operation over all values at once: a figure over 100,000 runs costs tens of milliseconds.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pandas.api.types import is_numeric_dtype

from clusterbench.analysis import identity
from clusterbench.analysis.dataset import Dataset
from clusterbench.analysis.flags import NOT_COUNTED, run_flags
from clusterbench.analysis.identity import NOT_CONFIGURATION
from clusterbench.analysis.stats import DEFAULT_CV_WARN, t95
from clusterbench.errors import UserInputError

MAX_SERIES = 8  # lines in one panel: Okabe-Ito has 8 colours, a legend beyond that is not read
MAX_PANELS = 12  # small multiples drawn (4 rows of 3: a page); the others' values go to a table
MAX_POINTS = 5000  # points in one figure; beyond, a table (and the CSV)
MAX_CATEGORIES = 24  # a text key with more values is an identifier (a date, a file), not a configuration
MAX_KEYS = 8  # keys a user may name per role (series, facets, best over)
MAX_KEY_CHARS = 100
MAX_CV_WARN = 10.0  # a CV threshold beyond 1000% marks nothing
BEST, MEAN = "best", "mean"

VALUE, RUN, BETTER = "@value", "@run", "@better"  # internal columns; no key starts with '@'
FLAGS = "@flags"  # the run's flags that keep it out of bests and means (flags.NOT_COUNTED), '' when counted
CONFIG = "@config"  # the run's configuration (analysis/identity.py): values repeat only within one
REPEATS = "repeats"  # `best over repeats`: the best repeat, not the mean of 3 or more (the old default)
MIN_MEAN_REPEATS = 3  # repeats of one configuration drawn as their mean with its 95% interval
PRINTED_DIGITS = 5  # values equal at this many significant digits (HPL's Gflop/s, the report's cells) tie
DERIVED = ("nodes", "grid", "ppn", "workers", "system", "origin", "benchmark")
DECIDED_BY_X = ("nodes",)  # an x that decides other keys: a key it decides is not a line (interconnect)
# Keys never inferred as a line or panel: `hosts` is what `nodes` counts (and absent on most runs).
NEVER_INFERRED = ("hosts",)
# Keys that follow from others (key -> the keys it follows from): not named again in "best over ...".
_DEPENDENT = {"p": ("grid",), "q": ("grid",), "grids": ("grid",), "ranks": ("grid",), "hosts": ("nodes",),
              "ppn": ("ranks", "nodes", "grid"), "workers": ("threads", "ranks", "grid")}
DEFAULT_SERIES = ("blas", "tuning", "layout", "pinning", "places", "bind", "bind_to", "proc_bind", "map_by",
                  "rank_by", "interconnect", "net_if", "mpi", "benchmark", "system", "cluster", "host_group")
DEFAULT_FACETS = ("nodes", "ranks", "ppn", "threads", "workers")
NAMES = {"nb": "NB", "n": "N", "grid": "P x Q", "p": "P", "q": "Q", "tv": "T/V variant", "nodes": "node count",
         "ppn": "processes per node", "workers": "threads x tasks", "bytes": "message size", "blas": "BLAS",
         "ranks": "ranks", "threads": "threads", "system": "system", "origin": "origin", "benchmark": "benchmark",
         "interconnect": "interconnect", "grids": "grids of the file"}
_COUNTED = {"nodes": ("node", "nodes"), "ranks": ("rank", "ranks"), "threads": ("thread", "threads"),
            "workers": ("worker", "workers")}
_PLAIN = {"blas", "interconnect", "layout", "pinning", "benchmark", "system", "origin", "grid", "tv", "places",
          "bind_to", "map_by", "tuning", "test", "mpi", "campaign", "proc_bind", "bind", "net_if"}


@dataclass(frozen=True)
class Family:
    """How one kind of figure is inferred (declared by the section that draws it)."""

    x: tuple[str, ...]  # x candidates, in order of preference
    series: tuple[str, ...] = DEFAULT_SERIES  # series candidates first (then tags, other text keys, origin)
    nuisance: tuple[str, ...] = ()  # never a series or a panel: combined
    combine: str = MEAN  # BEST: the best value per point; MEAN: mean with min-max
    facets: bool = True  # False: the numbers that vary are combined too (Rmax against node count)
    always: tuple[str, ...] = ()  # series keys named in every label, even when constant


@dataclass
class Choice:
    """What a user chose for a figure (--x, --series, --facet, --best-over, --mean, or report.yaml);
    None leaves that role to the inference."""

    metric: str | None = None
    x: str | None = None
    series: tuple[str, ...] | None = None
    facets: tuple[str, ...] | None = None
    best_over: tuple[str, ...] | None = None
    mean: bool = False
    title: str | None = None
    labels: dict = field(default_factory=dict)  # only values with these labels (test: PingPong)
    where: dict[str, str] = field(default_factory=dict)  # field -> 'report.yaml:12', for errors
    cv_warn: float | None = None  # a point whose repeats' CV exceeds this is marked (None: stats.DEFAULT_CV_WARN)

    def keys(self) -> list[str]:
        return [k for k in (self.x, *(self.series or ()), *(self.facets or ()), *self.over_keys()) if k]

    def over_keys(self) -> tuple[str, ...]:
        """The keys of best over, without `repeats` (which is no key: it asks for the best repeat)."""
        return tuple(k for k in self.best_over or () if k != REPEATS)

    def best_repeat(self) -> bool:
        return REPEATS in (self.best_over or ())


@dataclass
class Shape:
    """What a figure was found (or told) to be."""

    x: str | None
    series: list[str]
    facets: list[str]
    combine: str
    over: list[str]  # keys that vary within a point: combined
    repeats: bool  # several values share every key: combined too
    x_varies: bool
    pooled: list[tuple[str, int]] = field(default_factory=list)  # text keys with too many values to draw
    moved: list[str] = field(default_factory=list)  # series keys turned into panels (too many lines)
    chosen: bool = False  # the user chose at least one role
    best_repeat: bool = False  # BEST: the best repeat even of 3 or more (`best over repeats`), not their mean
    cv_warn: float = DEFAULT_CV_WARN  # a point whose repeats spread more is marked

    def caption(self) -> str:
        """'Best over P x Q, T/V variant and N; one panel per node count; one line per BLAS.'"""
        over = [name(k) for k in independent(self.over)]
        if self.repeats and (self.combine != BEST or self.best_repeat):
            over.append("repeats")
        if self.combine == BEST:
            parts = [f"Best counted value over {_and(over)}" if over else "Best counted value"]
            if self.repeats and not self.best_repeat:
                parts.append(f"{MIN_MEAN_REPEATS} or more repeats of one configuration compete as their mean, "
                             "drawn with its 95% interval (Student's t; best over repeats: the best repeat)")
        else:
            parts = [f"Mean over {_and(over)}, bars from the minimum to the maximum, or the 95% interval of the "
                     f"mean (Student's t) where a point is {MIN_MEAN_REPEATS} or more repeats of one configuration"
                     if over else "Each point is one value"]
        if self.facets:
            parts.append("one panel per " + _and([name(k) for k in self.facets]))
        if self.series:
            parts.append("one line per " + _and([name(k) for k in self.series]))
        if self.moved:
            moved = _and([name(k) for k in self.moved])
            parts.append(f"more than {MAX_SERIES} lines were split into panels by {moved}")
        if self.pooled:
            parts.append("not told apart (too many values to draw: select fewer or name them with --series): "
                         + ", ".join(f"{name(k)} ({n} values)" for k, n in self.pooled))
        how = "as chosen" if self.chosen else "inferred from what varies"
        return "; ".join(parts) + f" ({how})."


@dataclass
class ShapedPoint:
    x: float
    y: float
    y_min: float | None  # the bar: the 95% interval of a mean of repeats (`bar` 'ci95') or the range
    y_max: float | None
    runs: list[str]
    extra: dict
    n: int = 1  # values behind the point (a best: those it was chosen from; a mean: those averaged)
    repeats: int = 1  # repeats of the configuration drawn (a mean of repeats, or the best's own)
    cv: float | None = None  # std / mean of those repeats (None below 2)
    bar: str = ""  # 'ci95', 'range' or '' (no bar)
    flags: str = ""  # a flagged run's value ('truncated', 'suspect'): drawn marked, never a best or a mean
    tied_with: list[str] = field(default_factory=list)  # runs of other values equal to a best as printed
    high_cv: bool = False  # the repeats spread more than the figure's CV threshold


@dataclass
class ShapedSeries:
    label: str
    points: list[ShapedPoint]
    values: dict  # series key -> value
    marked: list[ShapedPoint] = field(default_factory=list)  # flagged runs' values: drawn apart, not joined


@dataclass
class ShapedPanel:
    title: str
    series: list[ShapedSeries]
    values: dict  # facet key -> value


@dataclass
class Drawing:
    """A figure's points, grouped: the first `drawn` panels are drawn, the others tabulated
    (`drawn` is 0 when the figure is a table: too many lines or points). `notes` are added to
    the caption: what was kept apart, what is marked."""

    shape: Shape
    panels: list[ShapedPanel]
    drawn: int
    why_table: str = ""
    notes: list[str] = field(default_factory=list)
    unplaced: pd.DataFrame | None = None  # values whose x is not stated: not drawn, listed in the CSV

    def points(self) -> int:
        return sum(len(s.points) + len(s.marked) for p in self.panels for s in p.series)

    def caption(self) -> str:
        return " ".join([self.shape.caption(), *self.notes])


# ----------------------------------------------------------------------------- the values


def frame(data: Dataset, rows: pd.DataFrame, values: pd.Series | None = None,
          label_keys: tuple[str, ...] | None = None) -> pd.DataFrame:
    """One row per metric value: `@value` (converted when `values` is given), `@run`, `@better`
    and a column per key: the value's labels (those in `label_keys`; all when None), then the
    run's keys (Dataset.run_keys; a label wins over a parameter of the same name: HPL's P and Q
    are per line), then the derived grid, ppn and workers."""
    index = pd.RangeIndex(len(rows))
    keys = data.run_keys()
    keys = keys.drop(columns=[c for c in keys.columns if c in NOT_CONFIGURATION])  # a repeat's number is no key
    out = keys.reindex(rows["run_id"].to_numpy()).reset_index(drop=True)
    # A dataset shares one dict per distinct labels text: expand each distinct one once, then take.
    codes, distinct = pd.factorize(rows["labels"].map(id).to_numpy())
    by_id = {id(lab): lab for lab in rows["labels"].iloc[np.unique(codes, return_index=True)[1]]} if len(rows) else {}
    labels = [by_id[i] for i in distinct]
    wanted = label_keys if label_keys is not None else sorted({k for lab in labels[:1000] for k in lab})
    if wanted and labels:
        unique = pd.DataFrame.from_records(labels, columns=list(wanted))
        for key in wanted:  # a label that is not a number or a short text (a list, a long text) is no key
            if unique[key].dtype == object:
                unique[key] = unique[key].map(_scalar)
        table = unique.iloc[codes].set_axis(index)
        for key in wanted:
            column = table[key]
            if column.notna().any():
                out[key] = column.where(column.notna(), out[key]) if key in out else column
    out[VALUE] = (values if values is not None else rows["value"]).to_numpy(dtype=float)
    out[RUN] = rows["run_id"].to_numpy()
    out[BETTER] = rows["higher_is_better"].to_numpy(dtype=bool)
    out[FLAGS], out[CONFIG] = run_marks(data, out[RUN])
    return _derive(out)


def run_marks(data: Dataset, runs: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Per value: its run's flags that keep it out of bests and means ('truncated, suspect'; '' when
    counted: analysis/flags.py, the dataset's own `flags` when it has one), and its run's configuration
    number (analysis/identity.py: runs are repeats only when every key either states is equal)."""
    codes, ids = pd.factorize(runs.to_numpy(dtype=object))
    own = getattr(data, "flags", None)
    marks = []
    for rid in ids:
        found = own(rid) if callable(own) else run_flags(data.runs.get(rid) or {})
        marks.append(", ".join(f for f in found if f in NOT_COUNTED))
    configs = configurations(data, list(ids))
    return (np.asarray(marks, dtype=object)[codes] if len(ids) else np.asarray([], dtype=object),
            np.asarray(configs, dtype=np.int64)[codes] if len(ids) else np.asarray([], dtype=np.int64))


def configurations(data: Dataset, run_ids: list[str]) -> list[int]:
    """A configuration number per run (identity.configuration_ids over the dataset's identity frame),
    computed once per dataset: every figure's frame reads it (100,000 runs cost seconds to group)."""
    if not run_ids:
        return []
    numbers = _configuration_numbers(data)
    at = numbers.index.get_indexer(run_ids)
    if (at >= 0).all():  # the usual case: every run is the dataset's (one lookup for all of them)
        return numbers.to_numpy()[at].astype("int64").tolist()
    # runs the dataset does not hold (a frame made by hand): numbered on their own
    missing = dict.fromkeys(i for i, found in zip(run_ids, at, strict=True) if found < 0)
    hostnames = {sid: (info or {}).get("hostname") for sid, info in data.systems.items()}
    frame = identity.identity_frame({i: data.runs.get(i) or {} for i in missing}, hostnames)
    extra = identity.configuration_ids(frame) + (int(numbers.max()) + 1 if len(numbers) else 0)
    return pd.concat([numbers, extra]).reindex(run_ids).astype("int64").tolist()


_CONFIGURATIONS: dict[int, tuple[weakref.ref, pd.Series]] = {}  # id(dataset) -> (the dataset, its numbers)


def _configuration_numbers(data: Dataset) -> pd.Series:
    key = id(data)
    found = _CONFIGURATIONS.get(key)
    if found is not None and found[0]() is data:
        return found[1]
    own = getattr(data, "identity", None)
    frame = own() if callable(own) else None
    if not isinstance(frame, pd.DataFrame):
        hostnames = {sid: (info or {}).get("hostname") for sid, info in data.systems.items()}
        frame = identity.identity_frame(data.runs, hostnames)
    numbers = identity.configuration_ids(frame) if len(frame.columns) else pd.Series(0, index=frame.index)
    _CONFIGURATIONS[key] = (weakref.ref(data, lambda _ref, k=key: _CONFIGURATIONS.pop(k, None)), numbers)
    return numbers


def _scalar(value):
    """A label value usable as a key (a number or a short text), else None."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float) or (isinstance(value, str) and len(value) <= MAX_KEY_CHARS * 2):
        return value
    return None


def _number(column: pd.Series | None) -> pd.Series | None:
    return None if column is None else pd.to_numeric(column, errors="coerce")


def _derive(out: pd.DataFrame) -> pd.DataFrame:
    p, q = _number(out.get("p")), _number(out.get("q"))
    if p is not None and q is not None:
        known = p.notna() & q.notna() & (p.abs() < 1e9) & (q.abs() < 1e9)
        if known.any():
            grid = pd.Series(None, index=out.index, dtype=object)
            grid[known] = p[known].astype("int64").astype(str) + "x" + q[known].astype("int64").astype(str)
            out["grid"] = grid if "grid" not in out else out["grid"].where(out["grid"].notna(), grid)
    ranks = _number(out.get("ranks"))
    if p is not None and q is not None:
        ranks = (p * q) if ranks is None else ranks.fillna(p * q)
    nodes = _number(out.get("nodes"))
    if ranks is not None and nodes is not None and ranks.notna().any():
        out["ppn"] = ranks / nodes
    threads = _number(out.get("threads"))
    one = pd.Series(1.0, index=out.index)
    # A count no value states is 1 for all (a benchmark without threads); one some values state and others
    # do not is unknown for those: their workers are not stated either, never computed from a default 1.
    out["workers"] = _stated_or_one(threads, one) * _stated_or_one(ranks, one)
    return out


def _stated_or_one(column: pd.Series | None, one: pd.Series) -> pd.Series:
    return one if column is None or column.isna().all() else column


def keys_of(values: pd.DataFrame) -> list[str]:
    """The keys a figure over these values can use: every column that holds a value somewhere."""
    return [c for c in values.columns if not str(c).startswith("@") and holds_a_value(values[c])]


def holds_a_value(column: pd.Series) -> bool:
    """`column.notna().any()`, answered by the first row when it holds a value: a figure's frame has
    dozens of keys over 260,000 values, and a missing-value scan of each text column took seconds
    of a report over 100,000 runs (each of a few calls per figure)."""
    if len(column):
        first = column.iat[0]
        if not pd.api.types.is_scalar(first) or not pd.isna(first):  # a list or mapping is a value too
            return True
    return bool(column.notna().any())


def is_number_key(column: pd.Series) -> bool:
    """Does this key hold numbers (an x, a panel) rather than names (a series)?"""
    return is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)


class _Codes:
    """Each key's values as small integers (a missing value is a value of its own), so that
    'does this key split the groups further' is a count of distinct integer pairs."""

    def __init__(self, values: pd.DataFrame, keys: list[str]):
        self.n = len(values)
        self.codes = {k: pd.factorize(values[k], use_na_sentinel=False)[0].astype(np.int64) for k in keys}

    def count(self, key: str) -> int:
        codes = self.codes[key]
        return int(codes.max()) + 1 if len(codes) else 0

    def groups(self, keys: list[str]) -> tuple[np.ndarray, int]:
        """Group ids (numbered by first appearance) of the combinations of these keys, and their count:
        what refining key by key gives, with the keys' codes combined as digits and numbered once (a
        configuration within a point refines by some thirty keys over 260,000 values)."""
        ids = np.zeros(self.n, dtype=np.int64)
        if not keys:
            return ids, 1
        span = 1  # every id is below it: the combined numbers stay distinct per combination
        for key in keys:
            codes = self.codes[key]
            radix = int(codes.max()) + 1 if len(codes) else 1
            if span * radix >= 2**62:  # numbered before the digits overflow
                ids, span = _numbered(ids)
            ids, span = ids * radix + codes, span * radix
        return _numbered(ids)

    def refine(self, ids: np.ndarray, key: str) -> tuple[np.ndarray, int]:
        codes = self.codes[key]
        return _numbered(ids * (int(codes.max()) + 1 if len(codes) else 1) + codes)

    def split_further(self, candidates: list[str], base: list[str]) -> list[str]:
        """The candidates, in order, that each split the groups of `base` (and of those chosen
        before them) further: enough to tell the values apart, nothing that repeats another key."""
        ids, count = self.groups(base)
        chosen = []
        for key in candidates:
            refined, n = self.refine(ids, key)
            if n > count:
                chosen.append(key)
                ids, count = refined, n
        return chosen

    def per_group(self, inner: list[str], outer: list[str]) -> int:
        """The largest number of distinct `inner` combinations within one `outer` group."""
        if not self.n:
            return 0
        outer_ids, _ = self.groups(outer)
        both, _ = self.groups(outer + inner)  # refines outer: each combination lies in one outer group
        _, first = np.unique(both, return_index=True)
        return int(np.bincount(outer_ids[first]).max())


def _numbered(combined: np.ndarray) -> tuple[np.ndarray, int]:
    """Distinct numbers as 0, 1, 2... in order of first appearance, and how many there are."""
    refined, uniques = pd.factorize(combined)
    return refined.astype(np.int64), len(uniques)


# ----------------------------------------------------------------------------- inference


class KeyProblem(UserInputError):
    """A key the user named that the values do not have; `role` says which (x, series, ...)."""

    def __init__(self, message: str, role: str, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.role = role


def resolve(values: pd.DataFrame, key: str, role: str) -> str:
    """A key as the user wrote it -> its column: K, or `tag:K` when only a tag has that name."""
    keys = keys_of(values)
    if key in keys:
        return key
    if f"tag:{key}" in keys:
        return f"tag:{key}"
    raise KeyProblem(f"{role}: no key {key!r} in the selected values", role,
                     hint="keys here: " + ", ".join(sorted(keys)[:60]))


def check_choice(choice: Choice) -> None:
    """Bounds on what a user names, before anything is computed."""
    for role, keys in (("series", choice.series), ("facet", choice.facets), ("best over", choice.best_over)):
        if keys is not None and len(keys) > MAX_KEYS:
            raise UserInputError(f"{role}: {len(keys)} keys, more than {MAX_KEYS}", hint="name fewer keys")
    for key in choice.keys():
        if not key or len(key) > MAX_KEY_CHARS or key.startswith("@"):
            raise UserInputError(f"not a key: {key[:MAX_KEY_CHARS]!r}",
                                 hint=f"a key is a label, parameter or tag name of at most {MAX_KEY_CHARS} characters")
    if choice.mean and choice.best_over:
        raise UserInputError("best over and mean exclude each other", hint="give one of them")
    if choice.cv_warn is not None and not (0 < choice.cv_warn <= MAX_CV_WARN):
        raise UserInputError(f"cv_warn {choice.cv_warn!r} is not a fraction in (0, {MAX_CV_WARN:g}]",
                             hint="write 0.05 for 5%")


def infer(values: pd.DataFrame, family: Family, choice: Choice | None = None) -> Shape:
    """The figure's x, series, facets and what is combined: the user's choice where given, else
    inferred from what varies (see the module docstring)."""
    choice = choice or Choice()
    check_choice(choice)
    keys = keys_of(values)
    codes = _Codes(values, keys)
    varies = {k for k in keys if codes.count(k) > 1}
    numeric = {k for k in keys if is_number_key(values[k])}
    chosen_x = resolve(values, choice.x, "x") if choice.x else None
    if chosen_x and chosen_x not in numeric:
        raise KeyProblem(f"x: {choice.x!r} holds text, not numbers", "x", hint="x must be a numeric key (nb, "
                         "bytes, threads, nodes, ...); text keys can be --series or --facet")
    x = chosen_x or next((k for k in family.x if k in varies and k in numeric), None) or next(
        (k for k in family.x if k in numeric), None)
    named_series = [resolve(values, k, "series") for k in choice.series] if choice.series is not None else None
    named_facets = [resolve(values, k, "facet") for k in choice.facets] if choice.facets is not None else None
    named_over = [resolve(values, k, "best over") for k in choice.over_keys()]
    combine = MEAN if choice.mean else BEST if choice.best_over else family.combine
    taken = {x, *family.nuisance, *NEVER_INFERRED, *named_over, *(named_series or ()), *(named_facets or ())}
    pooled = sorted((k, codes.count(k)) for k in varies - taken - numeric if codes.count(k) > MAX_CATEGORIES)
    if named_facets is not None:
        facets = named_facets
    elif family.facets:
        order = [k for k in DEFAULT_FACETS if k in numeric] + sorted(numeric - set(DEFAULT_FACETS))
        candidates = [k for k in order if k in varies and k not in taken and k not in family.series]
        always = [k for k in family.always if k in keys and k not in taken]  # lines for sure: not panels too
        facets = codes.split_further(candidates, [k for k in (x, *always) if k])
    else:
        facets = []
    if named_series is not None:
        series = named_series
    else:
        always = [k for k in family.always if k in keys and k not in facets and k not in taken]
        skip = taken | set(facets) | set(always) | {k for k, _ in pooled}
        candidates = [k for k in _series_order(family, keys) if k in varies and k not in skip
                      and (k not in numeric or k in family.series)]
        # Against node count, what the node count decides (shm on one host, a fabric on more) is no line
        # of its own; against anything else a key is kept even where x decides it (a BLAS run at one NB).
        base = [*facets, *always, *([x] if x in DECIDED_BY_X else [])]
        series = always + codes.split_further(candidates, base)
    series, facets, moved = _fit(codes, series, facets)
    group = [k for k in (*facets, *series, x) if k]
    ids, groups = codes.groups(group)
    over = [k for k in keys if k in varies and k not in group and codes.refine(ids, k)[1] > groups]
    apart = _stated_and_not(values, over, family, taken) if named_series is None else []
    if apart := codes.split_further(apart, group):  # workers adds nothing to threads and ranks
        # A configuration key some values state and others do not is never combined: known and unknown
        # are lines of their own ('threads not stated'), and the caption says so.
        series, facets, more = _fit(codes, [*series, *apart], facets)
        moved += more
        group = [k for k in (*facets, *series, x) if k]
        ids, groups = codes.groups(group)
        over = [k for k in keys if k in varies and k not in group and codes.refine(ids, k)[1] > groups]
    over.sort(key=lambda k: (family.nuisance.index(k) if k in family.nuisance else len(family.nuisance)))
    repeats = codes.groups(keys)[1] < len(values)
    return Shape(x, series, facets, combine, over, repeats, bool(x and x in varies), pooled, moved,
                 chosen=bool(choice.keys() or choice.mean or choice.best_repeat()), best_repeat=choice.best_repeat(),
                 cv_warn=DEFAULT_CV_WARN if choice.cv_warn is None else choice.cv_warn)


def _stated_and_not(values: pd.DataFrame, over: list[str], family: Family, taken: set) -> list[str]:
    """The combined configuration keys (the figure's series candidates and the counts: nodes, ranks,
    threads, ...) that some values state and others do not."""
    order = list(dict.fromkeys([*family.series, *DEFAULT_FACETS]))
    return [k for k in order if k in over and k not in family.nuisance and k not in taken
            and values[k].isna().any() and values[k].notna().any()]


def _series_order(family: Family, keys: list[str]) -> list[str]:
    """Declared candidates, then tags, then other keys (settings, parameters), the origin last."""
    tags = sorted(k for k in keys if k.startswith("tag:"))
    rest = sorted(k for k in keys if k not in family.series and not k.startswith("tag:") and k != "origin")
    return [*family.series, *tags, *rest, "origin"]


def _fit(codes: _Codes, series: list[str], facets: list[str]) -> tuple[list[str], list[str], list[str]]:
    """More than MAX_SERIES lines in a panel: move the series key that leaves the fewest panels
    while fitting (else the one with most values) into the facets, while two or more that vary
    remain (one key alone with too many values is a table, not a wall of panels)."""
    moved: list[str] = []
    while codes.per_group(series, facets) > MAX_SERIES:
        movable = [k for k in series if codes.count(k) > 1]
        if len(movable) < 2:
            break
        costs = {key: (codes.per_group([k for k in series if k != key], [*facets, key]) > MAX_SERIES,
                       codes.groups([*facets, key])[1], -codes.count(key)) for key in movable}
        key = min(movable, key=costs.__getitem__)
        series = [k for k in series if k != key]
        facets = [*facets, key]
        moved.append(key)
    return series, facets, moved


# ----------------------------------------------------------------------------- the points


POINT_COLUMNS = ("@n", "@min", "@max", "@runs", "@repeats", "@cv", "@bar", "@tied")


def _empty(values: pd.DataFrame) -> pd.DataFrame:
    return values.iloc[0:0].assign(**{c: [] for c in POINT_COLUMNS})


def placed(values: pd.DataFrame, shape: Shape) -> pd.DataFrame:
    """The values a figure can place: a stated, finite x and a finite value."""
    return values[values[shape.x].notna() & np.isfinite(values[VALUE])]


def counted(values: pd.DataFrame, flagged: bool = False) -> pd.DataFrame:
    """The values of counted runs (`flagged`: those of flagged runs); all of them without a FLAGS column."""
    if FLAGS not in values:
        return values.iloc[0:0] if flagged else values
    keep = values[FLAGS].fillna("").astype(str) != ""
    return values[keep if flagged else ~keep]


def aggregate(values: pd.DataFrame, shape: Shape, mean_repeats: bool = False) -> pd.DataFrame:
    """One row per point (facets x series x x) from the values of COUNTED runs only (a flagged run is
    never a best nor averaged: `marked` draws it apart). Within a point, values are repeats only when
    their run is the same configuration (identity.py, CONFIG) and every key is equal.

    `mean_repeats` (what figures do, through `draw`; a table of winning runs leaves it False): 3 or more
    repeats of one configuration are summarised by their mean with its 95% t-interval, unless
    `shape.best_repeat` (`best over repeats`).
    BEST: every value competes, except that MIN_MEAN_REPEATS or more repeats of one configuration
    compete as their mean (with `mean_repeats`); the row is the winner's (every key as it was),
    `@value` its value or mean, `@min`/`@max` the 95% t-interval of a mean, `@tied` the runs of the
    other contenders equal to it as printed (PRINTED_DIGITS significant digits).
    MEAN: the point's mean, `@min`/`@max` its range, or the 95% t-interval of the mean when the point
    is MIN_MEAN_REPEATS or more repeats of one configuration.
    Always: `@n` the values behind the point, `@repeats` and `@cv` those of the configuration drawn
    (MEAN over several: the largest configuration and the largest CV), `@bar` 'ci95', 'range' or '',
    `@runs` the runs behind the point."""
    if shape.x is None:
        return _empty(values)
    values = counted(placed(values, shape))
    if len(values) == 0:
        return _empty(values)
    group = [*shape.facets, *shape.series, shape.x]
    rest = [k for k in [*keys_of(values), *([CONFIG] if CONFIG in values else [])] if k not in group]
    codes = _Codes(values, [*group, *rest])
    ids, _ = codes.groups(group)
    cfg, _ = codes.groups([*group, *rest])  # a configuration within a point: refines the point
    raw = values[VALUE].to_numpy(dtype=float)
    per = pd.Series(raw).groupby(cfg)
    c_n = np.bincount(cfg)
    c_mean, c_std = per.mean().to_numpy(), per.std(ddof=1).to_numpy()
    c_cv = np.where((c_n > 1) & (c_mean != 0), c_std / np.where(c_mean != 0, np.abs(c_mean), 1.0), np.nan)
    c_runs = _runs_per_group(cfg, values[RUN].to_numpy(dtype=object), np.arange(len(c_n)))
    half = _t95_of(c_n) * c_std / np.sqrt(c_n)
    counts = np.bincount(ids)
    mean_repeats = mean_repeats and not shape.best_repeat
    if shape.combine == BEST:
        return _best(values, ids, cfg, counts, raw, c_n, c_mean, c_cv, c_runs, half, mean_repeats)
    _, first = np.unique(ids, return_index=True)
    out = values.iloc[first].copy()
    grouped = pd.Series(raw).groupby(ids)
    gid = ids[first]
    configs = pd.Series(cfg).groupby(ids).nunique().reindex(gid).to_numpy()
    single = (configs == 1) & (counts[gid] >= MIN_MEAN_REPEATS) & mean_repeats
    mean = grouped.mean().reindex(gid).to_numpy()
    first_cfg = cfg[first]
    out[VALUE] = mean
    out["@min"] = np.where(single, mean - half[first_cfg], grouped.min().reindex(gid).to_numpy())
    out["@max"] = np.where(single, mean + half[first_cfg], grouped.max().reindex(gid).to_numpy())
    out["@n"] = counts[gid]
    cfg_n = pd.Series(c_n[cfg]).groupby(ids).max().reindex(gid).to_numpy()
    cfg_cv = pd.Series(c_cv[cfg]).groupby(ids).max().reindex(gid).to_numpy()
    out["@repeats"] = cfg_n
    out["@cv"] = cfg_cv
    out["@bar"] = np.where(single, "ci95", np.where(counts[gid] > 1, "range", ""))
    out["@runs"] = _runs_per_group(ids, values[RUN].to_numpy(dtype=object), gid)
    out["@tied"] = [[] for _ in range(len(out))]
    return out.reset_index(drop=True)


def _t95_of(sizes: np.ndarray) -> np.ndarray:
    """stats.t95(n - 1) of each group size (NaN for one value), looked up once per distinct size: a
    figure over 100,000 runs has tens of thousands of groups and a few sizes."""
    distinct, at = np.unique(sizes, return_inverse=True)
    return np.array([t95(int(n) - 1) if n > 1 else np.nan for n in distinct], dtype=float)[at.reshape(-1)]


def _best(values, ids, cfg, counts, raw, c_n, c_mean, c_cv, c_runs, half, mean_repeats: bool) -> pd.DataFrame:
    """BEST's points (see aggregate): contenders are the values, or the mean of 3+ repeats of one configuration."""
    as_mean = (c_n[cfg] >= MIN_MEAN_REPEATS) & mean_repeats
    _, first_of_cfg = np.unique(cfg, return_index=True)
    is_first = np.zeros(len(cfg), dtype=bool)
    is_first[first_of_cfg] = True
    contender = ~as_mean | is_first
    value = np.where(as_mean, c_mean[cfg], raw)
    score = np.where(values[BETTER].to_numpy(dtype=bool), value, -value)
    rows = np.flatnonzero(contender)
    order = rows[np.lexsort((-score[rows], ids[rows]))]
    winners = order[np.r_[True, ids[order][1:] != ids[order][:-1]]]
    printed = {}
    for row in rows:  # contenders equal to their point's winner as printed
        printed.setdefault((int(ids[row]), f"{value[row]:.{PRINTED_DIGITS}g}"), []).append(row)
    out = values.iloc[winners].copy()
    win_cfg = cfg[winners]
    mean_won = as_mean[winners]
    out[VALUE] = value[winners]
    out["@n"] = counts[ids[winners]]
    out["@min"] = np.where(mean_won, value[winners] - half[win_cfg], np.nan)
    out["@max"] = np.where(mean_won, value[winners] + half[win_cfg], np.nan)
    out["@repeats"] = c_n[win_cfg]
    out["@cv"] = c_cv[win_cfg]
    out["@bar"] = np.where(mean_won, "ci95", "")
    run_ids = values[RUN].to_numpy(dtype=object)

    def runs_of(row) -> list[str]:
        return list(c_runs[cfg[row]]) if as_mean[row] else [run_ids[row]]

    out["@runs"] = [runs_of(w) for w in winners]
    tied = []
    for w in winners:
        others = [r for r in printed[(int(ids[w]), f"{value[w]:.{PRINTED_DIGITS}g}")] if r != w]
        tied.append(sorted({run for r in others for run in runs_of(r)}) if others else [])
    out["@tied"] = tied
    return out.reset_index(drop=True)


def marked(values: pd.DataFrame, shape: Shape) -> pd.DataFrame:
    """The values of FLAGGED runs, one row per point and run (BEST: its best value there, MEAN: its mean),
    with `@flags`: drawn apart with their own marker, never a best nor part of a mean."""
    if shape.x is None:
        return _empty(values)
    values = counted(placed(values, shape), flagged=True)
    if len(values) == 0:
        return _empty(values)
    group = [*shape.facets, *shape.series, shape.x, RUN]
    ids, _ = _Codes(values, group).groups(group)
    raw = values[VALUE].to_numpy(dtype=float)
    if shape.combine == BEST:
        score = np.where(values[BETTER].to_numpy(dtype=bool), raw, -raw)
        order = np.lexsort((-score, ids))
        first = order[np.r_[True, ids[order][1:] != ids[order][:-1]]]
        out = values.iloc[first].copy()
    else:
        _, first = np.unique(ids, return_index=True)
        out = values.iloc[first].copy()
        out[VALUE] = pd.Series(raw).groupby(ids).mean().reindex(ids[first]).to_numpy()
    out["@n"] = np.bincount(ids)[ids[first]]
    out["@min"], out["@max"], out["@repeats"], out["@cv"], out["@bar"] = np.nan, np.nan, 1, np.nan, ""
    out["@runs"] = [[r] for r in out[RUN]]
    out["@tied"] = [[] for _ in range(len(out))]
    return out.reset_index(drop=True)


def _runs_per_group(ids: np.ndarray, runs: np.ndarray, order: np.ndarray) -> list[list[str]]:
    """The distinct runs of each group, sorted, in the groups' `order`: one sort of all pairs."""
    run_codes, names = pd.factorize(runs, sort=True)
    pairs = sorted_distinct(ids * max(len(names), 1) + run_codes)
    group, run = pairs // max(len(names), 1), pairs % max(len(names), 1)
    bounds = np.searchsorted(group, np.arange(int(ids.max()) + 2))
    names = np.asarray(names, dtype=object)
    return [names[run[bounds[g]:bounds[g + 1]]].tolist() for g in order]


def sorted_distinct(numbers: np.ndarray) -> np.ndarray:
    """`np.unique(numbers)` of an integer array by one sort: numpy 2.4's np.unique hashes first, measured
    40x slower on the 260,000 (group, run) pairs of a network figure (a second per report over 100,000 runs)."""
    ordered = np.sort(numbers)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


MAX_UNPLACED = MAX_POINTS  # values without an x listed in the CSV


def draw(values: pd.DataFrame, shape: Shape, names: dict[str, dict] | None = None, default_label: str = "",
         winner_keys: list[str] | None = None) -> Drawing:
    """The points grouped into panels and series, sorted (numbers as numbers, missing last); the
    winner's values of `winner_keys` (default: the keys it was best over) in each point's extra.
    Flagged runs' values are each series' `marked` points; values without an x are `unplaced`
    (listed in the CSV); what was kept apart or marked is said in the drawing's notes."""
    points = aggregate(values, shape, mean_repeats=True)
    flagged = marked(values, shape)
    carried = [k for k in (winner_keys if winner_keys is not None else independent(shape.over))
               if k in points.columns]
    columns = list(dict.fromkeys([*shape.facets, *shape.series, shape.x, VALUE, *POINT_COLUMNS, *carried]))
    panels: dict[tuple, dict[tuple, tuple[list, list]]] = {}
    for kind, frame_ in ((0, points), (1, flagged)):
        if not len(frame_):
            continue
        extra = [FLAGS] if kind and FLAGS in frame_ else []
        for rec in frame_[[c for c in [*columns, *extra] if c in frame_]].to_dict("records"):
            panel = tuple(plain(rec.get(k)) for k in shape.facets)  # plain(): NaN is None, one group
            series = tuple(plain(rec.get(k)) for k in shape.series)
            panels.setdefault(panel, {}).setdefault(series, ([], []))[kind].append(rec)
    out = []
    for panel in sorted(panels, key=_sort_key):
        title = ", ".join(value_text(k, v, names) for k, v in zip(shape.facets, panel, strict=True))
        lines = []
        for series in sorted(panels[panel], key=_sort_key):
            label = series_label(shape.series, series, names)
            recs, marks = (sorted(r, key=lambda r: r[shape.x]) for r in panels[panel][series])
            lines.append(ShapedSeries(label or default_label, [_point(r, shape, carried) for r in recs],
                                      dict(zip(shape.series, series, strict=True)),
                                      [_point(r, shape, carried) for r in marks]))
        out.append(ShapedPanel(title, lines, dict(zip(shape.facets, panel, strict=True))))
    drawing = Drawing(shape, out, min(len(out), MAX_PANELS))
    widest = max((len(p.series) for p in out), default=0)
    if widest > MAX_SERIES:
        drawing.drawn, drawing.why_table = 0, (f"{widest} lines in one panel (more than {MAX_SERIES}): a table "
                                               "instead of a figure; choose the series with --series")
    elif drawing.points() > MAX_POINTS:
        drawing.drawn, drawing.why_table = 0, f"{drawing.points():,} points (more than {MAX_POINTS:,}): a table"
    drawing.notes = _notes(values, shape, drawing)
    if shape.x is not None:
        unplaced = values[values[shape.x].isna() & np.isfinite(values[VALUE])]
        if len(unplaced):
            drawing.unplaced = unplaced.head(MAX_UNPLACED)
            drawing.notes.append(f"{len(unplaced):,} value(s) whose {name(shape.x)} is not stated are not drawn "
                                 f"against it (kept apart: listed in the CSV with an empty x).")
    return drawing


def _notes(values: pd.DataFrame, shape: Shape, drawing: Drawing) -> list[str]:
    """What the caption must add: keys whose unknown values are kept apart, marks drawn."""
    notes = []
    for key in [*shape.facets, *shape.series]:
        column = values[key] if key in values else None
        if column is not None and column.isna().any() and column.notna().any():
            notes.append(f"Values that do not state the {name(key)} are kept apart from those that do "
                         f"('{name(key)} not stated').")
    pts = [pt for p in drawing.panels for s in p.series for pt in s.points]
    kinds = sorted({f for p in drawing.panels for s in p.series for pt in s.marked for f in pt.flags.split(", ")
                    if f})
    if kinds:
        notes.append(f"Values of flagged runs ({', '.join(kinds)}) are drawn apart with their own marker, never a "
                     "best nor averaged.")
    if any(pt.tied_with for pt in pts):
        notes.append(f"A ringed point is a best tied with other runs (equal to {PRINTED_DIGITS} significant "
                     "digits): tied_with in the CSV.")
    if any(pt.high_cv for pt in pts):
        notes.append(f"A point in a square spreads: the CV of its repeats is above {shape.cv_warn:.0%}.")
    return notes


def _point(rec: dict, shape: Shape, carried: list[str]) -> ShapedPoint:
    n = int(rec["@n"])
    repeats = int(plain(rec.get("@repeats")) or 1)
    cv = plain(rec.get("@cv"))
    cv = float(cv) if cv is not None else None
    bar = str(rec.get("@bar") or "")
    lo, hi = (float(rec["@min"]), float(rec["@max"])) if bar else (None, None)
    flags = str(rec.get(FLAGS) or "")
    common = {"n": n, "repeats": repeats, "cv": cv, "bar": bar, "flags": flags,
              "tied_with": list(rec.get("@tied") or []), "high_cv": cv is not None and cv > shape.cv_warn}
    if shape.combine == BEST:
        extra = {k: plain(rec.get(k)) for k in carried}
        extra["best of"] = n
        return ShapedPoint(float(rec[shape.x]), float(rec[VALUE]), lo, hi, list(rec["@runs"]), extra, **common)
    return ShapedPoint(float(rec[shape.x]), float(rec[VALUE]), lo, hi, list(rec["@runs"]), {}, **common)


# ----------------------------------------------------------------------------- text


def plain(value):
    """A value as Python writes it: numpy scalars unwrapped, integral floats as int, NaN as None."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
    return value


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def _sort_key(values: tuple) -> tuple:
    out = []
    for v in values:
        v = plain(v)
        if _missing(v):
            out.append((2, 0.0, ""))
        elif isinstance(v, int | float):
            out.append((0, float(v), ""))
        else:
            out.append((1, 0.0, str(v)))
    return tuple(out)


def name(key: str) -> str:
    """How a key is named in captions: 'P x Q', 'T/V variant', a tag by its key."""
    return NAMES.get(key, key.removeprefix("tag:"))


OPTIONAL = ("tuning",)  # keys (with every tag) whose absence is the plain case: left out of a label


def series_label(keys: list[str], values: tuple, names: dict[str, dict] | None = None) -> str:
    """'blis-serial, mtu_9000': the line's values; a tuning or tag the line does not have is left
    out ('blis-serial', not 'blis-serial, tuning not stated'), unless nothing else is said."""
    parts = [value_text(k, v, names) for k, v in zip(keys, values, strict=True)
             if not (_missing(plain(v)) and (k in OPTIONAL or k.startswith("tag:")))]
    if parts or not keys:
        return ", ".join(parts)
    return "no " + " or ".join(name(k) for k in keys)


def value_text(key: str, value, names: dict[str, dict] | None = None) -> str:
    """'2 nodes', 'openblas-serial', '32 KiB', 'tcp_sack=0': a key's value in a label or title."""
    value = plain(value)
    if names and key in names and value in names[key]:
        return names[key][value]
    if _missing(value):
        return f"{name(key)} not stated"
    if key == "bytes" and isinstance(value, int | float):
        return size_text(value)
    if key in _COUNTED and isinstance(value, int | float):
        one, many = _COUNTED[key]
        return f"{value:g} {one if value == 1 else many}"
    if key == "ppn" and isinstance(value, int | float):
        return f"{value:g} per node"
    if key in _PLAIN:
        return str(value)
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    return f"{key.removeprefix('tag:')}={shown}"


def size_text(nbytes: float) -> str:
    """4096 -> '4 KiB': message sizes as people say them."""
    if nbytes <= 0 or not math.isfinite(nbytes):
        return "0 B"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes:g} B"


def independent(keys: list[str]) -> list[str]:
    """The keys without those that follow from others among them (P and Q from P x Q, ppn from
    ranks and nodes): what a caption names and a winner carries."""
    return [k for k in keys if not set(_DEPENDENT.get(k, ())) & set(keys)]


def _and(words: list[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def filter_labels(values: pd.DataFrame, labels: dict) -> pd.DataFrame:
    """Only the values whose key equals each given value (a label filter: test=PingPong); numbers
    compare as numbers, text as stored."""
    for key, wanted in labels.items():
        column = values[resolve(values, str(key), "labels")]
        if isinstance(wanted, int | float) and not isinstance(wanted, bool):
            values = values[pd.to_numeric(column, errors="coerce") == float(wanted)]
        else:
            values = values[column.astype(str) == str(wanted)]
    return values
