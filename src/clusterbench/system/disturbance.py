"""Was a run disturbed? Other work on its CPUs, steal, a falling clock: measured, with its evidence.

On a shared node (a login node, a partition shared with other jobs, a VM with noisy neighbours) a
run can get a fraction of the CPUs it asked for and still finish "ok": one configuration here gave
4.2, 16.5 and 53.1 Gflop/s in three repeats beside other work. Such a figure is not the machine's,
and a best, a tuner's pick or a baseline must never rest on it. The node-wide CPU shares cannot tell
it: a run that got 5% of a core and one that had the machine both show a busy node.

What is measured, per node, from what the activity sampler already reads (system/sampler.py):
- **other processes on the run's CPUs**: the sampler snapshots the process table (whole at its start,
  then what changed); every process that is not the run's, nor the harness's, and used CPU time
  meanwhile is "other". Its time is put on the CPU it was on at each snapshot. The run's CPUs are
  those where its own processes spent >= 10% of the window, among those its ranks were allowed
  (the placement probes' records; else every CPU of the node): a busy loop on a CPU that a
  one-thread run left idle takes nothing from it, one on the CPU it runs on takes half;
- **steal** on those CPUs (a hypervisor gave them to another guest), from /proc/stat;
- **a falling clock** (cpufreq's current frequency dropping mid-run) where the node shows cpufreq.
A node that throttled is already said by the activity summary (`throttled`); it is evidence too.

Which processes are the run's: everything below the run's supervisor (launch/supervise.py, a
subreaper: the local command and all it started), everything below each rank's launcher (orted,
hydra_pmi_proxy, slurmstepd, mpirun: the parent of the placement probe), and the harness itself
(clusterbench and the sampler, with their ancestors, but not their other children: a test's busy
loop started by the Python that runs clusterbench is other work). Kernel threads are left out by the
sampler. Processes are matched within one process table (boot id and PID namespace), so the ranks of
node2 seen from node1 on a machine whose nodes are namespaces are recognised as the run's.

A node whose run processes are not known (no supervisor or probe record in its process table, e.g.
the remote side of an iperf3 run) is "not judged", and says so: its other work is listed but cannot
be told from the run's own.

Thresholds (THRESHOLDS; documented in docs/noise.md with what a 1-core busy loop does here): other
work took >= 5% of the run's CPU time, or >= 20% of one of its CPUs; steal >= 5%; the clock fell
below 85% of its median. `CLUSTERBENCH_DISTURBANCE=record` measures and stores, but does not flag
(the test suite, whose workers run benchmarks side by side on purpose); `off` skips it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from statistics import median

from clusterbench.system.activity import ProcessUse, Series
from clusterbench.system.topology import compress_cpulist as compress

THRESHOLDS = {"others_percent": 5.0, "others_one_cpu_percent": 20.0, "steal_percent": 5.0,
              "clock_ratio": 0.85}
USED_SHARE = 0.10  # a CPU where the run's processes spent this share of the window is one it ran on
MIN_SECONDS = 0.2  # a window shorter than this says nothing (ticks are 10 ms)
MAX_DEPTH = 64  # ancestors walked up from a process
TOP = 3  # other processes named as evidence per node
HARNESS_STOPS = frozenset({"sshd", "systemd", "init", "slurmd", "process_api"})  # not part of the harness


def mode() -> str:
    """flag (the default), record (measure, store, never flag) or off."""
    value = os.environ.get("CLUSTERBENCH_DISTURBANCE", "flag").strip().lower()
    return value if value in ("flag", "record", "off") else "flag"


@dataclass
class RunProcesses:
    """What identifies a run's processes, per process table (boot id, PID namespace)."""

    below: dict[tuple[str, str], set[int]] = field(default_factory=dict)  # these and all their descendants
    harness: dict[tuple[str, str], set[int]] = field(default_factory=dict)  # these and their ancestors only
    cpus: dict[tuple[str, str], set[int]] = field(default_factory=dict)  # the CPUs the ranks were allowed
    no_run: bool = False  # nothing runs yet (a quiet check): every process but the harness is other work

    def add_below(self, table, *pids: int | None) -> None:
        self.below.setdefault(table, set()).update(p for p in pids if p)

    def add_harness(self, table, *pids: int | None) -> None:
        self.harness.setdefault(table, set()).update(p for p in pids if p)


