"""The virtual cluster's Slurm accounting (slurmdbd over a private MariaDB), its per-node CPU
cgroups, and the two ways to make one node differ: a CPU hog and a capped cable.

The accounting and cgroup tests use the cluster `.ci/run` brings up (scripts/virtual-cluster up 3),
read only but for one small batch job; $CLUSTERBENCH_VC_NAME names another one. The hog, the
link rate and `down` are tried on a two-node cluster of their own (`cbacc`), so that the shared
one is never slowed down or changed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from tests.conftest import ROOT

pytestmark = pytest.mark.cluster

SCRIPT = ROOT / "scripts" / "virtual-cluster"
VC_NAME = os.environ.get("CLUSTERBENCH_VC_NAME", "cbvc")
VC_STATE = Path("/run/clusterbench-vc") / VC_NAME

OWN = "cbacc"  # the module's own small cluster: name, node names, subnet and ports no other test uses
OWN_STATE = Path("/run/clusterbench-vc") / OWN
OWN_PLACE = ["--name", OWN, "--prefix", "anode", "--subnet", "10.83.0", "--port", "7317"]


def run(*argv: str, timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ) | (env or {}))


def script(*args: str) -> subprocess.CompletedProcess:
    return run(str(SCRIPT), *args, timeout=180)


def cpu_cgroup(pid: int | str) -> str:
    """The process's cgroup of the cpu controller (v1), or its only one (v2)."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
    return next(line.split(":", 2)[2] for line in lines if line.startswith("0::"))


def cgroup_of_output(text: str) -> str:
    """The same, from the text of /proc/self/cgroup as a node printed it."""
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
    return next(line.split(":", 2)[2] for line in text.splitlines() if line.startswith("0::"))


# ---------------------------------------------------------------- the shared cluster, read only


@pytest.fixture(scope="module")
def vc() -> dict:
    if os.geteuid() != 0 or not (VC_STATE / "size").exists():
        pytest.skip(f"needs the virtual cluster '{VC_NAME}' up (scripts/virtual-cluster up 3, as root)")
    prefix = (VC_STATE / "prefix").read_text().strip()
    return {"nodes": [f"{prefix}{i}" for i in (1, 2, 3)], "env": {"SLURM_CONF": str(VC_STATE / "slurm/slurm.conf")}}


def test_sacct_reports_a_finished_batch_job(vc):
    flag = VC_STATE / "accounting"
    if not flag.exists() or flag.read_text().strip() != "1":
        pytest.skip(f"'{VC_NAME}' is up without accounting (--no-accounting, or an older scripts/virtual-cluster)")
    node = vc["nodes"][1]
    busy = "end=$((SECONDS + 3)); while [ $SECONDS -lt $end ]; do :; done; exit 3"
    out = run("sbatch", "--parsable", "-N1", "-w", node, "-J", "cb-acct-test", "-o", "/dev/null",
              "--wrap", f"bash -c '{busy}'", env=vc["env"])
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip().split(";")[0]
    fields = "JobID,State,ExitCode,ElapsedRaw,NodeList,ConsumedEnergyRaw,TotalCPU"
    deadline, row = time.monotonic() + 60, []
    while time.monotonic() < deadline:
        acct = run("sacct", "-j", job, "-P", "-n", "-X", "-o", fields, env=vc["env"])
        row = acct.stdout.strip().split("|")
        if len(row) == 7 and row[1] not in ("PENDING", "RUNNING", "COMPLETING"):
            break
        time.sleep(0.5)
    assert row[:3] == [job, "FAILED", "3:0"], row
    assert int(row[3]) >= 2 and row[4] == node, row
    assert row[5] in ("", "0"), row  # no energy plugin: no RAPL in here
    # The job line (-X) does not sum its steps' CPU time; the batch step has it, gathered from /proc.
    steps = run("sacct", "-j", job, "-P", "-n", "-o", "JobID,TotalCPU", env=vc["env"]).stdout.split()
    cpu = dict(line.split("|") for line in steps)[f"{job}.batch"]
    assert slurm_seconds(cpu) >= 0.3, steps  # busy for 2 s on a shared core


