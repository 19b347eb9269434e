"""Slurm: a generated batch script per run or per array of repeats, `sbatch`, polling, the final
state with sacct's accounting, `scancel`.

The run directory is on the shared filesystem, so the job writes its outputs where the run
expects them and nothing has to be copied back. The repeats of one campaign point go as one array
job (`--array=0-4`): element i changes into the directory of repeat i and runs it there.
`squeue -r` says what is still pending or running, one line per array element (`123_4`; without
-r a pending array is one line, `123_[0-4]`, which is understood as well). A job or element that
left the queue is read with `scontrol show job` (kept by the controller for MinJobAge seconds)
and, when the cluster keeps accounting, with `sacct`: State, ExitCode, Elapsed, NodeList,
ConsumedEnergyRaw, TotalCPU and MaxRSS (the largest of the job's steps), stored with the run as
`accounting` with the name of the command that answered. Every job of a campaign is cancelled
when the campaign is interrupted, so nothing keeps running behind the user's back.

`Slurm` gives what Slurm says differently; the flow of a job is launch/batch.py's
`BatchScheduler`, and this module's functions are the scheduler interface there.
"""

from __future__ import annotations

import re
import shlex
import shutil
import time

from clusterbench.errors import UserInputError
from clusterbench.launch.batch import (
    BatchScheduler,
    Directive,
    JobRequest,
    JobState,
    Submitted,
    clock_seconds,
    dispatch,
    expand_indices,
    exports,
    padded_minutes,
    run_tool,
    text_field,
)
from clusterbench.launch.site import SlurmOptions

__all__ = ["JobRequest", "JobState", "Submitted"]

SACCT_FIELDS = ("JobID", "State", "ExitCode", "Elapsed", "ElapsedRaw", "NodeList", "ConsumedEnergyRaw",
                "TotalCPU", "MaxRSS")
SACCT_WAIT_S = 3.0  # how long sacct may lag behind the controller for a job that just ended


