"""Slurm: a generated batch script per run, `sbatch`, polling, the final state, `scancel`.

The run directory is on the shared filesystem, so the job writes its outputs where the run
expects them and nothing has to be copied back. The final state comes from `sacct` when the
cluster keeps accounting, else from `scontrol show job` (kept by the controller for
MinJobAge seconds); `squeue` says what is still pending or running. Every job of a campaign is
cancelled when the campaign is interrupted, so nothing keeps running behind the user's back.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.errors import MissingToolError, UserInputError
from clusterbench.launch.site import SlurmOptions

ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING",
          "SIGNALING", "STAGE_OUT", "REQUEUE_HOLD", "REQUEUE_FED"}
SCRIPT = "job.sbatch"


@dataclass
class JobRequest:
    name: str
    workdir: Path
    command: list[str]
    env: dict[str, str]  # exported in the script (the benchmark's own variables)
    nodes: int
    tasks_per_node: int
    cpus_per_task: int
    timeout_s: float | None = None
    before: list[str] = field(default_factory=list)  # shell lines (quoted by their maker) before the command
    after: list[str] = field(default_factory=list)  # after it, whatever its exit (the job exits with the command's)


@dataclass
class JobState:
    job_id: str
    state: str
    exit_code: int | None = None
    signal: int | None = None
    elapsed_s: float | None = None
    nodes: str | None = None
    reason: str | None = None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE


@dataclass
class Submitted:
    job_id: str
    request: JobRequest
    running_since: float | None = None  # monotonic time it was first seen RUNNING


def require_slurm() -> None:
    missing = [t for t in ("sbatch", "squeue", "scontrol", "scancel") if not shutil.which(t)]
    if missing:
        raise MissingToolError(f"Slurm commands not found: {', '.join(missing)}",
                               hint="install slurm-client (apt-get install slurm-client) or load the Slurm module")


def slurm_time(seconds: float) -> str:
    """sbatch --time as D-HH:MM:SS, rounded up to the minute plus one for start-up."""
    minutes = int(-(-seconds // 60)) + 1
    days, minutes = divmod(minutes, 24 * 60)
    return f"{days}-{minutes // 60:02d}:{minutes % 60:02d}:00"


def render_script(req: JobRequest, opts: SlurmOptions) -> str:
    lines = ["#!/bin/bash",
             f"#SBATCH --job-name={req.name}",
             f"#SBATCH --nodes={req.nodes}",
             f"#SBATCH --ntasks-per-node={req.tasks_per_node}",
             f"#SBATCH --cpus-per-task={req.cpus_per_task}",
             f"#SBATCH --chdir={req.workdir}",
             f"#SBATCH --output={req.workdir / 'stdout.txt'}",
             f"#SBATCH --error={req.workdir / 'stderr.txt'}"]
    if opts.exclusive:
        lines.append("#SBATCH --exclusive")
    limit = opts.time or (slurm_time(req.timeout_s) if req.timeout_s else None)
    if limit:
        lines.append(f"#SBATCH --time={limit}")
    for key in ("partition", "account", "qos"):
        if getattr(opts, key):
            lines.append(f"#SBATCH --{key}={getattr(opts, key)}")
    lines += [f"#SBATCH {arg}" for arg in opts.sbatch_args]
    lines.append("# written by clusterbench: one run, in its own directory")
    lines += [f"export {key}={shlex.quote(value)}" for key, value in sorted(req.env.items())]
    lines.append('echo "clusterbench: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST" >&2')
    lines += req.before
    lines.append(shlex.join(req.command))
    if req.after:
        lines += ["cb_status=$?", *req.after, "exit $cb_status"]
    return "\n".join(lines) + "\n"


def submit(req: JobRequest, opts: SlurmOptions, env: dict[str, str]) -> Submitted:
    require_slurm()
    script = req.workdir / SCRIPT
    script.write_text(render_script(req, opts))
    out = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True,
                         env=env, timeout=60, check=False)
    if out.returncode != 0:
        raise UserInputError(f"sbatch refused the job of {req.name}: {out.stderr.strip()}",
                             hint=f"the script is {script}; check partition, time limit and node count")
    job_id = out.stdout.strip().split(";")[0]
    return Submitted(job_id, req)


def active_states(job_ids: list[str]) -> dict[str, str]:
    """State of the jobs still in the queue (a job that left it is absent)."""
    if not job_ids:
        return {}
    out = subprocess.run(["squeue", "-h", "-j", ",".join(job_ids), "-o", "%i %T"],
                         capture_output=True, text=True, timeout=60, check=False)
    states = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return states


def final_state(job_id: str) -> JobState:
    """State, exit code, elapsed time and nodes of a job that left the queue."""
    state = _from_scontrol(job_id) or _from_sacct(job_id)
    return state or JobState(job_id, "UNKNOWN", reason="neither scontrol nor sacct knows the job any more")


def _from_scontrol(job_id: str) -> JobState | None:
    out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True,
                         timeout=60, check=False)
    if out.returncode != 0 or "JobState=" not in out.stdout:
        return None
    fields = dict(re.findall(r"(\w+)=(\S*)", out.stdout))
    code, _, sig = fields.get("ExitCode", "").partition(":")
    return JobState(job_id, fields.get("JobState", "UNKNOWN"), _int(code), _int(sig),
                    parse_elapsed(fields.get("RunTime", "")), fields.get("NodeList") or None,
                    fields.get("Reason") if fields.get("Reason") not in (None, "None") else None)


def _from_sacct(job_id: str) -> JobState | None:
    if not shutil.which("sacct"):
        return None
    out = subprocess.run(["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "State,ExitCode,ElapsedRaw,NodeList"],
                         capture_output=True, text=True, timeout=60, check=False)
    line = out.stdout.strip().splitlines()[:1]
    if out.returncode != 0 or not line:
        return None
    state, code, elapsed, nodes = (line[0].split("|") + ["", "", "", ""])[:4]
    rc, _, sig = code.partition(":")
    return JobState(job_id, state.split()[0] if state else "UNKNOWN", _int(rc), _int(sig),
                    float(elapsed) if elapsed.isdigit() else None, nodes or None)


def cancel(job_ids: list[str]) -> None:
    if job_ids:
        subprocess.run(["scancel", *job_ids], capture_output=True, timeout=60, check=False)


def parse_elapsed(text: str) -> float | None:
    """Slurm's [D-]HH:MM:SS / MM:SS -> seconds."""
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", text.strip())
    if not m:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None
