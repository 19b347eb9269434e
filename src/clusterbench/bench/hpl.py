"""Standalone HPL (`xhpl`, user-provided or built): HPL.dat in, one result per T/V line out."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.bench.base import MpiBenchmark
from clusterbench.bench.hpl_output import hpl_outcome
from clusterbench.bench.metrics import Outcome
from clusterbench.errors import MissingToolError
from clusterbench.plan.hpl import Layout
from clusterbench.plan.hplinput import HplInput, render_hpl_dat


def find_xhpl(path: str | None = None) -> str | None:
    """An explicit path, $CLUSTERBENCH_XHPL, or xhpl on PATH."""
    candidate = path or os.environ.get("CLUSTERBENCH_XHPL") or shutil.which("xhpl")
    if path and not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise MissingToolError(f"xhpl not found or not executable: {path}",
                               hint="give the path of a built xhpl binary")
    return candidate


@dataclass
class Hpl(MpiBenchmark):
    input: HplInput
    layout: Layout
    binary: str = field(default_factory=lambda: find_xhpl() or "xhpl")
    bind_to: str | None = "core"
    name: str = "hpl"
    artifacts: tuple[str, ...] = ("HPL.dat", "stdout.txt", "stderr.txt")

    def params(self) -> dict:
        inp = self.input
        single = {"n": inp.ns, "nb": inp.nbs, "grids": [f"{p}x{q}" for p, q in inp.grids]}
        flat = {k: (v[0] if len(v) == 1 else v) for k, v in single.items()}
        return flat | {"layout": self.layout.name, "ranks": self.layout.ranks,
                       "threads": self.layout.threads_per_rank}

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
