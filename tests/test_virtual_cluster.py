"""Multi-node runs on the virtual cluster (scripts/virtual-cluster): real sshd, mpirun over ssh,
real Slurm daemons (slurmctld, one slurmd per node), real network namespaces.

`.ci/run` brings a 3-node cluster up before `make test` and down after; run alone, the module
brings one up itself (root only) and takes it down at the end. The nodes share this machine's
two cores, so speeds here say nothing about a real cluster; the tests check where ranks ran,
what was stored, and orderings that hold even so (shared memory is faster than TCP between
namespaces).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import cli, interruptible, query, vc

from clusterbench.pinning.strategies import expressible

pytestmark = pytest.mark.cluster


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def metric(db: Path, run_like: str, name: str, labels_like: str = "%") -> float:
    """The first value of a metric of a run; labels matched without blanks (the store writes compact JSON)."""
    found = query(db, "SELECT m.value FROM metrics m JOIN runs r ON r.id = m.run_id WHERE r.id LIKE ? "
                     "AND m.name = ? AND replace(m.labels, ' ', '') LIKE ?", run_like, name, labels_like)
    assert found, f"no {name} for {run_like}"
    return found[0][0]


HPCC_BLOCK = """
benchmarks:
  - benchmark: hpcc
    # one rank per node: the virtual nodes share this machine's two cores
    params: {n: 600, nb: 100, ranks: {expr: nodes}, threads: 1, bind_to: none}
    space: {nodes: [1, 2]}
"""


def test_hpcc_over_one_and_two_nodes_through_mpirun_and_slurm(shared_db, tmp_path):
    mpirun = write(tmp_path / "mpirun.yaml", "name: vc-mpirun\ncluster:\n  launcher: mpirun\n  hosts: node[1-3]\n"
                   "  interconnect: tcp\n" + HPCC_BLOCK)
    batch = write(tmp_path / "slurm.yaml", "name: vc-slurm\ncluster:\n  launcher: slurm\n  interconnect: tcp\n"
                  "  slurm: {poll: 0.5}\n" + HPCC_BLOCK)
    for campaign in (mpirun, batch):
        out = cli("campaign", "run", str(campaign), "--json")
        assert out.returncode == 0, out.stdout + out.stderr
        assert json.loads(out.stdout)["ok"] == 2
    stored = query(shared_db, "SELECT campaign, nodes, launcher, status, params FROM runs ORDER BY campaign, nodes")
    seen = {(r["campaign"], json.loads(r["params"])["nodes"]): r for r in stored}
    assert seen[("vc-mpirun", 1)]["nodes"] == "node1" and seen[("vc-mpirun", 2)]["nodes"] == "node[1-2]"
    for key, r in seen.items():
        launcher = json.loads(r["launcher"])
        assert r["status"] == "ok" and launcher["launcher"] == key[0][3:] and launcher["interconnect"] == "tcp"
        if key[0] == "vc-slurm":
            job = launcher["slurm_job"]
            assert job["state"] == "COMPLETED" and job["nodes"] == r["nodes"]
            assert len(r["nodes"].split(",")) == 1 and (key[1] == 1) == ("[" not in r["nodes"])
    # the process grid follows the rank count: two nodes ran a 1x2 grid
    assert metric(shared_db, "vc-mpirun-%", "CommWorldProcs", "%") in (1.0, 2.0)


needs_mpich = pytest.mark.skipif(not shutil.which("mpirun.mpich"), reason="needs Debian's mpich (make setup)")


@pytest.mark.parametrize("mpi", ["openmpi", pytest.param("mpich", marks=needs_mpich)])
def test_ping_pong_between_nodes_is_slower_than_within_one(shared_db, tmp_path, mpi):
    # A limit per run: CI once waited 600 s on this campaign (MPICH, 2026-12-01; 8 of 8 runs here took 20-30 s);
    # a hung run is then killed by the runner and stored as timed out, its output kept for the message below.
    campaign = write(tmp_path / "pp.yaml", f"name: vc-pingpong-{mpi}\ntimeout: 2m\n" + """
cluster: {launcher: mpirun, hosts: "node[1-2]", mpi: MPI}
benchmarks:
  - benchmark: pingpong
    name: shm
    params: {nodes: 1, interconnect: shm, max_log2: 20, iter: 200, rounds: 1}
  - benchmark: pingpong
    name: tcp-in-node
    params: {nodes: 1, interconnect: tcp, max_log2: 20, iter: 200, rounds: 1}
  - benchmark: pingpong
    name: tcp-two-nodes
    # not bound: each namespace node would bind its rank to the same physical core 0
    params: {nodes: 2, interconnect: tcp, bind_to: none, max_log2: 20, iter: 200, rounds: 1}
