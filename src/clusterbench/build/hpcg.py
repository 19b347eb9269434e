"""`clusterbench build hpcg --source PATH`: xhpcg from the official HPCG 3.x tree.

The tree (directory or tarball) is copied, given a generated `setup/Make.clusterbench`
(`makearch.make_hpcg_arch`: the MPI C++ wrapper, MPI + OpenMP or MPI only) and built with
HPCG's own `make arch=clusterbench`. The new `bin/xhpcg` must write its report for a 16^3
grid on one rank (smoke test) before it is installed under the builds folder and registered.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from clusterbench.build import registry
from clusterbench.build.common import Built, Log, existing_build, install, mkdir, now, obtain, run_logged
from clusterbench.build.makearch import make_hpcg_arch
from clusterbench.errors import MissingToolError, UserInputError
from clusterbench.native.build import BuildError, toolchain_identity

ARCH = "clusterbench"
DEFAULT_CFLAGS = "-O3 -march=native"
BUILD_FORMAT = 1


def find_hpcg_root(tree: Path) -> Path:
    for candidate in (tree, *sorted(tree.glob("*/"))):
        if (candidate / "src" / "main.cpp").is_file() and (candidate / "setup").is_dir():
            return candidate
    raise UserInputError(f"no HPCG source found in {tree}",
                         hint="give the official HPCG 3.x tree or tarball (github.com/hpcg-benchmark/hpcg)")


def hpcg_version(root: Path) -> str:
    for name in ("src/ReportResults.cpp", "README.md", "README"):
        path = root / name
        if path.is_file():
            m = re.search(r"HPCG[-_ ]Benchmark[_ ]?(\d+\.\d+)|version[ =\"]+(\d+\.\d+)",
                          path.read_text(errors="replace"))
            if m:
                return m.group(1) or m.group(2)
    return "unknown"


def find_mpicxx() -> str:
    for name in (os.environ.get("CLUSTERBENCH_MPICXX"), "mpicxx", "mpic++", "mpiCC"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise MissingToolError("no MPI C++ compiler (mpicxx) on PATH", hint="apt-get install libopenmpi-dev")


def build_hpcg(source: Path, openmp: bool = True, cflags: str = DEFAULT_CFLAGS, force: bool = False,
               log: Log = lambda _msg: None) -> Built:
    cxx = find_mpicxx()
    root_cache = registry.builds_root()
    with tempfile.TemporaryDirectory(prefix="hpcg-build-", dir=mkdir(root_cache)) as tmp:
        work = Path(tmp)
        tree, source_sum, _ = obtain(source, work, log, what="HPCG source")
        root = find_hpcg_root(tree)
        inputs = {"format": BUILD_FORMAT, "source_sha256": source_sum, "openmp": openmp, "cflags": cflags,
                  "toolchain": toolchain_identity(cxx)}
        final, done = existing_build("hpcg", "xhpcg", inputs, force, log)
        if done:
            return done
        makefile = make_hpcg_arch(cxx, cflags, openmp)
        (root / "setup" / f"Make.{ARCH}").write_text(makefile)
        log(f"building HPCG {hpcg_version(root)} ({'MPI + OpenMP' if openmp else 'MPI only'})")
        run_logged(["make", f"arch={ARCH}"], root, work / "build.log", log, "make")
        binary = root / "bin" / "xhpcg"
        if not binary.is_file():
            raise BuildError(f"make finished but {binary} is missing", hint="see build.log")
        smoke_test(binary)
        entry = {"name": "xhpcg", "binary": str(final / "xhpcg"), "key": final.name.split("-", 1)[1],
                 "version": hpcg_version(root), "built_at": now(), "source": str(source),
                 "source_sha256": source_sum, "openmp": openmp, "cflags": cflags,
                 "mpicxx": cxx, "toolchain": inputs["toolchain"]}
        install(work, final, {"xhpcg": binary, "build.log": work / "build.log",
                              f"Make.{ARCH}": root / "setup" / f"Make.{ARCH}"}, entry)
    log(f"registered {entry['binary']}")
    return Built(final / "xhpcg", entry, rebuilt=True)


def smoke_test(binary: Path) -> None:
    """One rank, a 16^3 grid, 1 s: the binary must write its HPCG-Benchmark report."""
    from clusterbench.launch.mpirun import MpiLaunch, mpirun_command

    with tempfile.TemporaryDirectory(prefix="xhpcg-smoke-") as tmp:
        cmd = mpirun_command(MpiLaunch(ranks=1, bind_to="none", env={"OMP_NUM_THREADS": "1"}),
                             [str(binary), "--nx=16", "--ny=16", "--nz=16", "--rt=1"])
        try:
            done = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=300,
                                  env=dict(os.environ) | {"OMP_NUM_THREADS": "1"})
        except subprocess.TimeoutExpired:
            raise BuildError(f"the new xhpcg did not finish a 16^3 test in 300 s: {binary}") from None
        if done.returncode != 0 or not list(Path(tmp).glob("HPCG-Benchmark*.txt")):
            raise BuildError(f"the new xhpcg failed its smoke test (exit code {done.returncode}):\n"
                             + (done.stdout + done.stderr).strip()[-1200:])
