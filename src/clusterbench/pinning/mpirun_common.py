"""What Open MPI's mpirun and MPICH's Hydra both need: the hardware objects of a node as hwloc lists
them, and the bounds on what a user may ask for.

Both launchers walk hwloc objects in *logical* order (hwloc's L#: the order of the tree, SMT
siblings of a core next to each other), never in OS order, so `objects()` returns the PU sets of
each object in that order; a Linux-numbered SMT machine has PU L#1 = P#128 on a 2 x 64-core EPYC.
"""

from __future__ import annotations

import math

from clusterbench.errors import UserInputError
from clusterbench.system.topology import Topology

MAX_RANKS = 65536  # the bound on ranks and nodes; checked before any list is built



def check_counts(ranks: int, nodes: int, ppn: int | None, *, rank_flag: str, ppn_flag: str) -> None:
    """Refuse counts no launch can have, before anything is sized by them."""
    given = [(ranks, rank_flag), (nodes, "--nodes")] + ([(ppn, ppn_flag)] if ppn is not None else [])
    for value, flag in given:
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserInputError(f"{flag} must be a whole number, not {value!r}", where=flag)
        if not 1 <= value <= MAX_RANKS:
            raise UserInputError(f"{flag} {value} is out of range", where=flag,
                                 hint=f"give a number from 1 to {MAX_RANKS}")


def per_node(ranks: int, nodes: int, ppn: int | None) -> int:
    """Ranks per node as clusterbench writes its hostfile (launch/site.py): -ppn when given, else
    the ranks spread evenly, rounded up."""
    return ppn if ppn is not None else math.ceil(ranks / nodes)


def objects(topo: Topology, kind: str) -> list[frozenset[int]]:
    """The PU sets of every `kind` object of a node, in hwloc's logical order; objects without a PU
    are left out, as both launchers skip objects with nothing to run on."""
    if kind == "hwthread":
        groups: list[list[int]] = [[pu] for pu in topo.logical_pus()]
    elif kind == "core":
        groups = topo.cores
    elif kind == "l3cache":
        groups = topo.l3_groups  # no fallback to NUMA: the launchers fail without an L3 object
    elif kind == "numa":
        groups = [d.cpus for d in topo.numa]
    elif kind == "socket":
        groups = topo.packages
    elif kind == "machine":
        groups = [topo.pus]
    else:
        raise ValueError(kind)
    return [frozenset(g) for g in groups if g]


def in_logical_order(topo: Topology, cpus: frozenset[int]) -> list[int]:
    """The PUs of `cpus` in hwloc's logical order (the order both launchers walk PUs in)."""
    return [pu for pu in topo.logical_pus() if pu in cpus]