def slurm_seconds(text: str) -> float:
    """Slurm's [D-][HH:]MM:SS[.mmm] in seconds."""
    days, _, clock = text.rpartition("-")
    total = 0.0
    for part in clock.split(":"):
        total = total * 60 + float(part)
    return total + 86400 * int(days or 0)


def test_each_nodes_processes_run_in_its_own_cgroup(vc):
    if not (VC_STATE / "cgroup").exists():
        pytest.skip(f"'{VC_NAME}' has no per-node cgroups (no CPU controller, or an older scripts/virtual-cluster)")
    base = (VC_STATE / "cgroup").read_text().strip()
    rel = base.removeprefix("/sys/fs/cgroup/cpu").removeprefix("/sys/fs/cgroup")
    seen = set()
    for node in vc["nodes"]:
        mine = f"{rel}/{node}"
        for pidfile in (VC_STATE / f"{node}.pid", VC_STATE / "ssh" / f"{node}.pid",
                        VC_STATE / "slurm" / f"slurmd-{node}.pid"):
            assert cpu_cgroup(pidfile.read_text().strip()) == mine, pidfile
        over_ssh = run("ssh", node, "cat /proc/self/cgroup")
        assert cgroup_of_output(over_ssh.stdout) == mine, over_ssh.stdout + over_ssh.stderr
        seen.add(mine)
    node = vc["nodes"][2]
    by_srun = run("srun", "-N1", "-w", node, "cat", "/proc/self/cgroup", env=vc["env"])
    assert by_srun.returncode == 0, by_srun.stderr
    assert cgroup_of_output(by_srun.stdout) == f"{rel}/{node}"
    weights = {(Path(base) / n / w).read_text().strip() for n in vc["nodes"] for w in ("cpu.shares", "cpu.weight")
               if (Path(base) / n / w).exists()}
    assert len(seen) == 3 and len(weights) == 1


# ---------------------------------------------------------------- a small cluster of our own


@pytest.fixture(scope="module")
def own():
    if os.geteuid() != 0:
        pytest.skip("the virtual cluster needs root")
    for tool in ("sshd", "slurmctld", "slurmdbd", "mariadbd", "iperf3", "tc"):
        if not shutil.which(tool) and not Path("/usr/sbin", tool).exists():
            pytest.skip(f"needs {tool} (make setup)")
    if OWN_STATE.exists():  # left over from an interrupted run of this module
        script("down", "--name", OWN)
    up = script("up", "2", *OWN_PLACE)
    assert up.returncode == 0, up.stdout + up.stderr
    yield {"nodes": ["anode1", "anode2"], "env": {"SLURM_CONF": str(OWN_STATE / "slurm/slurm.conf")}}
    script("down", "--name", OWN)


def own_cmd(*args: str) -> subprocess.CompletedProcess:
    return script(*args, "--name", OWN)


def status_row(node: str) -> list[str]:
    out = own_cmd("status")
    return next(line.split() for line in out.stdout.splitlines() if line.startswith(node + " "))


def test_status_shows_the_accounting_daemons(own):
    out = own_cmd("status")
    assert out.returncode == 0, out.stderr
    assert re.search(r"^slurmdbd\s+up \(port 7319\)", out.stdout, re.M), out.stdout
    assert re.search(r"^mariadbd\s+up \(127\.0\.0\.1:7320", out.stdout, re.M), out.stdout
    conf = OWN_STATE / "slurm" / "slurmdbd.conf"
    assert conf.stat().st_mode & 0o777 == 0o600
    clusters = run("sacctmgr", "-n", "-P", "list", "cluster", "format=cluster", env=own["env"])
    assert clusters.stdout.split() == [OWN], clusters.stderr


