"""`clusterbench run`: characterise this machine end to end within a time budget."""

import json
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from clusterbench.bench.params import MAX_N
from clusterbench.bench.registry import benchmark_class
from clusterbench.cli.app import MpiOpt, app, console, open_store
from clusterbench.cli.plan_cmd import LayoutName
from clusterbench.cli.system_cmd import positive
from clusterbench.errors import UserInputError
from clusterbench.units import format_bytes

DEFAULT_NB = benchmark_class("hpl").sizing.default_nb  # the block size of a run with nothing tuned or measured


@app.command()
def run(
    budget: Annotated[str, typer.Option(help="Time budget for the suite (90s, 2m, 1h).")] = "2m",
    full: Annotated[bool, typer.Option(
        "--full", help="List-grade run: HPL N fills 80% of memory (long: minutes to hours).")] = False,
    n: Annotated[int | None, typer.Option("--n", help="HPL problem size (overrides the budget).", min=1, max=MAX_N)]
    = None,
    nb: Annotated[int | None, typer.Option(
        "--nb", help=f"HPL block size (default: the best known for this system, else {DEFAULT_NB}).", min=1,
        max=100_000,
        show_default=False)] = None,
    layout: Annotated[LayoutName | None, typer.Option(
        help="Rank/thread layout (default: the best known for this system, else mpi).", show_default=False)] = None,
    kernels: Annotated[bool, typer.Option(
        help="Also run the built-in STREAM (threads 1..cores) and ping-pong (0..4 MiB) kernels.")] = True,
    hpl: Annotated[bool, typer.Option(
        "--hpl/--no-hpl", help="Run standalone HPL with most of the budget, in the best configuration known for "
        "this system (`clusterbench tune hpl`); its xhpl is found, or built once (about 20 s).")] = True,
    xhpl: Annotated[str | None, typer.Option(
        help="The standalone xhpl to run (default: $CLUSTERBENCH_XHPL, PATH, or `clusterbench build hpl`'s).")]
    = None,
    flops_per_cycle: Annotated[int | None, typer.Option(help="Override DP flops/cycle/core.", min=1, max=1024)] = None,
    frequency: Annotated[float | None, typer.Option(help="Override nominal frequency (MHz).", min=1, max=100_000)]
    = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Plan and print, run nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    hosts: Annotated[str | None, typer.Option(
        "--hosts", "-w", help="Characterise a cluster: a node set (node[1-8]), a hostfile, or slurm/lsf/pbs (the "
        "current allocation). Default inside a multi-node Slurm, LSF or PBS job: its nodes; else this machine.",
        show_default=False)] = None,
    interconnect: Annotated[str, typer.Option(
        help="Cluster runs: the MPI transport between nodes (auto, tcp, ib).")] = "auto",
    mpi: MpiOpt = None,
    outlier_z: Annotated[float, typer.Option(
        help="Cluster runs: flag a node or link whose robust z-score (median/MAD) is beyond this on the bad side.",
        min=1.0, max=100.0)] = 3.5,
    outlier_deviation: Annotated[float, typer.Option(
        help="Cluster runs: ... and which is at least this fraction away from the median (0.25 = 25%).",
        min=0.0, max=0.99)] = 0.25,
    force: Annotated[bool, typer.Option(
        "--force", help="Cluster runs: go on although the preflight found problems.")] = False,
    iperf: Annotated[bool, typer.Option(
        "--iperf", help="Cluster runs: also iperf3 (TCP) between every pair of nodes, a few seconds each.")] = False,
    pairs: Annotated[bool, typer.Option(
        "--pairs/--no-pairs", help="Cluster runs: ping-pong between every pair of nodes, N(N-1)/2 runs "
                                   "(--no-pairs: the nodes alone).")] = True,
    stage: Annotated[bool, typer.Option(
        "--stage", help="Cluster runs: copy what the nodes cannot see (probe, kernels, binaries on a node-local "
                        "path) to a node-local folder on each node and run the copies (also CLUSTERBENCH_STAGE=1).")]
        = False,
    repeats: Annotated[str, typer.Option(
        help="One machine: make the headline run (HPL, else HPCC) N times, or `auto`: again until the 95% "
             "interval of its Gflop/s is within --precision (3 runs at least; the suite is then planned for a "
             "third of the budget).")] = "1",
    precision: Annotated[str | None, typer.Option(
        help="With --repeats auto: the 95% interval's half-width to reach, of the mean (default 2%).")] = None,
    max_repeats: Annotated[int | None, typer.Option(
        help="With --repeats auto: the most runs (default 10, 3 to 100; fewer if the budget ends first).")] = None,
    drain_list: Annotated[Path | None, typer.Option(
        "--drain-list", help="Cluster runs: write to FILE the Slurm commands that drain the nodes failing their "
                             "verdict against golden values (scontrol update ... state=drain); never run.",
        metavar="FILE", show_default=False)] = None,
) -> None:
    """Discover this machine, run HPCC sized to the budget, store everything, summarise.

    With -w NODESET (or inside a multi-node allocation): characterise the cluster, with a per-node
    suite on every node at once, a ping-pong between every pair of nodes and HPL across all of
    them; nodes and links out of line are flagged (docs/cluster.md)."""
    from clusterbench.units import parse_duration

    inv = _cluster_inventory(hosts)
    if inv is not None:
        from clusterbench.analysis.outliers import Rule

        if repeats != "1" or precision or max_repeats:
            raise UserInputError("--repeats applies to one machine; a cluster run measures each node and pair "
                                 "in passes of its own", hint="drop it, or run `clusterbench run` without -w")
        from clusterbench.cli.cluster_run import run_on_cluster

        if interconnect not in ("auto", "tcp", "ib"):
            raise UserInputError(f"--interconnect {interconnect!r}: choose auto, tcp or ib")
        for given, flag in ((full, "--full"), (n, "--n"), (nb, "--nb"), (layout, "--layout"),
                            (not kernels, "--no-kernels")):
            if given:
                raise UserInputError(f"{flag} applies to one machine; a cluster run sizes its runs itself",
                                     hint="drop it, or run `clusterbench run` without -w")
        run_on_cluster(inv, parse_duration(budget, "--budget"), interconnect=interconnect,
                       mpi=mpi.value if mpi else None, hpl=hpl, xhpl=xhpl, iperf=iperf,
                       rule=Rule(z=outlier_z, min_deviation=outlier_deviation), force=force, dry_run=dry_run,
                       as_json=as_json, stage=stage, pairs=pairs, drain_list=drain_list)
        return
    from clusterbench.campaign.precision import repeat_options
    from clusterbench.suite.machine_job import MachineJobOptions, run_machine_job

    budget_s = parse_duration(budget, "--budget")
    count, auto = repeat_options(repeats, precision, max_repeats)
    for given, flag in ((iperf, "--iperf"), (force, "--force"), (interconnect != "auto", "--interconnect"),
                        (not pairs, "--no-pairs"), (drain_list is not None, "--drain-list")):
        if given:
            raise UserInputError(f"{flag} applies to cluster runs", hint="name the nodes with -w node[1-4]")
    positive(n, "--n")
    positive(nb, "--nb")
    if xhpl and not hpl:
        raise UserInputError("--xhpl and --no-hpl contradict each other", hint="drop one of them")
    positive(flops_per_cycle, "--flops-per-cycle")
    positive(frequency, "--frequency")
    options = MachineJobOptions(budget_s, full=full, n=n, nb=nb, layout=layout.value if layout else None,
                                kernels=kernels, hpl=hpl, xhpl=xhpl, flops_per_cycle=flops_per_cycle,
                                frequency=frequency, dry_run=dry_run, repeats=count, auto=auto)
    with open_store() as store:
        job = run_machine_job(store, options, _Shown(as_json))
    if dry_run:
        if as_json:
            plan = job.plan
            print(json.dumps({"n": plan.n, "nb": plan.nb, "p": plan.p, "q": plan.q,
                              "layout": plan.layout.__dict__, "estimate_s": plan.estimate_s,
                              "reason": plan.reason, "xhpl": plan.xhpl,
                              "hpl": plan.hpl.to_dict() if plan.hpl else None,
                              "kernels": [{"benchmark": r.benchmark, "params": r.params,
                                           "estimate_s": r.estimate_s} for r in plan.kernels],
                              "skipped": plan.skipped}, indent=2, default=str))
        return
    if as_json:
        print(json.dumps(job.summary, indent=2))
    else:
        print_summary(job.summary)
    if not any(r.valid for r in job.result.runs):
        raise typer.Exit(1)


