"""Shared test fixtures: the input files (ours in tests/fixtures, the rest in ../shared), an isolated results
database, the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
# The redistributable fixtures travel with the repository (see tests/fixtures/README.md); the cloud and LSF
# outputs have no licence, so they stay in ../shared, which sits beside the checkout in CI but not in a clone.
LOCAL_FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED = Path(os.environ.get("CLUSTERBENCH_SHARED", ROOT.parent / "shared"))
SHARED_FIXTURES = SHARED / "fixtures"
HAS_SHARED = (SHARED_FIXTURES / "outputs").is_dir()  # is the full corpus here (as in CI)?
FIXTURES = SHARED_FIXTURES if HAS_SHARED else LOCAL_FIXTURES
OUTPUTS = FIXTURES / "outputs"  # the fullest outputs folder available, for tests that import all of it
TOPOLOGY = LOCAL_FIXTURES / "topology"  # every topology file is redistributable, so ours is complete


def fixture(relpath: str) -> Path:
    """The fixture file (or folder) at relpath under fixtures/: our copy if we ship it, else the shared one.

    Skips the calling test (or module, if called at import) when neither exists: only the files that may not
    be redistributed can be missing, and only where ../shared is not beside the checkout.
    """
    for base in (LOCAL_FIXTURES, SHARED_FIXTURES):
        if (base / relpath).exists():
            return base / relpath
    pytest.skip(f"needs ../shared/fixtures/{relpath} (not redistributable: no licence); present in CI",
                allow_module_level=True)


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


# ---------------------------------------------------------------- the virtual cluster (scripts/virtual-cluster)

SCRIPT = ROOT / "scripts" / "virtual-cluster"
STATE = Path("/run/clusterbench-vc/cbvc")
NODES = 3

def vc(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120)
    if check:
        assert out.returncode == 0, out.stdout + out.stderr
    return out


@pytest.fixture(scope="session")
def cluster():
    """The virtual cluster's nodes and Slurm configuration."""
    if os.geteuid() != 0 or not shutil.which("slurmctld") or not shutil.which("sshd"):
        pytest.skip("the virtual cluster needs root, slurm-wlm and openssh-server (make setup as root)")
    ours = False
    if not (STATE / "size").exists():
        vc("up", str(NODES))
        ours = True
    size = int((STATE / "size").read_text())
    assert size >= 3, "the tests need a virtual cluster of 3 or more nodes: scripts/virtual-cluster up 3"
    yield {"size": size, "slurm_conf": str(STATE / "slurm" / "slurm.conf")}
    if ours:
        vc("down")


@pytest.fixture
def shared_db(monkeypatch, cluster):
    """A store on the filesystem the nodes share (their /tmp is their own, as on a real cluster)."""
    folder = Path("/var/tmp") / f"clusterbench-test-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    db = folder / "results.db"
    monkeypatch.setenv("CLUSTERBENCH_DB", str(db))
    monkeypatch.setenv("SLURM_CONF", cluster["slurm_conf"])
    yield db
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def xhpl() -> str:
    """A standalone xhpl for the whole session, built once through `clusterbench build hpl`'s own code
    into the user's build cache (reused when already built: the build is keyed by its inputs)."""
    from clusterbench.bench.hpl.build import build_hpl
    from clusterbench.errors import UserInputError

    try:
        return str(build_hpl().binary)
    except UserInputError as exc:  # no compiler, no Debian archive
        pytest.skip(f"cannot build xhpl here: {exc.message}")


def interruptible() -> None:
    """preexec_fn for a child that the test interrupts with SIGINT as Ctrl-C would: a harness started in
    the background (`nohup ... &`, no job control) ignores SIGINT and its children inherit that, so Python
    in the child would never raise KeyboardInterrupt. Restoring the default makes the test mean the same
    wherever it runs."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
