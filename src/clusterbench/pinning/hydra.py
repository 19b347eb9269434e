"""Where MPICH's mpiexec (Hydra 4.0) binds each rank, without running anything.

Hydra binds nothing unless told (-bind-to none is its default). With -bind-to OBJ[:N] [-map-by
OBJ[:M]] each node's proxy builds one list of CPU sets (tools/topo/hwloc/topo_hwloc.c,
handle_bitmap_binding) and gives its i-th process (i counted on that node) set i modulo the list's
length, so ranks beyond the list wrap round and share CPUs: Hydra never refuses too many ranks.
  1. map domains: M consecutive -map-by objects each (the default -map-by is the -bind-to value,
     count included), as many as make the object list come out even;
  2. each domain starts at its first hardware thread (hwloc logical order);
  3. round after round, every domain in turn gives the next set: the N binding objects from the one
     holding its start (staying inside the domain when binding objects are smaller), and the start
     moves on by one binding object's worth of hardware threads.
Ranks go to hosts in blocks of -ppn (ceil(n/nodes) when not given: clusterbench's hostfile gives each
host that many), wrapping round when there are more ranks than the blocks hold.
"""

from __future__ import annotations

import re

from clusterbench.errors import UserInputError
from clusterbench.pinning.model import Prediction, TaskPlacement
from clusterbench.pinning.mpirun_common import check_counts, in_logical_order, objects, per_node
from clusterbench.system.topology import Topology

_KINDS = {"machine": "machine", "socket": "socket", "numa": "numa", "core": "core", "hwthread": "hwthread",
          "l3cache": "l3cache", "l3ucache": "l3cache", "l3dcache": "l3cache"}
_UNMODELLED = ("l1cache", "l1dcache", "l1ucache", "l1icache", "l2cache", "l2dcache", "l2ucache", "l2icache",
               "l3icache", "l4cache", "l4dcache", "l4ucache", "l5cache", "l5dcache", "l5ucache")


def hydra_placement(topo: Topology, *, n: int, nodes: int = 1, ppn: int | None = None,
                    map_by: str | None = None, bind_to: str | None = None) -> Prediction:
    """The placement `mpiexec -n N [-ppn P] [-bind-to ..] [-map-by ..]` of MPICH 4.0's Hydra gives on
    `nodes` nodes of topology `topo`."""
    check_counts(n, nodes, ppn, rank_flag="-n", ppn_flag="--ntasks-per-node")
    notes: list[str] = []
    hosts = _hosts(n, nodes, ppn, notes)
    everything = frozenset(topo.pus)  # an unbound task may use every PU of its node
    if not bind_to or bind_to == "none":
        notes.append("Hydra binds nothing unless -bind-to is given" + (" (-map-by alone changes nothing)"
                                                                       if map_by else ""))
        tasks = [TaskPlacement(rank, node, everything, bound=False) for rank, (node, _) in enumerate(hosts)]
    else:
        sets, user = _binding_sets(topo, bind_to, map_by, notes)
        tasks = []
        for rank, (node, local) in enumerate(hosts):
            if user and local >= len(sets):  # -bind-to user: processes beyond the list stay free
                tasks.append(TaskPlacement(rank, node, everything, bound=False))
            else:
                tasks.append(TaskPlacement(rank, node, sets[local % len(sets)]))
        if n > len(sets) and not user and max(local for _, local in hosts) >= len(sets):
            notes.append(f"{len(sets)} binding sets per node: further ranks on a node wrap round and share them "
                         "(Hydra does not refuse)")
    options = {"n": n, "ppn": ppn, "map_by": map_by, "bind_to": bind_to}
    bound = bool(bind_to) and bind_to != "none"
    effective = {"bind_to": bind_to if bound else "none", "map_by": map_by if bound and map_by else None,
                 "from": "given" if bind_to else "Hydra's default: no binding unless -bind-to is given"}
    return Prediction(topo, tasks, "hydra", nodes, None, {k: v for k, v in options.items() if v is not None}, notes,
                      {k: v for k, v in effective.items() if v is not None})


