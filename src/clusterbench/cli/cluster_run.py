"""`clusterbench run -w NODESET`: the main job for a cluster (suite/cluster.py), printed.

Kept apart from run_cmd.py, which is the one-machine job: this module is imported only when
nodes are given or the command runs inside a multi-node allocation.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from clusterbench.cli.app import console, err_console, open_store
from clusterbench.errors import UserInputError

MAX_VERDICT_ROWS = 64  # nodes listed in the verdict table; beyond, the failing ones first, then a count
MAX_LINK_ROWS = 16  # failing links listed


def run_on_cluster(inv, budget_s: float, *, interconnect: str, mpi: str | None, hpl: bool, xhpl: str | None,
                   iperf: bool, rule, force: bool, dry_run: bool, as_json: bool, stage: bool = False,
                   pairs: bool = True, drain_list: Path | None = None) -> None:
    """Parse done (run_cmd.py): one call to the job (suite/cluster_job.py), then print its result."""
    from clusterbench.suite.cluster_job import ClusterJobOptions, run_cluster_job

    if drain_list is not None:
        check_drain_list(drain_list)
    options = ClusterJobOptions(budget_s, interconnect=interconnect, mpi=mpi, hpl=hpl, xhpl=xhpl, iperf=iperf,
                                rule=rule, force=force, dry_run=dry_run, stage=stage, pairs=pairs,
                                drain_list=None if dry_run else drain_list)
    with open_store() as store:
        job = run_cluster_job(store, inv, options, _Shown(as_json))
    if dry_run:
        if as_json:
            print(json.dumps(job.plan.to_dict(), indent=2, default=str))
        elif drain_list is not None:
            console.print(f"--drain-list: nothing written to {escape(str(drain_list))} (a dry run judges nothing)")
        return
    result, view, drained = job.result, job.view, job.drain_list
    summary = view.to_dict() | {"plan": job.plan.to_dict(), "database": str(store.path),
                                "rechecked": result.rechecked,
                                "runs": [{"id": r.id, "status": r.status, "valid": r.valid,
                                          "reason": r.reason} for r in result.results]}
    if drained is not None:
        summary["drain_list"] = {"path": str(drained.path), "nodes": drained.nodes, "error": drained.error}
    if as_json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        print_cluster(view, summary)
        if drained is not None:
            print_drain_list(drained)
    if drained is not None and drained.error:
        err_console.print(f"[red]error:[/] the drain list could not be written: {escape(drained.error)}")
        raise typer.Exit(1)
    if not any(r.valid for r in result.results):
        raise typer.Exit(1)


def check_drain_list(path: Path) -> None:
    """Refuse a drain list that cannot be written before the cluster runs, not after (exit 2)."""
    if path.is_dir():
        raise UserInputError(f"--drain-list {path}: is a directory", hint="name a file, e.g. --drain-list drain.sh")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise UserInputError(f"--drain-list {path}: the folder {folder} does not exist",
                             hint="create it first, or name a file in an existing folder")


def print_drain_list(drained) -> None:
    if drained.error:
        return
    if drained.nodes:
        console.print(f"[bold]Drain list[/]: {len(drained.nodes)} node(s) in {escape(str(drained.path))} "
                      f"({escape(_some(drained.nodes))}); not run: review it, then run it yourself")
    else:
        console.print(f"[bold]Drain list[/]: no node failed its verdict; {escape(str(drained.path))} holds the "
                      "header only")


class _Shown:
    """The job's events on the terminal (suite/cluster_job.ClusterJobEvents); with --json only the
    preflight of a refused job is printed, as JSON."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.checking = None  # the preflight's bar while nodes answer

    def building(self, what: str):
        from contextlib import nullcontext

        return nullcontext() if self.as_json else console.status(f"building {what}", spinner="dots")

    def build_failed(self, what: str, why: str) -> None:
        err_console.print(f"[yellow]{escape(what)} could not be built[/] ({escape(why)}): no HPL in this run")

    def preflight_node(self, done: int, total: int) -> None:
        if self.as_json:
            return
        if self.checking is None:
            from rich.progress import Progress

            self.checking = Progress(console=err_console, transient=True)
            self.checking.start()
            self.task = self.checking.add_task(f"checking {total} node(s)", total=total)
        self.checking.update(self.task, completed=done)

    def preflight_done(self, preflight, inv, proceeds: bool) -> None:
        from clusterbench.cli.cluster_cmd import print_preflight

        if self.checking is not None:
            self.checking.stop()
        if not self.as_json:
            print_preflight(preflight, inv)
        elif not proceeds:
            print(json.dumps({"preflight": preflight.to_dict()}, indent=2, default=str))

    def planned(self, plan) -> None:
        if not self.as_json:
            _print_plan(plan)

    def runs(self, plan):
        from clusterbench.cli.progress import RunProgress

        return RunProgress(self.as_json, planned_s=plan.estimate_s)


