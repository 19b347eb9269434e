"""What a batch job's wrapper around an output says: scheduler, job, hosts, and the network used.

An output saved by a batch system is more than the benchmark's text. An IBM Spectrum LSF job
report names the job, queue, cluster and every host with its slots, and repeats the job script
(its `#BSUB` options and the `mpirun` line). Platform MPI's `-prot` option prints which host
ran which ranks and the protocol between every pair of hosts. A Slurm or PBS job script often
echoes its environment (`SLURM_JOB_NODELIST=...`). Without reading these, a two-host run was
stored as a run on one node over an unknown network.

Everything here is independent of the benchmark: `parse_job` reads only the wrapper, from the
lines listed in docs/import.md, and returns a `JobInfo` (None when the text holds no wrapper).
The interconnect is what the run *used* when the MPI says so (the `-prot` inter-node line or
table), else what the job *asked for* (an `mpirun -TCP` flag, Open MPI's `--mca btl/pml`,
Intel MPI's `I_MPI_FABRICS`), else unknown: never a guess. One host means shared memory.

The input is a file from anyone: every line read is bounded in length, host lists in count,
and every stored text in size.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from ClusterShell.NodeSet import NodeSet, NodeSetParseError

from clusterbench.bench.canonical import canonical_interconnect

MAX_HOSTS = 100_000  # hosts one job may list; a longer list is cut and the cut recorded
MAX_LINE_CHARS = 4096  # longer lines are not read as wrapper lines (no scheduler writes them)
MAX_VALUE_CHARS = 256  # a stored text (name, queue, option) is cut to this
MAX_TABLE_HOSTS = 64  # the -prot host x host table is kept whole up to this many hosts
MAX_SCRIPT_LINES = 10_000  # job script lines read between '# LSBATCH: User input' and the dashed line
MAX_SCAN_CHARS = 16 * 1024 * 1024  # the wrapper is read from the first 16 MiB (100,000 hosts fit in 4 MiB)

_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")  # what NodeSet can fold without misreading

# IBM Spectrum LSF job report (the header LSF writes before the output, or mails)
_LSF_MARK = re.compile(r"^(?:Sender: LSF System|Job was executed on host\(s\)|# LSBATCH: User input)", re.M)
# The texts those searches need, looked for first: most outputs hold none, and a substring test is a hundred
# times cheaper than a multi-line search (an import runs it on every file).
_LSF_MARKS = ("Sender: LSF System", "Job was executed on host(s)", "# LSBATCH: User input")
_ENV_PREFIXES = ("SLURM_", "PBS_", "OMPI_MCA_", "I_MPI_", "FI_")
_ENV_START = re.compile(r"^(?:export\s+)?(?:SLURM|PBS|OMPI_MCA|I_MPI|FI)_", re.M)
_LSF_SUBJECT = re.compile(r"Subject: Job (\d{1,20}(?:\[\d{1,10}\])?): <(.{0,512}?)>"
                          r"(?: in cluster <([^<>]{1,256})>)?(?: (\w+))?")
_LSF_SUBMITTED = re.compile(r"Job <.{0,512}?> was submitted from host <[^<>]*> by user <[^<>]*>"
                            r" in cluster <([^<>]{1,256})>")
_LSF_EXECUTED = "Job was executed on host(s) "
_LSF_QUEUE = re.compile(r", in queue <([^<>]{1,256})>")
_LSF_CLUSTER = re.compile(r" in cluster <([^<>]{1,256})>")
_LSF_HOST = re.compile(r"<(?:(\d{1,9})\*)?([^<>*\s]{1,253})>")
_LSF_CONTINUATION = re.compile(r"^\s+(?:<(?:\d{1,9}\*)?[^<>*\s]{1,253}>\s*)+$")
_LSF_EXIT = re.compile(r"^Exited with exit code (\d{1,3})\.")
_LSF_SIGNAL = re.compile(r"^Exited with signal termination: (.{1,200}?)\.?\s*$")
_LSF_TERM = re.compile(r"^(TERM_\w{1,40}): (.{0,200}?)\s*$")
_LSF_STARTED = re.compile(r"^Started at (?!Results reported)(.{1,80}?)\s*$")
_LSF_REPORTED = re.compile(r"Results reported (?:at|on) (.{1,80}?)\s*$")
_LSF_USAGE = re.compile(r"^\s+(CPU time|Max Memory|Average Memory|Total Requested Memory|Delta Memory|Max Swap|"
                        r"Max Processes|Max Threads|Run time|Turnaround time)\s*:\s*(.{0,80}?)\s*$")
_DASHES = re.compile(r"^-{20,}\s*$")

# Platform MPI -prot
_PROT_HOST = re.compile(r"^Host (\d{1,9}) -- ip (\S{1,253}) -- ranks (\d{1,9})(?: - (\d{1,9}))?\s*$")
_PROT_HEADER = re.compile(r"^\s*host\s*\|((?:\s+\d{1,9})+)\s*$")
_PROT_ROW = re.compile(r"^\s*(\d{1,9})\s*:((?:\s+[A-Za-z][A-Za-z0-9]{0,15})+)\s*$")
_PROT_ALL = re.compile(r"^\s*Prot\s+-\s+All (Intra|Inter)-node communication is:\s*([A-Za-z][A-Za-z0-9]{0,15})\s*$")

# Lines a Slurm or PBS job script echoes (`env`, `echo SLURM_JOB_ID=$SLURM_JOB_ID`)
_ENV_LINE = re.compile(r"^(?:export\s+)?((?:SLURM|PBS|OMPI_MCA|I_MPI|FI)_[A-Z0-9_]{1,60})=(.{0,4000}?)\s*$")
_SLURM_TASKS = re.compile(r"(\d{1,9})(?:\(x(\d{1,9})\))?")

# mpirun lines and their transport flags
_LAUNCHER = re.compile(r"^(?:mpirun|mpiexec|mpiexec\.hydra|orterun|mpirun_rsh)(?:[.\w-]{0,40})$")
_PLATFORM_FLAGS = {f"-{name}": name.lower() for name in ("TCP", "IBV", "IBAL", "PSM", "UDAPL", "VAPI", "ITAPI",
                                                          "MX", "GM", "ELAN")}
_PLATFORM_FLAGS |= {flag.lower(): name for flag, name in _PLATFORM_FLAGS.items()}
_SHARED_MEMORY_BTLS = {"self", "vader", "sm", "shm", "smcuda"}


@dataclass
class JobInfo:
    """The batch job and MPI facts read around an output (None fields: not stated)."""

    scheduler: str | None = None  # 'lsf', 'slurm', 'pbs'; None when only the MPI's own lines were found
    job_id: str | None = None
    name: str | None = None
    queue: str | None = None
    cluster: str | None = None
    hosts: list[tuple[str, int | None]] = field(default_factory=list)  # (host, slots), in the order listed
    hosts_from: str | None = None  # which lines gave the hosts
    host_group: str | None = None  # LSF `#BSUB -m`
    interconnect: str | None = None  # canonical: tcp, infiniband, shm, ...; None: unknown
    interconnect_from: str | None = None  # why we say so ('-prot inter-node line', 'mpirun -TCP', 'one host')
    requested: str | None = None  # the transport the job asked for (flag, MCA, I_MPI_FABRICS), canonical
    intra_node: str | None = None  # as the MPI printed it (SHM)
    inter_node: str | None = None  # as the MPI printed it (TCP, IBV)
    inter_node_from: str | None = None  # the -prot line or table that said it
    mpirun: str | None = None
    protocols: list[list[str]] = field(default_factory=list)  # -prot host x host table (up to MAX_TABLE_HOSTS)
    mpi_hosts: list[dict] = field(default_factory=list)  # -prot 'Host i -- ip A -- ranks a - b'
    exit_status: int | None = None  # 0: completed; N: exited with code N
    state: str | None = None  # as the scheduler said it (Done, Exited, TERM_RUNLIMIT, signal ...)
    options: dict = field(default_factory=dict)  # #BSUB options read (slots, ptile, wall time, ...)
    started: str | None = None
    reported: str | None = None
    resource_usage: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # what could not be read as written

    @property
    def host_names(self) -> list[str]:
        return list(dict.fromkeys(h for h, _ in self.hosts))

    def node_list(self) -> str | None:
        """The hosts folded as a node set ('cn[078,080].scarf.rl.ac.uk'); None if they cannot be
        folded faithfully (a name NodeSet would read as a range or a list)."""
        names = self.host_names
        if not names or not all(_HOST_NAME.fullmatch(h) for h in names):
            return None
        try:
            return str(NodeSet.fromlist(names))
        except (NodeSetParseError, ValueError):
            return None

    def as_facts(self) -> dict:
        """What a run's facts keep of the job (`job`), JSON-able, without the empty fields; the
        interconnect and the node count become the run's parameters instead."""
        out = {"scheduler": self.scheduler, "job_id": self.job_id, "name": self.name, "queue": self.queue,
               "cluster": self.cluster, "host_group": self.host_group,
               "hosts": [[h, s] for h, s in self.hosts], "hosts_from": self.hosts_from,
               "interconnect_from": self.interconnect_from, "requested_transport": self.requested,
               "intra_node": self.intra_node, "inter_node": self.inter_node, "mpirun": self.mpirun,
               "protocols": self.protocols, "mpi_hosts": self.mpi_hosts, "exit_status": self.exit_status,
               "state": self.state, "options": self.options, "started": self.started, "reported": self.reported,
               "resource_usage": self.resource_usage, "problems": self.problems}
        return {k: v for k, v in out.items() if v not in (None, [], {})}

    def failure(self) -> str | None:
        """Why the job did not finish normally ('the LSF job exited with code 1'), else None."""
        who = f"the {self.scheduler.upper()} job" if self.scheduler else "the job"
        why = f" ({self.state})" if self.state and self.state.startswith(("TERM_", "signal")) else ""
        if self.exit_status:
            return f"{who} exited with code {self.exit_status}{why}"
        if self.state and self.exit_status is None and self.state != "Done":
            return f"{who} ended as {self.state}"
        return None


