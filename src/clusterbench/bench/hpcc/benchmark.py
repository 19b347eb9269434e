"""HPC Challenge (Debian's `hpcc`): HPL, DGEMM, STREAM, PTRANS, RandomAccess, FFT, b_eff.

The suite sizes every test from the HPL matrix in hpccinf.txt, so N sets the run time of the
whole suite, not only of HPL. HPCC writes its report to hpccoutf.txt in the working
directory; stdout holds little.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import ClassVar

from clusterbench.bench.hpcc import output
from clusterbench.bench.hpcc.budget import HpccTimeModel
from clusterbench.bench.hpcc.output import hpcc_outcome
from clusterbench.bench.hpcc.sizing import hpcc_stream_elements
from clusterbench.bench.hpl.benchmark import HplFamily
from clusterbench.bench.hpl.input import render_hpccinf
from clusterbench.bench.metrics import Outcome
from clusterbench.bench.official import find_binary
from clusterbench.bench.placement import available_rpeak
from clusterbench.errors import MissingToolError
from clusterbench.system.discover import SystemInfo
from clusterbench.system.mpi import check_binary_mpi


@lru_cache(maxsize=65536)
def _suite_seconds(n: int, rpeak: float) -> float:
    return HpccTimeModel(rpeak).seconds(n)


OUTPUT = "hpccoutf.txt"
INPUT = "hpccinf.txt"


def find_hpcc(path: str | None = None) -> str:
    """An explicit path, $CLUSTERBENCH_HPCC, $CLUSTERBENCH_PATH or hpcc on PATH (Debian's package)."""
    if path and not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise MissingToolError(f"hpcc binary not found or not executable: {path}",
                               hint="give the path of an hpcc binary, or leave it out to use hpcc on PATH")
    found = find_binary(("hpcc",), "CLUSTERBENCH_HPCC", path)
    if not found:
        raise MissingToolError("hpcc not found on PATH", hint="apt-get install hpcc")
    return found.path


class Hpcc(HplFamily):
    name = "hpcc"
    binary_names = ("hpcc",)
    env_var = "CLUSTERBENCH_HPCC"
    install_hint = "apt-get install hpcc"
    artifacts: ClassVar[tuple[str, ...]] = (INPUT, OUTPUT, "stdout.txt", "stderr.txt")
    output_formats = (output.FORMAT,)
    metrics = output.METRICS

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
        return cls.placed(point, binary)

    @classmethod
    def estimate_s(cls, point: dict, system: SystemInfo) -> float | None:
        rpeak = available_rpeak(point, system)
        return _suite_seconds(point["n"], rpeak) if rpeak else None

    def prepare(self, workdir: Path) -> None:
        (workdir / INPUT).write_text(render_hpccinf(self.hpl_input(device_out=8)))
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

    # What `clusterbench run` asks of HPCC without naming this package: its binary, its run time model
    # (budget.py), and the elements of each STREAM array it sizes from the HPL matrix (sizing.py), under
    # HPCC's own name for them (STREAM_VectorSize).
    run_time = HpccTimeModel
    vector_size = staticmethod(hpcc_stream_elements)

    @classmethod
    def find_binary(cls, path: str | None = None) -> str:
        """The hpcc a run would use (`find_hpcc`); MissingToolError when there is none."""
        return find_hpcc(path)
