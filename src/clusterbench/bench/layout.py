"""How the cores of the nodes are split into MPI ranks and threads per rank: the named layouts.

`mpi` (one rank per core), `hybrid-socket` (one rank per socket, its cores as threads) and
`hybrid-node` (one rank per node), as the HPL FAQ and the published studies use them; and the
thread-count environment that keeps a serial rank serial. Every MPI benchmark may use them
(bench/placement.py); HPL's planner sizes its grids from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Layout:
    """How the cores of the nodes are split into MPI ranks and threads per rank."""

    name: str  # "mpi" (one rank per core), "hybrid-node", "hybrid-socket"
    ranks: int
    threads_per_rank: int
    ranks_per_node: int

    def env(self) -> dict[str, str]:
        return thread_env(self.threads_per_rank)


def thread_env(threads: int) -> dict[str, str]:
    """Thread counts for OpenMP and every threaded BLAS, so a serial rank stays serial."""
    t = str(threads)
    return {"OMP_NUM_THREADS": t, "OPENBLAS_NUM_THREADS": t, "BLIS_NUM_THREADS": t, "MKL_NUM_THREADS": t}


@lru_cache(maxsize=64)
def layouts(nodes: int, sockets: int, cores_per_socket: int) -> dict[str, Layout]:
    cores = sockets * cores_per_socket
    return {
        "mpi": Layout("mpi", nodes * cores, 1, cores),
        "hybrid-socket": Layout("hybrid-socket", nodes * sockets, cores_per_socket, sockets),
        "hybrid-node": Layout("hybrid-node", nodes, cores, 1),
    }
