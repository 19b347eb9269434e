"""Where Open MPI's mpirun (4.1) and MPICH's mpiexec (Hydra, in pinning/hydra.py) put each rank,
without running anything.

Open MPI works in four steps, each modelled here as its source does it (orte/mca/rmaps in 4.1):
  1. map: place ranks on nodes and give each a *locale* (the object it was mapped to) - round_robin
     by slot, node or object (rmaps_rr_mappers.c), or ppr (rmaps_ppr.c);
  2. rank: number them (rmaps_base_ranking.c), by slot unless a mapping object or --rank-by says
     otherwise;
  3. assign locations: on each node the i-th process placed there gets the i-th mapping object,
     cycling (rmaps_rr_assign.c);
  4. bind (rmaps_base_binding.c): to the locale itself when binding and mapping name the same object,
     else to the least-used binding object inside the locale, PE=n of them in a row.
The options and their defaults are read in pinning/mpirun_policy.py, step 1 is pinning/mpirun_map.py.
The expectations in
tests/test_pinning_mpirun.py come from mpirun.openmpi 4.1.4 and mpiexec.hydra 4.0.2 themselves
(recordings under tests/fixtures/pinning/mpirun/, made by record.sh there).
"""

from __future__ import annotations

import re
from collections import deque

from clusterbench.errors import UserInputError
from clusterbench.pinning.hydra import hydra_placement, parse_hydra_bindings
from clusterbench.pinning.model import Prediction, TaskPlacement
from clusterbench.pinning.mpirun_common import check_counts, objects, per_node
from clusterbench.pinning.mpirun_map import Objects, Proc, map_processes
from clusterbench.pinning.mpirun_policy import OBJECT_NAMES, Policy, resolve
from clusterbench.system.topology import Topology, parse_cpulist

__all__ = ["hydra_placement", "openmpi_placement", "parse_hydra_bindings", "parse_report_bindings"]


def openmpi_placement(topo: Topology, *, np: int, nodes: int = 1, ppn: int | None = None,
                      map_by: str | None = None, rank_by: str | None = None, bind_to: str | None = None,
                      oversubscribe: bool = False, hwthread_cpus: bool = False) -> Prediction:
    """The placement `mpirun -np NP [--map-by ..] [--rank-by ..] [--bind-to ..]` of Open MPI 4.1 gives
    on `nodes` nodes of topology `topo`. Several nodes: clusterbench's hostfile gives each host
    slots=ppn (ceil(np/nodes) when ppn is None); one node without ppn has no hostfile, so its slots are
    its cores (its hardware threads with --use-hwthread-cpus or --map-by hwthread)."""
    check_counts(np, nodes, ppn, rank_flag="-np", ppn_flag="--ntasks-per-node")
    policy = resolve(np=np, map_by=map_by, rank_by=rank_by, bind_to=bind_to, oversubscribe=oversubscribe,
                     hwthread_cpus=hwthread_cpus, has_numa=bool(objects(topo, "numa")),
                     has_socket=bool(objects(topo, "socket")))
    notes = list(policy.why)
    if ppn is None and nodes == 1:
        slots = len(topo.pus) if policy.hwthreads else len(topo.cores)
        notes.append(f"slots: {slots} {'hardware threads' if policy.hwthreads else 'cores'} "
                     "(one node, no hostfile: Open MPI counts them)")
    else:
        slots = per_node(np, nodes, ppn)
        notes.append(f"slots: {slots} per node (the hostfile's slots={slots})")
    objs = Objects(topo, policy.hwthreads)
    placed = map_processes(objs, policy, np, nodes, slots)
    crowded = next((n for n, procs in enumerate(placed) if len(procs) > slots), None)
    if crowded is not None and not policy.bind_given and policy.bind != "none":
        notes.append(f"binding dropped: node {crowded} has {len(placed[crowded])} ranks on {slots} slots and no "
                     "--bind-to was given (Open MPI does not bind an oversubscribed job by default)")
        policy.bind = "none"
    _rank(objs, policy, placed)
    if nodes > 1 and policy.bind != "none":
        notes.append("each node binds its own ranks, counting from its first object (an Open MPI daemon "
                     "per node); under --do-not-launch mpirun 4.1.4 carries NUMA counts across nodes instead")
    everything = frozenset(topo.pus)
    tasks: list[TaskPlacement] = []
    for node, procs in enumerate(placed):
        cpus = _bind(objs, policy, node, _locations(objs, policy, procs))
        if cpus is None:
            notes.append(f"binding dropped on node {node}: the default binding would put more ranks than cpus "
                         "on an object (Open MPI then binds nobody)")
        for i, proc in enumerate(procs):
            bound = cpus is not None and policy.bind != "none"
            tasks.append(TaskPlacement(proc.rank, node, cpus[i] if bound else everything, bound))
    tasks.sort(key=lambda t: t.rank)
    notes.append(f"Open MPI 4.1: mapping {OBJECT_NAMES[policy.map]}, ranking {OBJECT_NAMES[policy.rank]}"
                 f"{':' + policy.rank_mode.upper() if policy.rank_mode else ''}, binding {OBJECT_NAMES[policy.bind]}"
                 + (f", {policy.pe} cpus per rank" if policy.pe else ""))
    options = {"np": np, "ppn": ppn, "map_by": map_by, "rank_by": rank_by, "bind_to": bind_to,
               "oversubscribe": oversubscribe, "hwthread_cpus": hwthread_cpus}
    effective = {"bind_to": policy.bind, "map_by": policy.map, "rank_by": policy.rank,
                 "from": "given" if policy.bind_given and policy.map_given else "Open MPI 4.1's defaults"
                 + (" (" + "; ".join(policy.why) + ")" if policy.why else "")}
    return Prediction(topo, tasks, "openmpi", nodes, None,
                      {k: v for k, v in options.items() if v not in (None, False)}, notes, effective)