def test_a_hog_runs_in_its_node_and_stops(own):
    assert own_cmd("hog", "anode9", "start").returncode == 1
    assert own_cmd("hog", "anode1", "start", "--threads", "0").returncode == 2
    out = own_cmd("hog", "anode2", "start", "--threads", "2")
    assert out.returncode == 0, out.stderr
    try:
        pid = (OWN_STATE / "hog" / "anode2.pid").read_text().strip()
        procs = (Path((OWN_STATE / "cgroup").read_text().strip()) / "anode2" / "cgroup.procs").read_text().split()
        assert pid in procs and len(procs) >= 5  # init, sshd, slurmd, the hog and its 2 loops
        assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")  # inside the node
        assert status_row("anode2")[-2:] == ["2", "thread(s)"]
        assert own_cmd("hog", "anode2", "start").returncode == 1  # one at a time
    finally:
        stop = own_cmd("hog", "anode2", "stop")
    assert stop.returncode == 0, stop.stderr
    assert f"/run/clusterbench-vc/{OWN}/hog/" not in run("ps", "-eo", "args").stdout
    assert status_row("anode2")[-1] == "-"


def iperf_mbit(node_from: str, node_to: str) -> float:
    """Megabits per second of one 1 MiB transfer, as the receiving iperf3 saw it."""
    assert run("ssh", node_to, "iperf3 -s -1 -D -p 5301").returncode == 0
    time.sleep(0.2)
    out = run("ssh", node_from, f"iperf3 -c {node_to} -p 5301 -n 1M -J")
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6


def test_one_nodes_cable_is_capped_and_uncapped(own):
    assert own_cmd("link", "anode1", "rate", "5foo").returncode == 2
    assert own_cmd("link", "anode9", "rate", "1gbit").returncode == 1
    out = own_cmd("link", "anode2", "rate", "100mbit")
    assert out.returncode == 0, out.stderr
    shaped = run("ip", "netns", "exec", f"{OWN}-2", "tc", "class", "show", "dev", "shaper").stdout
    assert "rate 100Mbit" in shaped
    assert status_row("anode2")[-2] == "100mbit" and status_row("anode1")[-2] == "-"
    assert iperf_mbit("anode1", "anode2") < 150
    out = own_cmd("link", "anode2", "rate", "unlimited")
    assert out.returncode == 0, out.stderr
    qdiscs = run("ip", "netns", "exec", f"{OWN}-2", "tc", "qdisc", "show", "dev", "eth0").stdout
    assert qdiscs.splitlines() == ["qdisc noqueue 0: root refcnt 2 "]
    assert run("ip", "netns", "exec", f"{OWN}-2", "ip", "link", "show", "shaper").returncode != 0
    assert iperf_mbit("anode1", "anode2") > 150


def test_down_leaves_nothing_even_without_the_pid_files(own):
    """As after a crash: the daemons' and the hog's pid files gone, `down` still stops everything."""
    assert own_cmd("hog", "anode1", "start").returncode == 0
    for pidfile in ("hog/anode1.pid", "slurm/slurmdbd.pid", "mariadb/mariadbd.pid", "slurm/slurmctld.pid"):
        (OWN_STATE / pidfile).unlink()
    cgroup = Path((OWN_STATE / "cgroup").read_text().strip())
    out = own_cmd("down")
    assert out.returncode == 0, out.stderr
    time.sleep(0.2)
    procs = run("ps", "-eo", "stat,args").stdout.splitlines()
    assert not [p for p in procs if f"/run/clusterbench-vc/{OWN}" in p and not p.startswith("Z")], procs
    listening = run("ss", "-Hltn").stdout
    assert not re.search(r":(7317|7319|7320)\s", listening), listening
    assert not cgroup.exists() and not OWN_STATE.exists()
    assert f"{OWN}-" not in run("ip", "netns", "list").stdout
    assert f"{OWN}br" not in run("ip", "-o", "link").stdout
    assert "anode" not in Path("/etc/hosts").read_text()