class Slurm(BatchScheduler):
    name, label, script, prefix = "slurm", "Slurm", "job.sbatch", "#SBATCH"
    tools = ("sbatch", "squeue", "scontrol", "scancel")
    tools_hint = "install slurm-client (apt-get install slurm-client) or load the Slurm module"
    submit_args = ("--parsable",)
    submit_checks = "partition, time limit and node count"
    quote_values = False  # sbatch reads each #SBATCH line's value to its end
    args_option = "sbatch_args"
    index_var = "SLURM_ARRAY_TASK_ID"
    active = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING",
                        "SIGNALING", "STAGE_OUT", "REQUEUE_HOLD", "REQUEUE_FED"})

    def time_limit(self, seconds: float) -> str:
        """sbatch --time as D-HH:MM:SS."""
        days, minutes = divmod(padded_minutes(seconds), 24 * 60)
        return f"{days}-{minutes // 60:02d}:{minutes % 60:02d}:00"

    def begin_time(self, seconds: float, now: float | None = None) -> str:
        return f"now+{int(seconds)}"

    def directives(self, req: JobRequest, opts: SlurmOptions, array: bool, limit: str | None,
                   begin: str | None) -> list[Directive]:
        out, err = ("slurm-%A_%a.out", "slurm-%A_%a.err") if array else ("stdout.txt", "stderr.txt")
        return [("--job-name=", req.name, "job name"), ("--nodes=", req.nodes, None),
                ("--ntasks-per-node=", req.tasks_per_node, None), ("--cpus-per-task=", req.cpus_per_task, None),
                ("--chdir=", str(req.workdir), "run directory"), ("--output=", str(req.workdir / out), "output file"),
                ("--error=", str(req.workdir / err), "error file"),
                ("--array=", f"0-{len(req.tasks) - 1}" if array else None, None), ("--begin=", begin, None),
                ("--exclusive", bool(opts.exclusive), None), ("--time=", limit, "time limit"),
                *((f"--{key}=", getattr(opts, key), key) for key in ("partition", "account", "qos"))]

    def body(self, req: JobRequest, array: bool) -> list[str]:
        """One run in the job's own directory (the directives chose it and the outputs), or one per array element."""
        if array:
            return ["# written by clusterbench: one run per array element, each in its own directory",
                    'echo "clusterbench: job ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID} on $SLURM_JOB_NODELIST" >&2',
                    *dispatch(req.array, self.index_var, self.first_index)]
        lines = ["# written by clusterbench: one run, in its own directory", *exports(req.env),
                 'echo "clusterbench: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST" >&2', *req.before,
                 shlex.join(req.command)]
        return lines + (["cb_status=$?", *req.after, "exit $cb_status"] if req.after else [])

    def job_id(self, answer: str) -> str | None:
        job_id = answer.strip().split(";")[0]  # --parsable: id[;cluster]
        return job_id if re.fullmatch(r"\d{1,18}", job_id) else None

    def element(self, job_id: str, index: int) -> str:
        return f"{job_id}_{index}"

    def parent(self, task_id: str) -> str:
        return task_id.split("_", 1)[0]

    def active_states(self, task_ids: list[str]) -> dict[str, str] | None:
        """State of the jobs and array elements still in the queue (one that left it is absent);
        None when squeue could not be asked."""
        if not task_ids:
            return {}
        ids = sorted({self.parent(j) for j in task_ids} | {j for j in task_ids if "_" in j})
        code, out, err = run_tool(["squeue", "-h", "-r", "-j", ",".join(ids), "-o", "%i %T"])
        if code != 0:
            return {} if "Invalid job id" in err else None
        return parse_squeue(out)

    def ids_named(self, name: str) -> list[str] | None:
        code, out, err = run_tool(["squeue", "-h", "-r", "-n", name, "-o", "%i"])
        return out.split() if code == 0 else None

    def final_state(self, task_id: str) -> JobState:
        """State, exit code, elapsed time and nodes of a job or array element that left the queue,
        with sacct's accounting when the cluster keeps it."""
        state = _from_scontrol(task_id)
        accounting = sacct_accounting(task_id, wait=state is not None)
        if accounting:
            if state is None:
                state = JobState(task_id, accounting.get("state") or "UNKNOWN", accounting.get("exit_code"),
                                 accounting.get("signal"), accounting.get("elapsed_s"), accounting.get("nodes"),
                                 source="sacct")
            state.accounting = accounting
        return state or JobState(task_id, "UNKNOWN", reason="neither scontrol nor sacct knows the job any more")


def parse_squeue(text: str) -> dict[str, str]:
    """`%i %T` lines -> id -> state; `123_[0-4%2] PENDING` gives 123_0 .. 123_4."""
    states: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        job, state = parts
        m = re.fullmatch(r"(\d{1,18})_\[([^\]]{1,1000})\]", job)
        if m:
            try:
                indices = expand_indices(m.group(2))
            except ValueError:
                continue
            states |= {f"{m.group(1)}_{i}": state for i in indices}
        elif re.fullmatch(r"\d{1,18}(?:_\d{1,9})?(?:\+\d{1,9})?", job):
            states[job] = state
    return states


def _from_scontrol(job_id: str) -> JobState | None:
    try:
        code, out, _ = run_tool(["scontrol", "-o", "show", "job", job_id])
    except UserInputError:
        return None
    if code != 0 or "JobState=" not in out:
        return None
    fields = dict(re.findall(r"(\w+)=(\S*)", out))
    exit_code, _, sig = fields.get("ExitCode", "").partition(":")
    reason = text_field(fields.get("Reason"))
    return JobState(job_id, fields.get("JobState", "UNKNOWN"), _int(exit_code), _int(sig),
                    parse_elapsed(fields.get("RunTime", "")), text_field(fields.get("NodeList")),
                    reason, raw_state=fields.get("JobState"), source="scontrol")