# --------------------------------------------------------------------------- 2. rank

def _rank(objs: Objects, policy: Policy, placed: list[list[Proc]]) -> None:
    """Step 2: the MPI rank of every placed process."""
    if policy.rank == "slot":
        order = [p for procs in placed for p in procs]
    elif policy.rank == "node":  # one per node in turn
        order = [procs[i] for i in range(max(map(len, placed))) for procs in placed if i < len(procs)]
    else:
        if not objs(policy.rank):
            raise UserInputError(f"--rank-by {policy.rank}: this topology has no {policy.rank} object",
                                 where="--rank-by")
        if policy.rank_mode == "span":
            order = _rank_span(placed, objs, policy.rank)
        elif policy.rank_mode == "fill":
            order = [p for procs in placed for p in _rank_fill(procs, objs, policy.rank)]
        else:
            order = [p for procs in placed for p in _rank_cycle(procs, objs, policy.rank)]
    for rank, proc in enumerate(order):
        proc.rank = rank


class _Queues:
    """For each object, the waiting processes whose locale touches it, in placement order; taking a
    process removes it from every queue (lazily). A process on the whole node touches every object."""

    def __init__(self, procs: list[Proc], objs: Objects, kind: str):
        self.procs, self.taken = procs, [False] * len(procs)
        self.queues: dict[int, deque[int]] = {}
        self.everywhere: deque[int] = deque()
        count = len(objs(kind))
        for pos, p in enumerate(procs):
            ks = objs.touching(kind, p.locale)
            if len(ks) == count:
                self.everywhere.append(pos)
            else:
                for k in ks:
                    self.queues.setdefault(k, deque()).append(pos)

    def take(self, k: int) -> Proc | None:
        """The first waiting process on object k, now taken; None when there is none."""
        heads = []
        for q in (self.queues.get(k, ()), self.everywhere):
            while q and self.taken[q[0]]:
                q.popleft()
            if q:
                heads.append(q[0])
        if not heads:
            return None
        pos = min(heads)
        self.taken[pos] = True
        return self.procs[pos]

    def left(self) -> list[Proc]:
        return [p for pos, p in enumerate(self.procs) if not self.taken[pos]]


def _rank_cycle(procs, objs, kind):
    """Ranking by object on one node: each object in turn takes the next waiting process on it."""
    queues, order, k, misses, count = _Queues(procs, objs, kind), [], 0, 0, len(objs(kind))
    while len(order) < len(procs) and misses < count:
        proc = queues.take(k % count)
        misses = misses + 1 if proc is None else 0
        if proc is not None:
            order.append(proc)
        k += 1
    return order + queues.left()


def _rank_fill(procs, objs, kind):
    """Ranking with FILL on one node: every process of an object before the next object."""
    queues, order = _Queues(procs, objs, kind), []
    for k in range(len(objs(kind))):
        while (proc := queues.take(k)) is not None:
            order.append(proc)
    return order + queues.left()


def _rank_span(placed, objs, kind):
    """Ranking with SPAN: one rank per object across all nodes, round after round."""
    queues = [_Queues(procs, objs, kind) for procs in placed]
    order, total = [], sum(map(len, placed))
    while len(order) < total:
        before = len(order)
        for q in queues:
            order += [p for k in range(len(objs(kind))) if (p := q.take(k)) is not None]
        if len(order) == before:
            order += [p for q in queues for p in q.left()]
    return order


# --------------------------------------------------------------------------- 3. locations, 4. bind

def _locations(objs: Objects, policy: Policy, procs: list[Proc]) -> list[frozenset[int]]:
    """Step 3: on each node the i-th process placed there sits on mapping object i (cycling); by
    slot or node, on the whole node; ppr keeps the mapper's objects."""
    if policy.ppr:
        return [p.locale for p in procs]
    if policy.map in ("slot", "node"):
        return [p.locale for p in procs]  # the whole node
    targets = objs(policy.map)
    return [targets[i % len(targets)] for i in range(len(procs))]


