"""The Open MPI and Hydra placement calculators (pinning/mpirun.py, pinning/hydra.py) against the
real launchers.

Every expectation says where it comes from:
- RECORDED: tests/fixtures/pinning/mpirun/{openmpi,hydra}/*.txt, the output of mpirun.openmpi 4.1.4
  (--do-not-launch onto a topology file) and mpiexec.hydra 4.0.2 (HWLOC_XMLFILE + HYDRA_TOPO_DEBUG=1)
  for the command in each file's header; tests/fixtures/pinning/mpirun/record.sh makes them again.
- LIVE: the same launchers run now, when installed (a few cases; skipped otherwise).
- MAN PAGE: Open MPI 4.1's mpirun(1) (Debian's mpirun.openmpi.1), quoted where used.
Nothing here compares the calculator with itself.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from clusterbench.errors import UserInputError
from clusterbench.pinning.mpirun import hydra_placement, openmpi_placement, parse_hydra_bindings, parse_report_bindings
from clusterbench.system.sources import from_sysfs, topology_from_file
from clusterbench.system.topology import parse_cpulist
from conftest import ROOT, TOPOLOGY

RECORDED = Path(__file__).parent / "fixtures" / "pinning" / "mpirun"
OMPI = shutil.which("mpirun.openmpi")
HYDRA = shutil.which("mpiexec.hydra")
needs_ompi = pytest.mark.skipif(not OMPI, reason="mpirun.openmpi (Open MPI 4.1) is not installed")
needs_hydra = pytest.mark.skipif(not HYDRA, reason="mpiexec.hydra (MPICH) is not installed")

# what Open MPI / Hydra printed -> what our UserInputError must say
ERRORS = {"There are not enough slots available": "not enough slots available",
          "binding more\nprocesses than cpus": "binding more processes than cpus",
          "multiple cpus-per-proc": "multiple cpus-per-proc",
          "No objects of the specified type": "No objects of the specified type",
          "more processes than the ppr": "more processes than the ppr",
          "policy is not recognized": "is not recognized",
          "unrecognized directive": "unrecognized directive",
          "hardware object not found": "hardware object not found",
          "larger than total system size": "larger than total system size"}


def topology(name: str):
    return topology_from_file(ROOT / name if "/" in name else TOPOLOGY / name)


# --------------------------------------------------------------------------- reading the recordings

def read_openmpi(text: str) -> dict:
    """A recording of `mpirun.openmpi --do-not-launch --display-devel-map --mca rmaps_base_verbose 5`:
    its options, the node of every rank, the cpus of every rank bound, or the error it printed."""
    lines = text.splitlines()
    cmd = shlex.split(lines[0].partition(": ")[2])
    hosts = lines[1].partition(": ")[2].partition("(")[0].strip().strip(";").split(";")
    args = {"np": int(cmd[cmd.index("-np") + 1]), "oversubscribe": "--oversubscribe" in cmd,
            "hwthread_cpus": "--use-hwthread-cpus" in cmd}
    for flag in ("--map-by", "--rank-by", "--bind-to"):
        if flag in cmd:
            args[flag[2:].replace("-", "_")] = cmd[cmd.index(flag) + 1]
    node_of, cpus, node = {}, {}, None
    for line in lines:
        if m := re.search(r"Data for node: node(\d+)", line):
            node = int(m.group(1))
        elif m := re.search(r"Data for proc: \[\[J,1\],(\d+)\]", line):
            node_of[int(m.group(1))] = node
        elif m := (re.search(r"BOUND PROC \[\[J,1\],(\d+)\] TO ([\d,-]+)\[", line)
                   or re.search(r"PROC \[\[J,1\],(\d+)\] BITMAP ([\d,-]+)", line)):
            cpus[int(m.group(1))] = frozenset(parse_cpulist(m.group(2)))
    policy = re.search(r"Binding policy: (\S+)", text)
    if policy and policy.group(1).startswith("NONE"):
        cpus = {}  # bindings printed before Open MPI dropped them (a default binding that overloaded)
    topo = cmd[cmd.index("hwloc_base_topo_file") + 1]
    return {"topo": topo, "nodes": len(hosts), "slots": int(hosts[0].split("slots=")[1]), "args": args,
            "node_of": node_of, "cpus": cpus, "binding": policy.group(1) if policy else None,
            "error": None if node_of else _error_text(text)}


def read_hydra(text: str) -> dict:
    """A recording of `HYDRA_TOPO_DEBUG=1 mpiexec.hydra -l ...`: options, bindings by rank, or the error."""
    lines = text.splitlines()
    env, _, rest = lines[0].partition(": ")[2].partition(" mpiexec.hydra ")
    cmd = shlex.split(rest)
    args = {"n": int(cmd[cmd.index("-n") + 1])}
    for flag in ("-map-by", "-bind-to", "-ppn"):
        if flag in cmd:
            value = cmd[cmd.index(flag) + 1]
            args[flag[1:].replace("-", "_")] = int(value) if flag == "-ppn" else value
    nodes = 1
    if len(lines) > 1 and lines[1].startswith("# HOSTFILE"):
        nodes = len(lines[1].partition(": ")[2].partition("(")[0].strip().strip(";").split(";"))
    failed = "error" in text.lower() or "unrecognized" in text
    return {"topo": re.search(r"HWLOC_XMLFILE=(\S+)", env).group(1), "nodes": nodes, "args": args,
            "bindings": {b["rank"]: b["cpus"] for b in parse_hydra_bindings(text)},
            "error": _error_text(text) if failed else None}


def _error_text(text: str) -> str:
    return " ".join(line for line in text.splitlines() if not line.startswith("#"))


def expected_error(printed: str) -> str:
    found = [ours for theirs, ours in ERRORS.items() if theirs.replace("\n", " ") in printed]
    assert found, f"no known error in the recording: {printed[:300]}"
    return found[0]


def assert_openmpi_matches(rec: dict, pred) -> None:
    """Nodes of every rank, and the cpus of every rank the recording shows bound (unbound otherwise).

    In place bindings (map and bind to one object) are computed for the first host only under
    --do-not-launch. NUMA bindings of the other hosts are left out too: hwloc 2 keeps NUMA nodes out
    of the tree that opal_hwloc_base_clear_usage resets, so with one shared topology --do-not-launch
    counts every host's ranks against the same NUMA nodes; each daemon of a real launch counts its own."""
    assert {t.rank: t.node for t in pred.tasks} == rec["node_of"]
    bound_hosts = {rec["node_of"][r] for r in rec["cpus"]}
    for t in pred.tasks:
        if t.node and (t.node not in bound_hosts or rec["binding"].startswith("NUMA")):
            continue
        if t.rank in rec["cpus"]:
            assert t.bound and t.cpus == rec["cpus"][t.rank], f"rank {t.rank}"
        else:
            assert not t.bound and t.cpus == frozenset(pred.topology.pus), f"rank {t.rank}"


