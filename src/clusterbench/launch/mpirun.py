"""Build `mpirun` command lines for Open MPI and MPICH/Hydra.

Launchers know nothing about benchmarks: they turn 'run this program on R ranks with this
placement and environment' into an argument list.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

from clusterbench.errors import MissingToolError
from clusterbench.system.software import detect_mpi


@dataclass
class MpiLaunch:
    ranks: int
    env: dict[str, str] = field(default_factory=dict)
    bind_to: str | None = "core"  # core, socket, none
    map_by: str | None = None  # e.g. core, socket, ppr:1:node:pe=2
    oversubscribe: bool = False
    extra: list[str] = field(default_factory=list)


def require_mpirun() -> str:
    path = shutil.which("mpirun")
    if not path:
        raise MissingToolError("mpirun not found on PATH",
                               hint="apt-get install openmpi-bin libopenmpi-dev (or load your MPI module)")
    return path


def mpirun_command(launch: MpiLaunch, program: list[str], implementation: str | None = None) -> list[str]:
    mpirun = require_mpirun()
    impl = implementation or detect_mpi().implementation or "Open MPI"
    if impl == "Open MPI":
        cmd = [mpirun, "-np", str(launch.ranks)]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        if launch.oversubscribe:
            cmd.append("--oversubscribe")
        if launch.map_by:
            cmd += ["--map-by", launch.map_by]
        if launch.bind_to:
            cmd += ["--bind-to", launch.bind_to]
        for key in launch.env:
            cmd += ["-x", key]
    else:  # MPICH / Hydra and derivatives
        cmd = [mpirun, "-n", str(launch.ranks)]
        if launch.bind_to:
            cmd += ["-bind-to", launch.bind_to]
        if launch.map_by:
            cmd += ["-map-by", launch.map_by]
        for key, value in launch.env.items():
            cmd += ["-genv", key, value]
    return cmd + list(launch.extra) + list(program)
