"""`clusterbench run -w NODESET`: the whole-cluster job (suite/cluster.py, analysis/cluster.py).

The rounds of disjoint pairs and the refusals are checked here without a cluster. The rest runs
the real command on the virtual cluster (scripts/virtual-cluster: namespaces with sshd, real
mpirun over ssh): an unmodified cluster must give no flag, and a node slowed on purpose (a CPU hog
inside its namespace and cgroup, `virtual-cluster hog`) or a node whose cable is capped
(`virtual-cluster link NODE rate`) must be the one flagged. The nodes share this machine's cores,
so the figures say nothing about a real cluster; which node stands out is what is checked.
"""

from __future__ import annotations

import itertools
import json

import pytest
from tests.conftest import cli, query, vc

from clusterbench.suite.cluster import disjoint_rounds
from clusterbench.suite.pairs import rounds


@pytest.mark.parametrize("count", [2, 3, 4, 5, 8, 9])
def test_rounds_cover_every_pair_once_with_no_node_twice_in_a_round(count):
    nodes = [f"n{i}" for i in range(count)]
    found = rounds(nodes)
    pairs = [p for r in found for p in r]
    assert sorted(pairs) == sorted(itertools.combinations(nodes, 2))
    for r in found:
        members = [n for p in r for n in p]
        assert len(members) == len(set(members))
    assert len(found) == (count - 1 if count % 2 == 0 else count)


def test_rounds_refuse_a_node_listed_twice():
    with pytest.raises(ValueError):
        rounds(["a", "b", "a"])


def test_disjoint_rounds_never_put_a_node_in_two_pairs_at_once():
    pairs = [("a", "b"), ("a", "c"), ("b", "c"), ("c", "d")]
    found = disjoint_rounds(pairs, list)
    assert sorted(p for r in found for p in r) == sorted(pairs)
    for r in found:
        members = [n for p in r for n in p]
        assert len(members) == len(set(members))
    assert found[0] == [("a", "b"), ("c", "d")]


def test_what_is_flagged_is_measured_again_and_nothing_else():
    """A flagged per-node figure re-runs its benchmark on every node; a flagged link re-runs that pair; a node
    flagged on its links re-runs all its pairs (RECHECK_PASSES passes)."""
    from clusterbench.analysis.cluster import ClusterView, Flag, NodeRow, PairCell
    from clusterbench.analysis.outliers import Placement, Rule
    from clusterbench.suite.cluster import RECHECK_PASSES, ClusterPlan, Phase, recheck_phases

    def flag(subject, measure):
        return Flag(subject, measure, Placement(subject, 1.0, 2.0, -5.0, -0.5, True), "slow")

    nodes = ["n1", "n2", "n3", "n4"]
    pairs = list(itertools.combinations(nodes, 2))
    phases = [Phase(f"{b} on every node", "node", [(b, None, {"cluster_node": n}) for n in nodes])
              for b in ("clock", "stream", "dgemm")]
    phases += [Phase("ping-pong pass 1", "pair", [("pingpong", None, {"cluster_pair": f"{a},{b}"}) for a, b in pairs])]
    plan = ClusterPlan(None, None, phases, 60.0)
    rows = [NodeRow(n, {}, {}) for n in nodes]
    cells = [PairCell(a, b, {}, {}) for a, b in pairs]
    view = ClusterView("r", nodes, rows, cells, Rule())
    assert recheck_phases(view, plan) == ([], [])
    rows[1].flags.append(flag("n2", "stream_triad"))
    cells[5].flags.append(flag("n3-n4", "bandwidth"))
    again, why = recheck_phases(view, plan)
    assert why == ["n2: stream_triad", "n3-n4: bandwidth"]
    assert [p.label for p in again if p.kind == "node"] == [f"again ({i + 1} of {RECHECK_PASSES}): stream on every "
                                                            "node" for i in range(RECHECK_PASSES)]
    assert len(again[0].runs) == 4  # every node, as the first time
    redone = [extra["cluster_pair"] for p in again if p.kind == "pair" for _, _, extra in p.runs]
    assert redone == ["n3,n4"] * RECHECK_PASSES
    rows[1].flags[:] = [flag("n2", "links_latency")]
    cells[5].flags.clear()
    again, _ = recheck_phases(view, plan)
    redone = [extra["cluster_pair"] for p in again if p.kind == "pair" for _, _, extra in p.runs]
    assert sorted(set(redone)) == ["n1,n2", "n2,n3", "n2,n4"] and len(redone) == 3 * RECHECK_PASSES
    assert all(len(p.runs) == 1 for p in again)  # all three share n2: one pair per round


