"""A benchmark whose processes are placed: one program, ranks x threads over nodes.

Every benchmark that may run through mpirun or srun is one of these, whether clusterbench
compiles it (bench/native.py: the C kernels) or finds it (bench/official.py: HPL, HPCC, HPCG,
IMB, OSU, STREAM). The resolved parameter point holds the placement (PLACEMENT_PARAMS in
bench/placement.py: nodes, ranks, threads, bind_to, map_by, interconnect, mpi, and for HPL its
layout); `launch()` declares it (launch/spec.py), and launch/site.py alone turns it into the
mpirun (Open MPI or Hydra) or srun line. Subclasses give `arguments()` and `parse()`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from clusterbench.bench.base import Benchmark
from clusterbench.bench.layout import thread_env
from clusterbench.bench.placement import (
    LAYOUT_MAP_BY,
    apply_scaling,
    blas_dir,
    choose_blas,
    core_env,
    library_path_env,
)
from clusterbench.launch.spec import Launch, Placement
from clusterbench.system.discover import SystemInfo
from clusterbench.system.mpi import default_mpi_name


@dataclass
class PlacedProgram(Benchmark):
    point: dict = field(default_factory=dict)
    binary: Path | str | None = None
    blas: str | None = None
    blas_dir: str | None = None
    # Through the launcher even as one process: the run's node is not this machine (the cluster
    # run's per-node suite puts each run on its node with a one-host mpirun).
    on_remote_node: bool = False

    needs_mpi: ClassVar[bool] = False  # MPI-only programs always run under mpirun
    default_ranks: ClassVar[int] = 1  # 0: one rank per core
    threaded_default: ClassVar[bool] = True  # threads default to cores / ranks, else 1
    oversubscribe_when_short: ClassVar[bool] = True  # more ranks than cores: let mpirun oversubscribe
    unbind_threaded_ranks: ClassVar[bool] = False  # bind_to core with several threads per rank -> none

    # ------------------------------------------------------------------ campaign hooks

    @classmethod
    def resolve(cls, point: dict, system: SystemInfo) -> None:
        """Ranks, threads and binding from the benchmark's defaults and the node's cores."""
        apply_scaling(point, system)
        cores = max(system.topology.cores_total, 1)
        nodes = point.get("nodes") or 1
        ranks = point.get("ranks") or (cores * nodes if cls.default_ranks == 0 else cls.default_ranks)
        per_node = -(-ranks // nodes)
        threads = point.get("threads") or (max(cores // per_node, 1) if cls.threaded_default else 1)
        point.update(nodes=nodes, ranks=ranks, threads=threads)
        if not point.get("pinning"):  # a strategy decides the binding (its launcher's defaults): none invented
            point["bind_to"] = point.get("bind_to") or ("core" if threads == 1 else "none")
        if cls.needs_mpi or ranks > 1 or nodes > 1 or point.get("pinning"):  # runs under mpirun: record which MPI
            point["mpi"] = point.get("mpi") or default_mpi_name()
        if cls.uses_blas:
            point["blas"] = choose_blas(point.get("blas"), threads)
        cls.check(point, system)

    @classmethod
    def check(cls, point: dict, system: SystemInfo) -> None:
        """Refuse impossible points before anything runs (subclasses add their limits)."""

    @classmethod
    def placed(cls, point: dict, binary: Path | str) -> PlacedProgram:
        """The instance for a resolved point and the program that runs it (with the BLAS
        variant the point chose put first on the library path)."""
        return cls(point=point, binary=binary, blas=point.get("blas"), blas_dir=blas_dir(point.get("blas")))

    # ------------------------------------------------------------------ running

    def arguments(self) -> list[str]:
        return []

    def params(self) -> dict:
        return self.point

    def env(self) -> dict[str, str]:
        return thread_env(self.point.get("threads") or 1) | library_path_env(self.blas_dir) | core_env(self.blas)

    def node_count(self) -> int:
        return self.point.get("nodes") or 1

    def uses_mpirun(self) -> bool:
        return (self.needs_mpi or self.point.get("ranks", 1) > 1 or self.node_count() > 1
                or bool(self.point.get("pinning")) or self.on_remote_node)  # a strategy needs a launcher to apply it

    def placement(self) -> Placement:
        p = self.point
        ranks, threads = p.get("ranks") or 1, p.get("threads") or 1
        bind = p.get("bind_to")
        if self.unbind_threaded_ranks and threads > 1 and bind == "core":
            bind = "none"  # several threads bound to one core would share it
        return Placement(ranks=ranks, threads=threads, nodes=self.node_count(), bind_to=bind,
                         map_by=p.get("map_by") or LAYOUT_MAP_BY.get(p.get("layout") or ""),
                         interconnect=p.get("interconnect"), mpi=p.get("mpi"), pinning=p.get("pinning"),
                         oversubscribe=self.oversubscribe_when_short and ranks > (os.cpu_count() or 1))

    def launch(self) -> Launch:
        program = (str(self.binary), *self.arguments())
        facts = {"binary": str(self.binary)} if self.binary else {}
        return Launch(program, self.placement() if self.uses_mpirun() else None, self.env(), facts)

    def stdout(self, workdir: Path) -> str:
        try:
            return (workdir / "stdout.txt").read_text(errors="replace")
        except OSError:
            return ""
