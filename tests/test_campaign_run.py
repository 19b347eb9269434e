"""Campaign execution on the real hpcc and mpirun: resume after kill -9, timeouts, BLAS choice."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import cli, cli_json

# 24 runs (12 configurations x 2 repeats): enough to kill the campaign a quarter of the way in with runs
# both finished and still to do, as the 60 of earlier versions did at 2.5 times the cost.
CAMPAIGN = """\
name: sixty
description: 24 tiny HPCC runs to test interruption and resume
repeats: 2
timeout: 60s
benchmarks:
  - benchmark: hpcc
    space:
      n: [160, 240]
      nb: 16..48:16
      layout: [mpi, hybrid-node]
"""


def _rows(db: Path, sql: str, *args):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def _running(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        return _rows(db, "SELECT COUNT(*) FROM runs WHERE status = 'running'")[0][0]
    except sqlite3.OperationalError:  # the file exists, its schema not yet: polled in that instant
        return 0


def _finished(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        return _rows(db, "SELECT COUNT(*) FROM runs WHERE status IN ('ok','invalid','failed','timeout')")[0][0]
    except sqlite3.OperationalError:  # schema not created yet
        return 0


def test_a_campaign_survives_kill_9_and_resume(tmp_path, isolated_db):
    spec = tmp_path / "sixty.yaml"
    spec.write_text(CAMPAIGN)
    plan = cli_json("plan", str(spec), "--json")
    assert plan["runs"] == 24 and len({r["id"] for r in plan["plan"]}) == 24

    proc = subprocess.Popen([sys.executable, "-m", "clusterbench", "campaign", "run", str(spec), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))
    deadline = time.monotonic() + 120
    while _finished(isolated_db) < 6 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, "campaign finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)  # the tool only, like `kill -9 <pid>`: no chance to clean up
    proc.wait()
    time.sleep(1.5)  # let the orphaned hpcc of the run in flight end
    before = dict(_rows(isolated_db, "SELECT id, ended_at FROM runs WHERE status IN ('ok','invalid')"))
    assert len(before) >= 6

    summary = cli_json("campaign", "run", str(spec), "--json", timeout=300)
    assert summary["skipped"] == len(before)
    assert summary["executed"] == 24 - len(before)
    rows = _rows(isolated_db, "SELECT id, status, ended_at FROM runs WHERE campaign='sixty'")
    assert len(rows) == 24 and len({r[0] for r in rows}) == 24
    assert {r[0] for r in rows} == {r["id"] for r in plan["plan"]}
    assert all(status == "ok" for _, status, _ in rows), rows
    after = {rid: ended for rid, _, ended in rows}
    assert all(after[rid] == ended for rid, ended in before.items())  # finished runs untouched
    # One stored HPL result per run, never two.
    per_run = _rows(isolated_db, "SELECT run_id, COUNT(*) FROM metrics WHERE name='hpl_gflops' GROUP BY run_id")
    assert len(per_run) == 24 and {c for _, c in per_run} == {1}

    again = cli_json("campaign", "run", str(spec), "--json")
    assert again["skipped"] == 24 and again["executed"] == 0

    stats = cli_json("results", "--campaign", "sixty", "--metric", "HPL_Tflops", "--group-by", "n,nb,layout",
                     "--stat", "n,mean,std", "--format", "json")
    assert len(stats) == 12 and {s["n"] for s in stats} == {2}


HANG = """\
name: hang
benchmarks:
  - benchmark: command
    name: hangs
    params:
      command: "sleep 291.5 & sleep 291.5; echo never"
    timeout: 1s
  - benchmark: command
    name: after
    params:
      command: "echo value 42"
      metrics: [{name: value, pattern: 'value (\\d+)'}]