def test_a_flagged_iperf_link_is_measured_again_with_iperf3():
    """iperf3 measures each pair once: a flag on its figure re-runs that pair's iperf3 (not its ping-pong),
    RECHECK_PASSES times, and a flagged figure of another kind leaves the iperf3 runs alone."""
    from clusterbench.analysis.cluster import ClusterView, Flag, PairCell
    from clusterbench.analysis.outliers import Placement, Rule
    from clusterbench.suite.cluster import RECHECK_PASSES, ClusterPlan, Phase, recheck_phases

    nodes = ["n1", "n2", "n3"]
    pairs = list(itertools.combinations(nodes, 2))
    phases = [Phase("ping-pong pass 1", "pair", [("pingpong", None, {"cluster_pair": f"{a},{b}"}) for a, b in pairs]),
              Phase("iperf3 pass 1", "iperf", [("iperf3", None, {"cluster_pair": f"{a},{b}"}) for a, b in pairs])]
    cells = [PairCell(a, b, {}, {}) for a, b in pairs]
    view = ClusterView("r", nodes, [], cells, Rule())
    cells[1].flags.append(Flag("n1-n3", "iperf", Placement("n1-n3", 1.0, 2.0, -5.0, -0.5, True), "slow"))
    again, why = recheck_phases(view, plan := ClusterPlan(None, None, phases, 60.0))
    assert why == ["n1-n3: iperf"]
    assert [(p.kind, r) for p in again for r, _, _ in p.runs] == [("iperf", "iperf3")] * RECHECK_PASSES
    assert {extra["cluster_pair"] for p in again for _, _, extra in p.runs} == {"n1,n3"}
    cells[1].flags[:] = [Flag("n1-n3", "latency", Placement("n1-n3", 1.0, 2.0, 5.0, 0.5, False), "slow")]
    again, _ = recheck_phases(view, plan)
    assert {p.kind for p in again} == {"pair"}


@pytest.mark.parametrize("args, words", [
    (["-w", "node1"], "at least 2"),
    (["-w", "node[1-3]", "--n", "1000"], "--n applies to one machine"),
    (["-w", "node[1-"], "not a node set"),
    (["-w", "node[1-3]", "--interconnect", "carrier-pigeon"], "--interconnect"),
    (["-w", "/no/such/hostfile"], "hostfile not found"),
])
def test_bad_cluster_input_is_refused_with_exit_2(args, words):
    out = cli("run", *args, "--dry-run")
    assert out.returncode == 2, out.stdout + out.stderr
    assert words in out.stderr and "Traceback" not in out.stderr


def test_no_pairs_is_refused_without_nodes():
    out = cli("run", "--no-pairs", "--dry-run")
    assert out.returncode == 2 and "--no-pairs applies to cluster runs" in out.stderr, out.stderr


def cluster_run(budget: str = "30s", *more: str) -> dict:
    out = cli("run", "-w", "node[1-3]", "--budget", budget, "--interconnect", "tcp", "--json", *more, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return json.loads(out.stdout)


def flags(summary: dict) -> dict[str, list[str]]:
    """subject -> the measures it is flagged on, for nodes and links."""
    found: dict[str, list[str]] = {}
    for item in summary["rows"] + summary["pairs"]:
        for f in item["flags"]:
            found.setdefault(f["subject"], []).append(f["measure"])
    return found


def figures(summary: dict) -> str:
    rows = [f"{r['node']}: " + ", ".join(f"{k} {v:.3g}" for k, v in r["values"].items() if v) for r in summary["rows"]]
    pairs = [f"{p['a']}-{p['b']}: " + ", ".join(f"{k} {v:.3g}" for k, v in p["values"].items() if v)
             for p in summary["pairs"]]
    return "; ".join(rows + pairs)


@pytest.mark.cluster
@pytest.mark.quiet_machine
def test_an_unmodified_cluster_gives_no_flag_and_everything_is_stored(shared_db, xhpl):
    summary = cluster_run("30s", "--iperf")
    print("unmodified:", figures(summary), "rechecked:", summary["rechecked"])
    assert flags(summary) == {}, figures(summary)
    assert summary["nodes"] == ["node1", "node2", "node3"]
    assert {(p["a"], p["b"]) for p in summary["pairs"]} == {("node1", "node2"), ("node1", "node3"), ("node2", "node3")}
    assert all(v is not None for r in summary["rows"] for k, v in r["values"].items()), summary["rows"]
    assert summary["hpl"] and summary["hpl"]["nodes"] == 3 and summary["hpl"]["gflops"] > 0
    stored = query(shared_db, "SELECT benchmark, nodes, tags FROM runs")
    phases = {json.loads(r["tags"])["cluster_phase"] for r in stored}
    assert phases == {"node", "pair", "iperf", "hpl"}
    assert all(p["values"]["iperf"] > 0 for p in summary["pairs"]), summary["pairs"]  # iperf3 between the nodes
    per_node = [r for r in stored if json.loads(r["tags"])["cluster_phase"] == "node"]
    assert {r["nodes"] for r in per_node} == {"node1", "node2", "node3"}  # each ran on its own node
    assert {r["benchmark"] for r in per_node} == {"clock", "stream", "dgemm", "hpl"}
    report = cli("report", f"tag:cluster_run={summary['run']}", "-o", str(shared_db.parent / "r.html"))
    assert report.returncode == 0, report.stderr


@pytest.mark.cluster
def test_inside_a_multi_node_slurm_allocation_run_takes_its_nodes(shared_db, tmp_path, cluster):
    """`clusterbench run` with no -w inside `sbatch -N 3`: the plan covers the allocation's nodes."""
    if not cluster["checkout_visible"]:
        pytest.skip("the batch job runs clusterbench on node1, which cannot see this checkout (a node-local path)")
    import subprocess
    import sys
    import time

    out = shared_db.parent / "plan.json"  # beside the store: the nodes share /var/tmp, not their /tmp
    command = f"{sys.executable} -m clusterbench run --dry-run --json --interconnect tcp > {out}"
    job = subprocess.run(["sbatch", "--parsable", "-N", "3", "--exclusive", "-o", str(shared_db.parent / "job.out"),
                          "--wrap", command], capture_output=True, text=True, timeout=60)
    assert job.returncode == 0, job.stderr
    job_id = job.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        state = subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True).stdout.strip()
        if not state:
            break
        time.sleep(0.5)
    else:
        subprocess.run(["scancel", job_id])
        pytest.fail("the allocation's job did not end")
    assert out.exists() and out.stat().st_size, (shared_db.parent / "job.out").read_text()
    plan = json.loads(out.read_text())
    assert plan["nodes"] == ["node1", "node2", "node3"]
    assert any(p["kind"] == "pair" for p in plan["phases"])


