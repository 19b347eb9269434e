"""Which shared libraries the processes of a run really loaded, from the dynamic loader itself.

Setting `LD_LIBRARY_PATH` only *asks* for a BLAS variant: an RPATH, a preloaded library or a
static link can override it silently. glibc's loader reports every library it initialises
when `LD_DEBUG=libs` is set, and writes one file per process to `LD_DEBUG_OUTPUT.<pid>`
instead of stderr, so the benchmark's own output stays untouched. The environment reaches
every rank on this node (mpirun's children inherit it); remote nodes need it forwarded.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.system.software import variant_of_path

TRACE_DIR = "ld-debug"
_INIT = re.compile(r"^\s*(\d+):\s+calling init:\s+(\S+)")
_BLAS = re.compile(r"lib(?:open)?blas|libblis|libmkl_rt|libflexiblas|libcblas|libessl|libarmpl", re.I)


def trace_env(workdir: Path) -> dict[str, str]:
    (workdir / TRACE_DIR).mkdir(exist_ok=True)
    return {"LD_DEBUG": "libs", "LD_DEBUG_OUTPUT": str(workdir / TRACE_DIR / "ld")}


@dataclass
class LoadedLibraries:
    by_process: dict[int, list[str]] = field(default_factory=dict)

    def blas(self) -> list[str]:
        """Distinct BLAS libraries loaded by any process, as the loader named them."""
        return sorted({lib for libs in self.by_process.values() for lib in libs if _BLAS.search(os.path.basename(lib))})

    def blas_variants(self) -> list[str]:
        return sorted({v for v in (variant_of_path(p) for p in self.blas()) if v})

    def facts(self) -> dict:
        blas = self.blas()
        return {"blas_loaded": blas,
                "blas_loaded_resolved": sorted({os.path.realpath(p) for p in blas}),
                "blas_loaded_variant": ",".join(self.blas_variants()) or None,
                "traced_processes": len(self.by_process)}


def collect(workdir: Path, keep_summary: bool = True) -> LoadedLibraries:
    """Read and remove the per-process loader logs; keep a short `libraries.txt` summary."""
    loaded = LoadedLibraries()
    folder = workdir / TRACE_DIR
    for path in sorted(folder.glob("ld.*")):
        libs: list[str] = []
        try:
            for line in path.read_text(errors="replace").splitlines():
                m = _INIT.match(line)
                if m:
                    libs.append(m.group(2))
        except OSError:
            continue
        pid = int(path.suffix.lstrip(".") or 0) if path.suffix.lstrip(".").isdigit() else 0
        loaded.by_process[pid] = libs
    shutil.rmtree(folder, ignore_errors=True)
    if keep_summary:
        lines = [f"{pid}: {lib}" for pid, libs in sorted(loaded.by_process.items()) for lib in libs]
        (workdir / "libraries.txt").write_text("\n".join(lines) + "\n")
    return loaded
