"""Execute one benchmark instance as a stored run: directory, process, parse, store.

The run row exists ('running') before the process starts; status, metrics and raw outputs
are written in one transaction when it ends. A timeout, a crash or Ctrl-C still ends in a
stored row saying what happened, and the run directory keeps every file.

The command runs under a supervisor (launch/supervise.py) recorded in the run directory
(supervisor.json): when clusterbench dies, even by kill -9, the supervisor kills the run's
processes, and `settle` tells a resumed campaign whether they are gone. A full disk (ENOSPC,
SQLite "database or disk is full", or less than `MIN_FREE_BYTES` left after a run) raises
`DiskFull`: the run is marked interrupted with the reason if the store can still be written.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import shutil
import sqlite3
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from clusterbench.bench.base import Benchmark
from clusterbench.bench.metrics import Metric, Outcome
from clusterbench.bench.placement import split_blas
from clusterbench.build import registry
from clusterbench.errors import EnvironmentProblem
from clusterbench.execution import observe, placement
from clusterbench.execution.request import PlannedRun
from clusterbench.launch import supervise
from clusterbench.launch.process import ProcessResult, run_process
from clusterbench.launch.site import LOCAL, Site
from clusterbench.launch.spec import Launch
from clusterbench.store.db import Store
from clusterbench.store.records import RunRecord, relevant_env
from clusterbench.system import power

if TYPE_CHECKING:  # imported where used: a run that loads no BLAS and changes no setting needs neither
    from clusterbench.launch.libtrace import LoadedLibraries

FINISHED_STATUSES = ("ok", "invalid", "failed", "timeout")
MIN_FREE_BYTES = 1 << 20  # a file system with less than this left is full: no run starts or is trusted there
SETTLE_WAIT_S = 5.0  # how long a resumed campaign waits for a dead runner's supervisor to finish its kill


class DiskFull(EnvironmentProblem):
    """No space left for the outputs or the store: the campaign stops (exit code 1)."""


@dataclass
class RunResult:
    id: str
    status: str  # ok, invalid, failed, timeout, interrupted
    valid: bool
    reason: str | None
    duration_s: float
    workdir: Path
    outcome: Outcome
    benchmark: str = ""
    params: dict = field(default_factory=dict)  # as recorded in the store


def new_run_id(benchmark: str) -> str:
    """Time-ordered and unique: 20261122-031501-hpcc-1a2b3c."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{benchmark}-{os.urandom(3).hex()}"  # as random as uuid4's first 6 hex digits


@dataclass
class RunRequest:
    """One run to make: the benchmark instance, where it goes, its limits and its labels.

    `params` (default: bench.params()) is what is recorded; `env` is added on top of the
    benchmark's own environment (a campaign's `env:`); `run_id` defaults to a fresh time-ordered
    id (new_run_id); `where` is the site (this machine, hosts over mpirun, a Slurm job)."""

    bench: Benchmark
    run_id: str | None = None
    where: Site = field(default_factory=lambda: LOCAL)
    timeout_s: float | None = None
    tags: dict = field(default_factory=dict)
    campaign: str | None = None
    repeat: int = 0
    params: dict | None = None
    env: dict[str, str] = field(default_factory=dict)
    system_id: str | None = None
    settings: dict[str, str] = field(default_factory=dict)  # `system:` settings applied around the run

    @classmethod
    def planned(cls, run: PlannedRun, bench: Benchmark, where: Site = LOCAL, system_id: str | None = None,
                one_off: bool = False, tags: dict | None = None) -> RunRequest:
        """The request for a planned run: its id, campaign, limits, tags and env. A `one_off` run
        (`bench`, `run`) belongs to no campaign and gets a fresh time-ordered id."""
        return cls(bench, new_run_id(run.benchmark) if one_off else run.id, where, run.timeout_s,
                   run.tags | {"block": run.block} if tags is None else tags, None if one_off else run.campaign,
                   run.repeat, run.recorded_params, run.env, system_id, settings=run.settings)


@dataclass
class Started:
    """A run whose row and directory exist and whose command is known, not yet finished."""

    id: str
    bench: Benchmark
    workdir: Path
    record: RunRecord
    command: list[str]
    env: dict[str, str]
    artifacts: list[Path]
    launch: Launch  # as the benchmark declared it (the probe wrapped around it is in `command`)
    site: Site = field(default_factory=lambda: LOCAL)


