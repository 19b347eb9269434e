"""The placement probe: wraps one rank of a run and writes down where it and its threads really ran.

The launcher (mpirun of Open MPI or Hydra, srun) starts `python -I -S -c LOADER probe.py OUTDIR -- PROGRAM ARGS`
as the rank. The probe

- reads its own CPU affinity first: that is the binding the launcher gave the rank, before any OpenMP
  runtime narrows its threads (the ground truth `--report-bindings` and `--cpu-bind=verbose` only report);
- forks and execs the program, which inherits that affinity, the environment (the MPI's rank variables)
  and every inherited file descriptor (Hydra's PMI_FD), so the program is the MPI rank as if started
  directly; the child asks for SIGKILL when the probe dies (PR_SET_PDEATHSIG), so a kill -9 of the probe
  never leaves the program running;
- samples, from the program's start to its end, every thread's allowed CPUs (`Cpus_allowed_list` in
  /proc/PID/task/TID/status, counted per distinct set: a library may move a thread for a moment, as
  hwloc does to read each CPU's CPUID in MPI_Init), the CPU it is on (field 39 of .../stat) and the
  scheduler's migration count (`se.nr_migrations` in .../sched, when the kernel shows it): at 0, 10,
  20, 50 and 100 ms, then every 100 ms for 2 s, then a tenth of the time run (every 2 s from 20 s on), so even a
  short run is seen once with all its threads, and a long one is not woken ten times a second on the
  rank's own CPU (the observer must not disturb what it observes);
- forwards SIGTERM, SIGINT, SIGHUP, SIGUSR1/2 and SIGCONT to the program, and exits as the program did
  (the same signal when it was killed by one), so launchers see no difference;
- writes one JSON file per rank, OUTDIR/probe-HOST-PID.json (atomically), with the node's CPU layout
  read from sysfs, so the prediction can be made for the node the rank really ran on.

Standard library only and no clusterbench import: it runs on compute nodes where only the Python that
started clusterbench is reachable, and its start-up (about 15 ms) is paid once per rank, before the
program starts and on the rank's CPUs: so it imports no more than it must (the record is written
without the json module, whose regular expressions cost as much again; `LOADER` starts it from its
cached bytecode). Its sampling costs a few file reads per thread per sample, on the rank's own CPUs.
"""

import os
import sys
import time

try:  # the C module signal.py wraps: the same functions and numbers, without importing enum (~7 ms a rank)
    import _signal as signal
except ImportError:  # another Python than CPython
    import signal

SCHEDULE_S = (0.0, 0.01, 0.02, 0.05, 0.1)  # then PERIOD_S, doubling up to MAX_PERIOD_S
PERIOD_S = 0.1
STEADY_S = 2.0  # every PERIOD_S this long
MAX_PERIOD_S = 2.0  # a bound rank's threads stay put: later samples only catch a late move, so they are rare
MAX_THREADS = 4096  # threads sampled per rank; a runaway program does not make the record unbounded
MAX_HISTORY = 64  # changes of a thread's allowed set that are kept, in order
RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")
KEPT_ENV = ("OMP_NUM_THREADS", "OMP_PLACES", "OMP_PROC_BIND", "GOMP_CPU_AFFINITY", "KMP_AFFINITY",
            "SLURM_NODEID", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
            "SLURM_CPU_BIND", "SLURM_CPU_BIND_LIST")
FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGCONT")
PR_SET_PDEATHSIG = 1
OPENMP_RUNTIMES = ("libgomp.so", "libomp.so", "libiomp5.so")  # GCC, LLVM, Intel: who reads OMP_PLACES
# `python -I -S -c LOADER PROBE_PATH OUTDIR -- PROGRAM ...` runs this file imported from its folder, so from
# the bytecode cached there, not compiled at every start as a script is; its path stays an argument of
# its own (a node's copy of it, named probe.py too, replaces it in the command line as the script's path
# did). Short, as every rank's line in `ps` starts with it.
LOADER = ('import sys;sys.path.insert(0,sys.argv.pop(1).rpartition("/")[0]);'
          "import probe;sys.exit(probe.main(sys.argv))")


def cpulist(cpus) -> str:
    """[0,1,2,5] -> '0-2,5'."""
    out, run = [], []
    for cpu in sorted(cpus):
        if run and cpu == run[-1] + 1:
            run.append(cpu)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [cpu]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(out)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def thread_state(pid: int, tid: int) -> tuple[str, int, int | None, str] | None:
    """(allowed cpulist, current CPU, nr_migrations or None, name) of one thread, None if it is gone."""
    base = f"/proc/{pid}/task/{tid}"
    status, stat = _read(base + "/status"), _read(base + "/stat")
    if not status or not stat:
        return None
    allowed = name = ""
    for line in status.splitlines():
        if line.startswith("State:") and line.split()[1] in ("Z", "X"):
            return None  # exited: the kernel no longer keeps its affinity meaningful
        if line.startswith("Cpus_allowed_list:"):
            allowed = line.split(":", 1)[1].strip()
        elif line.startswith("Name:"):
            name = line.split(":", 1)[1].strip()
    fields = stat[stat.rindex(")") + 2:].split()
    cpu = int(fields[36])  # field 39 of stat counts pid and comm, which precede ")"
    migrations = None
    for line in (_read(base + "/sched") or "").splitlines():
        if line.startswith("se.nr_migrations"):
            migrations = int(line.split(":", 1)[1])
            break
    return allowed, cpu, migrations, name


