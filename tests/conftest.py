"""Shared test fixtures: the input files (ours in tests/fixtures, the rest in ../shared), an isolated results
database, the CLI."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
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


# pytest-xdist's workers load GNU readline, which exports its own guess of the terminal (COLUMNS=80, LINES=24):
# Rich in the CLI would then wrap its messages at 80 columns where a plain pytest run does not. The workers
# inherit the environment of the main process, so it leaves the true values for them to put back.
if "PYTEST_XDIST_WORKER" not in os.environ:
    os.environ["CLUSTERBENCH_TEST_TERMINAL"] = json.dumps({k: os.environ.get(k) for k in ("COLUMNS", "LINES")})
    os.environ["CLUSTERBENCH_TEST_LOCKS"] = tempfile.mkdtemp(prefix="clusterbench-test-locks-")
elif "CLUSTERBENCH_TEST_TERMINAL" in os.environ:
    for _name, _value in json.loads(os.environ["CLUSTERBENCH_TEST_TERMINAL"]).items():
        if _value is None:
            os.environ.pop(_name, None)
        else:
            os.environ[_name] = _value


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
def machine_share(request):
    """Under pytest-xdist, a test marked `quiet_machine` runs alone: the cluster tests that compare the
    virtual cluster's nodes (which share this machine's two cores) flagged a node or link as slow whenever
    the other worker ran CPU-heavy tests at the same time. Every other test holds a shared lock; a quiet
    one closes a gate, so no new test starts, and waits for the running ones to end."""
    folder = os.environ.get("CLUSTERBENCH_TEST_LOCKS")
    if not folder or "PYTEST_XDIST_WORKER" not in os.environ or not Path(folder).is_dir():
        yield
        return
    quiet = request.node.get_closest_marker("quiet_machine") is not None
    with open(Path(folder) / "gate", "a") as gate, open(Path(folder) / "tests", "a") as tests:
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(tests, fcntl.LOCK_EX if quiet else fcntl.LOCK_SH)
        if not quiet:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(tests, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


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


def checkout_seen_by_nodes() -> bool:
    """Does node1 see this checkout (and so its venv)? Not when it sits on a node-local path such as /tmp:
    asked with a token file, since a node-local folder of the same name is not this one."""
    token = ROOT / f".vc-visible-{uuid.uuid4().hex[:8]}"
    token.write_text("")
    try:
        out = subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "node1", "test", "-e",
                              str(token)], capture_output=True, timeout=60)
        return out.returncode == 0
    finally:
        token.unlink(missing_ok=True)


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
    visible = checkout_seen_by_nodes()
    if not visible:  # a clone under /tmp: each node has its own /tmp, so runs copy what they need there
        os.environ["CLUSTERBENCH_STAGE"] = "1"
    yield {"size": size, "slurm_conf": str(STATE / "slurm" / "slurm.conf"), "checkout_visible": visible}
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


# ---------------------------------------------------------------- parallel and serial tests (pytest-xdist)
# `make test` runs the suite on every core (`-n auto --dist loadgroup`). The modules below all go to ONE
# worker, one test after another (group "serial"): they run a real mpirun, a benchmark or a scheduler, share
# the virtual cluster (brought up and taken down by a session fixture, which must live in one process), kill
# processes or measure time. Run side by side they would fight over the two cores (mpirun binds to them) or
# over the cluster. Every other module goes to one worker as a whole (its module fixtures are built once),
# and those modules spread over the workers. Without xdist (`pytest tests/...`) nothing changes.
# `-m "not serial"` runs the pure-Python part alone.

SERIAL_MODULES = frozenset({
    "test_activity",        # the sampler: intervals, SIGTERM/kill -9 within two intervals
    "test_batch_launchers", "test_cluster_run", "test_preflight_paths", "test_preflight_shared",  # the cluster
    "test_settings", "test_system_state_vc", "test_vc_accounting", "test_vc_link", "test_virtual_cluster",
    "test_build_hpcg", "test_build_hpl", "test_build_official", "test_hpl_model", "test_kernels",  # built and run
    "test_lulesh", "test_tune_hpl",  # ... and a tuner interrupted with SIGINT
    "test_campaign_run",    # campaigns of real runs, a runner interrupted part-way
    "test_mpich",           # real MPICH runs
    "test_official",        # real benchmarks (iperf3 on a fixed port)
    "test_orphans",         # runners killed with -9, their leftovers reaped
    "test_pinning_runs",    # real pinned runs read back
    "test_run_overhead",    # the fixed cost per run, timed
    "test_run_real",        # hpcc through mpirun
    "test_setup",           # dpkg/apt
})
# Single tests of other modules that read the shared cluster (`cbvc`) when it is up: on the serial worker, the
# cluster cannot be brought up or down under them. (The test's id, from the file's name on.)
SERIAL_TESTS = ("test_pinning_slurm.py::test_live_cbvc", "test_campaign_plan.py::test_examples_plan[virtual-cluster",
                "test_campaign_plan.py::test_examples_plan[tcp-tuning")
# What only a serial module may use: the virtual cluster (its session fixture and the store on it), and the
# session's xhpl (its runs).
SERIAL_FIXTURES = frozenset({"cluster", "shared_db", "xhpl"})


def is_serial(nodeid: str) -> bool:
    """Does the test with this id run on the one serial worker?"""
    file, _, test = nodeid.partition("::")
    return Path(file).stem in SERIAL_MODULES or f"{Path(file).name}::{test}".startswith(SERIAL_TESTS)


def xdist_scope(nodeid: str) -> str:
    """The unit of work a test belongs to: "serial", or its module's path."""
    return "serial" if is_serial(nodeid) else nodeid.partition("::")[0]


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`--dist loadgroup`, with the groups above: xdist's own `xdist_group` marks do not reach its scheduler
    under pytest 9 (it rewrites `item._nodeid`, which pytest 9 no longer reads), so the groups are named
    here from the test's id, which the scheduler sees."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SerialOrModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return SerialOrModule(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the serial tests `serial`, and refuse a test that needs the cluster or runs xhpl outside a serial
    module: on a second worker it would take the cluster down under the first, or share its cores."""
    misplaced = []
    for item in items:
        if is_serial(item.nodeid):
            item.add_marker(pytest.mark.serial)
        elif item.get_closest_marker("cluster") or not SERIAL_FIXTURES.isdisjoint(getattr(item, "fixturenames", ())):
            misplaced.append(item.nodeid)
    if misplaced:
        raise pytest.UsageError(f"{len(misplaced)} test(s) need the virtual cluster or xhpl but their module is "
                                f"not in SERIAL_MODULES (tests/conftest.py), e.g. {misplaced[0]}: add the module "
                                "there, so that they run on the one serial xdist worker")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The main process removes the lock folder of `machine_share` once every worker is done."""
    folder = os.environ.get("CLUSTERBENCH_TEST_LOCKS")
    if folder and "PYTEST_XDIST_WORKER" not in os.environ:
        shutil.rmtree(folder, ignore_errors=True)
