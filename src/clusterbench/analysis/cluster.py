"""A whole-cluster run read back from the store: every node's figures, every pair's link, the HPL
across all nodes, and the nodes and links that hold the cluster back.

`clusterbench run -w NODESET` (suite/cluster.py) stores each of its runs with tags that say what
part of the cluster run it was (suite/cluster_tags.py).
The verdicts are not stored: they are worked out here from the stored figures with the rule of
analysis/outliers.py, so a report made later with other thresholds says the same as the run did
with the same thresholds, and nothing stored can disagree with its figures.

Node flags come from comparing nodes on each per-node figure. Link flags come from two angles:
each pair among all pairs, and each node's links together (the median over the pairs it takes
part in). The second finds a bad cable on a small cluster, where one node's links are most of all
links (3 nodes: 2 of 3 pairs) and the pair-level median is itself a slow link.

The peers cannot see a cluster whose nodes are all equally slow: each view also carries every
node's and link's verdict against golden values, what earlier healthy cluster runs measured on the
same hardware (analysis/golden.py; `verdicts`).
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from dataclasses import dataclass, field

from clusterbench.analysis.cluster_tags import PHASES, TAG_NODE, TAG_PAIR, TAG_PHASE, TAG_RUN
from clusterbench.analysis.dataset import Dataset, load
from clusterbench.analysis.golden_verdicts import Judgement
from clusterbench.analysis.outliers import Placement, Rule, place
from clusterbench.analysis.select import Selection, parse_term
from clusterbench.bench import registry
from clusterbench.bench.registry import Drawn
from clusterbench.store.db import Store


@dataclass(frozen=True)
class Measure:
    """One figure compared across nodes or pairs: which benchmark's metric, how it is shown."""

    key: str
    label: str
    benchmark: str
    metric: str
    unit: str  # as shown (after `scale`)
    higher_is_better: bool
    scale: float = 1.0  # stored value x scale = shown value
    labels: tuple[tuple[str, object], ...] = ()  # the metric's labels that must match (a message size)
    min_spread: float = 0.0  # the least MAD (fraction of the median) this figure's noise allows
    sustained: bool = False  # the rate over all repetitions (min time / avg time of the best), not the best one

    def rule(self, rule: Rule) -> Rule:
        """`rule` with this figure's own noise floor when it is higher."""
        return dataclasses.replace(rule, min_spread=max(rule.min_spread, self.min_spread))


# The per-node figures are what the benchmarks declare (bench/declare.py): every metric with a `cluster`
# use in the `node` role, in the uses' order (STREAM Triad, DGEMM, HPL on one node, the FMA rate), its
# key, label and shown unit the use's. STREAM's Triad is sustained over its repetitions, as the FMA rate
# (clock_gflops_mean) is: nodes that share something (a virtual cluster's memory bus) do not start and
# end at the same instant, and the best repetition of the one that ran last was made alone. The FMA rate
# is the mean over the kernel's slices, not its best slice: a core shared with a stray process (a
# leftover of an earlier job) is as much a fault as a throttled one, and only the mean feels it.
NODE = ("cluster", "node")
# The figure of the run across all nodes: the declared `cluster` use in the `all-nodes` role.
ALL_NODES = ("cluster", "all-nodes")


def measure(d: Drawn) -> Measure:
    """A declared use as the figure this module compares: the use's key (else the metric's name), its
    title as the label, its unit (else the metric's), the factor its unit conversion multiplies by."""
    return Measure(d.use.key or d.spec.name, d.use.title or d.spec.name, d.benchmark, d.spec.name,
                   d.use.unit or d.spec.unit, d.spec.higher_is_better, d.spec.shown(d.use)(1.0), d.use.where,
                   sustained=d.use.sustained)


def node_measures() -> tuple[Measure, ...]:
    """The per-node figures, each key once (HPCC declares HPL's lines too: the first, HPL's own, counts)."""
    found: dict[str, Measure] = {}
    for d in registry.drawn(*NODE):
        m = measure(d)
        found.setdefault(m.key, m)
    return tuple(found.values())


