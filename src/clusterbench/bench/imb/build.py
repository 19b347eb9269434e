"""`clusterbench build imb --source PATH`: IMB-MPI1 from the Intel MPI Benchmarks tree (2021.x).

Upstream's own `make IMB-MPI1` with this MPI's wrappers (`CC=mpicc CXX=mpicxx`). Quirks handled:
its makefile compiles with `-Werror`, and Open MPI's C++ bindings header then fails, so
`-DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1` go into CPPFLAGS; and it *appends* `-g -O0 -Wall
-Werror` after our CFLAGS/CXXFLAGS, so IMB is built at -O0 whatever --cflags says (the flags
actually used are read back from the build log and recorded). Smoke test: PingPong for 1-4
bytes between 2 ranks; the table and "All processes entering MPI_Finalize" must appear.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from clusterbench.bench.declare import BuildRecipe
from clusterbench.build import common
from clusterbench.build.common import DEFAULT_CFLAGS, Built, Job, Log, Recipe
from clusterbench.native.build import toolchain_identity
from clusterbench.system.mpi import mpi_stack

BINARY = "IMB-MPI1"
CPPFLAGS = "-DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1"  # no MPI C++ bindings header (it breaks -Werror)
VERSION_RULES = (
    ("src_cpp/imb.cpp", r'"Intel\(R\) MPI Benchmarks (\d{4}\.\d+)"'),
    ("src_c/P2P/imb_p2p.c", r'VERSION\s*=\s*"(\d{4}\.\d+)"'),
    ("ReadMe_IMB.txt", r"Intel\(R\) MPI Benchmarks (\d{4}\.\d+)"),
    ("README.md", r"Intel\(R\) MPI Benchmarks (\d{4}\.\d+)"),
)


RECIPE = Recipe("imb", BINARY, "IMB", VERSION_RULES, markers=("src_cpp/Makefile", "src_c"),
                hint="give the Intel MPI Benchmarks tree or tarball (github.com/intel/mpi-benchmarks)")


def imb_version(root: Path) -> str:
    """The version IMB prints in its banner (src_cpp/imb.cpp), else the one of its ReadMe."""
    return common.read_version(root, VERSION_RULES)


def used_flags(build_log: str) -> tuple[str | None, str | None]:
    """The C and C++ compile flags of the first compile lines in the log (after the wrapper's name)."""
    found = []
    for source in (r"\S+\.c", r"\S+\.cpp"):
        m = re.search(rf"^\S*mpi\S*\s+(.*?)\s+-c\s+-o\s+\S+\s+{source}\s*$", build_log, re.M)
        found.append(m.group(1) if m else None)
    return found[0], found[1]


def optimization(flags: str | None) -> str | None:
    """The -O level that wins on a compile line: the last one."""
    levels = [f for f in shlex.split(flags or "") if re.fullmatch(r"-O\w*", f)]
    return levels[-1] if levels else None


def smoke_check(output: str) -> str | None:
    from clusterbench.bench.imb.output import parse_imb

    parsed = parse_imb(output)
    if not parsed.sections:
        return "no PingPong table"
    if not parsed.finalized:
        return "no 'All processes entering MPI_Finalize'"
    return None


def build_imb(source: Path, cflags: str = DEFAULT_CFLAGS, force: bool = False, log: Log = lambda _msg: None,
              mpi: str | None = None) -> Built:
    stack = mpi_stack(mpi)
    mpicc, mpicxx = stack.compiler(), stack.compiler(cxx=True)

    def steps(job: Job) -> Built:
        make = ["make", BINARY, f"CC={mpicc}", f"CXX={mpicxx}", f"CPPFLAGS={CPPFLAGS}", f"CFLAGS={cflags}",
                f"CXXFLAGS={cflags}"]
        common.run_logged(make, job.root, job.logfile, log, f"make {BINARY}")
        binary = job.made(job.root / BINARY, "make")
        c_flags, cxx_flags = used_flags(job.logfile.read_text(errors="replace"))
        log("smoke test: PingPong, 1-4 bytes, 2 ranks")
        output = common.smoke_run([str(binary), "-msglog", "0:2", "-iter", "100", "PingPong"], BINARY,
                                  smoke_check, ranks=2, mpi=stack.name)
        entry = job.entry(
            BINARY, cflags=cflags, cppflags=CPPFLAGS, compile_flags_c=c_flags,
            compile_flags_cxx=cxx_flags, optimization=optimization(cxx_flags) or optimization(c_flags),
            smoke_test_latency_us=_latency(output), **common.mpi_fields(stack, job.inputs["toolchain"], mpicc=mpicc,
                                                                        mpicxx=mpicxx))
        return job.install({BINARY: binary}, entry, log)

    inputs = {"cflags": cflags, "toolchain": toolchain_identity(mpicxx), "toolchain_c": toolchain_identity(mpicc)}
    return common.build(RECIPE, source, inputs, steps, force, log, f"(IMB-MPI1) with {stack.implementation}")


def _latency(output: str) -> float | None:
    from clusterbench.bench.imb.output import parse_imb, section_outcome

    parsed = parse_imb(output)
    for section in parsed.sections:
        for metric in section_outcome(parsed, section).metrics:
            if metric.name == "latency_us":
                return metric.value
    return None


BUILD = BuildRecipe(
    "imb", "IMB", "Build IMB-MPI1 of the Intel MPI Benchmarks (upstream make; it compiles at -O0 whatever --cflags).",
    build_imb, DEFAULT_CFLAGS,
    lambda p: f"IMB {p['version']}, {p['mpi']}, compiled {p.get('optimization')}, "
              f"smoke test PingPong {p.get('smoke_test_latency_us')} us",
    "`clusterbench bench imb` now uses it.")
