"""One entry point for a placement question: a topology and a launch, the CPUs of every task and thread.

`clusterbench pin` and the library call this; runs use launch/predict.py, which asks the same
calculators with the options a site really put on the command line.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.errors import UserInputError
from clusterbench.pinning.model import LAUNCHERS, SLURM_FLAVOURS, Prediction
from clusterbench.pinning.mpirun import hydra_placement, openmpi_placement
from clusterbench.pinning.openmp import with_threads
from clusterbench.pinning.slurm import srun_placement
from clusterbench.pinning.strategies import launcher_options
from clusterbench.system.topology import Topology

MAX_TASKS = 65536


@dataclass
class PinRequest:
    """A launch as its launcher's options say it; the options of the other launchers stay None."""

    launcher: str  # srun, openmpi, hydra
    ntasks: int
    cpus_per_task: int = 1  # threads per task (OMP_NUM_THREADS)
    nodes: int = 1
    ntasks_per_node: int | None = None
    strategy: str | None = None  # a named strategy instead of the launcher options
    # srun
    flavour: str = "slurm"
    cpu_bind: str | None = None
    distribution: str | None = None
    hint: str | None = None
    overcommit: bool = False
    # mpirun (Open MPI, Hydra)
    map_by: str | None = None
    bind_to: str | None = None
    rank_by: str | None = None
    oversubscribe: bool = False
    hwthread_cpus: bool = False
    # OpenMP inside each task
    omp_places: str | None = None
    omp_proc_bind: str | None = None


def check(req: PinRequest, topology: Topology) -> None:
    """Refuse what no launcher would start, before any list is built."""
    if req.launcher not in LAUNCHERS or req.launcher == "none":
        raise UserInputError(f"unknown launcher {req.launcher!r}", where="--launcher", hint="srun, openmpi or hydra")
    if req.flavour not in SLURM_FLAVOURS:
        raise UserInputError(f"unknown Slurm flavour {req.flavour!r}", where="--flavour",
                             hint=" or ".join(SLURM_FLAVOURS))
    for name, value in (("--ntasks", req.ntasks), ("--cpus-per-task", req.cpus_per_task), ("--nodes", req.nodes)):
        if not 1 <= value <= MAX_TASKS:
            raise UserInputError(f"{value} is out of range", where=name, hint=f"1 to {MAX_TASKS}")
    per_node = req.ntasks_per_node or -(-req.ntasks // req.nodes)
    allowed = req.oversubscribe if req.launcher != "srun" else req.overcommit
    if per_node * req.cpus_per_task > topology.pus_total and not allowed:
        flag = "--overcommit" if req.launcher == "srun" else "--oversubscribe"
        raise UserInputError(f"{per_node} tasks x {req.cpus_per_task} CPUs per node is more than the "
                             f"{topology.pus_total} CPUs of a node ({topology.source})", where="--ntasks",
                             hint=f"use fewer tasks or threads, more --nodes, or {flag} to share CPUs")


def calculate(topology: Topology, req: PinRequest) -> Prediction:
    """The placement of `req` on nodes shaped like `topology`, threads included."""
    check(req, topology)
    if req.strategy:
        per_node = req.ntasks_per_node or -(-req.ntasks // req.nodes)
        options = launcher_options(req.strategy, req.launcher, req.cpus_per_task, per_node)
        given = [k for k in options if getattr(req, k) not in (None, False)]
        if given:
            raise UserInputError(f"--strategy {req.strategy} sets {', '.join(given)} itself", where="--strategy",
                                 hint="give either a strategy or the launcher's options")
        req = PinRequest(**(vars(req) | options))
    if req.launcher == "srun":
        pred = srun_placement(topology, ntasks=req.ntasks, nodes=req.nodes, ntasks_per_node=req.ntasks_per_node,
                              cpus_per_task=req.cpus_per_task, cpu_bind=req.cpu_bind, distribution=req.distribution,
                              hint=req.hint, flavour=req.flavour, overcommit=req.overcommit)
    elif req.launcher == "hydra":
        pred = hydra_placement(topology, n=req.ntasks, nodes=req.nodes, ppn=req.ntasks_per_node, map_by=req.map_by,
                               bind_to=req.bind_to)
    else:
        pred = openmpi_placement(topology, np=req.ntasks, nodes=req.nodes, ppn=req.ntasks_per_node,
                                 map_by=req.map_by, rank_by=req.rank_by, bind_to=req.bind_to,
                                 oversubscribe=req.oversubscribe, hwthread_cpus=req.hwthread_cpus)
    if req.strategy:
        pred.options["strategy"] = req.strategy
    return with_threads(pred, req.cpus_per_task, req.omp_places, req.omp_proc_bind)
