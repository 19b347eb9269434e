"""HPC Challenge (Debian's `hpcc`): HPL, DGEMM, STREAM, PTRANS, RandomAccess, FFT, b_eff.

The suite sizes every test from the HPL matrix in hpccinf.txt, so N sets the run time of the
whole suite, not only of HPL. HPCC writes its report to hpccoutf.txt in the working
directory; stdout holds little.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.bench.base import MpiBenchmark
from clusterbench.bench.hpcc_output import hpcc_outcome
from clusterbench.bench.metrics import Outcome
from clusterbench.errors import MissingToolError
from clusterbench.plan.hpl import Layout
from clusterbench.plan.hplinput import HplInput, render_hpccinf

OUTPUT = "hpccoutf.txt"
INPUT = "hpccinf.txt"


def find_hpcc(path: str | None = None) -> str:
    found = path or shutil.which("hpcc")
    if not found:
        raise MissingToolError("hpcc not found on PATH", hint="apt-get install hpcc")
    return found


@dataclass
class Hpcc(MpiBenchmark):
    n: int
    nb: int
    p: int
    q: int
    layout: Layout
    binary: str = field(default_factory=find_hpcc)
    bind_to: str | None = "core"
    threshold: float = 16.0  # HPL's residual threshold; lowering it makes the check fail
    name: str = "hpcc"
    artifacts: tuple[str, ...] = (INPUT, OUTPUT, "stdout.txt", "stderr.txt")

    def params(self) -> dict:
        return {"n": self.n, "nb": self.nb, "p": self.p, "q": self.q, "layout": self.layout.name,
                "ranks": self.layout.ranks, "threads": self.layout.threads_per_rank,
                "threshold": self.threshold}

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
