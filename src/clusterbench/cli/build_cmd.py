"""`clusterbench build hpl|hpcg|imb|osu|stream|lulesh|list`: build official benchmarks into the cache
and register them.

One command per official code, each made from the code's declared `BuildRecipe` (its build
function, options, and what to say of the result; bench/declare.py), which the registry lists.
"""


import inspect
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from clusterbench.bench.registry import build_recipes
from clusterbench.cli.app import MpiOpt, app, console

if TYPE_CHECKING:
    from clusterbench.bench.declare import BuildOption, BuildRecipe
    from clusterbench.build.common import Built

build_app = typer.Typer(help="Build official benchmarks (HPL, HPCG, IMB, OSU, STREAM, LULESH) for this cluster, "
                             "with provenance.", no_args_is_help=True)
app.add_typer(build_app, name="build")

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


def _option(name: str, annotation: object, default: object = inspect.Parameter.empty) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def _own_option(opt: "BuildOption") -> inspect.Parameter:
    kind = opt.type if opt.default is not None else opt.type | None
    return _option(opt.name, Annotated[kind, typer.Option(help=opt.help, min=opt.minimum, max=opt.maximum)],
                   opt.default)


def build_command(recipe: "BuildRecipe") -> None:
    """`clusterbench build NAME` for one recipe: --source, its own options, --cflags, --mpi (when it
    is built with MPI), --force, --json."""
    source_type = Path if recipe.source_required else Path | None
    params = [_option("source", Annotated[source_type, typer.Option(help=recipe.source_help)],
                      inspect.Parameter.empty if recipe.source_required else None),
              *(_own_option(opt) for opt in recipe.options),
              _option("cflags", Annotated[str | None, typer.Option(help=recipe.cflags_help)], None),
              *([_option("mpi", MpiOpt, None)] if recipe.mpi else []),
              _option("force", ForceOpt, False), _option("as_json", JsonOpt, False)]

    def command(**given) -> None:
        source, cflags, force, as_json = (given.pop(key) for key in ("source", "cflags", "force", "as_json"))
        if recipe.mpi:
            mpi = given.pop("mpi")
            given["mpi"] = mpi and mpi.value
        _build(recipe.title, as_json, lambda log: recipe.build(source, cflags=cflags or recipe.default_cflags,
                                                               force=force, log=log, **given),
               recipe.summary, recipe.then)

    command.__signature__ = inspect.Signature(params)  # what typer reads the options from
    command.__doc__ = recipe.help
    command.__name__ = f"build_{recipe.name}_cmd"
    build_app.command(recipe.name)(command)


for _recipe in build_recipes():
    build_command(_recipe)


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
def build_list(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
               wide: Annotated[bool, typer.Option("--wide", help="Every column, however wide the terminal.")] = False,
               ) -> None:
    """The registered builds whose binaries still exist, newest first."""
    from clusterbench.cli.results_view import Column, fitted_table, print_table

    entries = registered_builds()
    if as_json:
        print(json.dumps(entries, indent=2))
        return

    def cells(read: Callable[[dict], object]) -> list[str]:
        return [escape(str(read(e))) for e in entries]

    # The binary's path is what a campaign or a shell is given: folded over lines when narrow, never cut.
    table, dropped, _ = fitted_table([
        Column("name", cells(lambda e: e.get("name"))),
        Column("version", cells(lambda e: e.get("version")), rank=1),
        Column("MPI", cells(_mpi), rank=2),
        Column("flags", cells(_flags), rank=5, wrap=12, most=40),
        Column("source", cells(lambda e: e.get("source")), rank=6, wrap=12, most=40),
        Column("built (UTC)", cells(lambda e: str(e.get("built_at") or "")[:16].replace("T", " ")), rank=3),
        Column("binary", cells(lambda e: e["binary"]), rank=4, wrap=20)], console.width, wide, title="builds")
    if dropped:
        table.caption = f"--wide or --json shows what is left out here: {', '.join(dropped)}"
    print_table(table, wide)