@dataclass
class NodeVerdict:
    host: str
    judged: bool
    why_not: str | None = None
    others_percent: float | None = None  # of the run's CPU time (its CPUs x the window)
    worst_cpu: tuple[int, float] | None = None  # (CPU, percent of it that went to others)
    steal_percent: float | None = None
    clock: tuple[float, float] | None = None  # (lowest, median) GHz over the run's CPUs
    top: list[dict] = field(default_factory=list)  # the other processes that took most
    worst_taker: dict | None = None  # the other process that took most of the worst CPU
    run_cpus: list[int] = field(default_factory=list)  # the CPUs the run ran on (judged by its processes' time)
    evidence: list[str] = field(default_factory=list)  # what is above a threshold, in words

    def to_facts(self) -> dict:
        out: dict = {"judged": self.judged}
        if self.why_not:
            out["why_not"] = self.why_not
        for key in ("others_percent", "steal_percent"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.run_cpus:
            out["run_cpus"] = compress(self.run_cpus)
        if self.worst_cpu:
            out["worst_cpu"] = {"cpu": self.worst_cpu[0], "percent": self.worst_cpu[1]}
        if self.clock:
            out["clock_ghz"] = {"lowest": self.clock[0], "median": self.clock[1]}
        if self.top:
            out["top"] = self.top
        if self.evidence:
            out["evidence"] = self.evidence
        return out


def judge(series: Series, run: RunProcesses, throttled: list[str] | None = None) -> NodeVerdict:
    """One node's measures and evidence over the sampler's window."""
    host = series.host
    samples = series.samples
    seconds = samples[-1].mono - samples[0].mono if len(samples) > 1 else 0.0
    tick = float(series.header.get("clk_tck") or 100)
    all_cpus = sorted({c for s in samples for c in s.cpu}) or list(range(series.header.get("cpus") or 1))
    table = series.header.get("table")
    verdict = NodeVerdict(host, judged=False)
    if seconds < MIN_SECONDS:
        verdict.why_not = f"a window of {seconds:.2f} s is too short to judge"
        return verdict
    cpus = sorted(run.cpus.get(table) or all_cpus) if table else all_cpus
    verdict.steal_percent = _steal_percent(series, cpus)
    verdict.clock = _clock(series, cpus)
    if not series.procs:
        verdict.why_not = "the sampler did not read the process table (an older sampler?)"
    elif table is None or not (run.no_run or table in run.below or table in run.harness):
        verdict.why_not = "the run's processes on this node are not known (no supervisor or probe record)"
    else:
        verdict.judged = True
        _others(verdict, series, run, table, cpus, seconds * tick)
    _evidence(verdict, cpus, throttled)
    return verdict


def _others(verdict: NodeVerdict, series: Series, run: RunProcesses, table, cpus: list[int],
            window_ticks: float) -> None:
    latest: dict[int, ProcessUse] = {}
    for use in series.procs.values():  # a PID reused during the window: its parent link is the latest's
        if use.pid not in latest or use.last_ticks >= latest[use.pid].last_ticks:
            latest[use.pid] = use
    parent = {pid: use.ppid for pid, use in latest.items()}
    below = run.below.get(table, set()) | {series.header.get("pid") or 0}
    sampler = {series.header.get("pid") or 0, series.header.get("ppid") or 0}
    harness = _ancestors(run.harness.get(table, set()) | sampler, parent, latest)
    own_per_cpu: dict[int, int] = {}
    others = []
    for use in series.procs.values():
        if use.ticks <= 0 or use.pid in harness:
            continue
        if _is_below(use.pid, below, parent):
            for c, t in use.by_cpu.items():
                own_per_cpu[c] = own_per_cpu.get(c, 0) + t
        else:
            others.append(use)
    used = [c for c in cpus if own_per_cpu.get(c, 0) >= USED_SHARE * window_ticks]
    if used:  # where the run really ran: other work on an allowed CPU it left idle took nothing from it
        cpus[:] = used
    verdict.run_cpus = list(cpus)
    on = set(cpus)
    per_cpu = dict.fromkeys(cpus, 0)
    takers = []
    for use in others:
        mine = {c: t for c, t in use.by_cpu.items() if c in on}
        for c, t in mine.items():
            per_cpu[c] += t
        if mine:
            cpu, ticks = max(mine.items(), key=lambda kv: kv[1])
            takers.append((sum(mine.values()), use, cpu, ticks))
    total = sum(per_cpu.values())
    verdict.others_percent = round(min(100.0, 100.0 * total / (window_ticks * len(cpus))), 1)
    worst = max(per_cpu.items(), key=lambda kv: kv[1])
    verdict.worst_cpu = (worst[0], _percent(worst[1], window_ticks))
    on_worst = max(others, key=lambda u: u.by_cpu.get(worst[0], 0), default=None)
    if on_worst is not None and on_worst.by_cpu.get(worst[0], 0):
        verdict.worst_taker = {"pid": on_worst.pid, "comm": on_worst.comm,
                               "percent": _percent(on_worst.by_cpu[worst[0]], window_ticks)}
    for _, use, cpu, ticks in sorted(takers, key=lambda t: -t[0])[:TOP]:
        verdict.top.append({"pid": use.pid, "comm": use.comm, "cpu": cpu,
                            "percent": _percent(ticks, window_ticks)})


def _percent(ticks: float, window_ticks: float) -> float:
    """A share of one CPU, at most 100%: a snapshot puts a process's time since the last one on the CPU
    it is on now, so one that moved between CPUs can seem to have taken more than all of one."""
    return round(min(100.0, 100.0 * ticks / window_ticks), 1)


def _ancestors(pids: set[int], parent: dict[int, int], latest: dict[int, ProcessUse]) -> set[int]:
    """`pids` and their ancestors, up to a session's root (sshd, systemd, init): the harness's chain."""
    out = set()
    for pid in pids:
        for _ in range(MAX_DEPTH):
            if pid <= 1 or pid in out or (pid in latest and latest[pid].comm in HARNESS_STOPS):
                break
            out.add(pid)
            pid = parent.get(pid, 0)
    return out


def _is_below(pid: int, roots: set[int], parent: dict[int, int]) -> bool:
    for _ in range(MAX_DEPTH):
        if pid in roots:
            return True
        if pid <= 1:
            return False
        pid = parent.get(pid, 0)
    return False


def _steal_percent(series: Series, cpus: list[int]) -> float | None:
    samples = series.samples
    steal_at = 7  # STAT_FIELDS: user nice system idle iowait irq softirq steal
    steal = total = 0
    for a, b in zip(samples, samples[1:], strict=False):
        for c in cpus:
            x, y = a.cpu.get(c), b.cpu.get(c)
            if x is None or y is None or len(x) != len(y):
                continue
            d = [max(0, q - p) for p, q in zip(x, y, strict=True)]
            steal, total = steal + d[steal_at], total + sum(d)
    return round(100.0 * steal / total, 1) if total else None


def _clock(series: Series, cpus: list[int]) -> tuple[float, float] | None:
    """(lowest, median) of the run's CPUs' mean clock per sample, without the first and last samples
    (taken before and after the run, when an idle CPU may be clocked down)."""
    means = []
    for s in series.samples[1:-1]:
        values = [s.freqs[c] for c in cpus if c in s.freqs]
        if values:
            means.append(sum(values) / len(values) / 1e6)
    if len(means) < 2:
        return None
    return round(min(means), 2), round(median(means), 2)


def _evidence(verdict: NodeVerdict, cpus: list[int], throttled: list[str] | None) -> None:
    limits = THRESHOLDS
    if verdict.judged and verdict.others_percent is not None:
        named = verdict.top[0] if verdict.top else None
        if verdict.worst_cpu and verdict.worst_cpu[1] >= limits["others_one_cpu_percent"]:
            cpu, percent = verdict.worst_cpu
            taker = verdict.worst_taker
            if taker and taker["percent"] >= 0.5 * percent:  # mostly one process: name it
                verdict.evidence.append(f"{taker['percent']:.0f}% of CPU {cpu} went to pid {taker['pid']} "
                                        f"`{taker['comm']}`")
            else:
                most = f" (most to pid {taker['pid']} `{taker['comm']}`, {taker['percent']:.0f}%)" if taker else ""
                verdict.evidence.append(f"{percent:.0f}% of CPU {cpu} went to other processes{most}")
        elif verdict.others_percent >= limits["others_percent"]:
            who = f" (most to pid {named['pid']} `{named['comm']}`)" if named else ""
            verdict.evidence.append(f"other processes took {verdict.others_percent:.0f}% of the run's "
                                    f"{len(cpus)} CPU(s){who}")
    if verdict.steal_percent is not None and verdict.steal_percent >= limits["steal_percent"]:
        verdict.evidence.append(f"steal {verdict.steal_percent:.0f}% on the run's CPUs (the hypervisor gave "
                                "them to another guest)")
    if verdict.clock and verdict.clock[0] < limits["clock_ratio"] * verdict.clock[1]:
        verdict.evidence.append(f"the clock fell to {verdict.clock[0]:.2f} GHz (median {verdict.clock[1]:.2f})")
    verdict.evidence.extend(f"throttled: {r}" for r in throttled or ())
    if verdict.evidence:
        verdict.evidence = [f"{verdict.host}: {e}" for e in verdict.evidence]


def run_facts(verdicts: list[NodeVerdict]) -> dict:
    """The run's `disturbance` facts (every node's measures), and `disturbed` with the evidence when a
    node is beyond a threshold and the mode is `flag`."""
    chosen = mode()
    if chosen == "off" or not verdicts:
        return {}
    evidence = [e for v in verdicts for e in v.evidence]
    out: dict = {"disturbance": {"nodes": {v.host: v.to_facts() for v in verdicts}, "mode": chosen,
                                 "thresholds": THRESHOLDS}}
    if evidence and chosen == "flag":
        out["disturbed"] = {"evidence": evidence}
    elif evidence:
        out["disturbance"]["evidence"] = evidence  # CLUSTERBENCH_DISTURBANCE=record: measured, not flagged
    return out
