"""Cluster section: one whole-cluster run (`clusterbench run -w NODESET`) per part, read back by
analysis/cluster.py: what the cluster as a whole reached, and which nodes and links hold it back.

For each cluster run in the selection:
- a summary: nodes, Rpeak (when the system says it), Rmax of the all-node HPL with its N, NB,
  P x Q and ranks, the efficiency, the slowest node and the slowest link and why, and the rule;
- heat maps of the node pairs: latency (0 B) and bandwidth (1 MiB) of the ping-pong, and iperf3's
  TCP rate when it ran; a symmetric N x N matrix, the diagonal empty, values written in the cells
  up to 16 nodes, flagged pairs outlined. The colour scale's bad end is the same dark red in every
  map (latency: high is red; bandwidth: low is red), and it reaches at least twice the rule's
  minimum deviation from the median, so a quiet cluster does not look alarming;
- one small bar chart per node measure (STREAM Triad, DGEMM, one-node HPL, FMA clock): the median
  as a line, the band the rule never flags shaded, flagged nodes' bars in vermillion;
- the node table (every figure with its unit, its links' medians, the flags and why, the runs)
  and the links table (every pair, flagged ones first);
- the verdicts table: each node's and failing link's verdict against golden values (analysis/golden.py:
  what the earlier healthy cluster runs of the same hardware in the selection measured), which
  catches a cluster whose nodes are all equally slow, where the peers' rule sees nothing.

The verdicts are worked out from the stored figures (analysis/outliers.py), never stored. Heat
maps and bars are Pictures (an SVG drawn here with the figures' style, and the CSV of what it
shows): the model's Figure is a line plot. Their sizes are bounded: beyond MAX_ANNOTATED nodes no
values in the cells, beyond MAX_TICKS node names every k-th name, beyond MAX_ALL_BARS nodes the
bars show the MAX_BARS worst only (the caption says so), and at most MAX_OUTLINES flagged pairs
are outlined; the images are rasters inside the SVG, so ten thousand pairs stay one image.
"""

from __future__ import annotations

import csv
import io
import math
import statistics

from clusterbench.analysis import cluster, golden
from clusterbench.analysis.cluster import (
    IPERF,
    PAIR_MEASURES,
    ClusterView,
    Flag,
    Measure,
    NodeRow,
    PairCell,
)
from clusterbench.analysis.dataset import Dataset
from clusterbench.report import csvsafe
from clusterbench.report.figures import _STYLE, csv_cell, svg_element
from clusterbench.report.looks import OKABE_ITO
from clusterbench.report.model import Picture, Section, Table

MAX_ANNOTATED = 16  # nodes: values written in the heat map's cells up to this many
MAX_TICKS = 64  # node names on a heat map's axis; beyond, every k-th name
MAX_ALL_BARS = 64  # nodes: every node's bar up to this many, else the MAX_BARS worst
MAX_BARS = 32
MAX_OUTLINES = 256  # flagged pairs outlined in a heat map
MAX_VERDICT_LINKS = 256  # links that are not a pass listed in the verdicts table
GOOD, BAD = OKABE_ITO[0], OKABE_ITO[3]  # blue bars; vermillion for flagged ones
OUTLINE = "#0072B2"  # flagged pairs' outline: blue on the yellow-to-red scale
MISSING = "#eeeeee"  # the diagonal and pairs without a figure


def metrics() -> set[str]:
    return cluster.metrics()


