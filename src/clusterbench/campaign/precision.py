"""Repeat until precise: the rule behind `bench --repeats auto` and a campaign's `repeats: auto`.

On a shared machine identical runs differ by up to 25%, so a fixed repeat count is either too few
(the mean says little) or too many (time spent on a figure already known). `--repeats auto` runs a
point again until the 95% interval of its headline metric's mean is narrow enough:

- the headline is the benchmark's declared figure of merit (bench/declare.py `merit`, the metric its
  history follows), else its listing headline; a benchmark that declares neither cannot repeat
  automatically (the message says to give a count). A run's sample is the best valid value of it;
- only runs that count are samples: a failed, invalid, truncated, suspect or disturbed repeat is
  not one (the caller passes the judgement, analysis/flags.counts; `plainly_counted` is the
  stricter default of the layers that cannot import it) and the line that ends the repeats says
  how many were left out and why;
- the half-width of the 95% t interval, t(0.975, n-1) * s / sqrt(n), relative to the mean, must be
  at most `precision` (default 2%) with at least MIN_RUNS samples; else the point is repeated, up to
  `max_runs` runs in all (default 10, at most MAX_RUNS), samples or not, so that a point that never
  settles (or never succeeds) costs a bounded time.

`decide` is the pure rule; `until_precise` the loop any command can drive with its own way of
running one repeat (`bench` here, `run`'s phases later); campaign/engine.py applies it round by
round to a campaign's points. Each stop is said in one line: "stopped after 5 runs: 95% interval
+-1.4% <= 2%", "stopped at the maximum of 10 runs: +-3.1% > 2%".
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from clusterbench.errors import UserInputError

MIN_RUNS = 3  # fewer samples give an interval too wide to mean anything (t(0.975, 1) = 12.7)
DEFAULT_PRECISION = 0.02
DEFAULT_MAX_RUNS = 10
MAX_RUNS = 100  # the bound on `max`: a point repeated more is a study to plan, not a precision to reach
MIN_PRECISION, MAX_PRECISION = 0.001, 0.5  # 0.1% .. 50% of the mean
_NOT_COUNTED_FACTS = ("disturbed", "suspect", "file_name_conflicts")

R = TypeVar("R")


@dataclass(frozen=True)
class AutoRepeats:
    """Repeat a point until the 95% interval's half-width is at most `precision` of the mean, between
    MIN_RUNS and `max_runs` runs."""

    precision: float = DEFAULT_PRECISION
    max_runs: int = DEFAULT_MAX_RUNS

    def __post_init__(self) -> None:
        check_precision(self.precision, "precision")
        check_max_runs(self.max_runs, "max")

    def describe(self) -> str:
        return f"auto (95% interval within {percent(self.precision)}, {MIN_RUNS} to {self.max_runs} runs)"


def check_precision(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not MIN_PRECISION <= value <= MAX_PRECISION:
        raise UserInputError(f"{where}: the precision is a fraction of the mean from {MIN_PRECISION:g} to "
                             f"{MAX_PRECISION:g} ({percent(MIN_PRECISION)} to {percent(MAX_PRECISION)}), "
                             f"got {value!r}", hint="e.g. 0.02 (2%)")
    return float(value)


def check_max_runs(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_RUNS <= value <= MAX_RUNS:
        raise UserInputError(f"{where}: the most runs of a point is a whole number from {MIN_RUNS} to {MAX_RUNS}, "
                             f"got {value!r}", hint=f"e.g. {where} {DEFAULT_MAX_RUNS}" if where.startswith("-")
                             else f"e.g. {where}: {DEFAULT_MAX_RUNS}")
    return value


def parse_repeats(text: str | int, option: str = "--repeats") -> int | str:
    """'auto' or a whole number of at least 1 (as text from the command line, or a number)."""
    if isinstance(text, int) and not isinstance(text, bool):
        number = text
    else:
        word = str(text).strip()
        if word.lower() == "auto":
            return "auto"
        if not (word.isascii() and word.isdigit() and len(word) <= 9):
            raise UserInputError(f"{option}: a whole number of at least 1 or 'auto', got {str(text)[:40]!r}",
                                 hint=f"e.g. {option} 5, or {option} auto --precision 2%")
        number = int(word)
    if number < 1:
        raise UserInputError(f"{option}: a whole number of at least 1 or 'auto', got {number}",
                             hint=f"e.g. {option} 5, or {option} auto --precision 2%")
    return number


def parse_precision(text: str, option: str = "--precision") -> float:
    """'2%' or '0.02' -> 0.02. A bare number of 1 or more is ambiguous (2 = 2% or 200%?) and refused."""
    word = str(text).strip()
    try:
        value = float(word[:-1]) / 100 if word.endswith("%") else float(word)
    except ValueError:
        raise UserInputError(f"{option}: a percentage like 2% or a fraction like 0.02, got {word[:40]!r}") from None
    if not word.endswith("%") and value >= 1:
        raise UserInputError(f"{option}: {word} is ambiguous: write {word}% or a fraction below 1 (0.02 is 2%)")
    return check_precision(value, option)


def repeat_options(repeats: int | str, precision: str | None = None,
                   max_repeats: int | None = None) -> tuple[int, AutoRepeats | None]:
    """`--repeats`, `--precision`, `--max-repeats` of a command: (the count, None), or (1, the policy)
    for `--repeats auto`. The last two apply only to auto: given with a count, they are refused."""
    parsed = parse_repeats(repeats)
    if parsed != "auto":
        for option, value in (("--precision", precision), ("--max-repeats", max_repeats)):
            if value is not None:
                raise UserInputError(f"{option} applies only with --repeats auto",
                                     hint=f"e.g. --repeats auto {option} {value}")
        return int(parsed), None
    fraction = DEFAULT_PRECISION if precision is None else parse_precision(precision)
    most = DEFAULT_MAX_RUNS if max_repeats is None else check_max_runs(max_repeats, "--max-repeats")
    return 1, AutoRepeats(fraction, most)


class OneStart:
    """A reporter (execution/loop.Reporter) told of `start` only once: several calls of the engine, one
    repeat each, shown as one progress."""

    def __init__(self, reporter, started: bool = False):
        self.reporter = reporter
        self.started = started

    def start(self, pending, done, eta) -> None:
        if not self.started:
            self.started = True
            self.reporter.start(pending, done, eta)

    def __getattr__(self, name: str):
        return getattr(self.reporter, name)


def percent(fraction: float) -> str:
    """0.02 -> '2%', 0.014 -> '1.4%'."""
    return f"{100 * fraction:.3g}%"


def t95(df: int) -> float:
    """t(0.975, df): the same quantile as analysis/stats.t95 (which this layer may not import)."""
    from scipy.special import stdtrit

    value = float(stdtrit(df, 0.975))
    return round(value, 3) if df <= 120 else value


def relative_half_width(values: list[float]) -> float | None:
    """The 95% t interval's half-width over |mean|; None with fewer than 2 values or a zero mean."""
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    if not mean:
        return None
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return t95(n - 1) * sd / math.sqrt(n) / abs(mean)


