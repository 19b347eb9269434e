"""The comparison section: the Pi study's baseline-against-optimisation table, with the
statistics that say whether a change is more than noise."""

from __future__ import annotations

from clusterbench.analysis.compare import MIN_REPEATS, Row
from clusterbench.report.model import Section, Table

COLUMNS = ["metric", "labels", "unit", "n baseline", "mean baseline", "std baseline", "n candidate",
           "mean candidate", "std candidate", "change %", "p-value", "verdict", "runs"]


def section(rows: list[Row], baseline: str, candidate: str, test: str, alpha: float) -> Section:
    table = Table("comparison", f"Baseline {baseline} against candidate {candidate}", COLUMNS, [
        [r.metric, r.labels, r.unit, r.a["n"], r.a["mean"], r.a["std"], r.b["n"], r.b["mean"], r.b["std"],
         r.change_pct, r.p_value, r.verdict, r.a_runs + r.b_runs] for r in rows])
    name = "Welch's t-test (unequal variances)" if test == "welch" else "Mann-Whitney U test"
    return Section("comparison", f"Comparison: {baseline} vs {candidate}", [
        f"Means over valid repeats; change = (candidate - baseline) / baseline. Two-sided {name}, "
        f"significant below p = {alpha:g}; better/worse follow each metric's direction. "
        f"No verdict with fewer than {MIN_REPEATS} valid repeats on a side."], [table])