def _hosts(n: int, nodes: int, ppn: int | None, notes: list[str]) -> list[tuple[int, int]]:
    """(node, index on that node) of every rank: blocks of -ppn ranks per host, host after host."""
    if nodes == 1:
        return [(0, r) for r in range(n)]
    block = per_node(n, nodes, ppn)
    notes.append(f"{block} ranks per node in blocks (-ppn {block}, hostfile host:{block})")
    counts = [0] * nodes
    out = []
    for r in range(n):
        node = (r // block) % nodes
        out.append((node, counts[node]))
        counts[node] += 1
    return out


def _object(text: str, flag: str, topo: Topology) -> tuple[list[frozenset[int]], int]:
    """'core:2' -> the core PU sets (duplicates dropped, as Hydra does for MCDRAM) and the count 2."""
    word, _, count = text.partition(":")
    if word in _UNMODELLED or word.startswith(("pci", "gpu", "ib", "hfi", "eth", "en")):
        raise UserInputError(f"{flag} {text}: valid for Hydra but not modelled here", where=flag,
                             hint="machine, socket, numa, l3cache, core or hwthread")
    if word not in _KINDS:
        raise UserInputError(f'unrecognized directive "{text}" (Hydra refuses it too)', where=flag,
                             hint="machine, socket, numa, l3cache, core or hwthread, optionally :N")
    if count and (not count.isdigit() or not 1 <= int(count) <= 65536):
        raise UserInputError(f"{flag} {text}: the count after ':' must be a positive number", where=flag)
    objs = list(dict.fromkeys(objects(topo, _KINDS[word])))
    if not objs:
        raise UserInputError(f'hardware object not found in the target "{word}" (Hydra refuses it too)', where=flag,
                             hint="this topology names no such object")
    return objs, int(count or 1)


def _binding_sets(topo: Topology, bind_to: str, map_by: str | None,
                  notes: list[str]) -> tuple[list[frozenset[int]], bool]:
    """Hydra's list of CPU sets for one node, and whether it came from -bind-to user:."""
    if bind_to.startswith("user:"):
        entries = [entry.split("+") for entry in bind_to[5:].split(",") if entry]
        pus = set(topo.pus)
        if not entries or any(not x.isdigit() or int(x) not in pus for entry in entries for x in entry):
            raise UserInputError(f"-bind-to {bind_to}: give this node's OS CPU numbers, e.g. user:0+2,1+4",
                                 where="-bind-to")
        return [frozenset(int(x) for x in entry) for entry in entries], True
    if bind_to == "rr":  # one hardware thread each, by OS number
        notes.append("-bind-to rr: the i-th rank on a node gets OS CPU i (modulo the number of PUs)"
                     + ("; this node's CPU numbers do not start at 0, so some of those do not exist"
                        if topo.pus != list(range(len(topo.pus))) else ""))
        return [frozenset([i]) for i in range(len(topo.pus))], False
    bind_objs, bind_count = _object(bind_to, "-bind-to", topo)
    map_objs, map_count = _object(map_by or bind_to, "-map-by", topo)
    if not map_by:
        notes.append(f"-map-by defaults to the -bind-to value ({bind_to})")
    return _handle_bitmap_binding(topo, bind_objs, bind_count, map_objs, map_count, map_by or bind_to), False


def _handle_bitmap_binding(topo, bind_objs, bind_count, map_objs, map_count, mapping):
    """The three stages of Hydra's handle_bitmap_binding (see the module docstring)."""
    total = len(topo.pus)
    map_pus = (total // len(map_objs)) * map_count
    if map_pus > total:
        raise UserInputError(f'mapping option "{mapping}" larger than total system size (Hydra refuses it too)',
                             where="-map-by")
    reps = next(i for i in range(1, map_count + 1) if (i * len(map_objs)) % map_count == 0)
    ndomains = reps * len(map_objs) // map_count
    domains, starts = [], []
    for j in range(ndomains):
        members = [map_objs[(j * map_count + k) % len(map_objs)] for k in range(map_count)]
        domains.append(frozenset().union(*members))
        starts.append(in_logical_order(topo, members[0])[0])
    bind_pus = (total // len(bind_objs)) * bind_count
    smaller = bind_pus < map_pus
    if smaller:
        reps = next(i for i in range(1, bind_pus + 1) if (i * map_pus) % bind_pus == 0)
        nsets = reps * map_pus * ndomains // bind_pus
    else:
        nsets = ndomains
    covers = [_covering(topo, d) for d in domains] if smaller else []
    sets: list[frozenset[int]] = []
    while len(sets) < nsets:
        for j in range(ndomains):
            cur = next((k for k, b in enumerate(bind_objs) if starts[j] in b), None)
            if cur is None:
                raise UserInputError(f"CPU {starts[j]} is in no {mapping} binding object", where="-bind-to")
            cpus: set[int] = set()
            for _ in range(min(bind_count, len(bind_objs))):  # further rounds add nothing new
                cpus |= bind_objs[cur]
                if smaller:  # the next binding object inside this domain's covering object
                    cur = next((c % len(bind_objs) for c in range(cur + 1, cur + len(bind_objs))
                                if bind_objs[c % len(bind_objs)] <= covers[j]), cur)
                else:
                    cur = (cur + 1) % len(bind_objs)
            sets.append(frozenset(cpus))
            if smaller:
                order = in_logical_order(topo, domains[j])
                starts[j] = order[(order.index(starts[j]) + bind_pus) % len(order)]
    return sets


def _covering(topo: Topology, cpus: frozenset[int]) -> frozenset[int]:
    """The smallest hwloc object holding all of `cpus` (hwloc_get_obj_covering_cpuset), as its PU set."""
    candidates = [frozenset(topo.pus)]
    for kind in ("socket", "numa", "l3cache", "core", "hwthread"):
        candidates += objects(topo, kind)
    return min((c for c in candidates if cpus <= c), key=len)


_DEBUG = re.compile(r"^(?:\[(?P<rank>\d+)\]\s*)?process (?P<index>\d+) binding: (?P<bits>[01]+)\s*$")


def parse_hydra_bindings(text: str) -> list[dict]:
    """The lines HYDRA_TOPO_DEBUG=1 makes Hydra's proxies print -> [{"rank", "index", "cpus"}].

    "process I binding: 0110..." names the I-th process of a node (not its MPI rank) and sets
    character k for OS CPU k. mpiexec -l puts "[rank] " in front, which gives "rank" (else None).
    The string has one character per hardware thread of the node, so on a node whose CPU numbers
    run past that count (a reserved core, as on LLNL Lassen) the last CPUs never show."""
    out = []
    for line in text.splitlines():
        m = _DEBUG.match(line.strip())
        if m:
            out.append({"rank": int(m.group("rank")) if m.group("rank") else None,
                        "index": int(m.group("index")),
                        "cpus": frozenset(i for i, c in enumerate(m.group("bits")) if c == "1")})
    return out
