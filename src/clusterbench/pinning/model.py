"""What a placement is: for every task (MPI rank) the node it is on and the CPUs it may use,
and for every thread of it the CPUs the OpenMP runtime binds it to.

Every calculator (pinning/slurm.py for srun, pinning/mpirun.py for Open MPI and Hydra,
pinning/openmp.py for the threads inside a task) returns a `Prediction`; the pictures, masks and
JSON (pinning/render.py) and the comparison with what a run really did (pinning/verify.py) read
only this. CPU numbers are always the OS numbers (hwloc's P#, Linux's CPU ids), never logical ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clusterbench.system.topology import Topology, compress_cpulist

LAUNCHERS = ("srun", "openmpi", "hydra", "none")
SLURM_FLAVOURS = ("slurm", "psslurm")


@dataclass(frozen=True)
class TaskPlacement:
    """One task: where the launcher put it, and where its threads go."""

    rank: int  # global task number (MPI rank, Slurm task id)
    node: int  # index of its node in the allocation / host list, from 0
    cpus: frozenset[int]  # OS PU numbers it may run on; every PU of the node when unbound
    bound: bool = True  # False: the launcher left the task free on the node
    threads: tuple[frozenset[int], ...] = ()  # per OpenMP thread (thread 0 first); () = not bound

    def thread_cpus(self, count: int) -> list[frozenset[int]]:
        """The CPU set of each of `count` threads: its own place when bound, else the task's set."""
        if self.threads:
            return [self.threads[i % len(self.threads)] for i in range(count)]
        return [self.cpus] * count

    def to_dict(self) -> dict:
        return {"rank": self.rank, "node": self.node, "bound": self.bound,
                "cpus": compress_cpulist(sorted(self.cpus)),
                "threads": [compress_cpulist(sorted(t)) for t in self.threads]}


@dataclass
class Prediction:
    """A launch's placement on `nodes` nodes of one topology, without running anything."""

    topology: Topology
    tasks: list[TaskPlacement]
    launcher: str  # one of LAUNCHERS
    nodes: int = 1
    flavour: str | None = None  # srun: "slurm" (stock task/affinity) or "psslurm"
    options: dict = field(default_factory=dict)  # the launcher's options as given, for display
    notes: list[str] = field(default_factory=list)  # what the calculator assumed or ignored, and why
    # What the launcher really did once its defaults are filled in (bind_to, map_by, rank_by in the
    # launcher's words, and `from`: why), so a run whose options were left unset is labelled by what ran.
    effective: dict = field(default_factory=dict)

    def on_node(self, node: int) -> list[TaskPlacement]:
        return [t for t in self.tasks if t.node == node]

    def to_dict(self) -> dict:
        return {"launcher": self.launcher, "flavour": self.flavour, "nodes": self.nodes,
                "options": self.options, "notes": self.notes, "effective": self.effective,
                "topology": self.topology.source, "tasks": [t.to_dict() for t in self.tasks]}


def cpu_mask(cpus) -> str:
    """A CPU set as the hexadecimal mask srun --cpu-bind=verbose and taskset print ('0x5' = CPUs 0, 2)."""
    value = 0
    for cpu in cpus:
        value |= 1 << cpu
    return hex(value)


MAX_MASK_CPUS = 1 << 16  # no node has more CPUs; bounds a hostile mask before it is expanded


def parse_mask(text: str) -> frozenset[int]:
    """'0x5', '5', '0x0000,0x0003' (comma-separated 32-bit words, most significant first) -> CPUs.
    ValueError for anything else, or a mask wider than MAX_MASK_CPUS."""
    words = text.strip().lower().split(",")
    digits = "".join(w[2:] if w.startswith("0x") else w for w in words)
    if not digits or len(digits) * 4 > MAX_MASK_CPUS or any(c not in "0123456789abcdef" for c in digits):
        raise ValueError(f"not a CPU mask: {text!r}")
    value = int(digits, 16)
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


def prediction_from_dict(data: dict, topology: Topology) -> Prediction:
    """A stored prediction (Prediction.to_dict) back, on the topology it was made for."""
    from clusterbench.system.topology import parse_cpulist

    tasks = [TaskPlacement(int(t["rank"]), int(t["node"]), frozenset(parse_cpulist(t["cpus"])), bool(t["bound"]),
                           tuple(frozenset(parse_cpulist(c)) for c in t.get("threads") or ()))
             for t in data.get("tasks", [])]
    return Prediction(topology, tasks, str(data.get("launcher")), int(data.get("nodes") or 1), data.get("flavour"),
                      dict(data.get("options") or {}), list(data.get("notes") or []),
                      dict(data.get("effective") or {}))
