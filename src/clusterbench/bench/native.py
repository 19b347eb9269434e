"""What clusterbench's own C kernels share: build on first use, launch, placement parameters.

A kernel module declares `kernel` (the C source name), whether it needs MPI, OpenMP or BLAS,
its own parameters and `arguments()`; this base class compiles it through the build cache
(native/build.py) when an instance is made, so a compiler error stops a campaign before its
first run, and launches it directly (one process) or through `mpirun` (several ranks, or
always for MPI-only kernels), with the binding and thread environment of the point.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from clusterbench.bench.base import Benchmark
from clusterbench.bench.hpl.planner import thread_env
from clusterbench.bench.params import MAX_COUNT, Param
from clusterbench.bench.placement import BIND_CHOICES, MPI_PARAM, blas_dir, choose_blas, library_path_env
from clusterbench.errors import UserInputError
from clusterbench.launch.mpirun import INTERCONNECTS, MpiLaunch
from clusterbench.native import build as native
from clusterbench.system.discover import SystemInfo
from clusterbench.system.mpi import default_mpi_name, mpi_stack

PLACEMENT_PARAMS = (
    Param("nodes", int, 1, "nodes (ranks are spread evenly over them)", minimum=1, maximum=MAX_COUNT),
    Param("ranks", int, None, "MPI ranks (default: the kernel's)", minimum=1, maximum=MAX_COUNT),
    Param("threads", int, None, "OpenMP threads per rank (default: the kernel's)", minimum=1, maximum=MAX_COUNT),
    Param("bind_to", str, None, "mpirun --bind-to: core, socket, numa or none", choices=BIND_CHOICES),
    Param("map_by", str, None, "mpirun --map-by: core, socket, numa, node, ppr:1:socket, ..."),
    Param("interconnect", str, None, "transport: auto, shm, tcp, ib (default: the campaign's, else auto)",
          choices=INTERCONNECTS),
    MPI_PARAM,
    Param("cflags", str, None, f"compiler flags (default: $CLUSTERBENCH_CFLAGS or '{native.DEFAULT_CFLAGS}')"),
)
BLAS_PARAM = Param("blas", str, None, "BLAS variant (openblas-serial, blis-openmp, ...) or 'default'")


@dataclass
class NativeKernel(Benchmark):
    point: dict = field(default_factory=dict)
    binary: Path | None = None
    blas: str | None = None
    blas_dir: str | None = None

    kernel: ClassVar[str] = ""
    needs_mpi: ClassVar[bool] = False  # MPI-only kernels always run under mpirun
    openmp: ClassVar[bool] = False
    libs: ClassVar[tuple[str, ...]] = ()
    default_ranks: ClassVar[int] = 1
    threaded_default: ClassVar[bool] = True  # threads default to cores / ranks, else 1

    # ------------------------------------------------------------------ campaign hooks

    @classmethod
    def resolve(cls, point: dict, system: SystemInfo) -> None:
        cores = max(system.topology.cores_total, 1)
        nodes = point.get("nodes") or 1
        ranks = point.get("ranks") or (cores * nodes if cls.default_ranks == 0 else cls.default_ranks)
        per_node = -(-ranks // nodes)
        threads = point.get("threads") or (max(cores // per_node, 1) if cls.threaded_default else 1)
        bind = point.get("bind_to") or ("core" if threads == 1 else "none")
        point.update(nodes=nodes, ranks=ranks, threads=threads, bind_to=bind)
        if cls.needs_mpi or ranks > 1 or nodes > 1:  # runs under mpirun: record which MPI
            point["mpi"] = point.get("mpi") or default_mpi_name()
        if cls.uses_blas:
            point["blas"] = choose_blas(point.get("blas"), threads)
        cls.check(point, system)

    @classmethod
    def check(cls, point: dict, system: SystemInfo) -> None:
        """Refuse impossible points before anything runs (subclasses add their limits)."""

    @classmethod
    def from_point(cls, point: dict) -> NativeKernel:
        mpi = cls.needs_mpi or point["ranks"] > 1
        cflags = shlex.split(point["cflags"]) if point.get("cflags") else None
        built = native.build(cls.kernel, mpi=mpi, openmp=cls.openmp, libs=cls.libs, cflags=cflags,
                             defines=("USE_MPI",) if mpi and not cls.needs_mpi else (), mpi_choice=point.get("mpi"))
        blas = point.get("blas")
        return cls(point=point, binary=built.binary, blas_dir=blas_dir(blas), blas=blas)

    @classmethod
    def available(cls) -> tuple[bool, str]:
        try:
            native.find_compiler(cls.needs_mpi)
        except UserInputError as exc:
            return False, f"{exc.message} ({exc.hint})"
        return True, f"built on first use with {'mpicc' if cls.needs_mpi else 'cc or mpicc'}"

    # ------------------------------------------------------------------ running

    def arguments(self) -> list[str]:
        raise NotImplementedError

    def params(self) -> dict:
        return self.point

    def env(self) -> dict[str, str]:
        return thread_env(self.point["threads"]) | library_path_env(self.blas_dir)

    def uses_mpirun(self) -> bool:
        return self.needs_mpi or self.point["ranks"] > 1 or self.node_count() > 1

    def node_count(self) -> int:
        return self.point.get("nodes") or 1

    def mpi_launch(self) -> MpiLaunch:
        return MpiLaunch(ranks=self.point["ranks"], env=self.env(), bind_to=self.point["bind_to"],
                         map_by=self.point.get("map_by"), oversubscribe=self.point["ranks"] > os.cpu_count(),
                         interconnect=self.point.get("interconnect"), mpi=self.point.get("mpi"))

    def command(self) -> list[str]:
        program = [str(self.binary), *self.arguments()]
        return self.site.command(self.mpi_launch(), program, self.node_count()) if self.uses_mpirun() else program

    def launcher(self) -> dict:
        if not self.uses_mpirun():
            return {"name": "local", "binary": str(self.binary)}
        launch = self.mpi_launch()
        return {"name": "mpirun", "ranks": launch.ranks, "bind_to": launch.bind_to, "map_by": launch.map_by,
                "nodes": self.node_count(), "binary": str(self.binary)} | mpi_stack(launch.mpi).describe() \
            | self.site.describe()

    def stdout(self, workdir: Path) -> str:
        try:
            return (workdir / "stdout.txt").read_text(errors="replace")
        except OSError:
            return ""


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
