"""The preflight of what the nodes must run, and staging (cluster/staging.py, launch/remote.py).

A checkout, venv or build cache on a node-local path (/tmp) is invisible on the nodes: every rank
then failed with "exit code 132 ... while attempting to start process rank 0". The preflight now
names each node and path and refuses (exit code 1); `--stage` copies what the nodes cannot see to
a node-local folder on each and runs it from there.

The first tests need no cluster: the head sees its own paths, copies made over bash on this
machine, the problems' wording. The last ones run a "clone under /tmp" on the virtual cluster
(whose nodes have their own /tmp): the package copied to a mktemp folder under /tmp with a venv
of its own there, and CLUSTERBENCH_CACHE under /tmp too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from tests.conftest import ROOT, query, vc

from clusterbench.cluster import preflight, staging
from clusterbench.cluster.preflight import PATHS_CHECK, node_paths
from clusterbench.execution.placement import PROBE
from clusterbench.launch.hosts import Host, Inventory
from clusterbench.launch.remote import Answer, NodeCopies, StagingError, set_node_copies
from clusterbench.launch.site import Site
from clusterbench.launch.spec import Launch, Placement


@pytest.fixture(autouse=True)
def no_staging_left():
    """Staging is process-wide: every test starts and ends without it."""
    set_node_copies(None)
    staging.request(False)
    yield
    set_node_copies(None)
    staging.request(False)


# ---------------------------------------------------------------- without a cluster


def test_what_the_nodes_run_is_the_python_the_probe_the_caches_and_the_binaries(tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(tmp_path / "cache"))
    binary = tmp_path / "xhpl"
    binary.write_text("#!/bin/sh\n")
    wanted = {n.path: n for n in staging.needs([str(binary), str(tmp_path / "not-there")])}
    assert wanted[sys.executable].kind == "x" and wanted[sys.executable].shown
    assert wanted[str(PROBE)].kind == "r"
    assert wanted[str(tmp_path / "cache")].kind == "d"  # the builds' cache is inside it: asked once
    assert str(tmp_path / "cache" / "builds") not in wanted
    assert wanted[str(binary)].kind == "x" and str(tmp_path / "not-there") not in wanted


def test_the_head_reaches_its_own_paths_and_the_check_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(tmp_path / "new" / "cache"))  # not made yet
    sight = staging.look(["localhost"], staging.needs())
    assert sight.unseen == {} and sight.unanswered == {}
    assert sight.python3["localhost"] == shutil.which("python3")
    assert not (tmp_path / "new").exists()  # made for the token, removed after


def test_a_node_that_cannot_reach_a_path_is_named_with_the_path_and_the_fixes(monkeypatch):
    def answers(hosts, command, timeout_s):
        assert command.count("\n") >= 3 and timeout_s <= 60  # one ssh per node, all paths at once, bounded
        lines = [line for line in command.splitlines() if "@@cb " in line and "python3" not in line]
        unseen = "\n".join(f"@@cb {i} no" for i in range(len(lines)))
        return [Answer("n1", 0, unseen + "\n@@cb python3 /usr/bin/python3\n", ""),
                Answer("n2", 0, "@@cb python3 \n", ""), Answer("n3", 255, "", "ssh: connect to host n3: refused")]

    monkeypatch.setattr(staging, "run_everywhere", answers)
    problems = node_paths(["n1", "n2", "n3"], [])
    by_node = {}
    for p in problems:
        by_node.setdefault(p.node, []).append(p)
    reached = [p for p in by_node["n1"] if p.check == PATHS_CHECK]
    assert {sys.executable, str(PROBE)} <= {p.detail.split(" ")[2] for p in reached}
    assert all("CLUSTERBENCH_CACHE" in p.hint and "--stage" in p.hint for p in reached)
    assert [p.check for p in by_node["n2"]] == [preflight.SAMPLER_CHECK]  # no python3: the sampler cannot run
    assert "refused" in by_node["n3"][0].detail


def test_copies_are_made_on_first_use_and_commands_name_them(tmp_path):
    clone = tmp_path / "clone"
    (clone / "lib").mkdir(parents=True)
    kernel = clone / "kernel"
    kernel.write_text("#!/bin/sh\necho staged\n")
    kernel.chmod(0o755)
    (clone / "lib" / "libx.so").write_text("x")
    folder = str(tmp_path / "node-local")
    copies = NodeCopies(["localhost"], folder, [str(clone)], ("/venv/bin/python", "/usr/bin/python3"))
    argv = copies.argv(["/venv/bin/python", "-I", str(kernel), "/etc/hostname", "relative"])
    assert argv == ["/usr/bin/python3", "-I", folder + str(kernel), "/etc/hostname", "relative"]
    assert subprocess.run([argv[2]], capture_output=True, text=True).stdout == "staged\n"  # a real copy, runnable
    assert copies.env_value(f"{clone}/lib:/usr/lib") == f"{folder}{clone}/lib:/usr/lib"
    assert (Path(folder + str(clone)) / "lib" / "libx.so").read_text() == "x"
    assert copies.staged_bytes == len(kernel.read_text()) + 1


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a folder another user owns")
def test_a_stage_folder_another_user_owns_is_refused(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    kernel = tmp_path / "kernel"
    kernel.write_text("x")
    copies = NodeCopies(["localhost"], str(theirs), [str(kernel)])
    with pytest.raises(StagingError, match="localhost.*not owned by this user"):
        copies.node_path(str(kernel))
    assert list(theirs.iterdir()) == []


def test_a_multi_node_launch_runs_the_copies(tmp_path):
    clone = tmp_path / "clone"
    clone.mkdir()
    kernel = clone / "kernel"
    kernel.write_text("#!/bin/sh\n")
    set_node_copies(NodeCopies(["localhost"], str(tmp_path / "stage"), [str(clone)]))
    launch = Launch((str(kernel), "1"), Placement(ranks=2, nodes=2, bind_to="none", map_by="node"), {})
    site = Site("mpirun", Inventory([Host("n1"), Host("n2")], "test")).for_run(tmp_path)
    cmd = site.launch_command(launch)
    assert cmd[-2:] == [f"{tmp_path}/stage{kernel}", "1"]
    assert Site().launch_command(Launch((str(kernel),), None, {})) == [str(kernel)]  # this machine: its own path


# ---------------------------------------------------------------- on the virtual cluster


@pytest.fixture
def clone(cluster):
    """The package copied to a new folder under /tmp, with a venv of its own there: what a user's
    `git clone` into `mktemp -d` is, as far as the nodes can see (nothing of it)."""
    folder = Path(tempfile.mkdtemp(prefix="cbclone-", dir="/tmp"))
    shutil.copytree(ROOT / "src", folder / "src", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([os.path.realpath(sys.executable), "-m", "venv", "--without-pip", str(folder / ".venv")],
                   check=True, timeout=120)
    python = folder / ".venv" / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # the copy first; the dependencies (typer, rich, ...) where the Python that runs the tests finds them
    ours = {str(ROOT / "src"), str(ROOT)}
    found = [p for p in sys.path if p and os.path.isdir(p) and os.path.abspath(p) not in ours]
    Path(purelib, "clone.pth").write_text("\n".join([str(folder / "src"), *found]) + "\n")
    yield folder, python
    shutil.rmtree(folder, ignore_errors=True)


def run_clone(python: Path, *args: str, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    full = dict(os.environ) | {"COLUMNS": "400"} | env
    return subprocess.run([str(python), "-m", "clusterbench", *args], capture_output=True, text=True, env=full,
                          timeout=timeout, cwd="/")


CAMPAIGN = """name: {name}
cluster: {{launcher: mpirun, hosts: 'node1,node2'}}
benchmarks:
  - benchmark: pingpong
    params: {{nodes: 2, interconnect: tcp, bind_to: none, max_log2: 10, iter: 50, rounds: 1}}
