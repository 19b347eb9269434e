"""What every batch scheduler shares: the job request, the job script's body, array dispatch,
the final state, bounded reading of the scheduler's answers, and the flow of a job.

A batch job runs one run, or an array of runs (the repeats of one campaign point): element i
of the array runs task i, each in its own run directory with its own outputs. The schedulers
(launch/slurm.py, lsf.py, pbs.py) are each one `BatchScheduler` subclass, which gives only what
that scheduler says differently: its commands, directive lines, time formats, job ids and how
its answers read. Each module exposes its instance as the same small set of functions, which the
job engine (execution/batch_jobs.py) calls by name:

    NAME, LABEL, SCRIPT                     'slurm', 'Slurm', 'job.sbatch'
    require()                               MissingToolError when the commands are absent
    render_script(request, opts) -> str     the job script, header lines and body
    submit(request, opts, env) -> Submitted the job id and the id of each task (array element)
    active_states(ids) -> dict | None       task id -> state for those still queued or running
                                            (None: the scheduler could not be asked this time)
    final_state(task_id) -> JobState        a task that left the queue: state, exit code, time, nodes
    cancel(ids)                             kill queued or running tasks (or whole jobs)
    parent(task_id) -> str                  the job a task belongs to (for cancelling a whole array)

Everything written into a script is quoted with shlex.quote; header values (paths, names, user
arguments) may not hold a line break, which would start a line of its own.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from clusterbench.errors import EnvironmentProblem, MissingToolError, UserInputError

MAX_ANSWER_BYTES = 8 * 2**20  # of one answer of squeue, bjobs, qstat, sacct
MAX_FIELD_CHARS = 4096  # of one stored text field of an answer
MAX_ARRAY = 10_000  # elements of one array expanded from a range such as 123_[0-4]
MAX_HOSTS = 100_000  # hosts of one allocation


@dataclass
class Task:
    """One run inside a batch job: its directory, command, variables and the lines around it."""

    workdir: Path
    command: list[str]
    env: dict[str, str]
    before: list[str] = field(default_factory=list)  # shell lines, quoted by their maker
    after: list[str] = field(default_factory=list)  # run whatever the command's exit; the task exits with it


@dataclass
class JobRequest:
    """A batch job: one run (workdir, command, env, before, after), or with `array` an array job
    whose element i runs array[i]. Every element has the same shape (nodes, tasks, time)."""

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
    array: list[Task] = field(default_factory=list)  # two or more: an array job, one element per task
    begin_s: float | None = None  # start no earlier than this many seconds after submission (--spread)

    @property
    def tasks(self) -> list[Task]:
        return self.array or [Task(self.workdir, self.command, self.env, self.before, self.after)]


@dataclass
class JobState:
    job_id: str
    state: str  # normalised: COMPLETED, FAILED, TIMEOUT, CANCELLED, ... (Slurm's words), or what the scheduler said
    exit_code: int | None = None
    signal: int | None = None
    elapsed_s: float | None = None
    nodes: str | None = None
    reason: str | None = None
    raw_state: str | None = None  # the scheduler's own word (LSF DONE/EXIT, PBS F with Exit_status)
    source: str | None = None  # which command answered: scontrol, sacct, bjobs, qstat
    accounting: dict | None = None  # sacct's figures of a Slurm job

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_COMMON


ACTIVE_COMMON = {"PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "COMPLETING", "REQUEUED"}


@dataclass
class Submitted:
    job_id: str  # the scheduler's id of the job (an array's parent id)
    request: JobRequest
    task_ids: list[str] = field(default_factory=list)  # one per task, in order
    running_since: float | None = None  # monotonic time it was first seen RUNNING


def header_value(text: str, what: str) -> str:
    """A value for a scheduler directive line: refused if it could break out of its line."""
    if "\n" in text or "\r" in text or "\0" in text:
        raise UserInputError(f"{what} {text[:60]!r} holds a line break or NUL byte",
                             hint="job names, paths and scheduler arguments must fit on one line")
    return text


def quoted_header(text: str, what: str) -> str:
    """`header_value`, shell-quoted: LSF and PBS read their directive values as shell words."""
    return shlex.quote(header_value(text, what))


def write_scripts(req: JobRequest, text: str, name: str) -> Path:
    """The job script in the request's directory and a copy in every task's (each run keeps the script
    that ran it); returns the one submitted."""
    for task in req.tasks:
        (task.workdir / name).write_text(text)
    script = req.workdir / name
    if not script.exists():
        script.write_text(text)
    return script


def exports(env: dict[str, str]) -> list[str]:
    out = []
    for key, value in sorted(env.items()):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise UserInputError(f"environment name {key[:60]!r} is not a variable name")
        out.append(f"export {key}={shlex.quote(str(value))}")
    return out


def task_lines(task: Task, redirect: bool) -> list[str]:
    """The shell lines of one task: into its directory (its outputs there when `redirect`), its
    variables, the lines before, the command, the lines after; it exits with the command's status."""
    d = str(task.workdir)
    lines = [f"cd {shlex.quote(d)} || exit 1"]
    if redirect:
        lines.append(f"exec >{shlex.quote(d + '/stdout.txt')} 2>{shlex.quote(d + '/stderr.txt')}")
    lines += exports(task.env)
    lines += task.before
    lines.append(shlex.join(task.command))
    lines += ["cb_status=$?", *task.after, "exit $cb_status"]
    return lines


