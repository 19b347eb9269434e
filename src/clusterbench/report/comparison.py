"""The comparison section: one verdict over all matched pairs first (the geometric mean ratio with
its interval, the count of significant changes either way), then the pairs, with the statistics
that say whether a change is more than noise. The same lines head `clusterbench compare`."""

from __future__ import annotations

from collections import Counter

from clusterbench.analysis.baseline import left_out_text
from clusterbench.analysis.compare import BEST_VS_BEST, CONFIDENCE, MIN_REPEATS, Comparison, Row
from clusterbench.report.model import Section, Table

COLUMNS = ["metric", "labels", "configuration", "unit", "n baseline", "mean baseline", "std baseline", "n candidate",
           "mean candidate", "std candidate", "change %", "p-value", "verdict", "runs"]
MAX_METRIC_LINES = 12  # per-metric verdicts listed under the overall one


def _ratio(value: float | None) -> str:
    """'1.03x (+2.9%)'."""
    return "no ratio (no pair with positive means)" if value is None else f"{value:.3g}x ({100 * (value - 1):+.1f}%)"


def _interval(low: float | None, high: float | None) -> str:
    return f"{CONFIDENCE:.0%} interval {low:.3g}x to {high:.3g}x" if low is not None and high is not None else ""


def _metric_line(metric: str, unit: str, pairs: int, value, low, high) -> str:
    interval = f"; {_interval(low, high).split(' ', 2)[2]}" if low is not None and high is not None else ""
    return f"{metric} ({unit or 'no unit'}, {pairs} pair{'s' if pairs != 1 else ''}): {_ratio(value)}{interval}"


def verdict_lines(result: Comparison) -> list[str]:
    """The answer first, in short lines (each under 80 columns for a usual metric name)."""
    s = result.summary
    studied = ", ".join(result.under_study) or "nothing (the sides differ in no key as wholes)"
    if not result.paired:
        lines = [f"Best against best, matched on {', '.join(result.match_on or [])} only:",
                 "  not a paired comparison, no test, no overall verdict"]
        if len(s.per_metric) == 1:
            lines.append(f"  {_metric_line(*s.per_metric[0])}")
    else:
        interval = f"{_interval(s.low, s.high)}; " if s.low is not None else ""
        lines = [f"Verdict: {s.word}. Candidate/baseline {_ratio(s.ratio)}",
                 f"  {interval}geometric mean over {s.pairs} matched pair{'s' if s.pairs != 1 else ''}",
                 "  (time-like metrics inverted: above 1x is better)",
                 f"  significant changes: {s.better} better, {s.worse} worse; {s.not_significant} not significant",
                 f"  under study: {studied}; all other keys match per pair"]
        if s.untested:
            lines += [f"  {s.untested} pairs have under {MIN_REPEATS} values on a side ({s.single} a single value):",
                      "  no test for them, the paired geometric mean above is their answer"]
    if len(s.per_metric) > 1:
        for found in s.per_metric[:MAX_METRIC_LINES]:
            lines.append(f"  {_metric_line(*found)}")
        if len(s.per_metric) > MAX_METRIC_LINES:
            lines.append(f"  ... {len(s.per_metric) - MAX_METRIC_LINES} more metrics in the rows")
    for side, counts in result.left_out.items():
        if text := left_out_text(side, Counter(counts)):
            lines.append(f"  {text}")
    return lines


def rows_shown(rows: list[Row], every: bool, few: int = 10) -> tuple[list[Row], int]:
    """The rows worth a line: all of them when asked or when few; else those with enough repeats on
    both sides (the others are summarised: the paired geometric mean is their answer)."""
    if every or len(rows) <= few or any(r.verdict == BEST_VS_BEST for r in rows):
        return rows, 0
    tested = [r for r in rows if min(r.a["n"], r.b["n"]) >= MIN_REPEATS]
    return tested, len(rows) - len(tested)


def section(result: Comparison, baseline: str, candidate: str, test: str, alpha: float) -> Section:
    rows = result.rows
    table = Table("comparison", f"Baseline {baseline} against candidate {candidate}", COLUMNS, [
        [r.metric, r.labels, r.configuration, r.unit, r.a["n"], r.a["mean"], r.a["std"], r.b["n"], r.b["mean"],
         r.b["std"], r.change_pct, r.p_value, r.verdict, r.a_runs + r.b_runs] for r in rows])
    name = "Welch's t-test (unequal variances)" if test == "welch" else "Mann-Whitney U test"
    return Section("comparison", f"Comparison: {baseline} vs {candidate}", [
        *verdict_lines(result),
        f"Pairs are the same configuration on both sides but the keys under study. Means over valid "
        f"repeats; change = (candidate - baseline) / baseline. Two-sided {name}, significant below "
        f"p = {alpha:g}; better/worse follow each metric's direction. No verdict with fewer than "
        f"{MIN_REPEATS} valid repeats on a side. Flagged runs are on neither side."], [table])
