"""Hosts, node facts, preflight rules, launch command lines and Slurm scripts, without a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.campaign.spec import parse_campaign
from clusterbench.cluster.facts import parse_probe
from clusterbench.cluster.preflight import NodeFacts, clocks, odd_ones_out
from clusterbench.errors import UserInputError
from clusterbench.launch import slurm
from clusterbench.launch.hosts import Host, Inventory, _slurm_counts, inventory, parse_hostfile, slurm_allocation
from clusterbench.launch.mpirun import MpiLaunch, mpirun_command
from clusterbench.launch.remote import Answer, fold, run_everywhere
from clusterbench.launch.site import Site, SlurmOptions, SrunOptions, srun_command
from clusterbench.system.mpi import MpiStack


def test_hostfile_forms_are_read_in_order():
    text = "# cluster\nnode1 slots=4 max_slots=8\nnode2:2\nnode[3-4]\n\n"
    inv = parse_hostfile(text, "hosts.txt")
    assert inv.hosts == [Host("node1", 4), Host("node2", 2), Host("node3"), Host("node4")]
    assert inv.nodeset(3) == "node[1-3]"


def test_hostfile_duplicate_and_empty_are_errors():
    with pytest.raises(UserInputError, match="listed twice"):
        parse_hostfile("node1\nnode1 slots=2\n")
    with pytest.raises(UserInputError, match="names no host"):
        parse_hostfile("# nothing\n")


def test_nodeset_and_too_many_nodes():
    inv = inventory("pi[01-03],head")
    assert inv.names == ["pi01", "pi02", "pi03", "head"]
    with pytest.raises(UserInputError, match="5 nodes asked for"):
        inv.first(5)
    with pytest.raises(UserInputError, match="not a node set"):
        inventory("node[1-")


def test_slurm_allocation_from_environment():
    inv = slurm_allocation({"SLURM_JOB_NODELIST": "c[1-3]", "SLURM_JOB_CPUS_PER_NODE": "4(x2),2"})
    assert [(h.name, h.slots) for h in inv.hosts] == [("c1", 4), ("c2", 4), ("c3", 2)]
    assert _slurm_counts("garbage", 2) == [None, None]
    with pytest.raises(UserInputError, match="not inside a Slurm allocation"):
        slurm_allocation({})


def test_local_commands_run_in_parallel_and_fold():
    import socket

    me = socket.gethostname()
    answers = run_everywhere([me, "localhost"], "echo same; exit 0")
    assert [a.ok for a in answers] == [True, True]
    groups = fold(answers + [Answer("x", 255, "", "ssh: connect to host x port 22: Connection refused")])
    assert groups[0][0] == [me, "localhost"] and groups[1][0] == ["x"]


PROBE = """@@cb:clock
1000.5
@@cb:hostname
node2
@@cb:lscpu
Architecture:            x86_64
CPU(s):                  4
Thread(s) per core:      1
Core(s) per socket:      4
Socket(s):               1
Model name:              Test CPU
@@cb:meminfo
MemTotal:        8000000 kB
MemAvailable:    6000000 kB
@@cb:kernel
6.1.0
@@cb:os
Debian GNU/Linux 12 (bookworm)
@@cb:mpi
mpirun (Open MPI) 4.1.4
@@cb:blas
/usr/lib/x86_64-linux-gnu/blis-openmp/libblas.so.3
@@cb:resolve
node1 10.0.0.1
node2 10.0.0.2
@@cb:sha256
abc123  /opt/xhpl
missing /opt/hpcc
@@cb:end
"""


def test_probe_output_becomes_node_facts():
    f = parse_probe(Answer("node2", 0, PROBE, ""), sent_at=1000.0, answered_at=1000.2)
    assert f.reachable and f.hostname == "node2" and f.cores == 4
    assert f.memory.available_bytes == 6000000 * 1024
    assert (f.mpi, f.blas, f.kernel) == ("Open MPI 4.1.4", "blis-openmp", "6.1.0")
    assert f.clock_skew_s == pytest.approx(0.4) and f.clock_uncertainty_s == pytest.approx(0.1)
    assert f.resolved == {"node1": "10.0.0.1", "node2": "10.0.0.2"}
    assert f.checksums == {"/opt/xhpl": "abc123", "/opt/hpcc": None}
    down = parse_probe(Answer("node3", 255, "", "ssh: connect to host node3 port 22: Connection refused"), 0, 0)
    assert not down.reachable and "Connection refused" in down.error


def test_the_odd_node_out_is_named_and_clock_skew_allows_for_the_round_trip():
    facts = [NodeFacts(f"n{i}", True, blas=b) for i, b in enumerate(["serial", "serial", "blis"])]
    problems = odd_ones_out(facts, "BLAS variant", lambda f: f.blas)
    assert [(p.node, p.detail) for p in problems] == [("n2", "blis where the other nodes have serial")]
    skewed = [NodeFacts("a", True, clock_skew_s=3.0, clock_uncertainty_s=0.5),
              NodeFacts("b", True, clock_skew_s=1.2, clock_uncertainty_s=0.5)]
    assert [p.node for p in clocks(skewed, 1.0)] == ["a"]


def test_mpirun_lines_for_hosts_interconnect_and_ranking(tmp_path: Path):
    site = Site("mpirun", Inventory([Host("n1"), Host("n2"), Host("n3")], "test"), interconnect="tcp",
                net_if="eth1", rank_by="core", mpi_args=["--report-bindings"]).for_run(tmp_path)
    cmd = site.command(MpiLaunch(ranks=4, env={"OMP_NUM_THREADS": "1"}, bind_to="core"), ["./a.out"], nodes=2)
    assert (tmp_path / "hostfile").read_text() == "n1 slots=2\nn2 slots=2\n"
    line = " ".join(cmd)
    assert f"--hostfile {tmp_path / 'hostfile'}" in line and "--rank-by core" in line
    assert "--mca btl self,tcp" in line and "--mca btl_tcp_if_include eth1" in line and "-x OMP_NUM_THREADS" in line
    assert cmd[-2:] == ["--report-bindings", "./a.out"]
    mpich = MpiStack("mpich", "MPICH", "4.0.2", "mpirun.mpich", "mpicc.mpich", "mpicxx.mpich")
    hydra = mpirun_command(MpiLaunch(ranks=4, hostfile="hf", ranks_per_node=2, interconnect="tcp",
                                     env={"A": "1"}), ["./a.out"], mpich)
    assert hydra[1:5] == ["-n", "4", "-f", "hf"] and "-ppn" in hydra
    assert "MPIR_CVAR_NOLOCAL" in hydra and ["-genv", "A", "1"] == hydra[hydra.index("A") - 1:hydra.index("A") + 2]


def test_shared_memory_cannot_join_nodes_and_local_cannot_have_two(tmp_path: Path):
    site = Site("mpirun", Inventory([Host("n1"), Host("n2")], "t"), interconnect="shm").for_run(tmp_path)
    with pytest.raises(UserInputError, match="cannot join several nodes"):
        site.command(MpiLaunch(ranks=2), ["x"], nodes=2)
    with pytest.raises(UserInputError, match="needs several hosts"):
        Site().command(MpiLaunch(ranks=2), ["x"], nodes=2)


def test_srun_line_and_batch_script(tmp_path: Path):
    cmd = srun_command(MpiLaunch(ranks=4, env={"OMP_NUM_THREADS": "2"}), ["./probe"],
                       SrunOptions(cpu_bind="cores", distribution="block:cyclic", hint="nomultithread"), nodes=2)
    assert cmd[:4] == ["srun", "--nodes=2", "--ntasks=4", "--cpus-per-task=2"]
    assert "--cpu-bind=cores" in cmd and "--distribution=block:cyclic" in cmd and "--mpi=pmix" in cmd
    req = slurm.JobRequest("cb-x", tmp_path, ["mpirun", "-np", "4", "hpcc"], {"OMP_NUM_THREADS": "1"},
                           nodes=2, tasks_per_node=2, cpus_per_task=1, timeout_s=125)
    script = slurm.render_script(req, SlurmOptions(partition="debug", sbatch_args=["--constraint=ib"]))
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=2", "#SBATCH --exclusive",
                 "#SBATCH --time=0-00:04:00", "#SBATCH --partition=debug", "#SBATCH --constraint=ib",
                 "export OMP_NUM_THREADS=1", "mpirun -np 4 hpcc", f"#SBATCH --chdir={tmp_path}"):
        assert line in script
    assert slurm.parse_elapsed("1-02:03:04") == 93784 and slurm.parse_elapsed("05:06") == 306


def test_cluster_section_is_validated_with_its_line():
    text = "name: c\ncluster:\n  launcher: mpirun\n  hosts: node[1-2]\n  slurm:\n    srun: {cpu_bnd: cores}\n" \
           "benchmarks:\n  - benchmark: stream\n"
    with pytest.raises(UserInputError) as err:
        parse_campaign(text, "c.yaml")
    assert "c.yaml:6" in str(err.value) and "cpu_bind" in str(err.value)
    ok, _ = parse_campaign(text.replace("cpu_bnd", "cpu_bind"), "c.yaml")
    assert ok.cluster.slurm.srun.cpu_bind == "cores" and ok.cluster.interconnect == "auto"


def test_a_probe_that_does_not_answer_is_killed_with_its_whole_process_group():
    """preflight's hello-world runs mpirun in a process group of its own: on a timeout the group goes whole (what
    mpirun started too, ssh clients among them), so a second attempt does not compete with the first. A shell
    and its background child stand in for mpirun and its ssh clients (real processes; no MPI is needed here)."""
    import os
    import random
    import time

    from clusterbench.cluster.preflight import _probe

    marker = f"{400 + random.randrange(1, 10**6) / 10**6:.6f}"  # a sleep no one else runs

    def sleeping() -> list[int]:
        found = []
        for name in os.listdir("/proc"):
            try:
                if name.isdigit() and open(f"/proc/{name}/cmdline", "rb").read().split(b"\0")[:2] == [
                        b"sleep", marker.encode()]:
                    found.append(int(name))
            except OSError:
                pass
        return found

    t0 = time.monotonic()
    assert _probe(["sh", "-c", f"sleep {marker} & sleep {marker}; echo never"], 1.0) is None
    assert time.monotonic() - t0 < 15
    deadline = time.monotonic() + 10
    while sleeping() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sleeping() == []  # both sleeps, the background one included
    done = _probe(["sh", "-c", "echo rank-0-answered"], 30.0)
    assert done is not None and done.returncode == 0 and done.stdout.strip() == "rank-0-answered"
