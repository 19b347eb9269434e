"""The shape every benchmark module has: inputs, command, environment, parser, verdict.

A benchmark instance is one parameter point. The executor calls, in order: `prepare(workdir)`
to write input files, `command()` and `env()` to launch, then `parse(workdir)` to turn the
outputs into an `Outcome` (metrics and validity). `artifacts` names the raw outputs kept.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from clusterbench.bench.metrics import Outcome


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
