"""No orphans, one runner at a time, a full disk: the hardening of issue 15 (items 4, 6 and 7).

Every test drives the real command line in a subprocess and kills it the way a user or the
machine would (kill -9 of clusterbench only, never of its children), then looks at /proc for
what is left of the run: the supervisor (launch/supervise.py) must take every process of the
run with it, `setsid` descendants included, within 2 s.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import cli, query
from tests.hostile import assert_refused, run_bounded

from clusterbench.launch import supervise

KILL_DEADLINE_S = 2.0


# ---------------------------------------------------------------- helpers


_RUNNERS: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_runner_left():
    """A failed test must not leave its runner behind (its supervisor then stops the run)."""
    yield
    while _RUNNERS:
        runner = _RUNNERS.pop()
        if runner.poll() is None:
            runner.kill()
            runner.wait()


def _start(spec: Path, tmp_path: Path, *extra: str, env: dict | None = None) -> subprocess.Popen:
    """`campaign run SPEC --json` in the background, its output in files (no pipe to fill)."""
    log = tmp_path / f"runner-{time.monotonic_ns()}"
    with open(f"{log}.out", "w") as out, open(f"{log}.err", "w") as err:
        runner = subprocess.Popen([sys.executable, "-m", "clusterbench", "campaign", "run", str(spec), "--json",
                                   *extra], stdout=out, stderr=err,
                                  env=dict(os.environ) | {"COLUMNS": "200"} | (env or {}))
    _RUNNERS.append(runner)
    return runner


def _rows(db: Path, sql: str, *args) -> list:
    if not db.exists():
        return []
    try:
        return [tuple(r) for r in query(db, sql, *args)]
    except sqlite3.OperationalError:  # the schema is being created
        return []


def _wait(predicate, timeout_s: float, what: str, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the runner ended (exit {proc.returncode}) before {what}")
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def _running_workdir(db: Path) -> Path | None:
    rows = _rows(db, "SELECT workdir FROM runs WHERE status='running'")
    return Path(rows[0][0]) if rows else None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    stat = supervise.proc_stat(pid)
    return bool(stat and stat[0] not in "ZX")


def _in_dir(workdir: Path) -> list[int]:
    """Living processes whose working directory is the run directory (mpirun, ranks, shells)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cwd = os.readlink(f"/proc/{name}/cwd")
            except OSError:
                continue
            if cwd == str(workdir) and _alive(int(name)):
                found.append(int(name))
    return found


def _matching(argv: str) -> list[int]:
    """Living processes whose command line is exactly `argv` (split on spaces)."""
    want = argv.split()
    return [int(n) for n in os.listdir("/proc") if n.isdigit() and _cmdline(int(n)).split() == want
            and _alive(int(n))]


def _run_processes(workdir: Path) -> set[int]:
    """The supervisor of the run, everything below it, and everything working in its directory."""
    record = supervise.read_record(workdir / supervise.RECORD)
    pids = set(_in_dir(workdir))
    if record:
        pids |= {record["pid"], *supervise.descendants(record["pid"])}
    return {p for p in pids if _alive(p)}


def _gone_within(pids_of, deadline_s: float) -> float:
    """Seconds until pids_of() is empty; fails past `deadline_s` (and kills the leftovers)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < deadline_s + 3:
        left = pids_of()
        if not left:
            return time.monotonic() - t0
        time.sleep(0.02)
    left = pids_of()
    described = {p: _cmdline(p) for p in left}
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    pytest.fail(f"processes of the run still alive {deadline_s + 3:.0f} s after kill -9: {described}")


def _finished_once(db: Path, campaign: str) -> list[tuple]:
    """(id, status) of the campaign's runs; each id appears once by construction (primary key)."""
    return _rows(db, "SELECT id, status FROM runs WHERE campaign=? ORDER BY id", campaign)


def _summary(out: subprocess.CompletedProcess) -> dict:
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


# ---------------------------------------------------------------- kill -9 of clusterbench