def _print_plan(plan) -> None:
    from clusterbench.suite.cluster import IPERF_SECONDS

    console.print(f"[bold]Plan[/]: {len(plan.inventory.hosts)} nodes ({escape(plan.inventory.nodeset())}), "
                  f"{len(plan.phases)} phases, estimated {plan.estimate_s:.0f} s of the {plan.budget_s:.0f} s budget")
    paired = {kind: [p for p in plan.phases if p.kind == kind] for kind in ("pair", "iperf")}
    what = {"pair": "ping-pong 0 B and 1 MiB", "iperf": f"iperf3 TCP, {IPERF_SECONDS} s each"}
    for phase in plan.phases:
        if phase.kind in paired:
            group = paired[phase.kind]
            if phase is group[0]:
                console.print(f"  {what[phase.kind]}: {sum(len(p.runs) for p in group)} runs in {len(group)} rounds "
                              f"of disjoint pairs, about {sum(p.estimate_s for p in group):.0f} s")
            continue
        run = phase.runs[0][0]
        shown = {k: run.params[k] for k in ("n", "nb", "p", "q", "ranks", "threads", "ntimes", "max_log2")
                 if k in run.params}
        console.print(f"  {escape(phase.label)}: {len(phase.runs)} run(s) at once, {escape(str(shown))}, "
                      f"about {phase.estimate_s:.0f} s" + (" (N sized again from measured rates)"
                                                           if phase.resize else ""))
    for why in plan.skipped:
        console.print(f"[yellow]skipped[/] {escape(why)}")


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}g}"


