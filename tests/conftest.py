"""Shared test fixtures: the ../shared fixtures, an isolated results database, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CLUSTERBENCH_SHARED", ROOT.parent / "shared"))
FIXTURES = SHARED / "fixtures"
OUTPUTS = FIXTURES / "outputs"
TOPOLOGY = FIXTURES / "topology"
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(autouse=True)
def isolated_db(tmp_path, monkeypatch):
    """Every test gets its own results database and data directory."""
    db = tmp_path / "cb" / "results.db"
    monkeypatch.setenv("CLUSTERBENCH_DB", str(db))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return db


def query(db, sql: str, *args) -> list:
    """Rows of a read-only SQL query on a results database, the way a user would inspect it."""
    import sqlite3

    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def cli(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the real command line in a subprocess, so exit codes are the real ones."""
    full_env = dict(os.environ) | (env or {})
    full_env.setdefault("COLUMNS", "200")
    return subprocess.run([sys.executable, "-m", "clusterbench", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout)


def cli_json(*args: str, **kw):
    out = cli(*args, **kw)
    assert out.returncode == 0, out.stderr + out.stdout
    return json.loads(out.stdout)