@pytest.mark.slow
def test_kill_9_during_hpcc_leaves_no_process_and_resume_runs_it_once(tmp_path, isolated_db):
    spec = tmp_path / "hpcc.yaml"
    spec.write_text("name: orphan-hpcc\nbenchmarks:\n  - benchmark: hpcc\n    params: {n: 2400, nb: 192}\n")
    runner = _start(spec, tmp_path)
    workdir = _wait(lambda: _running_workdir(isolated_db), 60, "the run to start", runner)
    def both_ranks() -> list[int]:  # mpirun starts them one after the other: wait for the second too
        found = [p for p in _in_dir(workdir) if "hpcc" in _cmdline(p).split(" ")[0]]
        return found if len(found) >= 2 else []

    ranks = _wait(both_ranks, 60, "the two hpcc ranks", runner)
    assert len(ranks) >= 2
    time.sleep(1.0)  # HPCC well under way (ranks computing)
    before = _run_processes(workdir)
    assert any("mpirun" in _cmdline(p) for p in before), {p: _cmdline(p) for p in before}

    os.kill(runner.pid, signal.SIGKILL)  # clusterbench only: its children get no signal from us
    runner.wait()
    seconds = _gone_within(lambda: [p for p in before | set(_in_dir(workdir)) if _alive(p)], KILL_DEADLINE_S)
    print(f"\nhpcc N=2400: {len(before)} processes of the run gone {seconds:.2f} s after kill -9")
    assert seconds < KILL_DEADLINE_S
    assert _finished_once(isolated_db, "orphan-hpcc")[0][1] == "running"  # nobody could mark it

    summary = _summary(cli("campaign", "run", str(spec), "--json", timeout=600))
    assert summary["executed"] == 1 and summary["ok"] == 1 and summary["skipped"] == 0, summary
    assert "its processes were gone" in summary["settled"][0]
    rows = _finished_once(isolated_db, "orphan-hpcc")
    assert [status for _, status in rows] == ["ok"]
    per_run = _rows(isolated_db, "SELECT run_id, COUNT(*) FROM metrics WHERE name='hpl_gflops' GROUP BY run_id")
    assert per_run == [(rows[0][0], 1)]
    again = _summary(cli("campaign", "run", str(spec), "--json"))
    assert again["skipped"] == 1 and again["executed"] == 0


SETSID = "setsid sleep {m} & sleep {m}"  # the case: a child in a session of its own
DAEMON = "(setsid sleep {m} &); sleep {m}"  # its parent exits at once: found only as the supervisor adopts it


def _setsid_campaign(tmp_path: Path, name: str, marker: str, flag: Path, timeout: str | None = None,
                     form: str = SETSID) -> Path:
    spec = tmp_path / f"{name}.yaml"
    command = f"if [ -e {flag} ]; then {form.format(m=marker)}; fi; echo value 1"
    spec.write_text(f"name: {name}\nbenchmarks:\n  - benchmark: command\n"
                    + (f"    timeout: {timeout}\n" if timeout else "")
                    + f"    params:\n      command: {json.dumps(command)}\n"
                    "      metrics: [{name: value, pattern: 'value (\\d+)'}]\n")
    return spec


def _marker() -> str:
    return f"{300 + random.randrange(1, 10**6) / 10**6:.6f}"  # a sleep no one else runs


@pytest.mark.parametrize("form", [SETSID, DAEMON], ids=["setsid", "daemonised"])
def test_kill_9_kills_setsid_descendants_and_the_stale_lock_does_not_block(tmp_path, isolated_db, form):
    marker, flag = _marker(), tmp_path / "flag"
    flag.touch()
    spec = _setsid_campaign(tmp_path, "orphan-setsid", marker, flag, form=form)
    runner = _start(spec, tmp_path)
    sleeps = _wait(lambda: len(_matching(f"sleep {marker}")) == 2 and _matching(f"sleep {marker}"), 60,
                   "both sleeps", runner)
    sessions = {Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[3] for p in sleeps}
    assert len(sessions) == 2  # one of them really left the run's session
    lock = isolated_db.parent / "locks" / "orphan-setsid.lock"
    assert json.loads(lock.read_text())["pid"] == runner.pid

    os.kill(runner.pid, signal.SIGKILL)
    runner.wait()
    seconds = _gone_within(lambda: _matching(f"sleep {marker}"), KILL_DEADLINE_S)
    print(f"\n{form.format(m='X')}: both sleeps gone {seconds:.2f} s after kill -9")
    assert seconds < KILL_DEADLINE_S

    # The lock file still names the dead runner: it is stale, and nothing waits for it.
    assert json.loads(lock.read_text())["pid"] == runner.pid
    flag.unlink()
    summary = _summary(cli("campaign", "run", str(spec), "--json"))
    assert summary["executed"] == 1 and summary["ok"] == 1, summary
    assert "its processes were gone" in summary["settled"][0]
    assert [s for _, s in _finished_once(isolated_db, "orphan-setsid")] == ["ok"]