def parse_job(text: str) -> JobInfo | None:
    """The wrapper facts in `text`, or None when it holds none of the lines this module reads."""
    head = text[:MAX_SCAN_CHARS]
    job = JobInfo()
    found = False
    if any(mark in head for mark in _LSF_MARKS) and _LSF_MARK.search(head):
        _read_lsf(head, job)
        found = True
    env = _environment(head)
    if env:
        found |= _read_slurm(env, job) | _read_pbs(env, job)
    found |= _read_prot(head, job)
    if job.mpirun is None:
        job.mpirun = _traced_mpirun(head)
    found |= job.mpirun is not None
    if not found:
        return None
    _decide_interconnect(job, env)
    return job


# ---------------------------------------------------------------- LSF

def _read_lsf(text: str, job: JobInfo) -> None:
    job.scheduler = "lsf"
    lines = _lines(text.split("\nThe output (if any) follows:", 1)[0])
    script: list[str] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if script is not None:
            if _DASHES.match(line) or len(script) >= MAX_SCRIPT_LINES:
                _read_script(script, job)
                script = None
            else:
                script.append(line)
        elif line.strip() == "# LSBATCH: User input":
            script = []
        elif m := _LSF_SUBJECT.match(line):
            job.job_id, job.name = m.group(1), _cut(m.group(2))
            job.cluster = job.cluster or _cut(m.group(3))
            job.state = _cut(m.group(4)) or job.state
        elif m := _LSF_SUBMITTED.match(line):
            job.cluster = job.cluster or _cut(m.group(1))
        elif line.startswith(_LSF_EXECUTED):
            hosts, _, rest = line[len(_LSF_EXECUTED):].partition(", in queue <")
            rest = ", in queue <" + rest
            if m := _LSF_QUEUE.match(rest):
                job.queue = _cut(m.group(1))
            if m := _LSF_CLUSTER.search(rest):
                job.cluster = _cut(m.group(1))
            _add_lsf_hosts(hosts, job)
            while i + 1 < len(lines) and _LSF_CONTINUATION.match(lines[i + 1]):
                i += 1
                _add_lsf_hosts(lines[i], job)
            job.hosts_from = "LSF 'Job was executed on host(s)'"
        elif m := _LSF_STARTED.match(line):
            job.started = m.group(1)
        elif line.startswith("Successfully completed."):
            job.exit_status = 0
        elif m := _LSF_EXIT.match(line):
            job.exit_status = int(m.group(1))
        elif m := _LSF_SIGNAL.match(line):
            job.state = f"signal termination: {m.group(1)}"
        elif m := _LSF_TERM.match(line):
            job.state = f"{m.group(1)}: {m.group(2)}"
        elif m := _LSF_USAGE.match(line):
            job.resource_usage[m.group(1)] = m.group(2)
        if m := _LSF_REPORTED.search(line):
            job.reported = m.group(1)
        i += 1
    if script is not None:
        _read_script(script, job)


