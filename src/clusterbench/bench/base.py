"""The shape every benchmark module has: inputs, command, environment, parser, verdict.

A benchmark instance is one parameter point. The executor calls, in order: `prepare(workdir)`
to write input files, `command()` and `env()` to launch, then `parse(workdir)` to turn the
outputs into an `Outcome` (metrics and validity). `artifacts` names the raw outputs kept.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from clusterbench.bench.metrics import Outcome
from clusterbench.launch.mpirun import MpiLaunch, mpirun_command
from clusterbench.plan.hpl import Layout


class Benchmark(ABC):
    name: str = ""
    artifacts: tuple[str, ...] = ("stdout.txt", "stderr.txt")

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

    def env(self) -> dict[str, str]:
        return self.layout.env()

    def mpi_launch(self) -> MpiLaunch:
        bind = self.bind_to if self.layout.threads_per_rank == 1 else "none"
        return MpiLaunch(ranks=self.layout.ranks, env=self.env(), bind_to=bind)

    def command(self) -> list[str]:
        return mpirun_command(self.mpi_launch(), [self.binary])

    def launcher(self) -> dict:
        launch = self.mpi_launch()
        return {"name": "mpirun", "ranks": launch.ranks, "bind_to": launch.bind_to}
