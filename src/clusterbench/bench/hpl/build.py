"""`clusterbench build hpl`: a standalone xhpl for this cluster, built into the cache.

Source: a netlib HPL 2.x tree or tarball given by the user, or (no source, Debian/Ubuntu) the
HPL inside Debian's `hpcc` source package (see `sources.py`). The tree is copied, patched
(`patches.py`: MPI-1 calls removed by MPI-3; for HPCC's HPL the driver's input/output and a
`main`), given a generated `Make.clusterbench` (`makearch.py`) and built with HPL's own make
system. The result is smoke-tested (a 1-rank N=256 run must print a PASSED residual) before it
is moved into place and registered with its provenance. A build is keyed by the source
checksum, compiler identity, flags and BLAS link: the same inputs reuse the existing binary.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from clusterbench.bench.hpl.input import HplInput, render_hpl_dat
from clusterbench.bench.hpl.output import hpl_outcome
from clusterbench.build import registry
from clusterbench.build.common import Built, existing_build, install, mkdir, now, obtain, read_version, run_logged
from clusterbench.build.makearch import BLAS_KINDS, blas_link, make_arch
from clusterbench.build.patches import PatchError, patch_hpcc_driver, patch_mpi1_tree
from clusterbench.errors import UserInputError
from clusterbench.native.build import BuildError, toolchain_identity
from clusterbench.system.mpi import mpi_stack

ARCH = "clusterbench"
DEFAULT_CFLAGS = "-O3 -march=native -fomit-frame-pointer -funroll-loops -fcommon"
BUILD_FORMAT = 1  # bump when the build steps change in a way that changes the binary


def find_hpl_root(tree: Path) -> tuple[Path, str]:
    """The HPL directory inside a source tree and its kind: 'netlib' or 'hpcc' (HPL_main driver)."""
    for candidate in (tree, tree / "hpl", *sorted(tree.glob("*/")), *sorted(tree.glob("*/hpl/"))):
        driver = candidate / "testing" / "ptest" / "HPL_pddriver.c"
        if (candidate / "Make.top").is_file() and driver.is_file():
            return candidate, ("hpcc" if "HPL_main" in driver.read_text(errors="replace") else "netlib")
    raise UserInputError(f"no HPL source found in {tree}",
                         hint="give a netlib HPL 2.x tree or tarball (hpl-2.3.tar.gz), or HPCC's source")


HPL_VERSION_RULES = (
    ("configure.ac", r"AC_INIT\(\s*\[?hpl\]?\s*,\s*\[?(\d+\.\d+[a-z]?)"),  # HPL 2.3's autotools
    *((name, r"HPL\s+-\s+(\d+\.\d+[a-z]?)\s+-") for name in ("include/hpl.h", "include/hpl_misc.h", "HISTORY",
                                                            "README")),  # "HPL - 2.3 - December 2, 2018"
    *((name, r"HPL\s+(?:Version\s+)?(\d+\.\d+[a-z]?)") for name in ("include/hpl_misc.h", "HISTORY", "README")),
)


def hpl_version(root: Path) -> str:
    """The HPL version of a tree: configure.ac's AC_INIT, else the "HPL - 2.3 - <date>" banner of
    its headers, HISTORY and README, else an "HPL [Version] 2.0" mention there."""
    return read_version(root, HPL_VERSION_RULES)


def build_hpl(source: Path | None = None, blas: str = "generic", cflags: str = DEFAULT_CFLAGS,
              force: bool = False, log: Callable[[str], None] = lambda _msg: None, mpi: str | None = None) -> Built:
    if blas not in BLAS_KINDS:
        raise UserInputError(f"--blas {blas}: unknown BLAS link", hint=f"choose one of: {', '.join(BLAS_KINDS)}")
    stack = mpi_stack(mpi)
    mpicc = stack.compiler()
    root_cache = registry.builds_root()
    with tempfile.TemporaryDirectory(prefix="hpl-build-", dir=mkdir(root_cache)) as tmp:
        work = Path(tmp)
        origin, source_sum, package = obtain(source, work, log, debian_package="hpcc", what="HPL source")
        hpl_root, kind = find_hpl_root(origin)
        inputs = {"format": BUILD_FORMAT, "source_sha256": source_sum, "kind": kind, "blas": blas,
                  "cflags": cflags, "toolchain": toolchain_identity(mpicc),
                  "main_sha256": hashlib.sha256(main_source().read_bytes()).hexdigest()}
        final, done = existing_build("hpl", "xhpl", inputs, force, log)
        if done:
            return done
        log(f"building HPL {hpl_version(hpl_root)} ({kind} tree) with {blas} BLAS and {stack.implementation}")
        changed = patch_mpi1_tree(hpl_root)
        patched = [f"MPI-1 calls renamed in {path} ({n})" for path, n in changed.items()]
        if kind == "hpcc":
            try:
                patched += patch_hpcc_driver(hpl_root)
            except PatchError as exc:
                raise BuildError(str(exc), hint="this HPCC source differs from 1.5; give a netlib HPL tree") from None
        link = blas_link(blas, os.environ.get("MKLROOT"))
        makefile = make_arch(str(hpl_root), ARCH, mpicc, cflags, link)
        (hpl_root / f"Make.{ARCH}").write_text(makefile)
        run_logged(["make", f"arch={ARCH}"], hpl_root, work / "build.log", log, "make")
        binary = work / "xhpl"
        if kind == "hpcc":
            flags = [*shlex.split(cflags), f"-I{hpl_root / 'include'}", f"-I{hpl_root / 'include' / ARCH}"]
            libhpl = hpl_root / "lib" / ARCH / "libhpl.a"
            run_logged([mpicc, *flags, "-o", str(binary), str(main_source()), str(libhpl),
                        *shlex.split(link.include), *shlex.split(link.libs), "-lm"],
                       hpl_root, work / "build.log", log, "link xhpl")
        else:
            shutil.copy2(hpl_root / "bin" / ARCH / "xhpl", binary)
        log("smoke test: 1 rank, N=256")
        smoke = smoke_test(binary, blas, stack.name)
        entry = {"name": "xhpl", "binary": str(final / "xhpl"), "key": final.name.split("-", 1)[1],
                 "built_at": now(), "version": hpl_version(hpl_root),
                 "source": package.origin if package else str(source), "source_sha256": source_sum,
                 "tree": kind, "blas": blas, "blas_libs": link.libs, "cflags": cflags, "mpicc": mpicc,
                 "mpi": stack.name, "mpi_version": stack.version,
                 "toolchain": inputs["toolchain"], "patches": patched, "smoke_test_gflops": smoke}
        install(work, final, {"xhpl": binary, "build.log": work / "build.log",
                              f"Make.{ARCH}": hpl_root / f"Make.{ARCH}"}, entry)
    log(f"registered {entry['binary']}")
    return Built(final / "xhpl", entry, rebuilt=True)


def main_source() -> Path:
    """`main` for xhpl built from HPCC's HPL (whose driver is a library function)."""
    return Path(str(resources.files("clusterbench.native") / "src" / "hpl_main.c"))