@pytest.mark.parametrize("form", [SETSID, DAEMON], ids=["setsid", "daemonised"])
def test_timeout_kills_setsid_descendants_too(tmp_path, isolated_db, form):
    marker, flag = _marker(), tmp_path / "flag"
    flag.touch()
    spec = _setsid_campaign(tmp_path, "orphan-timeout", marker, flag, timeout="2s", form=form)
    t0 = time.monotonic()
    summary = _summary(cli("campaign", "run", str(spec), "--json", timeout=60))
    assert summary["timeout"] == 1, summary
    assert time.monotonic() - t0 < 20
    assert _matching(f"sleep {marker}") == []  # gone when the campaign returns, setsid one included


def test_resume_kills_a_run_whose_supervisor_outlived_its_runner(tmp_path, isolated_db):
    """The supervisor normally kills the run within a second of clusterbench's death. One that is
    still there when the next runner starts (stuck; simulated with SIGSTOP) is waited for, then
    its whole tree is killed: the point never runs twice at once, and ends ok exactly once."""
    marker, flag = _marker(), tmp_path / "flag"
    flag.touch()
    spec = _setsid_campaign(tmp_path, "orphan-stuck", marker, flag)
    runner = _start(spec, tmp_path)
    sleeps = _wait(lambda: len(_matching(f"sleep {marker}")) == 2 and _matching(f"sleep {marker}"), 60,
                   "both sleeps", runner)
    workdir = _running_workdir(isolated_db)
    record = supervise.read_record(workdir / supervise.RECORD)
    assert record and record["harness_pid"] == runner.pid and record["host"] == socket.gethostname()
    os.kill(record["pid"], signal.SIGSTOP)  # the supervisor cannot act any more
    try:
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()
        time.sleep(0.5)
        assert all(_alive(p) for p in sleeps)  # the orphaned run is still alive: the case to handle
        flag.unlink()
        t0 = time.monotonic()
        summary = _summary(cli("campaign", "run", str(spec), "--json"))
        print(f"\nresume with a live orphaned run: {time.monotonic() - t0:.1f} s (waits up to 5 s, then kills)")
    finally:
        supervise.kill_tree(record["pid"])
    assert "were still running and were killed on resume" in summary["settled"][0], summary
    assert not any(_alive(p) for p in sleeps) and not _alive(record["pid"])
    assert summary["executed"] == 1 and summary["ok"] == 1
    assert [s for _, s in _finished_once(isolated_db, "orphan-stuck")] == ["ok"]


# ---------------------------------------------------------------- one runner at a time


def test_a_second_runner_of_the_same_campaign_stops_at_once(tmp_path, isolated_db):
    spec = tmp_path / "twice.yaml"
    spec.write_text("name: twice\nbenchmarks:\n  - benchmark: command\n    params:\n"
                    "      command: 'sleep 0.7; echo value {i}'\n"
                    "      metrics: [{name: value, pattern: 'value (\\d+)'}]\n    space: {i: [1, 2, 3, 4]}\n")
    first = _start(spec, tmp_path)
    _wait(lambda: _running_workdir(isolated_db), 60, "the first runner's first run", first)

    second = run_bounded("campaign", "run", str(spec), "--json", timeout_s=30)
    assert_refused(second, 1, "already running", f"PID {first.pid}", f"host {socket.gethostname()}",
                   f"kill {first.pid}", "twice.lock")
    print(f"\nsecond runner refused in {second.seconds:.2f} s")
    assert second.seconds < 3.0
    assert first.wait(timeout=120) == 0

    rows = _finished_once(isolated_db, "twice")
    assert len(rows) == 4 and {s for _, s in rows} == {"ok"}
    per_run = _rows(isolated_db, "SELECT run_id, COUNT(*) FROM metrics GROUP BY run_id")
    assert len(per_run) == 4 and {c for _, c in per_run} == {1}  # nothing ran twice
    summary = _summary(cli("campaign", "run", str(spec), "--json"))  # the lock was released
    assert summary["skipped"] == 4 and summary["executed"] == 0