def _overload_error(policy: Policy, node: int, bound: int, cpus: int) -> UserInputError:
    return UserInputError(
        f"A request was made to bind to {OBJECT_NAMES[policy.bind]} that would result in binding more processes "
        f"than cpus on a resource (node {node}: {bound} processes, {cpus} cpus); Open MPI refuses this",
        where="--bind-to", hint="--bind-to ...:overload-allowed, fewer ranks, or --bind-to none")


def _bind(objs: Objects, policy: Policy, node: int,
          locales: list[frozenset[int]]) -> list[frozenset[int]] | None:
    """Step 4 on one node (each Open MPI daemon binds its own node's processes, counting afresh):
    the cpus of each process; None when a default binding would overload (then nobody is bound)."""
    if policy.bind == "none" or not locales:
        return [frozenset()] * len(locales)
    targets = objs(policy.bind)
    if not targets:
        raise UserInputError(f"No objects of the specified type were found on at least one node: {policy.bind} "
                             "(what Open MPI says: the map cannot be done as specified)", where="--bind-to",
                             hint="this topology names no such object; bind to core, socket or numa")
    npus = objs.npus(policy.bind)
    used = [0] * len(targets)
    place = _in_place if policy.map == policy.bind else _downward
    out = []
    for locale in locales:
        chosen = place(targets, npus, used, objs.touching(policy.bind, locale), policy, node)
        if chosen is None:
            return None
        out.append(chosen)
    return out


def _in_place(targets, npus, used, near, policy, node):
    """Bind to the mapping object itself; when it is full, to the nearest cousin with room, right then left."""
    k = near[0]
    if npus[k] < used[k] + 1:
        room = [j for j in range(k + 1, len(targets)) if used[j] < npus[j]]
        room = room or [j for j in range(k - 1, -1, -1) if used[j] < npus[j]]
        if room:
            k = room[0]
        elif not policy.overload:
            if policy.bind_given:
                raise _overload_error(policy, node, used[k] + 1, npus[k])
            return None
    used[k] += 1
    return targets[k]


def _downward(targets, npus, used, near, policy, node):
    """Bind to the least-used binding object touching the locale (the first of equals), and with
    PE=n to the objects after it until n cpus are covered."""
    if not near:
        raise UserInputError(f"no {policy.bind} inside the mapping object on node {node}", where="--bind-to")
    k = min(near, key=used.__getitem__)
    cpus: set[int] = set()
    total = 0
    while True:
        if k >= len(targets):
            raise UserInputError(f"not enough {policy.bind}s after the first one for PE={policy.pe} on node {node} "
                                 "(Open MPI cannot bind it either)", where="--map-by", hint="lower PE or -np")
        used[k] += 1
        if npus[k] < used[k] and not policy.overload:
            if policy.bind_given:
                raise _overload_error(policy, node, used[k], npus[k])
            return None
        cpus |= targets[k]
        total += npus[k]
        k += 1
        if total >= policy.pe:
            return frozenset(cpus)


# --------------------------------------------------------------------------- --report-bindings

_REPORT = re.compile(r"^\[(?P<host>[^:\]]+):[^\]]*\]\s+MCW rank (?P<rank>\d+) (?P<what>.*)$")
_CORE = re.compile(r"socket (\d+)\[core (\d+)\[hwt ([\d,-]+)\]\]")


def parse_report_bindings(text: str, topo: Topology | None = None) -> list[dict]:
    """Open MPI's `--report-bindings` lines -> [{"host", "rank", "cpus", "numbering"}] as printed.

    Open MPI names cores by hwloc's logical core index over the node and hardware threads by their
    place in the core ("socket 0[core 1[hwt 0-1]]"); with `topo` these become OS CPU numbers. Without
    it "cpus" holds the logical PU numbers of the "[B./..]" picture and "numbering" says "logical".
    "cpus" is None for "is not bound (or bound to all available processors)": Open MPI prints the
    same line for a rank bound to every CPU of its node, so None does not prove it was left free."""
    out = []
    for line in text.splitlines():
        m = _REPORT.match(line.strip())
        if not m:
            continue
        what = m.group("what")
        cpus = _report_cpus(what, topo) if what.startswith("bound to") else None
        out.append({"host": m.group("host"), "rank": int(m.group("rank")), "cpus": cpus,
                    "numbering": "os" if topo is not None else "logical"})
    return out


def _report_cpus(what: str, topo: Topology | None) -> frozenset[int]:
    if topo is None:
        picture = what.rpartition(":")[2]
        marks = [c for c in picture if c in "B."]
        return frozenset(i for i, c in enumerate(marks) if c == "B")
    cpus = set()
    for _socket, core, hwts in _CORE.findall(what):
        core_pus = topo.cores[int(core)] if int(core) < len(topo.cores) else []
        for h in parse_cpulist(hwts):
            if h >= len(core_pus):
                raise ValueError(f"--report-bindings names core {core} hwt {h}, which the topology lacks")
            cpus.add(core_pus[h])
    return frozenset(cpus)