def start(store: Store, request: RunRequest) -> Started:
    """Directory, inputs, command and the 'running' row of one run."""
    run_id = request.run_id or new_run_id(request.bench.name)
    workdir = store.runs_dir / run_id
    check_space(store, f"before starting run {run_id}")
    previous = store.run(run_id)
    if previous is not None and previous["status"] in FINISHED_STATUSES:  # never delete a result
        raise EnvironmentProblem(f"run {run_id} is already stored as {previous['status']}: not running it again",
                                 hint="another clusterbench finished it meanwhile; run the command again to "
                                      "continue with the runs still pending")
    record = supervise.read_record(workdir / supervise.RECORD)
    if record and supervise.record_alive(record):
        raise EnvironmentProblem(f"run {run_id} is still running (supervisor PID {record['pid']} on "
                                 f"{record['host']}): not starting it twice",
                                 hint="wait for it to end or stop it, then run the command again")
    try:
        return _start(store, request, run_id, workdir)
    except Exception as exc:
        if disk_full(exc):
            raise _disk_full(store, run_id, workdir, exc, "while preparing it") from None
        raise


def _start(store: Store, request: RunRequest, run_id: str, workdir: Path) -> Started:
    bench = request.bench
    if workdir.exists():  # a previous, unfinished attempt: start clean
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    trace = {}
    if bench.uses_blas:
        from clusterbench.launch import libtrace

        trace = libtrace.trace_env(workdir)
    site = request.where.for_run(workdir, trace | request.env)  # the campaign's env: remote ranks too
    bench.prepare(workdir)
    launch = bench.launch()
    cmd = site.launch_command(placement.wrapped(launch, workdir))
    env = dict(os.environ) | launch.env | request.env | trace
    record = RunRecord(
        id=run_id, benchmark=bench.name, params=request.params if request.params is not None else bench.params(),
        campaign=request.campaign, repeat=request.repeat,
        command=shlex.join(cmd), workdir=str(workdir), env=relevant_env(env),
        launcher=site.launcher_record(launch), system_id=request.system_id,
        nodes=site.node_names(launch.nodes) or os.uname().nodename, tags=request.tags)
    (workdir / "run.json").write_text(json.dumps(record.__dict__, indent=2, default=str))
    try:
        store.begin_run(record)
    except sqlite3.IntegrityError as exc:  # finished by someone else since the check above
        raise EnvironmentProblem(f"run {run_id}: {exc}") from None
    artifacts = [workdir / name for name in bench.artifacts]
    if bench.uses_blas:
        artifacts.append(workdir / "libraries.txt")
    return Started(run_id, bench, workdir, record, cmd, env, artifacts, launch, site)


def interrupted(store: Store, run: Started, reason: str = "interrupted by the user or a signal") -> None:
    try:
        store.finish_run(run.id, "interrupted", False, reason, None, None, [], run.artifacts)
    except Exception as exc:
        if disk_full(exc):  # the store cannot be written: the next `campaign run` marks it
            raise _disk_full(store, run.id, run.workdir, exc, "while marking it interrupted") from None
        raise


def execute(store: Store, request: RunRequest,
            tick: Callable[[float, str | None], None] | None = None,
            ready: Callable[[], None] | None = None) -> RunResult:
    """Run one request here (or through mpirun/srun from here), wait for it, and store it.

    Its `system:` settings are applied on its nodes first and restored after, whatever happens
    (execution/settings.py journals the original values on disk before changing any). The nodes'
    state is read just before the command starts, and samplers watch them while it runs. `ready` is
    called last before the command starts (runs made together wait there for each other)."""
    run = start(store, request)
    hosts = observe.run_hosts(run.site, run.launch)
    with ExitStack() as restore_after:
        if changes_nodes(request.settings):
            from clusterbench.execution import settings

            observe.discard_prefetch()  # the state is read after the settings are applied
            try:
                restore_after.enter_context(settings.applied_settings(journal_dir(store), hosts, request.settings,
                                                                      hosts))
            except BaseException as exc:
                interrupted(store, run, f"system settings not applied: {getattr(exc, 'message', exc)}")
                raise
        return _execute(store, request, run, hosts, tick, ready)


