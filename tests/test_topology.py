"""Topology parsing for every fixture in tests/fixtures/topology (facts from its README).

Those files are copies of ../shared/fixtures/topology, all redistributable, so nothing here needs ../shared.
"""

from __future__ import annotations

import pytest

from clusterbench.system.discover import discover
from clusterbench.system.sources import from_hwloc_synthetic, topology_from_file
from conftest import HAS_SHARED, SHARED_FIXTURES, TOPOLOGY, cli_json

# file: (sockets, NUMA domains, cores, PUs, threads per core, PUs of core 0)
EXPECTED = {
    "epyc-corona.xml": (2, 8, 48, 96, 2, [0, 48]),
    "epyc-dual-sock-hwloc1.xml": (2, 8, 64, 128, 2, [0, 64]),
    "cts1-pascal.xml": (2, 2, 36, 72, 2, [0, 36]),
    "cts1-quartz-smt1.xml": (2, 2, 36, 36, 1, [0]),
    "arm64-ulna-hwloc1.xml": (2, 2, 64, 256, 4, [0, 32, 64, 96]),
    "coral-lassen.xml": (2, 2, 40, 160, 4, [8, 9, 10, 11]),
    "epyc7742-synthetic.xml": (2, 8, 128, 256, 2, [0, 128]),
    "epyc7742-synthetic.txt": (2, 8, 128, 256, 2, [0, 128]),
    "this-vm-hwloc.xml": (1, 1, 2, 2, 1, [0]),
    "this-vm-lscpu.json": (1, 1, 2, 2, 1, [0]),
    "this-vm-lscpu-p.txt": (1, 1, 2, 2, 1, [0]),
}


def test_every_fixture_is_covered():
    files = {p.name for p in TOPOLOGY.iterdir() if p.suffix in (".xml", ".json", ".txt")}
    assert files == set(EXPECTED)


def test_our_copies_are_the_shared_files():
    """tests/fixtures/topology must stay byte-identical to the shared folder it was copied from, licences included."""
    if not HAS_SHARED:
        pytest.skip("needs ../shared/fixtures to compare our copies with (present in CI)")
    theirs = SHARED_FIXTURES / "topology"
    assert sorted(p.name for p in TOPOLOGY.iterdir()) == sorted(p.name for p in theirs.iterdir())
    for path in TOPOLOGY.iterdir():
        assert path.read_bytes() == (theirs / path.name).read_bytes(), path.name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_counts_through_cli(name):
    sockets, numa, cores, pus, smt, core0 = EXPECTED[name]
    data = cli_json("system", "--from", str(TOPOLOGY / name), "--json")
    t = data["topology"]
    assert (t["sockets"], len(t["numa"]), t["cores"], t["pus"], t["threads_per_core"]) == (
        sockets, numa, cores, pus, smt)
    assert t["cores_per_socket"] == cores // sockets


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_core_zero_siblings(name):
    topo = topology_from_file(TOPOLOGY / name)
    assert topo.cores[0] == EXPECTED[name][5]


def test_lassen_allowed_cpuset_and_numa_indexes():
    topo = topology_from_file(TOPOLOGY / "coral-lassen.xml")
    assert topo.pus[0] == 8
    assert [d.os_index for d in topo.numa] == [0, 8]
    gpus = [a for a in topo.accelerators if a.startswith("cuda")]
    assert len(gpus) == 4
    assert sum("package0" in g for g in gpus) == 2


def test_pascal_gpus_near_socket_zero():
    topo = topology_from_file(TOPOLOGY / "cts1-pascal.xml")
    gpus = [a for a in topo.accelerators if a.startswith("cuda")]
    assert gpus == ["cuda0@package0", "cuda1@package0"]


def test_synthetic_numa_and_packages():
    topo = from_hwloc_synthetic("package:2 numa:4 core:16 pu:2(indexes=core)")
    assert topo.numa[1].cpus == list(range(16, 32)) + list(range(144, 160))
    assert sorted(topo.packages[1]) == list(range(64, 128)) + list(range(192, 256))
    assert topo.cores[127] == [127, 255]


def test_synthetic_default_numbering_is_depth_first():
    topo = from_hwloc_synthetic("package:1 core:2 pu:2")
    assert topo.cores == [[0, 1], [2, 3]]


def test_synthetic_with_caches():
    topo = from_hwloc_synthetic("package:2 numa:4 l3:4(size=16MB) core:4 pu:2(indexes=core)")
    l3 = [c for c in topo.caches if c.level == 3][0]
    assert l3.instances == 32 and l3.size_bytes == 16 * 1024**2


def test_ulna_ulna_smt4_numbering():
    topo = topology_from_file(TOPOLOGY / "arm64-ulna-hwloc1.xml")
    assert topo.core_of(128) == [128, 160, 192, 224]


def test_this_vm_memory_from_meminfo_not_hwloc():
    """hwloc under-reports memory in this VM; the live system reads /proc/meminfo."""
    info = discover(with_software=False)
    meminfo = int(open("/proc/meminfo").read().split()[1]) * 1024
    assert info.memory.total_bytes == meminfo
    assert info.memory_bytes() == meminfo


def test_live_matches_lscpu():
    import json
    import subprocess

    topo = discover(with_software=False).topology
    fields = {e["field"].rstrip(":"): e.get("data") for e in json.loads(
        subprocess.run(["lscpu", "-J"], capture_output=True, text=True).stdout)["lscpu"]}
    assert topo.pus_total == int(fields["CPU(s)"])
    assert topo.sockets == int(fields["Socket(s)"])
    assert topo.threads_per_core == int(fields["Thread(s) per core"])


def test_unknown_format_is_exit_2(tmp_path):
    from conftest import cli

    bad = tmp_path / "x.txt"
    bad.write_text("hello world\n")
    out = cli("system", "--from", str(bad))
    assert out.returncode == 2
    assert "unrecognised topology format" in out.stderr
    missing = cli("system", "--from", str(tmp_path / "nope.xml"))
    assert missing.returncode == 2 and "not found" in missing.stderr
