"""`clusterbench build imb|osu|stream|lulesh|hpl|hpcg` on the real sources in ../shared/sources, then each
program run through its clusterbench adapter.

Each program is built once per test session (through the real command line, `build ... --json`)
into one session cache folder; every test points CLUSTERBENCH_CACHE at it, so a later test finds the
builds of an earlier one in the registry as a campaign would. A test whose tarball is absent is
skipped (CI has them). All six builds take about 2.5 min here (2 cores; STREAM's smoke test runs
its 3.3 GB arrays once); the runs add about half a minute.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.conftest import SHARED, cli, cli_json, query

from clusterbench.build import registry
from clusterbench.system.mpi import linked_mpi

SOURCES = SHARED / "sources"
TARBALLS = {"imb": "imb-2021.11.tar.gz", "osu": "osu-micro-benchmarks-7.4.tar.gz", "stream": "stream-5.10.tar.gz",
            "lulesh": "lulesh-2.0.tar.gz", "hpl": "hpl-2.3.tar.gz", "hpcg": "hpcg-3.1.tar.gz"}
VERSIONS = {"IMB-MPI1": "2021.11", "osu_latency": "7.4", "osu_bw": "7.4", "stream": "5.10", "lulesh2.0": "2.0",
            "xhpl": "2.3", "xhpcg": "3.1"}


class Builds:
    """`clusterbench build PROGRAM --source ... --json`, once per session and arguments."""

    def __init__(self, cache: Path):
        self.cache = cache
        self.done: dict[tuple, subprocess.CompletedProcess] = {}

    def get(self, program: str, *extra: str) -> dict:
        tarball = SOURCES / TARBALLS[program]
        if not tarball.is_file():
            pytest.skip(f"needs ../shared/sources/{TARBALLS[program]} (CI has it)")
        key = (program, *extra)
        if key not in self.done:  # a failed build is not retried by the next test either
            self.done[key] = cli("build", program, "--source", str(tarball), *extra, "--json",
                                 env={"CLUSTERBENCH_CACHE": str(self.cache)}, timeout=1800)
        out = self.done[key]
        assert out.returncode == 0, f"build {program} {' '.join(extra)} failed:\n{out.stderr}{out.stdout}"
        return json.loads(out.stdout)


@pytest.fixture(scope="session")
def builds(tmp_path_factory) -> Builds:
    return Builds(tmp_path_factory.mktemp("official-builds"))


@pytest.fixture(autouse=True)
def build_cache(builds, monkeypatch):
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(builds.cache))
    return builds.cache


def bench(*args: str) -> dict:
    """One `bench` run through the CLI: exit 0 and a valid stored run."""
    (run,) = cli_json("bench", *args, "--json")
    assert run["status"] == "ok" and run["valid"], run
    return run


def metric(run: dict, name: str, **labels) -> float:
    values = [m["value"] for m in run["metrics"]
              if m["name"] == name and all(m["labels"].get(k) == v for k, v in labels.items())]
    assert values, f"no {name} {labels} in {[m['name'] for m in run['metrics']]}"
    return values[0]


def stored(db, run_id: str):
    return query(db, "SELECT status, valid, command, params FROM runs WHERE id = ?", run_id)[0]


@pytest.mark.slow
def test_imb_built_and_run_through_the_imb_benchmark(builds, isolated_db):
    p = builds.get("imb")
    assert p["name"] == "IMB-MPI1" and p["version"] == "2021.11" and p["mpi"] in ("openmpi", "mpich")
    assert "-DOMPI_SKIP_MPICXX=1" in p["cppflags"] and p["cflags"] == "-O3 -march=native"
    assert p["optimization"] == "-O0" and "-O0" in p["compile_flags_cxx"]  # upstream's makefile has the last word
    assert 0 < p["smoke_test_latency_us"] < 1000
    run = bench("imb", "-p", "tests=PingPong", "-p", "max_log2=10")
    assert run["facts"]["imb_version"] == "2021.11" and run["facts"]["command"].startswith(p["binary"])
    assert run["facts"]["binary_provenance"]["version"] == "2021.11"
    assert 0 < metric(run, "latency_us", test="PingPong", bytes=0) < 1000
    assert metric(run, "peak_bandwidth", test="PingPong") > 10  # MiB/s, between two ranks of one node
    row = stored(isolated_db, run["id"])
    assert row["status"] == "ok" and row["valid"] == 1 and p["binary"] in row["command"]


@pytest.mark.slow
def test_osu_built_and_each_program_found_by_the_osu_benchmark(builds, isolated_db):
    p = builds.get("osu")
    assert p["name"] == "osu_latency" and p["version"] == "7.4" and p["program"] == "c/mpi/pt2pt/standard/osu_latency"
    for name in ("osu_latency", "osu_bw", "osu_bibw", "osu_mbw_mr", "osu_allreduce", "osu_bcast", "osu_alltoall",
                 "osu_allgather", "osu_reduce", "osu_barrier"):
        assert os.access(p["installed"][name], os.X_OK)
        (entry,) = registry.builds(name)
        assert entry["version"] == "7.4" and entry["binary"] == p["installed"][name]
    latency = bench("osu", "-p", "test=latency", "-p", "max_bytes=1024")
    assert p["binary"] in stored(isolated_db, latency["id"])["command"]
    assert 0 < metric(latency, "latency_us", bytes=1) < 1000
    bandwidth = bench("osu", "-p", "test=bw", "-p", "max_bytes=65536")
    assert metric(bandwidth, "peak_bandwidth") > 10  # MB/s
    allreduce = bench("osu", "-p", "test=allreduce", "-p", "max_bytes=1024")
    assert 0 < metric(allreduce, "latency_us") < 1000
    assert p["installed"]["osu_allreduce"] in stored(isolated_db, allreduce["id"])["command"]


@pytest.mark.slow
def test_stream_sized_by_the_cache_rule_and_run_through_stream_binary(builds, isolated_db):
    from clusterbench.bench.stream.kernel import elements_for
    from clusterbench.system.discover import discover

    p = builds.get("stream")
    assert p["name"] == "stream" and p["version"] == "5.10" and p["mpi"] is None and p["ntimes"] == 10
    assert p["array_size"] == max(10_000_000, elements_for(discover(with_software=False)))
    assert 8 * p["array_size"] >= 4 * (p["last_level_cache_bytes"] or 0)
    assert f"-DSTREAM_ARRAY_SIZE={p['array_size']}" in p["compile_flags"] and "-fopenmp" in p["compile_flags"]
    assert ("-mcmodel=medium" in p["compile_flags"]) == (24 * p["array_size"] > 2**31 - 2**24)
    assert p["smoke_test_triad_mbs"] > 100
    run = bench("stream-binary")
    assert metric(run, "stream_triad") > 100  # MB/s
    assert run["facts"]["stream_version"] == "5.10" and run["facts"]["array_size"] == p["array_size"]
    assert p["binary"] in stored(isolated_db, run["id"])["command"]


@pytest.mark.slow
def test_lulesh_built_and_run_once(builds):
    from clusterbench.bench.lulesh.build import lulesh_figures
    from clusterbench.launch.mpirun import MpiLaunch, mpirun_command

    p = builds.get("lulesh")
    assert p["name"] == "lulesh2.0" and p["version"] == "2.0" and p["smoke_test_fom"] > 0
    assert "-DUSE_MPI=1" in p["make_variables"]["CXX"] and "-fopenmp" in p["make_variables"]["CXXFLAGS"]
    assert linked_mpi(p["binary"]) == p["mpi"]
    cmd = mpirun_command(MpiLaunch(ranks=1, bind_to="none", env={"OMP_NUM_THREADS": "1"}, mpi=p["mpi"]),
                         [p["binary"], "-s", "5", "-i", "2"])
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ) | {"OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Iteration count     =  2" in done.stdout and "Problem size        =  5" in done.stdout
    figures = lulesh_figures(done.stdout)
    assert figures["elapsed_s"] > 0 and figures["fom"] > 0


@pytest.mark.slow
def test_hpcg_real_tree_is_3_1_and_runs(builds, isolated_db):
    p = builds.get("hpcg")
    assert p["name"] == "xhpcg" and p["version"] == "3.1"
    run = bench("hpcg", "-p", "nx=16", "-p", "rt=1", "-p", "ranks=1")
    assert 0 < metric(run, "hpcg_gflops") < 1000 and run["facts"]["list_eligible"] is False
    assert run["facts"]["binary_provenance"]["version"] == "3.1"
    assert (Path(run["workdir"]) / "hpcg.dat").read_text().splitlines()[2:] == ["16 16 16", "1"]
    names = {r["name"] for r in query(isolated_db, "SELECT name FROM artifacts WHERE run_id = ?", run["id"])}
    assert {"hpcg.dat", "hpcg-report.txt"} <= names


@pytest.mark.slow
def test_hpl_git_tree_is_2_3_and_runs(builds):
    p = builds.get("hpl")
    assert p["name"] == "xhpl" and p["version"] == "2.3" and p["tree"] == "netlib" and p["smoke_test_gflops"] > 0.1
    run = bench("hpl", "-p", "n=1000", "-p", "nb=100")
    assert run["facts"]["binary_provenance"]["version"] == "2.3" and metric(run, "hpl_gflops") > 0.1


@pytest.mark.slow
def test_build_list_shows_every_build_with_its_version(builds):
    for program in TARBALLS:
        builds.get(program)
    listed = cli_json("build", "list", "--json")
    versions = {e["name"]: e["version"] for e in listed}
    assert {name: versions.get(name) for name in VERSIONS} == VERSIONS
    assert all(os.access(e["binary"], os.X_OK) for e in listed)
    table = cli("build", "list")
    assert table.returncode == 0 and "2021.11" in table.stdout and "stream" in table.stdout


@pytest.mark.slow
def test_second_build_reuses_the_binary(builds):
    first = builds.get("lulesh")
    again = cli_json("build", "lulesh", "--source", str(SOURCES / TARBALLS["lulesh"]), "--json")
    assert again["binary"] == first["binary"] and again["built_at"] == first["built_at"]


@pytest.mark.slow
def test_failed_build_installs_nothing(builds, build_cache):
    tarball = SOURCES / TARBALLS["lulesh"]
    if not tarball.is_file():
        pytest.skip(f"needs ../shared/sources/{TARBALLS['lulesh']} (CI has it)")
    before = registry.load()
    out = cli("build", "lulesh", "--source", str(tarball), "--cflags", "-O2 -fno-such-flag")
    assert out.returncode == 2 and "make failed" in out.stdout + out.stderr
    assert registry.load() == before and not [p for p in (build_cache / "builds").glob("lulesh-build-*")]


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("mpirun.mpich"), reason="needs Debian's mpich (make setup installs it)")
def test_imb_built_with_mpich_runs_under_mpich(builds, isolated_db):
    p = builds.get("imb", "--mpi", "mpich")
    assert p["mpi"] == "mpich" and p["mpi_version"] and p["version"] == "2021.11"
    assert linked_mpi(p["binary"]) == "mpich" and registry.provenance(p["binary"])["mpi"] == "mpich"
    run = bench("imb", "-p", "mpi=mpich", "-p", "tests=PingPong", "-p", "max_log2=4")
    assert run["facts"]["command"].startswith(p["binary"])  # the MPICH build, not the Open MPI one
    assert 0 < metric(run, "latency_us", bytes=0) < 1000
    row = stored(isolated_db, run["id"])
    assert json.loads(row["params"])["mpi"] == "mpich" and "mpirun.mpich" in row["command"]


def test_a_build_without_mpi_fits_any_launcher(tmp_path, monkeypatch):
    """STREAM records "mpi": null; a run under either MPI's mpirun (ranks > 1) still finds it."""
    from clusterbench.bench.official import find_binary

    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))  # no other `stream` (ImageMagick has one) on PATH
    for name, mpi in (("stream", None), ("IMB-MPI1", "mpich")):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
        registry.register({"name": name, "binary": str(tmp_path / name), "built_at": "2025-01-01T00:00:00",
                           "mpi": mpi})
    for mpi in (None, "openmpi", "mpich"):
        assert find_binary(("stream",), mpi=mpi).path == str(tmp_path / "stream")
    assert find_binary(("IMB-MPI1",), mpi="openmpi") is None  # built with MPICH: not for Open MPI's mpirun
    assert find_binary(("IMB-MPI1",), mpi="mpich").path == str(tmp_path / "IMB-MPI1")