def _execute(store: Store, request: RunRequest, run: Started, hosts: list[str],
             tick: Callable[[float, str | None], None] | None,
             ready: Callable[[], None] | None = None) -> RunResult:
    def on_tick(elapsed: float) -> None:
        if tick:
            tick(elapsed, run.bench.progress(run.workdir))

    watching = observe.enabled()
    node_state, samplers = None, None
    power_meter = power.meter()
    try:  # from here on, an interrupt (Ctrl-C, SIGTERM) marks the run interrupted
        if watching:
            node_state = observe.collect_state(hosts, run.env, clock_binary())
            samplers = observe.Samplers(hosts, run.workdir, max_seconds=request.timeout_s)
            samplers.start()
        if power_meter:
            power_meter.start()
        if ready:
            ready()
        proc = run_process(run.command, run.workdir, run.env, request.timeout_s, on_tick,
                           record=run.workdir / supervise.RECORD)
    except BaseException as exc:
        if samplers:
            samplers.stop()
        if disk_full(exc):
            raise _disk_full(store, run.id, run.workdir, exc, "while starting its command") from None
        interrupted(store, run)
        raise
    reading = power_meter.stop() if power_meter else None
    observed = samplers.stop() if samplers else observe.Observed()
    if node_state is not None:
        observed.facts["state"] = node_state
    return finish(store, run, proc, request.timeout_s, power_reading=reading, observed=observed)


def changes_nodes(settings: dict[str, str]) -> bool:
    """Whether `system:` settings change the nodes (system.settings.machine_keys); imported only for a
    run that has settings (its allow-list costs ~10 ms at every start)."""
    if not settings:
        return False
    from clusterbench.system.settings import machine_keys

    return bool(machine_keys(settings))


def journal_dir(store: Store) -> Path:
    """Where the original values of changed system settings wait until they are put back."""
    from clusterbench.execution import settings

    return settings.journal_dir_for(store.path)


clock_binary = observe.clock_binary  # the core-clock kernel of the state script (cached per process)


def prefetch_state(site: Site = LOCAL, env: dict[str, str] | None = None) -> bool:
    """Start reading this machine's state for a run about to start here (observe.prefetch_state):
    the CLI calls it first thing, so the read overlaps its imports, discovery and expansion. Only
    for a run on this machine (LOCAL: its nodes are 'localhost'); `env` is the run's extra
    environment over os.environ. A run whose script differs reads its state itself."""
    if site is not LOCAL or not observe.enabled():
        return False
    return observe.prefetch_state(["localhost"], dict(os.environ) | (env or {}), clock_binary())


def finish(store: Store, run: Started, proc: ProcessResult, timeout_s: float | None,
           nodes: str | None = None, launcher: dict | None = None,
           power_reading: power.PowerReading | None = None, observed: observe.Observed | None = None) -> RunResult:
    """Parse the outputs, decide the status and store everything in one transaction. On a full
    disk the run is marked interrupted (its outputs may be cut short) and `DiskFull` raised."""
    if free_bytes(run.workdir) < MIN_FREE_BYTES:
        raise _disk_full(store, run.id, run.workdir, None, "when its command ended")
    bench, workdir, record = run.bench, run.workdir, run.record
    try:
        outcome = bench.parse(workdir)
        built = registry.provenance(str(bench.binary)) if getattr(bench, "binary", None) else None
        if built:  # clusterbench built it: which source, version, MPI, BLAS link and flags made it
            outcome.facts["binary_provenance"] = built
        if power_reading:  # valid with the run: an invalid run's power is not an efficiency figure
            labels = {"source": power_reading.source, "seconds": round(power_reading.seconds, 3)}
            outcome.metrics += [Metric("power_w", power_reading.watts, "W", False, labels, outcome.valid),
                                Metric("energy_j", power_reading.joules, "J", False, labels, outcome.valid)]
        outcome.check_values()  # any benchmark's inf/nan (command, kernels): invalid, never stored as a value
        if bench.uses_blas:
            from clusterbench.launch import libtrace

            _check_blas(bench, libtrace.collect(workdir), outcome)
            _blas_kernels(outcome, run.env)
        if observed:  # the nodes' state and activity: facts beside the benchmark's own
            outcome.facts |= observed.facts
        placed = placement.verdict(run.site, run.launch, workdir, run.env)
        if placed:  # where the ranks really ran; a mismatch is flagged, the benchmark's verdict stands
            outcome.facts["pinning"] = placed
        if proc.timed_out:
            limit = f"the {timeout_s:.0f} s timeout" if timeout_s else "its time limit"
            status, reason = "timeout", f"killed after {limit}"
            outcome.invalidate(reason)
        elif proc.exit_code != 0:
            status, reason = "failed", f"exit code {proc.exit_code}: {_stderr_tail(workdir)}"
            outcome.invalidate(reason)
        else:
            status = "ok" if outcome.valid else "invalid"
            reason = "; ".join(outcome.reasons) or None
        if status in ("timeout", "failed"):  # partial output of a broken run is never a result
            for m in outcome.metrics:
                m.valid = False
        artifacts = run.artifacts + (observed.artifacts if observed else [])
        store.finish_run(run.id, status, outcome.valid, reason if not outcome.valid else None,
                         proc.exit_code, proc.duration_s, outcome.metrics, artifacts, outcome.facts,
                         nodes=nodes, launcher=launcher)
    except Exception as exc:
        if disk_full(exc):
            raise _disk_full(store, run.id, workdir, exc, "while storing its results") from None
        raise
    try:
        (workdir / "run.json").write_text(json.dumps(
            record.__dict__ | {"status": status, "valid": outcome.valid, "reason": reason,
                               "duration_s": proc.duration_s, "facts": outcome.facts,
                               "nodes": nodes or record.nodes, "launcher": launcher or record.launcher},
            indent=2, default=str))
    except OSError as exc:
        if disk_full(exc):  # the result is stored; only its copy in run.json is stale
            raise _disk_full(store, run.id, workdir, exc, f"while writing run.json (the run is stored as {status})",
                             mark=False) from None
        raise
    return RunResult(run.id, status, outcome.valid, reason, proc.duration_s, workdir, outcome,
                     record.benchmark, record.params)


