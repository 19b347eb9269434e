"""Any command as a benchmark: a command template, regular expressions for its metrics.

For what clusterbench has no module for yet (a site's own application, a script), and the
simplest way to sweep something: every campaign parameter can appear in the command as
`{name}`. Metrics are read from stdout with one regular expression each (the first group is
the value); `valid_if` / `invalid_if` patterns decide validity. The command runs through
`/bin/sh -c` in the run directory, so pipes and `&&` work, and a timeout kills the whole group.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.bench.base import Benchmark
from clusterbench.bench.metrics import Metric, Outcome
from clusterbench.bench.params import REQUIRED, Param
from clusterbench.errors import UserInputError
from clusterbench.plan.expr import substitute
from clusterbench.system.discover import SystemInfo


@dataclass
class MetricPattern:
    name: str
    pattern: str
    unit: str = ""
    higher_is_better: bool = True

    @classmethod
    def from_spec(cls, spec: object) -> MetricPattern:
        if not isinstance(spec, dict) or "name" not in spec or "pattern" not in spec:
            raise UserInputError("each metric needs a name and a pattern",
                                 hint="metrics: [{name: rate, pattern: 'Rate: ([0-9.]+)', unit: MB/s}]")
        unknown = set(spec) - {"name", "pattern", "unit", "higher_is_better"}
        if unknown:
            raise UserInputError(f"unknown metric key(s): {', '.join(sorted(unknown))}")
        try:
            if re.compile(spec["pattern"]).groups < 1:
                raise UserInputError(f"metric pattern {spec['pattern']!r} needs one (group) for the value")
        except re.error as exc:
            raise UserInputError(f"metric pattern {spec['pattern']!r} is not a regular expression: {exc}") from None
        return cls(**spec)


@dataclass
class Command(Benchmark):
    template: str
    point: dict = field(default_factory=dict)
    metric_patterns: list[MetricPattern] = field(default_factory=list)
    valid_if: str | None = None
    invalid_if: str | None = None
    name: str = "command"

    parameters = (
        Param("command", str, REQUIRED, "shell command; {name} is replaced by the parameter's value"),
        Param("metrics", list, [], "metrics read from stdout: [{name, pattern, unit, higher_is_better}]"),
        Param("valid_if", str, None, "regular expression stdout must contain for a valid run"),
        Param("invalid_if", str, None, "regular expression that makes a run invalid when found"),
    )
    open_parameters = True

    @classmethod
    def resolve(cls, point: dict, system: SystemInfo) -> None:
        for spec in point.get("metrics", []):
            MetricPattern.from_spec(spec)
        substitute(point["command"], point)  # unknown {names} are an error now, not at run time

    @classmethod
    def from_point(cls, point: dict) -> Command:
        return cls(template=point["command"], point=point,
                   metric_patterns=[MetricPattern.from_spec(s) for s in point.get("metrics", [])],
                   valid_if=point.get("valid_if"), invalid_if=point.get("invalid_if"))

    def params(self) -> dict:
        return self.point

    def command(self) -> list[str]:
        return ["/bin/sh", "-c", substitute(self.template, self.point)]

    def parse(self, workdir: Path) -> Outcome:
        text = (workdir / "stdout.txt").read_text(errors="replace")
        out = Outcome()
        for mp in self.metric_patterns:
            found = re.findall(mp.pattern, text, flags=re.MULTILINE)
            if not found:
                out.invalidate(f"metric {mp.name}: pattern {mp.pattern!r} not found in stdout")
                continue
            value = found[-1][0] if isinstance(found[-1], tuple) else found[-1]
            try:
                out.metrics.append(Metric(mp.name, float(value), mp.unit, mp.higher_is_better))
            except ValueError:
                out.invalidate(f"metric {mp.name}: {value!r} is not a number")
        if self.valid_if and not re.search(self.valid_if, text, flags=re.MULTILINE):
            out.invalidate(f"stdout does not contain {self.valid_if!r}")
        if self.invalid_if and re.search(self.invalid_if, text, flags=re.MULTILINE):
            out.invalidate(f"stdout contains {self.invalid_if!r}")
        return out