""".replace("MPI", mpi))
    out = cli("campaign", "run", str(campaign), "--json")
    stuck = query(shared_db, "SELECT id, status, reason, workdir FROM runs WHERE status != 'ok' AND campaign = ?",
                  f"vc-pingpong-{mpi}")
    assert out.returncode == 0 and not stuck, out.stdout[-2000:] + out.stderr[-2000:] + "".join(
        f"\n{r['id']} {r['status']}: {r['reason']}\n" + _tail_of(r["workdir"]) for r in stuck)
    by_block = {}
    for r in query(shared_db, "SELECT id, nodes, tags, command FROM runs"):
        by_block[json.loads(r["tags"])["block"]] = (r["id"], r["nodes"])
        assert ("mpirun.mpich" in r["command"]) == (mpi == "mpich")
    assert by_block["tcp-two-nodes"][1] == "node[1-2]"
    lat = {b: metric(shared_db, rid, "latency_us", '%"bytes":0}%') for b, (rid, _) in by_block.items()}
    bw = {b: metric(shared_db, rid, "pingpong_bandwidth", "%\"bytes\":1048576%") for b, (rid, _) in by_block.items()}
    print("latency us", lat, "bandwidth MB/s at 1 MiB", bw)
    # Latency tells the paths apart (shm 0.25 us, TCP 10-13 us). At 1 MiB both paths are memory copies on the
    # host the virtual nodes share, and on shared cores the shm ranks' busy polling loses most to other work:
    # a clone run read shm 1,601 MB/s, TCP within the node 1,081 and TCP across nodes 1,931 (MPICH, 2026-12-02).
    # So bandwidth is only checked to be measured, not ordered.
    assert lat["tcp-two-nodes"] > lat["shm"] and lat["tcp-in-node"] > lat["shm"]
    assert all(v > 0 for v in bw.values()), bw


def _tail_of(workdir: str | None) -> str:
    """The last lines of a run's outputs, to say where a run that failed or hung stopped."""
    if not workdir or not Path(workdir).is_dir():
        return ""
    return "".join(f"--- {f.name}\n{f.read_text(errors='replace')[-1500:]}\n" for f in sorted(Path(workdir).iterdir())
                   if f.is_file() and f.stat().st_size < 10_000_000)


def placements(db: Path, campaign: str) -> set[tuple]:
    facts = json.loads(query(db, "SELECT facts FROM runs WHERE campaign = ?", campaign)[0]["facts"])
    return {(p["host"], p["rank"], tuple(p["allowed"])) for p in facts["placement"]}


def test_binding_by_mpirun_and_by_srun_is_what_the_probe_sees(shared_db, tmp_path):
    block = "benchmarks:\n  - benchmark: affinity\n    params: {nodes: 2, ranks: 4, threads: 1, bind_to: core}\n"
    write(tmp_path / "m.yaml", "name: vc-bind-mpirun\ncluster: {launcher: mpirun, hosts: 'node[1-2]'}\n" + block)
    write(tmp_path / "s.yaml", "name: vc-bind-srun\ncluster:\n  launcher: slurm\n  slurm:\n    poll: 0.5\n"
          "    srun: {cpu_bind: cores, distribution: block}\n" + block)
    for name in ("m", "s"):
        out = cli("campaign", "run", str(tmp_path / f"{name}.yaml"), "--json")
        assert out.returncode == 0, out.stdout + out.stderr
    by_mpirun, by_srun = placements(shared_db, "vc-bind-mpirun"), placements(shared_db, "vc-bind-srun")
    expected = {("node1", 0, (0,)), ("node1", 1, (1,)), ("node2", 2, (0,)), ("node2", 3, (1,))}
    assert by_mpirun == expected
    assert by_srun == expected
    srun_cmd = query(shared_db, "SELECT command FROM runs WHERE campaign = 'vc-bind-srun'")[0]["command"]
    assert "--cpu-bind=cores" in srun_cmd and "--bind-to core" in query(
        shared_db, "SELECT command FROM runs WHERE campaign = 'vc-bind-mpirun'")[0]["command"]