"""


@pytest.mark.cluster
def test_a_clone_under_tmp_is_refused_naming_each_node_and_path(clone, tmp_path):
    folder, python = clone
    private = Path(tempfile.mkdtemp(prefix="cb-private-", dir="/tmp"))  # the run directory too: node-local
    try:
        spec = tmp_path / "c.yaml"
        spec.write_text(CAMPAIGN.format(name="paths-refused"))
        db = private / "results.db"
        out = run_clone(python, "campaign", "run", str(spec),
                        env={"CLUSTERBENCH_CACHE": str(private / "cache"), "CLUSTERBENCH_DB": str(db),
                             "CLUSTERBENCH_STAGE": "0"})  # not staged, even in a suite that stages
        text = out.stdout + out.stderr
        assert out.returncode == 1, text
        assert "preflight failed" in text and "Traceback" not in text
        for node in ("node1", "node2"):
            for path in (folder / ".venv" / "bin" / "python", folder / "src" / "clusterbench" / "pinning" / "probe.py",
                         private / "cache"):
                assert any(node in line and f"cannot reach {path}" in line for line in text.splitlines()), (node, path)
        assert "CLUSTERBENCH_CACHE" in text and "--stage" in text
        assert f"{private / 'runs'} is not the head's directory" in text  # the store is checked as before
        assert not db.exists() or not query(db, "SELECT id FROM runs")  # nothing ran
    finally:
        shutil.rmtree(private, ignore_errors=True)


@pytest.mark.cluster
def test_a_clone_under_tmp_runs_with_stage_from_node_local_copies(clone, shared_db, tmp_path):
    folder, python = clone
    cache = Path(tempfile.mkdtemp(prefix="cb-cache-", dir="/tmp"))
    stage_dir = f"/tmp/cb-stage-test-{uuid.uuid4().hex[:8]}"
    try:
        spec = tmp_path / "c.yaml"
        spec.write_text(CAMPAIGN.format(name="paths-staged"))
        env = {"CLUSTERBENCH_CACHE": str(cache), "CLUSTERBENCH_DB": str(shared_db),
               "CLUSTERBENCH_STAGE_DIR": stage_dir}
        out = run_clone(python, "campaign", "run", str(spec), "--stage", env=env)
        assert out.returncode == 0, out.stdout + out.stderr
        runs = query(shared_db, "SELECT status, valid, nodes, command, facts FROM runs")
        assert [(r["status"], r["valid"], r["nodes"]) for r in runs] == [("ok", 1, "node[1-2]")]
        command = runs[0]["command"]
        assert f"{stage_dir}{folder}/src/clusterbench/pinning/probe.py" in command  # the probe's copy
        assert f"{stage_dir}{cache}/pingpong-" in command  # the kernel, built after the preflight, copied on use
        assert str(folder / ".venv") not in command  # the venv's interpreter is not run on the nodes
        facts = json.loads(runs[0]["facts"])
        assert facts["pinning"]["verdict"] == "match"  # every rank's probe record came back
        assert sorted(r["host"] for r in facts["pinning"]["ranks"]) == ["node1", "node2"]
        assert all(facts["state"][n]["clock"]["status"] == "measured" for n in ("node1", "node2"))  # staged too
        assert query(shared_db, "SELECT count(*) FROM metrics")[0][0] > 0
        listed = vc("exec", "node1", "ls", f"{stage_dir}{cache}").stdout
        assert "pingpong-" in listed
        assert not Path(stage_dir).exists()  # the head itself is not a node here: nothing copied to its /tmp
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        for node in ("node1", "node2"):
            vc("exec", node, "rm", "-rf", stage_dir, check=False)
