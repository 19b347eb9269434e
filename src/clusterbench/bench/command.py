"""Any command as a benchmark: a command template, regular expressions for its metrics.

For what clusterbench has no module for yet (a site's own application, a script), and the
simplest way to sweep something: every campaign parameter can appear in the command as
`{name}`. Metrics are read from stdout with one regular expression each (the first group is
the value); `valid_if` / `invalid_if` patterns decide validity. The command runs through
`/bin/sh -c` in the run directory, so pipes and `&&` written in the command work, and a timeout
kills the whole group.

A substituted value is shell-quoted: it is always one word of the command line, never shell
syntax, because campaign files travel between sites and a value such as `$(rm -rf ~)` or
`x; reboot` must stay text. Shell syntax belongs in the command template itself; a value that
must be split into several words on purpose goes through the environment (`env: {OPTS: "{opts}"}`
and `command: "./app $OPTS"`: the shell splits an expanded variable into words but never runs
what it contains). Metric patterns run under a time budget (limit `max_parse_seconds`), so a
pattern that backtracks catastrophically makes the run invalid instead of hanging it.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.bench.base import Benchmark
from clusterbench.bench.metrics import Metric, Outcome
from clusterbench.bench.params import REQUIRED, Param
from clusterbench.errors import UserInputError
from clusterbench.limits import limit
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
        if not isinstance(spec["pattern"], str) or not isinstance(spec["name"], str):
            raise UserInputError("a metric's name and pattern are text")
        import regex  # here and in parse, not at the top: every listing imports this module (bench.registry)

        try:
            if regex.compile(spec["pattern"]).groups < 1:
                raise UserInputError(f"metric pattern {spec['pattern']!r} needs one (group) for the value")
        except regex.error as exc:
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
        from clusterbench.plan.expr import substitute  # here, as regex: a listing imports this module

        for spec in point.get("metrics", []):
            MetricPattern.from_spec(spec)
        substitute(point["command"], point, quote=shlex.quote)  # unknown {names}, NUL bytes: refused now

    @classmethod
    def from_point(cls, point: dict) -> Command:
        return cls(template=point["command"], point=point,
                   metric_patterns=[MetricPattern.from_spec(s) for s in point.get("metrics", [])],
                   valid_if=point.get("valid_if"), invalid_if=point.get("invalid_if"))

    def params(self) -> dict:
        return self.point

    def command(self) -> list[str]:
        from clusterbench.plan.expr import substitute

        return ["/bin/sh", "-c", substitute(self.template, self.point, quote=shlex.quote)]

    def parse(self, workdir: Path) -> Outcome:
        import regex

        text = _tail(workdir / "stdout.txt")
        out = Outcome()
        deadline = time.monotonic() + limit("max_parse_seconds")

        def matches(pattern: str, what: str) -> list | None:
            """Every match of `pattern` in the output, within what is left of the budget; None
            (and the run invalid) when the budget ran out."""
            try:
                left = max(deadline - time.monotonic(), 0.001)
                return regex.compile(pattern, flags=regex.MULTILINE).findall(text, timeout=left)
            except TimeoutError:
                out.invalidate(f"{what}: pattern {pattern!r} took more than {limit('max_parse_seconds')} s on the "
                               "output (catastrophic backtracking?); simplify it or raise max_parse_seconds")
                return None

        for mp in self.metric_patterns:
            found = matches(mp.pattern, f"metric {mp.name}")
            if found is None:
                continue
            if not found:
                out.invalidate(f"metric {mp.name}: pattern {mp.pattern!r} not found in stdout")
                continue
            value = found[-1][0] if isinstance(found[-1], tuple) else found[-1]
            try:
                out.metrics.append(Metric(mp.name, float(value), mp.unit, mp.higher_is_better))
            except ValueError:
                out.invalidate(f"metric {mp.name}: {value!r} is not a number")
        if self.valid_if and matches(self.valid_if, "valid_if") == []:
            out.invalidate(f"stdout does not contain {self.valid_if!r}")
        if self.invalid_if and matches(self.invalid_if, "invalid_if"):
            out.invalidate(f"stdout contains {self.invalid_if!r}")
        return out


MAX_PARSED_BYTES = 64 * 2**20


def _tail(path: Path) -> str:
    """The output a run's patterns read: all of it, or its last 64 MiB (results come last)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - MAX_PARSED_BYTES))
            return f.read().decode(errors="replace")
    except OSError:
        return ""
