"""Canonical names for categorical values that people spell many ways: BLAS and interconnect.

Years of output files name the same BLAS `blis_serial`, `blis-serial`, `BLIS.serial` or
`blis.mtu_9000` (the BLAS plus a tuning note). A figure that splits its series on the
spelling draws three lines for one library, and a selection `blas=blis-serial` misses the
other two. So the importer stores the canonical name (the spelling it read is kept beside
it), and selections compare canonical names too.

The canonical BLAS names are the Debian variant directories the live runs use
(`openblas-serial`, `openblas-openmp`, `openblas-pthread`, `blis-openmp`, ...), or the
library alone when the threading is not stated. A name that holds no known library is left
as written: guessing would merge what the user kept apart.
"""

from __future__ import annotations

import re

# spelling (one lower-case token) -> canonical library
BLAS_LIBRARIES = {
    "openblas": "openblas", "blis": "blis", "atlas": "atlas", "mkl": "mkl", "armpl": "armpl",
    "essl": "essl", "libsci": "libsci", "aocl": "blis", "netlib": "netlib", "reference": "netlib",
    "refblas": "netlib", "generic": "netlib",
}
# spelling -> canonical threading
BLAS_THREADING = {
    "serial": "serial", "seq": "serial", "sequential": "serial", "single": "serial", "st": "serial",
    "openmp": "openmp", "omp": "openmp", "pthread": "pthread", "pthreads": "pthread",
}
INTERCONNECTS = {
    "tcp": "tcp", "ethernet": "tcp", "eth": "tcp", "gige": "tcp", "sock": "tcp", "sockets": "tcp",
    "shm": "shm", "sm": "shm", "vader": "shm", "shared": "shm", "shmem": "shm", "self": "shm",
    "ib": "infiniband", "ibv": "infiniband", "infiniband": "infiniband", "openib": "infiniband",
    "verbs": "infiniband", "rdma": "infiniband", "ucx": "ucx", "psm2": "omnipath", "opa": "omnipath",
    "omnipath": "omnipath", "ofi": "ofi", "libfabric": "ofi",
    # Platform MPI's mpirun flags (-IBAL, -UDAPL, -PSM, ...) and Intel MPI's older I_MPI_FABRICS values:
    # IBAL, uDAPL, VAPI, ITAPI and OFA are InfiniBand APIs; PSM (version 1) is QLogic/Intel TrueScale InfiniBand.
    "ibal": "infiniband", "udapl": "infiniband", "dapl": "infiniband", "vapi": "infiniband",
    "itapi": "infiniband", "ofa": "infiniband", "psm": "infiniband", "mx": "myrinet", "gm": "myrinet",
    "myrinet": "myrinet", "elan": "quadrics", "quadrics": "quadrics", "uct": "ucx",
}
MAX_VALUE_CHARS = 200  # longer values are not names: left as they are
_TOKENS = re.compile(r"[A-Za-z]+|\d+")


def canonical_blas(text: str) -> tuple[str, str]:
    """('blis-serial', '') for 'blis_serial'; ('blis', 'mtu_9000') for 'blis.mtu_9000': the
    canonical name and what else the spelling held (tokens joined by '_'), or (text, '') when it
    names no known library."""
    if not isinstance(text, str) or len(text) > MAX_VALUE_CHARS:
        return text, ""
    tokens = _TOKENS.findall(text.lower())
    library = next((BLAS_LIBRARIES[t] for t in tokens if t in BLAS_LIBRARIES), None)
    if library is None:
        return text, ""
    threading = next((BLAS_THREADING[t] for t in tokens if t in BLAS_THREADING), None)
    used = {t for t in tokens if t in BLAS_LIBRARIES} | ({t for t in tokens if BLAS_THREADING.get(t) == threading}
                                                         if threading else set())
    rest = "_".join(t for t in tokens if t not in used)
    return (f"{library}-{threading}" if threading else library), rest


def canonical_interconnect(text: str) -> str:
    """'IBV' -> 'infiniband', '-TCP' -> 'tcp'; an unknown spelling stays as written."""
    if not isinstance(text, str) or len(text) > MAX_VALUE_CHARS:
        return text
    return INTERCONNECTS.get(text.strip().lstrip("-").lower(), text)


def canonical_value(key: str, value):
    """The canonical form of a parameter's value, for the keys that have one; anything else unchanged."""
    if key == "blas":
        return canonical_blas(value)[0]
    if key == "interconnect":
        return canonical_interconnect(value)
    return value