def all_node_metrics() -> list[str]:
    """The metrics the all-node run's figure is read from (HPL's Gflop/s)."""
    return list(dict.fromkeys(d.spec.name for d in registry.drawn(*ALL_NODES)))


def __getattr__(name: str):
    """NODE_MEASURES: `node_measures()`, read from the registry on first use (then a module attribute),
    so that importing this module does not import every benchmark."""
    if name != "NODE_MEASURES":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()["NODE_MEASURES"] = found = node_measures()
    return found


# A 0-byte time is a mean over a thousand round trips: one context switch among them adds microseconds,
# so on shared or small nodes it wanders by 10-50% where bandwidth holds to a few percent.
LATENCY = Measure("latency", "latency (0 B)", "pingpong", "pingpong_time_us", "us", False, 1.0, (("bytes", 0),),
                  min_spread=0.15)
BANDWIDTH = Measure("bandwidth", "bandwidth (1 MiB)", "pingpong", "pingpong_bandwidth", "MB/s", True, 1.0,
                    (("bytes", 1 << 20),))
IPERF = Measure("iperf", "iperf3 TCP", "iperf3", "tcp_throughput", "Gbit/s", True)
PAIR_MEASURES = (LATENCY, BANDWIDTH)


@dataclass
class Flag:
    """A node or link the rule puts out of line, and why in words."""

    subject: str  # "node2", or "node1-node2" for a link
    measure: str  # Measure.key
    placement: Placement
    why: str


@dataclass
class NodeRow:
    node: str
    values: dict[str, float | None]  # Measure.key -> shown value (None: no valid figure)
    runs: dict[str, str]  # Measure.key -> run id
    flags: list[Flag] = field(default_factory=list)  # its own figures and its links taken together


@dataclass
class PairCell:
    a: str
    b: str
    values: dict[str, float | None]  # LATENCY/BANDWIDTH/IPERF key -> shown value
    runs: dict[str, str]
    flags: list[Flag] = field(default_factory=list)


@dataclass
class ClusterView:
    """One cluster run, ready to be tabulated and drawn."""

    run: str  # the cluster_run tag
    nodes: list[str]  # in the order of the run's inventory (the per-node runs' order)
    rows: list[NodeRow]
    pairs: list[PairCell]
    rule: Rule
    hpl: dict | None = None  # {"run", "gflops", "n", "nb", "p", "q", "nodes", "ranks"} of the all-node HPL
    rpeak_gflops: float | None = None  # the per-node Rpeak times the nodes, when the system says it
    started_at: str | None = None
    verdicts: Judgement | None = None  # against golden values (analysis/golden.py); None: not judged

    @property
    def node_flags(self) -> list[Flag]:
        return [f for row in self.rows for f in row.flags]

    @property
    def link_flags(self) -> list[Flag]:
        return [f for cell in self.pairs for f in cell.flags]

    @property
    def efficiency(self) -> float | None:
        if self.hpl and self.rpeak_gflops:
            return self.hpl["gflops"] / self.rpeak_gflops
        return None

    def slowest_node(self) -> tuple[str, str] | None:
        """(node, why) of the node furthest out on the bad side, flagged or not; None without figures."""
        return _furthest(self.rows, _nodes(), self.rule)

    def slowest_link(self) -> tuple[str, str] | None:
        """The link furthest out: a flagged pair; else the worst pair of a node flagged for its links
        (a bad cable makes all of its node's pairs slow, so none stands out among the pairs); else
        the worst pair by its place among all pairs."""
        found = _furthest([c for c in self.pairs if c.flags], PAIR_MEASURES, self.rule)
        if found:
            return found
        by_links = [f for f in self.node_flags if f.measure.startswith("links_")]
        if by_links:
            worst = max(by_links, key=lambda f: abs(f.placement.z))
            m = next(m for m in (*PAIR_MEASURES, IPERF) if f"links_{m.key}" == worst.measure)
            mine = [c for c in self.pairs if worst.subject in (c.a, c.b) and c.values.get(m.key) is not None]
            if mine:
                pick = (min if m.higher_is_better else max)(mine, key=lambda c: c.values[m.key])
                return (f"{pick.a}-{pick.b}", f"link {m.label} {pick.values[m.key]:.3g} {m.unit}; "
                                              f"{worst.subject} is flagged: {worst.why}")
        return _furthest(self.pairs, PAIR_MEASURES, self.rule)

    def to_dict(self) -> dict:
        """Everything above as JSON-ready data (run --json, the report's CSV)."""
        def flag(f: Flag) -> dict:
            p = f.placement
            return {"subject": f.subject, "measure": f.measure, "value": p.value, "median": p.median,
                    "robust_z": round(p.z, 2), "deviation": round(p.deviation, 4), "why": f.why}

        return {"run": self.run, "nodes": self.nodes, "rule": self.rule.describe(), "hpl": self.hpl,
                "rpeak_gflops": self.rpeak_gflops, "efficiency": self.efficiency,
                "rows": [{"node": r.node, "values": r.values, "runs": r.runs, "flags": [flag(f) for f in r.flags]}
                         for r in self.rows],
                "pairs": [{"a": c.a, "b": c.b, "values": c.values, "runs": c.runs, "flags": [flag(f) for f in c.flags]}
                          for c in self.pairs],
                "slowest_node": self.slowest_node(), "slowest_link": self.slowest_link(),
                "verdicts": self.verdicts.to_dict() if self.verdicts else None}


