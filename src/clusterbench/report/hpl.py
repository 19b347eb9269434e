"""HPL section: Rmax against NB per BLAS, Rmax against node count per BLAS under Rpeak, the best
configuration per node count and BLAS, a baseline-against-optimisation table, and the invalid
runs kept apart.

Every HPL figure comes from the `hpl_gflops` metric, whether a standalone xhpl, HPCC's HPL
phase or an imported output wrote it; the N, NB, P and Q are the ones the output states. Which
metric that is, and which benchmarks store it, is their declaration (bench/declare.py): the
metrics with an `hpl` use in the role `rmax`.

The figures are shaped by what varies (analysis/shape.py), the studies' way: each point is the
best valid Rmax over the process grids, the T/V variants, N and repeats that share its NB (or
node count), and the CSV beside the figure carries the winner's grid, variant and N. Lines are
the BLAS (and whatever else tells configurations apart: a tuning, a tag); panels the node count
and the ranks or threads when they vary. An invalid value is never drawn, averaged or best.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from clusterbench.analysis import shape
from clusterbench.analysis.dataset import Dataset
from clusterbench.bench import registry
from clusterbench.report import baselines
from clusterbench.report.figures import axis_label, shaped_figure
from clusterbench.report.model import Options, Point, Section, Series, Table
from clusterbench.report.system import node_peak, run_node_peak

NUISANCE = ("grid", "p", "q", "tv", "n", "grids")  # what the studies take the best over
# Lines: the BLAS, a tuning, then the machine before how its nodes were linked: a machine's scaling
# curve is one line even though its one-node point ran over shared memory and the others over a fabric.
SERIES = tuple(dict.fromkeys(("blas", "tuning", "system", *shape.DEFAULT_SERIES)))
BY_NB = shape.Family(x=("nb",), series=SERIES, nuisance=NUISANCE, combine=shape.BEST, always=("blas",))
BY_NODES = shape.Family(x=("nodes",), series=SERIES, nuisance=NUISANCE, combine=shape.BEST, facets=False,
                        always=("blas",))
Y_LABEL = "Rmax (Gflop/s)"


def rmax() -> tuple[list[str], list[str]]:
    """The Rmax metrics (Gflop/s) and the benchmarks that store them, as declared."""
    drawn = registry.drawn("hpl", "rmax")
    return list(dict.fromkeys(d.spec.name for d in drawn)), list(dict.fromkeys(d.benchmark for d in drawn))


def metrics() -> set[str]:
    return set(rmax()[0])


def label_keys() -> tuple[str, ...]:
    """The labels that say what an Rmax value solved (T/V, N, NB, P, Q), as declared."""
    return tuple(dict.fromkeys(k for d in registry.drawn("hpl", "rmax") for k in d.spec.labels))


def section(data: Dataset, options: Options) -> Section | None:
    names, benchmarks = rmax()
    rows = data.of(*names, valid=None)
    hpl_runs = data.runs_of(*benchmarks)
    if rows.empty and not hpl_runs:
        return None
    valid = rows[rows["valid"].astype(bool)]  # an empty object column would select columns, not rows
    peak = node_peak(data, options)
    out = Section("hpl", "HPL", [])
    if peak:
        out.paragraphs.append(f"Rpeak per node: {peak.node_gflops:.2f} Gflop/s ({peak.derivation}).")
    else:
        out.paragraphs.append("Rpeak unknown (imported runs only): give --rpeak-node to draw it.")
    values = shape.frame(data, valid, label_keys=label_keys())
    if len(values):
        _figures(values, data, options, peak, out)
    out.tables.append(_configurations(values))
    bad = [r for r in hpl_runs if r["status"] != "ok"]
    bad_ids = set(rows.loc[~rows["valid"].astype(bool), "run_id"]) - {r["id"] for r in bad}
    bad += [data.runs[i] for i in sorted(bad_ids)]
    if bad:
        out.tables.append(Table("hpl-invalid", "Invalid, failed or unfinished HPL runs (never counted above)",
                                ["runs", "benchmark", "status", "reason"],
                                [[[r["id"]], r["benchmark"], r["status"], r["reason"]] for r in bad]))
    return out


def _figures(values: pd.DataFrame, data: Dataset, options: Options, peak, out: Section) -> None:
    choice = options.choice_for(rmax()[0])
    drawn: list[tuple] = []
    by_nodes = None
    for slug, family in (("hpl-rmax-vs-nb", BY_NB), ("hpl-rmax-vs-nodes", BY_NODES)):
        found = shape.infer(values, family, choice)
        if family is BY_NODES:
            by_nodes = found
        same = (found.x, found.series, found.facets, found.combine)
        if found.x is None or same in drawn or not (choice or found.x_varies or (found.x == "nodes" and peak)):
            continue  # one NB is no curve; one node count is a point only under a known peak
        drawn.append(same)
        drawing = shape.draw(values, found, default_label="Rmax")
        references = _peak_lines(drawing, peak, options) if found.x == "nodes" and peak else []
        what = "block size NB" if found.x == "nb" else "node count" if found.x == "nodes" else shape.name(found.x)
        title = choice.title if choice and choice.title else f"HPL Rmax against {what}"
        extra = "The lines are Rpeak and a fraction of it." if references else ""
        figure, table = shaped_figure(slug, title, axis_label(found.x), Y_LABEL, drawing, references, extra,
                                      x_integer=True)
        out.figures += [figure] if figure else []
        out.tables += [table] if table else []
    if by_nodes is not None and by_nodes.x is not None:
        best = replace(by_nodes, x="nodes", facets=[], combine=shape.BEST)
        out.tables.append(_best_table(values, best, data, options))
        out.tables += baselines.tables(values, best)


def _peak_lines(drawing: shape.Drawing, peak, options: Options) -> list[Series]:
    counts = sorted({p.x for panel in drawing.panels for s in panel.series for p in s.points} | {1.0})
    return [Series("Rpeak", [Point(c, peak.node_gflops * c) for c in counts], reference=True),
            Series(f"{options.rpeak_fraction:.0%} of Rpeak",
                   [Point(c, options.rpeak_fraction * peak.node_gflops * c) for c in counts], reference=True)]


def _label(rec: dict, keys: list[str]) -> str:
    return shape.series_label(keys, tuple(rec.get(k) for k in keys)) if keys else ""


def _best_table(values: pd.DataFrame, best: shape.Shape, data: Dataset, options: Options) -> Table:
    """One row per node count and BLAS (and whatever else the lines are): the winning run.
    % of Rpeak uses the peak of the run's own system; an imported run's machine is unknown."""
    table = Table("hpl-best", "Best configuration per node count and BLAS",
                  ["nodes", "N", "NB", "P x Q", "variant", "Rmax (Gflop/s)", "% of Rpeak", "T/V", "runs"], [])
    winners = shape.aggregate(values, best).to_dict("records")
    for rec in sorted(winners, key=lambda r: (r["nodes"], _label(r, best.series))):
        nodes, run_id = int(rec["nodes"]), rec[shape.RUN]
        node = run_node_peak(data, options, data.runs[run_id])
        label = _label(rec, [k for k in best.series if k != "benchmark"])
        table.rows.append([nodes, shape.plain(rec.get("n")), shape.plain(rec.get("nb")), rec.get("grid"),
                           f"{rec['benchmark']}, {label}" if label else rec["benchmark"], float(rec[shape.VALUE]),
                           100 * rec[shape.VALUE] / (node * nodes) if node else None, rec.get("tv"), [run_id]])
    return table


def _configurations(values: pd.DataFrame) -> Table:
    """n, mean, std, min and max of every configuration (variant, topology, nodes, N, NB) over
    its valid repeats: grouped at once, whatever the number of runs."""
    table = Table("hpl-configurations", "Rmax per configuration (valid runs, Gflop/s)",
                  ["variant", "topology", "nodes", "N", "NB", "n", "mean", "std", "min", "max", "runs"], [])
    if not len(values):
        return table
    blas = values["blas"].fillna("default") if "blas" in values else pd.Series("default", index=values.index)
    grid = values["grid"].fillna("?x?") if "grid" in values else pd.Series("?x?", index=values.index)
    layout = values["layout"] if "layout" in values else pd.Series(None, index=values.index, dtype=object)
    keys = pd.DataFrame({
        "variant": values["benchmark"].astype(str) + ", " + blas.astype(str),
        "topology": grid.where(layout.isna(), grid + " " + layout.astype(str)),
        "nodes": values["nodes"], "N": values.get("n"), "NB": values.get("nb")})
    keys = keys.assign(value=values[shape.VALUE], run=values[shape.RUN])
    grouped = keys.groupby(["variant", "topology", "nodes", "N", "NB"], dropna=False, sort=True)
    stats = grouped.agg(count=("value", "count"), mean=("value", "mean"), std=("value", "std"),
                        low=("value", "min"), high=("value", "max"), runs=("run", list))
    for group, rec in zip(stats.index, stats.itertuples(index=False), strict=True):
        table.rows.append([*(shape.plain(v) for v in group), int(rec.count), float(rec.mean),
                           None if pd.isna(rec.std) else float(rec.std), float(rec.low), float(rec.high), rec.runs])
    return table
