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

    def on_node(self, node: int) -> list[TaskPlacement]:
        return [t for t in self.tasks if t.node == node]

    def to_dict(self) -> dict:
        return {"launcher": self.launcher, "flavour": self.flavour, "nodes": self.nodes,
                "options": self.options, "notes": self.notes,
                "topology": self.topology.source, "tasks": [t.to_dict() for t in self.tasks]}
