"""Execute a campaign's runs: skip what is stored, run the rest, survive any interruption.

Every finished run is committed by the executor before the next starts, so Ctrl-C, SIGTERM,
`kill -9` or a power cut lose at most the run in flight. Run ids are deterministic, so the
next `campaign run` of the same file skips every run already finished (ok, invalid, failed or
timed out) and redoes only unfinished ones. A failed or timed-out run is a result too
(recorded with its reason); `retry_failed` runs those again.

Runs go repeat-major (all configurations, then all again), and `spread_s` spaces those rounds
over time, as the STFC cloud study did with cron to average out noisy neighbours.

One runner at a time per campaign and database: `campaign_lock` holds an flock on
`<database dir>/locks/<campaign>.lock` (with the holder's PID, host and start time in it) for the
whole run; a second runner stops at once with `EnvironmentProblem` naming the holder. The kernel
releases an flock when its holder dies, kill -9 included, so a lock file that can be locked is
stale whatever it says. On resume, a run a dead runner left 'running' is settled first (its
processes are gone, or waited for and killed: executor.settle), marked interrupted, and redone.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from clusterbench.bench.base import Benchmark
from clusterbench.errors import EnvironmentProblem, Interrupted
from clusterbench.execution.batch_jobs import settle_job
from clusterbench.execution.executor import RunResult, journal_dir, settle
from clusterbench.execution.loop import Eta, Reporter, Spread, run_all
from clusterbench.execution.request import PlannedRun
from clusterbench.execution.settings import restore_pending
from clusterbench.launch.site import LOCAL, Site
from clusterbench.store.db import Store

FINISHED = ("ok", "invalid", "failed", "timeout")


@dataclass
class CampaignOutcome:
    total: int
    skipped: int
    results: list[RunResult] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)  # runs a dead runner left 'running', and what was found

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)


def finished_ids(store: Store, runs: list[PlannedRun], retry_failed: bool = False) -> set[str]:
    return store.finished_ids([r.id for r in runs], ("ok", "invalid") if retry_failed else FINISHED)


def learned_durations(store: Store, runs: list[PlannedRun]) -> list[tuple[PlannedRun, float]]:
    """Durations of this campaign's runs finished earlier, so a resumed ETA starts informed."""
    if not runs:
        return []
    measured = store.durations(runs[0].campaign)
    return [(r, measured[r.id]) for r in runs if r.id in measured]


def block_instances(runs: list[PlannedRun]) -> list[Benchmark]:
    """One benchmark instance per block (its first run): what it will start, built or found."""
    first: dict[str, PlannedRun] = {}
    for run in runs:
        first.setdefault(run.block, run)
    return [run.bench_class().from_point(run.params) for run in first.values()]


def preflight(runs: list[PlannedRun]) -> None:
    """Build one instance per block before anything runs: a missing binary stops the
    campaign now (exit code 2), not after hours of other runs."""
    block_instances(runs)


# ---------------------------------------------------------------- one runner at a time

_held: dict[str, int] = {}  # lock files this process holds -> nesting depth


def lock_path(db_path: Path, campaign: str) -> Path:
    """<database dir>/locks/<campaign>.lock (a hash for a name the file system might not take)."""
    name = campaign if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", campaign) else \
        "campaign-" + hashlib.sha256(campaign.encode()).hexdigest()[:16]
    return Path(db_path).resolve().parent / "locks" / f"{name}.lock"


def _holder(fd: int) -> dict:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _plausible_database(db_path: Path) -> bool:
    """Absent, or a regular file that is empty or starts like SQLite: somewhere a lock may go.
    Anything else (a device, a folder, a text file) the store refuses with its own message."""
    try:
        if not db_path.exists():
            return True
        if not db_path.is_file():
            return False
        with open(db_path, "rb") as f:
            head = f.read(16)
        return not head or head == b"SQLite format 3\0"
    except OSError:
        return False


