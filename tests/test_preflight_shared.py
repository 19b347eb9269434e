"""The preflight's shared-directory check: the results store's runs directory must be the same
directory on every node (a file the head writes there is read back on each node over ssh).

The first tests need no cluster. The others use the virtual cluster that `.ci/run` brings up
(scripts/virtual-cluster up 3: node1..node3), read only; $CLUSTERBENCH_VC_NAME names another one
(its node names are read from its state folder). Each node of the virtual cluster has its own
/tmp, and shares /var/tmp with the head, as a real cluster's local disk and NFS home would be.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from tests.conftest import cli

from clusterbench.cluster import preflight
from clusterbench.cluster.preflight import SHARED_CHECK, shared_directory
from clusterbench.launch.remote import Answer

VC_NAME = os.environ.get("CLUSTERBENCH_VC_NAME", "cbvc")
VC_STATE = Path("/run/clusterbench-vc") / VC_NAME


# ---------------------------------------------------------------- without a cluster


def test_the_head_itself_sees_its_directory_and_nothing_is_left(tmp_path):
    folder = tmp_path / "new" / "runs"  # a new store: the runs directory is not there yet
    assert shared_directory(["localhost"], folder) == []
    assert not (tmp_path / "new").exists()  # made for the check, removed after it
    kept = tmp_path / "kept"
    kept.mkdir()
    assert shared_directory(["localhost"], kept) == [] and list(kept.iterdir()) == []


def test_a_node_without_the_file_or_with_another_is_named_with_the_path(tmp_path, monkeypatch):
    def answers(hosts, command, timeout_s):
        assert command.startswith("cat -- ") and str(tmp_path) in command
        return [Answer("n1", 1, "", "cat: No such file or directory"), Answer("n2", 0, "other\n", ""),
                Answer("n3", 255, "", "ssh: connect to host n3 port 22: Connection refused")]

    monkeypatch.setattr(preflight, "run_everywhere", answers)
    found = {p.node: p for p in shared_directory(["n1", "n2", "n3"], tmp_path)}
    assert set(found) == {"n1", "n2", "n3"}
    assert all(p.check == SHARED_CHECK and str(tmp_path) in p.detail and "CLUSTERBENCH_DB" in p.hint
               for p in found.values())
    assert "no file the head wrote" in found["n1"].detail and "another file" in found["n2"].detail
    assert "Connection refused" in found["n3"].detail
    assert list(tmp_path.iterdir()) == []  # the token file is removed


def test_a_directory_the_head_cannot_write_is_the_heads_problem(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    problems = shared_directory(["localhost"], blocker / "runs")
    assert [(p.node, p.check) for p in problems] == [("head", SHARED_CHECK)]
    assert "cannot write" in problems[0].detail


# ---------------------------------------------------------------- on the virtual cluster


@pytest.fixture(scope="module")
def nodes() -> list[str]:
    if os.geteuid() != 0 or not (VC_STATE / "size").exists():
        pytest.skip(f"needs the virtual cluster '{VC_NAME}' up (scripts/virtual-cluster up 3, as root)")
    prefix = (VC_STATE / "prefix").read_text().strip()
    return [f"{prefix}{i}" for i in (1, 2, 3)]


def check(nodes: list[str], folder: Path) -> tuple[int, dict]:
    out = cli("cluster", "check", "--hosts", ",".join(nodes), "--no-mpi", "--shared-dir", str(folder), "--json",
              timeout=120)
    return out.returncode, json.loads(out.stdout)


@pytest.mark.cluster
def test_a_directory_under_tmp_is_not_shared_and_every_node_is_named(nodes):
    folder = Path("/tmp") / f"clusterbench-shared-{uuid.uuid4().hex[:8]}"
    code, result = check(nodes, folder)
    assert code == 1 and not result["ok"]
    shared = [p for p in result["problems"] if p["check"] == SHARED_CHECK]
    assert sorted(p["node"] for p in shared) == nodes, result["problems"]
    assert all(str(folder) in p["detail"] and "CLUSTERBENCH_DB" in p["hint"] for p in shared)
    assert not folder.exists()  # made on the head for the check only


@pytest.mark.cluster
def test_a_directory_under_var_tmp_is_shared(nodes):
    folder = Path("/var/tmp") / f"clusterbench-shared-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    try:
        code, result = check(nodes, folder)
        assert not [p for p in result["problems"] if p["check"] == SHARED_CHECK], result["problems"]
        assert code == 0, result["problems"]
        assert list(folder.iterdir()) == []
    finally:
        folder.rmdir()


@pytest.mark.cluster
def test_a_multi_node_campaign_with_its_store_under_tmp_does_not_start(nodes, tmp_path, isolated_db):
    """The campaign's preflight checks the store's runs directory: here under the head's /tmp."""
    spec = tmp_path / "c.yaml"
    spec.write_text(f"name: shared-check\ncluster: {{launcher: mpirun, hosts: '{','.join(nodes[:2])}'}}\n"
                    "benchmarks:\n  - benchmark: command\n    params: {command: 'true', nodes: 2}\n")
    out = cli("campaign", "run", str(spec), env={"COLUMNS": "600"}, timeout=300)  # no table cell wrapped
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert "preflight failed" in text and SHARED_CHECK in text
    assert f"{isolated_db.parent / 'runs'} is not the head's directory" in text, text
