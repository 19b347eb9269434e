"""`clusterbench run` end to end with the real mpirun and the real hpcc (tiny N)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from clusterbench.bench.hpcc.benchmark import Hpcc, find_hpcc
from clusterbench.execution.executor import RunRequest, execute
from clusterbench.store.db import Store
from conftest import cli, cli_json

pytestmark = pytest.mark.skipif(not (shutil.which("hpcc") and shutil.which("mpirun")),
                                reason="needs hpcc and mpirun (make setup installs them)")


def _raw_gflops(path: Path) -> list[float]:
    """Gflops as HPL itself printed them, read independently of the parser."""
    text = path.read_text()
    return [float(m.group(1)) for m in re.finditer(r"^WR\S+(?:\s+\d+){4}\s+\S+\s+(\S+)\s*$", text, re.M)]


def test_run_stores_and_reports_hpl_best(isolated_db):
    s = cli_json("run", "--n", "960", "--nb", "96", "--no-hpl", "--json")
    (run,) = [r for r in s["runs"] if "-hpcc-" in r["id"]]
    assert run["valid"] and run["status"] == "ok"
    # the built-in kernels add what HPCC alone does not give: thread scaling and the size curve
    assert [r["threads"] for r in s["stream_threads"]] == sorted({1, os.cpu_count()})
    assert all(r["triad_mbs"] > 100 for r in s["stream_threads"])
    rows = s["pingpong_curve"]["rows"]
    assert [r["bytes"] for r in rows] == [0, *(2**k for k in range(23))]
    assert rows[0]["time_us"] < rows[-1]["time_us"] and s["skipped"] == []
    assert len(s["runs"]) == 1 + len(s["stream_threads"]) + 1 and all(r["valid"] for r in s["runs"])
    raw = _raw_gflops(Path(run["workdir"]) / "hpccoutf.txt")
    assert raw and s["rmax_gflops"] == max(raw)
    assert s["hpl"]["n"] == 960 and s["hpl"]["nb"] == 96 and (s["hpl"]["p"], s["hpl"]["q"]) == (1, 2)
    # sanity ranges, never exact speeds: this machine is noisy
    assert 0 < s["rmax_gflops"] < 2 * s["rpeak_gflops"]
    assert 0 < s["efficiency"] < 2
    assert s["dgemm_gflops"]["single"] > 0 and s["dgemm_gflops"]["star_per_rank"] > 0
    assert all(v and v > 0 for v in s["stream_gbs"]["single"].values())
    assert 0 < s["pingpong"]["latency_us_min"] < 1000
    # the stored figure is the one printed, and the raw output is kept in the database
    con = sqlite3.connect(isolated_db)
    stored = con.execute("SELECT max(value) FROM metrics WHERE run_id=? AND name='hpl_gflops' AND valid=1",
                         (run["id"],)).fetchone()[0]
    assert stored == max(raw)
    with Store(isolated_db, read_only=True) as store:  # raw outputs are kept once, compressed, by content
        blob = store.artifact(run["id"], "hpccoutf.txt")["content"]
    assert b"End of Summary section." in blob
    row = con.execute("SELECT command, env, system_id FROM runs WHERE id=?", (run["id"],)).fetchone()
    assert "hpcc" in row[0] and "-np 2" in row[0]
    assert json.loads(row[1])["OPENBLAS_NUM_THREADS"] == "1"
    assert con.execute("SELECT count(*) FROM systems WHERE id=?", (row[2],)).fetchone()[0] == 1

    listed = cli("results")
    assert listed.returncode == 0 and run["id"] in listed.stdout
    exported = cli_json("results", "--format", "json", "--metric", "hpl_gflops", "--benchmark", "hpcc")
    assert [r["value"] for r in exported] == [max(raw)]
    csv_out = cli("results", "--format", "csv")
    assert csv_out.stdout.splitlines()[0].startswith("run_id,benchmark")
    detail = cli_json("results", run["id"], "--format", "json")
    assert {a["name"] for a in detail["artifacts"]} >= {"hpccinf.txt", "hpccoutf.txt"}


def test_hybrid_layout(isolated_db):
    s = cli_json("run", "--n", "1920", "--nb", "96", "--layout", "hybrid-node", "--no-kernels", "--no-hpl", "--json")
    assert len(s["runs"]) == 1 and s["stream_threads"] == [] and s["pingpong_curve"] is None
    assert s["runs"][0]["valid"]
    assert (s["hpl"]["ranks"], s["hpl"]["threads"], s["hpl"]["p"], s["hpl"]["q"]) == (1, os.cpu_count(), 1, 1)


def test_failed_residual_is_stored_invalid_and_never_rmax(isolated_db):
    with Store() as store:
        point = {"n": 1000, "nb": 64, "p": 1, "q": 2, "layout": "mpi", "nodes": 1, "ranks": 2, "threads": 1,
                 "bind_to": "core", "threshold": 1e-9}
        res = execute(store, RunRequest(Hpcc.placed(point, find_hpcc())))
        assert res.status == "invalid" and not res.valid
        assert "FAILED" in res.reason
        raw = _raw_gflops(res.workdir / "hpccoutf.txt")
        assert raw  # HPL did print a rate...
        assert res.outcome.best("hpl_gflops") is None  # ...but it is never a best result
        rows = store.metric_rows("hpl_gflops", valid_only=True)
        assert rows == []


def test_budget_planning_fits():
    plan = cli_json("run", "--budget", "30s", "--dry-run", "--json")
    assert plan["estimate_s"] <= 30
    assert plan["n"] % plan["nb"] == 0 and plan["n"] >= plan["nb"]


@pytest.mark.parametrize("args,needle", [
    (["--budget", "soon"], "invalid --budget"),
    (["--n", "-5"], "--n"),
    (["--n", "2000", "--nb", "192"], "not a multiple"),
    (["--n", "192000"], "needs"),
    (["--layout", "diagonal"], "diagonal"),
    (["--xhpl", "/nonexistent/xhpl"], "xhpl not found"),
])
def test_bad_input_exit_2_runs_nothing(args, needle, isolated_db):
    out = cli("run", *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert needle in out.stderr
    if isolated_db.exists():
        assert sqlite3.connect(isolated_db).execute("SELECT count(*) FROM runs").fetchone()[0] == 0


@pytest.mark.parametrize("missing,hint", [("hpcc", "apt-get install hpcc"), ("mpirun", "openmpi-bin")])
def test_missing_binary_exit_2_with_hint(missing, hint, tmp_path, isolated_db):
    """A PATH holding every needed tool except one."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("hpcc", "mpirun", "ldconfig", "cc"):
        found = shutil.which(tool)
        if found and tool != missing:
            (bindir / tool).symlink_to(found)
    out = cli("run", "--n", "1920", "--nb", "96", env={"PATH": str(bindir)})
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"{missing} not found" in out.stderr and hint in out.stderr
    if isolated_db.exists():
        assert sqlite3.connect(isolated_db).execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def test_standalone_hpl_gives_rmax_with_most_of_the_budget(xhpl, isolated_db):
    """By default `run` adds a standalone xhpl beside HPCC; Rmax is the best valid result of either."""
    plan = cli_json("run", "--budget", "2m", "--dry-run", "--json")
    hpl = plan["hpl"]
    assert hpl and hpl["binary"] and hpl["point"]["n"] > plan["n"], plan  # xhpl gets the larger problem
    assert hpl["estimate_s"] > 0.5 * 120 and plan["estimate_s"] <= 120
    assert "planner's defaults" in hpl["config_source"]
    s = cli_json("run", "--n", "1920", "--no-kernels", "--json")
    by_bench = {r["id"].split("-")[2]: r for r in s["runs"]}
    assert set(by_bench) == {"hpcc", "hpl"} and all(r["valid"] for r in s["runs"])
    with Store(isolated_db, read_only=True) as store:
        best = max(row["value"] for row in store.metric_rows("hpl_gflops", valid_only=True))
    assert s["rmax_gflops"] == best and s["hpl"]["benchmark"] in ("hpcc", "hpl")