def _subject(item: NodeRow | PairCell) -> str:
    return item.node if isinstance(item, NodeRow) else f"{item.a}-{item.b}"


def _furthest(items, measures, rule: Rule) -> tuple[str, str] | None:
    """The subject furthest out on the bad side: the largest |z| among flags on its own figures (a
    node's links are the slowest link's business), else among all values by their place."""
    flagged = [(abs(f.placement.z), _subject(i), f.why) for i in items for f in i.flags
               if not f.measure.startswith("links_")]
    if flagged:
        _, subject, why = max(flagged)
        return subject, why
    worst: tuple[float, str, str] | None = None
    for m in measures:
        placed = place({_subject(i): i.values[m.key] for i in items if i.values.get(m.key) is not None},
                       m.higher_is_better, m.rule(rule))
        for p in placed.values():
            badness = -p.z if m.higher_is_better else p.z
            if worst is None or badness > worst[0]:
                worst = (badness, p.subject, f"{m.label} {p.value:.3g} {m.unit}, {p.how_far(m.unit)}")
    return (worst[1], worst[2]) if worst else None


def cluster_runs(data: Dataset) -> list[str]:
    """The cluster_run ids among the selected runs, oldest first."""
    seen: dict[str, str] = {}
    for run in data.runs.values():
        tag = run["tags"].get(TAG_RUN)
        if tag:
            seen[str(tag)] = min(seen.get(str(tag), "~"), run.get("started_at") or "")
    return sorted(seen, key=lambda k: (seen[k], k))


def metrics() -> set[str]:
    """The metric names a cluster view reads."""
    return {m.metric for m in (*_nodes(), *PAIR_MEASURES, IPERF)} | set(all_node_metrics())


def _nodes() -> tuple[Measure, ...]:
    return globals()["NODE_MEASURES"] if "NODE_MEASURES" in globals() else __getattr__("NODE_MEASURES")


def cluster_views(data: Dataset, rule: Rule = Rule()) -> list[ClusterView]:
    """Every cluster run of the selection (not judged against golden values: golden.judged_views)."""
    return [cluster_view(data, run, rule) for run in cluster_runs(data)]


def stored_view(store: Store, cluster_run: str, rule: Rule = Rule()) -> ClusterView:
    """The peers' verdicts of one stored cluster run, read back from its runs (golden.judged_view adds
    the verdicts against golden values: what `run -w` prints)."""
    return cluster_view(stored_data(store, cluster_run), cluster_run, rule)


