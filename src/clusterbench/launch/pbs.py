"""PBS Professional: the job script with #PBS lines, `qsub`, `qstat -f -F json`, `qdel`.

A run becomes a job with `-l select=NODES:ncpus=C:mpiprocs=R -l place=scatter` (R ranks on each
of NODES hosts, C = R x threads), `-l walltime` from its timeout, `-o/-e`; the repeats of one point
become an array job `-J 0-4` (PBS Pro) whose subjob i (PBS_ARRAY_INDEX) runs repeat i in its own
directory. qsub prints `123.server`, or `123[].server` for an array (subjobs are `123[4].server`).
The scheduler is asked with `qstat -f -F json -x -t IDS`, whose documented answer is
{"timestamp":..., "pbs_version":"...", "pbs_server":"...", "Jobs":{"123.server":{"job_state":"R",
"Exit_status":0, "exec_host":"node1/0*2+node2/0*2", "resources_used":{"walltime":"00:00:12"}}}}.
A PBS job starts in the home directory: every task changes into its own run directory first, and
mpirun gets a hostfile written from PBS_NODEFILE. `Pbs` gives what PBS says differently; the flow
of a job is launch/batch.py's `BatchScheduler`, and this module's functions are the scheduler
interface there.
"""

from __future__ import annotations

import re

from clusterbench.errors import EnvironmentProblem
from clusterbench.launch.batch import (
    MAX_ARRAY,
    BatchScheduler,
    Directive,
    JobRequest,
    JobState,
    clock_seconds,
    host_set,
    load_json,
    padded_minutes,
    text_field,
    to_int,
)
from clusterbench.launch.site import PbsOptions

FINISHED = {"F", "X"}
WALLTIME_EXCEEDED = -29  # PBS Pro's JOB_EXEC_KILL_WALLTIME
JOB_ID = re.compile(r"(\d{1,18})(\[\])?(\.[A-Za-z0-9_.\-]{1,255})?")  # what qsub prints


class Pbs(BatchScheduler):
    name, label, script, prefix = "pbs", "PBS", "job.pbs", "#PBS"
    tools = ("qsub", "qstat", "qdel")
    tools_hint = "load the PBS Pro client module on a host of the PBS cluster"
    submit_checks = "queue, account, walltime and select"
    time_option, args_option = "walltime", "qsub_args"
    begin_format = "%Y%m%d%H%M.%S"  # qsub -a [[[[CC]YY]MM]DD]hhmm[.SS]
    index_var = "PBS_ARRAY_INDEX"
    banner = 'echo "clusterbench: PBS job $PBS_JOBID on $(sort -u "$PBS_NODEFILE" | tr "\\n" " ")" >&2'
    unknown_job, query_name = "Unknown Job Id", "qstat -x"
    active = frozenset({"Q", "R", "E", "H", "W", "T", "S", "U", "B", "M"})

    def time_limit(self, seconds: float) -> str:
        """-l walltime=HH:MM:SS."""
        minutes = padded_minutes(seconds)
        return f"{minutes // 60:02d}:{minutes % 60:02d}:00"

    def directives(self, req: JobRequest, opts: PbsOptions, array: bool, limit: str | None,
                   begin: str | None) -> list[Directive]:
        per_node = req.tasks_per_node
        log = str(req.workdir / ("pbs-^array_index^" if array else "pbs"))
        return [("-N ", req.name[:236], "job name"),
                ("-l ", f"select={req.nodes}:ncpus={per_node * req.cpus_per_task}:mpiprocs={per_node}", None),
                ("-l ", "place=scatter", None),
                ("-o ", log + ".out", "output file"), ("-e ", log + ".err", "error file"),
                ("-J ", f"0-{len(req.tasks) - 1}" if array else None, None),
                ("-l walltime=", limit, "walltime"), ("-a ", begin, "begin time"), ("-q ", opts.queue, "queue"),
                ("-A ", opts.account, "account")]

    def job_id(self, answer: str) -> str | None:
        return answer.strip() if JOB_ID.fullmatch(answer.strip()) else None

    def element(self, job_id: str, index: int) -> str:
        m = JOB_ID.fullmatch(job_id)
        return f"{m.group(1)}[{index}]{m.group(3) or ''}"

    def parent(self, task_id: str) -> str:
        return re.sub(r"\[\d+\]", "[]", task_id, count=1)

    def query(self, task_ids: list[str]) -> dict[str, dict] | None:
        return _qstat(task_ids)

    def ended(self, task_id: str, rec: dict) -> JobState:
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


def parse_exec_host(text: str | None) -> str | None:
    """'node1/0*2+node2/0*2' -> node[1-2]."""
    return host_set(part.split("/", 1)[0] for part in (text or "").split("+"))


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
    """qstat about these tasks and their arrays (a module function, which a test may answer for)."""
    ids = sorted({parent(t) for t in task_ids} | set(task_ids))
    return SCHEDULER.ask(["qstat", "-f", "-F", "json", "-x", "-t", *ids], parse_qstat)


SCHEDULER = Pbs()
NAME, LABEL, SCRIPT = SCHEDULER.name, SCHEDULER.label, SCHEDULER.script
# The scheduler interface (launch/batch.py) as this module's functions, which the job engine calls by name.
require, render_script, submit, parent = SCHEDULER.require, SCHEDULER.render_script, SCHEDULER.submit, SCHEDULER.parent
active_states, final_state, cancel = SCHEDULER.active_states, SCHEDULER.final_state, SCHEDULER.cancel
begin_time = SCHEDULER.begin_time
