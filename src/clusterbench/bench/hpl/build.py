"""`clusterbench build hpl`: a standalone xhpl for this cluster, built into the cache.

Source: a netlib HPL 2.x tree or tarball given by the user, or (no source, Debian/Ubuntu) the
HPL inside Debian's `hpcc` source package (see `build/sources.py`). The tree is copied, patched
(`patches.py`: MPI-1 calls removed by MPI-3; for HPCC's HPL the driver's input/output and a
`main`), given a generated `Make.clusterbench` (`makearch.py`) and built with HPL's own make
system. The result is smoke-tested (a 1-rank N=256 run must print a PASSED residual) before it
is moved into place and registered with its provenance. A build is keyed by the source
checksum, compiler identity, flags and BLAS link: the same inputs reuse the existing binary.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
from importlib import resources
from pathlib import Path

from clusterbench.bench.declare import BuildOption, BuildRecipe
from clusterbench.bench.hpl.input import HplInput, render_hpl_dat
from clusterbench.bench.hpl.makearch import BLAS_KINDS, blas_link, make_arch
from clusterbench.bench.hpl.output import hpl_outcome
from clusterbench.bench.hpl.patches import PatchError, patch_hpcc_driver, patch_mpi1_tree
from clusterbench.build import common
from clusterbench.build.common import BuildError, Built, Job, Log, Recipe, read_version, run_logged
from clusterbench.errors import UserInputError
from clusterbench.native.build import toolchain_identity
from clusterbench.system.mpi import mpi_stack

ARCH = "clusterbench"
DEFAULT_CFLAGS = "-O3 -march=native -fomit-frame-pointer -funroll-loops -fcommon"
DRIVER = Path("testing", "ptest", "HPL_pddriver.c")


def find_hpl_root(tree: Path) -> tuple[Path, str]:
    """The HPL directory inside a source tree and its kind: 'netlib' or 'hpcc' (HPL_main driver)."""
    for candidate in (tree, tree / "hpl", *sorted(tree.glob("*/")), *sorted(tree.glob("*/hpl/"))):
        if (candidate / "Make.top").is_file() and (candidate / DRIVER).is_file():
            return candidate, hpl_kind(candidate)
    raise UserInputError(f"no HPL source found in {tree}",
                         hint="give a netlib HPL 2.x tree or tarball (hpl-2.3.tar.gz), or HPCC's source")


def hpl_kind(root: Path) -> str:
    """'hpcc' when the driver is HPCC's library function HPL_main, else 'netlib'."""
    return "hpcc" if "HPL_main" in (root / DRIVER).read_text(errors="replace") else "netlib"


HPL_VERSION_RULES = (
    ("configure.ac", r"AC_INIT\(\s*\[?hpl\]?\s*,\s*\[?(\d+\.\d+[a-z]?)"),  # HPL 2.3's autotools
    *((name, r"HPL\s+-\s+(\d+\.\d+[a-z]?)\s+-") for name in ("include/hpl.h", "include/hpl_misc.h", "HISTORY",
                                                            "README")),  # "HPL - 2.3 - December 2, 2018"
    *((name, r"HPL\s+(?:Version\s+)?(\d+\.\d+[a-z]?)") for name in ("include/hpl_misc.h", "HISTORY", "README")),
)


RECIPE = Recipe("hpl", "xhpl", "HPL", HPL_VERSION_RULES, locate=lambda tree: find_hpl_root(tree)[0],
                debian_package="hpcc")


def hpl_version(root: Path) -> str:
    """The HPL version of a tree: configure.ac's AC_INIT, else the "HPL - 2.3 - <date>" banner of
    its headers, HISTORY and README, else an "HPL [Version] 2.0" mention there."""
    return read_version(root, HPL_VERSION_RULES)


def make_tree(root: Path, logfile: Path, log: Log) -> None:
    """HPL's Makefile, its objects compiled in parallel: `startup` (the arch's folders and Make.inc links) runs
    first and alone, because `make -j` would run it beside `build`, its sibling prerequisite of `install`;
    then `build`, whose make of each folder compiles on every core (common.make_jobs). The netlib tree and
    HPCC's copy both have the two targets; a Makefile without them is made as a whole, one job at a time."""
    text = (root / "Makefile").read_text(errors="replace")
    if re.search(r"^startup\s*:", text, re.M) and re.search(r"^build\s*:", text, re.M):
        run_logged(["make", f"arch={ARCH}", "startup"], root, logfile, log, "make startup")
        run_logged(["make", common.make_jobs(), f"arch={ARCH}", "build"], root, logfile, log, "make")
    else:
        run_logged(["make", f"arch={ARCH}"], root, logfile, log, "make")


