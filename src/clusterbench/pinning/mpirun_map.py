"""Open MPI 4.1's first step, mapping: which node each process goes to and the object it is placed
on (its locale), as orte/mca/rmaps/round_robin (rmaps_rr_mappers.c) and rmaps/ppr (rmaps_ppr.c) do it.
The order processes land on a node matters later: the i-th one there gets the i-th object when
locations are assigned, and binding walks them in that order.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.errors import UserInputError
from clusterbench.pinning.mpirun_common import objects
from clusterbench.pinning.mpirun_policy import Policy
from clusterbench.system.topology import Topology


class Objects:
    """The objects of each kind and their cpu counts, worked out once per prediction (every node
    has the same topology)."""

    def __init__(self, topo: Topology, hwthreads: bool):
        self.topo, self.hwthreads = topo, hwthreads
        self._objs: dict[str, list[frozenset[int]]] = {}
        self._npus: dict[str, list[int]] = {}
        self._touching: dict[tuple[str, frozenset[int]], list[int]] = {}

    def __call__(self, kind: str) -> list[frozenset[int]]:
        if kind not in self._objs:
            self._objs[kind] = objects(self.topo, kind)
        return self._objs[kind]

    def npus(self, kind: str) -> list[int]:
        if kind not in self._npus:
            self._npus[kind] = [npus(self.topo, obj, self.hwthreads) for obj in self(kind)]
        return self._npus[kind]

    def touching(self, kind: str, cpus: frozenset[int]) -> list[int]:
        """Indexes of the `kind` objects sharing a PU with `cpus`, in logical order."""
        key = (kind, cpus)
        if key not in self._touching:
            self._touching[key] = [k for k, obj in enumerate(self(kind)) if not obj.isdisjoint(cpus)]
        return self._touching[key]


@dataclass(eq=False)  # identity: two processes on the same object are still two
class Proc:
    """One process as the mapper left it: its node, the object it was placed on, its rank once known."""

    node: int
    locale: frozenset[int]  # PUs of the object the mapper put it on (the whole node for slot/node)
    rank: int = -1


def npus(topo: Topology, obj: frozenset[int], hwthreads: bool) -> int:
    """Open MPI's cpus in an object (opal_hwloc_base_get_npus): its hardware threads when they count
    as cpus, else its cores; a lone hardware thread or core counts one."""
    if hwthreads or len(obj) == 1:
        return len(obj)
    return sum(1 for c in topo.cores if obj.issuperset(c)) or 1


def alloc_error(np: int) -> UserInputError:
    return UserInputError(
        f"There are not enough slots available in the system to satisfy the {np} slots that were requested "
        "by the application (what Open MPI says: it will not oversubscribe)", where="-np",
        hint="fewer ranks, more nodes or ranks per node, or --oversubscribe")


def map_processes(objs: Objects, policy: Policy, np: int, nodes: int, slots: int) -> list[list[Proc]]:
    """Step 1: the processes of each node in the order they were placed there, with their locale."""
    placed: list[list[Proc]] = [[] for _ in range(nodes)]
    refuse = not policy.oversubscribe
    if policy.map == "ppr":
        return _map_ppr(objs, policy, np, placed, slots, refuse)
    if slots * nodes < np and refuse:
        raise alloc_error(np)
    if policy.map in ("slot", "node"):
        machine = objs("machine")[0]
        counts = _by_slot(np, nodes, slots) if policy.map == "slot" else _by_node(np, nodes, slots)
        for node, count in enumerate(counts):
            placed[node] = [Proc(node, machine) for _ in range(count)]
        return placed
    targets = objs(policy.map)
    if not targets:
        raise UserInputError(f"No objects of the specified type were found on at least one node: "
                             f"{policy.map} (what Open MPI says: the map cannot be done as specified)",
                             where="--map-by", hint="this topology names no such object; map by core, socket or numa")
    placed = _by_object_span(placed, np, targets) if policy.span else _by_object(placed, np, slots, targets)
    cpus = dict(zip(targets, objs.npus(policy.map), strict=True))
    short = min((cpus[p.locale] for procs in placed for p in procs), default=policy.pe)
    if policy.pe > short:  # Open MPI checks each object it maps a process to
        raise UserInputError(f"A request for multiple cpus-per-proc (PE={policy.pe}) was given, but also a mapping "
                             f"to an object level that has less cpus than requested ({policy.map}: {short}); "
                             "Open MPI refuses this", where="--map-by",
                             hint="map by a larger object (socket, numa, slot) or lower PE")
    return placed


def _by_slot(np: int, nodes: int, slots: int) -> list[int]:
    """Ranks per node by slot: fill each node's slots in turn; oversubscribed, the rest spread
    evenly, one more on the first nodes."""
    counts = [min(slots, max(0, np - slots * n)) for n in range(nodes)]
    extra, first = divmod(np - sum(counts), nodes)
    return [c + extra + (n < first) for n, c in enumerate(counts)]


def _by_node(np: int, nodes: int, slots: int) -> list[int]:
    """Ranks per node by node (rmaps_rr_mappers.c): an even share on every node with room, one more
    on the first nodes for the remainder, repeated over the nodes that took some; then one per node
    in turn."""
    counts = [0] * nodes
    over = slots * nodes < np
    mapped, active = 0, nodes
    while mapped < np and active > 0:
        left = np - mapped
        share = left // active or 1
        rest = left - share * active
        base = int(rest / active)  # C's (int) cast: towards zero
        bonus = max(0, rest - base * active)  # how many nodes take one more
        active = 0
        for n in range(nodes):
            free = slots - counts[n]
            if not over and free <= 0:
                continue
            want = share + base + (bonus > 0)
            bonus -= bonus > 0
            active += 1
            take = min(want if over else min(want, free), np - mapped)
            counts[n] += take
            mapped += take
            if mapped == np:
                break
    extra, first = divmod(np - mapped, nodes)
    return [c + extra + (n < first) for n, c in enumerate(counts)]


def _by_object(placed, np, slots, objs):
    """By object (no SPAN): fill a node's slots cycling over its objects, then the next node;
    oversubscribed, one more rank per node per round, starting where the node's cycle stopped."""
    mapped, second = 0, False
    while mapped < np:
        for node, procs in enumerate(placed):
            want, start = slots - len(procs), 0
            if want < 1:
                if not second:
                    continue
                want, start = 1, len(procs) % len(objs)
            take = min(want, np - mapped)
            procs += [Proc(node, objs[(i + start) % len(objs)]) for i in range(take)]
            mapped += take
            if mapped == np:
                break
        second = True
    return placed


