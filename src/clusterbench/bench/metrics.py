"""What a parsed benchmark output becomes: metrics with units and a validity verdict."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Metric:
    name: str
    value: float
    unit: str
    higher_is_better: bool = True
    labels: dict = field(default_factory=dict)  # e.g. the N, NB, P, Q of one HPL result line
    valid: bool = True


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

    def whole_run_validity(self) -> Outcome:
        """An invalid run's metrics are all invalid (for outputs that fail as a whole)."""
        if not self.valid:
            for m in self.metrics:
                m.valid = False
        return self

    def best(self, name: str) -> Metric | None:
        """The best *valid* value of a metric: an invalid result is never a best result."""
        candidates = [m for m in self.metrics if m.name == name and m.valid]
        if not candidates:
            return None
        pick = max if candidates[0].higher_is_better else min
        return pick(candidates, key=lambda m: m.value)