def _add_lsf_hosts(text: str, job: JobInfo) -> None:
    for m in _LSF_HOST.finditer(text):
        if len(job.hosts) >= MAX_HOSTS:
            if not any(p.startswith("more than") for p in job.problems):
                job.problems.append(f"more than {MAX_HOSTS:,} hosts listed: the rest are not read")
            return
        job.hosts.append((m.group(2), int(m.group(1)) if m.group(1) else 1))


def _read_script(script: list[str], job: JobInfo) -> None:
    """#BSUB options and the mpirun line of the job script LSF repeats."""
    for line in script:
        stripped = line.strip()
        if stripped.startswith("#BSUB"):
            _read_bsub(stripped[5:], job)
        elif job.mpirun is None and not stripped.startswith("#") and _launcher_line(stripped):
            job.mpirun = _cut(stripped, MAX_LINE_CHARS)


def _read_bsub(text: str, job: JobInfo) -> None:
    words = _words(text)
    k = 0
    while k < len(words):
        option = words[k]
        value = words[k + 1] if k + 1 < len(words) and not words[k + 1].startswith("-") else None
        if option == "-x":
            job.options["exclusive"] = True
        elif option in ("-n", "-R", "-m", "-J", "-W", "-q", "-P", "-G", "-a") and value is not None:
            _bsub_value(option, _cut(value), job)
            k += 1
        k += 1


