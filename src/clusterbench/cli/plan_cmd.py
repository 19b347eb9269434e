"""`clusterbench plan hpl`: the HPL calculator (N per NB, grids, layouts, input files)."""


import json
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from clusterbench.bench.params import MAX_COUNT, MAX_N
from clusterbench.bench.registry import benchmark_class
from clusterbench.cli.app import app, console
from clusterbench.errors import UserInputError

# HPL's defaults, as the benchmark declares them (its sizing and its one time model).
_HPL = benchmark_class("hpl")
DEFAULT_EFFICIENCY = _HPL.time_model.efficiency
DEFAULT_MEMORY_FRACTION = _HPL.sizing.memory_fraction
PLAN_NB_RANGE = _HPL.sizing.plan_nb_range


class Interconnect(str, Enum):
    ethernet = "ethernet"
    infiniband = "infiniband"
    shm = "shm"


class LayoutName(str, Enum):
    mpi = "mpi"
    hybrid_socket = "hybrid-socket"
    hybrid_node = "hybrid-node"


@app.command()
def plan(
    target: Annotated[str, typer.Argument(
        help="`hpl` for the HPL calculator, or a campaign file for a dry run of its runs.")],
    nodes: Annotated[int, typer.Option(help="Number of nodes.", min=1, max=MAX_COUNT)] = 1,
    memory: Annotated[str | None, typer.Option(
        help="Memory per node (4GiB, 16GB, ...). Default: MemTotal of this machine.")] = None,
    nb: Annotated[str, typer.Option(help="Block sizes: 192, 64,128 or a range 32..256:8.")] = PLAN_NB_RANGE,
    fraction: Annotated[float, typer.Option(help="Fraction of memory the matrix fills.")] = DEFAULT_MEMORY_FRACTION,
    time_budget: Annotated[str | None, typer.Option(
        "--time", help="Size N for this solve time instead (e.g. 10m), from Rpeak x efficiency.")] = None,
    efficiency: Annotated[float | None, typer.Option(
        help=f"Expected Rmax/Rpeak for --time (default: learned from stored runs, else {DEFAULT_EFFICIENCY})."
    )] = None,
    layout: Annotated[LayoutName, typer.Option(help="Rank/thread layout.")] = LayoutName.mpi,
    ranks: Annotated[int | None, typer.Option(help="MPI ranks (default: from the layout).", min=1, max=MAX_COUNT)]
    = None,
    interconnect: Annotated[Interconnect, typer.Option(
        help="Grids are ranked flattest-first on ethernet (HPL FAQ), squarest-first otherwise.")
    ] = Interconnect.infiniband,
    n: Annotated[int | None, typer.Option("--n", help="Check this N instead of computing it.", min=1, max=MAX_N)]
    = None,
    p: Annotated[int | None, typer.Option("--p", help="Check this P (with --q).", min=1, max=MAX_COUNT)] = None,
    q: Annotated[int | None, typer.Option("--q", help="Check this Q (with --p).", min=1, max=MAX_COUNT)] = None,
    from_file: Annotated[str | None, typer.Option(
        "--from", help="Node topology from a saved hwloc/lscpu file instead of this machine.")] = None,
    write_hpl_dat: Annotated[Path | None, typer.Option(help="Write an HPL.dat here.")] = None,
    write_hpccinf: Annotated[Path | None, typer.Option(help="Write an hpccinf.txt here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Plan HPL (N per NB, grids, layouts, input files), or list a campaign file's runs and time."""
    from clusterbench.analysis.efficiency import learned_efficiency
    from clusterbench.plan.ranges import parse_int_values
    from clusterbench.system.discover import discover, system_from_file
    from clusterbench.units import format_bytes, parse_duration, parse_size

    if target != "hpl":
        if not Path(target).is_file():
            raise UserInputError(f"unknown plan target {target!r}: neither `hpl` nor a campaign file",
                                 hint="clusterbench plan hpl, or clusterbench plan examples/nb-sweep.yaml")
        from clusterbench.cli.campaign_cmd import plan_campaign

        return plan_campaign(Path(target), as_json)
    if nodes <= 0:
        raise UserInputError(f"--nodes must be positive, got {nodes}")
    if efficiency is not None and not 0 < efficiency <= 1:
        raise UserInputError(f"--efficiency must be in (0, 1], got {efficiency}",
                             hint=f"{DEFAULT_EFFICIENCY} is typical for HPL")
    if not 0 < fraction <= 1:
        raise UserInputError(f"--fraction must be in (0, 1], got {fraction}",
                             hint="0.8 fills 80% of memory with the matrix")
    if (p is None) != (q is None):
        raise UserInputError("give both --p and --q, or neither")
    nbs = parse_int_values(nb, "NB")
    if any(v <= 0 for v in nbs):
        raise UserInputError("NB values must be positive")
    info = system_from_file(from_file, nodes=nodes) if from_file else discover(nodes=nodes, with_software=False)
    per_node = parse_size(memory, "--memory") if memory else None
    seconds = parse_duration(time_budget, "--time") if time_budget and n is None else None
    eff = efficiency if efficiency is not None else learned_efficiency(info)
    result = _HPL.plan(info, nbs, nodes=nodes, memory_per_node=per_node, fraction=fraction, seconds=seconds,
                       efficiency=eff, layout=layout.value, ranks=ranks,
                       ethernet=interconnect == Interconnect.ethernet, n=n, grid=(p, q) if p is not None else None)
    for path, text in ((write_hpl_dat, result.hpl_dat), (write_hpccinf, result.hpccinf)):
        if path:
            path.write_text(text())

    from clusterbench.tune.rates import stored_rates_view

    model = stored_rates_view(_HPL, result, info, interconnect.value, from_file is not None)
    if as_json:
        print(json.dumps(result.to_dict() | {"model": model}, indent=2))
        return
    title = (f"HPL plan: {nodes} node(s) x {format_bytes(result.memory_per_node_bytes)}, "
             + (f"N from a {time_budget} budget" if time_budget else f"fraction {fraction} of memory")
             + " — N = floor(sqrt(f*M/8)/NB)*NB")
    table = Table(title=title, title_justify="left")
    for col in ("NB", "N", "matrix", "% of memory", "est. HPL time", "model time", "model Gflop/s"):
        table.add_column(col, justify="right")
    for r, m in zip(result.rows, model["rows"], strict=True):
        table.add_row(str(r.nb), str(r.n), format_bytes(r.matrix_bytes), f"{100 * r.memory_fraction:.1f}%",
                      f"{r.estimated_s:.0f} s" if r.estimated_s else "?", format_seconds(m["seconds"]),
                      f"{m['gflops']:.1f}")
    console.print(table)
    lay = result.layout
    console.print(f"Layout [bold]{lay.name}[/]: {result.ranks} ranks x {lay.threads_per_rank} thread(s); "
                  f"grids (best first): {', '.join(f'{a}x{b}' for a, b in result.grids)}")
    if result.rpeak_gflops:
        console.print(f"Rpeak {result.rpeak_gflops:.1f} Gflop/s; time estimates assume {result.efficiency:.0%} "
                      "efficiency.")
    best = model["grids_at"]
    console.print(f"Model on {nodes} node(s), N={best['n']} NB={best['nb']}: "
                  + ", ".join(f"{g['grid']} {g['gflops']:.1f} Gflop/s" for g in model["grids"])
                  + f" (model prefers {model['grids'][0]['grid']})")
    console.print(f"Model rates: {model['source']}", highlight=False)
    for path in (write_hpl_dat, write_hpccinf):
        if path:
            console.print(f"wrote {path}")


def format_seconds(seconds: float) -> str:
    return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"
