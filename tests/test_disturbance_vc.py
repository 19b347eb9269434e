"""On a node of the virtual cluster, a run beside a busy loop is flagged `disturbed`, and the same run alone is not.

The nodes are namespaces of this machine: they share its process table, so node1's sampler sees the ranks of
every node and the cluster's daemons. The run's processes are told apart by the placement probes' records
(the rank's launcher, orted, is on node1) and the supervisor's; the busy loop is started on node1 over ssh,
in its own session, as another user's job would be. Runs alone (`quiet_machine`), with the flag asked for.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import cli, query
from tests.test_disturbance import FLAG, busy_loop

pytestmark = [pytest.mark.cluster, pytest.mark.quiet_machine]

CAMPAIGN = """name: NAME
cluster: {launcher: mpirun, hosts: node1, interconnect: tcp}
benchmarks:
  - benchmark: dgemm
    params: {n: 1500, nodes: 1, ranks: 2, threads: 1}
"""


def one_run(tmp_path: Path, db: Path, env: dict, name: str) -> dict:
    """One run of its own campaign (a campaign run again would resume: nothing new would run)."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(CAMPAIGN.replace("NAME", name, 1))
    out = cli("campaign", "run", str(path), "--json", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    row = query(db, "SELECT id, nodes FROM runs ORDER BY started_at DESC LIMIT 1")[0]
    assert row["nodes"] == "node1"
    shown = cli("results", row["id"], "--format", "json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def test_a_node_of_the_virtual_cluster_beside_a_busy_loop_is_flagged_and_alone_is_not(shared_db, tmp_path):
    with busy_loop("ssh", "node1"):
        shared = one_run(tmp_path, shared_db, FLAG, "vc-disturbance-shared")
    alone = one_run(tmp_path, shared_db, FLAG, "vc-disturbance-alone")
    assert shared["facts"].get("disturbed"), shared["facts"].get("disturbance")
    assert any("node1" in e for e in shared["facts"]["disturbed"]["evidence"])
    node = shared["facts"]["disturbance"]["nodes"]["node1"]
    assert node["judged"] and node["others_percent"] >= 5, node
    assert "disturbed" not in alone["facts"], alone["facts"]["disturbed"]
    quiet = alone["facts"]["disturbance"]["nodes"]["node1"]
    assert quiet["judged"] and quiet["others_percent"] < 5, quiet