def predict_openmpi(rec: dict):
    return openmpi_placement(topology(rec["topo"]), nodes=rec["nodes"], ppn=rec["slots"], **rec["args"])


# --------------------------------------------------------------------------- RECORDED

OPENMPI_FILES = sorted(p for p in (RECORDED / "openmpi").glob("*.txt") if not p.name.startswith("vm-live"))
HYDRA_FILES = sorted(p for p in (RECORDED / "hydra").glob("*.txt") if not p.name.startswith("vm-live"))


def test_the_recordings_cover_what_was_asked():
    names = " ".join(p.stem for p in OPENMPI_FILES)
    for topo in ("epyc-", "pascal-", "corona-", "quartz-"):
        assert topo in names
    for option in ("map-core", "map-socket", "map-numa", "map-l3cache", "map-hwthread", "map-slot", "map-node",
                   "ppr", "pe", "bind-core", "bind-hwthread", "bind-socket", "bind-numa", "bind-l3cache",
                   "bind-none", "rank-", "default-np2", "default-np8", "2nodes", "3nodes", "oversubscribe"):
        assert option in names, option
    assert len(OPENMPI_FILES) >= 80 and len(HYDRA_FILES) >= 40


@pytest.mark.parametrize("path", OPENMPI_FILES, ids=lambda p: p.stem)
def test_openmpi_matches_recorded_mpirun(path):
    """RECORDED: the header of each file is the exact mpirun.openmpi 4.1.4 command."""
    rec = read_openmpi(path.read_text())
    if rec["error"]:
        with pytest.raises(UserInputError, match=re.escape(expected_error(rec["error"]))):
            predict_openmpi(rec)
    else:
        assert_openmpi_matches(rec, predict_openmpi(rec))


