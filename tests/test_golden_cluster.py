"""Golden values on the virtual cluster (scripts/virtual-cluster): after healthy `run -w` runs have set
them, a busy loop on every node makes every node fail its verdict, although the nodes are all equally
slow and the peers' outlier rule has no slower node to find; `--drain-list` names them all.

The nodes share this machine's cores, so the figures say nothing about a real cluster; that every node
fails its own expected value while none stands out among its peers is what is checked. The unit tests
of the same logic, on stored runs written without a cluster, are in tests/test_golden.py.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from tests.conftest import cli

NODES = ["node1", "node2", "node3"]
HEALTHY_RUNS = 1  # 1 run x 3 nodes of the same hardware = 3 healthy figures per measure: golden.MIN_HEALTHY
SSH = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]
# One `yes` per CPU the node sees, each in a session of its own so that ssh returns at once; their
# pids are printed so that they are ended by id. One per CPU: a single loop beside a kernel pinned
# to another core would leave that kernel alone.
BUSY = 'for i in $(seq "$(nproc)"); do setsid yes >/dev/null 2>&1 </dev/null & echo $!; done'


def cluster_run(*more: str) -> dict:
    """`run -w node[1-3]` with the nodes alone (no pairs, no HPL: the same plan every time, so every
    figure's configuration is the same and the runs pool), as JSON."""
    out = cli("run", "-w", "node[1-3]", "--budget", "20s", "--interconnect", "tcp", "--no-pairs", "--no-hpl",
              "--json", *more, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return json.loads(out.stdout)


def busy_everywhere() -> dict[str, list[str]]:
    """Start the busy loops on every node; node -> the pids to end."""
    started: dict[str, list[str]] = {}
    for node in NODES:
        out = subprocess.run([*SSH, node, BUSY], capture_output=True, text=True, timeout=60)
        started[node] = [p for p in out.stdout.split() if p.isdigit()]
        assert out.returncode == 0 and started[node], f"{node}: {out.stderr}"
    return started


def stop_busy(started: dict[str, list[str]]) -> None:
    for node, pids in started.items():
        if pids:
            subprocess.run([*SSH, node, "kill", *pids], capture_output=True, text=True, timeout=60)


def verdicts(summary: dict) -> dict[str, str]:
    return {v["subject"]: v["state"] for v in summary["verdicts"]["nodes"]}


def figures(summary: dict) -> str:
    return "; ".join(f"{v['subject']}: {v['state']} ({v['summary']})" for v in summary["verdicts"]["nodes"])


@pytest.mark.cluster
@pytest.mark.quiet_machine
def test_a_busy_loop_on_every_node_fails_every_node_against_golden_values_and_drains_them(shared_db):
    for i in range(HEALTHY_RUNS):
        healthy = cluster_run()
        print(f"healthy run {i + 1}:", figures(healthy))
        assert [r["node"] for r in healthy["rows"]] == NODES
    drain = shared_db.parent / "drain.sh"
    started = {}
    try:
        started = busy_everywhere()
        summary = cluster_run("--drain-list", str(drain))
    finally:
        stop_busy(started)
    print("busy on every node:", figures(summary))
    found = verdicts(summary)
    assert set(found) == set(NODES)
    assert all(found[n] in ("slow", "failed") for n in NODES), figures(summary)
    judged = [m for v in summary["verdicts"]["nodes"] for m in v["measures"] if m["state"] == "slow"]
    # judged against the healthy run only (its 3 nodes' figures): the busy run never sets its own golden values
    assert judged and all(m["expected"]["runs"] <= HEALTHY_RUNS for m in judged), judged
    assert all(m["expected"]["count"] >= 3 for m in judged), judged
    flagged = {f["subject"] for r in summary["rows"] for f in r["flags"]}
    assert flagged != set(NODES), flagged  # the peers' rule cannot see a cluster that is slow everywhere
    assert summary["drain_list"]["nodes"] == NODES and summary["drain_list"]["error"] is None
    text = drain.read_text()
    assert summary["run"] in text.splitlines()[0]
    for node in NODES:
        assert f"scontrol update nodename={node} state=drain reason=" in text
    assert summary["verdicts"]["failing_nodes"] == NODES