class _Shown:
    """The one-machine job's events on the terminal (suite/machine_job.MachineJobEvents); nothing with --json."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    def planned(self, plan) -> None:
        from clusterbench.units import format_duration

        if self.as_json:
            return
        console.print(
            f"[bold]Plan[/]: HPCC with N={plan.n} NB={plan.nb} P x Q={plan.p}x{plan.q}, "
            f"{plan.layout.ranks} rank(s) x {plan.layout.threads_per_rank} thread(s) "
            f"({plan.layout.name}); {escape(plan.reason)}; "
            f"estimated {format_duration(plan.estimate_s)} in all")
        if plan.hpl:
            console.print(f"[bold]HPL[/]: {escape(standalone_line(plan.hpl))}")
        if plan.kernels:
            console.print("[bold]Kernels[/]: " + escape(", ".join(
                f"{r.benchmark}({', '.join(f'{k}={r.params[k]}' for k in ('ranks', 'threads'))})"
                for r in plan.kernels)))
        for why in plan.skipped:
            console.print(f"[yellow]skipped[/] {escape(why)}")

    def building(self, what: str):
        return nullcontext() if self.as_json else console.status(f"building {what}", spinner="dots")

    def built(self, binary: str, rebuilt: bool) -> None:
        if not self.as_json:
            console.print(f"[bold]xhpl[/]: {escape(binary)} ({'built now' if rebuilt else 'already built'})")

    def say(self, line: str) -> None:
        """Why the headline run's repeats stopped (suite/repeat_headline.py)."""
        if not self.as_json:
            console.print(f"[bold]repeats[/]: {escape(line)}", highlight=False)

    def runs(self, plan):
        from clusterbench.cli.progress import RunProgress
        from clusterbench.suite.characterise import suite_label

        return RunProgress(self.as_json, label=suite_label, planned_s=plan.estimate_s)