@pytest.mark.parametrize("path", HYDRA_FILES, ids=lambda p: p.stem)
def test_hydra_matches_recorded_mpiexec(path):
    """RECORDED: the header of each file is the exact mpiexec.hydra 4.0.2 command and environment.
    Hydra's debug line has one character per PU, so CPUs numbered past that count never show."""
    rec = read_hydra(path.read_text())
    topo = topology(rec["topo"])
    if rec["error"]:
        with pytest.raises(UserInputError, match=re.escape(expected_error(rec["error"]))):
            hydra_placement(topo, nodes=rec["nodes"], **rec["args"])
        return
    pred = hydra_placement(topo, nodes=rec["nodes"], **rec["args"])
    width = len(topo.pus)
    for t in pred.tasks:
        if t.rank in rec["bindings"]:
            assert t.bound and frozenset(c for c in t.cpus if c < width) == rec["bindings"][t.rank], t.rank
        else:
            assert not t.bound, t.rank


def test_recorded_default_policies_are_the_ones_we_report():
    """RECORDED: --display-devel-map prints the policies Open MPI chose; our notes name the same."""
    for name, mapping, binding in (("epyc-default-np2", "CORE", "CORE"), ("epyc-default-np8", "NUMA", "NUMA"),
                                   ("pascal-np8-map-socket", "SOCKET", "SOCKET"),
                                   ("epyc-np8-map-slot", "SLOT", "NUMA"),
                                   ("pascal-default-np2-hwthread-cpus", "HWTHREAD", "HWTHREAD")):
        text = (RECORDED / "openmpi" / f"{name}.txt").read_text()
        assert f"Binding policy: {binding}" in text
        note = predict_openmpi(read_openmpi(text)).notes[-1]
        assert f"mapping {mapping}," in note and f"binding {binding}" in note, note


def test_hydra_binds_by_local_index_on_each_host():
    """RECORDED (-launcher manual, proxies started here): ranks go in -ppn blocks, wrapping round,
    and each host's proxy binds its i-th process to set i."""
    rec = read_hydra((RECORDED / "hydra" / "quartz-3nodes-np10-ppn3-bind-core.txt").read_text())
    pred = hydra_placement(topology(rec["topo"]), nodes=3, ppn=3, n=10, bind_to="core")
    assert [t.node for t in pred.tasks] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 0]
    assert pred.tasks[9].cpus == frozenset({3}) == rec["bindings"][9]


# --------------------------------------------------------------------------- LIVE

def _run(cmd: list[str], env: dict | None = None) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env=None if env is None else {**os.environ, **env})
    return done.stdout + done.stderr


@needs_ompi
@pytest.mark.parametrize("path", [RECORDED / "openmpi" / f"{n}.txt" for n in (
    "epyc-np8-map-socket-rank-core", "pascal-np4-map-ppr2-socket-pe4", "corona-np8-map-core-bind-l3cache",
    "pascal-2nodes-np8-map-socket-span", "quartz-np40-slots40")], ids=lambda p: p.stem)
def test_openmpi_live_do_not_launch(path, tmp_path):
    """LIVE: the recorded command run again now, with the same hostfile."""
    header = path.read_text().splitlines()[:2]
    hostfile = tmp_path / "hosts"
    hostfile.write_text(header[1].partition(": ")[2].partition("(")[0].strip().replace(";", "\n"))
    cmd = shlex.split(header[0].partition(": ")[2].replace("HOSTFILE", str(hostfile)))
    out = _run(cmd)
    out = re.sub(r"\[\[\d+,([01])\]", r"[[J,\1]", out.replace(f"node: {socket.gethostname()}", "node: node0"))
    live = read_openmpi("\n".join(header) + "\n" + out)
    rec = read_openmpi(path.read_text())
    assert (live["node_of"], live["cpus"]) == (rec["node_of"], rec["cpus"])
    assert_openmpi_matches(live, predict_openmpi(live))


