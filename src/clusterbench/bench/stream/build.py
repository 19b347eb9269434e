"""`clusterbench build stream --source PATH`: McCalpin's stream.c (5.10), OpenMP, no MPI.

One compile: `cc <cflags> -fopenmp -DSTREAM_ARRAY_SIZE=N -DNTIMES=K stream.c -o stream`. The
array size is compiled in, so it is chosen here by STREAM's rule: each of the three arrays at
least 4 x the node's total last-level cache (`bench.stream.elements_for`, rounded up to whole
elements) and never below stream.c's own default of 10,000,000 elements; `--array-size`
overrides it. Arrays over 2 GiB in all are static data beyond the small code model, so they get
`-mcmodel=medium` (x86-64) or `-mcmodel=large` (arm64). Smoke test: the new binary runs once
with the node's threads and must print "Solution Validates". Registered as `stream`, which the
`stream-binary` benchmark runs.
"""

from __future__ import annotations

import platform
import shlex
from pathlib import Path

from clusterbench.bench.declare import BuildOption, BuildRecipe
from clusterbench.build import common
from clusterbench.build.common import DEFAULT_CFLAGS, Built, Job, Log, Recipe
from clusterbench.errors import UserInputError
from clusterbench.native.build import find_compiler, toolchain_identity
from clusterbench.system.discover import SystemInfo, discover
from clusterbench.units import format_bytes

BINARY = "stream"
STREAM_DEFAULT_ELEMENTS = 10_000_000  # stream.c's own STREAM_ARRAY_SIZE
DEFAULT_NTIMES = 10
SMALL_MODEL_BYTES = 2**31 - 2**24  # static data the default code model can address, with room for the rest
VERSION_RULES = (
    ("stream.c", r"\$Revision:\s*(\d+\.\d+)"),  # printf("STREAM version $Revision: 5.10 $\n")
    ("stream.c", r"stream\.c,v\s+(\d+\.\d+)"),  # the RCS $Id$ line
)


RECIPE = Recipe("stream", BINARY, "STREAM", VERSION_RULES, markers=("stream.c",),
                hint="give McCalpin's STREAM tree or tarball (stream.c; www.cs.virginia.edu/stream)")


def stream_version(root: Path) -> str:
    return common.read_version(root, VERSION_RULES)


def default_array_size(system: SystemInfo) -> int:
    """Elements per array by STREAM's rule: 4 x the node's last-level cache, at least stream.c's 10M."""
    from clusterbench.bench.stream.kernel import elements_for

    return max(STREAM_DEFAULT_ELEMENTS, elements_for(system))


def code_model_flags(array_size: int, machine: str | None = None) -> list[str]:
    """-mcmodel for three static arrays of doubles larger than the small code model allows."""
    if 3 * 8 * array_size <= SMALL_MODEL_BYTES:
        return []
    machine = machine or platform.machine()
    if machine in ("x86_64", "AMD64"):
        return ["-mcmodel=medium"]
    if machine in ("aarch64", "arm64"):
        return ["-mcmodel=large"]
    return []


def check_memory(array_size: int, system: SystemInfo) -> None:
    from clusterbench.bench.native import memory_limit

    need = 3 * 8 * array_size
    limit = memory_limit(system)
    if limit is not None and need > limit:
        raise UserInputError(f"--array-size {array_size}: the three arrays need {format_bytes(need)}, more than "
                             f"the {format_bytes(limit)} this node can spare", hint=f"use --array-size <= "
                             f"{limit // 24} (STREAM's rule wants 4 x the last-level cache per array)")


def smoke_check(output: str) -> str | None:
    from clusterbench.bench.stream.output import stream_outcome

    out = stream_outcome(output)
    return None if out.valid else "; ".join(out.reasons)


def build_stream(source: Path, array_size: int | None = None, ntimes: int = DEFAULT_NTIMES,
                 cflags: str = DEFAULT_CFLAGS, force: bool = False, log: Log = lambda _msg: None) -> Built:
    if ntimes < 2:
        raise UserInputError(f"--ntimes {ntimes}: STREAM needs at least 2 (the first repetition is not counted)")
    if array_size is not None and array_size < 1000:
        raise UserInputError(f"--array-size {array_size}: too small to time")
    system = discover(with_software=False)
    size = array_size or default_array_size(system)
    llc = system.topology.last_level_cache_bytes()
    check_memory(size, system)
    cc = find_compiler(mpi=False)
    flags = [*shlex.split(cflags), "-fopenmp", f"-DSTREAM_ARRAY_SIZE={size}", f"-DNTIMES={ntimes}",
             *code_model_flags(size)]

    def steps(job: Job) -> Built:
        binary = job.work / BINARY
        common.run_logged([cc, *flags, "stream.c", "-o", str(binary)], job.root, job.logfile, log, "compile stream.c")
        job.made(binary, "the compiler")
        log("smoke test: one run with this node's threads")
        output = common.smoke_run([str(binary)], BINARY, smoke_check, ranks=None, timeout=900)
        entry = job.entry(
            BINARY, cflags=cflags, compile_flags=shlex.join(flags), array_size=size,
            array_size_rule=None if array_size else "max(4 x last-level cache, 10M elements)",
            last_level_cache_bytes=llc, ntimes=ntimes, openmp=True, cc=cc, mpi=None,
            toolchain=job.inputs["toolchain"], smoke_test_triad_mbs=_triad(output))
        return job.install({BINARY: binary}, entry, log)

    how = "--array-size" if array_size else f"4 x last-level cache {format_bytes(llc or 0)}, at least 10M"
    return common.build(RECIPE, source, {"flags": flags, "toolchain": toolchain_identity(cc)}, steps, force, log,
                        f"({size} elements per array: {how}; NTIMES={ntimes})")


def _triad(output: str) -> float | None:
    from clusterbench.bench.stream.output import stream_outcome

    return next((m.value for m in stream_outcome(output).metrics if m.name == "stream_triad"), None)


BUILD = BuildRecipe(
    "stream", "STREAM", "Build McCalpin's stream.c with OpenMP and the array size compiled in (no MPI).",
    build_stream, DEFAULT_CFLAGS,
    lambda p: f"STREAM {p['version']}, {p['array_size']:,} elements per array, NTIMES={p['ntimes']}, "
              f"smoke test Triad {p.get('smoke_test_triad_mbs')} MB/s",
    "`clusterbench bench stream-binary` now uses it.",
    (BuildOption("array_size", int, None, "Elements per array (default: STREAM's rule, 4 x the node's last-level "
                 "cache, at least 10M).", minimum=1000, maximum=2**40),
     BuildOption("ntimes", int, DEFAULT_NTIMES, "Repetitions of each kernel (-DNTIMES; the first is not counted).",
                 minimum=2, maximum=10_000)),
    mpi=False)
