"""What the nodes of a run were set to, and what they did while it ran.

Before the command starts, one read-only script runs on every node of the run in one round trip
(system/state.py: kernel and preemption, governor, SMT, THP, NICs, TCP, routes, MPI parameters,
a measured core clock) and its answer is stored as the run's `state` facts, one entry per node.
While the command runs, a 1 Hz sampler (system/sampler.py) runs on every node, started over ssh
(or directly here) with a pipe as its standard input; closing the pipe ends it, and so does the
death of clusterbench, kill -9 included, because the pipe closes with it. Its samples go to
`activity-<node>.jsonl` in the run directory, stored with the run; their summary is the run's
`activity` facts, and a node that throttled flags the run (`throttled`).

The state read can start ahead (`prefetch_state`) while clusterbench still prepares the run (the
CLI's imports, discovery and expansion, the run loop's directory and inputs): it costs about 0.1 s
(half of it the clock kernel), which a tuner's many short trials would otherwise each pay in
series. `collect_state` takes that answer only when it is for the very same script and nodes,
started at most PREFETCH_MAX_AGE_S before; else it reads the state again. Still read before the
command starts, and never before a run's `system:` settings are applied (the executor discards a
prefetch then).

Nothing here decides a run's validity: a run whose nodes could not be observed is stored as it
is, with the reason under `state`/`activity`. `CLUSTERBENCH_OBSERVE=0` turns both off (the
overhead benchmark compares runs with and without).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from clusterbench.launch import supervise
from clusterbench.launch.hosts import is_local
from clusterbench.launch.process import wait_exit
from clusterbench.launch.remote import node_copies, run_everywhere, ssh_command
from clusterbench.launch.site import Site
from clusterbench.launch.spec import Launch
from clusterbench.pinning.verify import read_observations
from clusterbench.system import activity, disturbance, state

STATE_TIMEOUT_S = 30.0
PREFETCH_MAX_AGE_S = 5.0  # an answer read ahead is used this long after its read started, no longer
SAMPLE_INTERVAL_S = 1.0
STOP_WAIT_S = 5.0  # a sampler writes its last sample within an interval of its pipe closing
CLOCK_MS = 50  # the core-clock kernel's run per node and run
MAX_NODES = 4096  # files of a Slurm job's steps read back
_MPI_VARIABLE = re.compile(r"^(OMPI_MCA_|MPIR_CVAR_|MPICH_|UCX_|FI_)")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]")


def enabled() -> bool:
    return os.environ.get("CLUSTERBENCH_OBSERVE", "1") not in ("0", "no", "false", "off")


def run_hosts(site: Site, launch: Launch) -> list[str]:
    """The nodes a run uses, as the site names them; 'localhost' for a run on this machine (a
    program started without a launcher runs here, whatever hosts the site has)."""
    if launch.placement is None:
        return ["localhost"]
    return [h.name for h in site.hosts_for(launch.placement.nodes)] or ["localhost"]


def node_key(host: str) -> str:
    """The name a node's facts are stored under: this machine's own name for 'localhost'."""
    return os.uname().nodename if host in ("localhost", "127.0.0.1") else host


def mpi_variables(env: dict[str, str]) -> dict[str, str]:
    """The run's MPI tuning variables: what ompi_info is asked about on each node."""
    return {k: v for k, v in env.items() if _MPI_VARIABLE.match(k)}


def collect_state(hosts: list[str], env: dict[str, str], clock_binary: str | None = None) -> dict[str, dict]:
    """Every node's state, read in one round trip; a node that did not answer gets its error.
    The answer of a matching `prefetch_state` is taken when there is one (see the module's docstring)."""
    script = _state_script(hosts, env, clock_binary)
    ahead = _take_prefetch((tuple(hosts), script))
    if ahead is not None and ahead.done.wait(STATE_TIMEOUT_S + 5.0) and ahead.result is not None:
        prefetch_stats["used"] += 1
        return ahead.result
    return _read_state(hosts, script)


