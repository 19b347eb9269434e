"""The nodes' state and activity with every run, and `system:` settings applied and restored, on
the virtual cluster (scripts/virtual-cluster, the same 3-node cluster as test_virtual_cluster.py).

Each node is a network namespace, so its MTU, routes and net.* sysctls are its own: a campaign
can change them there without touching this machine. The host side of each node's link accepts
jumbo frames, like a switch configured for them. Everything is real: sshd, mpirun over ssh,
`ip`, `sysctl`, the samplers and the journal; the tests read the nodes' values themselves
(`virtual-cluster exec`) before and after.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import SCRIPT, cli, interruptible, query
from tests.test_virtual_cluster import write

pytestmark = pytest.mark.cluster


def node(name: str, *cmd: str) -> str:
    out = subprocess.run([str(SCRIPT), "exec", name, *cmd], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def values(name: str) -> dict[str, str]:
    """What the tests change on a node: eth0's MTU, its routes (rto_min) and tcp_sack."""
    return {"mtu": node(name, "cat", "/sys/class/net/eth0/mtu"), "routes": node(name, "ip", "route", "show"),
            "sack": node(name, "cat", "/proc/sys/net/ipv4/tcp_sack")}


def wait_for(predicate, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


PINGPONG = """
cluster: {launcher: mpirun, hosts: "node[1-2]", interconnect: tcp}
benchmarks:
  - benchmark: pingpong
    params: {nodes: 2, bind_to: none, max_log2: 16, iter: 50, rounds: 1}
"""


def test_diff_of_two_runs_that_differ_only_in_mtu_names_exactly_that(shared_db, tmp_path):
    before = {n: values(n) for n in ("node1", "node2")}
    campaign = write(tmp_path / "mtu.yaml", "name: vc-mtu\n" + PINGPONG + "    system: {mtu: [1500, 9000]}\n")
    out = cli("campaign", "run", str(campaign), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    assert {n: values(n) for n in ("node1", "node2")} == before, "settings not restored after a normal end"
    runs = {json.loads(r["params"])["system.mtu"]: r for r in query(shared_db, "SELECT * FROM runs")}
    assert set(runs) == {"1500", "9000"} and all(r["status"] == "ok" for r in runs.values())
    for mtu, r in runs.items():
        state = json.loads(r["facts"])["state"]
        assert set(state) == {"node1", "node2"}, state.keys()
        assert all(str(s["nic"]["eth0"]["mtu"]) == mtu for s in state.values()), mtu
    out = cli("diff", runs["1500"]["id"], runs["9000"]["id"], "--json")
    assert out.returncode == 0, out.stderr
    found = {(d["section"], d["key"]): (d["a"], d["b"]) for d in json.loads(out.stdout)}
    assert found == {("parameters", "system.mtu"): ("1500", "9000"),
                     ("settings", "node1: nic.eth0.mtu"): ("1500", "9000"),
                     ("settings", "node2: nic.eth0.mtu"): ("1500", "9000")}, found
    text = cli("diff", runs["1500"]["id"], runs["9000"]["id"], env={"COLUMNS": "200"})
    assert "node1: nic.eth0.mtu" in text.stdout and "9000" in text.stdout


def test_a_run_over_two_nodes_has_the_activity_of_each(shared_db, tmp_path):
    campaign = write(tmp_path / "busy.yaml", "name: vc-busy\n" + PINGPONG.replace("iter: 50", "iter: 3000"))
    out = cli("campaign", "run", str(campaign), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    run = query(shared_db, "SELECT * FROM runs")[0]
    facts = json.loads(run["facts"])
    assert set(facts["activity"]) == {"node1", "node2"}, facts["activity"]
    names = {a["name"] for a in query(shared_db, "SELECT name FROM artifacts WHERE run_id = ?", run["id"])}
    assert {"activity-node1.jsonl", "activity-node2.jsonl"} <= names
    for host, summary in facts["activity"].items():
        assert "error" not in summary, summary
        shares = {k: v for k, v in summary.items() if k.endswith("_percent") and k != "sy_si_percent"}
        assert 95 <= sum(shares.values()) <= 105 and shares["idle_percent"] < 100, (host, shares)
        assert summary["softirqs"]["NET_RX"]["total"] > 0, (host, summary["softirqs"])
        assert summary["tcp"]["retransmits"] >= 0
    shown = cli("results", run["id"], env={"COLUMNS": "200"})
    assert "nodes: node1:" in shown.stdout and "nodes: node2:" in shown.stdout, shown.stdout
    assert "state: node1: " in shown.stdout and "eth0 MTU 1500" in shown.stdout, shown.stdout
    assert "thread migrations between CPUs" in shown.stdout, shown.stdout  # from the placement probe


SLOW = """
cluster: {launcher: mpirun, hosts: "node[1-2]", interconnect: tcp}
benchmarks:
  - benchmark: affinity
    params: {nodes: 2, ranks: 2, threads: 1, hold_ms: 20000}
    system: {mtu: 9000, rto_min: 5ms, sysctl: {net.ipv4.tcp_sack: 0}}
"""


def _start(campaign: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "clusterbench", "campaign", "run", str(campaign)],
                            env=dict(os.environ, COLUMNS="200"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=interruptible)


def _changed() -> bool:
    now = values("node1")
    return now["mtu"] == "9000" and "rto_min" in now["routes"] and now["sack"] == "0"


def test_settings_are_restored_after_ctrl_c(shared_db, tmp_path):
    before = {n: values(n) for n in ("node1", "node2")}
    proc = _start(write(tmp_path / "slow.yaml", "name: vc-ctrlc\n" + SLOW))
    try:
        assert wait_for(_changed), "the settings were never applied"
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, output
    assert {n: values(n) for n in ("node1", "node2")} == before, output
    assert not list((shared_db.parent / "settings-journal").glob("*.json")), "journal left behind"


def test_settings_are_restored_by_the_next_campaign_run_after_kill_9(shared_db, tmp_path):
    before = {n: values(n) for n in ("node1", "node2")}
    campaign = write(tmp_path / "slow.yaml", "name: vc-kill\n" + SLOW.replace("hold_ms: 20000", "hold_ms: 3000"))
    proc = _start(campaign)
    try:
        assert wait_for(_changed), "the settings were never applied"
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert _changed(), "killed before it could restore: the changed values stay until someone restores them"
    assert list((shared_db.parent / "settings-journal").glob("*.json")), "no journal of the original values"
    out = cli("campaign", "run", str(campaign), env={"COLUMNS": "200"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "system settings" in out.stdout, out.stdout  # it says it restored the crashed run's settings
    assert {n: values(n) for n in ("node1", "node2")} == before
    statuses = [r["status"] for r in query(shared_db, "SELECT status FROM runs WHERE campaign = 'vc-kill'")]
    assert statuses == ["ok"], statuses


def test_a_slurm_job_records_the_state_and_activity_of_its_nodes(shared_db, tmp_path):
    """Inside the batch job, overlap steps read each node's state and sample it beside the run."""
    campaign = write(tmp_path / "slurm.yaml", """
name: vc-slurm-observed
cluster: {launcher: slurm, interconnect: tcp, slurm: {poll: 0.5}}
benchmarks:
  - benchmark: pingpong
    params: {nodes: 2, bind_to: none, max_log2: 16, iter: 2000, rounds: 1}
""")
    out = cli("campaign", "run", str(campaign), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    (run,) = query(shared_db, "SELECT * FROM runs")
    facts = json.loads(run["facts"])
    assert run["status"] == "ok" and len(facts["state"]) == 2, (run["nodes"], facts.get("state"))
    for host, node_state in facts["state"].items():
        assert host in run["nodes"] or run["nodes"].startswith("node[")
        assert node_state["nic"]["eth0"]["mtu"], node_state
    assert set(facts["activity"]) == set(facts["state"]), facts["activity"]
    for summary in facts["activity"].values():
        assert summary["samples"] >= 2 and summary["end"] == "stop file", summary
