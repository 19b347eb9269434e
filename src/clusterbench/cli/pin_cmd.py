"""`clusterbench pin`: where every task and thread of a launch would run, without running anything."""


import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from clusterbench.cli.app import app, console

MAX = 65536


@app.command()
def pin(
    from_file: Annotated[str | None, typer.Option(
        "--from", help="Topology of the node: hwloc XML, hwloc synthetic, lscpu -J/-p or lscpu output "
                       "(default: this machine).")] = None,
    launcher: Annotated[str, typer.Option(help="srun, openmpi (mpirun of Open MPI) or hydra (mpiexec of MPICH).")]
    = "srun",
    flavour: Annotated[str, typer.Option(help="srun only: slurm (stock task/affinity) or psslurm (ParaStation).")]
    = "slurm",
    ntasks: Annotated[int, typer.Option("--ntasks", "-n", help="Tasks (MPI ranks).", min=1, max=MAX)] = 1,
    cpus_per_task: Annotated[int, typer.Option("--cpus-per-task", "-c", help="CPUs (OpenMP threads) per task.",
                                               min=1, max=MAX)] = 1,
    nodes: Annotated[int, typer.Option("--nodes", "-N", help="Nodes, all shaped like the topology.", min=1,
                                       max=MAX)] = 1,
    ntasks_per_node: Annotated[int | None, typer.Option(help="Tasks per node (srun --ntasks-per-node, "
                                                             "mpirun ppn).", min=1, max=MAX)] = None,
    strategy: Annotated[str | None, typer.Option(help="A named pinning strategy instead of the options below: "
                                                      "see docs/pinning.md.")] = None,
    cpu_bind: Annotated[str | None, typer.Option(help="srun --cpu-bind (threads, cores, sockets, ldoms, rank, "
                                                      "rank_ldom, map_cpu:..., mask_cpu:..., none; verbose,...).")]
    = None,
    distribution: Annotated[str | None, typer.Option("--distribution", "-m", help="srun --distribution "
                                                     "node:socket:core[,pack], e.g. block:cyclic, *:fcyclic.")]
    = None,
    hint: Annotated[str | None, typer.Option(help="srun --hint (nomultithread, ...).")] = None,
    overcommit: Annotated[bool, typer.Option(help="srun --overcommit: allow more tasks x CPUs than CPUs.")] = False,
    map_by: Annotated[str | None, typer.Option(help="mpirun --map-by / -map-by (core, socket, numa, l3cache, "
                                                    "hwthread, slot, node, ppr:N:obj:PE=n).")] = None,
    bind_to: Annotated[str | None, typer.Option(help="mpirun --bind-to / -bind-to.")] = None,
    rank_by: Annotated[str | None, typer.Option(help="Open MPI --rank-by.")] = None,
    oversubscribe: Annotated[bool, typer.Option(help="mpirun --oversubscribe.")] = False,
    use_hwthread_cpus: Annotated[bool, typer.Option(help="Open MPI --use-hwthread-cpus.")] = False,
    omp_places: Annotated[str | None, typer.Option(help="OMP_PLACES inside each task (threads, cores, "
                                                        "ll_caches, numa_domains, sockets, {0,1},...).")] = None,
    omp_proc_bind: Annotated[str | None, typer.Option(help="OMP_PROC_BIND inside each task (close, spread, "
                                                           "primary, true, false).")] = None,
    rows: Annotated[str, typer.Option(help="Picture rows: numa (one block per NUMA domain) or socket.")] = "numa",
    node: Annotated[int, typer.Option(help="Which node to draw (from 0).", min=0, max=MAX)] = 0,
    svg: Annotated[Path | None, typer.Option(help="Also write the picture as SVG to this file.")] = None,
    masks: Annotated[bool, typer.Option(help="Print the hex CPU masks, as srun --cpu-bind=verbose does.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Predict where every task and thread of a launch runs: picture, masks or JSON; nothing is run."""
    from clusterbench.errors import UserInputError
    from clusterbench.pinning.calculate import PinRequest, calculate
    from clusterbench.pinning.render import hex_masks, picture_svg, picture_text, prediction_json
    from clusterbench.system.sources import from_sysfs, topology_from_file

    if rows not in ("numa", "socket"):
        raise UserInputError(f"unknown row kind {rows!r}", where="--rows", hint="numa or socket")
    if node >= nodes:
        raise UserInputError(f"node {node} does not exist in a launch on {nodes} node(s)", where="--node",
                             hint=f"0 to {nodes - 1}")
    topology = topology_from_file(from_file) if from_file else from_sysfs()
    pred = calculate(topology, PinRequest(
        launcher=launcher, ntasks=ntasks, cpus_per_task=cpus_per_task, nodes=nodes, ntasks_per_node=ntasks_per_node,
        strategy=strategy, flavour=flavour, cpu_bind=cpu_bind, distribution=distribution, hint=hint,
        overcommit=overcommit, map_by=map_by, bind_to=bind_to, rank_by=rank_by, oversubscribe=oversubscribe,
        hwthread_cpus=use_hwthread_cpus, omp_places=omp_places, omp_proc_bind=omp_proc_bind))
    if svg:
        try:
            svg.write_text(picture_svg(pred, node=node, rows=rows))
        except OSError as exc:
            raise UserInputError(f"cannot write {svg}: {exc.strerror}", where="--svg") from None
    if as_json:
        print(json.dumps(prediction_json(pred), indent=2))
        return
    console.print(escape(picture_text(pred, node=node, rows=rows)), highlight=False, soft_wrap=True)
    if masks:
        for line in hex_masks(pred):
            console.print(escape(line), highlight=False)
    for note in pred.notes:
        console.print(f"[dim]note: {escape(note)}[/]", highlight=False)
    if svg:
        console.print(f"picture written to {escape(str(svg))}", highlight=False)
