"""Which MPI a run uses: Open MPI or MPICH, each with its own `mpirun`, `mpicc` and `mpicxx`.

Sites often have both (Debian installs `mpirun.openmpi` and `mpirun.mpich` side by side; a
cluster loads one with an environment module). A run names the one it wants with the `mpi`
parameter (`openmpi` or `mpich`), a campaign with `cluster.mpi`; without either, the `mpirun` on
PATH decides, as a user typing `mpirun` would get. Each choice is looked up once per process
(`mpirun --version` costs a fork) and checked: a `mpirun` that answers as the other MPI is
never used for this one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache

from clusterbench.errors import MissingToolError, UserInputError


def parse_mpirun_version(text: str) -> tuple[str | None, str | None]:
    """'mpirun (Open MPI) 4.1.4' / 'HYDRA build details: Version: 4.0.2' / Intel MPI."""
    m = re.search(r"\(Open MPI\)\s+([\w.\-]+)", text)
    if m:
        return "Open MPI", m.group(1)
    m = re.search(r"Intel\(R\) MPI Library.*?Version\s+([\w.]+)", text, re.S)
    if m:
        return "Intel MPI", m.group(1)
    m = re.search(r"HYDRA build details:\s*Version:\s*([\w.]+)", text, re.S)
    if m:
        return "MPICH", m.group(1)
    return None, None


MPI_CHOICES = ("openmpi", "mpich")
IMPLEMENTATION_NAMES = {"Open MPI": "openmpi", "MPICH": "mpich", "Intel MPI": "intelmpi"}

# Names each MPI's programs have: the plain name first (a loaded environment module puts its own
# there), accepted only when it answers as that MPI, then Debian's alternatives and Hydra's name.
_PROGRAMS = {
    "openmpi": {"mpirun": ("mpirun", "mpirun.openmpi", "mpiexec.openmpi"),
                "mpicc": ("mpicc", "mpicc.openmpi"), "mpicxx": ("mpicxx", "mpicxx.openmpi", "mpic++.openmpi")},
    "mpich": {"mpirun": ("mpirun", "mpirun.mpich", "mpiexec.mpich", "mpiexec.hydra"),
              "mpicc": ("mpicc", "mpicc.mpich"), "mpicxx": ("mpicxx", "mpicxx.mpich", "mpic++.mpich")},
}
_INSTALL = {"openmpi": "apt-get install openmpi-bin libopenmpi-dev (or load your Open MPI module)",
            "mpich": "apt-get install mpich libmpich-dev (or load your MPICH module)"}


@dataclass(frozen=True)
class MpiStack:
    """One MPI implementation's launcher and compiler wrappers, as found on this machine."""

    name: str  # openmpi, mpich (or intelmpi when the default mpirun is Intel's)
    implementation: str  # Open MPI, MPICH, Intel MPI: what `mpirun --version` says
    version: str | None
    mpirun: str
    mpicc: str | None
    mpicxx: str | None

    @property
    def hydra(self) -> bool:
        """MPICH's launcher (Hydra) and its derivatives take Hydra's options."""
        return self.implementation != "Open MPI"

    def describe(self) -> dict:
        return {"mpi": self.name, "mpi_version": self.version, "mpirun": self.mpirun}

    def compiler(self, cxx: bool = False) -> str:
        path = self.mpicxx if cxx else self.mpicc
        if not path:
            what = "mpicxx" if cxx else "mpicc"
            raise MissingToolError(f"no {what} of {self.implementation} found on PATH",
                                   hint=_INSTALL.get(self.name, "install the MPI's development package"))
        return path


_answers: dict[tuple[str, ...], tuple[int, str, str] | None] = {}


def tool_answer(argv: tuple[str, ...], timeout: float = 30.0) -> tuple[int, str, str] | None:
    """(exit code, stdout, stderr) of a query such as `cc --version` or `mpicc --showme`, asked once per
    process (stdin closed): discovery, the kernels' build keys and the MPI's identification ask the
    same ones, 5-10 ms of CPU each; None when it could not run or did not answer within `timeout`."""
    if argv not in _answers:
        try:
            out = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                                 stdin=subprocess.DEVNULL)
            _answers[argv] = (out.returncode, out.stdout, out.stderr)
        except (OSError, subprocess.TimeoutExpired):
            _answers[argv] = None
    return _answers[argv]


