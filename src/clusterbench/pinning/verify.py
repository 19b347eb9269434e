"""Where a run's ranks and threads really ran (the probes' records), compared with the prediction.

pinning/probe.py leaves one JSON record per rank in the run directory. This module reads them
(defensively: they are files, and a rank may die half-way through writing), reduces each thread to
the CPU set it was allowed on for most of its samples (a library may move a thread for a moment:
hwloc binds Open MPI's main thread to each CPU in turn while MPI_Init reads CPUID), and checks the
prediction rank by rank:

- every predicted rank was seen, on the node it was predicted on (the host list when the launcher
  was given one, Slurm's SLURM_NODEID, else a consistent node -> host mapping);
- the CPUs the launcher gave the rank (the probe's own affinity) are the predicted set;
- with OpenMP binding, each predicted thread set is some thread's set; without it, every thread
  kept the rank's set (a narrower one means the program or a library bound it).

The verdict is `match`, `mismatch` (a positive disagreement, with the reasons), `partial` (nothing
disagrees but not everything was seen, e.g. a run too short for its threads to be sampled) or
`unobserved` (no record came back: a node without the shared run directory). Thread migrations are
summed from the kernel's `se.nr_migrations` and from the CPU changes the samples saw.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.pinning.model import Prediction, TaskPlacement
from clusterbench.system.topology import compress_cpulist, parse_cpulist

PROBE_DIR = "placement"  # in the run directory
MAX_RECORDS = 65536  # ranks read back; more files than this are not a run of ours
MAX_RECORD_BYTES = 4 << 20
MAX_PROBLEMS = 20  # listed per run; the count says how many more


@dataclass
class ObservedThread:
    tid: int
    mask: frozenset[int]  # the set it settled on (its last, see settled_mask)
    history: list[tuple[str, int]]  # every allowed set seen, in order, with its sample count
    ran_on: frozenset[int]
    cpu_changes: int
    nr_migrations: int | None


@dataclass
class ObservedRank:
    host: str
    rank: int | None
    launcher_cpus: frozenset[int]
    threads: list[ObservedThread]
    env: dict[str, str]
    samples: int
    node_layout: str = ""
    main_tid: int | None = None  # the program's first thread: OpenMP's thread 0
    openmp_runtimes: list[str] = field(default_factory=list)  # libgomp, libomp, libiomp5 if mapped
    pid: int | None = None  # the program's PID, and the launcher's above its probe: the run's processes
    launcher_pid: int | None = None
    table: tuple[str, str] | None = None  # (boot id, PID namespace): the process table they are in

    @property
    def main(self) -> ObservedThread | None:
        return next((t for t in self.threads if t.tid == self.main_tid), None)

    @property
    def others(self) -> list[ObservedThread]:
        return [t for t in self.threads if t.tid != self.main_tid]

    @property
    def node_id(self) -> int | None:
        value = self.env.get("SLURM_NODEID", "")
        return int(value) if value.isdigit() else None


@dataclass
class PlacementCheck:
    verdict: str  # match, mismatch, partial, unobserved
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # seen, not a disagreement: a library's helper threads
    ranks: list[dict] = field(default_factory=list)  # per rank: predicted and observed sets
    migrations: int = 0  # se.nr_migrations summed over threads (scheduler moves)
    cpu_changes: int = 0  # CPU changes between samples, summed over threads
    threads_seen: int = 0

    def to_facts(self) -> dict:
        more = len(self.problems) - MAX_PROBLEMS
        return {"verdict": self.verdict,
                "problems": self.problems[:MAX_PROBLEMS] + ([f"... and {more} more"] if more > 0 else []),
                "notes": self.notes[:MAX_PROBLEMS], "ranks": self.ranks, "migrations": self.migrations,
                "cpu_changes": self.cpu_changes,
                "threads_seen": self.threads_seen}


def _cpus(text: object) -> frozenset[int]:
    if not isinstance(text, str) or len(text) > 100_000:
        raise ValueError("bad cpu list")
    cpus = parse_cpulist(text)
    if len(cpus) > 65536 or any(c < 0 or c >= 65536 for c in cpus):
        raise ValueError("cpu list out of range")
    return frozenset(cpus)


def settled_mask(history: list[tuple[str, int]]) -> str:
    """The set a thread settled on: its last one. Earlier sets are moves made while the program
    started (libgomp binds the initial thread as it loads; hwloc moves Open MPI's main thread over
    every CPU in MPI_Init, for tens of milliseconds in a VM where CPUID traps), not its placement."""
    return history[-1][0] if history else ""


def _thread(raw: dict) -> ObservedThread:
    history = [(str(m), int(n)) for m, n in list(raw.get("history") or [])[:256]]
    ran_on = frozenset(int(c) for c in dict(raw.get("cpus") or {}))
    migrations = raw.get("nr_migrations")
    return ObservedThread(int(raw["tid"]), _cpus(settled_mask(history)), history, ran_on,
                          int(raw.get("cpu_changes") or 0), int(migrations) if isinstance(migrations, int) else None)


def read_record(path: Path) -> ObservedRank | None:
    """One probe record, None when it is unreadable, cut short or not ours."""
    try:
        if path.stat().st_size > MAX_RECORD_BYTES:
            return None
        raw = json.loads(path.read_text())
        rank = raw.get("rank")
        return ObservedRank(
            host=str(raw["host"])[:255], rank=rank if isinstance(rank, int) else None,
            launcher_cpus=_cpus(raw["launcher_cpus"]),
            threads=[_thread(t) for t in list(raw.get("threads") or [])[:4096]],
            env={str(k): str(v)[:1000] for k, v in dict(raw.get("env") or {}).items()},
            samples=int(raw.get("samples") or 0), node_layout=str(raw.get("node_layout") or "")[:1_000_000],
            main_tid=raw["main_tid"] if isinstance(raw.get("main_tid"), int) else None,
            openmp_runtimes=[str(x)[:100] for x in list(raw.get("openmp_runtimes") or [])[:8]],
            pid=_pid(raw.get("pid")), launcher_pid=_pid(raw.get("launcher_pid")),
            table=(str(raw["boot_id"])[:64], str(raw["pid_ns"])[:64])
            if raw.get("boot_id") and raw.get("pid_ns") else None)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _pid(value) -> int | None:
    return value if type(value) is int and 0 < value < 2**22 else None


def read_observations(run_dir: Path) -> list[ObservedRank]:
    """Every readable probe record of a run, in rank order."""
    folder = run_dir / PROBE_DIR
    if not folder.is_dir():
        return []
    paths = sorted(folder.glob("probe-*.json"))[:MAX_RECORDS]
    records = [r for r in map(read_record, paths) if r is not None]
    return sorted(records, key=lambda r: (r.rank is None, r.rank or 0, r.host))


def compare(pred: Prediction, observed: list[ObservedRank], hosts: list[str] | None = None,
            threads_per_rank: int = 1) -> PlacementCheck:
    """The verdict of a run's placement: see the module docstring."""
    check = PlacementCheck("match")
    for rank in observed:
        for t in rank.threads:
            check.migrations += t.nr_migrations or 0
            check.cpu_changes += t.cpu_changes
            check.threads_seen += 1
    if not observed:
        check.verdict = "unobserved"
        check.problems.append("no probe record came back (is the run directory shared with the nodes?)")
        return check
    by_rank = {r.rank: r for r in observed if r.rank is not None}
    if len(observed) == 1 and observed[0].rank is None and len(pred.tasks) == 1:
        by_rank = {pred.tasks[0].rank: observed[0]}  # a single process without an MPI rank variable
    incomplete, gaps = False, []
    extra = sorted(set(by_rank) - {t.rank for t in pred.tasks})
    if extra:
        check.problems.append(f"ranks {compress_cpulist(extra)} ran but were not predicted")
    node_hosts: dict[int, str] = {}
    for task in pred.tasks:
        seen = by_rank.get(task.rank)
        if seen is None:
            gaps.append(f"rank {task.rank}: no probe record (it did not start, or died before writing it)")
            continue
        row = {"rank": task.rank, "node": task.node, "host": seen.host,
               "predicted": compress_cpulist(sorted(task.cpus)),
               "observed": compress_cpulist(sorted(seen.launcher_cpus)),
               "threads_predicted": [compress_cpulist(sorted(t)) for t in task.threads],
               "threads_observed": [compress_cpulist(sorted(t.mask)) for t in seen.threads]}
        check.ranks.append(row)
        check.problems += _node_problems(task, seen, hosts, node_hosts)
        if seen.launcher_cpus != task.cpus:
            check.problems.append(f"rank {task.rank} on {seen.host}: bound to CPUs {row['observed']}, "
                                  f"predicted {row['predicted']}")
            continue  # its threads follow the wrong set: one reason is enough
        thread_problems, notes, thread_incomplete = _thread_problems(task, seen, threads_per_rank)
        check.problems += thread_problems
        check.notes += notes
        incomplete |= thread_incomplete
    if check.problems:
        check.verdict = "mismatch"
    elif incomplete or gaps:
        check.verdict = "partial"
    check.problems += gaps
    return check