@dataclass
class Decision:
    stop: bool
    reason: str  # the one line that says why the repeats stopped (or why they go on)
    runs: int  # repeats made (counted or not)
    counted: int  # samples
    half_width: float | None  # relative half-width of the 95% interval, None when unknown
    left_out: dict[str, int] = field(default_factory=dict)  # why not counted -> runs


def decide(values: list[float], runs: int, policy: AutoRepeats, left_out: Counter | None = None) -> Decision:
    """Stop or go on, after `runs` repeats of which `values` are the counted samples."""
    left = dict(left_out or {})
    half = relative_half_width(values)
    n = len(values)
    noted = _left_out_words(runs - n, left)
    shown = f"+-{percent(half)}" if half is not None else "no interval"
    if n >= MIN_RUNS and half is not None and half <= policy.precision:
        return Decision(True, f"stopped after {runs} runs: 95% interval {shown} <= {percent(policy.precision)}"
                        + noted, runs, n, half, left)
    if runs >= policy.max_runs:
        why = f"{shown} > {percent(policy.precision)}" if half is not None else \
            f"{n} counted run{'s' if n != 1 else ''}, no interval"
        return Decision(True, f"stopped at the maximum of {policy.max_runs} runs: {why}" + noted, runs, n, half, left)
    if runs >= MIN_RUNS and n == 0:
        return Decision(True, f"stopped after {runs} runs: none counted, no interval" + noted, runs, n, half, left)
    return Decision(False, f"{runs} runs: {shown}, going on", runs, n, half, left)