@lru_cache(maxsize=32)
def ask_version(path: str) -> tuple[str | None, str | None]:
    """(implementation, version) that `path --version` reports; cached: mpirun does not change."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    return parse_mpirun_version(out.stdout + out.stderr)


@lru_cache(maxsize=32)
def _wrapper_mpi(path: str) -> str | None:
    """Which MPI a compiler wrapper belongs to, from what it adds to the command line."""
    for flag in ("--showme", "-show"):
        answer = tool_answer((path, flag), 10)
        if answer is None:
            return None
        code, out, err = answer
        text = out + err
        if code == 0 and text.strip():
            if re.search(r"openmpi|-lmpi\b", text):
                return "openmpi"
            if re.search(r"mpich|-lmpi\w*mpich", text):
                return "mpich"
    return None


def _compiler(name: str, kind: str) -> str | None:
    """`kind` (mpicc, mpicxx) of MPI `name`: $CLUSTERBENCH_MPICC/MPICXX first, then the usual names."""
    override = os.environ.get("CLUSTERBENCH_MPICXX" if kind == "mpicxx" else "CLUSTERBENCH_MPICC")
    for candidate in ((override,) if override else ()) + _PROGRAMS[name][kind]:
        path = shutil.which(candidate)
        if path and _wrapper_mpi(path) in (name, None if candidate == override else name):
            return path
    return None


@lru_cache(maxsize=8)
def _stack(choice: str | None, path_env: str) -> MpiStack:
    if choice is None:
        mpirun = shutil.which("mpirun")
        if not mpirun:
            raise MissingToolError("mpirun not found on PATH", hint=_INSTALL["openmpi"])
        implementation, version = ask_version(mpirun)
        implementation = implementation or "Open MPI"
        name = IMPLEMENTATION_NAMES.get(implementation, implementation.lower().replace(" ", ""))
        if name in _PROGRAMS:
            return MpiStack(name, implementation, version, mpirun, _compiler(name, "mpicc"), _compiler(name, "mpicxx"))
        mpicc = shutil.which(os.environ.get("CLUSTERBENCH_MPICC") or "mpicc")
        return MpiStack(name, implementation, version, mpirun, mpicc,
                        shutil.which(os.environ.get("CLUSTERBENCH_MPICXX") or "mpicxx"))
    if choice not in MPI_CHOICES:
        raise UserInputError(f"unknown mpi {choice!r}", hint="one of " + ", ".join(MPI_CHOICES))
    wanted = "Open MPI" if choice == "openmpi" else "MPICH"
    mpirun = next((path for path in map(shutil.which, _PROGRAMS[choice]["mpirun"])
                   if path and ask_version(path)[0] == wanted), None)
    if not mpirun:
        raise MissingToolError(f"mpi: {choice}: no {wanted} mpirun found on PATH", hint=_INSTALL[choice])
    return MpiStack(choice, wanted, ask_version(mpirun)[1], mpirun,
                    _compiler(choice, "mpicc"), _compiler(choice, "mpicxx"))


def mpi_stack(choice: str | None = None) -> MpiStack:
    """The MPI named `choice` (openmpi, mpich), or the one whose `mpirun` is on PATH (None).

    MissingToolError (exit 1) when it is not installed; UserInputError for an unknown name.
    """
    return _stack(choice or None, os.environ.get("PATH", ""))


def default_mpi_name() -> str | None:
    """The name of the MPI a run without an `mpi` choice uses, or None when there is none."""
    try:
        return mpi_stack(None).name
    except MissingToolError:
        return None


def linked_mpi(binary: str) -> str | None:
    """Which MPI a binary is linked to (openmpi, mpich) from its dynamic section, or None.

    A program linked to one MPI cannot be started by the other's launcher: its ranks would
    each believe they are rank 0 of 1. Asked for every run of a campaign, so `ldd` runs once per
    file as it is (path, size, modification time), not once per run.
    """
    try:
        st = os.stat(binary)
    except OSError:
        return None
    return _linked_mpi(os.path.realpath(binary), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=256)
def _linked_mpi(binary: str, _size: int, _mtime_ns: int) -> str | None:
    try:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if re.search(r"libmpich\w*\.so|libmpi\.so\.12\b", out.stdout):
        return "mpich"
    if re.search(r"libmpi\.so\.[34]\d*\b|libopen-rte|libopen-pal", out.stdout):
        return "openmpi"
    return None


def check_binary_mpi(binary: str, choice: str | None, what: str, hint: str | None = None) -> None:
    """Refuse (exit 2) a binary linked to another MPI than the one the run asks for."""
    linked = linked_mpi(binary)
    wanted = choice or default_mpi_name()
    if linked and wanted and linked != wanted:
        raise UserInputError(f"mpi: {wanted}: {what} ({binary}) is linked to {linked}, so {wanted}'s mpirun "
                             f"cannot start it", hint=hint or f"use mpi: {linked}, or a {what} built with {wanted}")
