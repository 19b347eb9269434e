"""The Cluster section and the analysis behind it, on stores written with the real Store API: the runs a
cluster run stores (tags cluster_run, cluster_phase, cluster_node, cluster_pair; the benchmarks' own
metric names and labels), with one node's DGEMM and STREAM halved and one node's links 10x slower.

Also the robust rule of analysis/outliers.py on its own (median/MAD, floors, direction, too few peers,
NaN left out)."""

from __future__ import annotations

import csv
import io
import json
import math
import random
import sqlite3
from itertools import combinations
from pathlib import Path

import pytest

from clusterbench.analysis.cluster import cluster_views
from clusterbench.analysis.dataset import load
from clusterbench.analysis.outliers import Rule, place
from clusterbench.analysis.select import Selection
from clusterbench.bench.metrics import Metric
from clusterbench.report import render
from clusterbench.report.build import build
from clusterbench.report.model import Options
from clusterbench.store.db import Store
from clusterbench.store.records import RunRecord

SYSTEM = "sys-cluster-test"
RPEAK_NODE = 200.0  # Gflop/s per node, stored with the system
BASE = {"stream_triad": 20000.0, "dgemm_gflops": 150.0, "hpl_gflops": 120.0, "clock_gflops_mean": 32.0}
LATENCY_US, BANDWIDTH_MBS = 1.5, 11000.0


def _run(store: Store, run_id: str, benchmark: str, tags: dict, metrics: list[Metric], params: dict | None = None,
         nodes: str | None = None) -> None:
    store.begin_run(RunRecord(run_id, benchmark, params or {}, campaign=None, system_id=SYSTEM, nodes=nodes,
                              tags=tags))
    store.finish_run(run_id, "ok", True, None, 0, 1.0, metrics)


def cluster_store(db: Path, count: int, slow_node: str | None = None, slow_links: str | None = None,
                  run: str = "cr-1", seed: int = 7) -> list[str]:
    """A stored cluster run of `count` nodes: every node's suite, every pair's ping-pong, HPL on all
    nodes. `slow_node`: its DGEMM and STREAM halved; `slow_links`: its pairs 10x slower. Noise of
    +-2% so the spread is not nothing. Returns the node names."""
    rng = random.Random(seed)
    nodes = [f"node{i}" for i in range(1, count + 1)]

    def noisy(value: float) -> float:
        return value * (1 + rng.uniform(-0.02, 0.02))

    with Store(db) as store:
        store.save_system(SYSTEM, "head", {"fingerprint": SYSTEM},
                          {"peak": {"rpeak_node_gflops": RPEAK_NODE, "derivation": "4 cores x 2.5 GHz x 20"}})
        for node in nodes:
            tags = {"cluster_run": run, "cluster_phase": "node", "cluster_node": node}
            half = 0.5 if node == slow_node else 1.0
            _run(store, f"{run}-{node}-stream", "stream", tags,
                 [Metric("stream_triad", noisy(BASE["stream_triad"]) * half, "MB/s")], {"threads": 4}, node)
            _run(store, f"{run}-{node}-dgemm", "dgemm", tags,
                 [Metric("dgemm_gflops", noisy(BASE["dgemm_gflops"]) * half, "Gflop/s", labels={"n": 4096})],
                 {"threads": 4}, node)
            _run(store, f"{run}-{node}-hpl", "hpl", tags,
                 [Metric("hpl_gflops", noisy(BASE["hpl_gflops"]), "Gflop/s",
                         labels={"n": 20000, "nb": 192, "p": 2, "q": 2})], {"ranks": 4}, node)
            _run(store, f"{run}-{node}-clock", "clock", tags,
                 [Metric("clock_gflops_mean", noisy(BASE["clock_gflops_mean"]), "Gflop/s")], {}, node)
        for a, b in combinations(nodes, 2):
            factor = 10.0 if slow_links in (a, b) else 1.0
            metrics = []
            for size, latency, bandwidth in ((0, LATENCY_US, 0.0), (1 << 20, 95.0, BANDWIDTH_MBS)):
                metrics.append(Metric("pingpong_time_us", noisy(latency) * factor, "us", False, {"bytes": size}))
                metrics.append(Metric("pingpong_bandwidth", noisy(bandwidth) / factor, "MB/s", True, {"bytes": size}))
            _run(store, f"{run}-pair-{a}-{b}", "pingpong", {"cluster_run": run, "cluster_phase": "pair",
                                                             "cluster_pair": f"{a},{b}"}, metrics,
                 {"interconnect": "tcp"}, f"{a},{b}")
        _run(store, f"{run}-hpl-all", "hpl", {"cluster_run": run, "cluster_phase": "hpl"},
             [Metric("hpl_gflops", BASE["hpl_gflops"] * count * 0.9, "Gflop/s",
                     labels={"n": 40000, "nb": 192, "p": 2, "q": 2 * count})],
             {"nodes": count, "ranks": 4 * count}, ",".join(nodes))
    return nodes