@needs_hydra
@pytest.mark.parametrize("name", ["corona-np20-bind-core-map-numa", "pascal-np8-bind-hwthread:2"])
def test_hydra_live_topology_file(name):
    """LIVE: mpiexec.hydra now, on the recorded topology file."""
    rec = read_hydra((RECORDED / "hydra" / f"{name}.txt").read_text())
    args = rec["args"]
    cmd = [HYDRA, "-l", "-n", str(args["n"]), "-bind-to", args["bind_to"]]
    cmd += ["-map-by", args["map_by"]] if "map_by" in args else []
    out = _run(cmd + ["true"], {"HWLOC_XMLFILE": rec["topo"], "HWLOC_THISSYSTEM": "1", "HYDRA_TOPO_DEBUG": "1"})
    live = {b["rank"]: b["cpus"] for b in parse_hydra_bindings(out)}
    assert live == rec["bindings"]
    pred = hydra_placement(topology(rec["topo"]), nodes=1, **args)
    assert {t.rank: t.cpus for t in pred.tasks} == live


def _affinity(text: str) -> dict[int, frozenset[int]]:
    return {int(r): frozenset(parse_cpulist(c)) for r, c in re.findall(r"rank=(\d+) Cpus_allowed_list:\s*(\S+)", text)}


@pytest.mark.parametrize("name", ["vm-live-np2-default", "vm-live-np2-map-core-bind-hwthread",
                                  "vm-live-np2-bind-socket", "vm-live-np2-bind-none", "vm-live-np3-oversubscribe"])
def test_openmpi_report_bindings_recorded_on_this_machine(name):
    """RECORDED live on the 2-CPU machine this suite was written on: --report-bindings, parsed, agrees
    with what each rank read from /proc/self/status, and the calculator predicts both."""
    text = (RECORDED / "openmpi" / f"{name}.txt").read_text()
    cmd = shlex.split(text.splitlines()[0].partition("): ")[2])
    topo = topology("this-vm-hwloc.xml")
    reported = {r["rank"]: r["cpus"] for r in parse_report_bindings(text, topo)}
    actual = _affinity(text)
    pred = openmpi_placement(topo, np=int(cmd[cmd.index("-np") + 1]), oversubscribe="--oversubscribe" in cmd,
                             **{f[2:].replace("-", "_"): cmd[cmd.index(f) + 1]
                                for f in ("--map-by", "--bind-to") if f in cmd})
    for t in pred.tasks:
        assert actual[t.rank] == t.cpus
        if t.rank in reported:  # None: "not bound (or bound to all available processors)"
            assert reported[t.rank] == (t.cpus if t.cpus != frozenset(topo.pus) else None)


def test_openmpi_refusal_recorded_on_this_machine():
    """RECORDED live: 3 ranks on this 2-core machine without --oversubscribe; mpirun refused."""
    text = (RECORDED / "openmpi" / "vm-live-np3-no-oversubscribe.txt").read_text()
    assert "There are not enough slots available in the system to satisfy the 3" in text
    with pytest.raises(UserInputError, match="not enough slots available"):
        openmpi_placement(topology("this-vm-hwloc.xml"), np=3)


def test_hydra_defaults_as_its_help_says():
    """`mpiexec.hydra -bind-to -h` (4.0.2): "none -- no binding (default)"; `-map-by -h`: "Default:
    <same option as binding>". RECORDED: epyc-np4-map-socket (no binding line at all) and
    pascal-np8-bind-core:2 (mapping by pairs of cores too: ranks get cores 0-1, 2-3, ...)."""
    pascal = topology("cts1-pascal.xml")
    assert not any(t.bound for t in hydra_placement(pascal, n=4, map_by="socket").tasks)
    pairs = hydra_placement(pascal, n=2, bind_to="core:2").tasks
    assert [t.cpus for t in pairs] == [frozenset({0, 1, 36, 37}), frozenset({2, 3, 38, 39})]


@needs_ompi
def test_openmpi_live_launch_on_this_machine():
    """LIVE: a real 2-rank launch here; its --report-bindings and each rank's own affinity against the
    calculator on this machine's topology (read from sysfs now)."""
    probe = "echo rank=$OMPI_COMM_WORLD_RANK $(grep Cpus_allowed_list /proc/self/status)"
    out = _run([OMPI, "--allow-run-as-root", "--report-bindings", "-np", "2", "sh", "-c", probe])
    topo = from_sysfs()
    if len(topo.cores) < 2:
        pytest.skip("this machine has fewer than 2 cores")
    pred = openmpi_placement(topo, np=2)
    reported = {r["rank"]: r["cpus"] for r in parse_report_bindings(out, topo)}
    assert _affinity(out) == {t.rank: t.cpus for t in pred.tasks} == reported