class Threads:
    """What the samples saw of each thread, keyed by TID."""

    def __init__(self) -> None:
        self.seen: dict[int, dict] = {}
        self.samples = 0
        self.execed = False
        self.own_exe = os.path.realpath(sys.executable)
        self.runtimes: list[str] = []  # OpenMP runtimes the program mapped (checked in the first samples)
        self.expanded: dict[str, frozenset[int]] = {}

    def sample(self, pid: int) -> None:
        if not self.execed:  # before exec the child is still this interpreter: nothing to see yet
            try:
                self.execed = os.readlink(f"/proc/{pid}/exe") != self.own_exe
            except OSError:
                return
            if not self.execed:
                return
        try:
            tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))[:MAX_THREADS]
        except OSError:
            return
        self.samples += 1
        if not self.runtimes and self.samples <= len(SCHEDULE_S):
            self.runtimes = openmp_runtimes(pid)
        now = time.monotonic()
        for tid in tids:
            state = thread_state(pid, tid)
            if state is None:
                continue
            allowed, cpu, migrations, name = state
            rec = self.seen.get(tid)
            if rec is None:
                rec = self.seen[tid] = {"tid": tid, "name": name, "history": [], "cpus": {}, "cpu": cpu,
                                        "cpu_changes": 0, "nr_migrations": migrations,
                                        "first_seen_s": now, "last_seen_s": now}
            elif cpu != rec["cpu"]:
                rec["cpu_changes"] += 1
            history = rec["history"]  # [allowed set, samples] in order: a rebind shows where it happened
            if history and history[-1][0] == allowed:
                history[-1][1] += 1
            elif len(history) < MAX_HISTORY:
                history.append([allowed, 1])
            if cpu in self._cpus_of(allowed):  # else a stale "last CPU" from before a rebind
                rec["cpus"][str(cpu)] = rec["cpus"].get(str(cpu), 0) + 1
            rec.update(cpu=cpu, name=name, last_seen_s=now)
            if migrations is not None:
                rec["nr_migrations"] = migrations

    def _cpus_of(self, allowed: str) -> frozenset[int]:
        """The CPUs of an allowed list, expanded once per distinct list (a rank sees one or two)."""
        cpus = self.expanded.get(allowed)
        if cpus is None:
            cpus = self.expanded[allowed] = frozenset(expand(allowed))
        return cpus

    def records(self, start: float) -> list[dict]:
        out = []
        for tid in sorted(self.seen):
            rec = dict(self.seen[tid])
            rec["first_seen_s"] = round(rec["first_seen_s"] - start, 3)
            rec["last_seen_s"] = round(rec["last_seen_s"] - start, 3)
            del rec["cpu"]
            out.append(rec)
        return out


def openmp_runtimes(pid: int) -> list[str]:
    """The OpenMP runtime libraries mapped into the program: without one, OMP_* mean nothing to it."""
    found = set()
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                name = line.rsplit("/", 1)[-1].strip()
                if name.startswith(OPENMP_RUNTIMES):
                    found.add(name)
    except OSError:
        pass
    return sorted(found)


def node_layout() -> str:
    """The node's CPUs as `lscpu -p=CPU,CORE,SOCKET,NODE,L3` would print them, read from sysfs."""
    root = "/sys/devices/system/cpu"
    node_of = {}
    try:
        nodes = [d for d in os.listdir("/sys/devices/system/node") if d.startswith("node") and d[4:].isdigit()]
    except OSError:
        nodes = []
    for d in nodes:
        for cpu in expand(_read(f"/sys/devices/system/node/{d}/cpulist") or ""):
            node_of[cpu] = int(d[4:])
    rows = ["# CPU,Core,Socket,Node,L3"]
    l3_ids: dict[str, int] = {}
    for cpu in expand(_read(root + "/online") or "0"):
        topo = f"{root}/cpu{cpu}/topology"
        core = (_read(topo + "/core_id") or str(cpu)).strip()
        sock = (_read(topo + "/physical_package_id") or "0").strip()
        shared = (_read(f"{root}/cpu{cpu}/cache/index3/shared_cpu_list") or "").strip()
        l3 = str(l3_ids.setdefault(shared, len(l3_ids))) if shared else ""
        rows.append(f"{cpu},{core},{max(int(sock), 0)},{node_of.get(cpu, 0)},{l3}")
    return "\n".join(rows) + "\n"


