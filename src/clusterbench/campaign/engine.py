"""Execute a campaign's runs: skip what is stored, run the rest, survive any interruption.

Every finished run is committed by the executor before the next starts, so Ctrl-C, SIGTERM,
`kill -9` or a power cut lose at most the run in flight. Run ids are deterministic, so the
next `campaign run` of the same file skips every run already finished (ok, invalid, failed or
timed out) and redoes only unfinished ones. A failed or timed-out run is a result too
(recorded with its reason); `retry_failed` runs those again.

Runs go repeat-major (all configurations, then all again), and `spread_s` spaces those rounds
over time, as the STFC cloud study did with cron to average out noisy neighbours.

A block with `repeats: auto` (campaign/precision.py) is planned with its most runs, and run round by
round: its first MIN_RUNS rounds with the rest of the campaign, then each further round only for
the points whose headline is not yet precise. Whether to go on is decided from the stored results
(only runs that count are samples), so a resumed campaign decides as the first runner would have,
and one line per point says why its repeats stopped.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from clusterbench.bench.base import Benchmark
from clusterbench.campaign import precision
from clusterbench.campaign.precision import MIN_RUNS, AutoRepeats, Decision, OneStart
from clusterbench.errors import EnvironmentProblem, Interrupted, UserInputError
from clusterbench.execution.batch_jobs import settle_job
from clusterbench.execution.executor import RunResult, journal_dir, settle
from clusterbench.execution.loop import Eta, Reporter, Spread, run_all
from clusterbench.execution.request import PlannedRun
from clusterbench.execution.settings import restore_pending
from clusterbench.launch.site import LOCAL, Site
from clusterbench.store import noise as stored_noise
from clusterbench.store.db import Store

FINISHED = ("ok", "invalid", "failed", "timeout")


@dataclass
class CampaignOutcome:
    total: int
    skipped: int
    results: list[RunResult] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)  # runs a dead runner left 'running', and what was found
    stopped: list[str] = field(default_factory=list)  # per point of a `repeats: auto` block: why its repeats stopped

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
                 spread_s: float | None = None, retry_failed: bool = False, site: Site = LOCAL,
                 auto: dict[str, AutoRepeats] | None = None,
                 counts: Callable[[dict], bool] | None = None) -> CampaignOutcome:
    """Every pending run, here/through mpirun one after another, or queued as Slurm jobs, under the
    campaign's lock. `auto`: block label -> its `repeats: auto` policy (spec.auto_policies); when not
    given, read from the campaign file recorded in the store. `counts`: whether a run (status, valid,
    reason, facts) is a sample of an auto block (analysis/flags.counts; default the stricter
    precision.plainly_counted)."""
    if not runs:
        return _run_campaign(store, runs, system_id, reporter, spread_s, retry_failed, site, auto, counts)
    with campaign_lock(store.path, runs[0].campaign):
        return _run_campaign(store, runs, system_id, reporter, spread_s, retry_failed, site, auto, counts)


def stored_policies(store: Store, runs: list[PlannedRun]) -> dict[str, AutoRepeats]:
    """The `repeats: auto` policies of the campaign file recorded in the store for these runs' campaign."""
    from clusterbench.campaign.spec import auto_policies, parse_campaign

    if not runs:
        return {}
    text = stored_noise.campaign_spec(store, runs[0].campaign)
    if text is None:
        return {}
    try:
        campaign, _ = parse_campaign(text, f"campaign {runs[0].campaign} (as stored)")
    except UserInputError:  # a file recorded by another version: no policy known, counts as written
        return {}
    return auto_policies(campaign)


def _run_campaign(store: Store, runs: list[PlannedRun], system_id: str | None, reporter: Reporter,
                  spread_s: float | None, retry_failed: bool, site: Site,
                  auto: dict[str, AutoRepeats] | None = None,
                  counts: Callable[[dict], bool] | None = None) -> CampaignOutcome:
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
    policies = auto if auto is not None else stored_policies(store, runs)
    policies = {block: p for block, p in policies.items() if any(r.block == block for r in runs)}
    for block in policies:  # a benchmark without a headline cannot repeat until precise: before anything runs
        precision.headline_metric(next(r.benchmark for r in runs if r.block == block))
    first = [r for r in pending if r.block not in policies or r.repeat < MIN_RUNS]
    try:
        outcome.results = run_all(store, first, reporter, site=site, system_id=system_id, done=len(done),
                                  eta=Eta({r.id: r for r in first}, learned_durations(store, runs)), spread=spread)
        if policies:
            outcome.results += _until_precise(store, runs, done, policies, counts, OneStart(reporter, started=True),
                                              site, system_id, outcome)
    except Interrupted as stop:
        raise Interrupted(f"{stop.stored} Run the same command again to continue.") from None
    return outcome


def _point_key(run: PlannedRun) -> str:
    """The point a run repeats: its block, recorded parameters and environment (its id hashes the repeat too)."""
    return json.dumps([run.block, run.recorded_params, run.env], sort_keys=True, default=str)