def _state_script(hosts: list[str], env: dict[str, str], clock_binary: str | None) -> str:
    peers = hosts if len(hosts) > 1 else []
    if any(not is_local(h) for h in hosts):
        clock_binary = _on_nodes(clock_binary)
    return state.state_script(mpi_variables(env), peers, clock_binary, CLOCK_MS)


def _read_state(hosts: list[str], script: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for answer in run_everywhere(hosts, script, STATE_TIMEOUT_S):
        if not answer.ok and "@@cb:" not in answer.stdout:
            reason = (answer.stderr.strip().splitlines() or [f"exit code {answer.exit_code}"])[-1][:300]
            out[node_key(answer.host)] = {"error": reason}
            continue
        out[node_key(answer.host)] = _node_state(answer.stdout, answer.host)
    return out


@dataclass
class _Prefetch:
    key: tuple
    started: float
    done: threading.Event = field(default_factory=threading.Event)
    result: dict | None = None


_prefetch_lock = threading.Lock()
_prefetched: _Prefetch | None = None
prefetch_stats = {"started": 0, "used": 0}  # for tests and benchmarks/harness_overhead.py


def prefetch_state(hosts: list[str], env: dict[str, str], clock_binary: str | None = None) -> bool:
    """Start reading the nodes' state now, in the background, for a run about to start with these
    nodes and environment; False (and nothing started) when observing is off or the inputs would
    not make a script (collect_state then raises the same error itself)."""
    global _prefetched
    if not enabled():
        return False
    try:
        script = _state_script(hosts, env, clock_binary)
    except Exception:  # noqa: BLE001 - collect_state reports it, with the run
        return False
    key = (tuple(hosts), script)
    with _prefetch_lock:
        pending = _prefetched
    if pending is not None and pending.key == key and time.monotonic() - pending.started < PREFETCH_MAX_AGE_S / 2:
        return True  # the same read is already under way (the CLI's, then the run loop's)
    ahead = _Prefetch(key, time.monotonic())

    def read() -> None:
        try:
            ahead.result = _read_state(hosts, script)
        except Exception:  # noqa: BLE001 - collect_state reads again
            ahead.result = None
        finally:
            ahead.done.set()

    # a daemon thread: a command that fails before its run does not wait for the read at exit
    threading.Thread(target=read, name="clusterbench-state-prefetch", daemon=True).start()
    with _prefetch_lock:
        _prefetched = ahead
        prefetch_stats["started"] += 1
    return True


def discard_prefetch() -> None:
    """Forget a state read ahead (a run whose settings change the nodes first must read them after)."""
    global _prefetched
    with _prefetch_lock:
        _prefetched = None


def _take_prefetch(key: tuple) -> _Prefetch | None:
    global _prefetched
    with _prefetch_lock:
        ahead, _prefetched = _prefetched, None
    if ahead is None or ahead.key != key or time.monotonic() - ahead.started > PREFETCH_MAX_AGE_S:
        return None
    return ahead


@lru_cache(maxsize=1)
def clock_binary() -> str | None:
    """The core-clock kernel the state script runs on each node (built once, in the cache the
    nodes share); None where it cannot be built: the state is then read without a clock."""
    from clusterbench.errors import UserInputError
    from clusterbench.native.build import clock_binary as build_clock

    try:
        return str(build_clock())
    except (UserInputError, OSError):  # no compiler (MissingToolError), a failed build (BuildError)
        return None


def _on_nodes(path: str | None) -> str | None:
    """The nodes' copy of the head's `path` when staging copies what they cannot see (launch/remote.py)."""
    copies = node_copies()
    return path if copies is None or path is None else copies.node_path(path)


def _node_state(text: str, host: str) -> dict:
    try:
        return state.parse_state(text, host)
    except Exception as exc:  # noqa: BLE001 - an odd node must not lose the run
        return {"error": f"state not understood: {exc}"[:300]}


def _backstop(max_seconds: float | None) -> float:
    """How long a sampler may run at most: beyond the run's own timeout, so only a lost sampler meets it."""
    return min(max_seconds or 86400.0, 86400.0) + 120.0


def slurm_lines(workdir: Path, env: dict[str, str], clock_binary: str | None,
                interval_s: float = SAMPLE_INTERVAL_S, max_seconds: float | None = None) -> tuple[list[str], list[str]]:
    """The batch script's lines around a run's command, for a Slurm job whose nodes are known only
    inside it: one step reads every node's state into state-<node>.txt, and a background step runs a
    sampler per node (its source read from a copy the job writes there) into activity-<node>.jsonl
    until the command has ended: then a stop file in the (shared) run directory ends each sampler
    with its last sample (a signal through srun would cut the step's output short; a job that ends
    kills its steps anyway). Both are --overlap steps, so they never wait for, or hold back, the
    run's own step."""
    head = "srun --overlap --nodes=${SLURM_JOB_NUM_NODES} --ntasks-per-node=1 --cpus-per-task=1 --cpu-bind=none"
    script = state.state_script(mpi_variables(env), (), _on_nodes(clock_binary), CLOCK_MS)
    stop, source = workdir / "activity.stop", workdir / "activity-sampler.py"
    sampler = [*activity.stdin_sampler_argv(interval_s, _backstop(max_seconds)), "--stop-file", str(stop)]
    # the sampler's source, written by the job into the run directory; each node's sampler reads it
    # as its stdin (sh redirects, then becomes the sampler), so its command line stays short in ps
    from_file = f"sh -c 'exec \"$@\" <\"$0\"' {shlex.quote(str(source))} {shlex.join(sampler)}"
    before = ["# clusterbench: each node's state before the run, and a 1 Hz sampler on each beside it",
              f"{head} --output={shlex.quote(str(workdir / 'state-%N.txt'))} bash -c {shlex.quote(script)} "
              ">/dev/null 2>&1 || true",
              f"printf %s {shlex.quote(activity.sampler_source())} >{shlex.quote(str(source))}",
              f"{head} --output={shlex.quote(str(workdir / 'activity-%N.jsonl'))} {from_file} 2>/dev/null &",
              "cb_sampler=$!"]
    after = [f"touch {shlex.quote(str(stop))}; wait $cb_sampler 2>/dev/null"]
    return before, after


def read_slurm_files(workdir: Path) -> Observed:
    """What the job's steps wrote (slurm_lines), parsed like the answers of nodes asked over ssh."""
    observed = Observed()
    states: dict[str, dict] = {}
    for path in sorted(workdir.glob("state-*.txt"))[:MAX_NODES]:
        host = path.name[len("state-"):-len(".txt")]
        states[host] = _node_state(path.read_text(errors="replace"), host)
    if states:
        observed.facts["state"] = states
    found = []
    for path in sorted(workdir.glob("activity-*.jsonl"))[:MAX_NODES]:
        host = path.name[len("activity-"):-len(".jsonl")]
        observed.artifacts.append(path)
        found.append((host, path))
    if found:
        observed.facts |= _activity_facts(found, workdir)
    return observed


def _activity_facts(found: list[tuple[str, Path | str]], workdir: Path) -> dict:
    """The run's `activity` facts (a summary per node), `throttled` with the reasons when a node
    throttled, and whether other work disturbed the run (system/disturbance.py). `found`: (node,
    its samples' file, or why there is none)."""
    summaries: dict[str, dict] = {}
    verdicts: list[disturbance.NodeVerdict] = []
    run = run_processes(workdir) if disturbance.mode() != "off" else None
    for host, path in found:
        if isinstance(path, str):
            summaries[host] = {"error": path}
            continue
        try:
            series = activity.parse_series(path.read_text(errors="replace"), host)
            summaries[host] = activity.summarise(series)
            if run is not None:
                verdicts.append(disturbance.judge(series, run, activity.throttle_reasons({host: summaries[host]})))
        except Exception as exc:  # noqa: BLE001 - a broken sample file must not lose the run
            summaries[host] = {"error": f"samples not understood: {exc}"[:300]}
    reasons = activity.throttle_reasons(summaries)
    return ({"activity": summaries} | ({"throttled": reasons} if reasons else {})
            | disturbance.run_facts(verdicts))


def run_processes(workdir: Path) -> disturbance.RunProcesses:
    """What tells the run's processes from others' on its nodes: its supervisor (locally) and each
    rank's launcher (from the placement probes' records), by process table."""
    run = disturbance.RunProcesses()
    record = supervise.read_record(workdir / supervise.RECORD)
    if record and record.get("boot_id") and record.get("pid_ns"):
        table = (str(record["boot_id"])[:64], str(record["pid_ns"])[:64])
        run.add_below(table, record["pid"])
        harness = record.get("harness_pid")
        run.add_harness(table, harness if isinstance(harness, int) else None)
    for rank in read_observations(workdir):
        if rank.table:
            run.add_below(rank.table, rank.launcher_pid, rank.pid)
            run.cpus.setdefault(rank.table, set()).update(rank.launcher_cpus)
    return run


@dataclass
class Observed:
    """What is added to a run when it is stored: facts, and the files holding the samples."""

    facts: dict = field(default_factory=dict)
    artifacts: list[Path] = field(default_factory=list)


@dataclass
class _Sampler:
    host: str
    path: Path
    proc: subprocess.Popen | None
    error: str | None = None


class Samplers:
    """One sampler per node of a run, from `start` to `stop`."""

    def __init__(self, hosts: list[str], workdir: Path, interval_s: float = SAMPLE_INTERVAL_S,
                 max_seconds: float | None = None):
        self.hosts, self.workdir, self.interval_s = hosts, workdir, interval_s
        self.max_seconds = max_seconds
        self.running: list[_Sampler] = []

    def start(self) -> None:
        limit = _backstop(self.max_seconds)
        for host in self.hosts:
            path = self.workdir / f"activity-{_SAFE_NAME.sub('_', node_key(host))}.jsonl"
            if is_local(host):  # this interpreter, importing sampler.py; its stdin is only the lifeline
                cmd, source = activity.local_sampler_argv(self.interval_s, limit), b""
            else:  # python3 on the node, its source sent first on the pipe (a short command line in ps)
                cmd = [*ssh_command(host), shlex.join(activity.stdin_sampler_argv(self.interval_s, limit))]
                source = activity.sampler_bytes()
            try:
                with path.open("wb") as sink:
                    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=sink, stderr=subprocess.DEVNULL,
                                            start_new_session=True)  # Ctrl-C reaches the run, not the sampler
            except OSError as exc:
                self.running.append(_Sampler(host, path, None, f"sampler not started: {exc}"))
                continue
            self.running.append(_Sampler(host, path, proc))
            if source:
                try:  # at most 64 KiB into an empty pipe: written at once, whether ssh reads yet or not
                    proc.stdin.write(source)
                    proc.stdin.flush()
                except OSError as exc:  # ssh already gone: its sample file stays empty, and says so
                    self.running[-1].error = f"sampler's source not sent to {host}: {exc}"[:300]

    def stop(self) -> Observed:
        """Close every sampler's pipe, wait for its last sample, and summarise each node."""
        self.stop_quietly()
        observed = Observed()
        found: list[tuple[str, Path | str]] = []
        for s in self.running:
            if not s.error:
                observed.artifacts.append(s.path)
            found.append((node_key(s.host), s.error or s.path))
        observed.facts |= _activity_facts(found, self.workdir)
        return observed

    def stop_quietly(self) -> None:
        """Close every sampler's pipe and wait for its last sample (its file is then complete)."""
        for s in self.running:
            if s.proc and s.proc.stdin:
                try:
                    s.proc.stdin.close()
                except OSError:
                    pass
        deadline = time.monotonic() + self.interval_s + STOP_WAIT_S
        for s in self.running:
            if s.proc is None:
                continue
            try:
                wait_exit(s.proc, max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                s.proc.kill()
                s.proc.wait()
