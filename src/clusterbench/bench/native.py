"""What clusterbench's own C kernels share: build on first use.

A kernel module declares `kernel` (the C source name), whether it needs MPI, OpenMP or BLAS,
its own parameters and `arguments()`; this base class compiles it through the build cache
(native/build.py) when an instance is made, so a compiler error stops a campaign before its
first run. Placement and launch are bench/program.py's, the same as for the official codes:
one process when it can, else through `mpirun` (several ranks, or always for MPI-only kernels).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import ClassVar

from clusterbench.bench.params import Param
from clusterbench.bench.placement import PLACEMENT_PARAMS
from clusterbench.bench.program import PlacedProgram
from clusterbench.errors import UserInputError
from clusterbench.native import build as native
from clusterbench.system.discover import SystemInfo

KERNEL_PARAMS = (
    *PLACEMENT_PARAMS,
    Param("cflags", str, None, f"compiler flags (default: $CLUSTERBENCH_CFLAGS or '{native.DEFAULT_CFLAGS}')"),
)


@dataclass
class NativeKernel(PlacedProgram):
    """A C kernel of clusterbench's own, compiled for the point's MPI and flags when made."""

    kernel: ClassVar[str] = ""
    openmp: ClassVar[bool] = False
    libs: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_point(cls, point: dict) -> NativeKernel:
        mpi = cls.needs_mpi or point["ranks"] > 1
        cflags = shlex.split(point["cflags"]) if point.get("cflags") else None
        built = native.build(cls.kernel, mpi=mpi, openmp=cls.openmp, libs=cls.libs, cflags=cflags,
                             defines=("USE_MPI",) if mpi and not cls.needs_mpi else (), mpi_choice=point.get("mpi"))
        return cls.placed(point, built.binary)

    @classmethod
    def available(cls) -> tuple[bool, str]:
        try:
            native.find_compiler(cls.needs_mpi)
        except UserInputError as exc:
            return False, f"{exc.message} ({exc.hint})"
        return True, f"built on first use with {'mpicc' if cls.needs_mpi else 'cc or mpicc'}"


# Deliberately low rates for a first guess of a kernel's duration, before the store has
# learned real ones (campaign ETAs correct themselves from measured durations).
GUESS_MEMORY_BYTES_S = 4e9
GUESS_START_S = 1.0  # mpirun start-up, allocation, first touch


def memory_limit(system: SystemInfo, fraction: float = 0.6) -> int | None:
    """Bytes a kernel's arrays may take: a fraction of MemAvailable (else MemTotal)."""
    mem = system.memory
    if mem and mem.available_bytes:
        return int(mem.available_bytes * fraction)
    total = system.memory_bytes()
    return int(total * fraction) if total else None


def have_library(name: str) -> bool:
    """Is lib<name>.so (the development link) where the compiler will look?"""
    from clusterbench.system.software import multiarch_triplet

    dirs = [f"/usr/lib/{multiarch_triplet()}", "/usr/lib", "/usr/lib64", "/usr/local/lib",
            *os.environ.get("LIBRARY_PATH", "").split(os.pathsep)]
    return any(os.path.exists(os.path.join(d, f"lib{name}.so")) for d in dirs if d)
