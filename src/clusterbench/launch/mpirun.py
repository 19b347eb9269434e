"""Build `mpirun` command lines for Open MPI and MPICH/Hydra.

Launchers know nothing about benchmarks: they turn 'run this program on R ranks with this
placement and environment' into an argument list. Across nodes that means a hostfile, the
mapping/ranking/binding options and the environment forwarded to remote ranks (`-x NAME` for
Open MPI, `-genv NAME VALUE` for Hydra). `interconnect` selects the transport as the STFC
study compared them: `shm` (shared memory only, one node), `tcp` (TCP even between ranks of
one node), `ib` (the InfiniBand/UCX path), `auto` (the MPI's own choice).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from clusterbench.errors import UserInputError
from clusterbench.system.mpi import MpiStack, mpi_stack


@dataclass
class MpiLaunch:
    ranks: int
    env: dict[str, str] = field(default_factory=dict)
    bind_to: str | None = "core"  # core, socket, none
    map_by: str | None = None  # e.g. core, socket, ppr:1:node:pe=2
    oversubscribe: bool = False
    extra: list[str] = field(default_factory=list)
    hostfile: str | None = None  # several nodes: the generated hostfile of the run
    rank_by: str | None = None  # Open MPI --rank-by (core, socket, node, ...)
    interconnect: str | None = None  # auto (None), shm, tcp, ib
    net_if: str | None = None  # restrict TCP to this interface or CIDR (btl_tcp_if_include / -iface)
    ranks_per_node: int | None = None  # Hydra -ppn
    mpi: str | None = None  # openmpi, mpich; None: the mpirun on PATH
    threads: int | None = None  # per rank (srun --cpus-per-task); None: read OMP_NUM_THREADS
    hwthread_cpus: bool = False  # Open MPI --use-hwthread-cpus: PE=n and slots count hardware threads


INTERCONNECTS = ("auto", "shm", "tcp", "ib")


def interconnect_args(launch: MpiLaunch, implementation: str) -> list[str]:
    """The transport selection of `launch` for this MPI (no arguments for auto)."""
    choice = launch.interconnect or "auto"
    if choice not in INTERCONNECTS:
        raise UserInputError(f"unknown interconnect {choice!r}", hint="one of " + ", ".join(INTERCONNECTS))
    if implementation == "Open MPI":
        args = {"shm": ["--mca", "pml", "ob1", "--mca", "btl", "self,vader"],
                "tcp": ["--mca", "pml", "ob1", "--mca", "btl", "self,tcp"],
                "ib": ["--mca", "pml", "ucx"], "auto": []}[choice]
        if launch.net_if:
            args += ["--mca", "btl_tcp_if_include", launch.net_if, "--mca", "oob_tcp_if_include", launch.net_if]
        return args
    # MPICH: NOLOCAL makes ranks of one node talk through the network module as well; the
    # network module is UCX (UCX_TLS) or libfabric (FI_PROVIDER) depending on the build, and
    # the other's variable is ignored, so both are set.
    env = {"shm": {},
           "tcp": {"MPIR_CVAR_NOLOCAL": "1", "MPIR_CVAR_CH3_NOLOCAL": "1", "UCX_TLS": "tcp,self",
                   "FI_PROVIDER": "tcp"},
           "ib": {"UCX_TLS": "rc,ud,sm,self", "FI_PROVIDER": "verbs"}, "auto": {}}[choice]
    args = [a for key, value in env.items() for a in ("-genv", key, value)]
    return args + (["-iface", launch.net_if] if launch.net_if else [])


def require_mpirun(mpi: str | None = None) -> str:
    """The `mpirun` of MPI `mpi` (None: the one on PATH); MissingToolError when absent."""
    return mpi_stack(mpi).mpirun


def mpirun_command(launch: MpiLaunch, program: list[str], stack: MpiStack | None = None) -> list[str]:
    """The launch line of `launch.mpi`'s mpirun: Open MPI's options, or Hydra's."""
    stack = stack or mpi_stack(launch.mpi)
    impl = stack.implementation
    if not stack.hydra:
        cmd = [stack.mpirun, "-np", str(launch.ranks)]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        if launch.oversubscribe:
            cmd.append("--oversubscribe")
        if launch.hostfile:
            cmd += ["--hostfile", launch.hostfile]
        if launch.hwthread_cpus:
            cmd.append("--use-hwthread-cpus")
        if launch.map_by:
            cmd += ["--map-by", launch.map_by]
        if launch.rank_by:
            cmd += ["--rank-by", launch.rank_by]
        if launch.bind_to:
            cmd += ["--bind-to", launch.bind_to]
        for key in launch.env:
            cmd += ["-x", key]
    else:  # MPICH / Hydra and derivatives
        cmd = [stack.mpirun, "-n", str(launch.ranks)]
        if launch.hostfile:
            cmd += ["-f", launch.hostfile]
        if launch.ranks_per_node:
            cmd += ["-ppn", str(launch.ranks_per_node)]
        if launch.bind_to:
            cmd += ["-bind-to", launch.bind_to]
        if launch.map_by:
            cmd += ["-map-by", launch.map_by]
        for key, value in launch.env.items():
            cmd += ["-genv", key, value]
    cmd += interconnect_args(launch, impl)
    return cmd + list(launch.extra) + list(program)