class MarkedTable(Table):
    """A table whose rows listed in `flagged` (indexes) stand out in the HTML (class "flagged")."""

    def __init__(self, *args, flagged: set[int] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.flagged = flagged or set()


def section(data: Dataset, options) -> Section | None:
    if not any(run["tags"].get(cluster.TAG_RUN) for run in data.runs.values()):
        return None
    views = [v for v in golden.judged_views(data) if v.nodes or v.pairs or v.hpl]
    if not views:
        return None
    out = Section("cluster", "Cluster", [
        "Each cluster run measured every node at once, one benchmark at a time (STREAM, DGEMM, HPL on one node, "
        "the FMA rate of one core), every pair of nodes (ping-pong latency at 0 B and bandwidth at 1 MiB, iperf3 "
        "when it ran) and HPL across all nodes. A node or link is flagged when it is out of line with its peers "
        "on the bad side: "
        f"{views[0].rule.describe()}. A node's links are also judged together (the median over the pairs it takes "
        "part in), which finds a bad cable or NIC on a small cluster where one node's links are most of all links. "
        "Flagged nodes' rows are marked in the node table; flagged pairs are outlined in the heat maps. "
        "Each node and link is also judged against golden values, the figures of earlier healthy cluster runs "
        "on the same hardware and configuration held by this report's selection (runs that count, not flagged "
        "in their own run): " + golden.describe() + ". A node fails when it is slow or its run failed; with "
        f"fewer than {golden.MIN_HEALTHY} healthy figures the verdict is 'cannot tell'."])
    for i, view in enumerate(views):
        prefix = f"cluster-{i + 1}" if len(views) > 1 else "cluster"
        title = f"Cluster run {view.run}: " if len(views) > 1 else ""
        _add_view(out, view, prefix, title)
    return out


def _add_view(out: Section, view: ClusterView, prefix: str, title: str) -> None:
    out.paragraphs.append(_verdict(view, title))
    out.tables.append(_summary(view, f"{prefix}-summary", title))
    if view.verdicts is not None and (view.verdicts.nodes or view.verdicts.links):
        out.tables.append(verdict_table(view, f"{prefix}-verdicts", f"{title}Verdicts against golden values"))
    nodes = _all_nodes(view)
    for m in (*PAIR_MEASURES, IPERF):
        if any(c.values.get(m.key) is not None for c in view.pairs):
            out.pictures.append(heat_map(f"{prefix}-{m.key}", f"{title}{_pair_title(m)}", nodes, view, m))
    for m in cluster.NODE_MEASURES:
        if any(r.values.get(m.key) is not None for r in view.rows):
            out.pictures.append(node_bars(f"{prefix}-{m.key}", f"{title}{m.label} per node", view, m))
    if view.rows:
        out.tables.append(node_table(view, f"{prefix}-nodes", f"{title}Nodes"))
    if view.pairs:
        out.tables.append(link_table(view, f"{prefix}-links", f"{title}Links (node pairs)"))


def _pair_title(m: Measure) -> str:
    better = "higher" if m.higher_is_better else "lower"
    return f"Link {m.label} per node pair ({m.unit}, {better} is better)"


def _all_nodes(view: ClusterView) -> list[str]:
    """The inventory's nodes, then any that only a pair names."""
    return list(dict.fromkeys([*view.nodes, *(n for c in view.pairs for n in (c.a, c.b))]))


def _verdict(view: ClusterView, title: str) -> str:
    flagged_nodes = [r.node for r in view.rows if r.flags]
    flagged_links = [f"{c.a}-{c.b}" for c in view.pairs if c.flags]
    head = f"{title or 'Cluster run ' + view.run + ': '}{len(view.nodes)} nodes, {len(view.pairs)} links measured. "
    if not flagged_nodes and not flagged_links:
        return head + "No node and no link is out of line with its peers."
    parts = []
    if flagged_nodes:
        parts.append(f"{len(flagged_nodes)} of {len(view.rows)} nodes out of line ({_some(flagged_nodes)})")
    if flagged_links:
        parts.append(f"{len(flagged_links)} of {len(view.pairs)} links out of line ({_some(flagged_links)})")
    return head + "; ".join(parts) + "."


def _some(names: list[str], limit: int = 8) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _summary(view: ClusterView, slug: str, title: str) -> Table:
    hpl = view.hpl or {}
    grid = f"{hpl['p']} x {hpl['q']}" if hpl.get("p") and hpl.get("q") else None
    slowest_node, slowest_link = view.slowest_node(), view.slowest_link()
    efficiency = view.efficiency
    rows = [
        ["cluster run", view.run, []],
        ["started (UTC)", (view.started_at or "")[:19] or None, []],
        ["nodes", len(view.nodes), []],
        ["Rpeak (Gflop/s)", view.rpeak_gflops, []],
        ["Rmax, HPL on all nodes (Gflop/s)", hpl.get("gflops"), [hpl["run"]] if hpl.get("run") else []],
        ["HPL N", hpl.get("n"), []],
        ["HPL NB", hpl.get("nb"), []],
        ["HPL P x Q", grid, []],
        ["HPL ranks (nodes)", f"{hpl.get('ranks')} ({hpl.get('nodes')})" if hpl else None, []],
        ["efficiency (% of Rpeak)", 100 * efficiency if efficiency is not None else None, []],
        ["nodes flagged", sum(1 for r in view.rows if r.flags), []],
        ["links flagged", sum(1 for c in view.pairs if c.flags), []],
        ["slowest node", f"{slowest_node[0]}: {slowest_node[1]}" if slowest_node else None,
         _runs_of(view.rows, slowest_node)],
        ["slowest link", f"{slowest_link[0]}: {slowest_link[1]}" if slowest_link else None,
         _runs_of(view.pairs, slowest_link)],
        ["rule", view.rule.describe(), []],
    ]
    return Table(slug, f"{title}Summary", ["", "value", "runs"], rows,
                 note="Rpeak: the stored system's per-node peak times the nodes ('-': the system does not say). "
                      "Slowest: the node (link) furthest out on the bad side, flagged or not.")


def _runs_of(items: list[NodeRow] | list[PairCell], named: tuple[str, str] | None) -> list[str]:
    if not named:
        return []
    for item in items:
        subject = item.node if isinstance(item, NodeRow) else f"{item.a}-{item.b}"
        if subject == named[0]:
            return sorted(set(item.runs.values()))
    return []


def _link_medians(view: ClusterView, m: Measure) -> dict[str, float]:
    """node -> the median of its links' values (what the per-node link flag judges)."""
    per_node: dict[str, list[float]] = {}
    for c in view.pairs:
        v = c.values.get(m.key)
        if v is not None:
            per_node.setdefault(c.a, []).append(v)
            per_node.setdefault(c.b, []).append(v)
    return {n: statistics.median(vs) for n, vs in per_node.items()}


def _why(flags: list[Flag]) -> str:
    return "; ".join(f.why for f in flags)


def node_table(view: ClusterView, slug: str, title: str) -> MarkedTable:
    links = [m for m in (*PAIR_MEASURES, IPERF) if any(c.values.get(m.key) is not None for c in view.pairs)]
    medians = {m.key: _link_medians(view, m) for m in links}
    columns = ["node", *[f"{m.label} ({m.unit})" for m in cluster.NODE_MEASURES],
               *[f"links' {m.label}, median ({m.unit})" for m in links], "flags", "runs"]
    rows, flagged = [], set()
    for i, row in enumerate(view.rows):
        if row.flags:
            flagged.add(i)
        rows.append([row.node, *[row.values.get(m.key) for m in cluster.NODE_MEASURES],
                     *[medians[m.key].get(row.node) for m in links], _why(row.flags),
                     list(dict.fromkeys(row.runs[m.key] for m in cluster.NODE_MEASURES if m.key in row.runs))])
    return MarkedTable(slug, f"{title} ({len(flagged)} of {len(rows)} flagged)", columns, rows,
                       note="One row per node, in the run's inventory order; each figure is the best valid value of "
                            "the node's own run. flags: which figures are out of line with the other nodes and how "
                            "far, including the node's links taken together. The runs are the node's own runs; a "
                            "link's runs are in the links table.", flagged=flagged)


def link_table(view: ClusterView, slug: str, title: str) -> MarkedTable:
    measures = [m for m in (*PAIR_MEASURES, IPERF) if any(c.values.get(m.key) is not None for c in view.pairs)]
    order = {n: i for i, n in enumerate(_all_nodes(view))}
    cells = sorted(view.pairs, key=lambda c: (not c.flags, order.get(c.a, 0), order.get(c.b, 0)))
    rows = [[c.a, c.b, *[c.values.get(m.key) for m in measures], _why(c.flags),
             list(dict.fromkeys(c.runs[m.key] for m in measures if m.key in c.runs))] for c in cells]
    flagged = {i for i, c in enumerate(cells) if c.flags}
    return MarkedTable(slug, f"{title} ({len(flagged)} of {len(rows)} flagged)",
                       ["node", "node", *[f"{m.label} ({m.unit})" for m in measures], "flags", "runs"], rows,
                       note="One row per measured pair, flagged ones first. Each pair is compared with all pairs.",
                       flagged=flagged)


def verdict_table(view: ClusterView, slug: str, title: str) -> MarkedTable:
    """One row per node (then per link that is not a pass): its verdict, the measure that sets it, its
    value, the expected value and tolerance, and where the golden value comes from."""
    judged = view.verdicts
    links = [v for v in judged.links if v.state != golden.PASS][:MAX_VERDICT_LINKS]
    rows, flagged = [], set()
    for i, subject in enumerate([*judged.nodes, *links]):
        worst = subject.worst()
        exp = worst.expected if worst else None
        if subject.fails:
            flagged.add(i)
        rows.append([subject.subject, subject.state, worst.label if worst else None,
                     worst.value if worst else None, exp.value if exp else None,
                     None if not worst or worst.worse_by is None else 100 * worst.worse_by,
                     100 * exp.tolerance if exp else None, worst.unit if worst else None,
                     subject.summary(), exp.source() if exp else None, worst.evidence if worst else None])
    failing = len(judged.failing_nodes())
    return MarkedTable(slug, f"{title} ({failing} of {len(judged.nodes)} nodes fail)",
                       ["node or link", "verdict", "worst measure", "value", "expected", "worse by (%)",
                        "tolerance (%)", "unit", "why", "golden value from", "evidence"], rows,
                       note=f"Golden values from {judged.source}. A node's verdict is the worst of its measures "
                            "that could be judged (failed, slow, pass); 'cannot tell' when none could. Links are "
                            f"listed when not a pass (at most {MAX_VERDICT_LINKS}). A disturbed run is judged, its "
                            "evidence shown; it never sets a golden value.", flagged=flagged)


# ---------------------------------------------------------------- drawing


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return matplotlib, plt


def _number(value: float) -> str:
    """A cell's value in few characters: 1.23, 45.6, 11234."""
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _scale_limits(values: list[float], m: Measure, min_deviation: float) -> tuple[float, float]:
    """(vmin, vmax) of the colour scale: from the best value to the worst, but reaching at least
    2 x the rule's minimum deviation from the median on the bad side (a quiet cluster stays pale)."""
    median = statistics.median(values)
    if m.higher_is_better:
        low, high = min(min(values), median * (1 - 2 * min_deviation)), max(values)
    else:
        low, high = min(values), max(max(values), median * (1 + 2 * min_deviation))
    if high <= low:
        high = low + (abs(low) or 1.0)
    return max(0.0, low), high


def heat_map(slug: str, title: str, nodes: list[str], view: ClusterView, m: Measure) -> Picture:
    """A symmetric N x N map of one pair measure; the diagonal empty, flagged pairs outlined."""
    import numpy as np

    matplotlib, plt = _pyplot()
    from matplotlib.patches import Rectangle

    n = len(nodes)
    index = {name: i for i, name in enumerate(nodes)}
    matrix = np.full((n, n), np.nan)
    flagged: list[tuple[int, int]] = []
    for c in view.pairs:
        v = c.values.get(m.key)
        if v is None:
            continue
        i, j = index[c.a], index[c.b]
        matrix[i, j] = matrix[j, i] = v
        if any(f.measure == m.key for f in c.flags):
            flagged.append((i, j))
    values = [float(v) for v in matrix[~np.isnan(matrix)]]
    vmin, vmax = _scale_limits(values, m, view.rule.min_deviation)
    cmap = matplotlib.colormaps["YlOrRd" if not m.higher_is_better else "YlOrRd_r"].with_extremes(bad=MISSING)
    side = min(7.5, max(3.2, 0.42 * n))
    with matplotlib.rc_context(_STYLE | {"svg.hashsalt": slug}):
        figure, ax = plt.subplots(figsize=(side + 1.6, side + 0.9), layout="constrained")
        image = ax.imshow(np.ma.masked_invalid(matrix), cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest",
                          aspect="equal")
        step = max(1, math.ceil(n / MAX_TICKS))
        ticks = list(range(0, n, step))
        size = 8 if n <= 16 else 6 if n <= 32 else 4.5
        ax.set_xticks(ticks, [nodes[t] for t in ticks], rotation=90, fontsize=size)
        ax.set_yticks(ticks, [nodes[t] for t in ticks], fontsize=size)
        ax.tick_params(length=2)
        for spine in ax.spines.values():
            spine.set_visible(False)
        if n <= MAX_ANNOTATED:
            font = 7.5 if n <= 8 else 6
            for i in range(n):
                for j in range(n):
                    if not np.isnan(matrix[i, j]):
                        shade = cmap(image.norm(matrix[i, j]))
                        dark = 0.299 * shade[0] + 0.587 * shade[1] + 0.114 * shade[2] < 0.55
                        ax.text(j, i, _number(matrix[i, j]), ha="center", va="center", fontsize=font,
                                color="white" if dark else "#222222")
        width = 2.2 if n <= 16 else 1.2 if n <= 64 else 0.6
        for i, j in flagged[:MAX_OUTLINES // 2]:
            for r, c in ((i, j), (j, i)):
                ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor=OUTLINE, linewidth=width))
        bar = figure.colorbar(image, ax=ax, shrink=0.8, pad=0.02)
        bar.set_label(f"{m.label} ({m.unit}), {'higher' if m.higher_is_better else 'lower'} is better", fontsize=8)
        bar.ax.tick_params(labelsize=7)
        ax.set_title(title, fontsize=9)
        svg = svg_element(figure)
    worst = "low" if m.higher_is_better else "high"
    caption = (f"{len(values) // 2} pairs of {n} nodes; dark red is {worst} {m.label} (the bad end, as in every map "
               "here); grey: the diagonal and pairs not measured. ")
    caption += (f"Outlined in blue: the {len(flagged)} pair(s) out of line among all pairs." if flagged else
                "No pair is out of line among all pairs (one would be outlined in blue); a node whose links are "
                "slow together is flagged in the node table.")
    if len(flagged) > MAX_OUTLINES // 2:
        caption += f" Only the first {MAX_OUTLINES // 2} are outlined; the links table lists them all."
    if n > MAX_ANNOTATED:
        caption += f" Values are in the links table and the CSV (more than {MAX_ANNOTATED} nodes: none in the cells)."
    if step > 1:
        caption += f" One node in {step} is named on the axes."
    return Picture(slug, title, svg, caption, _pairs_csv(view, m))