def _views(db: Path):
    with Store(db, read_only=True) as store:
        return cluster_views(load(store, Selection(), None))


def _report(db: Path, out: Path):
    with Store(db, read_only=True) as store:
        report = build(store, Selection(), Options())
    return report, render.write(report, out)


# ---------------------------------------------------------------- the rule


def test_place_median_mad_and_direction():
    values = {"a": 100.0, "b": 102.0, "c": 98.0, "d": 101.0, "e": 50.0}
    placed = place(values, higher_is_better=True)
    assert placed["e"].median == 100.0 and placed["e"].flagged
    assert placed["e"].deviation == pytest.approx(-0.5)
    # MAD = 2 here, but the floor makes it at least 5% of the median: 1.4826 x 5
    assert placed["e"].z == pytest.approx(-50 / (1.4826 * 5.0))
    assert not any(placed[k].flagged for k in "abcd")
    # the same low value is the good side when lower is better: never flagged
    assert not place(values, higher_is_better=False)["e"].flagged
    high = place({"a": 1.0, "b": 1.1, "c": 0.9, "d": 1.0, "e": 10.0}, higher_is_better=False)
    assert high["e"].flagged and high["e"].deviation == pytest.approx(9.0)
    assert "above the median" in high["e"].how_far("us")


def test_place_floors_keep_a_quiet_cluster_quiet():
    # identical nodes agree to 0.01%: without the spread floor, 1% would be an outlier
    quiet = {"a": 100.0, "b": 100.0, "c": 100.01, "d": 99.0}
    assert not any(p.flagged for p in place(quiet, True).values())
    # far out in z (MAD floored at 5%) but only 20% from the median: below min_deviation
    near = {"a": 100.0, "b": 100.0, "c": 100.0, "d": 80.0}
    assert place(near, True, Rule(z=2.0))["d"].z < -2.0
    assert not place(near, True, Rule(z=2.0))["d"].flagged
    assert place(near, True, Rule(z=2.0, min_deviation=0.1))["d"].flagged


def test_place_needs_three_peers_and_leaves_nan_out():
    assert not any(p.flagged for p in place({"a": 100.0, "b": 1.0}, True).values())
    with_nan = place({"a": 100.0, "b": 101.0, "c": math.nan, "d": 10.0, "e": math.inf}, True)
    assert set(with_nan) == {"a", "b", "d"} and with_nan["d"].flagged and with_nan["d"].median == 100.0
    assert not any(p.flagged for p in place({"a": 100.0, "b": math.nan, "c": 10.0}, True).values())
    assert place({}, True) == {}


# ---------------------------------------------------------------- analysis/cluster.py


def test_three_nodes_slow_links_flag_the_node(tmp_path):
    """2 of 3 pairs are slow: the pair-level median is a slow link, so only the per-node aggregate finds it."""
    db = tmp_path / "r.db"
    cluster_store(db, 3, slow_links="node2")
    (view,) = _views(db)
    assert view.nodes == ["node1", "node2", "node3"] and len(view.pairs) == 3
    flagged = {r.node: {f.measure for f in r.flags} for r in view.rows if r.flags}
    assert flagged == {"node2": {"links_latency", "links_bandwidth"}}
    assert not view.link_flags  # no pair is out of line among pairs
    link, why = view.slowest_link()  # the slow node's worst pair, named with the node's flag
    assert "node2" in link.split("-") and "node2 is flagged" in why and "its links'" in why
    assert view.hpl["gflops"] == pytest.approx(BASE["hpl_gflops"] * 3 * 0.9) and view.hpl["nodes"] == 3
    assert view.rpeak_gflops == pytest.approx(3 * RPEAK_NODE)
    assert view.efficiency == pytest.approx(BASE["hpl_gflops"] * 0.9 / RPEAK_NODE)