def _by_object_span(placed, np, objs):
    """By object with SPAN: the ranks balanced over all objects of all nodes, in blocks per object."""
    total = len(objs) * len(placed)
    share = np // total or 1
    extra = max(0, np - share * total)
    mapped = 0
    for node, procs in enumerate(placed):
        for obj in objs:
            take = min(share + (extra > 0), np - mapped)
            extra -= extra > 0
            procs += [Proc(node, obj) for _ in range(take)]
            mapped += take
        if mapped == np:
            break
    return placed


def _map_ppr(objs, policy, np, placed, slots, refuse):
    """ppr:N:obj (rmaps_ppr.c): N ranks on every such object of a node, node after node, until all
    are placed; a node given more ranks than slots is refused unless oversubscribing."""
    count, kind = policy.ppr
    targets = objs("machine" if kind == "node" else kind)
    if not targets:
        raise UserInputError(f"ppr:{count}:{kind}: this topology has no {kind} object", where="--map-by")
    mapped = 0
    for node, procs in enumerate(placed):
        for obj in targets:
            take = min(count, np - mapped)
            procs += [Proc(node, obj) for _ in range(take)]
            mapped += take
        if len(procs) > slots and refuse:
            raise alloc_error(np)
        if mapped == np:
            break
    if mapped < np:
        raise UserInputError(f"Your job has requested more processes than the ppr for this topology can support: "
                             f"-np {np}, ppr:{count}:{kind} places {mapped} (Open MPI refuses it too)",
                             where="--map-by", hint="lower -np, raise the ppr count or add nodes")
    policy.map = kind  # the ppr mapper leaves the job mapped by its object (BYSOCKET, ...)
    return placed