def _pairs_csv(view: ClusterView, m: Measure) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["node_a", "node_b", "measure", "unit", "value", "flagged", "why", "run_ids"])
    for c in view.pairs:
        v = c.values.get(m.key)
        if v is None:
            continue
        mine = [f for f in c.flags if f.measure == m.key]
        w.writerow([csvsafe.cell(c.a), csvsafe.cell(c.b), m.key, m.unit, csv_cell(v), str(bool(mine)),
                    csvsafe.cell(_why(mine)), csvsafe.cell(c.runs.get(m.key, ""))])
    return buf.getvalue()


def node_bars(slug: str, title: str, view: ClusterView, m: Measure) -> Picture:
    """One bar per node (the worst MAX_BARS beyond MAX_ALL_BARS nodes), the median as a line."""
    matplotlib, plt = _pyplot()
    from matplotlib.patches import Patch

    rows = [r for r in view.rows if r.values.get(m.key) is not None]
    median = statistics.median(r.values[m.key] for r in rows)
    shown = rows
    cut = len(rows) > MAX_ALL_BARS
    if cut:  # the worst first: lowest for higher-is-better
        shown = sorted(rows, key=lambda r: r.values[m.key] if m.higher_is_better else -r.values[m.key])[:MAX_BARS]
    flagged = {r.node for r in rows if any(f.measure == m.key for f in r.flags)}
    n = len(shown)
    with matplotlib.rc_context(_STYLE | {"svg.hashsalt": slug}):
        figure, ax = plt.subplots(figsize=(min(9.0, max(3.8, 0.3 * n + 1.6)), 2.9), layout="constrained")
        low, high = median * (1 - view.rule.min_deviation), median * (1 + view.rule.min_deviation)
        ax.axhspan(low, high, color="#e8e8e8", zorder=0)
        ax.bar(range(n), [r.values[m.key] for r in shown], color=[BAD if r.node in flagged else GOOD for r in shown],
               width=0.7, zorder=2)
        ax.axhline(median, color="#222222", linestyle="--", linewidth=1.1, zorder=3)
        names = [r.node for r in shown]
        long = n > 6 or max(len(x) for x in names) > 8
        ax.set_xticks(range(n), names, rotation=90 if long else 0, fontsize=7 if n <= 32 else 5)
        ax.set_xlim(-0.6, n - 0.4)
        ax.set_ylim(bottom=0)
        ax.set_ylabel(f"{m.label} ({m.unit})", fontsize=8)
        ax.set_title(f"{title} (the {MAX_BARS} worst of {len(rows)})" if cut else title, fontsize=9)
        ax.grid(True, axis="y", color="#dddddd", linewidth=0.6, zorder=1)
        handles = [matplotlib.lines.Line2D([], [], color="#222222", linestyle="--", label=f"median {_number(median)}"),
                   Patch(color="#e8e8e8", label=f"within {100 * view.rule.min_deviation:.0f}% of it"),
                   Patch(color=GOOD, label="in line"), Patch(color=BAD, label="flagged")]
        figure.legend(handles=handles, loc="outside lower center", ncol=4, frameon=False, fontsize=7)
        svg = svg_element(figure)
    better = "higher" if m.higher_is_better else "lower"
    caption = (f"{m.label} of each node ({better} is better), the dashed line the median over all {len(rows)} nodes; "
               f"vermillion bars: flagged on this figure ({len(flagged)}).")
    if cut:
        caption += f" The {MAX_BARS} worst of {len(rows)} nodes, worst first; every node is in the node table and CSV."
    if len(rows) < len(view.rows):
        caption += f" {len(view.rows) - len(rows)} node(s) without a valid figure are left out."
    return Picture(slug, title, svg, caption, _bars_csv(rows, m, median))


def _bars_csv(rows: list[NodeRow], m: Measure, median: float) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["node", "measure", "unit", "value", "median", "flagged", "why", "run_ids"])
    for r in rows:
        mine = [f for f in r.flags if f.measure == m.key]
        w.writerow([csvsafe.cell(r.node), m.key, m.unit, csv_cell(r.values[m.key]), csv_cell(float(median)),
                    str(bool(mine)), csvsafe.cell(_why(mine)), csvsafe.cell(r.runs.get(m.key, ""))])
    return buf.getvalue()