def test_known_configuration_from_a_tuning_session_is_used(xhpl, isolated_db):
    """Runs tagged tune_best (what `tune hpl` leaves) set NB, grid and knobs of the next `run`."""
    out = cli("bench", "hpl", "-p", "n=1600", "-p", "nb=64", "-p", "p=2", "-p", "q=1", "-p", "bcast=2rm",
              "--repeats", "2", "--tag", "tune_best=s1", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    plan = cli_json("run", "--budget", "2m", "--dry-run", "--json")
    point = plan["hpl"]["point"]
    assert (point["nb"], point["p"], point["q"], point["bcast"]) == (64, 2, 1, "2rm")
    assert "tuning session s1" in plan["hpl"]["config_source"]
    assert point["n"] >= 2000  # sized from the budget, not the session's small N
    # the user's --nb still wins over the known configuration
    plan = cli_json("run", "--budget", "2m", "--nb", "128", "--dry-run", "--json")
    assert plan["hpl"]["point"]["nb"] == 128 and plan["hpl"]["point"]["bcast"] == "2rm"
    # a --layout other than the known one falls back to the planner's defaults
    plan = cli_json("run", "--budget", "2m", "--layout", "hybrid-node", "--dry-run", "--json")
    assert plan["hpl"]["point"].get("bcast") is None and "planner" in plan["hpl"]["config_source"]
