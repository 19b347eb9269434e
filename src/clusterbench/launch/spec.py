"""What a benchmark asks the launcher for: its program, and where its processes should go.

A benchmark declares, never builds, its launch: the program and its arguments, the
environment it needs, and a `Placement` (ranks, threads per rank, nodes, binding, mapping,
transport, MPI). `launch/site.py` turns that into the line that runs it in a given place:
the program itself, `mpirun` of Open MPI or of MPICH (Hydra) with a hostfile and the
environment forwarded to remote ranks, or `srun` inside a Slurm job. Benchmarks never see
host names or launcher syntax, and every launcher reads the same declaration.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Placement:
    """Where the processes of one run go. `bind_to`/`map_by` use mpirun's words (core, socket,
    numa, none; core, socket, node, ppr:1:socket:pe=4, ...); `mpi` is openmpi, mpich or None
    (the mpirun on PATH); `interconnect` is auto, shm, tcp or ib (None: the site's choice)."""

    ranks: int = 1
    threads: int = 1  # per rank
    nodes: int = 1
    bind_to: str | None = None
    map_by: str | None = None
    interconnect: str | None = None
    mpi: str | None = None
    oversubscribe: bool = False  # more ranks than cores on one node is allowed (kernels on a small box)
    pinning: str | None = None  # a named strategy (pinning/strategies.py), translated for the launcher


@dataclass(frozen=True)
class Launch:
    """A program to start, with its placement (None: one process, started directly here)."""

    program: tuple[str, ...]
    placement: Placement | None = None
    env: dict[str, str] = field(default_factory=dict)
    facts: dict = field(default_factory=dict)  # stored with the launcher record (binary, server, ...)

    @property
    def nodes(self) -> int:
        return self.placement.nodes if self.placement else 1
