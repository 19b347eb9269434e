"""The srun placement calculator (pinning/slurm.py, slurm_affinity.py, psslurm.py) against oracles.

No expectation here comes from the calculator itself. Each test names its source:
  * recorded: tests/fixtures/pinning/srun/<shape>.txt, the masks the real srun of Slurm 22.05.8 printed
    with --cpu-bind=verbose on the virtual cluster, its nodes declared with a topology fixture's shape
    (tests/fixtures/pinning/srun/record.sh says how; each file's header gives the node line);
  * cpu_management.html: the worked examples of Slurm's "CPU Management User and Administrator Guide",
    quoted by number, with the CPU ids of their tables;
  * psslurmpin.c: ParaStation psmgmt's plugins/psslurm/src/psslurm/psslurmpin.c (commit 01410ae7), its
    own comments or a hand trace of its code written down next to the test;
  * live: the real srun on the shared virtual cluster 'cbvc', only when it is already up.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from clusterbench.errors import UserInputError
from clusterbench.pinning.psslurm import (
    CYCLECORES,
    CYCLESOCKETS_CYCLECORES,
    CYCLESOCKETS_FILLCORES,
    FILLSOCKETS_CYCLECORES,
    FILLSOCKETS_FILLCORES,
    _Node,
)
from clusterbench.pinning.slurm import node_shape, parse_cpu_bind_verbose, parse_request, srun_placement
from clusterbench.pinning.slurm_affinity import node_masks
from clusterbench.system.sources import from_hwloc_synthetic, topology_from_file
from clusterbench.system.topology import NumaDomain, Topology, parse_cpulist

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGY = ROOT / "tests" / "fixtures" / "topology"
RECORDED = ROOT / "tests" / "fixtures" / "pinning" / "srun"
SHAPES = {"epyc7742": "epyc7742-synthetic.xml", "pascal": "cts1-pascal.xml", "quartz": "cts1-quartz-smt1.xml",
          "lassen": "coral-lassen.xml", "vm": "this-vm-hwloc.xml"}


@functools.cache
def topo(name: str) -> Topology:
    return topology_from_file(TOPOLOGY / name)


def cpus(text: str) -> frozenset[int]:
    return frozenset(parse_cpulist(text))


def placement(pred) -> dict[int, tuple[int, frozenset[int] | str]]:
    """rank -> (node, CPUs), 'all' for a task free on the whole node."""
    return {t.rank: (t.node, t.cpus if t.bound else "all") for t in pred.tasks}


# --------------------------------------------------------------------------- recorded real srun

def _recorded_cases():
    for shape, xml in SHAPES.items():
        text = (RECORDED / f"{shape}.txt").read_text()
        for m in re.finditer(r"^## srun (?P<args>.*)\n(?P<body>(?:(?!# exit).*\n)*)# exit (?P<rc>\d+)$", text, re.M):
            yield pytest.param(shape, xml, m["args"], m["body"], int(m["rc"]), id=f"{shape}: srun {m['args']}")


def _srun_kwargs(args: str) -> dict:
    """srun's command line as srun_placement's keywords (an explicit -c 1 also means --exact)."""
    kw: dict = {}
    words = shlex.split(args)
    for i, word in enumerate(words):
        flag, _, value = word.partition("=")
        if re.fullmatch(r"-[Nnc]\d+", word):
            kw[{"-N": "nodes", "-n": "ntasks", "-c": "cpus_per_task"}[word[:2]]] = int(word[2:])
            if word == "-c1" and "--overcommit" not in words:  # -c implies --exact (srun_placement knows
                kw["exact"] = True  # that itself from -c 2 on)
        elif word == "--exact":
            kw["exact"] = True
        elif flag == "--cpu-bind":
            kw["cpu_bind"] = value
        elif flag == "--hint":
            kw["hint"] = value
        elif flag == "--ntasks-per-node":
            kw["ntasks_per_node"] = int(value)
        elif word == "--overcommit":
            kw["overcommit"] = True
        elif word.startswith("-m"):
            kw["distribution"] = word[2:].strip() or words[i + 1]
    return kw


@pytest.mark.parametrize("shape,xml,args,body,rc", list(_recorded_cases()))
def test_recorded_real_srun(shape, xml, args, body, rc):
    """Source: recorded (real srun 22.05.8, see the fixture's header). A failed srun (a refused
    binding, a step that cannot be placed) must be refused. With the lassen shape the recording shim
    accepts masks naming only CPUs that node lacks; the kernel would refuse those (EINVAL), so they
    must be refused too."""
    topology = topo(xml)
    kw = _srun_kwargs(args)
    rows = parse_cpu_bind_verbose(body)
    pus = frozenset(topology.pus)
    unbindable = any(r["cpus"] is not None and not r["cpus"] & pus for r in rows)
    if rc != 0 or unbindable:
        with pytest.raises(UserInputError):
            srun_placement(topology, **kw)
        return
    expected = {r["task"]: (int(r["host"].removeprefix("node")) - 1,
                            "all" if r["cpus"] is None or r["cpus"] >= pus else r["cpus"] & pus) for r in rows}
    assert len(expected) == kw["ntasks"]
    assert placement(srun_placement(topology, **kw)) == expected


def test_recordings_say_how_they_were_made():
    """Every recording names its Slurm, its topology and its slurm.conf node line."""
    for shape in SHAPES:
        head = (RECORDED / f"{shape}.txt").read_text().split("\n## ", 1)[0]
        assert "slurm-wlm 22.05.8" in head and "# topology:" in head and "NodeName=node1" in head, shape


# --------------------------------------------------------------------------- the acceptance cases

def test_epyc_8x3_threads_stock_slurm():
    """Source: recorded epyc7742.txt, 'srun -N1 -n8 -c3 --cpu-bind=verbose,threads' (masks
    0x100000000000000000000000000000003, 0x1000000000000000000000000000000030000000000000000, ...):
    -c 3 implies --exact, the step gets 2 cores per task taken 2 at a time from each socket, and the
    tasks alternate sockets, each filling a core's threads before the next core."""
    pred = srun_placement(topo("epyc7742-synthetic.xml"), ntasks=8, cpus_per_task=3, cpu_bind="threads")
    assert [t.cpus for t in pred.tasks] == [cpus(s) for s in (
        "0-1,128", "64-65,192", "2,129-130", "66,193-194", "3-4,131", "67-68,195", "5,132-133", "69,196-197")]


