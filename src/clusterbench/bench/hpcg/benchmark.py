"""`hpcg`: the official HPCG 3.x (`xhpcg`): local grid from memory, run time, the report parsed.

`hpcg.dat` gives the local grid (nx ny nz, multiples of 8, sized from memory when not given:
see `plan/official.py`) and the run time. The `HPCG-Benchmark_3.x_*.txt` report is parsed by
its `::` keys; its "VALID/INVALID" verdict decides validity. A run shorter than the official
1800 s is stored with the fact `list_eligible: false`: a sample, not a list submission.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from clusterbench.bench.hpcg import output
from clusterbench.bench.hpcg.output import hpcg_outcome
from clusterbench.bench.hpcg.sizing import HPCG_LIST_FRACTION, hpcg_dims, hpcg_dims_problem, hpcg_memory
from clusterbench.bench.metrics import Outcome
from clusterbench.bench.native import GUESS_START_S, memory_limit
from clusterbench.bench.official import OFFICIAL_PLACEMENT, OfficialBinary
from clusterbench.bench.params import Param
from clusterbench.errors import UserInputError
from clusterbench.system.discover import SystemInfo
from clusterbench.units import format_bytes

REPORT = "hpcg-report.txt"
QUICK_FRACTION = 0.05  # default data size: a quick sample; list-grade runs use >= 25%


class Hpcg(OfficialBinary):
    name = "hpcg"
    binary_names = ("xhpcg",)
    env_var = "CLUSTERBENCH_HPCG"
    install_hint = ("get the HPCG 3.x source (github.com/hpcg-benchmark/hpcg) and run "
                    "`clusterbench build hpcg --source PATH`")
    needs_mpi = True
    default_ranks = 0  # one rank per core
    threaded_default = False
    artifacts = ("hpcg.dat", "stdout.txt", "stderr.txt", REPORT)
    output_formats = (output.FORMAT, output.LOG_FORMAT)
    metrics = output.METRICS
    parameters = (
        Param("nx", int, None, "local grid x (multiple of 8; default: sized from memory)", minimum=16),
        Param("ny", int, None, "local grid y (default: as nx)", minimum=16),
        Param("nz", int, None, "local grid z (default: as nx)", minimum=16),
        Param("rt", int, 60, "run time in seconds (official: at least 1800)", minimum=1),
        Param("memory_fraction", float, QUICK_FRACTION,
              f"share of memory for the data when sizing the grid (list-grade: {HPCG_LIST_FRACTION})"),
        *OFFICIAL_PLACEMENT,
    )

    @classmethod
    def check(cls, point: dict, system: SystemInfo) -> None:
        if point.get("nx") is None:
            total = system.memory_bytes()
            if not total:
                raise UserInputError("cannot size the HPCG grid: memory unknown", hint="give nx (and ny, nz)")
            try:
                point["nx"], point["ny"], point["nz"] = hpcg_dims(total, point["ranks"], point["memory_fraction"])
            except ValueError as exc:
                raise UserInputError(str(exc), hint="raise memory_fraction or give nx") from None
        point["ny"] = point.get("ny") or point["nx"]
        point["nz"] = point.get("nz") or point["nx"]
        dims = (point["nx"], point["ny"], point["nz"])
        problem = hpcg_dims_problem(dims)
        if problem:
            raise UserInputError(problem, hint="HPCG needs multiples of 8, at least 16, ratios up to 8")
        need, limit = hpcg_memory(dims, point["ranks"]), memory_limit(system)
        if limit is not None and need > limit:
            raise UserInputError(f"local grid {dims} x {point['ranks']} ranks needs about {format_bytes(need)}, "
                                 f"more than the {format_bytes(limit)} this node can spare",
                                 hint="smaller nx/ny/nz or memory_fraction")

    @classmethod
    def estimate_s(cls, point: dict, system: SystemInfo) -> float | None:
        return GUESS_START_S + 1.3 * point["rt"] + 10  # set-up, reference and optimised checks

    def prepare(self, workdir: Path) -> None:
        p = self.point
        (workdir / "hpcg.dat").write_text("HPCG benchmark input file\nwritten by clusterbench\n"
                                          f"{p['nx']} {p['ny']} {p['nz']}\n{p['rt']}\n")

    def arguments(self) -> list[str]:
        return []

    def parse(self, workdir: Path) -> Outcome:
        reports = sorted(workdir.glob("HPCG-Benchmark*.txt"), key=lambda f: f.stat().st_mtime)
        if not reports:
            out = Outcome()
            out.invalidate("no HPCG-Benchmark_*.txt report written (aborted before the end?)")
            return out
        shutil.copyfile(reports[-1], workdir / REPORT)
        out = hpcg_outcome(reports[-1].read_text(errors="replace"))
        out.facts["report_name"] = reports[-1].name
        return out