@needs_hydra
def test_hydra_live_launch_on_this_machine():
    """LIVE: a real 2-rank Hydra launch here with -bind-to core."""
    probe = "echo rank=$PMI_RANK $(grep Cpus_allowed_list /proc/self/status)"
    out = _run([HYDRA, "-l", "-n", "2", "-bind-to", "core", "sh", "-c", probe], {"HYDRA_TOPO_DEBUG": "1"})
    topo = from_sysfs()
    if len(topo.cores) < 2:
        pytest.skip("this machine has fewer than 2 cores")
    pred = hydra_placement(topo, n=2, bind_to="core")
    debug = {b["rank"]: b["cpus"] for b in parse_hydra_bindings(out)}
    assert _affinity(out) == {t.rank: t.cpus for t in pred.tasks} == debug


def test_hydra_debug_lines_recorded_on_this_machine():
    """RECORDED live: HYDRA_TOPO_DEBUG's bits are the CPUs each rank then found in its affinity."""
    for name in ("vm-live-n2-bind-core", "vm-live-n3-bind-core", "vm-live-n2-bind-socket"):
        text = (RECORDED / "hydra" / f"{name}.txt").read_text()
        debug = {b["rank"]: b["cpus"] for b in parse_hydra_bindings(text)}
        assert debug == _affinity(text)
        cmd = shlex.split(text.splitlines()[0].partition("): ")[2].partition("mpiexec.hydra ")[2])
        pred = hydra_placement(topology("this-vm-hwloc.xml"), n=int(cmd[cmd.index("-n") + 1]),
                               bind_to=cmd[cmd.index("-bind-to") + 1])
        assert {t.rank: t.cpus for t in pred.tasks} == debug


# --------------------------------------------------------------------------- MAN PAGE

# "a node with two processor sockets, each comprised of four cores" (lstopo -i "package:2 core:4 pu:1";
# record.sh also ran these examples through mpirun.openmpi 4.1.4: openmpi/manpage-*.txt)
TWO_BY_FOUR = "tests/fixtures/pinning/mpirun/manpage-2x4.xml"


def _mask(cpus) -> str:
    return f"{sum(1 << c for c in cpus):04x}"


@pytest.mark.parametrize("options, masks", [
    ({"map_by": "core", "bind_to": "core"}, ["0001", "0002", "0004", "0008"]),
    ({"map_by": "socket", "bind_to": "socket"}, ["000f", "00f0", "000f", "00f0"]),
    ({"map_by": "slot:PE=2", "bind_to": "core"}, ["0003", "000c", "0030", "00c0"]),
])
def test_man_page_binding_examples(options, masks):
    """MAN PAGE, "Mapping, Ranking, and Binding: Oh My!": "consider a node with two processor sockets,
    each comprised of four cores ... We run mpirun with -np 4 --report-bindings": % mpirun ... --map-by
    core --bind-to core -> cpus 0001 0002 0004 0008; --map-by socket --bind-to socket -> 000f 00f0 000f
    00f0; --map-by slot:PE=2 --bind-to core -> 0003 000c 0030 00c0; --bind-to none: no bindings."""
    pred = openmpi_placement(topology(TWO_BY_FOUR), np=4, **options)
    assert [_mask(t.cpus) for t in pred.tasks] == masks


def test_man_page_bind_to_none():
    pred = openmpi_placement(topology(TWO_BY_FOUR), np=4, bind_to="none")
    assert not any(t.bound for t in pred.tasks)