def sacct_accounting(job_id: str, wait: bool = False) -> dict | None:
    """sacct's figures of a finished job or array element, or None when sacct gives no answer (no
    accounting storage, or a job it never saw). With `wait`, a job sacct still shows as active
    or not yet known (the database lags the controller) is asked again for up to SACCT_WAIT_S."""
    if not shutil.which("sacct"):
        return None
    deadline = time.monotonic() + (SACCT_WAIT_S if wait else 0)
    while True:
        try:
            code, out, _ = run_tool(["sacct", "-n", "-P", "-j", job_id, "-o", ",".join(SACCT_FIELDS)], timeout=30)
        except UserInputError:
            return None
        if code != 0:  # no accounting storage, or sacct refused: nothing to wait for
            return None
        found = parse_sacct(out, job_id)
        # The database lags the controller: a job just ended may be missing there or still active.
        if (found and found.get("state") not in Slurm.active) or time.monotonic() >= deadline:
            return found
        time.sleep(0.5)


def parse_sacct(text: str, job_id: str) -> dict | None:
    """`sacct -n -P -o JobID,State,ExitCode,Elapsed,ElapsedRaw,NodeList,ConsumedEnergyRaw,TotalCPU,MaxRSS`
    of one job -> its figures: the job's own line (its JobID is `job_id`, or the first line that is
    no step) for state, exit code, elapsed time, nodes, energy and CPU time; the largest MaxRSS of
    its steps (`123.batch`, `123.0`, `123_4.extern`). Empty or unknown fields are None."""
    job: list[str] | None = None
    steps: list[list[str]] = []
    for line in text.splitlines()[:10_000]:
        parts = line.split("|")
        if len(parts) < len(SACCT_FIELDS):
            continue
        parts = [p.strip() for p in parts[:len(SACCT_FIELDS)]]
        jid = parts[0]
        if "." in jid:
            steps.append(parts)
        elif job is None and (jid == job_id or not job_id or jid.split("_")[0] == job_id.split("_")[0]):
            job = parts
        if jid == job_id:
            job = parts
    if job is None:
        return None
    _, state, exit_code, elapsed, elapsed_raw, nodes, energy, total_cpu, max_rss = job
    rc, _, sig = exit_code.partition(":")
    rss = [r for r in [parse_size(s[8]) for s in steps] + [parse_size(max_rss)] if r is not None]
    cpu = clock_seconds(total_cpu)
    if cpu is None and steps:
        per_step = [clock_seconds(s[7]) for s in steps]
        cpu = sum(c for c in per_step if c is not None) if any(c is not None for c in per_step) else None
    raw_elapsed = _int(elapsed_raw)
    return {"source": "sacct", "state": (state.split()[0] if state else None) or None,
            "exit_code": _int(rc), "signal": _int(sig),
            "elapsed_s": float(raw_elapsed) if raw_elapsed is not None else clock_seconds(elapsed),
            "nodes": text_field(nodes) if nodes not in ("None assigned", "(null)") else None,
            "energy_j": _int(energy), "total_cpu_s": cpu, "max_rss_bytes": max(rss) if rss else None}


_SIZE_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}


def parse_size(text: str) -> int | None:
    """sacct's sizes: '1234K', '2.5M', '0' -> bytes; empty or unreadable -> None."""
    m = re.fullmatch(r"(\d{1,15}(?:\.\d{1,6})?)([KMGTP]?)", (text or "").strip().upper())
    if not m:
        return None
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2)])


def scontrol_accounting(state: JobState) -> dict:
    """The figures the controller itself knows, when sacct gives no answer."""
    return {"source": "scontrol", "state": state.state, "exit_code": state.exit_code, "signal": state.signal,
            "elapsed_s": state.elapsed_s, "nodes": state.nodes}


def parse_elapsed(text: str) -> float | None:
    """Slurm's [D-]HH:MM:SS / MM:SS -> seconds."""
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", text.strip())
    if not m:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def _int(text: str | None) -> int | None:
    if text is None or not re.fullmatch(r"-?\d{1,18}", text.strip()):
        return None
    return int(text)


SCHEDULER = Slurm()
NAME, LABEL, SCRIPT = SCHEDULER.name, SCHEDULER.label, SCHEDULER.script
# The scheduler interface (launch/batch.py) as this module's functions, which the job engine calls by name.
require, render_script, submit, parent = SCHEDULER.require, SCHEDULER.render_script, SCHEDULER.submit, SCHEDULER.parent
active_states, final_state, cancel = SCHEDULER.active_states, SCHEDULER.final_state, SCHEDULER.cancel
require_slurm = require