def _bsub_value(option: str, value: str, job: JobInfo) -> None:
    if option == "-n":
        job.options["slots"] = int(value) if value.isdigit() and len(value) <= 9 else value
    elif option == "-R":
        job.options["resources"] = value
        if m := re.search(r"span\[\s*ptile\s*=\s*(\d{1,9})\s*\]", value):
            job.options["ptile"] = int(m.group(1))
    elif option == "-m":
        job.host_group = value.strip()
    elif option == "-J":
        job.name = job.name or value
    elif option == "-W":
        job.options["wall_limit"] = value
    elif option == "-q":
        job.queue = job.queue or value
    else:
        job.options[{"-P": "project", "-G": "user_group", "-a": "application"}[option]] = value


# ---------------------------------------------------------------- Slurm and PBS (echoed environment)

def _environment(text: str) -> dict[str, str]:
    """The first value of each SLURM_/PBS_/OMPI_MCA_/I_MPI_/FI_ variable written as NAME=value at the
    start of a line (an `env` dump, an `echo`, an `export` in a job script)."""
    out: dict[str, str] = {}
    if not any(prefix in text for prefix in _ENV_PREFIXES) or not _ENV_START.search(text):
        return out
    for m in re.finditer(r"^(?:export\s+)?(?:SLURM|PBS|OMPI_MCA|I_MPI|FI)_[^\n]{0,4100}", text, re.M):
        line = _ENV_LINE.match(m.group(0))
        if line and line.group(1) not in out and len(out) < 1000:
            out[line.group(1)] = line.group(2).strip().strip("'\"")
    return out


