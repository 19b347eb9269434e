"""Standalone HPL (`xhpl`, user-provided or built): HPL.dat in, one result per T/V line out.

Also what every HPL-like benchmark shares (`HplFamily`: HPCC runs HPL first): HPL's
parameters, the rank/thread layout and grid a point is completed with, and the refusal of a
matrix that would not fit. The N/NB/grid calculator is beside it (planner.py), as is the
input file (input.py), the output parser and verdict (output.py) and the build (build.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

from clusterbench.bench.declare import Tuning, declared_later
from clusterbench.bench.hpl import output
from clusterbench.bench.hpl.input import BCAST, PFACT, PMAP, RFACT, SWAP, HplInput, render_hpl_dat
from clusterbench.bench.hpl.output import hpl_outcome
from clusterbench.bench.hpl.planner import (
    DEFAULT_NB,
    HPL_N,
    HPL_SIZING,
    HplPlan,
    check_problem,
    grids,
    model_predictions,
    n_for_memory,
    plan_hpl,
    resolve_grid,
)
from clusterbench.bench.hpl.timing import HPL_TIME, PLANNING_TIME, SHORT_RUN_RATES
from clusterbench.bench.metrics import Outcome
from clusterbench.bench.official import OfficialBinary, find_binary
from clusterbench.bench.params import REQUIRED, Param
from clusterbench.bench.placement import (
    BLAS_PARAM,
    LAYOUT_PARAM,
    PLACEMENT_PARAMS,
    available_rpeak,
    resolve_placement,
)
from clusterbench.build import registry
from clusterbench.errors import MissingToolError
from clusterbench.system.discover import SystemInfo
from clusterbench.system.mpi import check_binary_mpi

HPL_PARAMS = (
    Param("n", int, REQUIRED, "HPL problem size N (the matrix is N x N doubles)", minimum=1),
    Param("nb", int, DEFAULT_NB, "HPL block size NB", minimum=1),
    Param("p", int, None, "process grid rows (default: squarest grid of the ranks)", minimum=1),
    Param("q", int, None, "process grid columns", minimum=1),
    LAYOUT_PARAM,
    *PLACEMENT_PARAMS,
    BLAS_PARAM,
    Param("threshold", float, 16.0, "HPL residual threshold", minimum=0),
)
# HPL's algorithm knobs (HPL.dat lines 14-28). None: HPL.dat's tuned default (HplInput), so a run
# that does not set them keeps the parameters, and the id, it had before they were declared.
HPL_KNOB_PARAMS = (
    Param("pfact", str, None, "panel factorisation: left, crout or right (default right)", choices=tuple(PFACT)),
    Param("rfact", str, None, "recursive panel factorisation: left, crout or right (default crout)",
          choices=tuple(RFACT)),
    Param("nbmin", int, None, "recursion stops at this many columns (default 4)", minimum=1, maximum=1024),
    Param("ndiv", int, None, "panels in recursion (default 2)", minimum=2, maximum=64),
    Param("bcast", str, None, "panel broadcast: 1rg, 1rm, 2rg, 2rm, lng or lnm (default 1rm)", choices=tuple(BCAST)),
    Param("depth", int, None, "look-ahead depth (default 1)", minimum=0, maximum=16),
    Param("swap", str, None, "row swapping: bin-exch, long or mix (default mix)", choices=tuple(SWAP)),
    Param("swap_threshold", int, None, "columns above which `mix` swaps long (default 64)", minimum=0,
          maximum=100_000),
    Param("pmap", str, None, "process mapping: row or column major (default row)", choices=tuple(PMAP)),
)
HPL_KNOBS = tuple(p.name for p in HPL_KNOB_PARAMS)
BINARY_PARAM = Param("binary", str, None, "path of the benchmark binary (default: found on PATH)")


def knob_input(point: dict) -> dict:
    """HplInput's fields for the knobs a point sets (the others keep HplInput's defaults)."""
    fields: dict = {}
    if point.get("pfact") is not None:
        fields["pfacts"] = [PFACT[point["pfact"]]]
    if point.get("rfact") is not None:
        fields["rfacts"] = [RFACT[point["rfact"]]]
    if point.get("nbmin") is not None:
        fields["nbmins"] = [point["nbmin"]]
    if point.get("ndiv") is not None:
        fields["ndivs"] = [point["ndiv"]]
    if point.get("bcast") is not None:
        fields["bcasts"] = [BCAST[point["bcast"]]]
    if point.get("depth") is not None:
        fields["depths"] = [point["depth"]]
    if point.get("swap") is not None:
        fields["swap"] = SWAP[point["swap"]]
    if point.get("swap_threshold") is not None:
        fields["swap_threshold"] = point["swap_threshold"]
    if point.get("pmap") is not None:
        fields["pmap"] = PMAP[point["pmap"]]
    return fields


class HplFamily(OfficialBinary):
    """What HPCC and standalone HPL share: HPL's parameters, and how a point is completed.
    Ranks with several threads are not bound to one core, or their threads would share it."""

    parameters = (*HPL_PARAMS, *HPL_KNOB_PARAMS, BINARY_PARAM)
    needs_mpi = True
    uses_blas = True
    oversubscribe_when_short = False  # HPL on more ranks than cores measures nothing useful
    unbind_threaded_ranks = True

    @classmethod
    def resolve(cls, point: dict, system: SystemInfo) -> None:
        resolve_hpl_point(point, system)

    def hpl_input(self, **overrides) -> HplInput:
        p = self.point
        fields = {"ns": [p["n"]], "nbs": [p["nb"]], "grids": [(p["p"], p["q"])], "threshold": p["threshold"]}
        return HplInput(**(fields | knob_input(p) | overrides))

    # HPL's sizes and the planner's rules, for the code that sizes a run of either without naming this
    # package (`clusterbench run` sizes HPCC and the standalone xhpl with them).
    sizing = HPL_SIZING
    grids = staticmethod(grids)  # every P x Q of a rank count, best first
    check_problem = staticmethod(check_problem)  # refuse a problem HPL would reject or that would swap
    n_for_memory = staticmethod(n_for_memory)  # the N that fills a fraction of memory


def resolve_hpl_point(point: dict, system: SystemInfo) -> None:
    """Placement and grid for HPL-like benchmarks; refuse a matrix that would not fit."""
    resolve_placement(point, system)
    resolve_grid(point)
    memory = system.memory_bytes()
    check_problem(point["n"], point["nb"], point["p"], point["q"], point["ranks"],
                  memory * point["nodes"] if memory else None, require_multiple=False)


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


class Hpl(HplFamily):
    name = "hpl"
    tuning: ClassVar[Tuning | None] = declared_later("clusterbench.bench.hpl.tuning:TUNING")
    binary_names = ("xhpl",)
    env_var = "CLUSTERBENCH_XHPL"
    install_hint = "run `clusterbench build hpl` (or set $CLUSTERBENCH_XHPL, or put a built xhpl on PATH)"
    artifacts: ClassVar[tuple[str, ...]] = ("HPL.dat", "stdout.txt", "stderr.txt")
    output_formats = (output.FORMAT,)
    metrics = output.METRICS
    parameters = (*HplFamily.parameters,
                  Param("samples", int, None, "solves of the same problem in one xhpl process (HPL.dat's Ns "
                        "repeated): cheap repeats that share one start-up (default 1)", minimum=1, maximum=32))

    @classmethod
    def available(cls) -> tuple[bool, str]:
        found = find_xhpl()
        if found:
            return True, xhpl_origin(found)
        return False, f"xhpl not found: {cls.install_hint}"

    @classmethod
    def from_point(cls, point: dict) -> Hpl:
        mpi = point.get("mpi")
        binary = find_xhpl(point.get("binary"), mpi)
        if not binary:
            raise MissingToolError(f"xhpl not found (campaign benchmark 'hpl'{', mpi ' + mpi if mpi else ''})",
                                   hint=f"run `clusterbench build hpl{' --mpi ' + mpi if mpi else ''}`, or set "
                                        "binary: /path/to/xhpl, "
                                        "$CLUSTERBENCH_XHPL, or put xhpl on PATH")
        check_binary_mpi(binary, mpi, "xhpl",
                         hint=f"`clusterbench build hpl --mpi {mpi}`, or set binary: to such an xhpl")
        return cls.placed(point, binary)

    @classmethod
    def estimate_s(cls, point: dict, system: SystemInfo) -> float | None:
        rpeak = available_rpeak(point, system)
        return PLANNING_TIME.seconds(point["n"], PLANNING_TIME.rate(rpeak)) if rpeak else None

    def hpl_input(self, **overrides) -> HplInput:
        inp = super().hpl_input(**overrides)
        inp.ns = inp.ns * (self.point.get("samples") or 1)
        return inp

    def prepare(self, workdir: Path) -> None:
        (workdir / "HPL.dat").write_text(render_hpl_dat(self.hpl_input()))

    def parse(self, workdir: Path) -> Outcome:
        text = (workdir / "stdout.txt").read_text(errors="replace")
        outcome = hpl_outcome(text)
        expected = self.hpl_input().test_count
        found = sum(1 for m in outcome.metrics if m.name == "hpl_gflops")
        if found != expected and outcome.valid:
            outcome.invalidate(f"HPL.dat asks for {expected} tests but {found} results were printed")
        return outcome

    # How its runs are sized and timed, for the code that plans them without naming this module
    # (bench/declare.py; `benchmark_class("hpl").time_model`, ...): HPL's one time model and its uses
    # (timing.py), its block sizes and memory fraction, the `hpl_n` a campaign derives (planner.py), and
    # the rates the cluster check expects of its short runs.
    time_model = HPL_TIME
    sizing = HPL_SIZING
    derived = (HPL_N,)
    short_run_rates = SHORT_RUN_RATES

    @classmethod
    def find_binary(cls, path: str | None = None, mpi: str | None = None) -> str | None:
        """The xhpl a run would use (`find_xhpl`): an explicit path, $CLUSTERBENCH_XHPL, ..., or None."""
        return find_xhpl(path, mpi)

    @classmethod
    def plan(cls, system: SystemInfo, nbs: list[int], **options) -> HplPlan:
        """The plan of `clusterbench plan hpl` (planner.plan_hpl): N per NB, grids, checked."""
        return plan_hpl(system, nbs, **options)

    plan_predictions = staticmethod(model_predictions)  # the HPL model's view of a plan, given its rates