@pytest.mark.cluster
@pytest.mark.quiet_machine
def test_a_node_with_a_cpu_hog_is_flagged_as_the_outlier_node(shared_db, xhpl):
    vc("hog", "node2", "start", "--threads", "8")
    try:  # no HPL, no pairs: the outlier node is judged from the per-node kernels; the unmodified run covers
        # HPL's and the pairs' phases (the pairs with the hogged node took 9-14 s each, half of this run)
        summary = cluster_run("30s", "--no-hpl", "--no-pairs")
    finally:
        vc("hog", "node2", "stop")
    print("hog on node2:", figures(summary), "rechecked:", summary["rechecked"])
    found = flags(summary)
    assert "node2" in found, figures(summary)
    assert set(found) <= {"node2", "node1-node2", "node2-node3"}, found
    assert summary["slowest_node"][0] == "node2"
    stored = query(shared_db, "SELECT DISTINCT json_extract(tags, '$.cluster_phase') FROM runs")
    assert {r[0] for r in stored} == {"node"}  # --no-pairs: the nodes alone


@pytest.mark.cluster
@pytest.mark.quiet_machine
def test_a_node_whose_cable_is_capped_is_flagged_for_its_links(shared_db, xhpl):
    vc("link", "node3", "rate", "50mbit")
    try:  # no HPL: across the capped cable it only runs into its timeout (about 150 s), and is not what is judged
        summary = cluster_run("30s", "--no-hpl")
    finally:
        vc("link", "node3", "rate", "unlimited")
    print("node3 capped at 50 Mbit/s:", figures(summary))
    found = flags(summary)
    assert "links_bandwidth" in found.get("node3", []), figures(summary)
    assert set(found) <= {"node3", "node1-node3", "node2-node3"}, found
    assert summary["slowest_link"][0] in ("node1-node3", "node2-node3")


@pytest.mark.cluster
def test_interrupting_a_cluster_run_stores_the_runs_in_flight_as_interrupted_and_leaves_no_process(shared_db, xhpl):
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import interruptible

    proc = subprocess.Popen([sys.executable, "-m", "clusterbench", "run", "-w", "node[1-3]", "--budget", "60s",
                             "--interconnect", "tcp", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=interruptible, env=dict(os.environ))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until the per-node STREAM runs (three at once) are running
        if running_count(shared_db, "stream") == 3:
            break
        time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail("the per-node STREAM runs never ran")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    rows = query(shared_db, "SELECT id, status, reason FROM runs WHERE benchmark='stream'")
    assert [r["status"] for r in rows] == ["interrupted"] * 3, [tuple(r) for r in rows] + [err[-3000:]]
    # Nothing of the run outlives clusterbench: the nodes share this machine's process table, so one
    # look at the STREAM kernel by its name covers them all (a remote rank may take a moment to die).
    deadline, left = time.monotonic() + 15, "?"
    while time.monotonic() < deadline:
        left = subprocess.run(["pgrep", "-x", "stream"], capture_output=True, text=True).stdout.strip()
        if not left:
            break
        time.sleep(0.5)
    assert left == "", f"STREAM processes left: {left}"


def running_count(db, benchmark: str) -> int:
    """Runs of `benchmark` now running; 0 until the database and its tables exist (this test may be the first
    of the suite to write the shared database, and a look between its creation and its schema finds no table)."""
    import sqlite3

    if not db.exists():
        return 0
    try:
        return query(db, "SELECT count(*) FROM runs WHERE status='running' AND benchmark=?", benchmark)[0][0]
    except sqlite3.OperationalError:
        return 0