def _cluster_inventory(hosts: str | None):
    """The nodes of a cluster run: -w, else the current Slurm/LSF/PBS allocation when it has several
    nodes; None for the one-machine job."""
    from clusterbench.launch import hosts as host_lists

    if hosts:
        return host_lists.inventory(hosts)
    allocation = host_lists.current_allocation()
    return allocation if allocation is not None and len(allocation.hosts) > 1 else None


def standalone_line(hpl) -> str:
    """The plan of the standalone HPL in one line: point, where the configuration comes from, why N."""
    p = hpl.point
    knobs = ", ".join(f"{k}={v}" for k, v in p.items() if k not in ("n", "nb", "p", "q", "layout"))
    where = hpl.binary or f"xhpl built first (`clusterbench build hpl`, about {hpl.build_s:.0f} s, once)"
    return (f"xhpl with N={p['n']} NB={p['nb']} P x Q={p['p']}x{p['q']} ({p['layout']}{', ' + knobs if knobs else ''})"
            f"; configuration from {hpl.config_source}; {hpl.reason}; about {hpl.estimate_s:.0f} s; {where}")


def _fmt(v: float | None, unit: str, digits: int = 2) -> str:
    return "n/a" if v is None else f"{v:.{digits}f} {unit}"

SHOWN_SIZES = (0, 2**10, 2**13, 2**15, 2**20)  # the sizes the STFC study tabulates, and 1 MiB


