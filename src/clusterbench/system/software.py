"""Software facts of a node: memory, OS, MPI, BLAS and compilers.

These go into the system fingerprint stored with every run, so that two results can be
compared knowing whether the BLAS or the MPI underneath changed. Each probe is cheap (a file
read or one short subprocess) and never fails discovery: a probe that cannot answer says
so in its value. Which benchmark programs are here is not a system fact but each benchmark's
own question (where it looks, what clusterbench built): `bench.registry.availability()`.
"""

from __future__ import annotations

import glob
import os
import platform
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from clusterbench.system.mpi import ask_version, tool_answer

TOOLS = {
    "mpirun": "apt-get install openmpi-bin libopenmpi-dev",
    "mpicc": "apt-get install libopenmpi-dev",
    "cc": "apt-get install build-essential",
    "lstopo-no-graphics": "apt-get install hwloc",
}


@dataclass
class Memory:
    total_bytes: int
    available_bytes: int
    source: str = "/proc/meminfo"


def read_meminfo(path: str = "/proc/meminfo") -> Memory:
    """MemTotal and MemAvailable. hwloc can under-report NUMA memory in VMs, this cannot."""
    return parse_meminfo(Path(path).read_text(), path)


def parse_meminfo(text: str, source: str = "/proc/meminfo") -> Memory:
    """The same from the text of a meminfo file (a remote node's, read over ssh)."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"(\w+):\s+(\d+)\s*kB", line)
        if m:
            values[m.group(1)] = int(m.group(2)) * 1024
    total = values["MemTotal"]
    return Memory(total, values.get("MemAvailable", values.get("MemFree", total)), source)


def _first_line(cmd: list[str], timeout: float = 5) -> str | None:
    answer = tool_answer(tuple(cmd), timeout)  # `cc --version`: the kernels' build key asks it too
    if answer is None:
        return None
    text = (answer[1] or answer[2]).strip()
    return text.splitlines()[0].strip() if text else None


@dataclass
class MpiInfo:
    implementation: str | None
    version: str | None
    mpirun: str | None
    mpicc: str | None

    @property
    def label(self) -> str:
        if not self.mpirun:
            return "not found"
        return f"{self.implementation or 'unknown MPI'} {self.version or ''}".strip()


def detect_mpi() -> MpiInfo:
    """The MPI a plain `mpirun` starts (asked once per process, with the MPI choice's own cache)."""
    mpirun = shutil.which("mpirun")
    impl, version = ask_version(mpirun) if mpirun else (None, None)
    return MpiInfo(impl, version, mpirun, shutil.which("mpicc"))


def multiarch_triplet() -> str:
    machine = platform.machine()
    return {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu",
            "ppc64le": "powerpc64le-linux-gnu", "riscv64": "riscv64-linux-gnu"}.get(
        machine, f"{machine}-linux-gnu")


@dataclass
class BlasInfo:
    """Which libblas.so.3 a plain `-lblas` program loads, and which variants exist."""

    alternative: str | None  # resolved path of the libblas.so.3 alternative
    variant: str | None  # e.g. openblas-pthread, blis-openmp
    variants: dict[str, str] = field(default_factory=dict)  # variant -> directory
    ldconfig: list[str] = field(default_factory=list)


def variant_of_path(path: str | None) -> str | None:
    """'/usr/lib/x86_64-linux-gnu/openblas-serial/libblas.so.3' -> 'openblas-serial'."""
    if not path:
        return None
    parent = os.path.basename(os.path.dirname(path))
    if parent.endswith("-linux-gnu") or parent in ("lib", "lib64"):
        return "reference" if "blas" in os.path.basename(path) else None
    return parent


def blas_variant_dirs(libdir: str | None = None) -> dict[str, str]:
    """Variant name -> directory holding that variant's libblas.so.3 (Debian's layout)."""
    libdir = libdir or f"/usr/lib/{multiarch_triplet()}"
    return {
        os.path.basename(os.path.dirname(p)): os.path.dirname(p)
        for p in sorted(glob.glob(os.path.join(libdir, "*", "libblas.so.3")))
    }


def detect_blas(libdir: str | None = None) -> BlasInfo:
    libdir = libdir or f"/usr/lib/{multiarch_triplet()}"
    variants = blas_variant_dirs(libdir)
    link = os.path.join(libdir, "libblas.so.3")
    resolved = os.path.realpath(link) if os.path.exists(link) else None
    alt = f"/etc/alternatives/libblas.so.3-{multiarch_triplet()}"
    alternative = os.path.realpath(alt) if os.path.exists(alt) else resolved
    # The alternative points at the variant's libblas.so.3, itself maybe a link to the .so.
    chosen = os.readlink(alt) if os.path.islink(alt) else alternative
    ld = []
    out = _ldconfig_blas()
    if out:
        ld = out
    return BlasInfo(alternative, variant_of_path(chosen), variants, ld)


def _ldconfig_blas() -> list[str]:
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    try:
        out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return sorted({line.split("=>")[-1].strip() for line in out.splitlines()
                   if re.search(r"lib(open)?blas\S*\.so|libblis", line)})


def os_release(path: str = "/etc/os-release") -> str:
    try:
        text = Path(path).read_text()
    except OSError:
        return platform.platform()
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.M)
    return m.group(1) if m else platform.platform()


@dataclass
class Software:
    os: str
    kernel: str
    mpi: MpiInfo
    blas: BlasInfo
    compilers: dict[str, str | None]
    python: str

    def to_dict(self) -> dict:
        return asdict(self)


def detect_software() -> Software:
    cc = shutil.which("cc")
    return Software(
        os=os_release(),
        kernel=platform.release(),
        mpi=detect_mpi(),
        blas=detect_blas(),
        compilers={"cc": _first_line([cc, "--version"]) if cc else None},
        python=platform.python_version(),
    )
