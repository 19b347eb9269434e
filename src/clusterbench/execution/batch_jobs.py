"""Run a campaign's pending runs as batch jobs (Slurm, LSF, PBS): queue them, follow them, store
each as it ends.

The repeats of one point go as one array job (element i runs repeat i in its own run directory);
a point without repeats is a plain job. With `--spread` no arrays are made: each run is its own job,
submitted with a begin time (sbatch --begin, bsub -b, qsub -a) that spaces the repeat rounds.
Up to `max_queued` runs (array elements count one each) wait in the queue at once so the scheduler
can fill the nodes; the queue is polled every `poll_s` seconds, and a run whose job (or element)
left it is read from the scheduler (state, exit code, elapsed time, nodes; sacct's accounting on
Slurm) and its run parsed and stored. Inside a Slurm job, steps beside the run's own read every
node's state and sample what the nodes do (observe.slurm_lines). Ctrl-C or SIGTERM cancels every
job of the campaign still queued or running and marks their runs interrupted, so the next
`campaign run` submits them again and skips the finished ones.

Each run's job id (an array element's own: 123_4, 123[5], 123[4].server) and its scheduler are
kept in its run directory (slurm_job.json). After kill -9 of clusterbench its jobs stay in the
queue; the next `campaign run` (which holds the campaign's lock, engine.py) cancels those still
queued or running before it submits their runs again (`settle_job`), so a run never runs twice.

The schedulers are the modules launch/slurm.py, lsf.py and pbs.py, each with the interface
described in launch/batch.py.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from clusterbench.errors import UserInputError
from clusterbench.execution import observe
from clusterbench.execution.executor import RunRequest, RunResult, Started, clock_binary, finish, interrupted, start
from clusterbench.execution.request import PlannedRun
from clusterbench.launch import lsf, pbs, slurm
from clusterbench.launch.batch import JobRequest, JobState, Task, hostfile_lines
from clusterbench.launch.process import ProcessResult
from clusterbench.launch.site import NODEFILE_VARS, Site
from clusterbench.store.db import Store

TIMEOUT_STATES = {"TIMEOUT", "DEADLINE"}
JOB_RECORD = "slurm_job.json"  # the name is kept for every scheduler: older run directories have it
SETTLE_WAIT_S = 60.0  # how long a resume waits for a cancelled job to leave the queue
SETTLE_ASK_S = 15.0  # how long a resume asks again when the queue does not answer
SCHEDULERS: dict[str, ModuleType] = {"slurm": slurm, "lsf": lsf, "pbs": pbs}


@dataclass
class _Running:
    run: PlannedRun
    started: Started
    task_id: str
    running_since: float | None = None


def scheduler(name: str) -> ModuleType:
    return SCHEDULERS[name]


def point_key(run: PlannedRun) -> str:
    """What the repeats of one point share (everything but the repeat)."""
    return json.dumps([run.campaign, run.block, run.benchmark, run.recorded_params, run.env, run.timeout_s],
                      sort_keys=True, default=str)


def units(pending: list[PlannedRun], arrays: bool, max_size: int) -> list[list[PlannedRun]]:
    """The jobs to submit, in order: with `arrays`, the pending repeats of each point together
    (in repeat order, at most `max_size` per job), else one run per job."""
    if not arrays:
        return [[run] for run in pending]
    groups: dict[str, list[PlannedRun]] = {}
    for run in pending:
        groups.setdefault(point_key(run), []).append(run)
    out = []
    for group in groups.values():
        group.sort(key=lambda r: r.repeat)
        out += [group[i:i + max_size] for i in range(0, len(group), max_size)]
    return out


def run_jobs(store: Store, pending: list[PlannedRun], system_id: str | None, site: Site,
             started_cb: Callable[[PlannedRun], None], tick_cb: Callable[[PlannedRun, float, str | None], None],
             finished_cb: Callable[[PlannedRun, RunResult], None], spread_s: float | None = None) -> None:
    """Every pending run as a batch job of the site's scheduler; `spread_s` (seconds between repeat
    rounds) makes one job per run with a begin time instead of arrays."""
    batch = site.batch()
    assert batch is not None
    name, opts = batch
    sched = scheduler(name)
    sched.require()
    todo = units(pending, arrays=not spread_s, max_size=opts.max_queued)
    t0, first_round = time.monotonic(), min((r.repeat for r in pending), default=0)
    jobs: dict[str, _Running] = {}
    try:
        while todo or jobs:
            while todo and (not jobs or len(jobs) + len(todo[0]) <= opts.max_queued):
                group = todo.pop(0)
                begin = None
                if spread_s:
                    begin = max(0.0, t0 + (group[0].repeat - first_round) * spread_s - time.monotonic())
                for item in _submit(store, group, system_id, site, sched, opts, begin):
                    jobs[item.task_id] = item
            states = sched.active_states(list(jobs))
            if states is None:  # the scheduler did not answer this time: ask again at the next poll
                time.sleep(opts.poll_s)
                continue
            for task_id, item in list(jobs.items()):
                state = states.get(task_id)
                if state in ("RUNNING", "RUN", "R") and item.running_since is None:
                    item.running_since = time.monotonic()
                    started_cb(item.run)
                if state is not None:
                    if item.running_since is not None:
                        tick_cb(item.run, time.monotonic() - item.running_since,
                                item.started.bench.progress(item.started.workdir))
                    continue
                del jobs[task_id]
                if item.running_since is None:  # ran between two polls
                    started_cb(item.run)
                finished_cb(item.run, _collect(store, item, sched))
            if jobs:
                time.sleep(opts.poll_s)
    except BaseException:
        sched.cancel(sorted({sched.parent(t) for t in jobs}))
        for item in jobs.values():
            interrupted(store, item.started, f"interrupted; {sched.LABEL} job {item.task_id} cancelled")
        raise


def _task(run: PlannedRun, started: Started, name: str) -> Task:
    before: list[str] = []
    after: list[str] = []
    if name == "slurm" and observe.enabled():
        before, after = observe.slurm_lines(started.workdir, started.env, clock_binary(), max_seconds=run.timeout_s)
    hostfile = started.site.allocation_hostfile
    if name in NODEFILE_VARS and hostfile:
        before = hostfile_lines(NODEFILE_VARS[name], *hostfile) + before
    return Task(started.workdir, started.command, started.launch.env | run.env, before, after)


def _submit(store: Store, group: list[PlannedRun], system_id: str | None, site: Site, sched: ModuleType,
            opts: object, begin_s: float | None) -> list[_Running]:
    """Start the runs of one job (rows 'running', directories, commands) and submit it."""
    items: list[_Running] = []
    try:
        for run in group:
            bench = run.bench_class().from_point(run.params)
            started = start(store, RunRequest.planned(run, bench, site, system_id))
            items.append(_Running(run, started, ""))
        first = items[0]
        nodes = first.started.launch.nodes
        ranks = first.run.params.get("ranks") or 1
        tasks = [_task(i.run, i.started, sched.NAME) for i in items]
        one = tasks[0]
        request = JobRequest(name=f"cb-{first.run.id}"[:120], workdir=first.started.workdir, command=one.command,
                             env=one.env, nodes=nodes, tasks_per_node=-(-ranks // nodes),
                             cpus_per_task=first.run.params.get("threads") or 1, timeout_s=first.run.timeout_s,
                             before=one.before, after=one.after, array=tasks if len(tasks) > 1 else [],
                             begin_s=begin_s)
        for item in items:  # a runner killed while the scheduler takes the job leaves its name, not its id yet
            _write_record(item.started.workdir, {"job_id": None, "job_name": request.name, "scheduler": sched.NAME})
        job = sched.submit(request, opts, first.started.env)
    except BaseException as exc:
        reason = getattr(exc, "message", None) or f"{sched.LABEL} submission failed"
        for item in items:
            interrupted(store, item.started, f"not submitted: {reason}"[:500])
        raise
    for item, task_id in zip(items, job.task_ids, strict=True):
        item.task_id = task_id
        _write_record(item.started.workdir, {"job_id": task_id, "scheduler": sched.NAME,
                                             "array": job.job_id if len(items) > 1 else None})
    return items


def _write_record(workdir: Path, record: dict) -> None:
    """JOB_RECORD, whole or not at all (a rename): settle_job reads it after a crash at any moment."""
    try:
        partial = workdir / (JOB_RECORD + ".part")
        partial.write_text(json.dumps(record))
        partial.replace(workdir / JOB_RECORD)
    except OSError:  # a full disk: the job runs; the next finish() sees the disk and stops the campaign
        pass


def settle_job(workdir: Path) -> str | None:
    """For a run left 'running' by a dead runner that had submitted it as a batch job: cancel its
    job (or array element) if it is still queued or running, wait until it left the queue, and
    say so. None when the run was no batch job."""
    try:
        record = json.loads((workdir / JOB_RECORD).read_text())
        sched = SCHEDULERS[str(record.get("scheduler") or "slurm")]
        job_id, name = record.get("job_id"), record.get("job_name")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if job_id is None and not name:
        return None
    label = sched.LABEL
    died = "interrupted: the clusterbench process following it ended without finishing it"
    job = f"{label} job {job_id}" if job_id is not None else f"the {label} job named {name}"
    try:
        if job_id is None:  # killed while submitting: the job, if the scheduler took it, is found by its name
            ids = _asked(lambda: sched.SCHEDULER.ids_named(str(name)))
            if ids is None:
                return f"{died} while submitting; {job} could not be looked up: cancel it by hand if it was queued"
            if not ids:
                return f"{died} while submitting; {job} is not queued (never taken, or already ended)"
        else:
            ids = [str(job_id)]
        active = _asked(lambda: sched.active_states(ids))
    except (OSError, subprocess.SubprocessError, UserInputError) as exc:
        return f"{died}; {job} could not be checked ({exc}): cancel it by hand if it still runs"
    if active is None:
        return f"{died}; {job} could not be checked: cancel it by hand if it still runs"
    if not active:
        return f"{died}; {job} had already ended"
    sched.cancel(ids)
    deadline = time.monotonic() + SETTLE_WAIT_S
    while time.monotonic() < deadline and sched.active_states(ids):
        time.sleep(1.0)
    return f"{died}; {job} was still queued or running and was cancelled on resume"


def _asked(question: Callable[[], object | None]) -> object | None:
    """The scheduler's answer, asked again for up to SETTLE_ASK_S while it gives none (a busy controller)."""
    answer = question()
    deadline = time.monotonic() + SETTLE_ASK_S
    while answer is None and time.monotonic() < deadline:
        time.sleep(1.0)
        answer = question()
    return answer


