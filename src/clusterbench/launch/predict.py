"""The predicted placement of a launch at a site: the calculator of the launcher that will run it.

The launch is first resolved exactly as `Site.command` resolves it (hosts, ranks per node, the
pinning strategy translated for the launcher), so the prediction is made from the options that
are really on the command line: srun's (stock Slurm or ParaStation psslurm), Open MPI's or
Hydra's, and then OpenMP's places and binding inside each rank from the run's environment.
"""

from __future__ import annotations

from clusterbench.launch.site import Site
from clusterbench.launch.spec import Launch
from clusterbench.pinning.model import Prediction
from clusterbench.pinning.mpirun import hydra_placement, openmpi_placement
from clusterbench.pinning.openmp import with_threads
from clusterbench.pinning.slurm import srun_placement
from clusterbench.system.topology import Topology

# mpirun options that change the placement; given through a site's mpi_args they are not modelled
PLACEMENT_FLAGS = ("--map-by", "--bind-to", "--rank-by", "-map-by", "-bind-to", "--rankfile", "-rf",
                   "--cpu-set", "--cpu-list", "--npersocket", "--npernode", "--use-hwthread-cpus")


def predict(site: Site, launch: Launch, topology: Topology, env: dict[str, str] | None = None) -> Prediction | None:
    """Where every rank and thread of `launch` should run at `site`; None for a launch without a
    placement (one process started directly). `env` is the run's environment (OMP_* variables)."""
    p = launch.placement
    if p is None:
        return None
    mpi, stack, srun = site.resolve(Site.mpi_launch(launch), p.nodes, p.pinning)
    if srun:
        pred = srun_placement(topology, ntasks=p.ranks, nodes=p.nodes, cpus_per_task=srun.cpus_per_task or p.threads,
                              cpu_bind=srun.cpu_bind, distribution=srun.distribution, hint=srun.hint,
                              flavour=srun.flavour)
    elif stack.hydra:
        pred = hydra_placement(topology, n=p.ranks, nodes=p.nodes, ppn=mpi.ranks_per_node, map_by=mpi.map_by,
                               bind_to=mpi.bind_to)
    else:
        pred = openmpi_placement(topology, np=p.ranks, nodes=p.nodes, ppn=mpi.ranks_per_node, map_by=mpi.map_by,
                                 rank_by=mpi.rank_by, bind_to=mpi.bind_to, oversubscribe=mpi.oversubscribe,
                                 hwthread_cpus=mpi.hwthread_cpus)
    unmodelled = [a for a in mpi.extra if a.split("=")[0] in PLACEMENT_FLAGS]
    if unmodelled:
        pred.notes.append(f"the site's extra mpirun arguments {' '.join(unmodelled)} are not modelled")
    env = (env or {}) | launch.env
    return with_threads(pred, p.threads, env.get("OMP_PLACES"), env.get("OMP_PROC_BIND"))
