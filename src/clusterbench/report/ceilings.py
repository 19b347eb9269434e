"""The report's "Against the node's ceilings" section: what each system's kernels measured (FMA peak,
DGEMM, STREAM Triad: analysis/ceilings.py), and the selection's best runs placed against them, each
with its bottleneck (the same words as `clusterbench explain RUN`).

Only the systems of the selected runs; at most MAX_PLACED runs are placed (the best counted run of each
benchmark and system first), so a report of 100,000 runs does not explain each one.
"""

from __future__ import annotations

from clusterbench.analysis import flags
from clusterbench.analysis.ceilings import ceilings, place
from clusterbench.analysis.dataset import Dataset
from clusterbench.bench import registry
from clusterbench.report.model import Section, Table
from clusterbench.store.db import Store

MAX_PLACED = 20


def section(data: Dataset, _options, store: Store | None = None) -> Section | None:
    if store is None:
        return None
    systems = {r.get("system_id") for r in data.runs.values() if r.get("system_id")}
    found = [c for system_id in sorted(systems) for c in ceilings(store, system_id)]
    if not found:
        return None
    out = Section("ceilings", "Against the node's ceilings", [
        "What each system's own kernels reached: the FMA peak of a core (clock), DGEMM per cores and BLAS, "
        "STREAM Triad per thread count; the best counted run of each (a disturbed, invalid or suspect run never "
        "sets a ceiling). Below, the selection's best runs placed against them: an Rmax against DGEMM on the "
        "same cores, the measured FMA peak and the nominal Rpeak, a Triad against the best Triad at its thread "
        "count, and the bottleneck with its evidence (docs/ceilings.md; `clusterbench explain RUN`)."])
    out.tables.append(Table("ceilings", "Ceilings per system", ["system", "ceiling", "value", "unit", "runs",
                                                                "best run", "newest (UTC)"],
                            [[c.system_id, c.label(), round(c.value, 3), c.unit, c.runs, [c.best_run],
                              c.newest[:19]] for c in found]))
    rows = []
    for run_id in _chosen(data):
        placed = place(store, run_id)
        if placed is None or placed.value is None or not placed.against:
            continue
        shares = {what.split(",")[0]: f"{fraction:.0%}" for what, _, _, fraction, _ in placed.against}
        rows.append([[run_id], placed.benchmark, placed.figure, round(placed.value, 3), placed.unit,
                     shares.get("DGEMM", ""), shares.get("FMA peak", ""), shares.get("nominal Rpeak", ""),
                     shares.get("STREAM Triad", ""), placed.bottleneck, "; ".join(placed.evidence)[:300]])
    if rows:
        out.tables.append(Table("ceilings-placed", "Runs against the ceilings",
                                ["runs", "benchmark", "figure", "value", "unit", "of DGEMM", "of FMA peak",
                                 "of nominal Rpeak", "of Triad", "bottleneck", "evidence"], rows,
                                note="The best counted run of each benchmark and system, then runs whose BLAS "
                                     "ran generic kernels, flagged runs, the others (at most "
                                     f"{MAX_PLACED}). 'of DGEMM' uses DGEMM on the run's cores, or a smaller "
                                     "count scaled by cores where that count was not measured."))
    return out


def _chosen(data: Dataset) -> list[str]:
    """The best counted run of each benchmark and system (by its largest placeable figure), then runs whose BLAS
    ran generic kernels, then flagged runs, then the others: at most MAX_PLACED."""
    best: dict[tuple, tuple[float, str]] = {}
    flagged = []
    names = {d.spec.name for section, role in (("peak", "rmax"), ("ceiling", "dgemm"), ("ceiling", "memory"))
             for d in registry.drawn(section, role)}
    values = data.of(*sorted(names))
    by_run = values.groupby("run_id")["value"].max().to_dict() if len(values) else {}
    for run_id, run in data.runs.items():
        if run_id not in by_run:
            continue
        if not flags.counts(run):
            flagged.append(run_id)
            continue
        key = (run.get("benchmark"), run.get("system_id"))
        if key not in best or by_run[run_id] > best[key][0]:
            best[key] = (by_run[run_id], run_id)
    first = [rid for _, rid in sorted(best.values(), key=lambda t: -t[0])]
    fallback = [rid for rid in by_run if rid not in first and rid not in flagged and _generic_blas(data.runs[rid])]
    rest = [rid for rid in by_run if rid not in first and rid not in flagged and rid not in fallback]
    return (first + fallback + flagged + rest)[:MAX_PLACED]


def _generic_blas(run: dict) -> bool:
    kernel = (run.get("facts") or {}).get("blas_kernel")
    return isinstance(kernel, dict) and kernel.get("verdict") == "fallback"