def test_man_page_hostfile_examples():
    """MAN PAGE: hostfile aa/bb/cc slots=4. "mpirun -hostfile myhostfile -np 6 ./a.out will launch
    processes 0-3 on node aa and processes 4-5 on node bb"; "mpirun --map-by node: 0 3 | 1 4 | 2 5";
    "-np 14 -nooversubscribe ... will produce an error"; "-np 14 ... will launch processes 0-3 on node
    aa, 4-7 on bb, and 8-11 on cc. It will then add the remaining two processes to whichever nodes it
    chooses". That last one is older than 4.1: 4.1.4 refuses it without --oversubscribe (slots given
    in a hostfile), and with it ranks by slot after placing, giving 0-4 | 5-9 | 10-13 (RECORDED,
    openmpi/manpage-3nodes-np14-oversubscribe.txt)."""
    topo = topology(TWO_BY_FOUR)
    by_node = lambda pred: [[t.rank for t in pred.tasks if t.node == n] for n in range(3)]  # noqa: E731
    assert by_node(openmpi_placement(topo, np=6, nodes=3, ppn=4)) == [[0, 1, 2, 3], [4, 5], []]
    assert by_node(openmpi_placement(topo, np=6, nodes=3, ppn=4, map_by="node")) == [[0, 3], [1, 4], [2, 5]]
    with pytest.raises(UserInputError, match="not enough slots"):
        openmpi_placement(topo, np=14, nodes=3, ppn=4)
    fourteen = by_node(openmpi_placement(topo, np=14, nodes=3, ppn=4, oversubscribe=True))
    assert fourteen == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, 13]]


@pytest.mark.parametrize("rank_by, layout", [
    ("core", [[0, 1], [2, 3], [4, 5], [6, 7]]),
    ("socket", [[0, 2], [1, 3], [4, 6], [5, 7]]),
    ("socket:span", [[0, 4], [1, 5], [2, 6], [3, 7]]),
])
def test_man_page_ranking_examples(rank_by, layout):
    """MAN PAGE: "--map-by ppr:2:socket" on nodes aa and bb (dual-socket):
    rank-by core 0 1 ! 2 3 | 4 5 ! 6 7; rank-by socket 0 2 ! 1 3 | 4 6 ! 5 7;
    rank-by socket:span 0 4 ! 1 5 | 2 6 ! 3 7."""
    topo = topology(TWO_BY_FOUR)
    pred = openmpi_placement(topo, np=8, nodes=2, ppn=4, map_by="ppr:2:socket", rank_by=rank_by,
                             bind_to="socket")  # to see each rank's socket; the recordings check the default
    got = [[t.rank for t in pred.tasks if t.node == n and t.cpus <= frozenset(topo.packages[s])]
           for n in range(2) for s in range(2)]
    assert got == layout


# --------------------------------------------------------------------------- parsers

def test_report_bindings_lines_from_the_open_mpi_format():
    """The two line shapes of orte's --report-bindings (opal_hwloc_base_cset2str: "socket S[core C[hwt H]]",
    logical core index over the node, hwt = place in the core); the SMT line is built from that format."""
    pascal = topology("cts1-pascal.xml")
    text = ("[pascal4:123] MCW rank 3 bound to socket 0[core 1[hwt 0-1]], socket 0[core 2[hwt 1]]: [../BB/.B]\n"
            "[pascal4:123] MCW rank 4 is not bound (or bound to all available processors)\nnoise\n")
    rows = parse_report_bindings(text, pascal)
    assert rows == [{"host": "pascal4", "rank": 3, "cpus": frozenset({1, 37, 38}), "numbering": "os"},
                    {"host": "pascal4", "rank": 4, "cpus": None, "numbering": "os"}]
    logical = parse_report_bindings(text)[0]
    assert logical["cpus"] == frozenset({2, 3, 5}) and logical["numbering"] == "logical"
    with pytest.raises(ValueError):
        parse_report_bindings("[h:1] MCW rank 0 bound to socket 0[core 99[hwt 0]]: [B]", pascal)


def test_hydra_debug_parser_without_rank_prefix():
    rows = parse_hydra_bindings("process 2 binding: 0110\n[5] process 1 binding: 1000\nrank=0 other\n")
    assert rows == [{"rank": None, "index": 2, "cpus": frozenset({1, 2})},
                    {"rank": 5, "index": 1, "cpus": frozenset({0})}]


# --------------------------------------------------------------------------- bad input

EPYC = "epyc7742-synthetic.xml"