def _read_slurm(env: dict[str, str], job: JobInfo) -> bool:
    keys = ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_NNODES",
            "SLURM_JOB_NUM_NODES", "SLURM_JOB_PARTITION", "SLURM_CLUSTER_NAME", "SLURM_JOB_NAME")
    if not any(k in env for k in keys):
        return False
    if job.scheduler is None:
        job.scheduler = "slurm"
    if job.scheduler != "slurm":
        return True
    job.job_id = job.job_id or _cut(env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID"))
    job.name = job.name or _cut(env.get("SLURM_JOB_NAME"))
    job.queue = job.queue or _cut(env.get("SLURM_JOB_PARTITION"))
    job.cluster = job.cluster or _cut(env.get("SLURM_CLUSTER_NAME"))
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    count = env.get("SLURM_NNODES") or env.get("SLURM_JOB_NUM_NODES")
    if nodelist and not job.hosts:
        names = _expand(nodelist, job)
        slots = _slurm_tasks(env.get("SLURM_TASKS_PER_NODE"), len(names))
        job.hosts = [(name, slots[k] if slots else None) for k, name in enumerate(names)]
        job.hosts_from = "SLURM_JOB_NODELIST" if "SLURM_JOB_NODELIST" in env else "SLURM_NODELIST"
    if count and count.isdigit() and job.hosts and int(count) != len(job.host_names):
        job.problems.append(f"SLURM_NNODES={count} but the node list names {len(job.host_names)} node(s)")
    return True


def _expand(nodelist: str, job: JobInfo) -> list[str]:
    """'cn[01-04]' -> ['cn01', ..., 'cn04'], counted before NodeSet sees it: NodeSet holds every
    index of a range, so 'n[1-100000000]' would take gigabytes."""
    size = nodeset_size(nodelist)
    if size is None:
        job.problems.append(f"the node list {nodelist[:80]!r} is not a node set as Slurm writes it: not read")
        return []
    if size > MAX_HOSTS:
        job.problems.append(f"the node list {nodelist[:80]!r} names {size:,} nodes, more than {MAX_HOSTS:,}: "
                            "not read")
        return []
    try:
        return list(NodeSet(nodelist))
    except (NodeSetParseError, ValueError, AssertionError) as exc:  # ClusterShell checks some input by assert
        job.problems.append(f"the node list {nodelist[:80]!r} is not a node set ({str(exc)[:80]})")
        return []


_NODESET_PART = re.compile(r"[A-Za-z0-9._-]*(?:\[[0-9,\-]{1,1000}\][A-Za-z0-9._-]*)*")
_RANGE = re.compile(r"([0-9]{1,12})(?:-([0-9]{1,12}))?")


def nodeset_size(text: str) -> int | None:
    """How many names a Slurm node list ('cn[01-04,07],gpu[1-2]-[1-3]') holds, without building it;
    None when it is not one (longer than a line, or with syntax Slurm does not write)."""
    if len(text) > MAX_LINE_CHARS:
        return None
    parts, depth, start = [], 0, 0
    text = text.strip()
    for k, char in enumerate(text):  # commas outside brackets separate names
        depth += (char == "[") - (char == "]")
        if char == "," and depth == 0:
            parts.append(text[start:k])
            start = k + 1
    parts.append(text[start:])
    total = 0
    for part in parts:
        if not part or not _NODESET_PART.fullmatch(part):
            return None
        count = 1
        for group in re.findall(r"\[([^\]]*)\]", part):
            size = 0
            for item in group.split(","):
                m = _RANGE.fullmatch(item)
                if not m:
                    return None
                low, high = int(m.group(1)), int(m.group(2) or m.group(1))
                if high < low:
                    return None
                size += high - low + 1
            count *= size
        total += count
    return total


def _slurm_tasks(text: str | None, hosts: int) -> list[int] | None:
    """SLURM_TASKS_PER_NODE '2(x3),1' -> [2, 2, 2, 1] when it covers exactly `hosts` nodes."""
    if not text or not hosts:
        return None
    out: list[int] = []
    for part in text.split(","):
        m = _SLURM_TASKS.fullmatch(part.strip())
        if not m:
            return None
        repeat = int(m.group(2) or 1)
        if len(out) + repeat > hosts:
            return None
        out += [int(m.group(1))] * repeat
    return out if len(out) == hosts else None


def _read_pbs(env: dict[str, str], job: JobInfo) -> bool:
    keys = ("PBS_JOBID", "PBS_QUEUE", "PBS_JOBNAME", "PBS_NUM_NODES")
    if not any(k in env for k in keys):
        return False
    if job.scheduler is None:
        job.scheduler = "pbs"
    if job.scheduler != "pbs":
        return True
    job.job_id = job.job_id or _cut(env.get("PBS_JOBID"))
    job.queue = job.queue or _cut(env.get("PBS_QUEUE"))
    job.name = job.name or _cut(env.get("PBS_JOBNAME"))
    if (count := env.get("PBS_NUM_NODES")) and count.isdigit() and len(count) <= 9:
        job.options["nodes"] = int(count)  # a count only: the node names are in $PBS_NODEFILE, not here
    return True


# ---------------------------------------------------------------- Platform MPI -prot

def _read_prot(text: str, job: JobInfo) -> bool:
    if "Prot -" not in text and "-- ranks" not in text and "host |" not in text:
        return False
    found = False
    rows: dict[int, list[str]] = {}
    inter: set[str] = set()
    columns: list[int] | None = None  # the host numbers of the table block being read
    for line in _lines(text):
        if columns is not None and not (":" in line and (m := _PROT_ROW.match(line))) and "|" not in line:
            columns = None  # a table block ends at the first line that is no row of it
        if line.startswith("Host ") and (m := _PROT_HOST.match(line)):
            found = True
            if len(job.mpi_hosts) < MAX_HOSTS:
                first = int(m.group(3))
                job.mpi_hosts.append({"host": int(m.group(1)), "ip": m.group(2), "ranks": [
                    first, int(m.group(4)) if m.group(4) else first]})
        elif "|" in line and (m := _PROT_HEADER.match(line)):
            columns = [int(c) for c in m.group(1).split()]
        elif columns is not None and ":" in line and (m := _PROT_ROW.match(line)):
            found = True
            row, cells = int(m.group(1)), m.group(2).split()
            inter.update(c for col, c in zip(columns, cells, strict=False) if col != row)
            if row < MAX_TABLE_HOSTS:
                rows.setdefault(row, []).extend(c for col, c in zip(columns, cells, strict=False)
                                                if col < MAX_TABLE_HOSTS)
        elif "Prot" in line and (m := _PROT_ALL.match(line)):
            found = True
            if m.group(1) == "Intra":
                job.intra_node = m.group(2)
            else:
                job.inter_node = m.group(2)
    job.protocols = [rows[k] for k in sorted(rows)]
    if job.inter_node is not None:
        job.inter_node_from = "-prot 'All Inter-node communication is' line"
    elif len(inter) == 1:
        job.inter_node, job.inter_node_from = next(iter(inter)), "-prot host table"
    if len(inter) > 1:
        job.problems.append("the -prot table shows several inter-node protocols: " + ", ".join(sorted(inter)))
    if job.mpi_hosts and not job.hosts:
        job.hosts = [(h["ip"], h["ranks"][1] - h["ranks"][0] + 1) for h in job.mpi_hosts]
        job.hosts_from = "Platform MPI -prot 'Host i -- ip A -- ranks a - b'"
    return found


# ---------------------------------------------------------------- mpirun and the interconnect

def _launcher_line(line: str) -> bool:
    words = _words(line)
    for word in words[:8]:  # skip 'time', 'exec', VAR=value before the launcher
        base = word.rsplit("/", 1)[-1]
        if _LAUNCHER.match(base):
            return True
        if word not in ("time", "exec", "nohup", "command") and "=" not in word:
            return False
    return False


def _traced_mpirun(text: str) -> str | None:
    """An mpirun line a job script printed (`+ mpirun ...` under `set -x`, `$ mpirun ...`, or bare)
    in the first MiB. A bare line needs an option: 'mpirun noticed that process rank 1 ...' is
    Open MPI's error message, not a command."""
    text = text[:1024 * 1024]
    if "mpirun" not in text and "mpiexec" not in text and "orterun" not in text:  # what the search needs
        return None
    for m in re.finditer(r"^(\+{1,3} |\$ )?(?:\S{0,200}/)?(?:mpirun|mpiexec|orterun)\b[^\n]{0,4000}$", text, re.M):
        line = m.group(0).lstrip("+$ ")
        words = _words(line)
        traced = m.group(1) is not None
        if _launcher_line(line) and (traced or (len(words) > 1 and words[1].startswith("-"))):
            return _cut(line, MAX_LINE_CHARS)
    return None


def requested_transport(mpirun: str | None, env: dict[str, str]) -> tuple[str | None, str | None]:
    """(canonical transport, the words that asked for it) from an mpirun line and echoed variables:
    Platform MPI's -TCP/-IBV/... flags, Open MPI's --mca pml/mtl/btl (or OMPI_MCA_*), Intel MPI's
    I_MPI_FABRICS (as -genv/-env or a variable). None when nothing asks for one."""
    words = _words(mpirun) if mpirun else []
    for word in words:
        if word in _PLATFORM_FLAGS:
            return canonical_interconnect(_PLATFORM_FLAGS[word]), f"mpirun {word}"
    mca = {k.removeprefix("OMPI_MCA_"): v for k, v in env.items() if k.startswith("OMPI_MCA_")}
    fabrics = env.get("I_MPI_FABRICS")
    for k, word in enumerate(words[:-2]):
        if word in ("--mca", "-mca", "--gmca", "-gmca"):
            mca[words[k + 1]] = words[k + 2]
        elif word in ("-genv", "-env", "--genv") and words[k + 1] == "I_MPI_FABRICS":
            fabrics = words[k + 2]
    for word in words:
        if word.startswith(("I_MPI_FABRICS=", "OMPI_MCA_")) and "=" in word:  # -x VAR=value, -genv VAR=value
            key, _, value = word.partition("=")
            if key == "I_MPI_FABRICS":
                fabrics = value
            else:
                mca.setdefault(key.removeprefix("OMPI_MCA_"), value)
    if found := _open_mpi_transport(mca):
        return found
    if fabrics:
        return _intel_transport(fabrics)
    return None, None


def _open_mpi_transport(mca: dict[str, str]) -> tuple[str, str] | None:
    pml, mtl, btl = mca.get("pml", ""), mca.get("mtl", ""), mca.get("btl", "")
    if pml == "ucx":
        return "ucx", "MCA pml ucx"
    if pml == "cm" and mtl and "," not in mtl and not mtl.startswith("^"):
        return canonical_interconnect(mtl), f"MCA mtl {mtl}"
    if btl and not btl.startswith("^"):
        networks = [b for b in btl.split(",") if b and b not in _SHARED_MEMORY_BTLS]
        if len(networks) == 1:
            return canonical_interconnect(networks[0]), f"MCA btl {btl}"
    return None


def _intel_transport(fabrics: str) -> tuple[str | None, str | None]:
    """I_MPI_FABRICS 'shm:tcp' -> tcp (intra:inter); 'ofi' -> ofi; 'shm' -> shm (one node only)."""
    parts = [p for p in fabrics.strip().split(":") if p]
    if not parts or len(parts) > 2:
        return None, None
    return canonical_interconnect(parts[-1].lower()), f"I_MPI_FABRICS={_cut(fabrics, 40)}"


def _decide_interconnect(job: JobInfo, env: dict[str, str]) -> None:
    """What the run used (-prot) > what it asked for (flags) > unknown; one host is shared memory."""
    job.requested, asked_by = requested_transport(job.mpirun, env)
    if len(job.host_names) == 1:
        job.interconnect, job.interconnect_from = "shm", "one host"
    elif job.inter_node:
        job.interconnect = canonical_interconnect(job.inter_node.lower())
        job.interconnect_from = job.inter_node_from
    elif job.requested:
        job.interconnect, job.interconnect_from = job.requested, asked_by
    if job.requested and job.interconnect and job.interconnect != "shm" and job.requested != job.interconnect:
        job.problems.append(f"the job asked for {job.requested} ({asked_by}) but the MPI reports "
                            f"{job.interconnect}")


# ---------------------------------------------------------------- helpers

def _lines(text: str) -> list[str]:
    """The lines of `text` no longer than MAX_LINE_CHARS (longer ones are no wrapper's)."""
    return [line for line in text.splitlines() if len(line) <= MAX_LINE_CHARS]


def _words(text: str) -> list[str]:
    """Shell words of a bounded line; a line shlex cannot split (an open quote) is split on blanks."""
    text = text[:MAX_LINE_CHARS]
    try:
        return shlex.split(text, comments=False)
    except ValueError:
        return text.split()


def _cut(value: str | None, limit: int = MAX_VALUE_CHARS) -> str | None:
    if value is None:
        return None
    return value if len(value) <= limit else value[:limit] + "..."
