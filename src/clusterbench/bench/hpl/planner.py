"""The HPL calculator: problem size N, block size NB, process grids P x Q, rank layouts.

The memory rule is applied to the *element count*: the matrix holds N^2 doubles of 8 bytes,
so filling a fraction f of memory M gives N = sqrt(f * M / 8). Applying f to sqrt(M/8)
instead (as some published scripts did) fills only f^2 of memory: 64% for f = 0.8.
N is then rounded down to a multiple of NB so that every block is full.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from clusterbench.errors import UserInputError

BYTES_PER_DOUBLE = 8


def hpl_flops(n: int) -> float:
    """The operation count HPL itself uses to compute Gflops: 2/3 N^3 + 3/2 N^2."""
    return 2.0 / 3.0 * n**3 + 1.5 * n**2


def n_for_memory(memory_bytes: float, fraction: float, nb: int) -> int:
    """N = floor(sqrt(f * M / 8) / NB) * NB."""
    if not 0 < fraction <= 1:
        raise UserInputError(f"memory fraction must be in (0, 1], got {fraction}")
    if nb <= 0:
        raise UserInputError(f"NB must be positive, got {nb}")
    return int(math.sqrt(fraction * memory_bytes / BYTES_PER_DOUBLE) // nb) * nb


def n_for_time(seconds: float, rpeak_gflops: float, efficiency: float, nb: int) -> int:
    """Largest multiple of NB whose HPL solve takes about `seconds` at efficiency x Rpeak."""
    rate = rpeak_gflops * 1e9 * efficiency
    n = int((1.5 * seconds * rate) ** (1 / 3))
    while n > 0 and hpl_flops(n) / rate > seconds:
        n -= 1
    return max(nb, n // nb * nb)


def matrix_bytes(n: int) -> int:
    return BYTES_PER_DOUBLE * n * n


def usable_memory(per_node_bytes: list[int]) -> int:
    """All nodes together; HPL distributes evenly, so the smallest node limits each share."""
    if not per_node_bytes:
        raise UserInputError("no node memory known")
    return min(per_node_bytes) * len(per_node_bytes)


@lru_cache(maxsize=256)
def grids(ranks: int, ethernet: bool = False) -> list[tuple[int, int]]:
    """All P x Q = ranks with P <= Q, best first.

    Squarest first (the HPL FAQ: P and Q about equal, Q slightly larger). On Ethernet the FAQ
    advises flat grids (1x4, 1x8, 2x4) because the panel broadcast along a row is the
    bottleneck, so there the flattest comes first.
    """
    if ranks <= 0:
        raise UserInputError(f"rank count must be positive, got {ranks}")
    found = [(p, ranks // p) for p in range(1, int(math.isqrt(ranks)) + 1) if ranks % p == 0]
    return sorted(found, key=lambda g: g[0]) if ethernet else sorted(found, key=lambda g: g[1] - g[0])


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


def check_problem(n: int, nb: int, p: int, q: int, ranks: int,
                  available_bytes: int | None, headroom: float = 0.10, require_multiple: bool = True) -> None:
    """Refuse, before anything runs, a problem HPL would reject or that would swap.

    HPL itself accepts an N that is not a multiple of NB (the last block is partial); the
    planner insists on it because a partial block wastes work, campaigns may relax it.
    """
    if n <= 0 or nb <= 0:
        raise UserInputError(f"N and NB must be positive (N={n}, NB={nb})")
    if p * q != ranks:
        options = ", ".join(f"{a}x{b}" for a, b in grids(ranks))
        raise UserInputError(f"P x Q = {p}x{q} = {p * q} does not equal the {ranks} MPI ranks",
                             hint=f"grids for {ranks} ranks: {options}")
    if require_multiple and n % nb:
        lower = n // nb * nb
        raise UserInputError(f"N={n} is not a multiple of NB={nb}",
                             hint=f"use N={lower} or N={lower + nb}")
    if available_bytes is not None:
        limit = available_bytes * (1 - headroom)
        need = matrix_bytes(n)
        if need > limit:
            biggest = int(math.sqrt(limit / BYTES_PER_DOUBLE) // nb) * nb
            raise UserInputError(
                f"N={n} needs {need / 2**30:.1f} GiB for the matrix, more than the "
                f"{limit / 2**30:.1f} GiB usable ({int(headroom * 100)}% headroom kept)",
                hint=f"the largest N that fits with NB={nb} is {biggest}")
