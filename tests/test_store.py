"""The SQLite store: paths, WAL, transactions, metrics, raw outputs."""

from __future__ import annotations

import sqlite3

from clusterbench.bench.metrics import Metric
from clusterbench.store.db import Store, default_db_path
from clusterbench.store.records import RunRecord, relevant_env


def test_default_path_env_and_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("CLUSTERBENCH_DB", str(tmp_path / "a.db"))
    assert default_db_path() == tmp_path / "a.db"
    monkeypatch.delenv("CLUSTERBENCH_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_db_path() == tmp_path / "xdg" / "clusterbench" / "results.db"


def test_run_lifecycle(tmp_path):
    out = tmp_path / "hpccoutf.txt"
    out.write_text("raw output\n")
    with Store(tmp_path / "r.db") as store:
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        store.begin_run(RunRecord(id="r1", benchmark="hpcc", params={"n": 1000}))
        assert store.run("r1")["status"] == "running"
        store.finish_run("r1", "ok", True, None, 0, 1.5,
                         [Metric("hpl_gflops", 12.5, "Gflop/s", labels={"nb": 64})], [out])
        row = store.run("r1")
        assert (row["status"], row["valid"], row["duration_s"]) == ("ok", 1, 1.5)
        (m,) = store.metrics("r1")
        assert (m["name"], m["value"], m["unit"]) == ("hpl_gflops", 12.5, "Gflop/s")
        art = store.artifact("r1", "hpccoutf.txt")
        assert art["content"] == b"raw output\n" and art["size"] == 11
    # readable by plain sqlite3 from another connection
    con = sqlite3.connect(tmp_path / "r.db")
    assert con.execute("SELECT count(*) FROM metrics").fetchone()[0] == 1


def test_finish_is_atomic(tmp_path):
    """A failure while writing metrics leaves the run as it was, not half-written."""
    with Store(tmp_path / "r.db") as store:
        store.begin_run(RunRecord(id="r2", benchmark="hpcc"))
        bad = Metric("x", "not a number", "")  # type: ignore[arg-type]
        bad.value = object()  # sqlite cannot bind this
        try:
            store.finish_run("r2", "ok", True, None, 0, 1.0, [Metric("ok", 1.0, ""), bad])
        except Exception:
            pass
        assert store.run("r2")["status"] == "running"
        assert store.metrics("r2") == []


def test_relevant_env():
    env = relevant_env({"OMP_NUM_THREADS": "2", "HOME": "/root", "OPENBLAS_NUM_THREADS": "1", "PATH": "/bin"})
    assert env == {"OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "1"}