def stored_data(store: Store, cluster_run: str) -> Dataset:
    """The runs of one stored cluster run and the metrics a view reads."""
    term = parse_term(f"tag:{TAG_RUN}={cluster_run}")
    return load(store, Selection({}, f"cluster run {cluster_run}", (term,)), names=metrics())


def cluster_view(data: Dataset, cluster_run: str, rule: Rule = Rule()) -> ClusterView:
    runs = {rid: r for rid, r in data.runs.items() if str(r["tags"].get(TAG_RUN)) == cluster_run}
    by_phase: dict[str, list[dict]] = {p: [] for p in PHASES}
    for r in sorted(runs.values(), key=lambda r: (r.get("started_at") or "", r["id"])):
        by_phase.setdefault(str(r["tags"].get(TAG_PHASE)), []).append(r)
    nodes = sorted({str(r["tags"][TAG_NODE]) for r in by_phase["node"] if r["tags"].get(TAG_NODE)}, key=natural)
    index = _by_run(data)
    rows = [NodeRow(n, {m.key: None for m in _nodes()}, {}) for n in nodes]
    row_of = {r.node: r for r in rows}
    for run in by_phase["node"]:
        row = row_of.get(str(run["tags"].get(TAG_NODE)))
        for m in _nodes():
            if row is not None and run["benchmark"] == m.benchmark:
                _keep_best(row, m, _value(index, run["id"], m), run["id"])
    pairs: dict[tuple[str, str], PairCell] = {}
    for run in by_phase["pair"] + by_phase["iperf"]:
        a, _, b = str(run["tags"].get(TAG_PAIR, "")).partition(",")
        if not a or not b:
            continue
        cell = pairs.setdefault((a, b), PairCell(a, b, {m.key: None for m in (*PAIR_MEASURES, IPERF)}, {}))
        for m in (*PAIR_MEASURES, IPERF):
            if run["benchmark"] == m.benchmark:
                _keep_best(cell, m, _value(index, run["id"], m), run["id"])
    order = {n: i for i, n in enumerate(nodes)}
    cells = sorted(pairs.values(), key=lambda c: (order.get(c.a, len(order)), order.get(c.b, len(order)), c.a, c.b))
    view = ClusterView(cluster_run, nodes, rows, cells, rule,
                       started_at=min((r.get("started_at") or "" for r in runs.values()), default=None))
    _flag_nodes(view)
    _flag_links(view)
    view.hpl = _all_node_hpl(data, by_phase["hpl"])
    view.rpeak_gflops = _rpeak(data, by_phase["hpl"] or by_phase["node"], len(nodes))
    return view


def natural(name: str) -> list:
    """node2 before node10: names sorted by their text and number parts."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _keep_best(item: NodeRow | PairCell, m: Measure, value: float | None, run_id: str) -> None:
    """A node's or pair's figure is the best of its runs: a pair is measured in several passes, and
    the best pass is the link's capability (a worse one was disturbed by something else)."""
    if value is None:
        return
    old = item.values.get(m.key)
    if old is None or (value > old if m.higher_is_better else value < old):
        item.values[m.key], item.runs[m.key] = value, run_id


def _value(index: dict[str, dict[str, list]], run_id: str, m: Measure) -> float | None:
    """The best valid value of a measure in one run (None: none valid); `index` from _by_run."""
    values = [_sustained(float(v), labels or {}) if m.sustained else float(v)
              for v, labels in index[m.metric].get(run_id, ())
              if all((labels or {}).get(k) == want for k, want in m.labels)]
    if not values:
        return None
    best = max(values) if m.higher_is_better else min(values)
    return best * m.scale


