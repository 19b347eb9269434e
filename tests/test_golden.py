"""Golden values of a cluster (analysis/golden.py): each node's and link's verdict against what earlier
healthy cluster runs on the same hardware measured, and the drain list of `run -w --drain-list`.

The stores are written with the real Store API, as suite/cluster.py stores a cluster run (its tags, the
benchmarks' metric names, one system for all nodes); the pure logic is also checked on constructed
figures. No virtual cluster here: tests/test_golden_cluster.py runs the real command on it."""

from __future__ import annotations

import json
import random
import shlex
import sqlite3
from itertools import combinations
from pathlib import Path

import pytest
from tests.conftest import cli

from clusterbench.analysis import golden
from clusterbench.analysis.cluster import LATENCY, ClusterView, NodeRow
from clusterbench.analysis.dataset import load
from clusterbench.analysis.outliers import Rule
from clusterbench.analysis.select import Selection
from clusterbench.bench.metrics import Metric
from clusterbench.store.db import Store
from clusterbench.store.records import RunRecord

SYSTEM = "sys-golden"
INFO = {"topology": {"hostname": "node1", "model_name": "Test CPU 9000", "sockets": 1, "cores": 4, "pus": 8},
        "memory": {"total_bytes": 16 * 2**30}, "peak": {"rpeak_node_gflops": 200.0}}
BASE = {"stream": ("stream_triad", 20000.0, "MB/s"), "dgemm": ("dgemm_gflops", 150.0, "Gflop/s"),
        "clock": ("clock_gflops_mean", 32.0, "Gflop/s")}
NODES = ["node1", "node2", "node3"]


def store_cluster_run(db: Path, run: str, started: str, factor: float = 1.0, *, nodes=NODES, seed: int = 1,
                      slow: dict[str, float] | None = None, facts: dict[str, dict] | None = None,
                      failed: tuple[str, ...] = (), pairs: bool = True, system: str = SYSTEM,
                      info: dict | None = None) -> None:
    """One stored cluster run: every node's STREAM, DGEMM and clock (times `factor`, and times slow[node]),
    ping-pong between every pair; +-1% noise. `facts`: a node's runs' facts (facts.disturbed);
    `failed`: nodes whose DGEMM run failed. All its runs start at `started` (ISO, UTC)."""
    rng = random.Random(seed)
    with Store(db) as store:
        store.save_system(system, "node1", {"fingerprint": system}, info if info is not None else INFO)
        for node in nodes:
            tags = {"suite": "cluster", "cluster_run": run, "cluster_phase": "node", "cluster_node": node}
            for bench, (metric, value, unit) in BASE.items():
                rid = f"{run}-{node}-{bench}"
                params = {"threads": 4, "n": 1000} if bench != "clock" else {"ms": 200}
                store.begin_run(RunRecord(rid, bench, params, system_id=system, nodes=node, tags=tags))
                if bench == "dgemm" and node in failed:
                    store.finish_run(rid, "failed", False, "exit code 1", 1, 1.0, [])
                    continue
                shown = value * factor * (slow or {}).get(node, 1.0) * (1 + rng.uniform(-0.01, 0.01))
                store.finish_run(rid, "ok", True, None, 0, 1.0, [Metric(metric, shown, unit)],
                                 facts=(facts or {}).get(node))
        for a, b in combinations(nodes, 2) if pairs else ():
            rid = f"{run}-pair-{a}-{b}"
            tags = {"suite": "cluster", "cluster_run": run, "cluster_phase": "pair", "cluster_pair": f"{a},{b}"}
            store.begin_run(RunRecord(rid, "pingpong", {"interconnect": "tcp", "nodes": 2}, system_id=system,
                                      nodes=f"{a},{b}", tags=tags))
            noise = 1 + rng.uniform(-0.01, 0.01)
            store.finish_run(rid, "ok", True, None, 0, 1.0, [
                Metric("pingpong_time_us", 20.0 / factor * noise, "us", False, {"bytes": 0}),
                Metric("pingpong_bandwidth", 1000.0 * factor * noise, "MB/s", True, {"bytes": 1 << 20})])
    con = sqlite3.connect(db)  # the runs' start, set so that the order of the cluster runs is certain
    with con:
        con.execute("UPDATE runs SET started_at=? WHERE json_extract(tags, '$.cluster_run')=?", (started, run))
    con.close()


def healthy_history(db: Path, count: int = 3) -> None:
    for i in range(count):
        store_cluster_run(db, f"healthy-{i}", f"2026-11-0{i + 1}T10:00:00.000+00:00", seed=i)


def view_of(db: Path, run: str) -> ClusterView:
    with Store(db, read_only=True) as store:
        return golden.judged_view(store, run)