def test_epyc_8x3_threads_psslurm():
    """Source: psslurmpin.c, traced by hand. Defaults cyclic:cyclic (DEFAULT_SOCKET_DIST=cyclic,
    DEFAULT_CORE_DIST=inherit) give threadIterStrategy FILLSOCKETS_FILLCORES and nextStartStrategy
    CYCLIC_CYCLIC; psslurm numbers thread t of core c as t*128 + c (= the OS number here). The step's
    cores are slurmctld's (0-7 and 64-71, as stock). Task 0 starts at thread 0 and fills: 0, 128, 1.
    Task 1: getNextSocketStart(1) = 64, FILLSOCKETS_CYCLECORES from 64 finds 64 unused; fill 64, 192, 65.
    Task 2: next socket start 0; that iteration walks the first threads 0, 1 (used), 2 (free): start 2,
    fill 2, 130, 3 (129 stays free). Likewise on: task k starts at core 64*(k%2) + 2*(k//2) =: c and gets
    c, c+1, c+128."""
    pred = srun_placement(topo("epyc7742-synthetic.xml"), ntasks=8, cpus_per_task=3, cpu_bind="threads",
                          flavour="psslurm")
    expected = []
    for k in range(8):
        c = 64 * (k % 2) + 2 * (k // 2)
        expected.append(frozenset({c, c + 1, c + 128}))
    assert [t.cpus for t in pred.tasks] == expected
    assert pred.flavour == "psslurm"


# --------------------------------------------------------------------------- cpu_management.html

NODE_2X4 = "package:2 core:4 pu:1"  # the guide's nodes n0-n2: Sockets=2 CoresPerSocket=4 ThreadsPerCore=1


def _guide_masks(allocated: str, **options) -> list[frozenset[int]]:
    """task/affinity's masks on one of the guide's nodes when the step holds the CPUs its table shows
    as allocated (its allocations come from select/cons_tres, which this calculator does not model)."""
    topology = from_hwloc_synthetic(NODE_2X4)
    shape = node_shape(topology)
    req = parse_request(topology, shape, [], **options)
    return node_masks(req, shape, options["ntasks"], sorted(cpus(allocated)))


def test_cpu_management_example_11_socket_binding():
    """cpu_management.html Example 11: srun --nodes=1-1 --ntasks=6 --cpu-bind=sockets; allocated CPUs
    0 1 2 and 4 5 6; "task ids 1, 3 and 5 are all bound to CPU ids 4, 5 and 6" (0, 2, 4 to 0, 1, 2)."""
    masks = _guide_masks("0-2,4-6", ntasks=6, cpu_bind="sockets")
    assert masks == [cpus("0-2"), cpus("4-6")] * 3


def test_cpu_management_example_12_block_block_sockets():
    """cpu_management.html Example 12: --ntasks=2 --cpus-per-task=3 --cpu-bind=sockets
    --distribution=block:block, allocated 0-3 and 4-5: task 0 bound to the allocated CPUs of socket 0
    (0-3), task 1 to those of both sockets (0-5)."""
    masks = _guide_masks("0-5", ntasks=2, cpus_per_task=3, cpu_bind="sockets", distribution="block:block")
    assert masks == [cpus("0-3"), cpus("0-5")]


def test_cpu_management_example_13_block_cyclic_is_fcyclic_now():
    """cpu_management.html Example 13: as 12 with --distribution=block:cyclic, "CPU ids 0, 1 and 4 were
    distributed to task id 0, and CPU ids 2, 3 and 5 to task id 1", so both are bound to 0-5. That is
    what a second level of fcyclic does in 22.05 (a task's CPUs go round the sockets); plain cyclic now
    keeps a task's CPUs on one socket (recorded epyc7742.txt: '-n8 -c3 --cpu-bind=verbose,threads' puts
    task 0 on 0-1,128, socket 0 only), so task 0 stays on socket 0 there."""
    fcyclic = _guide_masks("0-5", ntasks=2, cpus_per_task=3, cpu_bind="sockets", distribution="block:fcyclic")
    assert fcyclic == [cpus("0-5"), cpus("0-5")]
    cyclic = _guide_masks("0-5", ntasks=2, cpus_per_task=3, cpu_bind="sockets", distribution="block:cyclic")
    assert cyclic == [cpus("0-3"), cpus("0-5")]


def test_cpu_management_example_14_cyclic_block_cores():
    """cpu_management.html Example 14: srun --nodes=3-3 --ntasks=18 --ntasks-per-node=6
    --distribution=cyclic:block --cpu-bind=cores, 6 CPUs 0-5 allocated per node; tasks 0 3 6 9 12 15 on
    n0 bound to CPUs 0-5 in that order, "task id 10 is bound to CPU id 3 on node n1"."""
    masks = _guide_masks("0-5", ntasks=6, cpu_bind="cores", distribution="cyclic:block")
    assert masks == [frozenset({i}) for i in range(6)]
    pred = srun_placement(from_hwloc_synthetic(NODE_2X4), ntasks=18, nodes=3, ntasks_per_node=6,
                          distribution="cyclic:block", cpu_bind="cores")
    assert [t.rank for t in pred.on_node(0)] == [0, 3, 6, 9, 12, 15]
    assert [t.rank for t in pred.on_node(1)] == [1, 4, 7, 10, 13, 16]


def test_cpu_management_example_15_cores_per_task():
    """cpu_management.html Example 15: srun --ntasks=3 --cpus-per-task=3 --ntasks-per-node=1
    --cpu-bind=cores: one task per node, "task id 2 is bound to CPU ids 0, 1 and 2 on socket id 0 of node
    n2" (and tasks 0, 1 likewise on n0, n1). Here the nodes are whole, the step's 3 cores are slurmctld's
    pick, and the masks agree."""
    pred = srun_placement(from_hwloc_synthetic(NODE_2X4), ntasks=3, nodes=3, ntasks_per_node=1,
                          cpus_per_task=3, cpu_bind="cores")
    assert placement(pred) == {0: (0, cpus("0-2")), 1: (1, cpus("0-2")), 2: (2, cpus("0-2"))}


def test_cpu_management_example_5_cyclic_over_nodes():
    """cpu_management.html Example 5: srun --nodes=2-2 --ntasks-per-node=3 --distribution=cyclic
    --ntasks=6 --cpus-per-task=2: 3 tasks per node, distributed round-robin (n0: 0 2 4, n1: 1 3 5)."""
    pred = srun_placement(from_hwloc_synthetic(NODE_2X4), ntasks=6, nodes=2, ntasks_per_node=3,
                          cpus_per_task=2, distribution="cyclic")
    assert [t.rank for t in pred.on_node(0)] == [0, 2, 4]
    assert [t.rank for t in pred.on_node(1)] == [1, 3, 5]


# --------------------------------------------------------------------------- psslurm

@pytest.mark.parametrize("order,sequence", [
    (CYCLECORES, [0, 1, 2, 3, 4, 5, 6, 7]),
    (CYCLESOCKETS_CYCLECORES, [0, 2, 1, 3, 4, 6, 5, 7]),
    (CYCLESOCKETS_FILLCORES, [0, 2, 4, 6, 1, 3, 5, 7]),
    (FILLSOCKETS_CYCLECORES, [0, 1, 4, 5, 2, 3, 6, 7]),
    (FILLSOCKETS_FILLCORES, [0, 4, 1, 5, 2, 6, 3, 7]),
], ids=["CYCLECORES", "CYCLESOCKETS_CYCLECORES", "CYCLESOCKETS_FILLCORES", "FILLSOCKETS_CYCLECORES",
        "FILLSOCKETS_FILLCORES"])
def test_psslurm_thread_orders(order, sequence):
    """Source: psslurmpin.c, the comment above enum thread_iter_strategy, which lists each order for
    2 sockets x 2 cores x 2 threads (thread t of core c numbered t*4 + c)."""
    shape = node_shape(from_hwloc_synthetic("package:2 core:2 pu:2(indexes=core)"))
    assert list(_Node(shape, 2, range(4)).iterate(order, 0)) == sequence


def test_psslurm_default_is_threads_cyclic_over_sockets():
    """Source: psslurmpin.c traced by hand, with psslurm.conf's defaults (DEFAULT_CPU_BIND_TYPE=threads,
    cyclic:inherit). One CPU per task, no -c so the step has the node: task 0 takes thread 0; task 1 the
    first free thread from the next socket's start, 64; task 2 from socket 0's start walks first
    threads (FILLSOCKETS_CYCLECORES) to 1; task 3 to 65. Stock Slurm would not bind at all here
    (recorded epyc7742.txt: '-n8 --cpu-bind=verbose' gives every task 0-255)."""
    pred = srun_placement(topo("epyc7742-synthetic.xml"), ntasks=4, flavour="psslurm")
    assert [t.cpus for t in pred.tasks] == [frozenset({c}) for c in (0, 64, 1, 65)]


def test_psslurm_cores_and_rank_ldom():
    """Source: psslurmpin.c traced by hand. --cpu-bind=cores: bindToCores grows each thread to its core
    (threads c and c+128): tasks on cores 0 and 64. rank_ldom: getSocketRankBinding starts each task on
    the next socket and fills cores, so one CPU per task: 0 then 64 (psslurm's ldoms are sockets; its
    doc/pinning.txt: 'as many threads as it needs ... in as little sockets as possible ... round-robin')."""
    epyc = topo("epyc7742-synthetic.xml")
    cores = srun_placement(epyc, ntasks=2, cpu_bind="cores", flavour="psslurm")
    assert [t.cpus for t in cores.tasks] == [frozenset({0, 128}), frozenset({64, 192})]
    ldom = srun_placement(epyc, ntasks=2, cpu_bind="rank_ldom", flavour="psslurm")
    assert [t.cpus for t in ldom.tasks] == [frozenset({0}), frozenset({64})]


def test_psslurm_map_cpu_with_cpus_per_task_aborts():
    """Source: psslurmpin.c setCPUset: "type map_cpu cannot be used with --cpus-per-task > 1" and the
    step is aborted."""
    with pytest.raises(UserInputError) as err:
        srun_placement(topo("epyc7742-synthetic.xml"), ntasks=2, cpus_per_task=2, cpu_bind="map_cpu:0,1",
                       flavour="psslurm")
    assert err.value.where == "--cpu-bind"


def test_psslurm_mask_outside_step_pins_to_all():
    """Source: psslurmpin.c getBindMapFromString/checkCpuMask: a mask that does not fit the step's
    cores pins the task to all the step's threads, with a message, instead of failing. The step's
    cores are slurmctld's: -n2 -c2 on 2 x 18 cores gets cores 0-1 and 18-19 (as stock Slurm: recorded
    quartz.txt, '-n2 -c8' puts task 1 on socket 1's first cores)."""
    pred = srun_placement(topo("cts1-quartz-smt1.xml"), ntasks=2, cpus_per_task=2,
                          cpu_bind="mask_cpu:0x3,0x30000", flavour="psslurm")
    assert [t.cpus for t in pred.tasks] == [cpus("0-1"), cpus("0-1,18-19")]
    assert any("does not fit the step" in n for n in pred.notes)


# --------------------------------------------------------------------------- srun --cpu-bind=verbose

def test_parse_verbose_stock_and_psslurm_lines():
    """Stock lines copied from the recorded files; the psslurm line in the shape of psslurmpin.c
    verboseCpuPinningOutput ("cpu_bind%s=%s - %s, task %2d %2u [%d]: mask %s%s")."""
    text = "\n".join([
        "cpu-bind=MASK - node1, task  1  1 [21555]: mask 0x1000000000000000000000000000000030000000000000000 set",
        "cpu-bind=RANK - node2, task  3  1 [13882]: mask 0x2 set",
        "cpu-bind=MAP  - node1, task  2  2 [28721]: mask 0x8 set",
        "cpu-bind=NONE - node1, task  0  0 [27526]: mask 0x0",
        "cpu-bind=MASK - node1, task  1  1 [10336]: mask 0x3 set FAILED",
        "cpu_bind=THREADS - jrc0731, task 12  4 [4711]: mask 0x300000000000000000000000000000003 set",
        "7: cpu-bind=LDRANK - node1, task  7  7 [1]: mask 0xffff set",
        "srun: error: Task launch for StepId=1.14 failed on node node1: Unable to satisfy cpu bind request",
    ])
    rows = parse_cpu_bind_verbose(text)
    assert [(r["host"], r["task"], r["local"], r["kind"], r["failed"]) for r in rows] == [
        ("node1", 1, 1, "MASK", False), ("node2", 3, 1, "RANK", False), ("node1", 2, 2, "MAP", False),
        ("node1", 0, 0, "NONE", False), ("node1", 1, 1, "MASK", True), ("jrc0731", 12, 4, "THREADS", False),
        ("node1", 7, 7, "LDRANK", False)]
    assert rows[0]["cpus"] == frozenset({64, 65, 192})
    assert rows[3]["cpus"] is None  # none: nothing set
    assert rows[5]["cpus"] == frozenset({0, 1, 128, 129})


def test_parse_verbose_ignores_hostile_masks():
    huge = "cpu-bind=MASK - n, task  0  0 [1]: mask 0x" + "f" * 70000 + " set"
    assert parse_cpu_bind_verbose(huge + "\n" + "x" * 1000) == []


# --------------------------------------------------------------------------- refusals

@pytest.mark.parametrize("options,where", [
    ({"cpu_bind": "verbose,sideways"}, "--cpu-bind"),
    ({"cpu_bind": "cores,threads"}, "--cpu-bind"),
    ({"cpu_bind": "map_cpu:"}, "--cpu-bind"),
    ({"cpu_bind": "map_cpu:0,xyz"}, "--cpu-bind"),
    ({"cpu_bind": "map_cpu:0,256"}, "--cpu-bind"),
    ({"cpu_bind": "mask_cpu:0x0"}, "--cpu-bind"),
    ({"cpu_bind": "map_cpu:0*70000"}, "--cpu-bind"),
    ({"distribution": "block:diagonal"}, "--distribution"),
    ({"distribution": "plane"}, "--distribution"),
    ({"distribution": "plane=2:block"}, "--distribution"),
    ({"distribution": "block:block:block:block"}, "--distribution"),
    ({"distribution": "arbitrary"}, "--distribution"),
    ({"distribution": "block,sideways"}, "--distribution"),
    ({"hint": "fast"}, "--hint"),
    ({"hint": "nomultithread", "cpu_bind": "cores"}, "--hint"),
    ({"cpus_per_task": 0}, "--cpus-per-task"),
    ({"ntasks": 65537}, "--ntasks"),
    ({"ntasks": 0}, "--ntasks"),
    ({"nodes": 100000}, "--nodes"),
    ({"ntasks": 300}, "--ntasks"),  # 300 tasks x 1 CPU > the node's 256
    ({"ntasks": 8, "cpus_per_task": 64}, "--ntasks"),
    ({"ntasks": 8, "cpus_per_task": 3, "cpu_bind": "rank"}, "--cpu-bind"),  # recorded: 'Entire node must be allocated'
    ({"flavour": "pbs"}, "--flavour"),
], ids=lambda v: str(v))
def test_refusals_are_located(options, where):
    kw = {"ntasks": 8} | options
    with pytest.raises(UserInputError) as err:
        srun_placement(topo("epyc7742-synthetic.xml"), **kw)
    assert err.value.where == where


def test_overcommit_more_tasks_than_cpus():
    """Source: live run on pinvc (this VM's shape, 2 CPUs), 'srun -n5 --overcommit
    --cpu-bind=verbose,threads': every task 'mask 0x3' (task/affinity overrides the binding); the
    recordings' --overcommit cases check the same on the larger shapes."""
    pred = srun_placement(topo("this-vm-hwloc.xml"), ntasks=5, overcommit=True, cpu_bind="threads")
    assert [t.cpus for t in pred.tasks] == [frozenset({0, 1})] * 5


def test_uneven_topology_is_refused():
    """Slurm's Sockets x CoresPerSocket x ThreadsPerCore cannot describe it."""
    odd = Topology(source="odd", cores=[[0], [1], [2]], packages=[[0, 1], [2]], numa=[NumaDomain(0, [0, 1, 2])])
    with pytest.raises(UserInputError) as err:
        srun_placement(odd, ntasks=1)
    assert err.value.where == "topology"


def test_notes_say_what_was_assumed():
    pred = srun_placement(topo("epyc7742-synthetic.xml"), ntasks=8, cpus_per_task=3, distribution="*:*:block")
    text = " ".join(pred.notes)
    assert "third --distribution level" in text and "--exact" in text and "no --cpu-bind" in text


# --------------------------------------------------------------------------- live (shared cluster, if up)

def _cbvc_conf() -> str | None:
    if not (shutil.which("srun") and shutil.which("slurmd") and shutil.which("salloc")):
        return None
    env = Path("/run/clusterbench-vc/cbvc/env")
    if not env.is_file():
        return None
    m = re.search(r"SLURM_CONF=(\S+)", env.read_text())
    return m.group(1) if m and Path(m.group(1)).is_file() else None


LIVE_CASES = ["-N1 -n2 --cpu-bind=verbose,threads", "-N1 -n2 --cpu-bind=verbose,cores -m block:block",
              "-N1 -n1 -c2 --cpu-bind=verbose,threads", "-N1 -n2 --cpu-bind=verbose,rank", "-N1 -n2 --cpu-bind=verbose"]


@pytest.mark.parametrize("args", LIVE_CASES)
def test_live_cbvc(args, request):
    """Source: live, the real srun on the shared virtual cluster (nodes of this machine's shape; brought up
    by the `cluster` fixture when none is up)."""
    if os.geteuid() == 0 and shutil.which("slurmd"):
        request.getfixturevalue("cluster")
    conf = _cbvc_conf()
    if conf is None:
        pytest.skip("needs srun/slurmd and the virtual cluster 'cbvc' up (scripts/virtual-cluster up 2)")
    from clusterbench.system.sources import from_sysfs
    env = dict(os.environ, SLURM_CONF=conf)
    try:
        out = subprocess.run(["salloc", "--exclusive", "-N1", "-I30", "--quiet", "srun", *shlex.split(args), "true"],
                             capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.skip("cbvc did not give an exclusive node within 2 minutes")
    rows = parse_cpu_bind_verbose(out.stdout + out.stderr)
    if out.returncode != 0 and not rows:
        pytest.skip(f"cbvc could not run the step: {(out.stderr or out.stdout).strip()[:200]}")
    topology = from_sysfs()
    node_line = re.search(r"^NodeName=node1 .*$", Path(conf).read_text(), re.M)
    declared = dict(kv.split("=", 1) for kv in node_line.group(0).split()) if node_line else {}
    if (declared.get("SocketsPerBoard"), declared.get("CoresPerSocket"), declared.get("ThreadsPerCore")) != (
            str(topology.sockets), str(topology.cores_per_socket), str(topology.threads_per_core)):
        pytest.skip("cbvc's nodes are not declared with this machine's shape")
    pus = frozenset(topology.pus)
    expected = {r["task"]: (0, "all" if r["cpus"] is None or r["cpus"] >= pus else r["cpus"]) for r in rows}
    assert placement(srun_placement(topology, **_srun_kwargs(args))) == expected