@contextmanager
def campaign_lock(db_path: Path, campaign: str, strict: bool = True) -> Iterator[Path | None]:
    """Hold the lock of `campaign` on this database, or raise `EnvironmentProblem` (exit code 1)
    naming the process that holds it. Re-entrant within one process.

    `strict=False` is the early attempt of the command line, made before the store is opened so
    that a second runner stops at once: where the database is no plausible one, or the lock
    cannot be created, it takes no lock (yields None) and leaves the refusal to the store and to
    the strict attempt of `run_campaign`. A lock held by another process is refused either way."""
    db_path = Path(db_path)
    path = lock_path(db_path, campaign)
    key = str(path)
    if key in _held:
        _held[key] += 1
        try:
            yield path
        finally:
            _held[key] -= 1
        return
    if not strict and not _plausible_database(db_path):
        yield None
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if not strict:
            yield None
            return
        raise EnvironmentProblem(f"cannot create the lock of campaign {campaign!r} ({path}): {exc.strerror}",
                                 hint="the directory of the database must be writable to run a campaign") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = _holder(fd)
        os.close(fd)
        pid, host = holder.get("pid", "?"), holder.get("host", "?")
        since = f", started {holder['started_at']}" if holder.get("started_at") else ""
        where = "" if host == os.uname().nodename else f" (on {host}, not this machine)"
        raise EnvironmentProblem(
            f"campaign {campaign!r} is already running on this database: PID {pid} on host {host}{since} "
            f"holds its lock {path}",
            hint=f"wait for it to finish, or stop it{where} with `kill {pid}` (its run in flight is marked "
                 "interrupted), then run the same command again: it continues where that one stopped. "
                 "The lock belongs to that process and is released when it exits, even by kill -9, "
                 "so a leftover lock file never blocks") from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": os.uname().nodename,
                                  "started_at": datetime.now().astimezone().isoformat(timespec="seconds"),
                                  "campaign": campaign, "database": str(Path(db_path).resolve())}).encode(), 0)
    except OSError:  # a full disk: the lock holds all the same, only its description is missing
        pass
    _held[key] = 1
    try:
        yield path
    finally:
        del _held[key]
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        os.close(fd)  # releases the flock


def settle_unfinished(store: Store, runs: list[PlannedRun]) -> list[str]:
    """Runs of this campaign left 'running' by a runner that died: make sure none of their
    processes (or Slurm jobs) still runs, then mark them interrupted so they are redone."""
    notes = []
    for run_id in sorted(store.finished_ids([r.id for r in runs], ("running",))):
        row = store.run(run_id)
        workdir = Path(row["workdir"]) if row and row["workdir"] else store.runs_dir / run_id
        reason = settle_job(workdir) or settle(workdir)
        store.finish_run(run_id, "interrupted", False, reason, None, None, [])
        notes.append(f"{run_id}: {reason}")
    return notes


def run_campaign(store: Store, runs: list[PlannedRun], system_id: str | None, reporter: Reporter,
                 spread_s: float | None = None, retry_failed: bool = False, site: Site = LOCAL) -> CampaignOutcome:
    """Every pending run, here/through mpirun one after another, or queued as Slurm jobs, under the
    campaign's lock."""
    if not runs:
        return _run_campaign(store, runs, system_id, reporter, spread_s, retry_failed, site)
    with campaign_lock(store.path, runs[0].campaign):
        return _run_campaign(store, runs, system_id, reporter, spread_s, retry_failed, site)


def _run_campaign(store: Store, runs: list[PlannedRun], system_id: str | None, reporter: Reporter,
                  spread_s: float | None, retry_failed: bool, site: Site) -> CampaignOutcome:
    settled = settle_unfinished(store, runs)
    settled += [f"system settings: {note}" for note in restore_pending(journal_dir(store))]  # a crashed run's
    notice = getattr(reporter, "notice", None)  # optional: tell the user what resuming found
    for note in settled:
        if notice:
            notice(note)
    done = finished_ids(store, runs, retry_failed)
    pending = [r for r in runs if r.id not in done]
    preflight(pending)
    rounds = max((r.repeat for r in runs), default=0) + 1
    spread = Spread(spread_s / rounds, rounds) if spread_s else None
    outcome = CampaignOutcome(total=len(runs), skipped=len(done), settled=settled)
    try:
        outcome.results = run_all(store, pending, reporter, site=site, system_id=system_id, done=len(done),
                                  eta=Eta({r.id: r for r in pending}, learned_durations(store, runs)), spread=spread)
    except Interrupted as stop:
        raise Interrupted(f"{stop.stored} Run the same command again to continue.") from None
    return outcome
