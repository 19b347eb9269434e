"""The node as Slurm sees it (sockets x cores x threads and its CPU map) and one parsed srun request:
shared by the stock task/affinity model (pinning/slurm_affinity.py) and psslurm's (pinning/psslurm.py),
which pinning/slurm.py chooses between."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from clusterbench.errors import UserInputError
from clusterbench.pinning.model import TaskPlacement
from clusterbench.pinning.slurm_options import CpuBind, Distribution
from clusterbench.system.topology import Topology

# --------------------------------------------------------------------------- the node as Slurm sees it

@dataclass(frozen=True)
class NodeShape:
    """Slurm's model of a node: Sockets x CoresPerSocket x ThreadsPerCore, and the map from its
    abstract CPU numbers ((socket * cores + core) * threads + thread, what task/affinity computes in)
    to OS CPU numbers, which slurmd builds from hwloc's logical order (its block_map)."""

    sockets: int
    cores: int  # per socket
    threads: int  # per core
    block_map: tuple[int, ...]  # abstract CPU -> OS CPU
    numa: dict[int, frozenset[int]]  # NUMA node OS index -> OS CPUs (what libnuma reports)
    pus: frozenset[int]
    logical: tuple[int, ...]  # hwloc's logical order (socket, core, thread): block_map before slurmd's fix-up

    @property
    def size(self) -> int:
        return self.sockets * self.cores * self.threads

    @property
    def core_count(self) -> int:
        return self.sockets * self.cores

    def os_cpus(self, abstract) -> frozenset[int]:
        """Abstract CPUs -> the node's OS CPUs (a CPU the node lacks is left out: the kernel ignores it)."""
        return frozenset(self.block_map[a] for a in abstract) & self.pus


def node_shape(topo: Topology) -> NodeShape:
    """The shape `slurmd -C` reports for this topology. Slurm needs every socket to have the same
    number of cores and every core the same number of threads; a topology that has not is refused."""
    by_package: list[list[list[int]]] = [[] for _ in topo.packages]
    for core in topo.cores:
        by_package[topo.package_index(core[0])].append(core)
    counts = {len(p) for p in by_package}
    threads = {len(c) for c in topo.cores}
    if len(counts) != 1 or len(threads) != 1 or 0 in counts:
        raise UserInputError(
            f"Slurm describes a node as sockets x cores x threads, but {topo.source} has "
            f"{sorted(counts)} cores per socket and {sorted(threads)} threads per core",
            where="topology", hint="give a topology whose sockets and cores are all alike")
    logical = [pu for package in by_package for core in package for pu in core]
    # slurmd starts from the identity and skips a CPU whose OS number is not below the CPU count
    block_map = tuple(pu if pu < len(logical) else a for a, pu in enumerate(logical))
    numa = {d.os_index: frozenset(d.cpus) for d in topo.numa}
    return NodeShape(len(by_package), counts.pop(), threads.pop(), block_map, numa, frozenset(logical),
                     tuple(logical))


def shape_notes(shape: NodeShape) -> list[str]:
    """What the node's numbering does to Slurm's masks, said once."""
    if max(shape.pus) < shape.size:
        return []
    return [f"OS CPU numbers reach {max(shape.pus)} but slurmd's map from its CPU numbers to the OS's holds "
            f"{shape.size}: a CPU numbered {shape.size} or above keeps its Slurm number there (xcpuinfo.c), so "
            "task/affinity's masks name other CPUs for those"]


# --------------------------------------------------------------------------- the request

@dataclass
class Request:
    """One srun, checked and parsed: what the layout and the binding code need."""

    ntasks: int
    nodes: int
    cpus_per_task: int
    bind: CpuBind
    dist: Distribution
    hints: frozenset[str]
    overcommit: bool
    exact: bool  # the step gets only the cores it needs (22.05: implied by --cpus-per-task)
    threads_per_core: int | None  # from --hint: 1 = one hardware thread per core
    tasks: list[list[int]] = field(default_factory=list)  # global task ids on each node


def tasks_by_node(req: Request, shape: NodeShape,
                  node_sets: Callable[[int, list[str]], list[frozenset[int]]], notes: list[str]) -> list[TaskPlacement]:
    """Every task's placement, node by node, from `node_sets(task count, notes)`: the CPUs of each
    local task on a node. The nodes are alike, so the sets depend on the task count only: each count
    is worked out once, and only the first node's notes are kept."""
    tasks: list[TaskPlacement] = []
    by_count: dict[int, list[frozenset[int]]] = {}
    for node, ids in enumerate(req.tasks):
        if not ids:
            continue
        if len(ids) not in by_count:
            by_count[len(ids)] = node_sets(len(ids), notes if not by_count else [])
        sets = by_count[len(ids)]
        tasks += [TaskPlacement(rank, node, sets[local], bound=sets[local] != shape.pus)
                  for local, rank in enumerate(ids)]
    return tasks