# ---------------------------------------------------------------- full disk


def disk_full(exc: BaseException | None) -> bool:
    """ENOSPC/EDQUOT, or SQLite's "database or disk is full", anywhere in the exception's chain
    (a failed ROLLBACK after SQLite rolled back by itself hides the first error in __context__)."""
    if isinstance(exc, EnvironmentProblem):  # already explained (a DiskFull raised `from None`)
        return False
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if isinstance(exc, sqlite3.Error) and (getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
                                               or "disk is full" in str(exc)):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged user can still write on the file system of `path` (or its nearest
    existing parent); a very large number when it cannot be told."""
    path = Path(path)
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        st = os.statvfs(path)
    except OSError:
        return 1 << 62
    if st.f_blocks == 0:  # a file system that reports no size (some FUSE and network ones)
        return 1 << 62
    return st.f_bavail * st.f_frsize


def _mount_point(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path


def describe_filesystem(path: Path) -> str:
    """'/mnt/scratch (tmpfs, 0 B free of 2.0 MiB)': where the space ran out."""
    from clusterbench.units import format_bytes

    mount = _mount_point(path)
    fstype = "?"
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) > 2 and fields[1].replace("\\040", " ") == str(mount):
                fstype = fields[2]  # the last mount on a point is the one in effect
    except OSError:
        pass
    try:
        st = os.statvfs(mount)
        space = f"{format_bytes(st.f_bavail * st.f_frsize)} free of {format_bytes(st.f_blocks * st.f_frsize)}"
    except OSError:
        space = "size unknown"
    return f"{mount} ({fstype}, {space})"


def _largest_files(workdir: Path, count: int = 3) -> str:
    from clusterbench.units import format_bytes

    try:
        files = sorted(((p.stat().st_size, p) for p in workdir.rglob("*") if p.is_file()), reverse=True)[:count]
    except OSError:
        return ""
    return ", ".join(f"{p.name} ({format_bytes(size)})" for size, p in files if size)


def check_space(store: Store, doing: str) -> None:
    """Refuse to start anything on a file system that is already full."""
    for path in dict.fromkeys((store.runs_dir, store.path.parent)):
        if free_bytes(path) < MIN_FREE_BYTES:
            raise disk_full_error(path, None, doing, None, None)


def disk_full_error(path: Path, exc: BaseException | None, doing: str, run_id: str | None,
                     marked: bool | None) -> DiskFull:
    fs = describe_filesystem(path)
    detail = f": {exc}" if exc is not None else f" (less than {MIN_FREE_BYTES >> 20} MiB left)"
    what = f"run {run_id}: " if run_id else ""
    message = f"disk full: {what}no space left on the file system {fs} {doing}{detail}"
    if marked is True:
        message += "; the run is stored as interrupted"
    elif marked is False:
        message += "; the run could not be marked in the store and stays 'running' until the next " \
                   "`campaign run` marks it interrupted"
    return DiskFull(message, hint=f"free space on {_mount_point(path)} (delete run directories or other files you "
                                  "do not need there, or move the store with --db), then run the same command "
                                  "again: finished runs are kept and the interrupted one is redone")


def _disk_full(store: Store, run_id: str, workdir: Path, exc: BaseException | None, doing: str,
               mark: bool = True) -> DiskFull:
    """The error to raise for a full disk during run `run_id`; marks the run interrupted with the
    reason when the store can still be written (SQLite keeps the database intact either way)."""
    marked = None
    if mark and _has_row(store, run_id):
        fs = describe_filesystem(workdir)
        reason = f"disk full: no space left on {fs} {doing}" + (f": {exc}" if exc else "")
        try:
            store.finish_run(run_id, "interrupted", False, reason, None, None, [])
            marked = True
        except Exception:  # the store is on the full disk too
            marked = False
    error = disk_full_error(workdir, exc, doing, run_id, marked)
    biggest = _largest_files(workdir)
    if biggest:
        error.hint += f". Largest files of this run ({workdir}): {biggest}"
    return error


def _has_row(store: Store, run_id: str) -> bool:
    try:
        return store.run(run_id) is not None
    except sqlite3.Error:
        return True  # cannot tell: try to mark it


# ---------------------------------------------------------------- runs left 'running'


def settle(workdir: Path, wait_s: float = SETTLE_WAIT_S) -> str:
    """For a run left 'running' by a clusterbench that died (kill -9, crash, power cut, full disk):
    make sure none of its processes still runs, and say what was found (the reason to store).

    Its supervisor (supervisor.json) normally killed them within a second of that death; one
    still alive is given `wait_s` to finish, then its tree is killed from here. Never both run."""
    died = "interrupted: the clusterbench process running it ended without finishing it"
    record = supervise.read_record(workdir / supervise.RECORD)
    if record is None:
        return f"{died} (its command never started)"
    alive = supervise.record_alive(record)
    if alive is None:
        return f"{died}; its supervisor (PID {record['pid']}) ran on host {record.get('host')}, not checked from here"
    if not alive:
        return f"{died}; its processes were gone"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and supervise.record_alive(record):
        time.sleep(0.1)
    if not supervise.record_alive(record):
        return f"{died}; its processes ended while resuming waited for them"
    supervise.kill_tree(record["pid"])
    return f"{died}; its processes (supervisor PID {record['pid']}) were still running and were killed on resume"


def _check_blas(bench: Benchmark, loaded: LoadedLibraries, outcome: Outcome) -> None:
    """Record the BLAS the processes loaded; a run that loaded another one than asked is invalid."""
    outcome.facts |= loaded.facts()
    wanted = split_blas(bench.blas)[0]  # openblas-serial@SkylakeX loads openblas-serial's library
    if wanted and wanted != "default" and loaded.by_process:
        got = loaded.blas_variants()
        if wanted not in got:
            outcome.invalidate(f"asked for BLAS {wanted} but the processes loaded {', '.join(got) or 'none'}")


def _blas_kernels(outcome: Outcome, env: dict[str, str]) -> None:
    """Which kernels each OpenBLAS the run loaded chose here (system/blas_kernel.py), with the run's own
    OPENBLAS_CORETYPE if it set one (the user's is honoured and recorded): a generic fallback on a CPU the
    library does not know is the likeliest reason for a low figure, and is said with its remedy."""
    from clusterbench.system import blas_kernel

    coretype = env.get("OPENBLAS_CORETYPE") or os.environ.get("OPENBLAS_CORETYPE") or None
    kernels, seen = [], set()
    paths = [p for p in outcome.facts.get("blas_loaded_resolved") or [] if "blas" in p.lower()]
    chosen = blas_kernel.openblas_cores(paths, coretype) if paths else {}
    for path in paths:
        found = blas_kernel.judge(path, coretype, chosen=chosen[path]) if chosen.get(path) else None
        if found is not None and (found["core"], found["config"]) not in seen:  # libblas.so.3 of the same build
            seen.add((found["core"], found["config"]))
            kernels.append(found)
    if kernels:
        outcome.facts["blas_kernel"] = kernels[0] if len(kernels) == 1 else kernels


def _stderr_tail(workdir: Path, lines: int = 3) -> str:
    try:
        text = (workdir / "stderr.txt").read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])[:500]