def build_hpl(source: Path | None = None, blas: str = "generic", cflags: str = DEFAULT_CFLAGS,
              force: bool = False, log: Log = lambda _msg: None, mpi: str | None = None) -> Built:
    if blas not in BLAS_KINDS:
        raise UserInputError(f"--blas {blas}: unknown BLAS link", hint=f"choose one of: {', '.join(BLAS_KINDS)}")
    stack = mpi_stack(mpi)
    mpicc = stack.compiler()

    def inputs(root: Path) -> dict:
        return {"kind": hpl_kind(root), "blas": blas, "cflags": cflags, "toolchain": toolchain_identity(mpicc),
                "main_sha256": hashlib.sha256(main_source().read_bytes()).hexdigest()}

    def steps(job: Job) -> Built:
        hpl_root, kind = job.root, job.inputs["kind"]
        patched = patch(hpl_root, kind, log)
        link = blas_link(blas, os.environ.get("MKLROOT"))
        makefile = hpl_root / f"Make.{ARCH}"
        makefile.write_text(make_arch(str(hpl_root), ARCH, mpicc, cflags, link))
        make_tree(hpl_root, job.logfile, log)
        binary = job.work / "xhpl"
        if kind == "hpcc":
            flags = [*shlex.split(cflags), f"-I{hpl_root / 'include'}", f"-I{hpl_root / 'include' / ARCH}"]
            libhpl = hpl_root / "lib" / ARCH / "libhpl.a"
            run_logged([mpicc, *flags, "-o", str(binary), str(main_source()), str(libhpl),
                        *shlex.split(link.include), *shlex.split(link.libs), "-lm"],
                       hpl_root, job.logfile, log, "link xhpl")
        else:
            shutil.copy2(job.made(hpl_root / "bin" / ARCH / "xhpl", "make"), binary)
        log("smoke test: 1 rank, N=256")
        smoke = smoke_test(binary, blas, stack.name)
        entry = job.entry("xhpl", tree=kind, blas=blas, blas_libs=link.libs, cflags=cflags,
                          patches=patched, smoke_test_gflops=smoke,
                          **common.mpi_fields(stack, job.inputs["toolchain"], mpicc=mpicc))
        return job.install({"xhpl": binary, f"Make.{ARCH}": makefile}, entry, log)

    return common.build(RECIPE, source, inputs, steps, force, log, f"with {blas} BLAS and {stack.implementation}")


def patch(hpl_root: Path, kind: str, log: Log) -> list[str]:
    """Patch the copy of a `kind` tree for this MPI (and HPCC's driver for standalone use); what was done."""
    changed = patch_mpi1_tree(hpl_root)
    patched = [f"MPI-1 calls renamed in {path} ({n})" for path, n in changed.items()]
    if kind == "hpcc":
        try:
            patched += patch_hpcc_driver(hpl_root)
        except PatchError as exc:
            raise BuildError(str(exc), hint="this HPCC source differs from 1.5; give a netlib HPL tree") from None
    log(f"{kind} tree: {len(patched)} patches applied")
    return patched


def main_source() -> Path:
    """`main` for xhpl built from HPCC's HPL (whose driver is a library function)."""
    return Path(str(resources.files("clusterbench.native") / "src" / "hpl_main.c"))


def smoke_test(binary: Path, blas: str, mpi: str | None = None) -> float:
    """Run the new xhpl once on a tiny problem; its Gflop/s. BuildError unless it PASSED."""
    from clusterbench.bench.placement import blas_dir, choose_blas, library_path_env

    env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    if blas == "generic":
        env |= library_path_env(blas_dir(choose_blas(None, 1)))

    def passed(output: str) -> str | None:
        outcome = hpl_outcome(output)
        if not outcome.valid or not outcome.best("hpl_gflops"):
            return "; ".join(outcome.reasons) or "no result line"
        return None

    output = common.smoke_run([str(binary)], "xhpl", passed, ranks=1, mpi=mpi, env=env, timeout=120,
                              inputs={"HPL.dat": render_hpl_dat(HplInput(ns=[256], nbs=[64], grids=[(1, 1)]))})
    return hpl_outcome(output).best("hpl_gflops").value


BUILD = BuildRecipe(
    "hpl", "HPL", "Build a standalone xhpl (Make.<arch> generated, MPI-3 patches, smoke test) and register it.",
    build_hpl, DEFAULT_CFLAGS,
    lambda p: f"HPL {p['version']}, {p['blas']} BLAS, {p.get('mpi', 'openmpi')}, "
              f"smoke test {p.get('smoke_test_gflops', 0):.2f} Gflop/s",
    "campaigns and `clusterbench bench hpl` now use it; see `clusterbench build list`.",
    (BuildOption("blas", str, "generic",
                 "BLAS link: generic (libblas.so.3, switchable per run), openblas, blis or mkl ($MKLROOT)."),),
    source_help="netlib HPL 2.x tree or tarball. Default on Debian/Ubuntu: the HPL in Debian's hpcc source.",
    source_required=False, cflags_help="Compiler flags (default: -O3 -march=native ...).")
