"""Shared test fixtures: the input files (ours in tests/fixtures, the rest in ../shared), an isolated results
database, the CLI."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from tests.cli_fork import run_cli

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


# The suite runs benchmarks on every worker at once, on purpose, beside Python-heavy tests: most runs share
# their CPUs, and a flagged run would drop out of the bests, histories and comparisons other tests check.
# Runs are still measured and their evidence stored ("record"); tests of the flag itself set "flag".
os.environ.setdefault("CLUSTERBENCH_DISTURBANCE", "record")

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


QUIET_BUSY_SHARE = 0.25  # of all CPUs, used by anything while no other test runs: the machine is not quiet
QUIET_WAIT_S = 20  # how long a quiet test waits for that before it is skipped


@pytest.fixture(autouse=True)
def machine_share(request):
    """A test marked `quiet_machine` runs alone, on a machine that is otherwise quiet: the cluster tests that
    compare the virtual cluster's nodes (which share this machine's two cores) flagged a node or link as slow
    whenever the other xdist worker ran CPU-heavy tests at the same time. Every other test holds a shared
    lock; a quiet one closes a gate, so no new test starts, and waits for the running ones to end. Then it
    waits up to QUIET_WAIT_S for a second in which the machine's CPUs are mostly idle, and is skipped with
    the busy share when there is none: load from outside this suite (another job, busy loops) makes node
    comparisons on shared cores meaningless, and no verdict of the tool can be checked then."""
    folder = os.environ.get("CLUSTERBENCH_TEST_LOCKS")
    quiet = request.node.get_closest_marker("quiet_machine") is not None
    if not folder or "PYTEST_XDIST_WORKER" not in os.environ or not Path(folder).is_dir():
        if quiet:
            _wait_for_quiet()
        yield
        return
    with open(Path(folder) / "gate", "a") as gate, open(Path(folder) / "tests", "a") as tests:
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(tests, fcntl.LOCK_EX if quiet else fcntl.LOCK_SH)
        if not quiet:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            if quiet:
                _wait_for_quiet()
            yield
        finally:
            fcntl.flock(tests, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


def _wait_for_quiet() -> None:
    """Return at the first second in which at most QUIET_BUSY_SHARE of the CPUs were busy (/proc/stat);
    skip the test when none came within QUIET_WAIT_S."""
    import time

    def ticks() -> tuple[int, int]:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(fields), fields[3] + fields[4]  # all, idle + iowait

    deadline, busiest = time.monotonic() + QUIET_WAIT_S, 0.0
    while True:
        total0, idle0 = ticks()
        time.sleep(1.0)
        total1, idle1 = ticks()
        busy = 1 - (idle1 - idle0) / max(total1 - total0, 1)
        if busy <= QUIET_BUSY_SHARE:
            return
        busiest = max(busiest, busy)
        if time.monotonic() > deadline:
            pytest.skip(f"the machine stayed busy for {QUIET_WAIT_S} s with no other test running (up to "
                        f"{busiest:.0%} of its CPUs): this test compares nodes that share those CPUs")


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
    """Run the real command line in a process of its own, so exit codes are the real ones (forked from a server
    that has the heavy libraries imported: tests/cli_fork.py)."""
    full_env = dict(os.environ) | (env or {})
    full_env.setdefault("COLUMNS", "200")
    return run_cli(args, full_env, timeout=timeout)


def main_in_new_python(argv: list[str], env: dict, before: str = "", after: str = "",
                       timeout: float = 300) -> subprocess.CompletedProcess:
    """`clusterbench ARGV` through cli.main in a new interpreter (never the fork server: what it imports is
    the point), with the lines `before` run first (a spy) and `after` once main has ended (a print of what
    the process loaded or counted)."""
    import sys

    code = (f"import sys; sys.argv = {['clusterbench', *argv]!r}\nfrom clusterbench.cli import main\n{before}"
            f"try:\n    main()\nexcept SystemExit:\n    pass\n{after}")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=timeout)


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
# `make test` runs the suite in at least 3 workers (`-n N --dist loadgroup`, Makefile). Three groups of
# modules run one test after another, each on ONE worker:
# - "serial-cluster": the virtual cluster's tests. The cluster is brought up and taken down by a session
#   fixture, which must live in one process, and its tests change its nodes (links, hogs, daemons).
# - "serial-local": real runs and schedulers-free benchmarks on this machine (mpirun binds to its two cores,
#   a tuner is interrupted with SIGINT).
# - "serial-build": the official codes built from their sources (BUILD_MODULES), one after another.
# The groups and the pure-Python modules (each module as a whole, so its module fixtures are built once)
# spread over the workers: a worker is given a new module only when at most 2 tests of its own are left
# (xdist's loadscope), so each group holds one worker to its end and the pure modules go to the others and
# to a group's worker once its group is done. The tests that compare the cluster's nodes' speed run with
# nothing beside them (`quiet_machine`), first (groups_first).
# Without xdist (`pytest tests/...`) nothing changes. `-m "not serial"` runs the pure-Python part alone.

CLUSTER_MODULES = frozenset({
    "test_batch_launchers", "test_cluster_run", "test_disturbance_vc", "test_golden_cluster", "test_preflight_paths",
    "test_preflight_shared",
    "test_settings", "test_system_state_vc", "test_vc_accounting", "test_vc_link", "test_virtual_cluster",
})
LOCAL_MODULES = frozenset({
    "test_activity",        # the sampler: intervals, SIGTERM/kill -9 within two intervals
    "test_hpl_model", "test_kernels", "test_ceilings", "test_blas_remedy",  # built and run
    "test_lulesh", "test_tune_hpl",  # ... and a tuner interrupted with SIGINT
    "test_campaign_run",    # campaigns of real runs, a runner interrupted part-way
    "test_mpich",           # real MPICH runs
    "test_official",        # real benchmarks (iperf3 on a fixed port)
    "test_orphans",         # runners killed with -9, their leftovers reaped; a full disk (its Slurm case: below)
    "test_pinning_runs",    # real pinned runs read back
    "test_run_overhead",    # the fixed cost per run, timed
    "test_run_real",        # hpcc through mpirun
    "test_run_repeats",     # run's headline HPCC made again
    "test_setup",           # dpkg/apt
})
# The builds of the official codes (each into a cache of its own, then a smoke run): their own group, so that
# they compile beside the local runs rather than after them (about 5 minutes of compiling here).
BUILD_MODULES = frozenset({"test_build_hpcg", "test_build_hpl", "test_build_official"})
SERIAL_MODULES = CLUSTER_MODULES | LOCAL_MODULES | BUILD_MODULES
# Single tests of other modules that read the shared cluster (`cbvc`) when it is up: in the cluster group, so
# the cluster cannot be brought up or down under them. (The test's id, from the file's name on.)
SERIAL_TESTS = ("test_pinning_slurm.py::test_live_cbvc", "test_campaign_plan.py::test_examples_plan[virtual-cluster",
                "test_campaign_plan.py::test_examples_plan[tcp-tuning",
                "test_orphans.py::test_kill_9_of_a_slurm_campaign",
                # a quiet test: with the cluster's quiet tests, first (groups_first)
                "test_disturbance.py::test_a_run_beside_a_busy_loop")
# What only a serial module may use: the virtual cluster (its session fixture and the store on it), and the
# session's xhpl (its runs).
SERIAL_FIXTURES = frozenset({"cluster", "shared_db", "xhpl"})
CLUSTER_FIXTURES = frozenset({"cluster", "shared_db"})


def is_serial(nodeid: str) -> bool:
    """Does the test with this id run in one of the two serial groups?"""
    return serial_group(nodeid) is not None


def serial_group(nodeid: str) -> str | None:
    """"serial-cluster", "serial-local", "serial-build", or None for a test that may run beside any other."""
    file, _, test = nodeid.partition("::")
    stem = Path(file).stem
    if stem in CLUSTER_MODULES or f"{Path(file).name}::{test}".startswith(SERIAL_TESTS):
        return "serial-cluster"
    if stem in BUILD_MODULES:
        return "serial-build"
    return "serial-local" if stem in LOCAL_MODULES else None


def xdist_scope(nodeid: str) -> str:
    """The unit of work a test belongs to: its serial group, or its module's path."""
    return serial_group(nodeid) or nodeid.partition("::")[0]


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
    groups_first(items)
    misplaced = []
    for item in items:
        group = serial_group(item.nodeid)
        if group:
            item.add_marker(pytest.mark.serial)
        fixtures = set(getattr(item, "fixturenames", ()))
        needs_cluster = item.get_closest_marker("cluster") or not CLUSTER_FIXTURES.isdisjoint(fixtures)
        if (needs_cluster and group != "serial-cluster") or (not group and not SERIAL_FIXTURES.isdisjoint(fixtures)):
            misplaced.append(item.nodeid)
    if misplaced:
        raise pytest.UsageError(f"{len(misplaced)} test(s) need the virtual cluster or xhpl but their module is "
                                f"not in CLUSTER_MODULES, LOCAL_MODULES or BUILD_MODULES (tests/conftest.py), e.g. "
                                f"{misplaced[0]}: "
                                "add it there (the cluster's tests to CLUSTER_MODULES), so that they run in that "
                                "group on one xdist worker")