def _until_precise(store: Store, runs: list[PlannedRun], done: set[str], policies: dict[str, AutoRepeats],
                   counts: Callable[[dict], bool] | None, reporter, site: Site, system_id: str | None,
                   outcome: CampaignOutcome) -> list[RunResult]:
    """The rounds after the first MIN_RUNS of the `repeats: auto` blocks: each round runs the next repeat
    of every point not yet precise (decided from what is stored); then one line per point says why
    its repeats stopped (outcome.stopped, and above the progress when the reporter prints)."""
    points: dict[str, list[PlannedRun]] = {}
    for run in runs:
        if run.block in policies:
            points.setdefault(_point_key(run), []).append(run)
    for planned in points.values():
        planned.sort(key=lambda r: r.repeat)
    results: list[RunResult] = []
    samples: dict[str, tuple[float | None, str]] = {}
    finished = set(done) | {r.id for r in outcome.results}
    most = max(p.max_runs for p in policies.values())
    for round_ in range(MIN_RUNS, most):
        batch = []
        for planned in points.values():
            policy = policies[planned[0].block]
            if round_ >= min(policy.max_runs, len(planned)):
                continue
            if _decision(store, planned[:round_], finished, policy, counts, samples).stop:
                continue
            if planned[round_].id not in finished:
                batch.append(planned[round_])
        if batch:
            found = run_all(store, batch, reporter, site=site, system_id=system_id)
            results += found
            finished |= {r.id for r in found}
    say = getattr(reporter, "print", None)
    varying = _varying([planned[0] for planned in points.values()])
    for planned in points.values():
        line = f"{_shown_point(planned[0], varying.get(planned[0].block, []))}: " \
               f"{_final(store, planned, finished, policies[planned[0].block], counts, samples).reason}"
        outcome.stopped.append(line)
        if say:
            say(_escaped(line))
    return results


def _final(store: Store, planned: list[PlannedRun], finished: set[str], policy: AutoRepeats,
           counts: Callable[[dict], bool] | None, samples: dict) -> Decision:
    """The decision that ended a point's repeats: the first stop over its finished repeats in order."""
    made = 0
    for run in planned:
        if run.id not in finished:
            break
        made += 1
    decision = _decision(store, planned[:made], finished, policy, counts, samples)
    for k in range(MIN_RUNS, made + 1):
        early = _decision(store, planned[:k], finished, policy, counts, samples)
        if early.stop:
            return early
    return decision


def _decision(store: Store, planned: list[PlannedRun], finished: set[str], policy: AutoRepeats,
              counts: Callable[[dict], bool] | None, samples: dict[str, tuple[float | None, str]]) -> Decision:
    """Stop or go on after these repeats of one point, from their stored results (a repeat not finished
    yet is not a run made). `samples` keeps each finished run's sample, read once."""
    from collections import Counter

    values: list[float] = []
    left_out: Counter = Counter()
    made = 0
    for run in planned:
        if run.id not in finished:
            continue
        if run.id not in samples:
            samples[run.id] = _sample(store, run, counts)
        value, why = samples[run.id]
        made += 1
        if value is None:
            left_out[why] += 1
        else:
            values.append(value)
    return precision.decide(values, made, policy, left_out)


def _sample(store: Store, run: PlannedRun, counts: Callable[[dict], bool] | None) -> tuple[float | None, str]:
    """A stored run's headline value, or None and why it is not a sample."""
    row = store.run(run.id)
    if row is None:
        return None, "not stored"
    stored = {"status": row["status"], "valid": row["valid"], "reason": row["reason"],
              "facts": precision.decoded_facts(row["facts"])}
    if not (counts or precision.plainly_counted)(stored):
        return None, precision.why_not(stored)
    name, higher = precision.headline_metric(run.benchmark)
    value = precision.best_value(list(store.metrics(run.id)), name, higher)
    return (value, "") if value is not None else (None, f"no valid {name}")


def _varying(runs: list[PlannedRun]) -> dict[str, list[str]]:
    """Block -> the parameters whose values differ among its points (what tells them apart in a line)."""
    by_block: dict[str, list[dict]] = {}
    for run in runs:
        by_block.setdefault(run.block, []).append(run.recorded_params)
    return {block: sorted(k for k in {k for p in params for k in p}
                          if len({json.dumps(p.get(k), sort_keys=True, default=str) for p in params}) > 1)
            for block, params in by_block.items()}


def _shown_point(run: PlannedRun, keys: list[str]) -> str:
    """'stream threads=2': the block and the parameters that tell its point from the block's others."""
    words = " ".join([run.block, *(f"{k}={run.recorded_params.get(k)}" for k in keys)])
    return words if len(words) <= 60 else words[:57] + "..."


def _escaped(text: str) -> str:
    """Rich markup's square brackets made literal (a parameter value may hold them)."""
    return text.replace("[", "\\[")