def print_cluster(view, summary: dict) -> None:
    from clusterbench.analysis.cluster import NODE_MEASURES, PAIR_MEASURES

    t = Table(title=f"clusterbench: cluster run {view.run}", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row("Nodes", escape(", ".join(view.nodes)))
    t.add_row("Rpeak", "n/a" if view.rpeak_gflops is None else f"{view.rpeak_gflops:.1f} Gflop/s "
              f"({len(view.nodes)} x the node's nominal Rpeak)")
    hpl = view.hpl
    t.add_row("Rmax (HPL, all nodes)", "[red]no valid HPL result[/]" if not hpl else
              f"{hpl['gflops']:.2f} Gflop/s  N={hpl['n']} NB={hpl['nb']} P x Q={hpl['p']}x{hpl['q']}, "
              f"{hpl['ranks']} ranks on {hpl['nodes']} nodes")
    if view.efficiency is not None:
        t.add_row("Efficiency", f"{100 * view.efficiency:.1f}% of Rpeak")
    for label, found in (("Slowest node", view.slowest_node()), ("Slowest link", view.slowest_link())):
        if found:
            flagged = any(f.subject == found[0] for f in (*view.node_flags, *view.link_flags))
            t.add_row(label, f"{'[red]' if flagged else ''}{escape(found[0])}{'[/] (flagged)' if flagged else ''}: "
                             f"{escape(found[1])}")
    t.add_row("Rule", escape(view.rule.describe()))
    for run in summary["runs"]:
        if not run["valid"]:
            t.add_row("Run", f"{run['id']} [red]{escape(run['status'])}[/]: {escape(run['reason'] or '')}")
    t.add_row("Stored in", escape(summary["database"]) + f"  (report: clusterbench report tag:cluster_run={view.run})")
    console.print(t)

    console.print(_flag_table("nodes", "node", NODE_MEASURES,
                              [(row.node, row.values, row.flags) for row in view.rows]))
    console.print(_flag_table("links (rounds of disjoint pairs)", "pair", PAIR_MEASURES,
                              [(f"{c.a}-{c.b}", c.values, c.flags) for c in view.pairs]))
    if summary.get("rechecked"):
        console.print("Measured again before the verdict (the best of all passes counts): "
                      + escape(", ".join(summary["rechecked"])))
    if view.verdicts is not None:
        console.print(verdict_table(view.verdicts))
        failing_links = [v for v in view.verdicts.links if v.fails]
        if failing_links:
            console.print(_link_verdicts(failing_links))


def _some(names: list[str], limit: int = 8) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


VERDICT_STYLE = {"pass": "green", "slow": "red", "failed": "red", "cannot tell": "yellow"}


def _verdict_word(subject) -> str:
    worst = subject.worst()
    word = subject.state
    if word == "slow" and worst is not None and worst.worse_by is not None:
        word = f"slow by {100 * worst.worse_by:.0f}%"
    return f"[{VERDICT_STYLE.get(subject.state, 'default')}]{escape(word)}[/]"


def _worst_text(subject) -> str:
    """The measure behind the verdict, with its value and the expected one; why when it cannot tell."""
    worst = subject.worst()
    if worst is None:
        return ""
    if worst.expected is None or worst.value is None:
        return escape(worst.why)
    exp = worst.expected
    text = (f"{worst.label} {_fmt(worst.value)} {worst.unit}, expected {_fmt(exp.value)} "
            f"(±{100 * exp.tolerance:.0f}%, {exp.count} figures)")
    if worst.evidence:
        text += f"; {worst.evidence}"
    return escape(text)


def verdict_table(judgement) -> Table:
    """One row per node: its verdict against golden values and the measure that sets it (80 columns)."""
    table = Table(title="verdicts against golden values (earlier healthy runs, same hardware)",
                  title_justify="left", caption=escape(f"golden values: {judgement.source}"), caption_justify="left")
    table.add_column("node", overflow="fold", max_width=16)
    table.add_column("verdict", no_wrap=True)
    table.add_column("worst measure", overflow="fold")
    nodes = sorted(judgement.nodes, key=lambda v: not v.fails)[:MAX_VERDICT_ROWS]
    shown = {id(v) for v in nodes}
    for subject in (v for v in judgement.nodes if id(v) in shown):
        table.add_row(escape(subject.subject), _verdict_word(subject), _worst_text(subject))
    if len(judgement.nodes) > len(nodes):
        table.add_row("...", "", f"{len(judgement.nodes) - len(nodes)} more node(s): see --json or the report")
    return table


def _link_verdicts(failing) -> Table:
    table = Table(title=f"links failing their verdict ({len(failing)})", title_justify="left")
    table.add_column("pair", overflow="fold", max_width=24)
    table.add_column("verdict", no_wrap=True)
    table.add_column("worst measure", overflow="fold")
    for subject in failing[:MAX_LINK_ROWS]:
        table.add_row(escape(subject.subject), _verdict_word(subject), _worst_text(subject))
    if len(failing) > MAX_LINK_ROWS:
        table.add_row("...", "", f"{len(failing) - MAX_LINK_ROWS} more: see --json or the report")
    return table


def _flag_table(title: str, first: str, measures, items) -> Table:
    """One row per node or pair: its figures and why it is flagged, flagged names in red."""
    table = Table(title=title, title_justify="left")
    table.add_column(first)
    for m in measures:
        table.add_column(f"{m.label} ({m.unit})", justify="right")
    table.add_column("flags")
    for name, values, flags in items:
        why = "; ".join(f.why for f in flags)
        table.add_row(f"[red]{escape(name)}[/]" if flags else escape(name), *(_fmt(values[m.key]) for m in measures),
                      f"[red]{escape(why)}[/]" if why else "")
    return table