def print_summary(s: dict) -> None:
    from clusterbench.analysis.listing import readable

    t = Table(title="clusterbench: this machine", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    sysd = s["system"]
    t.add_row("System", escape(f"{sysd['host']}: {sysd['cpu']}, {sysd['sockets']} socket(s), "
                               f"{sysd['cores']} cores"))
    t.add_row("Rpeak", escape(f"{_fmt(s['rpeak_gflops'], 'Gflop/s')}  ({s['rpeak_derivation']})"))
    hpl = s["hpl"]
    if hpl:
        t.add_row("Rmax (HPL)", f"{_fmt(s['rmax_gflops'], 'Gflop/s')}  N={hpl['n']} NB={hpl['nb']} "
                                f"P x Q={hpl['p']}x{hpl['q']} {hpl['tv']}, {hpl['ranks']} rank(s) x "
                                f"{hpl['threads']} thread(s) ({hpl['layout']})")
    else:
        t.add_row("Rmax (HPL)", "[red]no valid HPL result[/]")
    rep = s.get("repeats")
    if rep:
        spread = f" +-{100 * rep['half_width']:.1f}% (95%)" if rep.get("half_width") is not None else ""
        median = readable(rep["median"], rep.get("unit")) if rep.get("median") is not None else "-"
        t.add_row("Repeats", escape(f"{rep['metric']}: median {median}{spread} of {rep['samples']} counted; "
                                    f"{rep['reason']}"))
    eff = s["efficiency"]
    if eff is not None:
        note = ("  [yellow](above nominal Rpeak: the cores run faster than their nominal clock)[/]"
                if eff > 1 else "")
        t.add_row("Efficiency", f"{100 * eff:.1f}% of the nominal Rpeak{note}")
    measured = s.get("measured_peak")
    if measured and measured.get("efficiency") is not None:
        t.add_row("", escape(f"{100 * measured['efficiency']:.1f}% of the measured peak, "
                             f"{readable(measured['gflops'], 'Gflop/s')} ({measured['derivation']})"))
    elif eff is not None:
        t.add_row("", "measured peak: none stored (clusterbench bench clock measures it)")
    d = s["dgemm_gflops"]
    t.add_row("DGEMM", f"single {_fmt(d['single'], 'Gflop/s')}, star {_fmt(d['star_per_rank'], 'Gflop/s')} per rank")
    for kind in ("single", "star"):
        st = s["stream_gbs"][kind]
        ops = sorted(st, key=lambda op: op != "Triad")  # Triad, STREAM's figure of merit, first: never the one cut
        t.add_row(f"STREAM ({kind})", ", ".join(f"{op} {_fmt(st[op], 'GB/s')}" for op in ops))
    pp = s["pingpong"]
    t.add_row("Ping-pong latency", f"{_fmt(pp['latency_us_min'], 'us', 3)} min, "
                                   f"{_fmt(pp['latency_us_avg'], 'us', 3)} avg")
    t.add_row("Ping-pong bandwidth", f"{_fmt(pp['bandwidth_gbs_max'], 'GB/s')} max, "
                                     f"{_fmt(pp['bandwidth_gbs_avg'], 'GB/s')} avg")
    array, llc = s["hpcc_stream_array_bytes"], s["last_level_cache_bytes"]
    if llc and array < 4 * llc:
        t.add_row("Note", f"[yellow]HPCC sized its STREAM arrays from N: {format_bytes(array)} each, under 4 x the "
                          f"{format_bytes(llc)} last-level cache, so its STREAM rates include cache hits; the "
                          "`stream` kernel sizes its arrays by STREAM's rule.[/]")
    scaling = s["stream_threads"]
    if scaling:
        t.add_row("STREAM Triad by threads", ", ".join(
            f"{r['threads']}: {r['triad_mbs'] / 1000:.2f} GB/s" for r in scaling)
            + f"  (kernel, {scaling[0]['elements']:,} elements per array)")
    curve = s["pingpong_curve"]
    if curve:
        shown = [r for r in curve["rows"] if r["bytes"] in SHOWN_SIZES or r is curve["rows"][-1]]
        t.add_row("Ping-pong by size", ", ".join(
            f"{format_bytes(r['bytes'])}: {r['time_us']:.2f} us"
            + (f" {r['mbs'] / 1000:.2f} GB/s" if r["bytes"] else "") for r in shown)
            + f"  (kernel; all sizes: clusterbench results {curve['run']})")
    for why in s["skipped"]:
        t.add_row("Skipped", f"[yellow]{escape(why)}[/]")
    loaded = sorted({lib for r in s["runs"] for lib in (r.get("blas_loaded") or [])})
    if loaded:
        t.add_row("BLAS (loaded)", escape(", ".join(loaded)))
    for r in s["runs"]:
        status = "[green]valid[/]" if r["valid"] else f"[red]{r['status']}[/]: {escape(r['reason'] or '')}"
        t.add_row("Run", f"{r['id']} ({status}, {r['duration_s']:.1f} s)")
    t.add_row("Stored in", escape(s["database"]))
    console.print(t)
