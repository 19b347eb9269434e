"""`clusterbench cluster info|check|exec|blas`: the nodes, checked and driven together."""


import json
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from clusterbench.cli.app import MpiChoice, app, console, err_console

cluster_app = typer.Typer(help="Nodes of a cluster: facts, preflight checks, a command on all, BLAS.",
                          no_args_is_help=True)
app.add_typer(cluster_app, name="cluster")

HostsOpt = Annotated[str | None, typer.Option(
    "--hosts", "-w", help="Node set (node[1-8]), hostfile, or 'slurm' (the current allocation). "
                          "Default: $CLUSTERBENCH_HOSTS, else the Slurm allocation.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def resolve_hosts(hosts: str | None):
    from clusterbench.errors import UserInputError
    from clusterbench.launch.hosts import SLURM_ALLOCATION, inventory

    spec = hosts or os.environ.get("CLUSTERBENCH_HOSTS")
    if not spec and os.environ.get("SLURM_JOB_NODELIST"):
        spec = SLURM_ALLOCATION
    if not spec:
        raise UserInputError("which nodes? none given",
                             hint="--hosts node[1-4], --hosts hosts.txt, or set CLUSTERBENCH_HOSTS")
    return inventory(spec)


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / 2**30:.1f}"


def facts_table(facts, problems=(), title: str = "nodes") -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("node", "ssh", "host name", "cores", "GiB total", "GiB free", "kernel", "MPI", "BLAS",
                "clock", "problems"):
        table.add_column(col)
    for f in facts:
        mine = [p for p in problems if p.node == f.host]
        skew = "" if f.clock_skew_s is None else f"{f.clock_skew_s:+.1f}s"
        table.add_row(escape(f.host), "ok" if f.reachable else "[red]no[/]", escape(f.hostname or ""),
                      str(f.cores or ""), _gib(f.memory.total_bytes if f.memory else None),
                      _gib(f.memory.available_bytes if f.memory else None), escape(f.kernel or ""),
                      escape(f.mpi or ""), escape(f.blas or ""), skew,
                      f"[red]{len(mine)}: {escape(', '.join(sorted({p.check for p in mine})))}[/]" if mine else "ok")
    return table


def problems_table(problems) -> Table:
    table = Table(title="preflight problems", title_justify="left")
    for col in ("node", "check", "problem"):
        table.add_column(col)
    for p in problems:
        hint = f" [dim]({escape(p.hint)})[/]" if getattr(p, "hint", None) else ""
        table.add_row(escape(p.node), escape(p.check), f"[red]{escape(p.detail)}[/]{hint}")
    return table


def default_runs_dir() -> Path:
    """The runs directory of the results store in use ($CLUSTERBENCH_DB or --db), as Store.runs_dir
    has it, without opening (or creating) the database."""
    from clusterbench.store.db import default_db_path

    return default_db_path().parent / "runs"


def run_preflight(inv, binaries: list[str], mpi: bool = True, quiet: bool = False,
                  mpis: tuple[str | None, ...] = (None,), shared_dir: Path | None = None):
    """check_cluster with progress; `shared_dir` (the runs directory, for a multi-node campaign) must
    be the same directory on every node."""
    from rich.progress import Progress

    from clusterbench.cluster.preflight import check_cluster

    with Progress(console=err_console, transient=True, disable=quiet) as progress:
        task = progress.add_task(f"checking {len(inv.hosts)} node(s)", total=len(inv.hosts))
        result = check_cluster(inv, binaries, mpi_hello=mpi, on_node=lambda _f: progress.advance(task), mpis=mpis,
                               shared_dir=shared_dir)
    return result


def print_preflight(result, inv) -> None:
    console.print(facts_table(result.facts, result.problems, f"preflight of {escape(inv.nodeset())} "
                                                             f"({escape(inv.source)})"))
    if result.problems:
        console.print(problems_table(result.problems))
    else:
        console.print(f"[green]all {len(result.facts)} node(s) consistent[/]; smallest free memory "
                      f"{_gib(result.min_available_bytes())} GiB")


@cluster_app.command("info")
def cluster_info(hosts: HostsOpt = None, as_json: JsonOpt = False) -> None:
    """Cores, memory, kernel, MPI, BLAS and clock of every node, gathered over ssh in parallel."""
    from clusterbench.cluster.facts import gather

    inv = resolve_hosts(hosts)
    facts = gather(inv.names)
    if as_json:
        print(json.dumps([f.to_dict() for f in facts], indent=2, default=str))
        return
    console.print(facts_table(facts, title=f"{escape(inv.nodeset())} ({escape(inv.source)})"))


@cluster_app.command("check")
def cluster_check(
    hosts: HostsOpt = None,
    binary: Annotated[list[str] | None, typer.Option(
        "--binary", "-b", help="A benchmark binary whose checksum must match on every node (repeatable).")] = None,
    mpi: Annotated[bool, typer.Option("--mpi/--no-mpi", help="Run an MPI hello-world across all nodes.")] = True,
    mpi_impl: Annotated[list[MpiChoice] | None, typer.Option(
        "--mpi-impl", help="The MPI of the hello-world: openmpi or mpich (repeatable; default: the mpirun on PATH).")]
    = None,
    shared_dir: Annotated[Path | None, typer.Option(
        "--shared-dir", help="A directory every node must see as the head does (a file written there by the head "
                             "is read on each node). Default: the results store's runs directory.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Preflight: reachable, names, binaries, BLAS, MPI, kernel, clocks, MPI across nodes, and the
    results directory shared. Exit code 1 when a node is inconsistent."""
    inv = resolve_hosts(hosts)
    mpis = tuple(m.value for m in mpi_impl) if mpi_impl else (None,)
    result = run_preflight(inv, binary or [], mpi, quiet=as_json, mpis=mpis,
                           shared_dir=shared_dir if shared_dir is not None else default_runs_dir())
    if as_json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        print_preflight(result, inv)
    if not result.ok:
        raise typer.Exit(1)


@cluster_app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def cluster_exec(
    command: Annotated[list[str], typer.Argument(help="The command (a shell line) to run on every node.")],
    hosts: HostsOpt = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each node.", min=0.1, max=86_400)] = 60.0,
) -> None:
    """Run a command on all nodes; identical outputs are printed once with their nodes (like clush -b)."""
    from clusterbench.launch.hosts import Inventory
    from clusterbench.launch.remote import fold, run_everywhere

    inv = resolve_hosts(hosts)
    answers = run_everywhere(inv.names, " ".join(command), timeout)
    for names, answer in fold(answers):
        header = Inventory([h for h in inv.hosts if h.name in names], "").nodeset()
        code = "" if answer.ok else f" (exit code {answer.exit_code})"
        console.print(f"[bold]---------------- {escape(header)} ({len(names)}){code}[/]")
        text = (answer.stdout + answer.stderr).rstrip("\n")
        if text:
            console.print(escape(text), highlight=False, soft_wrap=True)
    if any(not a.ok for a in answers):
        raise typer.Exit(1)


@cluster_app.command("blas")
def cluster_blas(
    hosts: HostsOpt = None,
    set_to: Annotated[str | None, typer.Option(
        "--set", help="Make this variant (openblas-serial, blis-openmp, ...) the system BLAS on every node "
                      "(root on the nodes).")] = None,
) -> None:
    """The system BLAS alternative of every node, grouped; with --set, change it everywhere."""
    from clusterbench.cluster import blas
    from clusterbench.launch.remote import fold

    inv = resolve_hosts(hosts)
    answers = blas.set_variant(inv.names, set_to) if set_to else blas.show(inv.names)
    table = Table(title="system BLAS (libblas.so.3 alternative)", title_justify="left")
    for col in ("nodes", "count", "variant"):
        table.add_column(col)
    for names, answer in fold(answers):
        found = blas.parse_alternative(answer.stdout)
        variant = found[1] if found and answer.ok else f"[red]{escape(answer.stderr.strip() or 'none')}[/]"
        table.add_row(escape(",".join(names)), str(len(names)), variant)
    console.print(table)
    if any(not a.ok for a in answers):
        raise typer.Exit(1)
