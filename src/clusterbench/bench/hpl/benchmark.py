"""Standalone HPL (`xhpl`, user-provided or built): HPL.dat in, one result per T/V line out."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.bench.hpcc.benchmark import HplFamily
from clusterbench.bench.hpcc.budget import DEFAULT_EFFICIENCY, STARTUP_S
from clusterbench.bench.hpl.input import HplInput, render_hpl_dat
from clusterbench.bench.hpl.output import hpl_outcome
from clusterbench.bench.hpl.planner import Layout, hpl_flops
from clusterbench.bench.metrics import Outcome
from clusterbench.bench.official import find_binary
from clusterbench.bench.placement import available_rpeak, placement_fields
from clusterbench.build import registry
from clusterbench.errors import MissingToolError
from clusterbench.system.discover import SystemInfo
from clusterbench.system.mpi import check_binary_mpi


def find_xhpl(path: str | None = None, mpi: str | None = None) -> str | None:
    """An explicit path, $CLUSTERBENCH_XHPL, $CLUSTERBENCH_PATH, xhpl on PATH, or the newest
    `clusterbench build hpl`: the official binaries' discovery (with its MPI rule), under xhpl's name."""
    if path and not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise MissingToolError(f"xhpl not found or not executable: {path}",
                               hint="give the path of a built xhpl binary")
    found = find_binary(("xhpl",), "CLUSTERBENCH_XHPL", path, mpi)
    return found.path if found else None


def xhpl_origin(binary: str) -> str:
    """How the binary was found, for `clusterbench benchmarks`."""
    entry = registry.provenance(binary)
    if entry:
        return (f"{binary} (built by clusterbench from {entry.get('source')}, HPL {entry.get('version')}, "
                f"{entry.get('blas')} BLAS)")
    if os.environ.get("CLUSTERBENCH_XHPL") == binary:
        return f"{binary} ($CLUSTERBENCH_XHPL)"
    return f"{binary} (PATH)"


@dataclass
class Hpl(HplFamily):
    input: HplInput
    layout: Layout
    binary: str = field(default_factory=lambda: find_xhpl() or "xhpl")
    bind_to: str | None = "core"
    map_by: str | None = None
    blas: str | None = None
    blas_dir: str | None = None
    interconnect: str | None = None
    mpi: str | None = None
    name: str = "hpl"
    artifacts: tuple[str, ...] = ("HPL.dat", "stdout.txt", "stderr.txt")

    @classmethod
    def available(cls) -> tuple[bool, str]:
        found = find_xhpl()
        if found:
            return True, xhpl_origin(found)
        return False, ("xhpl not found: run `clusterbench build hpl` (or set $CLUSTERBENCH_XHPL, "
                       "or put a built xhpl on PATH)")

    @classmethod
    def from_point(cls, point: dict) -> Hpl:
        binary = find_xhpl(point.get("binary"), point.get("mpi"))
        if not binary:
            mpi = point.get("mpi")
            raise MissingToolError(f"xhpl not found (campaign benchmark 'hpl'{', mpi ' + mpi if mpi else ''})",
                                   hint=f"run `clusterbench build hpl{' --mpi ' + mpi if mpi else ''}`, or set "
                                        "binary: /path/to/xhpl, "
                                        "$CLUSTERBENCH_XHPL, or put xhpl on PATH")
        check_binary_mpi(binary, point.get("mpi"), "xhpl",
                         hint=f"`clusterbench build hpl --mpi {point.get('mpi')}`, or set binary: to such an xhpl")
        inp = HplInput(ns=[point["n"]], nbs=[point["nb"]], grids=[(point["p"], point["q"])],
                       threshold=point["threshold"])
        return cls(input=inp, binary=binary, **placement_fields(point))

    @classmethod
    def estimate_s(cls, point: dict, system: SystemInfo) -> float | None:
        rpeak = available_rpeak(point, system)
        return STARTUP_S + hpl_flops(point["n"]) / (rpeak * 1e9 * DEFAULT_EFFICIENCY) if rpeak else None

    def params(self) -> dict:
        inp = self.input
        single = {"n": inp.ns, "nb": inp.nbs, "grids": [f"{p}x{q}" for p, q in inp.grids]}
        flat = {k: (v[0] if len(v) == 1 else v) for k, v in single.items()}
        return flat | {"layout": self.layout.name, "ranks": self.layout.ranks,
                       "threads": self.layout.threads_per_rank, "bind_to": self.bind_to, "blas": self.blas,
                       "interconnect": self.interconnect, "mpi": self.mpi}

    def prepare(self, workdir: Path) -> None:
        (workdir / "HPL.dat").write_text(render_hpl_dat(self.input))

    def parse(self, workdir: Path) -> Outcome:
        text = (workdir / "stdout.txt").read_text(errors="replace")
        outcome = hpl_outcome(text)
        expected = self.input.test_count
        found = sum(1 for m in outcome.metrics if m.name == "hpl_gflops")
        if found != expected and outcome.valid:
            outcome.invalidate(f"HPL.dat asks for {expected} tests but {found} results were printed")
        return outcome
