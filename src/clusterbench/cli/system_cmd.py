"""`clusterbench system`: what this node (or a saved topology) is, and its Rpeak; `system settings`,
the OS/network/MPI keys a campaign may change; `system restore`, which puts back what a crashed
run left changed."""


import json
import os
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from clusterbench.bench.params import MAX_COUNT
from clusterbench.cli.app import app, console
from clusterbench.units import format_bytes

system_app = typer.Typer(help="This node: topology, MPI, Rpeak (no subcommand); the settings a campaign may "
                              "change (settings); restoring them after a crash (restore).")
app.add_typer(system_app, name="system")


def positive(value: float | None, name: str) -> float | None:
    from clusterbench.errors import UserInputError

    if value is not None and value <= 0:
        raise UserInputError(f"{name} must be positive, got {value}")
    return value


@system_app.callback(invoke_without_command=True)
def system(
    ctx: typer.Context,
    from_file: Annotated[str | None, typer.Option(
        "--from", help="Read a saved topology instead of this machine: hwloc XML, hwloc synthetic "
                       "string, lscpu -J, lscpu -p or plain lscpu output.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
    flops_per_cycle: Annotated[int | None, typer.Option(
        help="Override the DP flops per cycle per core used for Rpeak.", min=1, max=1024)] = None,
    frequency: Annotated[float | None, typer.Option(
        help="Override the nominal core frequency in MHz used for Rpeak.", min=1, max=100_000)] = None,
    nodes: Annotated[int, typer.Option(help="Number of identical nodes, for total Rpeak.", min=1, max=MAX_COUNT)]
    = 1,
) -> None:
    """Discover CPU, NUMA, caches, memory, MPI, BLAS and which benchmarks can run; derive Rpeak."""
    if ctx.invoked_subcommand is not None:
        return
    from clusterbench.system.discover import discover, system_from_file

    positive(flops_per_cycle, "--flops-per-cycle")
    positive(frequency, "--frequency")
    positive(nodes, "--nodes")
    if from_file:
        info, benchmarks = system_from_file(from_file, flops_per_cycle, frequency, nodes), None
    else:
        info, benchmarks = discover(flops_per_cycle, frequency, nodes), benchmark_availability()
    if as_json:
        extra = {"benchmarks": [b._asdict() for b in benchmarks]} if benchmarks is not None else {}
        print(json.dumps(info.to_dict() | {"fingerprint": info.fingerprint()} | extra, indent=2))
        return
    print_system(info, benchmarks)


def benchmark_availability() -> list:
    """Whether each benchmark can run here, as the benchmark itself finds its program (PATH,
    $CLUSTERBENCH_PATH, its variable, or a `clusterbench build`), with its install hint."""
    from clusterbench.bench.registry import availability

    return availability()


def print_system(info, benchmarks: list | None = None) -> None:
    t = info.topology
    table = Table(title=f"System ({escape(t.source)})", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    rows = [
        ("Host", t.hostname or "-"),
        ("CPU", f"{t.model_name or 'unknown model'} ({t.architecture or '?'})"),
        ("Layout", f"{t.sockets} socket(s) x {t.cores_per_socket} cores x {t.threads_per_core} "
                   f"thread(s) = {t.cores_total} cores, {t.pus_total} hardware threads"),
        ("NUMA", "; ".join(f"node {d.os_index}: CPUs {_cpus(d.cpus)}"
                           + (f" ({format_bytes(d.memory_bytes)})" if d.memory_bytes else "")
                           for d in t.numa)),
        ("Caches", ", ".join(f"{c.name} {format_bytes(c.size_bytes)} x{c.instances}" for c in t.caches)
         or "-"),
    ]
    if t.accelerators:
        rows.append(("Accelerators", ", ".join(t.accelerators)))
    if info.memory:
        rows.append(("Memory", f"{format_bytes(info.memory.total_bytes)} total, "
                               f"{format_bytes(info.memory.available_bytes)} available (/proc/meminfo)"))
    elif info.memory_bytes():
        rows.append(("Memory", f"{format_bytes(info.memory_bytes())} (hwloc NUMA sum)"))
    p = info.peak
    rows += [
        ("Flops/cycle/core", f"{p.flops_per_cycle or '?'} ({p.flops_reason})"),
        ("Frequency", f"{p.frequency_mhz:.0f} MHz ({p.frequency_source})" if p.frequency_mhz else
         "unknown (give --frequency)"),
        ("Rpeak per node", f"{info.rpeak_node_gflops:.2f} Gflop/s" if info.rpeak_node_gflops else "unknown"),
        ("Rpeak total", f"{info.rpeak_total_gflops:.2f} Gflop/s over {info.nodes} node(s)"
         if info.rpeak_total_gflops else "unknown"),
        ("Derivation", p.derivation()),
    ]
    sw = info.software
    if sw:
        blas = sw.blas
        rows += [
            ("OS / kernel", f"{sw.os} / {sw.kernel}"),
            ("MPI", f"{sw.mpi.label} ({sw.mpi.mpirun or 'no mpirun'})"),
            ("BLAS", f"{blas.variant or 'none'} -> {blas.alternative or '-'}"),
            ("BLAS variants", ", ".join(blas.variants) or "none installed"),
            ("Compiler", sw.compilers.get("cc") or "not found"),
        ]
    if benchmarks is not None:
        rows += [
            ("Benchmarks", ", ".join(b.name for b in benchmarks if b.available) or "none found"),
            ("Missing", "\n".join(f"{b.name}: {b.detail}" for b in benchmarks if not b.available) or "-"),
        ]
    for k, v in rows:
        table.add_row(k, escape(str(v)))
    console.print(table)


def _cpus(cpus: list[int]) -> str:
    from clusterbench.system.topology import compress_cpulist

    return compress_cpulist(cpus)


@system_app.command("settings")
def settings_list() -> None:
    """The OS, network and MPI settings a campaign's system: section may change (the allow-list)."""
    from clusterbench.system.settings import ALLOWED

    table = Table(title="Settings a campaign may change (docs/settings.md)", title_justify="left")
    table.add_column("key", no_wrap=True)
    for column in ("scope", "root?", "values", "description"):
        table.add_column(column, overflow="fold")
    for t in ALLOWED.values():
        table.add_row(escape(t.key), t.scope, "yes" if t.needs_root else "no", escape(t.allowed),
                      escape(t.description))
    console.print(table)


@system_app.command("check")
def check(
    assignments: Annotated[list[str], typer.Argument(
        metavar="KEY=VALUE...", help="Settings as in a campaign's system: section, flattened: mtu=9000 "
                                     "rto_min=5ms sysctl.net.ipv4.tcp_sack=0 mca.btl_tcp_eager_limit=131072")],
    host: Annotated[list[str] | None, typer.Option(
        "--host", help="A host to check (repeatable; default: this machine). Reached over ssh unless local.")] = None,
) -> None:
    """Check, without changing anything, that the hosts can take these settings (exit 2 if not)."""
    from clusterbench.cli.app import parse_assignments
    from clusterbench.execution.settings import preflight

    hosts = host or ["localhost"]
    settings = parse_assignments(assignments, option="KEY=VALUE", example="mtu=9000")
    preflight(hosts, [settings], hosts)
    console.print(f"{len(settings)} setting(s) can be applied on {escape(', '.join(hosts))}", highlight=False)


@system_app.command("restore")
def restore(
    db: Annotated[str | None, typer.Option(
        "--db", help="Results database whose settings journal to restore (default: $CLUSTERBENCH_DB or "
                     "$XDG_DATA_HOME/clusterbench/results.db).")] = None,
) -> None:
    """Put back the system settings a crashed or killed run left changed (the journal beside the results database).

    Exit 0 when nothing is pending or all is restored, 1 if a host could not be restored."""
    from clusterbench.errors import EnvironmentProblem
    from clusterbench.execution.settings import journal_dir_for, pending_journals, restore_pending
    from clusterbench.store.db import default_db_path

    if db:
        os.environ["CLUSTERBENCH_DB"] = db
    folder = journal_dir_for(default_db_path())
    if not pending_journals(folder):
        console.print(f"nothing to restore (no journal in {escape(str(folder))})", highlight=False)
        return
    for message in restore_pending(folder):
        console.print(escape(message), highlight=False)
    left = pending_journals(folder)
    if left:
        raise EnvironmentProblem(f"{len(left)} settings journal(s) could not be fully restored",
                                 where=str(folder), hint="see the lines above; run this again once the hosts answer")