def dispatch(tasks: list[Task], index_var: str, first: int, redirect: bool = True) -> list[str]:
    """`case $INDEX in 0) ...;; 1) ...;; esac`: each array element runs its own task."""
    lines = [f'case "${{{index_var}}}" in']
    for i, task in enumerate(tasks):
        lines.append(f"{first + i})")
        lines += ["  " + line for line in task_lines(task, redirect)]
        lines.append("  ;;")
    lines += [f'*) echo "clusterbench: no task for index ${{{index_var}}}" >&2; exit 1 ;;', "esac"]
    return lines


def hostfile_lines(nodefile_var: str, path: str, implementation: str) -> list[str]:
    """Shell lines writing the MPI hostfile of a run from the scheduler's node file (one line per
    slot, as LSB_DJOB_HOSTFILE and PBS_NODEFILE are): each host once, in order, with its slots."""
    fmt = "%s slots=%d\\n" if implementation == "Open MPI" else "%s:%d\\n"
    prog = f'!($1 in c) {{ o[n++] = $1 }} {{ c[$1]++ }} END {{ for (i = 0; i < n; i++) printf "{fmt}", o[i], c[o[i]] }}'
    return [f'awk {shlex.quote(prog)} "${{{nodefile_var}}}" > {shlex.quote(path)} || exit 1']