def _collect(store: Store, item: _Running, sched: ModuleType) -> RunResult:
    run, started = item.run, item.started
    final: JobState = sched.final_state(item.task_id)
    if final.state == "COMPLETED":
        exit_code = final.exit_code or 0
    else:  # a job killed by a signal or by the scheduler has no exit code of its own; never report 0
        exit_code = final.exit_code or (128 + final.signal if final.signal else 1)
    proc = ProcessResult(exit_code, final.elapsed_s or 0.0, timed_out=final.state in TIMEOUT_STATES)
    record = {"id": item.task_id, "state": final.state, "exit_code": final.exit_code, "signal": final.signal,
              "elapsed_s": final.elapsed_s, "nodes": final.nodes, "source": final.source}
    if final.raw_state and final.raw_state != final.state:
        record["scheduler_state"] = final.raw_state
    if sched.NAME == "slurm":
        record["accounting"] = final.accounting or (slurm.scontrol_accounting(final) if final.source else None)
    launcher = started.record.launcher | {f"{sched.NAME}_job": record}
    result = finish(store, started, proc, run.timeout_s, nodes=final.nodes, launcher=launcher,
                    observed=observe.read_slurm_files(started.workdir))
    if final.state not in ("COMPLETED", *TIMEOUT_STATES) and result.status == "failed":
        result.reason = f"{sched.LABEL} job {item.task_id} ended {final.state}: {result.reason}"
    return result
