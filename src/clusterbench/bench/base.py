"""The shape every benchmark module has: inputs, command, environment, parser, verdict.

A benchmark instance is one parameter point. The executor calls, in order: `prepare(workdir)`
to write input files, `command()` and `env()` to launch, then `parse(workdir)` to turn the
outputs into an `Outcome` (metrics and validity). `artifacts` names the raw outputs kept.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

from clusterbench.bench.hpl.planner import Layout
from clusterbench.bench.metrics import Outcome
from clusterbench.bench.params import Param
from clusterbench.bench.placement import library_path_env
from clusterbench.launch.mpirun import MpiLaunch
from clusterbench.launch.site import LOCAL, Site
from clusterbench.system.discover import SystemInfo
from clusterbench.system.mpi import mpi_stack


class Benchmark(ABC):
    """One benchmark module. Campaigns use the class-level declarations below:

    `parameters` (what a campaign may set), `resolve` (fill in what follows from the others and
    the node), `from_point` (an instance for one resolved point) and `estimate_s` (a duration
    guess for plans and ETAs, refined by measured durations).
    """

    name: str = ""
    artifacts: tuple[str, ...] = ("stdout.txt", "stderr.txt")
    parameters: ClassVar[tuple[Param, ...]] = ()
    open_parameters: ClassVar[bool] = False  # accept undeclared scalar parameters (templates)
    uses_blas: ClassVar[bool] = False  # record which BLAS library the processes loaded
    blas: str | None = None  # the variant asked for, when the run chose one
    site: Site = LOCAL  # where it runs; the executor sets it per run

    @classmethod  # noqa: B027 - an optional hook, empty by default
    def resolve(cls, point: dict, system: SystemInfo) -> None:
        """Complete a checked parameter point in place (ranks, grid, ...). Raise UserInputError."""

    @classmethod
    def from_point(cls, point: dict) -> Benchmark:
        raise NotImplementedError(f"{cls.name} cannot be run from a campaign")

    @classmethod
    def estimate_s(cls, point: dict, system: SystemInfo) -> float | None:
        return None

    @classmethod
    def available(cls) -> tuple[bool, str]:
        """Can it run here? (yes/no, and what it uses or how to install what is missing)"""
        return True, "always"

    @classmethod
    def summary(cls) -> str:
        """First line of the module's docstring: what `clusterbench benchmarks` shows."""
        import sys

        doc = sys.modules[cls.__module__].__doc__ or ""
        return doc.strip().splitlines()[0] if doc.strip() else ""

    @abstractmethod
    def params(self) -> dict:
        """The parameter point, as stored with the run."""

    def prepare(self, workdir: Path) -> None:  # noqa: B027 - optional hook
        """Write input files into the run directory."""

    @abstractmethod
    def command(self) -> list[str]:
        ...

    def env(self) -> dict[str, str]:
        return {}

    def launcher(self) -> dict:
        """How it was launched, stored with the run."""
        return {"name": "local"}

    def node_count(self) -> int:
        return 1

    @abstractmethod
    def parse(self, workdir: Path) -> Outcome:
        ...

    def progress(self, workdir: Path) -> str | None:
        """A short description of where a running benchmark is (for the progress bar)."""
        return None


class MpiBenchmark(Benchmark):
    """A benchmark started as `mpirun -np R BINARY` with a rank/thread layout.

    Subclasses provide `layout` (plan.hpl.Layout), `binary` and `bind_to`. Ranks that run
    several threads are not bound to one core (`--bind-to none`), or their threads would share it.
    """

    layout: Layout
    binary: str
    bind_to: str | None
    map_by: str | None = None
    blas_dir: str | None = None  # put first on LD_LIBRARY_PATH to load this BLAS variant
    interconnect: str | None = None  # None: the site's choice
    mpi: str | None = None  # openmpi, mpich; None: the mpirun on PATH
    uses_blas = True

    def env(self) -> dict[str, str]:
        return self.layout.env() | library_path_env(self.blas_dir)

    def mpi_launch(self) -> MpiLaunch:
        bind = self.bind_to
        if self.layout.threads_per_rank > 1 and bind == "core":
            bind = "none"  # several threads bound to one core would share it
        return MpiLaunch(ranks=self.layout.ranks, env=self.env(), bind_to=bind, map_by=self.map_by,
                         interconnect=self.interconnect, mpi=self.mpi)

    def node_count(self) -> int:
        return max(1, -(-self.layout.ranks // max(self.layout.ranks_per_node, 1)))

    def command(self) -> list[str]:
        return self.site.command(self.mpi_launch(), [self.binary], self.node_count())

    def launcher(self) -> dict:
        launch = self.mpi_launch()
        return {"name": "mpirun", "ranks": launch.ranks, "bind_to": launch.bind_to, "map_by": launch.map_by,
                "nodes": self.node_count()} | mpi_stack(self.mpi).describe() | self.site.describe()