@needs_mpich
def test_hydra_binds_ranks_on_two_nodes_as_the_probe_sees(shared_db, tmp_path):
    """MPICH's Hydra over ssh: -f hostfile, -ppn 2, -bind-to core (Hydra user guide)."""
    write(tmp_path / "h.yaml", "name: vc-bind-hydra\ncluster: {launcher: mpirun, hosts: 'node[1-2]', mpi: mpich}\n"
          "benchmarks:\n  - benchmark: affinity\n    params: {nodes: 2, ranks: 4, threads: 1, bind_to: core}\n")
    out = cli("campaign", "run", str(tmp_path / "h.yaml"), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    assert placements(shared_db, "vc-bind-hydra") == {("node1", 0, (0,)), ("node1", 1, (1,)),
                                                       ("node2", 2, (0,)), ("node2", 3, (1,))}
    command = query(shared_db, "SELECT command FROM runs WHERE campaign = 'vc-bind-hydra'")[0]["command"]
    assert "mpirun.mpich" in command and "-ppn 2" in command and "-bind-to core" in command


def test_preflight_names_the_broken_nodes_and_nothing_runs(shared_db, tmp_path):
    binary = shared_db.parent / "hpcc-copy"
    shutil.copy("/usr/bin/hpcc", binary)
    other = shared_db.parent / "hpcc-other"
    other.write_bytes(binary.read_bytes() + b"\0")
    other.chmod(0o755)
    campaign = write(tmp_path / "broken.yaml", f"""
name: vc-broken
cluster: {{launcher: mpirun, hosts: "node[1-3]"}}
benchmarks:
  - benchmark: hpcc
    params: {{n: 600, nb: 100, nodes: 3, ranks: 3, threads: 1, bind_to: none, binary: {binary}}}
""")
    vc("sshd", "node3", "stop")
    vc("link", "node1", "down")
    vc("exec", "node2", "mount", "--bind", str(other), str(binary))
    try:
        out = cli("campaign", "run", str(campaign))
    finally:
        vc("sshd", "node3", "start")
        vc("link", "node1", "up")
        vc("exec", "node2", "umount", str(binary))
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert "preflight failed" in text and "did not start" in text
    problems = {line.split("│")[1].strip(): line for line in text.splitlines()
                if line.startswith("│") and "node" in line.split("│")[1]}
    assert "timed out" in problems["node1"] or "no answer" in problems["node1"]
    assert "checksum" in problems["node2"]
    assert "refused" in problems["node3"]
    assert not shared_db.exists() or not query(shared_db, "SELECT id FROM runs")


def squeue_names() -> list[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_interrupting_a_slurm_campaign_cancels_its_jobs_and_a_rerun_resumes(shared_db, tmp_path):
    campaign = write(tmp_path / "sleepy.yaml", """
name: vc-sleepy
cluster: {launcher: slurm, slurm: {poll: 0.5}}
benchmarks:
  - benchmark: command
    params:
      command: "sleep {seconds}; echo slept {seconds}"
      metrics: [{name: slept, pattern: 'slept (\\d+)', unit: s}]
    space: {seconds: [1, 8, 9, 10, 11]}
""")
    env = dict(os.environ, COLUMNS="200")
    proc = subprocess.Popen([sys.executable, "-m", "clusterbench", "campaign", "run", str(campaign)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=interruptible)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len([n for n in squeue_names() if n.startswith("cb-vc-sleepy")]) < 4:
        time.sleep(0.3)
    queued = [n for n in squeue_names() if n.startswith("cb-vc-sleepy")]
    assert len(queued) >= 4, queued
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    left, deadline = ["?"], time.monotonic() + 30  # scancel is asynchronous: a cancelled job leaves the queue soon
    while left and time.monotonic() < deadline:
        left = [n for n in squeue_names() if n.startswith("cb-vc-sleepy")]
        time.sleep(0.3 if left else 0)
    assert not left, f"jobs left in the queue 30 s after the runner stopped: {left}"
    statuses = [r["status"] for r in query(shared_db, "SELECT status FROM runs WHERE campaign = 'vc-sleepy'")]
    assert "interrupted" in statuses
    # Run again: finished runs are kept, the interrupted ones are submitted again.
    out = cli("campaign", "run", str(campaign), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    summary = json.loads(out.stdout)
    finished_before = statuses.count("ok")
    assert summary["skipped"] == finished_before and summary["executed"] == 5 - finished_before, summary
    final = [r["status"] for r in query(shared_db, "SELECT status FROM runs WHERE campaign = 'vc-sleepy'")]
    assert final == ["ok"] * 5, (summary, final)


def test_down_leaves_nothing_behind(cluster):
    """A second, one-node virtual cluster under another name, up and down."""
    args = ["--name", "cbvt", "--prefix", "tnode", "--subnet", "10.78.0", "--port", "6917"]
    vc("up", "1", *args)
    try:
        assert subprocess.run(["ssh", "tnode1", "hostname"], capture_output=True, text=True).stdout.strip() == "tnode1"
    finally:
        vc("down", *args)
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    procs = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "cbvt-" not in netns and "cbvtbr" not in links and "cbvtv" not in links
    assert "/run/clusterbench-vc/cbvt" not in procs
    assert not Path("/run/clusterbench-vc/cbvt").exists()
    assert "cbvt" not in Path("/etc/hosts").read_text()
    assert not Path("/etc/ssh/ssh_config.d/clusterbench-cbvt.conf").exists()
    assert not Path("/etc/netns/cbvt-1").exists()
    # the main cluster is untouched
    assert vc("status").returncode == 0


def _pin_verdicts(db: Path, campaign: str) -> dict[tuple, tuple]:
    out = {}
    for r in query(db, "SELECT params, facts, nodes, status FROM runs WHERE campaign = ?", campaign):
        params, facts = json.loads(r["params"]), json.loads(r["facts"])
        pinning = facts.get("pinning") or {}
        hosts = tuple(row["host"] for row in pinning.get("ranks", []))
        out[(params["pinning"], params["threads"])] = (r["status"], pinning.get("verdict"), hosts,
                                                       pinning.get("problems"))
    return out


PIN_BLOCK = """
env: {OMP_PROC_BIND: close, OMP_PLACES: cores}
benchmarks:
  - benchmark: affinity
    name: tasks
    params: {nodes: 2, ranks: 4, threads: 1, hold_ms: 300}
    space: {pinning: STRATEGIES}
  - benchmark: affinity
    name: hybrid
    params: {nodes: 2, ranks: 2, threads: 2, hold_ms: 300}
    space: {pinning: HYBRID}
"""
HYBRID = ["default", "cores", "threads"]  # the two-thread block: fewer strategies, to keep CI short


@pytest.mark.parametrize("mpi", ["openmpi", pytest.param("mpich", marks=needs_mpich)])
def test_every_strategy_runs_where_predicted_over_two_nodes_through_mpirun(shared_db, tmp_path, mpi):
    """Each rank's CPUs and each thread's, sampled on its node, equal the prediction, for every
    strategy this MPI can express, 4 one-thread ranks and 2 two-thread ranks over two nodes."""
    strategies = expressible("hydra" if mpi == "mpich" else "openmpi")
    write(tmp_path / "p.yaml", f"name: vc-pin-{mpi}\ncluster: {{launcher: mpirun, hosts: 'node[1-2]', mpi: {mpi}}}\n"
          + PIN_BLOCK.replace("STRATEGIES", json.dumps(strategies)).replace("HYBRID", json.dumps(HYBRID)))
    out = cli("campaign", "run", str(tmp_path / "p.yaml"), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    seen = _pin_verdicts(shared_db, f"vc-pin-{mpi}")
    assert len(seen) == len(strategies) + len(HYBRID)
    assert {k: v for k, v in seen.items() if v[:2] != ("ok", "match")} == {}
    assert seen[("default", 1)][2] == ("node1", "node1", "node2", "node2")
    assert seen[("default", 2)][2] == ("node1", "node2")


def test_every_strategy_runs_where_predicted_through_srun(shared_db, tmp_path):
    """The same with Slurm's srun (stock task/affinity) inside batch jobs: all nine strategies for the
    one-thread ranks, five for the two-thread ranks."""
    strategies = expressible("srun")
    write(tmp_path / "s.yaml", "name: vc-pin-srun\ncluster:\n  launcher: slurm\n  slurm:\n    poll: 0.5\n"
          "    srun: {}\n" + PIN_BLOCK.replace("STRATEGIES", json.dumps(strategies)).replace(
              "HYBRID", json.dumps(HYBRID + ["socket-fcyclic", "core-cyclic"])))
    out = cli("campaign", "run", str(tmp_path / "s.yaml"), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    seen = _pin_verdicts(shared_db, "vc-pin-srun")
    assert len(strategies) == 9 and len(seen) == 9 + len(HYBRID) + 2
    assert {k: v for k, v in seen.items() if v[:2] != ("ok", "match")} == {}
    assert seen[("default", 1)][2] == ("node1", "node1", "node2", "node2")