# ---------------------------------------------------------------- a full disk


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs: a real file system that fills up. Not smaller: an empty store with its WAL takes about
    1 MiB (schema version 4), and after the filler is removed the retry must find more than the executor's
    1 MiB floor free."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"mount -t tmpfs is not permitted here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_full_disk_stops_the_campaign_cleanly_and_the_database_stays_intact(tmp_path, small_disk):
    db = small_disk / "cb" / "results.db"
    env = {"CLUSTERBENCH_DB": str(db)}
    flag = tmp_path / "fill"  # outside the small disk: the first attempt fills it, the retry does not
    flag.touch()
    spec = tmp_path / "full.yaml"
    command = f"if [ -e {flag} ]; then head -c 5000000 /dev/zero > big; fi; echo done"
    spec.write_text("name: full\nbenchmarks:\n  - benchmark: command\n"
                    f"    params: {{command: {json.dumps(command)}}}\n    space: {{i: [1, 2]}}\n")

    out = run_bounded("campaign", "run", str(spec), env=env, timeout_s=60)
    assert_refused(out, 1, "disk full", str(small_disk), "tmpfs", "free space on")
    print(f"\nfull disk: stopped in {out.seconds:.1f} s: {out.stderr.strip()[:400]}")
    assert query(db, "PRAGMA integrity_check")[0][0] == "ok"
    rows = _rows(db, "SELECT id, status, reason FROM runs")
    assert len(rows) == 1, rows  # the campaign stopped: the second point never started
    run_id, status, reason = rows[0]
    assert status in ("interrupted", "running")  # running: the store itself was full; resume marks it
    if status == "interrupted":
        assert reason.startswith("disk full")

    # Free the space (the run's big file) and run again: the point is redone, each ends ok once.
    (db.parent / "runs" / run_id / "big").unlink()
    flag.unlink()
    again = subprocess.run([sys.executable, "-m", "clusterbench", "campaign", "run", str(spec), "--json"],
                           capture_output=True, text=True, env=dict(os.environ) | env, timeout=120)
    summary = _summary(again)
    assert summary["executed"] == 2 and summary["ok"] == 2, summary
    assert [s for _, s in _finished_once(db, "full")] == ["ok", "ok"]
    assert query(db, "PRAGMA integrity_check")[0][0] == "ok"


def test_store_full_during_finish_is_a_clean_disk_full_error(tmp_path, small_disk, monkeypatch):
    """The store itself fails (SQLite: database or disk is full) while the results are written:
    DiskFull (exit code 1) naming the file system, and the database stays intact."""
    from clusterbench.bench.command import Command
    from clusterbench.execution import executor
    from clusterbench.store.db import Store

    monkeypatch.setattr(executor, "MIN_FREE_BYTES", 0)  # no early warning: let SQLite hit the wall
    db = small_disk / "cb" / "results.db"
    bench = Command.from_point({"command": "head -c 5000000 /dev/zero > big; echo 1"})
    with Store(db) as store:
        with pytest.raises(executor.DiskFull) as caught:
            executor.execute(store, executor.RunRequest(bench, run_id="full-r0"))
        assert str(small_disk) in str(caught.value) and "tmpfs" in str(caught.value)
        print(f"\n{caught.value}")
        assert "storing its results" in str(caught.value)
        assert store.run("full-r0")["status"] in ("running", "interrupted")
    assert query(db, "PRAGMA integrity_check")[0][0] == "ok"