def states(view: ClusterView) -> dict[str, str]:
    return {v.subject: v.state for v in view.verdicts.nodes}


# ---------------------------------------------------------------- verdicts from a store


def test_all_nodes_equally_slow_fail_against_golden_values_though_the_peers_flag_nothing(tmp_path):
    db = tmp_path / "results.db"
    healthy_history(db)
    store_cluster_run(db, "busy", "2026-11-10T10:00:00.000+00:00", factor=0.6, seed=9)
    view = view_of(db, "busy")
    assert view.node_flags == [] and view.link_flags == []  # all equally slow: no node is out of line
    assert states(view) == {n: golden.SLOW for n in NODES}
    node1 = view.verdicts.node("node1")
    worst = node1.worst()
    assert 0.3 < worst.worse_by < 0.5 and worst.expected.count == 9 and worst.expected.runs == 3
    assert worst.expected.since.startswith("2026-11-01")
    assert "slow by" in node1.summary() and "expected" in node1.summary()
    links = {v.subject: v.state for v in view.verdicts.links}
    assert links == {"node1-node2": golden.SLOW, "node1-node3": golden.SLOW, "node2-node3": golden.SLOW}
    latency = next(v for v in view.verdicts.links[0].measures if v.measure == LATENCY.key)
    assert latency.state == golden.SLOW and latency.worse_by > 0.5  # higher latency is the bad side
    summary = view.to_dict()
    assert summary["verdicts"]["failing_nodes"] == NODES and "rows" in summary and "slowest_node" in summary
    json.dumps(summary, default=str)


def test_a_healthy_run_passes_and_the_judged_run_never_sets_its_own_golden_values(tmp_path):
    db = tmp_path / "results.db"
    healthy_history(db)
    store_cluster_run(db, "again", "2026-11-10T10:00:00.000+00:00", seed=5)
    view = view_of(db, "again")
    assert states(view) == {n: golden.PASS for n in NODES}
    assert all(v.expected.count == 9 for n in view.verdicts.nodes for v in n.measures if v.measure != "hpl")
    # The first healthy run has nothing before it: its golden values come from no run, not from itself.
    first = view_of(db, "healthy-0")
    assert states(first) == {n: golden.CANNOT_TELL for n in NODES}
    assert "only 0 healthy figure(s)" in first.verdicts.node("node1").summary()


def test_too_few_healthy_figures_cannot_tell(tmp_path):
    db = tmp_path / "results.db"
    store_cluster_run(db, "one", "2026-11-01T10:00:00.000+00:00", nodes=["node1", "node2"], pairs=False)
    store_cluster_run(db, "busy", "2026-11-10T10:00:00.000+00:00", factor=0.5, nodes=["node1", "node2"],
                      pairs=False)
    view = view_of(db, "busy")
    assert states(view) == {"node1": golden.CANNOT_TELL, "node2": golden.CANNOT_TELL}
    why = view.verdicts.node("node1").measures[0].why
    assert "only 2 healthy figure(s)" in why and f"{golden.MIN_HEALTHY} needed" in why


def test_disturbed_or_flagged_earlier_runs_never_set_golden_values(tmp_path):
    """Three earlier runs, all made while every node was busy (facts.disturbed): they would make a slow
    cluster look normal. They are left out, so the slow run cannot be judged; a node flagged by the peers'
    rule in its own run teaches nothing either."""
    db = tmp_path / "results.db"
    busy = {n: {"disturbed": {"why": "yes(1) took 95% of a CPU"}} for n in NODES}
    for i in range(3):
        store_cluster_run(db, f"disturbed-{i}", f"2026-11-0{i + 1}T10:00:00.000+00:00", factor=0.6, facts=busy,
                          seed=i)
    store_cluster_run(db, "busy", "2026-11-10T10:00:00.000+00:00", factor=0.6, facts=busy, seed=9)
    view = view_of(db, "busy")
    assert states(view) == {n: golden.CANNOT_TELL for n in NODES}
    # the disturbed run is still judged, its evidence shown
    assert "disturbed: yes(1) took 95%" in view.verdicts.node("node2").measures[0].evidence

    db2 = tmp_path / "flagged.db"
    nodes = ["node1", "node2", "node3", "node4"]
    for i in range(3):  # node4's STREAM is halved in every earlier run: flagged there, never golden
        store_cluster_run(db2, f"h-{i}", f"2026-11-0{i + 1}T10:00:00.000+00:00", nodes=nodes, pairs=False,
                          slow={"node4": 0.5}, seed=i)
    earlier = view_of(db2, "h-2")
    assert {f.subject for f in earlier.node_flags} == {"node4"}
    store_cluster_run(db2, "now", "2026-11-10T10:00:00.000+00:00", nodes=nodes, pairs=False, seed=8)
    now = view_of(db2, "now")
    stream = {v.subject: next(m for m in v.measures if m.measure == "stream_triad") for v in now.verdicts.nodes}
    assert {v.expected.count for v in stream.values()} == {9}  # 3 runs x 3 unflagged nodes
    assert stream["node4"].expected.value == pytest.approx(20.0, rel=0.02)  # not dragged down by node4


