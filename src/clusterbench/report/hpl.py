"""HPL section: Rmax against NB per BLAS x topology, Rmax against node count under Rpeak,
the best configuration per node count, and the invalid runs kept apart.

Every HPL figure comes from the `hpl_gflops` metric, whether a standalone xhpl, HPCC's HPL
phase or an imported output wrote it; the N, NB, P and Q are the ones the output states. Which
metric that is, and which benchmarks store it, is their declaration (bench/declare.py): the
metrics with an `hpl` use in the role `rmax`.
"""

from __future__ import annotations

from clusterbench.analysis.dataset import Dataset, blas_of, group_values
from clusterbench.analysis.stats import describe as stats_of
from clusterbench.bench import registry
from clusterbench.report.figures import aggregate
from clusterbench.report.model import Figure, Options, Point, Section, Series, Table
from clusterbench.report.system import node_peak, run_node_peak


def rmax() -> tuple[list[str], list[str]]:
    """The Rmax metrics (Gflop/s) and the benchmarks that store them, as declared."""
    drawn = registry.drawn("hpl", "rmax")
    return list(dict.fromkeys(d.spec.name for d in drawn)), list(dict.fromkeys(d.benchmark for d in drawn))


def metrics() -> set[str]:
    return set(rmax()[0])


def topology(run: dict, labels: dict) -> str:
    """'1x2 mpi': the process grid, and the layout when the campaign named one."""
    grid = f"{labels.get('p', run['params'].get('p', '?'))}x{labels.get('q', run['params'].get('q', '?'))}"
    layout = run["params"].get("layout")
    return f"{grid} {layout}" if layout else grid


def variant(run: dict) -> str:
    return f"{run['benchmark']}, {blas_of(run)}"


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

    def config(rec) -> tuple:
        run = data.runs[rec.run_id]
        return (variant(run), topology(run, rec.labels), rec.nodes, rec.labels.get("n"), rec.labels.get("nb"))

    groups = group_values(valid, config)
    table = Table("hpl-configurations", "Rmax per configuration (valid runs, Gflop/s)",
                  ["variant", "topology", "nodes", "N", "NB", "n", "mean", "std", "min", "max", "runs"], [])
    for (var, topo, nodes, n, nb), (values, ids) in sorted(groups.items(), key=lambda kv: str(kv[0])):
        s = stats_of(values)
        table.rows.append([var, topo, nodes, n, nb, s["n"], s["mean"], s["std"], s["min"], s["max"], ids])

    nb_samples = [(f"{var}, {topo}" + (f", {nodes} nodes" if nodes != 1 else "") + f", N={n}", nb, v, rid)
                  for (var, topo, nodes, n, nb), (values, ids) in groups.items() if nb is not None
                  for v, rid in zip(values, ids, strict=True)]
    if len({s[1] for s in nb_samples}) > 1:
        out.figures.append(Figure(
            "hpl-rmax-vs-nb", "HPL Rmax against block size NB", "block size NB", "Rmax (Gflop/s)",
            aggregate(nb_samples), x_integer=True,
            caption="Mean over valid repeats; bars span the minimum and maximum."))

    best_table, best_points = _best_per_node_count(data, valid, options)
    if best_points and (peak or len(best_points) > 1):  # one point and no peak is not a figure
        series = [Series("best valid Rmax", best_points)]
        if peak:
            counts = sorted({p.x for p in best_points} | {1})
            series.append(Series("Rpeak", [Point(c, peak.node_gflops * c) for c in counts], reference=True))
            series.append(Series(f"{options.rpeak_fraction:.0%} of Rpeak",
                                 [Point(c, options.rpeak_fraction * peak.node_gflops * c) for c in counts],
                                 reference=True))
        out.figures.append(Figure("hpl-rmax-vs-nodes", "HPL Rmax against node count", "nodes",
                                  "Rmax (Gflop/s)", series, x_integer=True,
                                  caption="Best valid run per node count; the lines are Rpeak and a fraction of it."))
    if best_table.rows:
        out.tables.append(best_table)
    out.tables.append(table)
    bad = [r for r in hpl_runs if r["status"] != "ok"]
    bad_ids = set(rows.loc[~rows["valid"], "run_id"]) - {r["id"] for r in bad}
    bad += [data.runs[i] for i in sorted(bad_ids)]
    if bad:
        out.tables.append(Table("hpl-invalid", "Invalid, failed or unfinished HPL runs (never counted above)",
                                ["runs", "benchmark", "status", "reason"],
                                [[[r["id"]], r["benchmark"], r["status"], r["reason"]] for r in bad]))
    return out


def _best_per_node_count(data: Dataset, valid, options: Options) -> tuple[Table, list[Point]]:
    """% of Rpeak uses the peak of the run's own system; an imported run's machine is unknown."""
    table = Table("hpl-best", "Best configuration per node count",
                  ["nodes", "N", "NB", "P x Q", "variant", "Rmax (Gflop/s)", "% of Rpeak", "runs"], [])
    points = []
    for nodes in sorted(valid["nodes"].unique()):
        at = valid[valid["nodes"] == nodes]
        best = at.loc[at["value"].idxmax()]
        run, labels = data.runs[best["run_id"]], best["labels"]
        node = run_node_peak(data, options, run)
        pct = 100 * best["value"] / (node * nodes) if node else None
        table.rows.append([int(nodes), labels.get("n"), labels.get("nb"), topology(run, labels),
                           variant(run), float(best["value"]), pct, [best["run_id"]]])
        points.append(Point(float(nodes), float(best["value"]), runs=[best["run_id"]]))
    return table, points