def expand(text: str) -> list[int]:
    cpus = []
    for part in text.strip().split(","):
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.extend(range(int(lo), int(hi) + 1))
        elif part.strip():
            cpus.append(int(part))
    return cpus


def process_table_id() -> dict:
    """The node's process table (boot id, PID namespace): the activity sampler's header says the
    same, so the run's processes are told from others' there (system/disturbance.py). Read after the
    program ended: it costs the run nothing."""
    out = {}
    try:
        out["pid_ns"] = os.readlink("/proc/self/ns/pid")[:64]
        with open("/proc/sys/kernel/random/boot_id", "rb") as f:
            out["boot_id"] = f.read(64).decode("ascii", "replace").strip()
    except OSError:
        pass
    return out


def _set_pdeathsig() -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def spawn(argv: list[str], parent: int) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})  # exec keeps the mask
            _set_pdeathsig()
            if os.getppid() != parent:  # the probe died before the request took effect
                os._exit(137)
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"clusterbench probe: cannot run {argv[0]}: {exc}\n".encode())
        os._exit(127)
    return pid


def write_record(outdir: str, record: dict) -> None:
    host = record["host"]
    path = os.path.join(outdir, f"probe-{host}-{record['pid']}.json")
    tmp = path + ".tmp"
    try:
        os.makedirs(outdir, exist_ok=True)
        with open(tmp, "w") as f:
            f.write(dumps(record))
        os.replace(tmp, path)
    except OSError as exc:  # the run goes on; its placement is then reported as unobserved
        sys.stderr.write(f"clusterbench probe: cannot write {path}: {exc}\n")


def dumps(value) -> str:
    """`value` (dicts, lists, text, numbers, None) as JSON, as json.dumps writes it (ASCII, NaN and
    Infinity as json writes them), without importing json."""
    if isinstance(value, str):
        return _quoted(value)
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_quoted(_key(k))}: {dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(dumps(v) for v in value) + "]"
    raise TypeError(f"not JSON: {type(value).__name__}")


def _key(key) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return dumps(key)
    raise TypeError(f"not a JSON key: {type(key).__name__}")


def _quoted(text: str) -> str:
    try:
        from _json import encode_basestring_ascii  # json's own C escaper, without json's imports
    except ImportError:  # a Python built without it
        import json

        return json.dumps(text)
    return encode_basestring_ascii(text)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: probe.py OUTDIR -- PROGRAM [ARGS...]\n")
        return 2
    outdir, program = argv[1], argv[3:]
    start = time.monotonic()
    own = sorted(os.sched_getaffinity(0))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # woken by the program's end, not polling
    child = spawn(program, os.getpid())
    for name in FORWARDED:
        signal.signal(getattr(signal, name), lambda s, _f: os.kill(child, s))
    threads = Threads()
    due, taken = start, 0
    while (status := _reap(child)) is None:
        now = time.monotonic()
        wait = due - now
        if wait > 0:
            signal.sigtimedwait({signal.SIGCHLD}, wait)
            continue
        threads.sample(child)
        taken += 1
        due = start + SCHEDULE_S[taken] if taken < len(SCHEDULE_S) else time.monotonic() + period(now - start)
    env = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
    rank = next((os.environ[v] for v in RANK_VARS if os.environ.get(v, "").isdigit()), None)
    write_record(outdir, {
        "host": os.uname().nodename, "pid": child, "main_tid": child, "rank": None if rank is None else int(rank),
        "launcher_cpus": cpulist(own), "env": env, "threads": threads.records(start),
        "samples": threads.samples, "seconds": round(time.monotonic() - start, 3),
        "openmp_runtimes": threads.runtimes,
        "exit": status, "node_layout": node_layout(),
        "probe_pid": os.getpid(), "launcher_pid": os.getppid(), **process_table_id()})
    if status < 0:  # killed by a signal: die of the same one
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        return 128 - status
    return status


def period(elapsed: float) -> float:
    """The wait before the next sample: PERIOD_S in the first STEADY_S (threads appear: OpenMP starts
    its team at the first parallel region), then a tenth of the time run, up to MAX_PERIOD_S."""
    if elapsed < STEADY_S:
        return PERIOD_S
    return min(MAX_PERIOD_S, max(PERIOD_S, elapsed / 10))


def _reap(child: int) -> int | None:
    """The program's exit code (negative: the signal that killed it), None while it runs."""
    try:
        pid, raw = os.waitpid(child, os.WNOHANG)
    except ChildProcessError:
        return 0
    if pid == 0:
        return None
    return os.waitstatus_to_exitcode(raw)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
