"""IBM Spectrum LSF: the job script with #BSUB lines, `bsub < script`, `bjobs -json`, `bkill`.

A run becomes a job with `-n RANKS -R "span[ptile=PER_NODE]"` (ranks spread over whole nodes as
the run asks), `-W` from its timeout, `-x` for whole nodes, `-cwd`, `-o/-e`; the repeats of one
point become an array job `-J "name[1-5]"` whose element i (LSB_JOBINDEX, 1-based) runs repeat
i-1 in its own directory. The scheduler is asked with

    bjobs -a -o "jobid stat exit_code run_time exec_host" -json JOBIDS

whose documented answer is {"COMMAND":"bjobs","JOBS":N,"RECORDS":[{"JOBID":"123","STAT":"RUN",...}]}
(array elements appear as 123[4]; a job LSF does not know has an "ERROR" field instead). Inside
the job, mpirun is given a hostfile written from LSB_DJOB_HOSTFILE (Open MPI without LSF support
does not read the allocation itself). The functions are the scheduler interface of launch/batch.py.
"""

from __future__ import annotations

import re
import shlex
import shutil
import time

from clusterbench.errors import EnvironmentProblem, MissingToolError, UserInputError
from clusterbench.launch.batch import (
    MAX_ARRAY,
    JobRequest,
    JobState,
    Submitted,
    cancel_jobs,
    directives,
    dispatch,
    fold_hosts,
    load_json,
    quoted_header,
    run_tool,
    task_lines,
    text_field,
    to_int,
    write_scripts,
)
from clusterbench.launch.site import LsfOptions

NAME, LABEL, SCRIPT = "lsf", "LSF", "job.bsub"
INDEX_VAR, NODEFILE_VAR = "LSB_JOBINDEX", "LSB_DJOB_HOSTFILE"
ACTIVE = {"PEND", "PROV", "PSUSP", "RUN", "USUSP", "SSUSP", "WAIT"}
FIELDS = "jobid stat exit_code run_time exec_host"


def require() -> None:
    missing = [t for t in ("bsub", "bjobs", "bkill") if not shutil.which(t)]
    if missing:
        raise MissingToolError(f"LSF commands not found: {', '.join(missing)}",
                               hint="source LSF's profile.lsf (or load its module) on a host of the LSF cluster")


