"""`clusterbench build hpl|hpcg|imb|osu|stream|lulesh|list`: build official benchmarks into the cache
and register them."""


import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from clusterbench.cli.app import MpiOpt, app, console

if TYPE_CHECKING:
    from clusterbench.build.common import Built

build_app = typer.Typer(help="Build official benchmarks (HPL, HPCG, IMB, OSU, STREAM, LULESH) for this cluster, "
                             "with provenance.", no_args_is_help=True)
app.add_typer(build_app, name="build")

SourceOpt = Annotated[Path, typer.Option(help="The official source tree or tarball.")]
CflagsOpt = Annotated[str | None, typer.Option(help="Compiler flags (default: -O3 -march=native).")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Rebuild even if this build is cached.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the provenance as JSON.")]


def _say(msg: str) -> None:
    console.print(f"[dim]build:[/] {escape(msg)}")


def _build(what: str, as_json: bool, build: Callable[[Callable[[str], None]], "Built"], summary: Callable[[dict], str],
           then: str = "") -> None:
    """The body every build command shares: `build(log)` under a spinner with its steps printed, then
    one line of what is ready (`summary(provenance)`) and `then` (what uses it now); or, with
    --json, quietly, then the provenance as JSON."""
    if as_json:
        print(json.dumps(build(lambda _msg: None).provenance, indent=2))
        return
    with console.status(f"building {what}", spinner="dots"):
        built = build(_say)
    console.print(f"[green]{escape(built.provenance['name'])} ready[/]: {escape(str(built.binary))}"
                  f" ({'built now' if built.rebuilt else 'cached'}; {escape(summary(built.provenance))})")
    if then:
        console.print(then)


@build_app.command("hpl")
def build_hpl_cmd(
    source: Annotated[Path | None, typer.Option(
        help="netlib HPL 2.x tree or tarball. Default on Debian/Ubuntu: the HPL in Debian's hpcc source.")] = None,
    blas: Annotated[str, typer.Option(
        help="BLAS link: generic (libblas.so.3, switchable per run), openblas, blis or mkl ($MKLROOT).")]
    = "generic",
    cflags: Annotated[str | None, typer.Option(help="Compiler flags (default: -O3 -march=native ...).")] = None,
    mpi: MpiOpt = None, force: ForceOpt = False, as_json: JsonOpt = False,
) -> None:
    """Build a standalone xhpl (Make.<arch> generated, MPI-3 patches, smoke test) and register it."""
    from clusterbench.bench.hpl.build import DEFAULT_CFLAGS, build_hpl

    _build("HPL", as_json, lambda log: build_hpl(source, blas=blas, cflags=cflags or DEFAULT_CFLAGS, force=force,
                                                 log=log, mpi=mpi and mpi.value),
           lambda p: f"HPL {p['version']}, {p['blas']} BLAS, {p.get('mpi', 'openmpi')}, "
                     f"smoke test {p.get('smoke_test_gflops', 0):.2f} Gflop/s",
           "campaigns and `clusterbench bench hpl` now use it; see `clusterbench build list`.")


@build_app.command("hpcg")
def build_hpcg_cmd(
    source: Annotated[Path, typer.Option(help="The official HPCG 3.x source tree or tarball.")],
    openmp: Annotated[bool, typer.Option(help="MPI + OpenMP (default) or MPI only.")] = True,
    cflags: CflagsOpt = None, mpi: MpiOpt = None, force: ForceOpt = False, as_json: JsonOpt = False,
) -> None:
    """Build xhpcg from the official tree (its own make system, a generated setup/Make file)."""
    from clusterbench.bench.hpcg.build import DEFAULT_CFLAGS, build_hpcg

    _build("HPCG", as_json, lambda log: build_hpcg(source, openmp=openmp, cflags=cflags or DEFAULT_CFLAGS,
                                                   force=force, log=log, mpi=mpi and mpi.value),
           lambda p: f"HPCG {p['version']}, {p['mpi']}, {'MPI + OpenMP' if p['openmp'] else 'MPI only'}",
           "`clusterbench bench hpcg` now uses it.")


@build_app.command("imb")
def build_imb_cmd(source: SourceOpt, cflags: CflagsOpt = None, mpi: MpiOpt = None, force: ForceOpt = False,
                  as_json: JsonOpt = False) -> None:
    """Build IMB-MPI1 of the Intel MPI Benchmarks (upstream make; it compiles at -O0 whatever --cflags)."""
    from clusterbench.bench.imb.build import DEFAULT_CFLAGS, build_imb

    _build("IMB", as_json, lambda log: build_imb(source, cflags=cflags or DEFAULT_CFLAGS, force=force, log=log,
                                                 mpi=mpi and mpi.value),
           lambda p: f"IMB {p['version']}, {p['mpi']}, compiled {p.get('optimization')}, "
                     f"smoke test PingPong {p.get('smoke_test_latency_us')} us",
           "`clusterbench bench imb` now uses it.")


@build_app.command("osu")
def build_osu_cmd(source: SourceOpt, cflags: CflagsOpt = None, mpi: MpiOpt = None, force: ForceOpt = False,
                  as_json: JsonOpt = False) -> None:
    """Build the OSU Micro-Benchmarks (configure && make) and register osu_latency, osu_bw, ... each."""
    from clusterbench.bench.osu.build import DEFAULT_CFLAGS, build_osu

    _build("OSU", as_json, lambda log: build_osu(source, cflags=cflags or DEFAULT_CFLAGS, force=force, log=log,
                                                 mpi=mpi and mpi.value),
           lambda p: f"OSU {p['version']}, {p['mpi']}, smoke test {p.get('smoke_test_latency_us')} us; "
                     f"installed beside it: {', '.join(p.get('installed', {}))}",
           "`clusterbench bench osu -p test=...` now uses them.")


@build_app.command("stream")
def build_stream_cmd(
    source: SourceOpt,
    array_size: Annotated[int | None, typer.Option(
        help="Elements per array (default: STREAM's rule, 4 x the node's last-level cache, at least 10M).",
        min=1000, max=2**40)] = None,
    ntimes: Annotated[int, typer.Option(help="Repetitions of each kernel (-DNTIMES; the first is not counted).",
                                        min=2, max=10_000)] = 10,
    cflags: CflagsOpt = None, force: ForceOpt = False, as_json: JsonOpt = False,
) -> None:
    """Build McCalpin's stream.c with OpenMP and the array size compiled in (no MPI)."""
    from clusterbench.bench.stream.build import DEFAULT_CFLAGS, build_stream

    _build("STREAM", as_json, lambda log: build_stream(source, array_size=array_size, ntimes=ntimes,
                                                       cflags=cflags or DEFAULT_CFLAGS, force=force, log=log),
           lambda p: f"STREAM {p['version']}, {p['array_size']:,} elements per array, NTIMES={p['ntimes']}, "
                     f"smoke test Triad {p.get('smoke_test_triad_mbs')} MB/s",
           "`clusterbench bench stream-binary` now uses it.")


@build_app.command("lulesh")
def build_lulesh_cmd(
    source: SourceOpt,
    openmp: Annotated[bool, typer.Option(help="MPI + OpenMP (default) or MPI only.")] = True,
    cflags: CflagsOpt = None, mpi: MpiOpt = None, force: ForceOpt = False, as_json: JsonOpt = False,
) -> None:
    """Build lulesh2.0 (upstream Makefile, CXX=mpicxx -DUSE_MPI=1, OpenMP)."""
    from clusterbench.bench.lulesh.build import DEFAULT_CFLAGS, build_lulesh

    _build("LULESH", as_json, lambda log: build_lulesh(source, cflags=cflags or DEFAULT_CFLAGS, openmp=openmp,
                                                       force=force, log=log, mpi=mpi and mpi.value),
           lambda p: f"LULESH {p['version']}, {p['mpi']}, smoke test FOM {p.get('smoke_test_fom')} z/s")


def registered_builds() -> list[dict]:
    """Every registered build whose binary is still there, newest first."""
    from clusterbench.build import registry

    found = [(e.get("built_at", ""), k, e) for k, e in enumerate(registry.load())
             if os.access(e.get("binary", ""), os.X_OK)]
    return [e for _, _, e in sorted(found, key=lambda t: t[:2], reverse=True)]


def _flags(e: dict) -> str:
    parts = [str(e.get("cflags") or "")]
    if e.get("blas"):
        parts.append(f"{e['blas']} BLAS")
    if e.get("optimization") and e["optimization"] not in parts[0].split()[-1:]:
        parts.append(f"compiled {e['optimization']}")
    if e.get("array_size"):
        parts.append(f"N={e['array_size']} NTIMES={e.get('ntimes')}")
    if e.get("openmp") is False:
        parts.append("no OpenMP")
    return "; ".join(p for p in parts if p)


def _mpi(e: dict) -> str:
    if "mpi" in e and not e["mpi"]:
        return "-"  # built without MPI (STREAM)
    return " ".join(filter(None, (e.get("mpi", "openmpi"), e.get("mpi_version"))))


@build_app.command("list")
def build_list(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """The registered builds whose binaries still exist, newest first."""
    entries = registered_builds()
    if as_json:
        print(json.dumps(entries, indent=2))
        return
    table = Table("name", "version", "MPI", "flags", "source", "built", "binary", title="builds",
                  title_justify="left")
    for e in entries:
        table.add_row(escape(str(e.get("name"))), escape(str(e.get("version"))), escape(_mpi(e)), escape(_flags(e)),
                      escape(str(e.get("source"))), escape(str(e.get("built_at"))), escape(e["binary"]))
    console.print(table)
