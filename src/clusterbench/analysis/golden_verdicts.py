"""The verdicts of a cluster run against golden values, as data: what analysis/golden.py works out and
analysis/cluster.ClusterView carries (kept apart from golden.py, which reads cluster views: the view
holds these without importing the module that judges it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

PASS, SLOW, FAILED, CANNOT_TELL = "pass", "slow", "failed", "cannot tell"
FAILING = (SLOW, FAILED)  # the verdicts that put a node on the drain list
_SEVERITY = {PASS: 0, SLOW: 1, FAILED: 2}


@dataclass(frozen=True)
class Expected:
    """A golden value: the median of the healthy figures and the band around it."""

    value: float
    tolerance: float  # fraction of `value`
    count: int  # healthy figures
    runs: int  # earlier cluster runs they come from
    since: str | None  # the oldest of their runs' start (UTC, ISO)
    spread: float  # 1.4826 x MAD, in the measure's unit

    def source(self) -> str:
        since = f" since {self.since[:10]}" if self.since else ""
        return f"median of {self.count} healthy figures from {self.runs} earlier cluster run(s){since}"

    def to_dict(self) -> dict:
        return {"value": self.value, "tolerance": round(self.tolerance, 4), "count": self.count, "runs": self.runs,
                "since": self.since, "spread": self.spread, "source": self.source()}


@dataclass(frozen=True)
class Verdict:
    """One figure against its golden value."""

    subject: str
    measure: str  # Measure.key
    label: str
    unit: str
    state: str  # PASS, SLOW, FAILED, CANNOT_TELL
    value: float | None
    expected: Expected | None
    worse_by: float | None  # fraction worse than expected (negative: better)
    why: str
    evidence: str | None = None  # its run's flags and disturbance (failed: what its runs said)
    run: str | None = None

    def to_dict(self) -> dict:
        return {"subject": self.subject, "measure": self.measure, "state": self.state, "value": self.value,
                "unit": self.unit, "worse_by": None if self.worse_by is None else round(self.worse_by, 4),
                "expected": self.expected.to_dict() if self.expected else None, "why": self.why,
                "evidence": self.evidence, "run": self.run}


@dataclass
class SubjectVerdict:
    """A node's or link's verdict: the worst of its judged measures."""

    subject: str
    measures: list[Verdict] = field(default_factory=list)

    @property
    def state(self) -> str:
        judged = [v for v in self.measures if v.state in _SEVERITY]
        if not judged:
            return CANNOT_TELL
        return max((v.state for v in judged), key=_SEVERITY.__getitem__)

    @property
    def fails(self) -> bool:
        return self.state in FAILING

    def worst(self) -> Verdict | None:
        """The measure that sets the verdict: the failed one, else the most worse than expected."""
        judged = [v for v in self.measures if v.state == self.state]
        if not judged:
            return None
        return max(judged, key=lambda v: v.worse_by if v.worse_by is not None else math.inf)

    def summary(self) -> str:
        """'slow: STREAM Triad 38% below 20.1 GB/s expected (...)', or why it cannot tell."""
        worst = self.worst()
        if worst is None:
            return "no measure"
        text = worst.why
        unjudged = [v.measure for v in self.measures if v.state == CANNOT_TELL]
        if unjudged and self.state != CANNOT_TELL:
            text += f"; cannot tell: {', '.join(unjudged)}"
        return text

    def short(self) -> str:
        """'DGEMM slow by 40% (89.8 vs 151 Gflop/s)', 'DGEMM failed (failed: exit code 1)': a drain reason."""
        worst = self.worst()
        if worst is None:
            return self.state
        if worst.state == FAILED:
            return f"{worst.label} failed" + (f" ({worst.evidence})" if worst.evidence else "")
        if worst.expected is None or worst.value is None or worst.worse_by is None:
            return f"{worst.label} {worst.state}"
        return (f"{worst.label} {worst.state} by {100 * worst.worse_by:.0f}% "
                f"({worst.value:.3g} vs {worst.expected.value:.3g} {worst.unit})")

    def to_dict(self) -> dict:
        worst = self.worst()
        return {"subject": self.subject, "state": self.state, "worst": worst.measure if worst else None,
                "summary": self.summary(), "measures": [v.to_dict() for v in self.measures]}


@dataclass
class Judgement:
    """Every node's and link's verdict in one cluster run, and how golden values were made."""

    nodes: list[SubjectVerdict]
    links: list[SubjectVerdict]
    source: str  # where the golden values came from (the store, or a report's selection)
    rule: str = ""  # how a verdict is reached, in words (golden.describe)

    def failing_nodes(self) -> list[SubjectVerdict]:
        return [v for v in self.nodes if v.fails]

    def node(self, name: str) -> SubjectVerdict | None:
        return next((v for v in self.nodes if v.subject == name), None)

    def to_dict(self) -> dict:
        return {"rule": self.rule, "source": self.source, "nodes": [v.to_dict() for v in self.nodes],
                "links": [v.to_dict() for v in self.links],
                "failing_nodes": [v.subject for v in self.failing_nodes()]}