def lsf_time(seconds: float) -> str:
    """bsub -W hours:minutes, rounded up to the minute plus one for start-up."""
    minutes = int(-(-seconds // 60)) + 1
    return f"{minutes // 60}:{minutes % 60:02d}"


def begin_time(seconds: float, now: float | None = None) -> str:
    """bsub -b [[year:][month:]day:]hour:minute, `seconds` from now rounded up to the minute."""
    at = (time.time() if now is None else now) + seconds + 59
    return time.strftime("%Y:%m:%d:%H:%M", time.localtime(at))


def render_script(req: JobRequest, opts: LsfOptions) -> str:
    tasks = req.tasks
    array = len(tasks) > 1
    name = f"{req.name}[1-{len(tasks)}]" if array else req.name
    log = str(req.workdir / ("lsf-%J_%I" if array else "lsf-%J"))
    lines = ["#!/bin/bash",
             f"#BSUB -J {quoted_header(name, 'job name')}",
             f"#BSUB -n {req.nodes * req.tasks_per_node}",
             f"#BSUB -R {shlex.quote(f'span[ptile={req.tasks_per_node}]')}",
             f"#BSUB -cwd {quoted_header(str(req.workdir), 'run directory')}",
             f"#BSUB -o {quoted_header(log + '.out', 'output file')}",
             f"#BSUB -e {quoted_header(log + '.err', 'error file')}"]
    if opts.exclusive:
        lines.append("#BSUB -x")
    limit = opts.time or (lsf_time(req.timeout_s) if req.timeout_s else None)
    begin = begin_time(req.begin_s) if req.begin_s is not None and req.begin_s >= 1 else None
    lines += directives("#BSUB", [("-W ", limit, "time limit"), ("-b ", begin, "begin time"),
                                  ("-q ", opts.queue, "queue"), ("-P ", opts.project, "project")],
                        opts.bsub_args, "bsub argument")
    lines.append("# written by clusterbench: each run in its own directory, its outputs there")
    lines.append('echo "clusterbench: LSF job $LSB_JOBID[${LSB_JOBINDEX:-0}] on $LSB_HOSTS" >&2')
    lines += dispatch(tasks, INDEX_VAR, 1) if array else task_lines(tasks[0], redirect=True)
    return "\n".join(lines) + "\n"


def submit(req: JobRequest, opts: LsfOptions, env: dict[str, str]) -> Submitted:
    require()
    text = render_script(req, opts)
    script = write_scripts(req, text, SCRIPT)
    code, out, err = run_tool(["bsub"], env=env, stdin=text)
    m = re.search(r"Job <(\d{1,18})> is submitted", out)
    if code != 0 or not m:
        raise UserInputError(f"bsub refused the job of {req.name}: {(err or out).strip()[:500]}",
                             hint=f"the script is {script}; check queue, project, time limit and slot count")
    job_id = m.group(1)
    n = len(req.tasks)
    return Submitted(job_id, req, [f"{job_id}[{i}]" for i in range(1, n + 1)] if n > 1 else [job_id])


def parent(task_id: str) -> str:
    return task_id.split("[", 1)[0]


def parse_run_time(text: str | None) -> float | None:
    """bjobs' run_time: '12 second(s)'."""
    m = re.match(r"\s*(\d{1,12})\s*second", text or "")
    return float(m.group(1)) if m else None


def parse_exec_host(text: str | None) -> str | None:
    """'node1:node1:node2' or '2*node1:2*node2' -> node[1-2]."""
    if not text:
        return None
    names = [part.split("*", 1)[-1] for part in re.split(r"[:\s]+", text) if part]
    return fold_hosts([n for n in names if re.fullmatch(r"[A-Za-z0-9_.\-]{1,255}", n)][:MAX_ARRAY])


def parse_bjobs(text: str) -> dict[str, dict]:
    """`bjobs -o "jobid stat exit_code run_time exec_host" -json` -> task id -> its fields
    (stat, exit_code, run_time_s, nodes); array elements as 123[4]. Records with ERROR are left out."""
    data = load_json(text, "bjobs -json")
    records = data.get("RECORDS")
    if not isinstance(records, list):
        raise EnvironmentProblem("bjobs -json answered without a RECORDS list")
    out: dict[str, dict] = {}
    for rec in records[:MAX_ARRAY * 10]:
        if not isinstance(rec, dict) or rec.get("ERROR"):
            continue
        job = text_field(rec.get("JOBID"))
        if not job or not re.fullmatch(r"\d{1,18}(?:\[\d{1,9}\])?", job):
            continue
        index = to_int(rec.get("JOBINDEX"))
        if "[" not in job and index:
            job = f"{job}[{index}]"
        stat = text_field(rec.get("STAT")) or "UNKWN"
        out[job] = {"stat": stat[:20], "exit_code": to_int(rec.get("EXIT_CODE")),
                    "run_time_s": parse_run_time(text_field(rec.get("RUN_TIME"))),
                    "nodes": parse_exec_host(text_field(rec.get("EXEC_HOST")))}
    return out


def _bjobs(task_ids: list[str]) -> dict[str, dict] | None:
    ids = sorted({parent(t) for t in task_ids})
    code, out, err = run_tool(["bjobs", "-a", "-o", FIELDS, "-json", *ids])
    if not out.strip():
        return {} if code == 0 or "not found" in err else None
    return parse_bjobs(out)


def active_states(task_ids: list[str]) -> dict[str, str] | None:
    if not task_ids:
        return {}
    found = _bjobs(task_ids)
    if found is None:
        return None
    return {job: rec["stat"] for job, rec in found.items() if rec["stat"] in ACTIVE}


def final_state(task_id: str) -> JobState:
    found = _bjobs([task_id]) or {}
    rec = found.get(task_id)
    if rec is None:
        return JobState(task_id, "UNKNOWN", reason="bjobs does not know the job any more", source="bjobs")
    stat = rec["stat"]
    code = rec["exit_code"]
    state = {"DONE": "COMPLETED", "EXIT": "FAILED"}.get(stat, stat)
    if stat == "DONE" and code is None:
        code = 0
    signal = code - 128 if state == "FAILED" and code is not None and 128 < code < 160 else None
    return JobState(task_id, state, code, signal, rec["run_time_s"], rec["nodes"], raw_state=stat, source="bjobs")


def cancel(ids: list[str]) -> None:
    cancel_jobs("bkill", ids)
