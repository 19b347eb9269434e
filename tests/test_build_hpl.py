"""`clusterbench build hpl` for real: Debian's hpcc source, HPL's make system, a working xhpl.

Needs the Debian archive (a package registry, reachable here and in CI). The build goes to a
temporary cache; it takes about 25 s once for the whole module.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from tests.conftest import cli, cli_json

from clusterbench.bench.hpl.build import build_hpl


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cache = tmp_path_factory.mktemp("build-cache")
    old = os.environ.get("CLUSTERBENCH_CACHE")
    os.environ["CLUSTERBENCH_CACHE"] = str(cache)
    try:
        yield build_hpl(), cache
    finally:
        if old is None:
            os.environ.pop("CLUSTERBENCH_CACHE")
        else:
            os.environ["CLUSTERBENCH_CACHE"] = old


@pytest.fixture(autouse=True)
def use_cache(built, monkeypatch):
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(built[1]))


def test_built_from_debian_source_with_provenance(built):
    result, cache = built
    p = result.provenance
    assert result.rebuilt and result.binary.is_file() and str(result.binary).startswith(str(cache))
    assert p["source"].startswith("Debian source package hpcc") and len(p["source_sha256"]) == 64
    assert p["tree"] == "hpcc" and p["version"] == "2.0" and p["blas"] == "generic"
    assert any("MPI-1 calls renamed" in x for x in p["patches"]) and "read HPL.dat, not hpccinf.txt" in p["patches"]
    assert p["smoke_test_gflops"] > 0.1
    assert (result.binary.parent / "Make.clusterbench").read_text().count("LAlib") >= 1
    again = build_hpl()
    assert not again.rebuilt and again.binary == result.binary
    listed = cli_json("build", "list", "--json")
    assert [e["binary"] for e in listed] == [str(result.binary)]


def test_campaign_runs_the_built_xhpl_standalone(built, tmp_path):
    campaign = tmp_path / "nb.yaml"
    campaign.write_text("name: built-xhpl\nbenchmarks:\n  - benchmark: hpl\n    params: {n: 1536, layout: mpi}\n"
                        "    space: {nb: [64, 128]}\n")
    out = cli("campaign", "run", str(campaign))
    assert out.returncode == 0, out.stderr + out.stdout
    rows = cli_json("results", "--campaign", "built-xhpl", "--metric", "hpl_gflops", "--group-by", "nb",
                    "--stat", "n,mean", "--format", "json")
    assert sorted(r["nb"] for r in rows) == [64, 128] and all(r["n"] == 1 and r["mean"] > 0.5 for r in rows)
    (run,) = cli_json("bench", "hpl", "-p", "n=1000", "-p", "nb=100", "--json")
    assert run["valid"] and run["facts"]["binary_provenance"]["binary"] == str(built[0].binary)
    assert run["facts"]["blas_loaded_variant"]  # the generic link really loads the chosen variant


def test_failed_residual_is_stored_invalid(built):
    (run,) = cli_json("bench", "hpl", "-p", "n=800", "-p", "nb=64", "-p", "threshold=0.000001", "--json")
    assert run["status"] == "invalid" and not run["valid"] and "FAILED" in run["reason"]
    assert all(not m["valid"] for m in run["metrics"] if m["name"] == "hpl_gflops")


def test_bad_hpl_dat_stops_instead_of_running_defaults(built, tmp_path):
    (tmp_path / "HPL.dat").write_text("HPL input\nnothing useful\nHPL.out\n6\nnot-a-number\n")
    done = subprocess.run(["mpirun", "--allow-run-as-root", "-np", "1", str(built[0].binary)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert "Illegal input" in done.stderr + done.stdout
    assert "WR" not in done.stdout  # no test ran with HPCC's built-in defaults


def test_bad_source_and_blas_exit_2(tmp_path):
    assert cli("build", "hpl", "--source", str(tmp_path / "missing")).returncode == 2
    (tmp_path / "empty").mkdir()
    out = cli("build", "hpl", "--source", str(tmp_path / "empty"))
    assert out.returncode == 2 and "no HPL source found" in out.stderr
    assert cli("build", "hpl", "--blas", "atlas").returncode == 2