def _left_out_words(count: int, left_out: dict[str, int]) -> str:
    if count <= 0:
        return ""
    detail = ", ".join(f"{why} {k}" for why, k in sorted(left_out.items()))
    return f" ({count} not counted: {detail})" if detail else f" ({count} not counted)"


def until_precise(run_next: Callable[[int], R], sample: Callable[[R], tuple[float | None, str]],
                  policy: AutoRepeats) -> tuple[list[R], Decision]:
    """Call `run_next(repeat)` (repeat 0, 1, ...) until `decide` stops; `sample(result)` gives its headline
    value, or None and why it is not a sample. Returns every result and the decision."""
    results: list[R] = []
    values: list[float] = []
    left_out: Counter = Counter()
    while True:
        result = run_next(len(results))
        results.append(result)
        value, why = sample(result)
        if value is None:
            left_out[why or "not counted"] += 1
        else:
            values.append(value)
        decision = decide(values, len(results), policy, left_out)
        if decision.stop:
            return results, decision


# ---------------------------------------------------------------- a run's sample


def headline_metric(benchmark: str) -> tuple[str, bool]:
    """(metric name, higher is better) of the figure the repeats must make precise: the benchmark's
    declared figure of merit, else its listing headline. UserInputError when it declares neither."""
    from clusterbench.bench import registry

    for section, role in (("history", "merit"), ("listing", "headline")):
        found = registry.drawn(section, role, benchmark)
        if found:
            return found[0].spec.name, found[0].spec.higher_is_better
    raise UserInputError(f"{benchmark} declares no headline metric, which --repeats auto makes precise",
                         hint="give a number of repeats instead, e.g. --repeats 5")


def plainly_counted(run: dict) -> bool:
    """A run (status, valid, reason, facts) that analysis/flags.counts would count for sure: finished
    ok, valid, without any remark, and none of the facts that flag it. Stricter than flags.counts
    (a valid run with a remark is left out too), for the layers below analysis that cannot ask it."""
    facts = run.get("facts") or {}
    return (run.get("status") == "ok" and bool(run.get("valid")) and not run.get("reason")
            and not any(facts.get(key) for key in _NOT_COUNTED_FACTS))


def run_as_dict(result) -> dict:
    """An execution RunResult as the decoded run that flags.counts reads."""
    return {"status": result.status, "valid": result.valid, "reason": result.reason,
            "facts": getattr(result.outcome, "facts", None) or {}}


def why_not(run: dict) -> str:
    """A short word for a run that is not a sample: its status, or the fact that flags it."""
    facts = run.get("facts") or {}
    for key in ("disturbed", "suspect"):
        if facts.get(key):
            return key
    if run.get("status") not in ("ok", None):
        return str(run.get("status"))
    if not run.get("valid"):
        return "invalid"
    return "flagged"


def best_value(metrics: list, name: str, higher_is_better: bool) -> float | None:
    """The best valid finite value of `name` among a run's metrics (Metric objects or rows)."""
    values = []
    for m in metrics:
        get = (lambda k, m=m: m[k]) if hasattr(m, "keys") else (lambda k, m=m: getattr(m, k))
        if get("name") == name and get("valid"):
            try:
                value = float(get("value"))
            except (TypeError, ValueError):
                continue
            if math.isfinite(value):
                values.append(value)
    if not values:
        return None
    return max(values) if higher_is_better else min(values)


def sampler(benchmark: str, counts: Callable[[dict], bool] | None = None):
    """sample(result) for `until_precise`: the headline's best valid value of a counted run."""
    name, higher = headline_metric(benchmark)
    judge = counts or plainly_counted

    def sample(result) -> tuple[float | None, str]:
        run = run_as_dict(result)
        if not judge(run):
            return None, why_not(run)
        value = best_value(list(result.outcome.metrics), name, higher)
        return (value, "") if value is not None else (None, f"no valid {name}")

    return sample


def decoded_facts(text: str | None) -> dict:
    try:
        facts = json.loads(text or "{}")
    except ValueError:
        return {}
    return facts if isinstance(facts, dict) else {}