"""


def _sleepers() -> list[str]:
    out = subprocess.run(["pgrep", "-f", "sleep 291.5"], capture_output=True, text=True).stdout
    return out.split()


def test_hanging_run_is_killed_with_its_tree_and_the_campaign_goes_on(tmp_path, isolated_db):
    spec = tmp_path / "hang.yaml"
    spec.write_text(HANG)
    t0 = time.monotonic()
    summary = cli_json("campaign", "run", str(spec), "--json")
    assert time.monotonic() - t0 < 30
    assert summary["timeout"] == 1 and summary["ok"] == 1
    rows = dict(_rows(isolated_db, "SELECT json_extract(tags, '$.block'), status FROM runs"))
    assert rows == {"hangs": "timeout", "after": "ok"}
    reason = _rows(isolated_db, "SELECT reason FROM runs WHERE status='timeout'")[0][0]
    assert "timeout" in reason
    assert _sleepers() == []  # both sleeps (background and foreground) were killed


def test_sigterm_marks_the_run_interrupted_and_resume_redoes_it(tmp_path, isolated_db):
    spec = tmp_path / "slow.yaml"
    spec.write_text("name: slow\nbenchmarks:\n  - benchmark: command\n    params:\n"
                    "      command: 'sleep {t}; echo done'\n    space:\n      t: [0.1, 30]\n")
    proc = subprocess.Popen([sys.executable, "-m", "clusterbench", "campaign", "run", str(spec)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Until the second run is in flight: 4-5 s here when quiet; a clone's suite near its end once took
    # over 30 s to get there (the signal then came between the two runs, and no run was in flight).
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if _running(isolated_db) and _finished(isolated_db) == 1:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 130
    statuses = sorted(s for (s,) in _rows(isolated_db, "SELECT status FROM runs"))
    assert statuses == ["interrupted", "ok"]
    plan = cli_json("plan", str(spec), "--json")
    assert [r["done"] for r in plan["plan"]] == [True, False]


BLAS = """\
name: blas
benchmarks:
  - benchmark: hpcc
    params: {n: 240, nb: 32, layout: mpi}
    space:
      blas: [openblas-serial, blis-openmp]
  - benchmark: hpcc
    name: preloaded
    params: {n: 240, nb: 32, layout: mpi, blas: openblas-serial}
    env:
      LD_PRELOAD: /usr/lib/x86_64-linux-gnu/blis-openmp/libblas.so.3
"""


@pytest.mark.skipif(not Path("/usr/lib/x86_64-linux-gnu/blis-openmp/libblas.so.3").exists()
                    or not Path("/usr/lib/x86_64-linux-gnu/openblas-serial/libblas.so.3").exists(),
                    reason="needs libopenblas0-serial and libblis (make setup installs them)")
def test_blas_actually_loaded_is_recorded_and_checked(tmp_path, isolated_db):
    spec = tmp_path / "blas.yaml"
    spec.write_text(BLAS)
    cli_json("campaign", "run", str(spec), "--json")
    rows = _rows(isolated_db, "SELECT json_extract(tags,'$.block'), json_extract(params,'$.blas'), facts, status,"
                              " reason FROM runs ORDER BY json_extract(params,'$.blas'), 1")
    facts = {(block, blas): (json.loads(f), status, reason) for block, blas, f, status, reason in rows}
    blis, _, _ = facts[("hpcc", "blis-openmp")]
    serial, status, _ = facts[("hpcc", "openblas-serial")]
    assert status == "ok"
    assert blis["blas_loaded_variant"] == "blis-openmp"
    assert serial["blas_loaded_variant"] == "openblas-serial"
    assert blis["blas_loaded_resolved"] != serial["blas_loaded_resolved"]
    # A library forced in front (LD_PRELOAD) wins over LD_LIBRARY_PATH: detected, run invalid.
    _, status, reason = facts[("preloaded", "openblas-serial")]
    assert status == "invalid" and "asked for BLAS openblas-serial" in reason


def test_spread_spaces_the_repeat_rounds(tmp_path, isolated_db):
    spec = tmp_path / "spread.yaml"
    spec.write_text("name: spread\nrepeats: 3\nbenchmarks:\n  - benchmark: command\n"
                    "    params: {command: 'echo hi'}\n    space: {x: [1, 2]}\n")
    t0 = time.monotonic()
    cli_json("campaign", "run", str(spec), "--spread", "3s", "--json")
    assert time.monotonic() - t0 >= 2.0  # rounds start at 0, 1 and 2 s
    rows = _rows(isolated_db, "SELECT repeat, started_at FROM runs ORDER BY started_at")
    assert [r for r, _ in rows] == [0, 0, 1, 1, 2, 2]  # repeat-major order


def test_run_directory_holds_inputs_outputs_and_run_json(tmp_path, isolated_db):
    spec = tmp_path / "one.yaml"
    spec.write_text("name: one\nbenchmarks:\n  - benchmark: hpcc\n    params: {n: 200, nb: 40}\n")
    cli_json("campaign", "run", str(spec), "--json")
    (run_id, workdir), = _rows(isolated_db, "SELECT id, workdir FROM runs")
    names = {p.name for p in Path(workdir).iterdir()}
    assert {"hpccinf.txt", "hpccoutf.txt", "stdout.txt", "stderr.txt", "run.json", "libraries.txt"} <= names
    record = json.loads((Path(workdir) / "run.json").read_text())
    assert record["id"] == run_id and record["status"] == "ok" and record["params"]["nb"] == 40
    out = cli("plan", str(spec))
    assert out.returncode == 0 and "stored" in out.stdout
