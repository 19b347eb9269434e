"""MPICH for real, beside Open MPI: Debian's `mpich` (Hydra's `mpirun.mpich`, `mpicc.mpich`).

Every test launches real ranks with the real Hydra launcher. Expected placements come from
MPICH's documented `-bind-to core` (each rank bound to one core, ranks filling cores in order:
the Hydra user guide, "Process-core binding"), read back by our affinity probe from the kernel.
The multi-node MPICH tests are in test_virtual_cluster.py.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
from tests.conftest import cli, cli_json, query

from clusterbench.system.mpi import linked_mpi, mpi_stack

pytestmark = pytest.mark.skipif(not shutil.which("mpirun.mpich"),
                                reason="needs Debian's mpich (make setup installs it for the tests)")


def test_each_mpi_has_its_own_launcher_and_compiler():
    openmpi, mpich = mpi_stack("openmpi"), mpi_stack("mpich")
    assert openmpi.implementation == "Open MPI" and not openmpi.hydra
    assert mpich.implementation == "MPICH" and mpich.hydra and mpich.version
    assert os.path.basename(mpich.mpirun) in ("mpirun.mpich", "mpiexec.mpich", "mpiexec.hydra", "mpirun")
    assert mpich.mpicc != openmpi.mpicc and mpich.mpicxx != openmpi.mpicxx


def test_kernels_are_built_per_mpi_and_linked_to_it(tmp_path):
    from clusterbench.native import build as native

    os.environ["CLUSTERBENCH_CACHE"] = str(tmp_path / "cache")
    try:
        with_openmpi = native.build("pingpong", mpi=True, mpi_choice="openmpi")
        with_mpich = native.build("pingpong", mpi=True, mpi_choice="mpich")
    finally:
        os.environ.pop("CLUSTERBENCH_CACHE")
    assert with_openmpi.key != with_mpich.key
    assert linked_mpi(str(with_openmpi.binary)) == "openmpi" and linked_mpi(str(with_mpich.binary)) == "mpich"


def _placement(db, run_id: str) -> set[tuple]:
    facts = json.loads(query(db, "SELECT facts FROM runs WHERE id = ?", run_id)[0]["facts"])
    return {(p["rank"], tuple(p["allowed"])) for p in facts["placement"]}


def test_hydra_binds_ranks_to_cores_as_the_probe_sees(isolated_db):
    runs = cli_json("bench", "affinity", "-p", "mpi=mpich", "-p", "ranks=2", "-p", "threads=1",
                    "-p", "bind_to=core", "--json")
    run = runs[0]
    stored = query(isolated_db, "SELECT command, params, launcher FROM runs WHERE id = ?", run["id"])[0]
    assert "mpirun.mpich" in stored["command"] and "-bind-to core" in stored["command"]
    assert json.loads(stored["params"])["mpi"] == "mpich"
    launcher = json.loads(stored["launcher"])
    assert launcher["mpi"] == "mpich" and launcher["mpi_version"]
    assert _placement(isolated_db, run["id"]) == {(0, (0,)), (1, (1,))}


def test_one_campaign_runs_both_mpis_and_results_group_by_mpi(tmp_path):
    campaign = tmp_path / "mpis.yaml"
    campaign.write_text("name: two-mpis\nrepeats: 2\nbenchmarks:\n  - benchmark: pingpong\n"
                        "    params: {max_log2: 16, rounds: 1}\n    space:\n      mpi: [openmpi, mpich]\n")
    out = cli("campaign", "run", str(campaign))
    assert out.returncode == 0, out.stderr + out.stdout
    rows = cli_json("results", "--campaign", "two-mpis", "--metric", "latency_us", "--group-by", "mpi",
                    "--stat", "n,mean", "--format", "json")
    assert {r["mpi"]: r["n"] for r in rows} == {"mpich": 2, "openmpi": 2}
    assert all(0 < r["mean"] < 1000 for r in rows)
    table = cli("results", "--campaign", "two-mpis", "--metric", "latency_us", "--group-by", "mpi")
    assert "mpich" in table.stdout and "openmpi" in table.stdout


def test_the_cluster_section_chooses_the_mpi_of_every_block(tmp_path, isolated_db):
    campaign = tmp_path / "c.yaml"
    campaign.write_text("name: site-mpich\ncluster: {mpi: mpich}\nbenchmarks:\n  - benchmark: pingpong\n"
                        "    params: {max_log2: 4, rounds: 1}\n  - benchmark: pingpong\n    name: own-choice\n"
                        "    params: {max_log2: 4, mpi: openmpi}\n")
    out = cli("campaign", "run", str(campaign))
    assert out.returncode == 0, out.stderr + out.stdout
    commands = sorted(r["command"].split()[0] for r in query(isolated_db, "SELECT command FROM runs"))
    assert [os.path.basename(c) for c in commands] == ["mpirun", "mpirun.mpich"]


def test_hpcc_with_mpich_is_refused_before_anything_runs(isolated_db):
    out = cli("bench", "hpcc", "-p", "n=1000", "-p", "mpi=mpich")
    assert out.returncode == 2
    assert "linked to openmpi" in out.stderr and "Debian's hpcc is built with Open MPI" in out.stderr
    assert "Traceback" not in out.stderr
    assert not isolated_db.exists() or not query(isolated_db, "SELECT id FROM runs")


def test_unknown_mpi_is_refused_with_the_choices():
    out = cli("bench", "pingpong", "-p", "mpi=lam")
    assert out.returncode == 2 and "openmpi, mpich" in out.stderr


@pytest.mark.slow
def test_build_hpl_with_mpich_and_run_it(tmp_path_factory, monkeypatch):
    """`build hpl --mpi mpich` (Debian's hpcc source, needs the Debian archive) makes an xhpl
    linked to MPICH; the hpl benchmark with mpi=mpich finds it and Hydra runs it."""
    cache = tmp_path_factory.mktemp("mpich-build")
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(cache))
    built = cli_json("build", "hpl", "--mpi", "mpich", "--json", timeout=900)
    assert built["mpi"] == "mpich" and built["mpicc"].endswith("mpicc.mpich")
    assert linked_mpi(built["binary"]) == "mpich" and built["smoke_test_gflops"] > 0.1
    runs = cli_json("bench", "hpl", "-p", "n=1024", "-p", "nb=128", "-p", "mpi=mpich", "-p", "ranks=2", "--json")
    assert runs[0]["valid"], runs
    gflops = [m["value"] for m in runs[0]["metrics"] if m["name"] == "hpl_gflops"]
    assert gflops and gflops[0] > 0.5
    refused = cli("bench", "hpl", "-p", "n=1024", "-p", "mpi=mpich", "-p", "binary=/usr/bin/hpcc")
    assert refused.returncode == 2 and "linked to openmpi" in refused.stderr