def smoke_test(binary: Path, blas: str, mpi: str | None = None) -> float:
    """Run the new xhpl once on a tiny problem; its Gflop/s. BuildError unless it PASSED."""
    from clusterbench.bench.placement import blas_dir, choose_blas, library_path_env
    from clusterbench.launch.mpirun import MpiLaunch, mpirun_command

    env = dict(os.environ) | {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    if blas == "generic":
        env |= library_path_env(blas_dir(choose_blas(None, 1)))
    with tempfile.TemporaryDirectory(prefix="xhpl-smoke-") as tmp:
        Path(tmp, "HPL.dat").write_text(render_hpl_dat(HplInput(ns=[256], nbs=[64], grids=[(1, 1)])))
        cmd = mpirun_command(MpiLaunch(ranks=1, bind_to="none", mpi=mpi), [str(binary)])
        try:
            done = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            raise BuildError(f"the new xhpl did not finish a N=256 test in 120 s: {binary}") from None
    outcome = hpl_outcome(done.stdout)
    gflops = [m.value for m in outcome.metrics if m.name == "hpl_gflops"]
    if done.returncode != 0 or not outcome.valid or not gflops:
        raise BuildError(f"the new xhpl failed its smoke test (exit code {done.returncode}):\n"
                         + (done.stdout + done.stderr).strip()[-1200:])
    return gflops[0]