def test_a_failed_run_fails_the_node_and_other_hardware_is_not_pooled(tmp_path):
    db = tmp_path / "results.db"
    healthy_history(db)
    store_cluster_run(db, "now", "2026-11-10T10:00:00.000+00:00", failed=("node3",), seed=4)
    view = view_of(db, "now")
    assert states(view) == {"node1": golden.PASS, "node2": golden.PASS, "node3": golden.FAILED}
    dgemm = next(v for v in view.verdicts.node("node3").measures if v.measure == "dgemm")
    assert dgemm.state == golden.FAILED and "exit code 1" in dgemm.why
    other = INFO | {"topology": INFO["topology"] | {"model_name": "Other CPU"}}
    store_cluster_run(db, "elsewhere", "2026-11-11T10:00:00.000+00:00", factor=0.5, system="sys-other", info=other)
    assert states(view_of(db, "elsewhere")) == {n: golden.CANNOT_TELL for n in NODES}
    unknown = {"peak": {"rpeak_node_gflops": 200.0}}  # a system that does not say its hardware
    store_cluster_run(db, "unknown", "2026-11-12T10:00:00.000+00:00", factor=0.5, system="sys-x", info=unknown)
    assert "hardware of the node is not known" in view_of(db, "unknown").verdicts.node("node1").summary()


def test_a_report_judges_each_cluster_run_against_the_earlier_ones_it_holds(tmp_path):
    db = tmp_path / "results.db"
    healthy_history(db)
    store_cluster_run(db, "busy", "2026-11-10T10:00:00.000+00:00", factor=0.6, seed=9)
    with Store(db, read_only=True) as store:
        views = {v.run: v for v in golden.judged_views(load(store, Selection(), None))}
    assert states(views["busy"]) == {n: golden.SLOW for n in NODES}
    assert states(views["healthy-0"]) == {n: golden.CANNOT_TELL for n in NODES}
    from clusterbench.report import cluster as report_cluster
    from clusterbench.report.model import Options

    with Store(db, read_only=True) as store:
        section = report_cluster.section(load(store, Selection(), None), Options())
    table = next(t for t in section.tables if t.slug.endswith("verdicts") and "busy" in t.title)
    assert [r[0] for r in table.rows] == [*NODES, "node1-node2", "node1-node3", "node2-node3"]
    assert [r[1] for r in table.rows] == [golden.SLOW] * 6 and table.flagged == set(range(6))


# ---------------------------------------------------------------- the pure logic


def _figure(value, key=("hw", ()), healthy=True, run="r", subject="n1", cluster_run="c1", m=None):
    from clusterbench.analysis import cluster

    m = m or cluster.NODE_MEASURES[0]
    return golden.Figure(subject, m, value, "id", key, cluster_run, "2026-11-01T00:00:00", healthy)


def test_tolerance_has_a_floor_and_follows_the_spread():
    tight = golden.expected([_figure(v) for v in (100.0, 100.05, 100.1)])
    assert tight.tolerance == golden.MIN_TOLERANCE  # 3 near-identical values: not a 0.1% band
    wide = golden.expected([_figure(v) for v in (80.0, 100.0, 120.0, 100.0, 90.0)])
    assert wide.tolerance == pytest.approx(golden.TOLERANCE_Z * 1.4826 * 10.0 / 100.0)
    assert golden.expected([_figure(v, m=LATENCY) for v in (10.0, 10.0, 10.0)]).tolerance == LATENCY.min_spread
    table = golden.learn([_figure(100.0), _figure(101.0), _figure(99.0), _figure(10.0, healthy=False)])
    exp = table[("stream_triad", ("hw", ()))]
    assert exp.value == 100.0 and exp.count == 3
    assert golden.judge(_figure(96.0), table).state == golden.PASS
    assert golden.judge(_figure(120.0), table).state == golden.PASS  # faster is never slow
    slow = golden.judge(_figure(90.0), table)
    assert slow.state == golden.SLOW and slow.worse_by == pytest.approx(0.10)
    assert golden.judge(_figure(90.0, key=("other", ())), table).state == golden.CANNOT_TELL


