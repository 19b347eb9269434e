"""`clusterbench build hpl|hpcg|list`: build official benchmarks into the cache and register them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from clusterbench.cli.app import app, console

build_app = typer.Typer(help="Build official benchmarks (HPL, HPCG) for this cluster, with provenance.",
                        no_args_is_help=True)
app.add_typer(build_app, name="build")


def _say(msg: str) -> None:
    console.print(f"[dim]build:[/] {escape(msg)}")


def _building(what: str, as_json: bool, build):
    """Run `build(log)` under a spinner with its steps printed, or quietly printing the provenance."""
    if as_json:
        built = build(lambda _msg: None)
        print(json.dumps(built.provenance, indent=2))
        return built
    with console.status(f"building {what}", spinner="dots"):
        return build(_say)


@build_app.command("hpl")
def build_hpl_cmd(
    source: Annotated[Path | None, typer.Option(
        help="netlib HPL 2.x tree or tarball. Default on Debian/Ubuntu: the HPL in Debian's hpcc source.")] = None,
    blas: Annotated[str, typer.Option(
        help="BLAS link: generic (libblas.so.3, switchable per run), openblas, blis or mkl ($MKLROOT).")]
    = "generic",
    cflags: Annotated[str | None, typer.Option(help="Compiler flags (default: -O3 -march=native ...).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if this build is cached.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the provenance as JSON.")] = False,
) -> None:
    """Build a standalone xhpl (Make.<arch> generated, MPI-3 patches, smoke test) and register it."""
    from clusterbench.build.hpl import DEFAULT_CFLAGS, build_hpl

    built = _building("HPL", as_json, lambda log: build_hpl(source, blas=blas, cflags=cflags or DEFAULT_CFLAGS,
                                                            force=force, log=log))
    if as_json:
        return
    p = built.provenance
    console.print(f"[green]xhpl ready[/]: {escape(str(built.binary))}"
                  f" ({'built now' if built.rebuilt else 'cached'}; HPL {escape(p['version'])}, {p['blas']} BLAS, "
                  f"smoke test {p.get('smoke_test_gflops', 0):.2f} Gflop/s)")
    console.print("campaigns and `clusterbench bench hpl` now use it; see `clusterbench build list`.")


@build_app.command("hpcg")
def build_hpcg_cmd(
    source: Annotated[Path, typer.Option(help="The official HPCG 3.x source tree or tarball.")],
    openmp: Annotated[bool, typer.Option(help="MPI + OpenMP (default) or MPI only.")] = True,
    cflags: Annotated[str | None, typer.Option(help="Compiler flags (default: -O3 -march=native).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if this build is cached.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the provenance as JSON.")] = False,
) -> None:
    """Build xhpcg from the official tree (its own make system, a generated setup/Make file)."""
    from clusterbench.build.hpcg import DEFAULT_CFLAGS, build_hpcg

    built = _building("HPCG", as_json, lambda log: build_hpcg(source, openmp=openmp, cflags=cflags or DEFAULT_CFLAGS,
                                                              force=force, log=log))
    if as_json:
        return
    console.print(f"[green]xhpcg ready[/]: {escape(str(built.binary))} ({'built now' if built.rebuilt else 'cached'})")


@build_app.command("list")
def build_list(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """The registered builds whose binaries still exist, newest first."""
    from clusterbench.build import registry

    entries = [e for name in ("xhpl", "xhpcg") for e in registry.builds(name)]
    if as_json:
        print(json.dumps(entries, indent=2))
        return
    table = Table("name", "version", "BLAS", "flags", "source", "built", "binary", title="builds",
                  title_justify="left")
    for e in entries:
        table.add_row(e["name"], escape(str(e.get("version"))), escape(str(e.get("blas", "-"))),
                      escape(str(e.get("cflags"))), escape(str(e.get("source"))), escape(str(e.get("built_at"))),
                      escape(e["binary"]))
    console.print(table)