@pytest.mark.parametrize("kwargs, where", [
    ({"np": 65537}, "-np"), ({"np": 0}, "-np"), ({"np": 4, "nodes": 70000}, "--nodes"),
    ({"np": 4, "ppn": 0}, "--ntasks-per-node"), ({"np": "8"}, "-np"), ({"np": True}, "-np"),
    ({"np": 8, "map_by": "bogus"}, "--map-by"), ({"np": 8, "map_by": "core:bogus"}, "--map-by"),
    ({"np": 8, "map_by": "slot:PE=x"}, "--map-by"), ({"np": 8, "map_by": "ppr:x:socket"}, "--map-by"),
    ({"np": 8, "map_by": "ppr:2:bogus"}, "--map-by"), ({"np": 8, "map_by": "ppr:1:socket,2:core"}, "--map-by"),
    ({"np": 8, "map_by": "seq"}, "--map-by"), ({"np": 8, "bind_to": "bogus"}, "--bind-to"),
    ({"np": 8, "bind_to": "core:bogus"}, "--bind-to"), ({"np": 8, "bind_to": "l2cache"}, "--bind-to"),
    ({"np": 8, "rank_by": "bogus"}, "--rank-by"), ({"np": 8, "rank_by": "core:x:y"}, "--rank-by"),
    ({"np": 8, "map_by": "slot:PE=2", "bind_to": "socket"}, "--bind-to"),
    ({"np": 200}, "-np"),
])
def test_openmpi_bad_input_is_a_located_user_error(kwargs, where):
    with pytest.raises(UserInputError) as err:
        openmpi_placement(topology(EPYC), **kwargs)
    assert err.value.where == where


@pytest.mark.parametrize("kwargs, where", [
    ({"n": 65537}, "-n"), ({"n": 4, "ppn": 100000}, "--ntasks-per-node"), ({"n": 4, "bind_to": "bogus"}, "-bind-to"),
    ({"n": 4, "bind_to": "core", "map_by": "bogus"}, "-map-by"), ({"n": 4, "bind_to": "core:0"}, "-bind-to"),
    ({"n": 4, "bind_to": "l2cache"}, "-bind-to"), ({"n": 4, "bind_to": "gpu"}, "-bind-to"),
    ({"n": 4, "bind_to": "user:a+b"}, "-bind-to"), ({"n": 4, "bind_to": "l3cache"}, "-bind-to"),
])
def test_hydra_bad_input_is_a_located_user_error(kwargs, where):
    with pytest.raises(UserInputError) as err:
        hydra_placement(topology(EPYC), **kwargs)
    assert err.value.where == where


def test_the_largest_launches_are_quick():
    """65536 ranks (the bound) on 65536 nodes, or oversubscribed on one node, in a few seconds."""
    topo = topology(EPYC)
    start = time.monotonic()
    wide = openmpi_placement(topo, np=65536, nodes=65536, map_by="core")
    deep = openmpi_placement(topo, np=65536, oversubscribe=True, map_by="core", rank_by="socket",
                             bind_to="core:overload-allowed")
    hydra = hydra_placement(topo, n=65536, nodes=65536, bind_to="core")
    assert len(wide.tasks) == len(deep.tasks) == len(hydra.tasks) == 65536
    assert time.monotonic() - start < 30


# --------------------------------------------------------------------------- what clusterbench relies on

def test_unbound_tasks_get_every_pu_and_notes_say_why():
    topo = topology("cts1-quartz-smt1.xml")
    pred = openmpi_placement(topo, np=40, oversubscribe=True)
    assert all(not t.bound and t.cpus == frozenset(topo.pus) and t.threads == () for t in pred.tasks)
    assert any("binding dropped" in n for n in pred.notes)
    assert pred.launcher == "openmpi" and pred.options == {"np": 40, "oversubscribe": True}
    hydra = hydra_placement(topo, n=2)
    assert not any(t.bound for t in hydra.tasks) and "binds nothing" in hydra.notes[0]


def test_ppn_gives_the_hostfile_slots():
    """launch/site.py writes slots=ceil(ranks/nodes) per host and passes -ppn the same to Hydra."""
    topo = topology(EPYC)
    assert [t.node for t in openmpi_placement(topo, np=5, nodes=2).tasks] == [0, 0, 0, 1, 1]
    assert [t.node for t in hydra_placement(topo, n=5, nodes=2).tasks] == [0, 0, 0, 1, 1]
