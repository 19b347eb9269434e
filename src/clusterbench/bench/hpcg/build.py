"""`clusterbench build hpcg --source PATH`: xhpcg from the official HPCG 3.x tree.

The tree (directory or tarball) is copied, given a generated `setup/Make.clusterbench`
(`makearch.make_hpcg_arch`: the MPI C++ wrapper, MPI + OpenMP or MPI only) and built with
HPCG's own `make arch=clusterbench`. The new `bin/xhpcg` must write its report for a 16^3
grid on one rank (smoke test) before it is installed under the builds folder and registered.
"""

from __future__ import annotations

from pathlib import Path

from clusterbench.bench.declare import OPENMP_OPTION, BuildRecipe
from clusterbench.build import common
from clusterbench.build.common import Built, Job, Log, Recipe, read_version, run_logged
from clusterbench.build.makearch import make_hpcg_arch
from clusterbench.native.build import toolchain_identity
from clusterbench.system.mpi import mpi_stack

ARCH = "clusterbench"
DEFAULT_CFLAGS = "-O3 -march=native"


HPCG_VERSION_RULES = (
    # the version the binary writes into its report: OutputFile doc("HPCG-Benchmark", "3.1")
    ("src/ReportResults.cpp", r'OutputFile\s+\w+\s*\(\s*"HPCG-Benchmark"\s*,\s*"(\d+\.\d+(?:\.\d+)?)"'),
    ("configure.ac", r"AC_INIT\(\s*\[?hpcg\]?\s*,\s*\[?(\d+\.\d+(?:\.\d+)?)"),
    ("README.md", r"^\s*Revision:\s*(\d+\.\d+(?:\.\d+)?)"),
    ("README", r"^\s*:?Revision:\s*(\d+\.\d+(?:\.\d+)?)"),
)


RECIPE = Recipe("hpcg", "xhpcg", "HPCG", HPCG_VERSION_RULES, markers=("src/main.cpp", "setup"),
                hint="give the official HPCG 3.x tree or tarball (github.com/hpcg-benchmark/hpcg)")


def hpcg_version(root: Path) -> str:
    """The HPCG version of a tree: the one its report writer prints, else configure.ac's AC_INIT,
    else the README's "Revision: 3.1". (src/OutputFile.hpp's "version=3.2.1alpha" is an example
    in a comment, and the README's "MPI version 1.1" is about MPI: neither is read.)"""
    return read_version(root, HPCG_VERSION_RULES)


def build_hpcg(source: Path, openmp: bool = True, cflags: str = DEFAULT_CFLAGS, force: bool = False,
               log: Log = lambda _msg: None, mpi: str | None = None) -> Built:
    stack = mpi_stack(mpi)
    cxx = stack.compiler(cxx=True)

    def steps(job: Job) -> Built:
        makefile = job.root / "setup" / f"Make.{ARCH}"
        makefile.write_text(make_hpcg_arch(cxx, cflags, openmp))
        run_logged(["make", f"arch={ARCH}"], job.root, job.logfile, log, "make")
        binary = job.made(job.root / "bin" / "xhpcg", "make")
        smoke_test(binary, stack.name)
        entry = job.entry("xhpcg", openmp=openmp, cflags=cflags,
                          **common.mpi_fields(stack, job.inputs["toolchain"], mpicxx=cxx))
        return job.install({"xhpcg": binary, f"Make.{ARCH}": makefile}, entry, log)

    inputs = {"openmp": openmp, "cflags": cflags, "toolchain": toolchain_identity(cxx)}
    return common.build(RECIPE, source, inputs, steps, force, log, "(MPI + OpenMP)" if openmp else "(MPI only)")


def smoke_test(binary: Path, mpi: str | None = None) -> None:
    """One rank, a 16^3 grid, 1 s: the binary must write its HPCG-Benchmark report."""
    common.smoke_run([str(binary), "--nx=16", "--ny=16", "--nz=16", "--rt=1"], "xhpcg", lambda output: None,
                     ranks=1, mpi=mpi, env={"OMP_NUM_THREADS": "1"}, produces="HPCG-Benchmark*.txt")


BUILD = BuildRecipe(
    "hpcg", "HPCG", "Build xhpcg from the official tree (its own make system, a generated setup/Make file).",
    build_hpcg, DEFAULT_CFLAGS,
    lambda p: f"HPCG {p['version']}, {p['mpi']}, {'MPI + OpenMP' if p['openmp'] else 'MPI only'}",
    "`clusterbench bench hpcg` now uses it.", (OPENMP_OPTION,),
    source_help="The official HPCG 3.x source tree or tarball.")