def test_resume_cancels_the_slurm_job_of_a_dead_runner(tmp_path, monkeypatch):
    """A Slurm campaign's runner killed with -9 leaves its jobs queued; the next runner cancels
    the job of each run it finds 'running' before submitting it again (no Slurm needed here)."""
    from clusterbench.execution import slurm_jobs as batch

    workdir = tmp_path / "run"
    workdir.mkdir()
    assert batch.settle_job(workdir) is None  # not a Slurm run: settled by its supervisor record
    (workdir / batch.JOB_RECORD).write_text(json.dumps({"job_id": "4242"}))
    queue = {"4242": "RUNNING"}
    cancelled = []
    monkeypatch.setattr(batch.slurm, "active_states", lambda ids: {i: queue[i] for i in ids if i in queue})
    monkeypatch.setattr(batch.slurm, "cancel", lambda ids: (cancelled.extend(ids), queue.clear()))
    assert "Slurm job 4242 was still queued or running and was cancelled" in batch.settle_job(workdir)
    assert cancelled == ["4242"]
    assert "Slurm job 4242 had already ended" in batch.settle_job(workdir)

    # killed while sbatch was answering: the record has the job's name, not yet its id
    (workdir / batch.JOB_RECORD).write_text(json.dumps({"job_id": None, "job_name": "cb-k9-r0", "scheduler": "slurm"}))
    named = {"cb-k9-r0": ["4243"]}
    queue["4243"] = "PENDING"
    monkeypatch.setattr(batch.slurm.SCHEDULER, "ids_named", lambda name: list(named.get(name, [])))
    assert "the Slurm job named cb-k9-r0 was still queued or running and was cancelled" in batch.settle_job(workdir)
    assert cancelled[-1] == "4243"
    named.clear()
    assert "is not queued" in batch.settle_job(workdir)


VC_STATE = Path("/run/clusterbench-vc/cbvc")


@pytest.mark.cluster
@pytest.mark.slow
def test_kill_9_of_a_slurm_campaign_then_resume_cancels_its_jobs_and_runs_each_once(tmp_path, monkeypatch, cluster):
    """On the virtual cluster (brought up by the `cluster` fixture when none is up): jobs queued by a
    runner killed with -9 are cancelled by the next runner, which submits their runs again."""
    folder = Path("/var/tmp") / f"clusterbench-test-{os.getpid()}-{time.monotonic_ns()}"  # shared with the nodes
    folder.mkdir(parents=True)
    db = folder / "results.db"
    monkeypatch.setenv("CLUSTERBENCH_DB", str(db))
    monkeypatch.setenv("SLURM_CONF", str(VC_STATE / "slurm" / "slurm.conf"))
    name = f"k9-{os.getpid()}"
    spec = tmp_path / "slurm.yaml"
    spec.write_text(f"name: {name}\ncluster: {{launcher: slurm, slurm: {{poll: 0.5}}}}\nbenchmarks:\n"
                    "  - benchmark: command\n    params:\n      command: 'sleep {seconds}; echo slept {seconds}'\n"
                    "      metrics: [{name: slept, pattern: 'slept (\\d+)', unit: s}]\n"
                    "    space: {seconds: [5, 6, 7]}\n")

    def ours() -> list[str]:
        out = subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True).stdout.split()
        return [n for n in out if n.startswith(f"cb-{name}-")]

    try:
        runner = _start(spec, tmp_path)
        _wait(lambda: len(ours()) == 3, 60, "three queued jobs", runner)
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()
        assert len(ours()) == 3  # the dead runner's jobs are still there
        summary = _summary(cli("campaign", "run", str(spec), "--json", timeout=300))
        assert summary["executed"] == 3 and summary["ok"] == 3, summary
        assert len(summary["settled"]) == 3 and all("was cancelled on resume" in s or "had already ended" in s
                                                    for s in summary["settled"]), summary["settled"]
        assert [s for _, s in _finished_once(db, name)] == ["ok"] * 3
        assert ours() == []
    finally:
        if ours():  # a failed test leaves no job behind
            subprocess.run(["scancel", "-n", ",".join(ours())], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
