"""PBS Professional: the job script with #PBS lines, `qsub`, `qstat -f -F json`, `qdel`.

A run becomes a job with `-l select=NODES:ncpus=C:mpiprocs=R -l place=scatter` (R ranks on each
of NODES hosts, C = R x threads), `-l walltime` from its timeout, `-o/-e`; the repeats of one point
become an array job `-J 0-4` (PBS Pro) whose subjob i (PBS_ARRAY_INDEX) runs repeat i in its own
directory. qsub prints `123.server`, or `123[].server` for an array (subjobs are `123[4].server`).
The scheduler is asked with `qstat -f -F json -x -t IDS`, whose documented answer is
{"timestamp":..., "pbs_version":"...", "pbs_server":"...", "Jobs":{"123.server":{"job_state":"R",
"Exit_status":0, "exec_host":"node1/0*2+node2/0*2", "resources_used":{"walltime":"00:00:12"}}}}.
A PBS job starts in the home directory: every task changes into its own run directory first, and
mpirun gets a hostfile written from PBS_NODEFILE. The functions are the scheduler interface of
launch/batch.py.
"""

from __future__ import annotations

import re
import shutil
import time

from clusterbench.errors import EnvironmentProblem, MissingToolError, UserInputError
from clusterbench.launch.batch import (
    MAX_ARRAY,
    JobRequest,
    JobState,
    Submitted,
    cancel_jobs,
    clock_seconds,
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
from clusterbench.launch.site import PbsOptions

NAME, LABEL, SCRIPT = "pbs", "PBS", "job.pbs"
INDEX_VAR, NODEFILE_VAR = "PBS_ARRAY_INDEX", "PBS_NODEFILE"
ACTIVE = {"Q", "R", "E", "H", "W", "T", "S", "U", "B", "M"}
FINISHED = {"F", "X"}
WALLTIME_EXCEEDED = -29  # PBS Pro's JOB_EXEC_KILL_WALLTIME


def require() -> None:
    missing = [t for t in ("qsub", "qstat", "qdel") if not shutil.which(t)]
    if missing:
        raise MissingToolError(f"PBS commands not found: {', '.join(missing)}",
                               hint="load the PBS Pro client module on a host of the PBS cluster")


def walltime(seconds: float) -> str:
    """-l walltime=HH:MM:SS, rounded up to the minute plus one for start-up."""
    minutes = int(-(-seconds // 60)) + 1
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00"


def begin_time(seconds: float, now: float | None = None) -> str:
    """qsub -a [[[[CC]YY]MM]DD]hhmm[.SS], `seconds` from now."""
    at = (time.time() if now is None else now) + seconds
    return time.strftime("%Y%m%d%H%M.%S", time.localtime(at))


def render_script(req: JobRequest, opts: PbsOptions) -> str:
    tasks = req.tasks
    array = len(tasks) > 1
    per_node = req.tasks_per_node
    log = str(req.workdir / ("pbs-^array_index^" if array else "pbs"))
    lines = ["#!/bin/bash",
             f"#PBS -N {quoted_header(req.name[:236], 'job name')}",
             f"#PBS -l select={req.nodes}:ncpus={per_node * req.cpus_per_task}:mpiprocs={per_node}",
             "#PBS -l place=scatter",
             f"#PBS -o {quoted_header(log + '.out', 'output file')}",
             f"#PBS -e {quoted_header(log + '.err', 'error file')}"]
    if array:
        lines.append(f"#PBS -J 0-{len(tasks) - 1}")
    limit = opts.walltime or (walltime(req.timeout_s) if req.timeout_s else None)
    begin = begin_time(req.begin_s) if req.begin_s is not None and req.begin_s >= 1 else None
    lines += directives("#PBS", [("-l walltime=", limit, "walltime"), ("-a ", begin, "begin time"),
                                 ("-q ", opts.queue, "queue"), ("-A ", opts.account, "account")],
                        opts.qsub_args, "qsub argument")
    lines.append("# written by clusterbench: each run in its own directory, its outputs there")
    lines.append('echo "clusterbench: PBS job $PBS_JOBID on $(sort -u "$PBS_NODEFILE" | tr "\\n" " ")" >&2')
    lines += dispatch(tasks, INDEX_VAR, 0) if array else task_lines(tasks[0], redirect=True)
    return "\n".join(lines) + "\n"


def submit(req: JobRequest, opts: PbsOptions, env: dict[str, str]) -> Submitted:
    require()
    text = render_script(req, opts)
    script = write_scripts(req, text, SCRIPT)
    code, out, err = run_tool(["qsub", str(script)], env=env)
    job_id = out.strip()
    m = re.fullmatch(r"(\d{1,18})(\[\])?(\.[A-Za-z0-9_.\-]{1,255})?", job_id)
    if code != 0 or not m:
        raise UserInputError(f"qsub refused the job of {req.name}: {(err or out).strip()[:500]}",
                             hint=f"the script is {script}; check queue, account, walltime and select")
    n = len(req.tasks)
    if n > 1:
        suffix = m.group(3) or ""
        return Submitted(job_id, req, [f"{m.group(1)}[{i}]{suffix}" for i in range(n)])
    return Submitted(job_id, req, [job_id])


def parent(task_id: str) -> str:
    return re.sub(r"\[\d+\]", "[]", task_id, count=1)


def parse_exec_host(text: str | None) -> str | None:
    """'node1/0*2+node2/0*2' -> node[1-2]."""
    if not text:
        return None
    names = [part.split("/", 1)[0] for part in text.split("+")]
    return fold_hosts([n for n in names if re.fullmatch(r"[A-Za-z0-9_.\-]{1,255}", n)][:MAX_ARRAY])


def parse_qstat(text: str) -> dict[str, dict]:
    """`qstat -f -F json` -> job id -> its fields (state, exit_status, walltime_s, nodes)."""
    data = load_json(text, "qstat -f -F json")
    jobs = data.get("Jobs", {})
    if not isinstance(jobs, dict):
        raise EnvironmentProblem("qstat -F json answered a 'Jobs' that is not an object")
    out: dict[str, dict] = {}
    for job_id, rec in list(jobs.items())[:MAX_ARRAY * 10]:
        if not isinstance(rec, dict) or not re.fullmatch(r"\d{1,18}(?:\[\d{0,9}\])?(?:\.[A-Za-z0-9_.\-]{1,255})?",
                                                         str(job_id)):
            continue
        used = rec.get("resources_used") if isinstance(rec.get("resources_used"), dict) else {}
        out[str(job_id)] = {"state": (text_field(rec.get("job_state")) or "?")[:4],
                            "exit_status": to_int(rec.get("Exit_status")),
                            "walltime_s": clock_seconds(text_field(used.get("walltime"))),
                            "nodes": parse_exec_host(text_field(rec.get("exec_host")))}
    return out


def _qstat(task_ids: list[str]) -> dict[str, dict] | None:
    ids = sorted({parent(t) for t in task_ids} | set(task_ids))
    code, out, err = run_tool(["qstat", "-f", "-F", "json", "-x", "-t", *ids])
    if not out.strip():
        return {} if code == 0 or "Unknown Job Id" in err else None
    return parse_qstat(out)


def _match(found: dict[str, dict], task_id: str) -> dict | None:
    """The record of `task_id`, also when the server suffix differs (123[4] vs 123[4].server)."""
    if task_id in found:
        return found[task_id]
    short = task_id.split(".", 1)[0]
    return next((rec for job, rec in found.items() if job.split(".", 1)[0] == short), None)


def active_states(task_ids: list[str]) -> dict[str, str] | None:
    if not task_ids:
        return {}
    found = _qstat(task_ids)
    if found is None:
        return None
    out = {}
    for task in task_ids:
        rec = _match(found, task)
        if rec and rec["state"] in ACTIVE:
            out[task] = rec["state"]
    return out


def final_state(task_id: str) -> JobState:
    rec = _match(_qstat([task_id]) or {}, task_id)
    if rec is None:
        return JobState(task_id, "UNKNOWN", reason="qstat -x does not know the job any more", source="qstat")
    status = rec["exit_status"]
    if rec["state"] not in FINISHED:
        state = rec["state"]
    elif status == 0:
        state = "COMPLETED"
    elif status == WALLTIME_EXCEEDED:
        state = "TIMEOUT"
    else:
        state = "FAILED"
    signal = status - 256 if status is not None and status > 256 else None
    code = status if status is not None and 0 <= status <= 256 else None
    return JobState(task_id, state, code, signal, rec["walltime_s"], rec["nodes"],
                    raw_state=f"{rec['state']} Exit_status={status}", source="qstat")


def cancel(ids: list[str]) -> None:
    cancel_jobs("qdel", ids)
