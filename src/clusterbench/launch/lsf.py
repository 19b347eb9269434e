"""IBM Spectrum LSF: the job script with #BSUB lines, `bsub < script`, `bjobs -json`, `bkill`.

A run becomes a job with `-n RANKS -R "span[ptile=PER_NODE]"` (ranks spread over whole nodes as
the run asks), `-W` from its timeout, `-x` for whole nodes, `-cwd`, `-o/-e`; the repeats of one
point become an array job `-J "name[1-5]"` whose element i (LSB_JOBINDEX, 1-based) runs repeat
i-1 in its own directory. The scheduler is asked with

    bjobs -a -o "jobid stat exit_code run_time exec_host" -json JOBIDS

whose documented answer is {"COMMAND":"bjobs","JOBS":N,"RECORDS":[{"JOBID":"123","STAT":"RUN",...}]}
(array elements appear as 123[4]; a job LSF does not know has an "ERROR" field instead). Inside
the job, mpirun is given a hostfile written from LSB_DJOB_HOSTFILE (Open MPI without LSF support
does not read the allocation itself). `Lsf` gives what LSF says differently; the flow of a job is
launch/batch.py's `BatchScheduler`, and this module's functions are the scheduler interface there.
"""

from __future__ import annotations

import re
import shlex

from clusterbench.errors import EnvironmentProblem
from clusterbench.launch.batch import (
    MAX_ARRAY,
    BatchScheduler,
    Directive,
    JobRequest,
    JobState,
    host_set,
    load_json,
    padded_minutes,
    text_field,
    to_int,
)
from clusterbench.launch.site import LsfOptions

FIELDS = "jobid stat exit_code run_time exec_host"


class Lsf(BatchScheduler):
    name, label, script, prefix = "lsf", "LSF", "job.bsub", "#BSUB"
    tools = ("bsub", "bjobs", "bkill")
    tools_hint = "source LSF's profile.lsf (or load its module) on a host of the LSF cluster"
    script_on_stdin = True
    submit_checks = "queue, project, time limit and slot count"
    args_option = "bsub_args"
    begin_format = "%Y:%m:%d:%H:%M"  # bsub -b [[year:][month:]day:]hour:minute
    index_var, first_index = "LSB_JOBINDEX", 1
    banner = 'echo "clusterbench: LSF job $LSB_JOBID[${LSB_JOBINDEX:-0}] on $LSB_HOSTS" >&2'
    state_field, unknown_job, query_name = "stat", "not found", "bjobs"
    active = frozenset({"PEND", "PROV", "PSUSP", "RUN", "USUSP", "SSUSP", "WAIT"})

    def time_limit(self, seconds: float) -> str:
        """bsub -W hours:minutes."""
        minutes = padded_minutes(seconds)
        return f"{minutes // 60}:{minutes % 60:02d}"

    def directives(self, req: JobRequest, opts: LsfOptions, array: bool, limit: str | None,
                   begin: str | None) -> list[Directive]:
        log = str(req.workdir / ("lsf-%J_%I" if array else "lsf-%J"))
        return [("-J ", f"{req.name}[1-{len(req.tasks)}]" if array else req.name, "job name"),
                ("-n ", req.nodes * req.tasks_per_node, None),
                ("-R ", shlex.quote(f"span[ptile={req.tasks_per_node}]"), None),
                ("-cwd ", str(req.workdir), "run directory"),
                ("-o ", log + ".out", "output file"), ("-e ", log + ".err", "error file"),
                ("-x", bool(opts.exclusive), None), ("-W ", limit, "time limit"), ("-b ", begin, "begin time"),
                ("-q ", opts.queue, "queue"), ("-P ", opts.project, "project")]

    def job_id(self, answer: str) -> str | None:
        m = re.search(r"Job <(\d{1,18})> is submitted", answer)
        return m.group(1) if m else None

    def element(self, job_id: str, index: int) -> str:
        return f"{job_id}[{index}]"

    def parent(self, task_id: str) -> str:
        return task_id.split("[", 1)[0]

    def query(self, task_ids: list[str]) -> dict[str, dict] | None:
        return _bjobs(task_ids)

    def ended(self, task_id: str, rec: dict) -> JobState:
        stat = rec["stat"]
        code = rec["exit_code"]
        state = {"DONE": "COMPLETED", "EXIT": "FAILED"}.get(stat, stat)
        if stat == "DONE" and code is None:
            code = 0
        signal = code - 128 if state == "FAILED" and code is not None and 128 < code < 160 else None
        return JobState(task_id, state, code, signal, rec["run_time_s"], rec["nodes"], raw_state=stat,
                        source="bjobs")


def parse_run_time(text: str | None) -> float | None:
    """bjobs' run_time: '12 second(s)'."""
    m = re.match(r"\s*(\d{1,12})\s*second", text or "")
    return float(m.group(1)) if m else None


def parse_exec_host(text: str | None) -> str | None:
    """'node1:node1:node2' or '2*node1:2*node2' -> node[1-2]."""
    return host_set(part.split("*", 1)[-1] for part in re.split(r"[:\s]+", text or "") if part)


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
    """bjobs about the jobs of these tasks (a module function, which a test may answer for)."""
    return SCHEDULER.ask(["bjobs", "-a", "-o", FIELDS, "-json", *sorted({parent(t) for t in task_ids})], parse_bjobs)


SCHEDULER = Lsf()
NAME, LABEL, SCRIPT = SCHEDULER.name, SCHEDULER.label, SCHEDULER.script
# The scheduler interface (launch/batch.py) as this module's functions, which the job engine calls by name.
require, render_script, submit, parent = SCHEDULER.require, SCHEDULER.render_script, SCHEDULER.submit, SCHEDULER.parent
active_states, final_state, cancel = SCHEDULER.active_states, SCHEDULER.final_state, SCHEDULER.cancel
begin_time = SCHEDULER.begin_time