def _sustained(best_rate: float, labels: dict) -> float:
    """A best rate made the rate over all repetitions: best x min time / average time (STREAM's
    labels); the best rate itself when the times are not there (an imported run)."""
    tmin, tavg = labels.get("min_time_s"), labels.get("avg_time_s")
    if isinstance(tmin, (int, float)) and isinstance(tavg, (int, float)) and 0 < tmin <= tavg:
        return best_rate * tmin / tavg
    return best_rate


def _by_run(data: Dataset) -> dict[str, dict[str, list[tuple[float, dict | None]]]]:
    """metric -> run id -> (value, labels) of its valid rows, grouped once: filtering all rows for
    each run made a 64-node run (2,016 pairs) take seconds, quadratic in the runs."""
    out: dict[str, dict[str, list[tuple[float, dict | None]]]] = {}
    for metric in metrics():
        rows = data.of(metric)
        grouped = out[metric] = {}
        for run_id, value, labels in zip(rows["run_id"], rows["value"], rows["labels"], strict=True):
            grouped.setdefault(run_id, []).append((value, labels))
    return out


def _flag_nodes(view: ClusterView) -> None:
    for m in _nodes():
        placed = place({r.node: r.values[m.key] for r in view.rows if r.values[m.key] is not None},
                       m.higher_is_better, m.rule(view.rule))
        for row in view.rows:
            p = placed.get(row.node)
            if p and p.flagged:
                row.flags.append(Flag(row.node, m.key, p, f"{m.label} {p.value:.3g} {m.unit}: {p.how_far(m.unit)}"))


def _flag_links(view: ClusterView) -> None:
    """Each pair among all pairs; then each node's links together (its cable, its NIC)."""
    for m in (*PAIR_MEASURES, IPERF):
        values = {(c.a, c.b): c.values[m.key] for c in view.pairs if c.values.get(m.key) is not None}
        placed = place({f"{a}-{b}": v for (a, b), v in values.items()}, m.higher_is_better, m.rule(view.rule))
        for cell in view.pairs:
            p = placed.get(f"{cell.a}-{cell.b}")
            if p and p.flagged:
                cell.flags.append(Flag(f"{cell.a}-{cell.b}", m.key, p,
                                       f"link {m.label} {p.value:.3g} {m.unit}: {p.how_far(m.unit)}"))
        per_node: dict[str, list[float]] = {}
        for (a, b), v in values.items():
            per_node.setdefault(a, []).append(v)
            per_node.setdefault(b, []).append(v)
        node_placed = place({n: statistics.median(vs) for n, vs in per_node.items()}, m.higher_is_better,
                            m.rule(view.rule))
        for row in view.rows:
            p = node_placed.get(row.node)
            if p and p.flagged:
                row.flags.append(Flag(row.node, f"links_{m.key}", p,
                                      f"its links' {m.label} (median over its {len(per_node[row.node])} pairs) "
                                      f"{p.value:.3g} {m.unit}: {p.how_far(m.unit)}"))


def _all_node_hpl(data: Dataset, runs: list[dict]) -> dict | None:
    best = None
    for run in runs:
        rows = data.of(*all_node_metrics())
        rows = rows[rows["run_id"] == run["id"]]
        for value, labels in zip(rows["value"], rows["labels"], strict=True):
            if best is None or value > best["gflops"]:
                labels = labels or {}
                best = {"run": run["id"], "gflops": float(value), "n": labels.get("n"), "nb": labels.get("nb"),
                        "p": labels.get("p"), "q": labels.get("q"),
                        "nodes": run["params"].get("nodes") or run.get("node_count"),
                        "ranks": run["params"].get("ranks")}
    return best


def _rpeak(data: Dataset, runs: list[dict], nodes: int) -> float | None:
    """Rpeak of the cluster: the nominal Rpeak of the system the runs were made on (one node, as
    discovered on the head) times the nodes; None when the system does not say."""
    for run in runs:
        system = data.systems.get(run.get("system_id") or "") or {}
        peak = ((system.get("info") or {}).get("peak") or {}).get("rpeak_node_gflops")
        if peak:
            return float(peak) * nodes
    return None
