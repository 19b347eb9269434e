"""`clusterbench build lulesh --source PATH`: LULESH 2.0 (LLNL's hydrodynamics proxy), MPI + OpenMP.

Upstream's Makefile, with its variables set on the command line: `CXX="mpicxx -DUSE_MPI=1"`
(its own default is Livermore's `mpig++`), `CXXFLAGS="<cflags> -fopenmp -I. -Wall"` and
`LDFLAGS="<cflags> -fopenmp"` (upstream: `-g -O3 -fopenmp`; `--no-openmp` drops -fopenmp).
Smoke test: `lulesh2.0 -s 5 -i 2` on one rank (the rank count must be a perfect cube) must end
with its "Elapsed time" and "FOM" lines. Registered as `lulesh2.0`.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from clusterbench.bench.declare import OPENMP_OPTION, BuildRecipe
from clusterbench.build import common
from clusterbench.build.common import DEFAULT_CFLAGS, Built, Job, Log, Recipe
from clusterbench.native.build import toolchain_identity
from clusterbench.system.mpi import mpi_stack

BINARY = "lulesh2.0"
VERSION_RULES = (
    ("lulesh.cc", r"LULESH,?\s+Version\s+(\d+\.\d+)"),  # "This file is part of LULESH, Version 2.0."
    ("lulesh.cc", r"Version\s+(\d+\.\d+)\s+MPI"),  # "This is a Version 2.0 MPI + OpenMP implementation"
    ("README", r"README for LULESH\s+(\d+\.\d+)"),
)
_FOM = re.compile(r"^FOM\s*=\s*([\d.eE+-]+)", re.M)
_ELAPSED = re.compile(r"^Elapsed time\s*=\s*([\d.eE+-]+)", re.M)


RECIPE = Recipe("lulesh", BINARY, "LULESH", VERSION_RULES, markers=("lulesh.cc", "lulesh.h", "Makefile"),
                hint="give the LULESH 2.0 tree or tarball (github.com/LLNL/LULESH)")


def lulesh_version(root: Path) -> str:
    return common.read_version(root, VERSION_RULES)


def lulesh_figures(output: str) -> dict[str, float]:
    """LULESH's closing figures: elapsed_s and fom (zones per second), those it printed."""
    found = {}
    for key, rx in (("elapsed_s", _ELAPSED), ("fom", _FOM)):
        m = rx.search(output)
        if m:
            found[key] = float(m.group(1))
    return found


def smoke_check(output: str) -> str | None:
    figures = lulesh_figures(output)
    if "Run completed" not in output or set(figures) != {"elapsed_s", "fom"}:
        return "no 'Run completed', 'Elapsed time' and 'FOM' lines"
    return None


def build_lulesh(source: Path, cflags: str = DEFAULT_CFLAGS, openmp: bool = True, force: bool = False,
                 log: Log = lambda _msg: None, mpi: str | None = None) -> Built:
    stack = mpi_stack(mpi)
    mpicxx = stack.compiler(cxx=True)
    omp = ["-fopenmp"] if openmp else []
    variables = {"CXX": f"{mpicxx} -DUSE_MPI=1", "CXXFLAGS": shlex.join([*shlex.split(cflags), *omp, "-I.", "-Wall"]),
                 "LDFLAGS": shlex.join([*shlex.split(cflags), *omp])}

    def steps(job: Job) -> Built:
        common.run_logged(["make", common.make_jobs(), *(f"{k}={v}" for k, v in variables.items())], job.root,
                          job.logfile, log, "make")
        binary = job.made(job.root / BINARY, "make")
        log("smoke test: -s 5 -i 2 on 1 rank")
        output = common.smoke_run([str(binary), "-s", "5", "-i", "2"], BINARY, smoke_check, ranks=1, mpi=stack.name,
                                  env={"OMP_NUM_THREADS": "1"})
        figures = lulesh_figures(output)
        entry = job.entry(
            BINARY, cflags=cflags, openmp=openmp, make_variables=variables,
            smoke_test_fom=figures["fom"], smoke_test_elapsed_s=figures["elapsed_s"],
            **common.mpi_fields(stack, job.inputs["toolchain"], mpicxx=mpicxx))
        return job.install({BINARY: binary}, entry, log)

    return common.build(RECIPE, source, {"make": variables, "toolchain": toolchain_identity(mpicxx)}, steps, force,
                        log, f"({'MPI + OpenMP' if openmp else 'MPI only'}) with {stack.implementation}")


BUILD = BuildRecipe(
    "lulesh", "LULESH", "Build lulesh2.0 (upstream Makefile, CXX=mpicxx -DUSE_MPI=1, OpenMP).", build_lulesh,
    DEFAULT_CFLAGS, lambda p: f"LULESH {p['version']}, {p['mpi']}, smoke test FOM {p.get('smoke_test_fom')} z/s",
    options=(OPENMP_OPTION,))
