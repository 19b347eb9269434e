"""How HPCC sizes its other tests from the HPL matrix (HPCC 1.5, src/io.c and STREAM/stream.c).

Every process gets `HPLMaxProcMem = Nmax^2 x 8 / (P x Q)` bytes, and STREAM uses three arrays of
`HPLMaxProcMem / 8 / 3` doubles. A small N therefore gives STREAM arrays that partly live in the
last-level cache.
"""

from __future__ import annotations

import math


def hpcc_process_memory(n: int, processes: int) -> int:
    """HPCC's HPLMaxProcMem: bytes of the largest HPL matrix per process."""
    return n * n * 8 // max(processes, 1)


def hpcc_stream_elements(n: int, processes: int) -> int:
    """Elements of each of HPCC's three STREAM arrays (its STREAM_VectorSize)."""
    return hpcc_process_memory(n, processes) // 8 // 3


def hpcc_n_for_stream(elements: int, processes: int, nb: int = 1) -> int:
    """Smallest N (a multiple of NB) for which HPCC's STREAM arrays have `elements` each."""
    n = math.isqrt(elements * 3 * 8 * processes // 8)
    while hpcc_stream_elements(n, processes) < elements:
        n += 1
    return -(-n // nb) * nb