GROUP_ORDER = {"serial-cluster": 1, "serial-local": 2, "serial-build": 3, None: 4}


def groups_first(items: list[pytest.Item]) -> None:
    """Order the tests in place: the cluster group's quiet tests, the rest of the cluster group, the local
    group, the builds, then the pure modules (each kept in its order). xdist hands out the groups in this
    order, the longest first, so each starts at once on a worker of its own.

    The quiet tests come first, one after another: a quiet test closes the gate and waits for the test
    running on every other worker to end; scattered through the group, each paid that wait again (up to the
    length of a build) with the other workers idle, about a minute per quiet test. Together at the start they
    pay it once, while the other workers run their first tests."""
    def rank(item: pytest.Item) -> int:
        group = serial_group(item.nodeid)
        quiet = group == "serial-cluster" and item.get_closest_marker("quiet_machine") is not None
        return 0 if quiet else GROUP_ORDER[group]

    items.sort(key=rank)  # stable: each module's tests keep their order


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The main process removes the lock folder of `machine_share` once every worker is done."""
    folder = os.environ.get("CLUSTERBENCH_TEST_LOCKS")
    if folder and "PYTEST_XDIST_WORKER" not in os.environ:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """With CLUSTERBENCH_TEST_TIMELINE=FILE, one JSON line per test (worker, id, start, end, wall clock): where
    each xdist worker spent the suite's time, waits for the quiet lock included (see benchmarks/README.md)."""
    path = os.environ.get("CLUSTERBENCH_TEST_TIMELINE")
    start = time.time()
    yield
    if path:
        line = json.dumps({"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "test": item.nodeid,
                           "start": round(start, 3), "end": round(time.time(), 3)})
        with open(path, "a") as out:  # one short line per write: appends of workers do not interleave
            out.write(line + "\n")
