"""Values that do not apply are absent: what each benchmark declares a "not applicable" value to be.

HPCC prints -1 for a figure it did not run (ping-pong latency with one process); averaged with
real values, it made a report row "-1 ± 0 (n=24) us". A benchmark's `MetricSpec` says which
printed values mean "not applicable" (`not_applicable`, `negative_not_applicable`); NaN and
infinities never apply. Every metric frame the analysis builds drops such rows, so no table,
figure, best or statistic can use them.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING

from clusterbench.bench import registry
from clusterbench.bench.declare import MetricSpec
from clusterbench.errors import UserInputError

if TYPE_CHECKING:  # pandas only where frames are filtered: `results` lists runs without it
    import pandas as pd


MAX_BENCHMARKS_CACHED = 256  # names come from stores, which may hold any: the cache stays bounded


@lru_cache(maxsize=MAX_BENCHMARKS_CACHED)
def declared_for(benchmark: str) -> dict[str, MetricSpec]:
    """Metric name -> its declaration, for the metrics of `benchmark` that name a "not applicable" value
    (the others only lose NaN and infinities); {} for a benchmark no module declares (an imported name).
    One benchmark's module is imported, not all of them: `results` lists a store's runs in 0.2 s."""
    try:
        cls = registry.benchmark_class(benchmark)
    except (UserInputError, ImportError):
        return {}
    out: dict[str, MetricSpec] = {}
    for spec in cls.metrics:
        if spec.not_applicable or spec.negative_not_applicable:
            out.setdefault(spec.name, spec)
    return out


def applies(benchmark: str, name: str, value: float) -> bool:
    """Is one stored value a measurement (not its benchmark's "not applicable" marker, not NaN/inf)?"""
    spec = declared_for(benchmark).get(name)
    if spec is None:
        try:
            return math.isfinite(float(value))
        except (TypeError, ValueError, OverflowError):
            return False
    return spec.applies(value)


def applicable_mask(benchmarks: pd.Series, names: pd.Series, values: pd.Series) -> pd.Series:
    """True for each row whose value is a measurement; vectorised per declared (benchmark, name)."""
    import numpy as np
    import pandas as pd

    numbers = pd.to_numeric(values, errors="coerce").astype(float)
    keep = pd.Series(np.isfinite(numbers.to_numpy()), index=values.index)
    if not len(values):
        return keep
    codes, pairs = pd.MultiIndex.from_arrays([benchmarks.astype(object).to_numpy(),
                                              names.astype(object).to_numpy()]).factorize()
    numbers_np, keep_np = numbers.to_numpy(), keep.to_numpy().copy()
    for code, pair in enumerate(pairs):
        spec = declared_for(str(pair[0])).get(pair[1])
        if spec is None:
            continue
        rows = codes == code
        marked = np.isin(numbers_np, spec.not_applicable) if spec.not_applicable else np.zeros(len(codes), bool)
        if spec.negative_not_applicable:
            marked |= numbers_np < 0
        keep_np &= ~(rows & marked)
    keep = pd.Series(keep_np, index=values.index)
    return keep


def drop_not_applicable(frame: pd.DataFrame, name_column: str = "name") -> pd.DataFrame:
    """The rows of a metric frame (benchmark, name or metric, value) whose value applies."""
    if frame.empty:
        return frame
    keep = applicable_mask(frame["benchmark"], frame[name_column], frame["value"])
    return frame if keep.all() else frame[keep.to_numpy()]