def run_tool(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 60,
             stdin: str | None = None) -> tuple[int, str, str]:
    """Run a scheduler command; its answer is read up to MAX_ANSWER_BYTES (a larger one is refused)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.run(cmd, stdout=out, stderr=err, env=env, timeout=timeout, check=False,
                                  input=stdin.encode() if stdin is not None else None)
        except FileNotFoundError:
            raise EnvironmentProblem(f"{cmd[0]} not found") from None
        except subprocess.TimeoutExpired:
            raise EnvironmentProblem(f"{cmd[0]} did not answer within {timeout:.0f} s") from None
        texts = []
        for f in (out, err):
            size = f.seek(0, 2)
            if size > MAX_ANSWER_BYTES:
                raise EnvironmentProblem(f"{cmd[0]} answered {size} bytes, more than {MAX_ANSWER_BYTES}: "
                                         "refusing to read it")
            f.seek(0)
            texts.append(f.read().decode("utf-8", "replace"))
        return proc.returncode, texts[0], texts[1]


def load_json(text: str, what: str) -> dict:
    """The JSON object a scheduler command printed, or a clear EnvironmentProblem."""
    if len(text) > MAX_ANSWER_BYTES:
        raise EnvironmentProblem(f"{what} answered {len(text)} characters, more than {MAX_ANSWER_BYTES}")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        shown = text.strip()[:80]
        raise EnvironmentProblem(f"{what} did not answer JSON ({str(exc)[:100]}): {shown!r}") from None
    if not isinstance(data, dict):
        raise EnvironmentProblem(f"{what} answered JSON that is not an object: {type(data).__name__}")
    return data


def text_field(value: object) -> str | None:
    """A scalar field of an answer as bounded text; None for absent, empty, '-' and non-scalars."""
    if value is None or isinstance(value, dict | list):
        return None
    text = str(value).strip()
    if not text or text in ("-", "None", "Unknown", "UNKNOWN", "N/A"):
        return None
    return text[:MAX_FIELD_CHARS]


def to_int(value: object) -> int | None:
    text = text_field(value)
    if text is None or not re.fullmatch(r"-?\d{1,18}", text):
        return None
    return int(text)


def clock_seconds(text: str | None) -> float | None:
    """[D-]HH:MM:SS, HH:MM:SS, MM:SS (optionally .fraction) -> seconds; else None."""
    if not text:
        return None
    m = re.fullmatch(r"(?:(\d{1,6})-)?(?:(\d{1,8}):)?(\d{1,8}):(\d{1,2})(?:\.(\d{1,9}))?", text.strip())
    if not m:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups()[:4])
    frac = float("0." + m.group(5)) if m.group(5) else 0.0
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds) + frac


def fold_hosts(names: list[str]) -> str | None:
    """host names -> the folded node set (node[1-2]); None for none."""
    names = list(dict.fromkeys(n for n in names if n))[:MAX_HOSTS]
    if not names:
        return None
    from ClusterShell.NodeSet import NodeSet, NodeSetParseError

    try:
        return str(NodeSet.fromlist(names))[:MAX_FIELD_CHARS]
    except NodeSetParseError:
        return ",".join(names)[:MAX_FIELD_CHARS]


def host_set(names: Iterable[str]) -> str | None:
    """Host names read from an answer (exec_host) -> the folded node set; what is no host name is left out."""
    return fold_hosts([n for n in names if re.fullmatch(r"[A-Za-z0-9_.\-]{1,255}", n)][:MAX_ARRAY])


def expand_indices(text: str) -> list[int]:
    """'0-4,7,9-11:2%3' (an array's indices, a throttle after %, a step after :) -> the indices, bounded."""
    text = text.split("%", 1)[0]
    out: list[int] = []
    for part in filter(None, text.split(",")):
        m = re.fullmatch(r"(\d{1,9})(?:-(\d{1,9})(?::(\d{1,9}))?)?", part.strip())
        if not m:
            raise ValueError(f"not an array index range: {part[:40]!r}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        step = int(m.group(3)) if m.group(3) else 1
        if hi < lo or step < 1 or (hi - lo) // step + 1 + len(out) > MAX_ARRAY:
            raise ValueError(f"array range {part[:40]!r} is empty or larger than {MAX_ARRAY}")
        out += range(lo, hi + 1, step)
    return out


def padded_minutes(seconds: float) -> int:
    """A run's timeout as a time limit: whole minutes, rounded up, plus one for start-up."""
    return int(-(-seconds // 60)) + 1


# One directive of a job script: (flag, value, what the value is). No value (None, False, ""): no
# line; True: the flag alone; with `what`, the value is checked to fit on its line (and quoted where
# the scheduler reads shell words); without, it is written as it is (numbers, values made here).
Directive = tuple[str, object, str | None]


class BatchScheduler:
    """One batch scheduler: the flow every job takes, over what this scheduler says differently.

    A subclass declares its commands (`tools`: the one that submits first, the one that cancels
    last), the prefix of its directive lines and its array index, and gives `directives` (its
    header, in its order), `time_limit`, and how its ids read (`job_id`, `element`, `parent`).
    For `active_states` and `final_state` it gives either `query` (through `ask`: task id -> a
    record with its state) and `ended` (a record -> JobState), as LSF and PBS do, or its own
    versions of both (Slurm). The module of each exposes one instance's methods as the
    scheduler interface above."""

    name: ClassVar[str]  # in campaign files: slurm, lsf, pbs
    label: ClassVar[str]  # in messages: Slurm, LSF, PBS
    script: ClassVar[str]  # the job script's file name
    tools: ClassVar[tuple[str, ...]]
    tools_hint: ClassVar[str]  # where the commands come from
    submit_args: ClassVar[tuple[str, ...]] = ()  # given to the submit command before the script
    script_on_stdin: ClassVar[bool] = False  # the script goes to the submit command's stdin (bsub < job.bsub)
    submit_checks: ClassVar[str]  # what to check when it refuses a job
    prefix: ClassVar[str]  # of its directive lines: #SBATCH, #BSUB, #PBS
    quote_values: ClassVar[bool] = True  # it reads directive values as shell words
    time_option: ClassVar[str] = "time"  # the field of its options that sets the time limit
    args_option: ClassVar[str]  # the field of its options with the user's own directives
    begin_format: ClassVar[str] = ""  # strftime of its begin time; without %S, rounded up to the minute
    index_var: ClassVar[str]  # the array index inside a job
    first_index: ClassVar[int] = 0
    banner: ClassVar[str] = ""  # the script's line saying which job runs where
    # Of a query that answers records (bjobs, qstat): the field with the state, the states still
    # queued or running, what its error says of a job it does not know, and how it is named.
    state_field: ClassVar[str] = "state"
    active: ClassVar[frozenset[str]] = frozenset()
    unknown_job: ClassVar[str] = ""
    query_name: ClassVar[str] = ""

    def require(self) -> None:
        missing = [t for t in self.tools if not shutil.which(t)]
        if missing:
            raise MissingToolError(f"{self.label} commands not found: {', '.join(missing)}", hint=self.tools_hint)

    # ---------------------------------------------------------------- the script

    def time_limit(self, seconds: float) -> str:
        """Its time limit for a run with this timeout (`padded_minutes`)."""
        raise NotImplementedError

    def begin_time(self, seconds: float, now: float | None = None) -> str:
        """Its begin time `seconds` from now."""
        at = (time.time() if now is None else now) + seconds + (0 if "%S" in self.begin_format else 59)
        return time.strftime(self.begin_format, time.localtime(at))

    def directives(self, req: JobRequest, opts, array: bool, limit: str | None, begin: str | None) -> list[Directive]:
        """Its directives for this job, in its order (the user's own follow them)."""
        raise NotImplementedError

    def render_script(self, req: JobRequest, opts) -> str:
        """The job script: the directives, the user's own (from the options), then the body."""
        array = len(req.tasks) > 1
        limit = getattr(opts, self.time_option) or (self.time_limit(req.timeout_s) if req.timeout_s else None)
        begin = self.begin_time(req.begin_s) if req.begin_s is not None and req.begin_s >= 1 else None
        check = quoted_header if self.quote_values else header_value
        lines = ["#!/bin/bash"]
        for flag, value, what in self.directives(req, opts, array, limit, begin):
            if value is True:
                lines.append(f"{self.prefix} {flag}")
            elif not (value is None or value is False or value == ""):
                lines.append(f"{self.prefix} {flag}{check(str(value), what) if what else value}")
        extra = f"{self.tools[0]} argument"
        lines += [f"{self.prefix} {header_value(arg, extra)}" for arg in getattr(opts, self.args_option)]
        return "\n".join(lines + self.body(req, array)) + "\n"

    def body(self, req: JobRequest, array: bool) -> list[str]:
        """The script after its directives: each run in its own directory, its outputs there."""
        tasks = req.tasks
        run = dispatch(tasks, self.index_var, self.first_index) if array else task_lines(tasks[0], redirect=True)
        return ["# written by clusterbench: each run in its own directory, its outputs there", self.banner, *run]

    # ---------------------------------------------------------------- submitting, cancelling

    def job_id(self, answer: str) -> str | None:
        """The job id in what the submit command printed; None if there is none."""
        raise NotImplementedError

    def element(self, job_id: str, index: int) -> str:
        """The task id of an array's element."""
        raise NotImplementedError

    def parent(self, task_id: str) -> str:
        """The job a task belongs to (for cancelling a whole array)."""
        raise NotImplementedError

    def submit(self, req: JobRequest, opts, env: dict[str, str]) -> Submitted:
        self.require()
        text = self.render_script(req, opts)
        script = write_scripts(req, text, self.script)
        tool = self.tools[0]
        if self.script_on_stdin:
            code, out, err = run_tool([tool, *self.submit_args], env=env, stdin=text)
        else:
            code, out, err = run_tool([tool, *self.submit_args, str(script)], env=env)
        job_id = self.job_id(out) if code == 0 else None
        if job_id is None:
            raise UserInputError(f"{tool} refused the job of {req.name}: {(err or out).strip()[:500]}",
                                 hint=f"the script is {script}; check {self.submit_checks}")
        n = len(req.tasks)
        return Submitted(job_id, req, [self.element(job_id, self.first_index + i) for i in range(n)] if n > 1
                         else [job_id])

    def cancel(self, ids: list[str]) -> None:
        """Cancel these tasks or jobs; a scheduler that cannot be asked is no reason to stop (the jobs
        are named in the run directories, and the next run settles them)."""
        if ids:
            try:
                run_tool([self.tools[-1], *ids])
            except UserInputError:
                pass

    # ---------------------------------------------------------------- asking about tasks

    def query(self, task_ids: list[str]) -> dict[str, dict] | None:
        """What the scheduler says of these tasks (`ask`)."""
        raise NotImplementedError

    def ask(self, command: list[str], parse: Callable[[str], dict[str, dict]]) -> dict[str, dict] | None:
        """Its query's records, by task id: {} when it knows none of them, None when it could not be asked."""
        code, out, err = run_tool(command)
        if not out.strip():
            return {} if code == 0 or self.unknown_job in err else None
        return parse(out)

    @staticmethod
    def record(found: dict[str, dict], task_id: str) -> dict | None:
        """The record of a task, also when its id differs after a '.' (PBS: 123[4] and 123[4].server)."""
        if task_id in found:
            return found[task_id]
        short = task_id.split(".", 1)[0]
        return next((rec for job, rec in found.items() if job.split(".", 1)[0] == short), None)

    def ids_named(self, name: str) -> list[str] | None:
        """The ids of the queued or running jobs (array elements) with this job name; None when the scheduler
        cannot be asked by name. For a runner killed between the scheduler taking a job and its id coming back."""
        return None

    def active_states(self, task_ids: list[str]) -> dict[str, str] | None:
        if not task_ids:
            return {}
        found = self.query(task_ids)
        if found is None:
            return None
        states = {task: (self.record(found, task) or {}).get(self.state_field) for task in task_ids}
        return {task: state for task, state in states.items() if state in self.active}

    def ended(self, task_id: str, rec: dict) -> JobState:
        """The final state a task's record says."""
        raise NotImplementedError

    def final_state(self, task_id: str) -> JobState:
        rec = self.record(self.query([task_id]) or {}, task_id)
        if rec is None:
            return JobState(task_id, "UNKNOWN", reason=f"{self.query_name} does not know the job any more",
                            source=self.query_name.split()[0])
        return self.ended(task_id, rec)
