"""What a parsed benchmark output becomes: metrics with units and a validity verdict.

A value that cannot be true is never a valid result: a metric whose value is not a finite
number (inf, nan: an overflowed `1e999`, a `nan` in a summary) is invalid from the moment it
is made, and `Outcome.check_values` invalidates the whole outcome with the reason and keeps
the value out of the metrics (a database cannot hold nan, and an infinity would sort first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# No machine reaches 10^7 Gflop/s (10 Pflop/s) in one MPI process: the fastest GPU is ~100x below. HPL's and
# HPCG's parsers both refuse a rate above it per process.
MAX_GFLOPS_PER_PROCESS = 1e7


def is_finite(value: object) -> bool:
    """True for a real, finite number; False for inf, nan, an int too large for a float, or a non-number."""
    if type(value) is float:  # nearly every value (a hundred thousand per large import): the short way
        return math.isfinite(value)
    if isinstance(value, bool):
        return True
    if not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond the range of a float
        return False


def _shown(value: object) -> str:
    try:
        return str(value)[:40]
    except ValueError:  # an int too long to print (Python's 4300-digit limit)
        return f"an integer of {value.bit_length()} bits"  # type: ignore[union-attr]


class TooManyResults(ValueError):
    """A parser was asked to stop after `limit` results and the output holds more (a hostile or broken file)."""

    def __init__(self, what: str, limit: int):
        super().__init__(f"more than {limit:,} {what} in one output (the limit is {limit:,})")
        self.limit = limit


@dataclass
class Metric:
    name: str
    value: float
    unit: str
    higher_is_better: bool = True
    labels: dict = field(default_factory=dict)  # e.g. the N, NB, P, Q of one HPL result line
    valid: bool = True

    def __post_init__(self) -> None:
        if not is_finite(self.value):  # an infinity or nan is never a valid measurement
            self.valid = False


@dataclass
class Outcome:
    """Everything a parser extracted from one run's outputs."""

    metrics: list[Metric] = field(default_factory=list)
    valid: bool = True
    reasons: list[str] = field(default_factory=list)  # why not valid, or warnings
    facts: dict = field(default_factory=dict)  # version, parameters the output states, ...

    def invalidate(self, reason: str) -> None:
        self.valid = False
        self.reasons.append(reason)

    def check_values(self) -> Outcome:
        """Every metric value must be a finite number, else the outcome is invalid with the reason.

        The non-finite metrics leave `metrics` (the store cannot hold nan, and no figure may
        use an infinity); their raw values stay in `facts['non_finite_metrics']`. Idempotent.
        """
        bad = [m for m in self.metrics if not is_finite(m.value)]
        if not bad:
            return self
        self.metrics = [m for m in self.metrics if is_finite(m.value)]
        kept = self.facts.setdefault("non_finite_metrics", {})
        for m in bad:
            shown = _shown(m.value)
            kept.setdefault(m.name, shown)
            self.invalidate(f"metric {m.name} is not finite ({shown})")
        return self

    def whole_run_validity(self) -> Outcome:
        """An invalid run's metrics are all invalid (for outputs that fail as a whole)."""
        self.check_values()
        if not self.valid:
            for m in self.metrics:
                m.valid = False
        return self

    def best(self, name: str) -> Metric | None:
        """The best *valid* value of a metric: an invalid result is never a best result."""
        candidates = [m for m in self.metrics if m.name == name and m.valid and is_finite(m.value)]
        if not candidates:
            return None
        pick = max if candidates[0].higher_is_better else min
        return pick(candidates, key=lambda m: m.value)
