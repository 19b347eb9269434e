"""Compile clusterbench's own C kernels on first use, against this cluster's compiler and MPI.

A wheel cannot carry binaries linked to every site's MPI, so the sources ship in the package
(`native/src/*.c`) and are built with the detected `mpicc` (MPI kernels) or `cc` into the build
cache (`clusterbench.build.cache`): `$CLUSTERBENCH_CACHE` or `$XDG_CACHE_HOME/clusterbench/native/`,
one folder `<kernel>-<key>/` per build. The key hashes the compiler's path and version, what the
MPI wrapper adds (`mpicc --showme` / `-show`), the flags, the libraries and the source; changing
any of them builds a new binary, and an unchanged one is reused. The cache's lock and rename make
two campaigns starting at once compile once, and never leave a half-written binary.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from clusterbench.build import cache
from clusterbench.build.cache import BuildError  # raised here, and imported from here by callers
from clusterbench.errors import MissingToolError, UserInputError
from clusterbench.system.mpi import mpi_stack, tool_answer

DEFAULT_CFLAGS = "-O3 -march=native"


@dataclass(frozen=True)
class Build:
    kernel: str
    binary: Path
    key: str
    command: list[str]
    rebuilt: bool


_SOURCES = Path(__file__).parent / "src"  # what importlib.resources.files("clusterbench.native") / "src" is


def source_path(kernel: str) -> Path:
    path = _SOURCES / f"{kernel}.c"
    if not path.is_file():  # the package is not a folder (a zip): ask importlib.resources (~10 ms of imports)
        from importlib import resources

        path = Path(str(resources.files("clusterbench.native") / "src" / f"{kernel}.c"))
    if not path.is_file():
        raise UserInputError(f"no native kernel named {kernel!r}")
    return path


def source_digest(source: Path) -> str:
    """The kernel's source and the headers beside it: a change to either is a new build."""
    digest = hashlib.sha256(source.read_bytes())
    for header in sorted(source.parent.glob("*.h")):
        digest.update(header.name.encode() + header.read_bytes())
    return digest.hexdigest()


def cache_root() -> Path:
    """The kernels' cache: `$CLUSTERBENCH_CACHE` itself, else `$XDG_CACHE_HOME/clusterbench/native`."""
    return cache.cache_dir("native", override_folder="")


def default_cflags() -> list[str]:
    return shlex.split(os.environ.get("CLUSTERBENCH_CFLAGS", DEFAULT_CFLAGS))


def find_compiler(mpi: bool, mpi_choice: str | None = None) -> str:
    """The `mpicc` of MPI `mpi_choice` (openmpi, mpich; None: the one on PATH; $CLUSTERBENCH_MPICC
    first) for MPI kernels, `cc` ($CC) for the others."""
    if mpi:
        return mpi_stack(mpi_choice).compiler()
    name = os.environ.get("CC") or "cc"
    path = shutil.which(name)
    if not path:
        raise MissingToolError(f"compiler {name!r} not found on PATH", hint="apt-get install gcc (or set CC)")
    return path


def _output(cmd: list[str]) -> str:
    answer = tool_answer(tuple(cmd), 30)  # asked once per process: discovery asks the same
    return "" if answer is None else (answer[1] + answer[2]).strip()


@lru_cache(maxsize=8)  # asked for every run of a campaign; the compiler does not change meanwhile
def toolchain_identity(compiler: str) -> dict:
    """What decides the binary besides the source: compiler, its version, the MPI it wraps."""
    identity = {"compiler": os.path.realpath(compiler), "version": _output([compiler, "--version"]).splitlines()[:1]}
    if "mpi" in os.path.basename(compiler):
        identity["mpi"] = _output([compiler, "--showme"]) or _output([compiler, "-show"])
    return identity


def build(kernel: str, mpi: bool, openmp: bool = False, libs: tuple[str, ...] = (),
          cflags: list[str] | None = None, defines: tuple[str, ...] = (), mpi_choice: str | None = None) -> Build:
    """The cached binary of `kernel` for this toolchain and these flags, compiled if needed.

    Each MPI gets its own binary: the wrapper's `--showme`/`-show` is part of the key."""
    folder, inputs, compiler, flags, source = _cache_entry(kernel, mpi, openmp, libs, cflags, defines, mpi_choice)
    binary = folder / kernel

    def command(output: Path) -> list[str]:
        return [compiler, *flags, "-o", str(output), str(source), *[f"-l{lib}" for lib in libs], "-lm"]

    made = Build(kernel, binary, cache.key_of(folder), command(binary), rebuilt=True)
    with cache.claim(folder, lambda: binary if _runnable(binary) else None) as found:
        if found:
            return replace(made, rebuilt=False)
        with cache.workspace(folder.parent, f".{folder.name}-") as work:
            staged = work / folder.name
            staged.mkdir()
            _compile(kernel, command(staged / kernel), shown=made.command)
            (staged / "build.json").write_text(json.dumps(inputs | {"command": made.command}, indent=2))
            cache.publish(staged, folder)
    return made


def _cache_entry(kernel: str, mpi: bool, openmp: bool = False, libs: tuple[str, ...] = (),
                 cflags: list[str] | None = None, defines: tuple[str, ...] = (), mpi_choice: str | None = None,
                 ) -> tuple[Path, dict, str, list[str], Path]:
    """The cache folder of `kernel` built with these inputs, the inputs, compiler, flags and source."""
    source = source_path(kernel)
    compiler = find_compiler(mpi, mpi_choice)
    flags = list(cflags if cflags is not None else default_cflags())
    if openmp:
        flags.append("-fopenmp")
    flags += [f"-D{d}" for d in defines]
    inputs = {"kernel": kernel, "toolchain": toolchain_identity(compiler), "flags": flags, "libs": list(libs),
              "source_sha256": source_digest(source)}
    return cache.entry(cache_root(), kernel, inputs), inputs, compiler, flags, source


def _runnable(binary: Path) -> bool:
    return binary.is_file() and os.access(binary, os.X_OK)


def _compile(kernel: str, cmd: list[str], shown: list[str]) -> None:
    """Run the compiler; BuildError with the command as the user would type it (`shown`: the
    binary's final path, not the staging one) and the compiler's last messages."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        messages = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise BuildError(f"compiling the {kernel} kernel failed (exit code {done.returncode}):\n"
                         f"$ {shlex.join(shown)}\n{messages}",
                         hint="check the compiler and flags (CLUSTERBENCH_CFLAGS, the cflags parameter)")


def clock_binary() -> Path:
    """The fmaclock kernel (plain `cc`, no MPI) that the node-state script runs to measure the
    core clock; built once per toolchain and flags, in the shared cache the nodes also see."""
    return build("fmaclock", mpi=False).binary


def built_clock_binary() -> Path | None:
    """The clock kernel when it is already built, else None; never compiles. For reading the state
    before the command line is checked (cli.main), where bad input must build nothing."""
    try:
        binary = _cache_entry("fmaclock", mpi=False)[0] / "fmaclock"
    except (UserInputError, OSError):  # no compiler: the run reads the state without a clock
        return None
    return binary if _runnable(binary) else None
