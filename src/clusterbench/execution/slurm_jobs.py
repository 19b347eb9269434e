"""Run a campaign's pending runs as Slurm jobs: queue them, follow them, store each as it ends.

Each run becomes one batch job (its script kept in the run directory as job.sbatch). Up to
`max_queued` jobs wait in the queue at once so the scheduler can fill the nodes; the queue is
polled every `poll_s` seconds with squeue, and a job that left it is read with scontrol/sacct
(state, exit code, elapsed time, nodes) and its run parsed and stored. Inside the job, steps
beside the run's own read every node's state and sample what the nodes do (observe.slurm_lines).
Ctrl-C or SIGTERM cancels every job of the campaign still queued or running (scancel) and marks
their runs interrupted, so the next `campaign run` submits them again and skips the finished ones.

Each job's id is kept in its run directory (slurm_job.json). After kill -9 of clusterbench its
jobs stay in the queue; the next `campaign run` (which holds the campaign's lock, engine.py)
cancels those still queued or running before it submits their runs again (`settle_job`), so a
run never runs twice.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from clusterbench.execution import observe
from clusterbench.execution.executor import RunRequest, RunResult, Started, clock_binary, finish, interrupted, start
from clusterbench.execution.request import PlannedRun
from clusterbench.launch import slurm
from clusterbench.launch.process import ProcessResult
from clusterbench.launch.site import Site
from clusterbench.store.db import Store

TIMEOUT_STATES = {"TIMEOUT", "DEADLINE"}
JOB_RECORD = "slurm_job.json"
SETTLE_WAIT_S = 60.0  # how long a resume waits for a cancelled job to leave the queue


def run_jobs(store: Store, pending: list[PlannedRun], system_id: str | None, site: Site,
             started_cb: Callable[[PlannedRun], None], tick_cb: Callable[[PlannedRun, float, str | None], None],
             finished_cb: Callable[[PlannedRun, RunResult], None]) -> None:
    opts = site.slurm
    assert opts is not None
    slurm.require_slurm()
    queue = list(pending)
    jobs: dict[str, tuple[PlannedRun, Started, slurm.Submitted]] = {}
    try:
        while queue or jobs:
            while queue and len(jobs) < opts.max_queued:
                run = queue.pop(0)
                started, job = _submit(store, run, system_id, site)
                jobs[job.job_id] = (run, started, job)
            states = slurm.active_states(list(jobs))
            for job_id, (run, started, job) in list(jobs.items()):
                state = states.get(job_id)
                if state == "RUNNING" and job.running_since is None:
                    job.running_since = time.monotonic()
                    started_cb(run)
                if state is not None:
                    if job.running_since is not None:
                        tick_cb(run, time.monotonic() - job.running_since, started.bench.progress(started.workdir))
                    continue
                del jobs[job_id]
                if job.running_since is None:  # ran between two polls
                    started_cb(run)
                finished_cb(run, _collect(store, run, started, job))
            if jobs:
                time.sleep(opts.poll_s)
    except BaseException:
        slurm.cancel(list(jobs))
        for _run, started, job in jobs.values():
            interrupted(store, started, f"interrupted; Slurm job {job.job_id} cancelled")
        raise


def _submit(store: Store, run: PlannedRun, system_id: str | None, site: Site) -> tuple[Started, slurm.Submitted]:
    bench = run.bench_class().from_point(run.params)
    started = start(store, RunRequest.planned(run, bench, site, system_id))
    nodes = started.launch.nodes
    ranks = run.params.get("ranks") or 1
    before, after = (observe.slurm_lines(started.workdir, started.env, clock_binary(), max_seconds=run.timeout_s)
                     if observe.enabled() else ([], []))
    request = slurm.JobRequest(name=f"cb-{run.id}"[:120], workdir=started.workdir, command=started.command,
                               env=started.launch.env | run.env, nodes=nodes, tasks_per_node=-(-ranks // nodes),
                               cpus_per_task=run.params.get("threads") or 1, timeout_s=run.timeout_s,
                               before=before, after=after)
    try:
        job = slurm.submit(request, site.slurm, started.env)
    except BaseException:
        interrupted(store, started, "sbatch failed")
        raise
    try:
        (started.workdir / JOB_RECORD).write_text(json.dumps({"job_id": job.job_id}))
    except OSError:  # a full disk: the job runs; the next finish() sees the disk and stops the campaign
        pass
    return started, job


def settle_job(workdir: Path) -> str | None:
    """For a run left 'running' by a dead runner that had submitted it to Slurm: cancel its job if
    it is still queued or running, wait until it left the queue, and say so. None when the run was
    no Slurm job."""
    try:
        job_id = str(json.loads((workdir / JOB_RECORD).read_text())["job_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    died = "interrupted: the clusterbench process following it ended without finishing it"
    try:
        active = slurm.active_states([job_id])
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{died}; Slurm job {job_id} could not be checked ({exc}): cancel it by hand if it still runs"
    if not active:
        return f"{died}; Slurm job {job_id} had already ended"
    slurm.cancel([job_id])
    deadline = time.monotonic() + SETTLE_WAIT_S
    while time.monotonic() < deadline and slurm.active_states([job_id]):
        time.sleep(1.0)
    return f"{died}; Slurm job {job_id} was still queued or running and was cancelled on resume"


def _collect(store: Store, run: PlannedRun, started: Started, job: slurm.Submitted) -> RunResult:
    final = slurm.final_state(job.job_id)
    if final.state == "COMPLETED":
        exit_code = final.exit_code or 0
    else:  # a job killed by a signal or by Slurm has no exit code of its own; never report 0
        exit_code = final.exit_code or (128 + final.signal if final.signal else 1)
    proc = ProcessResult(exit_code, final.elapsed_s or 0.0, timed_out=final.state in TIMEOUT_STATES)
    launcher = started.record.launcher | {
        "slurm_job": {"id": job.job_id, "state": final.state, "exit_code": final.exit_code,
                      "signal": final.signal, "elapsed_s": final.elapsed_s, "nodes": final.nodes}}
    result = finish(store, started, proc, run.timeout_s, nodes=final.nodes, launcher=launcher,
                    observed=observe.read_slurm_files(started.workdir))
    if final.state not in ("COMPLETED", *TIMEOUT_STATES) and result.status == "failed":
        result.reason = f"Slurm job {job.job_id} ended {final.state}: {result.reason}"
    return result
