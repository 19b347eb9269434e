"""HPC Challenge (Debian's `hpcc`): HPL, DGEMM, STREAM, PTRANS, RandomAccess, FFT, b_eff.

The suite sizes every test from the HPL matrix in hpccinf.txt, so N sets the run time of the
whole suite, not only of HPL. HPCC writes its report to hpccoutf.txt in the working
directory; stdout holds little.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from clusterbench.bench.base import MpiBenchmark
from clusterbench.bench.hpcc.budget import HpccTimeModel
from clusterbench.bench.hpcc.output import hpcc_outcome
from clusterbench.bench.hpl.input import HplInput, render_hpccinf
from clusterbench.bench.hpl.planner import Layout, check_problem
from clusterbench.bench.metrics import Outcome
from clusterbench.bench.params import REQUIRED, Param
from clusterbench.bench.placement import MPI_PARAMS, available_rpeak, placement_fields, resolve_grid, resolve_placement
from clusterbench.errors import MissingToolError
from clusterbench.system.discover import SystemInfo
from clusterbench.system.mpi import check_binary_mpi

HPL_PARAMS = (
    Param("n", int, REQUIRED, "HPL problem size N (the matrix is N x N doubles)", minimum=1),
    Param("nb", int, 192, "HPL block size NB", minimum=1),
    Param("p", int, None, "process grid rows (default: squarest grid of the ranks)", minimum=1),
    Param("q", int, None, "process grid columns", minimum=1),
    *MPI_PARAMS,
    Param("threshold", float, 16.0, "HPL residual threshold", minimum=0),
    Param("binary", str, None, "path of the benchmark binary (default: found on PATH)"),
)


class HplFamily(MpiBenchmark):
    """What HPCC and standalone HPL share: HPL's parameters, and how a point is completed."""

    parameters = HPL_PARAMS
    map_by: str | None = None
    blas: str | None = None
    blas_dir: str | None = None

    @classmethod
    def resolve(cls, point: dict, system: SystemInfo) -> None:
        resolve_hpl_point(point, system)


@lru_cache(maxsize=65536)
def _suite_seconds(n: int, rpeak: float) -> float:
    return HpccTimeModel(rpeak).seconds(n)


def resolve_hpl_point(point: dict, system: SystemInfo) -> None:
    """Placement and grid for HPL-like benchmarks; refuse a matrix that would not fit."""
    resolve_placement(point, system)
    resolve_grid(point)
    memory = system.memory_bytes()
    check_problem(point["n"], point["nb"], point["p"], point["q"], point["ranks"],
                  memory * point["nodes"] if memory else None, require_multiple=False)

OUTPUT = "hpccoutf.txt"
INPUT = "hpccinf.txt"


def find_hpcc(path: str | None = None) -> str:
    if path and not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise MissingToolError(f"hpcc binary not found or not executable: {path}",
                               hint="give the path of an hpcc binary, or leave it out to use hpcc on PATH")
    found = path or shutil.which("hpcc")
    if not found:
        raise MissingToolError("hpcc not found on PATH", hint="apt-get install hpcc")
    return found


@dataclass
class Hpcc(HplFamily):
    n: int
    nb: int
    p: int
    q: int
    layout: Layout
    binary: str = field(default_factory=find_hpcc)
    bind_to: str | None = "core"
    threshold: float = 16.0  # HPL's residual threshold; lowering it makes the check fail
    map_by: str | None = None
    blas: str | None = None
    blas_dir: str | None = None
    interconnect: str | None = None
    mpi: str | None = None
    name: str = "hpcc"
    artifacts: tuple[str, ...] = (INPUT, OUTPUT, "stdout.txt", "stderr.txt")

    @classmethod
    def available(cls) -> tuple[bool, str]:
        try:
            return True, find_hpcc()
        except MissingToolError as exc:
            return False, f"{exc.message} ({exc.hint})"

    @classmethod
    def from_point(cls, point: dict) -> Hpcc:
        binary = find_hpcc(point.get("binary"))
        check_binary_mpi(binary, point.get("mpi"), "hpcc", hint=(
            "Debian's hpcc is built with Open MPI: run hpcc with mpi: openmpi; for HPL with MPICH, "
            "`clusterbench build hpl --mpi mpich` and the hpl benchmark"))
        return cls(n=point["n"], nb=point["nb"], p=point["p"], q=point["q"], binary=binary,
                   threshold=point["threshold"], **placement_fields(point))

    @classmethod
    def estimate_s(cls, point: dict, system: SystemInfo) -> float | None:
        rpeak = available_rpeak(point, system)
        return _suite_seconds(point["n"], rpeak) if rpeak else None

    def params(self) -> dict:
        return {"n": self.n, "nb": self.nb, "p": self.p, "q": self.q, "layout": self.layout.name,
                "ranks": self.layout.ranks, "threads": self.layout.threads_per_rank,
                "threshold": self.threshold, "bind_to": self.bind_to, "blas": self.blas,
                "interconnect": self.interconnect, "mpi": self.mpi}

    def hpl_input(self) -> HplInput:
        return HplInput(ns=[self.n], nbs=[self.nb], grids=[(self.p, self.q)], device_out=8,
                        threshold=self.threshold)

    def prepare(self, workdir: Path) -> None:
        (workdir / INPUT).write_text(render_hpccinf(self.hpl_input()))

    def parse(self, workdir: Path) -> Outcome:
        path = workdir / OUTPUT
        if not path.is_file():
            out = Outcome()
            out.invalidate(f"{OUTPUT} was not written (hpcc did not start or aborted early)")
            return out
        return hpcc_outcome(path.read_text(errors="replace"))

    def progress(self, workdir: Path) -> str | None:
        try:  # only the tail: this runs every second beside busy MPI ranks
            with open(workdir / OUTPUT, "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - 4096))
                text = f.read().decode(errors="replace")
        except OSError:
            return None
        sections = re.findall(r"Begin of (\w+) section", text)
        return sections[-1] if sections else None
