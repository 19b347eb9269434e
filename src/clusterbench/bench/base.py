"""The shape every benchmark module has: inputs, command, environment, parser, verdict.

A benchmark instance is one parameter point. The executor calls, in order: `prepare(workdir)`
to write input files, `launch()` for what to start (its program, environment and placement;
launch/site.py turns that into a command line for the place the run goes), then
`parse(workdir)` to turn the outputs into an `Outcome` (metrics and validity). `artifacts`
names the raw outputs kept. A benchmark never builds an mpirun line or sees a host name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

from clusterbench.bench.declare import Derived, MetricSpec, OutputFormat, Sizing, TimeModel, Tuning
from clusterbench.bench.metrics import Outcome
from clusterbench.bench.params import Param
from clusterbench.launch.spec import Launch
from clusterbench.system.discover import SystemInfo


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
    # What the importer and the report know of it (bench/declare.py): its output files, its metrics,
    # and how to get the program it runs ("" when there is nothing to install).
    output_formats: ClassVar[tuple[OutputFormat, ...]] = ()
    metrics: ClassVar[tuple[MetricSpec, ...]] = ()
    tuning: ClassVar[Tuning | None] = None  # what `clusterbench tune` searches (None: it cannot be tuned)
    install_hint: ClassVar[str] = ""
    # How its runs are sized and timed, for the code that plans them (bench/declare.py): its one time model
    # (None: no model of its run time), its default sizes, and the values a campaign derives per point.
    time_model: ClassVar[TimeModel | None] = None
    sizing: ClassVar[Sizing | None] = None
    derived: ClassVar[tuple[Derived, ...]] = ()

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

    def command(self) -> list[str]:
        """The program and its arguments, for a benchmark that runs as one local process (the
        default `launch`); placed benchmarks (bench/program.py) declare `launch` instead."""
        raise NotImplementedError(f"{self.name} declares neither command() nor launch()")

    def env(self) -> dict[str, str]:
        return {}

    def launch(self) -> Launch:
        """What to start, and where its processes go (no placement: one process, here)."""
        return Launch(tuple(self.command()), None, self.env())

    @abstractmethod
    def parse(self, workdir: Path) -> Outcome:
        ...

    def progress(self, workdir: Path) -> str | None:
        """A short description of where a running benchmark is (for the progress bar)."""
        return None