def test_five_nodes_slow_pairs_flagged_one_by_one(tmp_path):
    db = tmp_path / "r.db"
    cluster_store(db, 5, slow_links="node2")
    (view,) = _views(db)
    slow = {f"{a}-{b}" for a, b in combinations(view.nodes, 2) if "node2" in (a, b)}
    assert {c.a + "-" + c.b for c in view.pairs if c.flags} == slow and len(slow) == 4
    for cell in view.pairs:
        if cell.flags:
            assert {f.measure for f in cell.flags} == {"latency", "bandwidth"}
    assert view.slowest_link()[0] in slow
    assert [r.node for r in view.rows if r.flags] == ["node2"]


def test_four_nodes_slow_node_and_links(tmp_path):
    db = tmp_path / "r.db"
    cluster_store(db, 4, slow_node="node3", slow_links="node2")
    (view,) = _views(db)
    by_node = {r.node: {f.measure for f in r.flags} for r in view.rows}
    assert by_node["node3"] == {"stream_triad", "dgemm"}
    assert by_node["node2"] == {"links_latency", "links_bandwidth"}
    assert not by_node["node1"] and not by_node["node4"]
    assert view.rows[2].values["stream_triad"] == pytest.approx(10.0, rel=0.03)  # MB/s shown as GB/s
    assert view.slowest_node()[0] in ("node2", "node3")


def test_unmodified_store_flags_nothing(tmp_path):
    db = tmp_path / "r.db"
    cluster_store(db, 4)
    (view,) = _views(db)
    assert not view.node_flags and not view.link_flags
    assert view.slowest_node() is not None and view.slowest_link() is not None  # furthest out, not flagged


# ---------------------------------------------------------------- the report section


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster4")
    db = root / "r.db"
    nodes = cluster_store(db, 4, slow_node="node3", slow_links="node2")
    report, files = _report(db, root / "out")
    return report, files, nodes


def _section(report):
    (section,) = [s for s in report.sections if s.slug == "cluster"]
    return section


def test_section_node_table_flags(four):
    report, _, nodes = four
    section = _section(report)
    nodes_table = next(t for t in section.tables if t.slug == "cluster-nodes")
    assert [row[0] for row in nodes_table.rows] == nodes
    assert nodes_table.flagged == {1, 2}  # node2 (links), node3 (DGEMM, STREAM)
    flags = {row[0]: row[-2] for row in nodes_table.rows}
    assert "DGEMM" in flags["node3"] and "STREAM Triad" in flags["node3"] and "below the median" in flags["node3"]
    assert "its links' latency" in flags["node2"] and "its links' bandwidth" in flags["node2"]
    assert flags["node1"] == "" and flags["node4"] == ""
    assert "STREAM Triad (GB/s)" in nodes_table.columns and "DGEMM (Gflop/s)" in nodes_table.columns
    assert nodes_table.rows[0][-1] == [f"cr-1-node1-{b}" for b in ("stream", "dgemm", "hpl", "clock")]
    summary = {row[0]: row[1] for row in next(t for t in section.tables if t.slug == "cluster-summary").rows}
    assert summary["nodes"] == 4 and summary["Rpeak (Gflop/s)"] == pytest.approx(4 * RPEAK_NODE)
    assert summary["HPL P x Q"] == "2 x 8" and summary["HPL N"] == 40000
    assert summary["efficiency (% of Rpeak)"] == pytest.approx(100 * 0.9 * BASE["hpl_gflops"] / RPEAK_NODE)
    assert summary["slowest node"].split(":")[0] in ("node2", "node3")


def test_section_pictures(four):
    report, files, nodes = four
    section = _section(report)
    slugs = [p.slug for p in section.pictures]
    assert slugs == ["cluster-latency", "cluster-bandwidth", "cluster-stream_triad", "cluster-dgemm",
                     "cluster-hpl", "cluster-clock"]
    out = files["html"].parent
    for picture in section.pictures:
        assert picture.svg.startswith("<svg")
        assert all(n in picture.svg for n in nodes)
        assert (out / f"{picture.slug}.svg").is_file() and (out / f"{picture.slug}.csv").is_file()
    latency = next(p for p in section.pictures if p.slug == "cluster-latency")
    assert "<image" in latency.svg and latency.svg.count("15.") + latency.svg.count("14.") >= 3  # node2's cells
    rows = list(csv.DictReader(io.StringIO(latency.csv)))
    assert len(rows) == 6 and all(r["flagged"] == "False" for r in rows)  # among pairs, none stands out
    dgemm = list(csv.DictReader(io.StringIO(next(p for p in section.pictures if p.slug == "cluster-dgemm").csv)))
    assert [r["node"] for r in dgemm if r["flagged"] == "True"] == ["node3"]