def test_a_node_verdict_is_the_worst_judged_measure():
    verdict = golden.SubjectVerdict("n1")
    assert verdict.state == golden.CANNOT_TELL and not verdict.fails

    def v(state, worse=None, measure="m"):
        return golden.Verdict("n1", measure, measure, "u", state, 1.0, None, worse, f"{state} {measure}")

    verdict.measures = [v(golden.PASS, 0.01, "a"), v(golden.CANNOT_TELL, None, "b")]
    assert verdict.state == golden.PASS and "cannot tell: b" in verdict.summary()
    verdict.measures += [v(golden.SLOW, 0.2, "c"), v(golden.SLOW, 0.4, "d")]
    assert verdict.state == golden.SLOW and verdict.fails and verdict.worst().measure == "d"
    verdict.measures.append(v(golden.FAILED, None, "e"))
    assert verdict.state == golden.FAILED and verdict.worst().measure == "e"


# ---------------------------------------------------------------- the drain list


def _judged_view(nodes: list[str], states_of: dict[str, str]) -> ClusterView:
    view = ClusterView("20261110-100000-abcdef", nodes, [NodeRow(n, {}, {}) for n in nodes], [], Rule())

    def verdict(node):
        state = states_of[node]
        worse = 0.4 if state == golden.SLOW else None
        label = 'DGEMM "x" $(touch /tmp/pwned) `id` \'q\'' + " long" * 40  # hostile and too long
        return golden.SubjectVerdict(node, [golden.Verdict(node, "dgemm", label, "Gflop/s", state, 90.0, None,
                                                           worse, f"{state}: {label}")])

    view.verdicts = golden.Judgement([verdict(n) for n in nodes], [], "test")
    return view


def test_the_drain_list_quotes_hostile_names_and_names_only_failing_nodes():
    hostile = "node9; rm -rf / #"
    nodes = ["node1", "node2", "node3", hostile, "evil\nnode"]
    view = _judged_view(nodes, {"node1": golden.SLOW, "node2": golden.PASS, "node3": golden.CANNOT_TELL,
                                hostile: golden.FAILED, "evil\nnode": golden.SLOW})
    text, named = golden.drain_list(view, "2026-11-10 10:00 UTC")
    assert named == ["node1", hostile]
    lines = text.splitlines()
    assert lines[0].startswith("# clusterbench drain list: cluster run 20261110-100000-abcdef, written 2026-11-10")
    commands = [line for line in lines if not line.startswith("#")]
    assert len(commands) == 2
    for line, node in zip(commands, named, strict=True):
        words = shlex.split(line)  # what a shell would pass to scontrol: the name and reason as one word each
        assert words[:4] == ["scontrol", "update", f"nodename={node}", "state=drain"]
        assert len(words) == 5 and words[4].startswith("reason=clusterbench 20261110-100000-abcdef: DGEMM \"x\" $(")
        assert len(words[4]) <= len("reason=") + golden.MAX_REASON_CHARS and words[4].endswith("...")
    assert any(line.startswith("# left out:") and "evil\\nnode" in line for line in lines)
    assert "node2" not in text and "node3" not in text.replace("#", "")


def test_the_drain_list_with_no_failing_node_is_the_header_only():
    text, named = golden.drain_list(_judged_view(["node1"], {"node1": golden.PASS}), "now")
    assert named == [] and all(line.startswith("#") for line in text.splitlines())
    assert "nothing to drain" in text


def test_drain_list_is_refused_without_nodes():
    out = cli("run", "--drain-list", "drain.sh", "--dry-run")
    assert out.returncode == 2 and "--drain-list applies to cluster runs" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_drain_list_in_a_missing_folder_is_refused_before_anything_runs(tmp_path):
    out = cli("run", "-w", "node[1-3]", "--drain-list", str(tmp_path / "no" / "such" / "drain.sh"), "--dry-run")
    assert out.returncode == 2 and "--drain-list" in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_writing_the_drain_list_is_atomic_and_never_runs_it(tmp_path):
    from clusterbench.suite.cluster_job import write_drain_list

    target = tmp_path / "drain.sh"
    target.write_text("old\n")
    view = _judged_view(["node1", "node2"], {"node1": golden.SLOW, "node2": golden.PASS})
    written = write_drain_list(target, view)
    assert written.nodes == ["node1"] and written.error is None
    assert target.read_text().count("scontrol update nodename=node1 state=drain") == 1
    assert not (target.stat().st_mode & 0o111)  # not made executable: the user runs it on purpose
    assert sorted(p.name for p in tmp_path.iterdir()) == ["drain.sh"]  # no temporary file left
    failed = write_drain_list(tmp_path / "drain.sh" / "x", view)  # a path under a file: an error, not a raise
    assert failed.error and failed.nodes == []