def _node_problems(task: TaskPlacement, seen: ObservedRank, hosts: list[str] | None,
                   node_hosts: dict[int, str]) -> list[str]:
    if hosts and task.node < len(hosts):
        short = seen.host.split(".")[0]
        if short != hosts[task.node].split(".")[0]:
            return [f"rank {task.rank}: ran on {seen.host}, predicted on node {task.node} ({hosts[task.node]})"]
        return []
    if seen.node_id is not None and seen.node_id != task.node:
        return [f"rank {task.rank}: ran on node {seen.node_id} ({seen.host}), predicted on node {task.node}"]
    known = node_hosts.setdefault(task.node, seen.host)
    if known != seen.host:
        return [f"rank {task.rank}: ran on {seen.host}, but other ranks predicted on node {task.node} ran on {known}"]
    if list(node_hosts.values()).count(seen.host) > 1:
        return [f"rank {task.rank}: ranks predicted on different nodes share host {seen.host}"]
    return []


def _thread_problems(task: TaskPlacement, seen: ObservedRank, threads: int) -> tuple[list[str], list[str], bool]:
    """(problems, notes, incomplete) for the threads of one rank whose own binding matched.

    Thread 0 is the program's main thread: it must sit on the first predicted set (the rank's set
    when nothing binds threads). No thread may leave the rank's set. Other threads inside the set
    but on no predicted one are noted, not flagged: an MPI library's helper threads inherit the set
    of their creator at that moment (Open MPI creates some while hwloc has moved the main thread).
    A predicted set no thread had means the threads lived between two samples, or the runtime put
    two of them together: `incomplete` (partial), with the reason among the problems' notes."""
    def shown(cpus: frozenset[int]) -> str:
        return compress_cpulist(sorted(cpus))

    wanted = task.thread_cpus(threads)
    problems = [f"rank {task.rank} thread {t.tid}: ran on CPUs {shown(t.mask)}, outside the rank's "
                f"{shown(task.cpus)}" for t in seen.threads if not t.mask <= task.cpus]
    main = seen.main
    if main is not None and main.mask != wanted[0]:
        problems.append(f"rank {task.rank} thread 0 (the main thread): bound to CPUs {shown(main.mask)}, "
                        f"predicted {shown(wanted[0])}")
    expected = set(wanted) | {task.cpus}
    odd = sorted({shown(t.mask) for t in seen.others if t.mask <= task.cpus and t.mask not in expected})
    notes = [f"rank {task.rank}: other threads on CPUs {', '.join(odd)} (a library's helper threads?)"] if odd else []
    missing = Counter(wanted[1:]) - Counter(t.mask for t in seen.others) if task.threads else Counter()
    if missing:
        notes.append(f"rank {task.rank}: no thread seen on CPUs "
                     f"{', '.join(shown(m) for m in sorted(missing.elements(), key=min))} (between samples?)")
    return problems, notes, bool(missing) or main is None