def test_outputs_hold_the_node_table(four):
    _, files, _ = four
    html = files["html"].read_text()
    assert 'data-section="cluster"' in html and 'data-table="cluster-nodes"' in html
    assert html.count('<tr class="flagged">') >= 2
    assert '<a href="#run-cr-1-node3-dgemm">' in html  # run ids link into the appendix
    assert 'data-picture="cluster-latency"' in html and 'data-picture="cluster-bandwidth"' in html
    markdown = files["markdown"].read_text()
    assert "## Cluster" in markdown and "![Link latency (0 B)" in markdown
    assert "| node3 |" in markdown and "DGEMM" in markdown
    with open(files["html"].parent / "cluster-nodes.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert [r["node"] for r in table] == ["node1", "node2", "node3", "node4"]
    assert "DGEMM" in table[2]["flags"] and table[0]["flags"] == ""
    assert float(table[2]["DGEMM (Gflop/s)"]) == pytest.approx(75.0, rel=0.03)


def test_unmodified_store_no_flags_in_report(tmp_path):
    db = tmp_path / "r.db"
    cluster_store(db, 4)
    report, files = _report(db, tmp_path / "out")
    section = _section(report)
    assert all(not t.flagged for t in section.tables if hasattr(t, "flagged"))
    assert "No node and no link is out of line" in " ".join(section.paragraphs)
    assert '<tr class="flagged">' not in files["html"].read_text()


def test_hostile_node_names_stay_text(tmp_path):
    """Node names are user data: escaped in the SVG and the HTML, neutralised in the CSV."""
    db = tmp_path / "r.db"
    cluster_store(db, 3)
    hostile = {"node1": "<img src=x onerror=alert(1)>", "node2": "=cmd|' /C calc'!A0"}
    with sqlite3.connect(db) as conn:
        for run_id, text in conn.execute("SELECT id, tags FROM runs").fetchall():
            tags = json.loads(text)
            if "cluster_node" in tags:
                tags["cluster_node"] = hostile.get(tags["cluster_node"], tags["cluster_node"])
            if "cluster_pair" in tags:
                tags["cluster_pair"] = ",".join(hostile.get(n, n) for n in tags["cluster_pair"].split(","))
            conn.execute("UPDATE runs SET tags=? WHERE id=?", (json.dumps(tags), run_id))
    report, files = _report(db, tmp_path / "out")
    section = _section(report)
    assert hostile["node1"] in [row[0] for row in section.tables[1].rows]
    assert len(section.pictures[0].svg) and len(_views(db)[0].nodes) == 3 == len(_views(db)[0].pairs)
    for picture in section.pictures:
        assert "<img" not in picture.svg and "&lt;img src=x" in picture.svg
    assert "<img src=x" not in files["html"].read_text()
    assert "'=cmd" in (files["html"].parent / "cluster-nodes.csv").read_text()
    assert "'=cmd" in (files["html"].parent / "cluster-dgemm.csv").read_text()


def test_no_cluster_runs_no_section(tmp_path):
    db = tmp_path / "r.db"
    with Store(db) as store:
        store.save_system(SYSTEM, "head", {"fingerprint": SYSTEM}, {})
        _run(store, "plain-stream", "stream", {"study": "x"}, [Metric("stream_triad", 20000.0, "MB/s")])
    with Store(db, read_only=True) as store:
        report = build(store, Selection(), Options())
    assert "cluster" not in [s.slug for s in report.sections]


def test_large_cluster_is_bounded(tmp_path):
    """80 nodes: 3,160 pairs; no values in the cells, names every 2nd node, bars cut to the 32 worst."""
    db = tmp_path / "r.db"
    cluster_store(db, 80, slow_node="node7")
    with Store(db, read_only=True) as store:
        data = load(store, Selection(), None)
    from clusterbench.report.cluster import section

    out = section(data, Options())
    latency = next(p for p in out.pictures if p.slug == "cluster-latency")
    assert "One node in 2 is named" in latency.caption and "none in the cells" in latency.caption
    assert len(latency.svg) < 400_000
    dgemm = next(p for p in out.pictures if p.slug == "cluster-dgemm")
    assert "32 worst of 80" in dgemm.caption and "node7" in dgemm.svg
    assert len(list(csv.DictReader(io.StringIO(dgemm.csv)))) == 80
