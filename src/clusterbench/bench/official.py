"""Official benchmark binaries (IMB, OSU, STREAM, HPCG, iperf3): found, never rebuilt here.

A binary is looked for, in this order: the run's `binary` parameter; the benchmark's own
environment variable (`$CLUSTERBENCH_IMB`, ...); the folders of `$CLUSTERBENCH_PATH`; `PATH`
(which is where loaded environment modules put theirs: the loaded modules are named then);
and the builds registered by `clusterbench build`. `clusterbench benchmarks` prints which.
The launch (ranks, threads, binding, mapping) is bench/program.py's, as for the built-in kernels.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from clusterbench.bench.params import Param
from clusterbench.bench.placement import PLACEMENT_PARAMS
from clusterbench.bench.program import PlacedProgram
from clusterbench.build import registry
from clusterbench.errors import MissingToolError
from clusterbench.system.mpi import check_binary_mpi, linked_mpi

BINARY_PARAM = Param("binary", str, None, "path of the benchmark binary (default: found as `clusterbench "
                     "benchmarks` shows)")
OFFICIAL_PLACEMENT = (*PLACEMENT_PARAMS, BINARY_PARAM)


@dataclass(frozen=True)
class Found:
    path: str
    how: str  # given, $VAR, $CLUSTERBENCH_PATH, PATH, built by clusterbench

    def describe(self) -> str:
        return f"{self.path} ({self.how})"


# Programs that carry a benchmark's name on PATH but are something else: Debian's ImageMagick
# installs /usr/bin/stream (-> stream-im6.q16), which is not McCalpin's STREAM.
IMPOSTORS = re.compile(r"^stream-im\d")


def impostor(path: str) -> bool:
    return bool(IMPOSTORS.match(os.path.basename(os.path.realpath(path))))


def find_binary(names: tuple[str, ...], env_var: str | None = None, explicit: str | None = None,
                mpi: str | None = None) -> Found | None:
    """The binary to run. With `mpi` (openmpi, mpich), one found on $CLUSTERBENCH_PATH or PATH that
    is linked to the other MPI is passed over, and only builds made with that MPI are taken."""

    def fits(path: str) -> bool:
        return not impostor(path) and (mpi is None or linked_mpi(path) in (mpi, None))

    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise MissingToolError(f"binary not found or not executable: {explicit}",
                                   hint="give the path of the built benchmark binary")
        return Found(explicit, "given")
    if env_var and os.environ.get(env_var):
        return Found(os.environ[env_var], f"${env_var}")
    for folder in filter(None, os.environ.get("CLUSTERBENCH_PATH", "").split(os.pathsep)):
        for name in names:
            path = Path(folder) / name
            if path.is_file() and os.access(path, os.X_OK) and fits(str(path)):
                return Found(str(path), "$CLUSTERBENCH_PATH")
    for name in names:
        path = shutil.which(name)
        if path and fits(path):
            modules = os.environ.get("LOADEDMODULES")
            return Found(path, f"PATH; modules loaded: {modules.replace(':', ', ')}" if modules else "PATH")
    for name in names:
        # a build records its MPI (older ones: Open MPI); "mpi": null is a program without MPI (STREAM)
        built = [b for b in registry.builds(name) if mpi is None or b.get("mpi", "openmpi") in (mpi, None)]
        if built:
            return Found(built[0]["binary"], f"built by clusterbench from {built[0].get('source')}")
    return None


class OfficialBinary(PlacedProgram):
    """A program found, never built here (see find_binary); subclasses give names, arguments and parse."""

    binary_names: ClassVar[tuple[str, ...]] = ()
    env_var: ClassVar[str | None] = None
    install_hint: ClassVar[str] = ""

    @classmethod
    def names_for(cls, point: dict | None) -> tuple[str, ...]:
        return cls.binary_names

    @classmethod
    def available(cls) -> tuple[bool, str]:
        found = find_binary(cls.names_for(None), cls.env_var)
        if found:
            return True, found.describe()
        return False, f"{cls.names_for(None)[0]} not found: {cls.install_hint}"

    @classmethod
    def from_point(cls, point: dict) -> OfficialBinary:
        names = cls.names_for(point)
        mpi = point.get("mpi")  # set by resolve() when the run goes through mpirun
        found = find_binary(names, cls.env_var, point.get("binary"), mpi)
        if not found:
            raise MissingToolError(f"{names[0]} not found (benchmark '{cls.name}'{', mpi ' + mpi if mpi else ''})",
                                   hint=cls.install_hint)
        if mpi:
            check_binary_mpi(found.path, mpi, names[0])
        return cls.placed(point, Path(found.path))
