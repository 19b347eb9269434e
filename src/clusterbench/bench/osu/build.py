"""`clusterbench build osu --source PATH`: the OSU Micro-Benchmarks (7.x) tree, autotools.

`./configure CC=mpicc CXX=mpicxx CFLAGS=... CXXFLAGS=...` (with this MPI's wrappers; a git
checkout without `configure` gets `autoreconf -fi` first) and `make -jN` in the folders of the programs
it registers (the one-sided, startup, non-blocking and other folders are not compiled). The programs land in
the build tree (`c/mpi/pt2pt/standard/`, `c/mpi/collective/blocking/`; 5.x: `mpi/pt2pt/`,
`mpi/collective/`). Those the `osu` benchmark runs (latency, bw, bibw and its collectives) plus
osu_mbw_mr and osu_multi_lat are installed into one build folder, each registered under its own
name, so `bench osu -p test=...` finds it. Smoke test: osu_latency for 1-8 bytes between 2 ranks.
"""

from __future__ import annotations

import os
from pathlib import Path

from clusterbench.bench.declare import BuildRecipe
from clusterbench.bench.osu.benchmark import COLLECTIVES, POINT_TO_POINT
from clusterbench.build import common
from clusterbench.build.common import DEFAULT_CFLAGS, BuildError, Built, Job, Log, Recipe
from clusterbench.native.build import toolchain_identity
from clusterbench.system.mpi import mpi_stack

PROGRAMS = tuple(f"osu_{test}" for test in (*POINT_TO_POINT, "mbw_mr", "multi_lat", *COLLECTIVES))
FOLDERS = ("c/mpi/pt2pt/standard", "c/mpi/collective/blocking", "mpi/pt2pt", "mpi/collective")
VERSION_RULES = (
    ("configure.ac", r"AC_INIT\(\s*\[?OSU-Micro-Benchmarks\]?\s*,\s*\[?(\d+\.\d+(?:\.\d+)?)"),
    ("configure", r"^PACKAGE_VERSION='(\d+\.\d+(?:\.\d+)?)'"),
)


RECIPE = Recipe("osu", "osu_latency", "OSU Micro-Benchmarks", VERSION_RULES, markers=("configure.ac", "c/util"),
                hint="give the OSU Micro-Benchmarks 7.x tree or tarball (mvapich.cse.ohio-state.edu/benchmarks)")


def osu_version(root: Path) -> str:
    """configure.ac's AC_INIT (else the generated configure's PACKAGE_VERSION)."""
    return common.read_version(root, VERSION_RULES)


def built_programs(root: Path) -> dict[str, Path]:
    """The programs of PROGRAMS that make produced, by name (the first folder of FOLDERS that has it)."""
    found = {}
    for name in PROGRAMS:
        path = next((root / f / name for f in FOLDERS if os.access(root / f / name, os.X_OK)), None)
        if path is not None and path.is_file():
            found[name] = path
    return found


def smoke_check(output: str) -> str | None:
    from clusterbench.bench.osu.output import osu_outcome, parse_osu

    out = osu_outcome(parse_osu(output))
    return None if out.valid and out.metrics else "; ".join(out.reasons) or "no latency table"


def build_osu(source: Path, cflags: str = DEFAULT_CFLAGS, force: bool = False, log: Log = lambda _msg: None,
              mpi: str | None = None) -> Built:
    stack = mpi_stack(mpi)
    mpicc, mpicxx = stack.compiler(), stack.compiler(cxx=True)

    def steps(job: Job) -> Built:
        root = job.root
        if not (root / "configure").is_file():
            common.run_logged(["autoreconf", "-fi"], root, job.logfile, log, "autoreconf")
        common.run_logged(["./configure", f"CC={mpicc}", f"CXX={mpicxx}", f"CFLAGS={cflags}", f"CXXFLAGS={cflags}"],
                          root, job.logfile, log, "configure")
        folders = [f for f in FOLDERS if (root / f / "Makefile").is_file()]
        if folders:  # only the folders of the programs it registers: a third of the whole suite's compile time
            for folder in folders:
                common.run_logged(["make", common.make_jobs(), "-C", folder], root, job.logfile, log,
                                  f"make -C {folder}")
        else:
            common.run_logged(["make", common.make_jobs()], root, job.logfile, log, "make")
        programs = built_programs(root)
        if "osu_latency" not in programs:
            raise BuildError(f"make finished but osu_latency is not in {', '.join(FOLDERS[:2])} of {root}")
        log("smoke test: osu_latency, 1-8 bytes, 2 ranks")
        output = common.smoke_run([str(programs["osu_latency"]), "-m", "1:8"], "osu_latency", smoke_check,
                                  ranks=2, mpi=stack.name)
        fields = {"cflags": cflags, "smoke_test_latency_us": _latency(output), "suite": "osu",
                  "installed": {name: str(job.final / name) for name in programs},
                  **common.mpi_fields(stack, job.inputs["toolchain"], mpicc=mpicc, mpicxx=mpicxx)}
        entries = [job.entry(name, program=str(path.relative_to(root)), **fields)
                   for name, path in programs.items()]
        return job.install(programs, entries, log)

    inputs = {"cflags": cflags, "toolchain": toolchain_identity(mpicc), "toolchain_cxx": toolchain_identity(mpicxx)}
    return common.build(RECIPE, source, inputs, steps, force, log, f"with {stack.implementation}")


def _latency(output: str) -> float | None:
    from clusterbench.bench.osu.output import osu_outcome, parse_osu

    return next((m.value for m in osu_outcome(parse_osu(output)).metrics if m.name == "latency_us"), None)


BUILD = BuildRecipe(
    "osu", "OSU", "Build the OSU Micro-Benchmarks (configure && make) and register osu_latency, osu_bw, ... each.",
    build_osu, DEFAULT_CFLAGS,
    lambda p: f"OSU {p['version']}, {p['mpi']}, smoke test {p.get('smoke_test_latency_us')} us; "
              f"installed beside it: {', '.join(p.get('installed', {}))}",
    "`clusterbench bench osu -p test=...` now uses them.")
