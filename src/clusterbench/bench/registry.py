"""Which benchmark modules there are: what a campaign can name, an import recognise, a report draw.

Built-in modules are listed here (adding one = one module + one line). A module outside the
package registers itself with `register(cls)`, or is found through the `clusterbench.benchmarks`
entry-point group of an installed distribution (`[project.entry-points."clusterbench.benchmarks"]
mybench = "mypkg.mybench:MyBench"`).

What each benchmark declares (bench/declare.py) is collected here for the code that does not run
benchmarks: `output_formats()` and `recognise()` for the importer, `drawn()` for the report
sections, `availability()` for `clusterbench system`, and `build_recipes()` for the
`clusterbench build` commands (the official codes built from source, listed in BUILDS).
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

from clusterbench.bench.base import Benchmark
from clusterbench.bench.declare import BuildRecipe, Derived, MetricSpec, OutputFormat, ReportUse
from clusterbench.errors import UserInputError, suggest

# The built-in modules, in registry order: name, module, class. Imported when first needed, so
# that running one benchmark (`clusterbench bench hpl`, a tuner's trials) does not import the
# other twelve; `BENCHMARKS` (every one) imports them all on first use.
BUILTIN: tuple[tuple[str, str, str], ...] = (
    ("hpl", "clusterbench.bench.hpl.benchmark", "Hpl"), ("hpcc", "clusterbench.bench.hpcc.benchmark", "Hpcc"),
    ("hpcg", "clusterbench.bench.hpcg.benchmark", "Hpcg"), ("imb", "clusterbench.bench.imb.benchmark", "Imb"),
    ("osu", "clusterbench.bench.osu.benchmark", "Osu"), ("stream-binary", "clusterbench.bench.stream.binary",
                                                         "StreamBinary"),
    ("iperf3", "clusterbench.bench.iperf3", "Iperf3"), ("lulesh", "clusterbench.bench.lulesh.benchmark", "Lulesh"),
    # clusterbench's own kernels
    ("stream", "clusterbench.bench.stream.kernel", "Stream"), ("pingpong", "clusterbench.bench.pingpong", "PingPong"),
    ("dgemm", "clusterbench.bench.dgemm", "Dgemm"), ("affinity", "clusterbench.bench.affinity", "Affinity"),
    ("clock", "clusterbench.bench.clock", "Clock"),
    ("command", "clusterbench.bench.command", "Command"),
)
_registered: dict[str, type[Benchmark]] = {}  # register()ed before BENCHMARKS was built

# The official codes `clusterbench build NAME` builds from source, in the order of `clusterbench
# build --help`: each module's BUILD (a bench.declare.BuildRecipe), imported when first asked for.
BUILDS: tuple[str, ...] = (
    "clusterbench.bench.hpl.build", "clusterbench.bench.hpcg.build", "clusterbench.bench.imb.build",
    "clusterbench.bench.osu.build", "clusterbench.bench.stream.build", "clusterbench.bench.lulesh.build",
)


def _builtin(module: str, attr: str) -> type[Benchmark]:
    return getattr(importlib.import_module(module), attr)


def __getattr__(name: str):
    """`BENCHMARKS`: name -> class, the built-in ones then those registered, built on first use
    (then an ordinary module attribute)."""
    if name != "BENCHMARKS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    table = {key: _builtin(module, attr) for key, module, attr in BUILTIN}
    table.update(_registered)
    globals()["BENCHMARKS"] = table
    return table


def _table() -> dict[str, type[Benchmark]]:
    return globals()["BENCHMARKS"] if "BENCHMARKS" in globals() else __getattr__("BENCHMARKS")


def register(cls: type[Benchmark]) -> type[Benchmark]:
    """Make a benchmark class known under its `name` (usable as a class decorator)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if "BENCHMARKS" in globals():
        globals()["BENCHMARKS"][cls.name] = cls
    else:
        _registered[cls.name] = cls
    return cls


_entry_points_loaded = False
PLUGIN_GROUP = "clusterbench.benchmarks"


def _load_entry_points() -> None:
    global _entry_points_loaded
    _entry_points_loaded = True
    if not _plugins_may_exist():
        return
    from importlib.metadata import entry_points

    table = _table()
    for ep in entry_points(group=PLUGIN_GROUP):
        if ep.name not in table:
            try:
                register(ep.load())
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not hide the built-in modules
                raise UserInputError(f"benchmark plugin {ep.name!r} ({ep.value}) failed to load: {exc}") from None


def _plugins_may_exist() -> bool:
    """False only when no distribution on sys.path can declare PLUGIN_GROUP: no `entry_points.txt` of a
    `*.dist-info` or `*.egg-info` folder names it. Why: importing importlib.metadata and asking it costs
    0.03-0.2 s here, and every `results` listing pays it (analysis.applicable reads every benchmark's
    declarations), for plugins that are almost never there. Where this look cannot see everything
    importlib.metadata would (a zip or an egg on sys.path, a finder of distributions besides the
    standard one), it says True and importlib.metadata decides."""
    import importlib.machinery
    import os
    import sys

    if any(hasattr(finder, "find_distributions") and finder is not importlib.machinery.PathFinder
           for finder in sys.meta_path):
        return True
    for folder in sys.path:
        folder = folder or "."
        if not os.path.isdir(folder):
            if os.path.exists(folder):  # a zip file: its distributions are not looked into here
                return True
            continue
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            low = name.lower()
            if low.endswith(".egg"):
                return True
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(folder, name, "entry_points.txt"), encoding="utf-8", errors="replace") as fh:
                    if PLUGIN_GROUP in fh.read():
                        return True
            except OSError:  # none (most distributions), or an egg-info that is a file
                continue
    return False


def benchmark_class(name: str) -> type[Benchmark]:
    """The class of one benchmark; a built-in one is imported alone while BENCHMARKS is not built."""
    if "BENCHMARKS" not in globals():
        if name in _registered:
            return _registered[name]
        found = next(((module, attr) for key, module, attr in BUILTIN if key == name), None)
        if found:
            return _builtin(*found)
    table = _table()
    if name not in table:
        _load_entry_points()
    try:
        return table[name]
    except KeyError:
        raise UserInputError(f"unknown benchmark {name!r}", hint=suggest(name, sorted(table), "known benchmarks")
                             + "; what each does: clusterbench benchmarks") from None


# ---------------------------------------------------------------- what the benchmarks declare

def registered() -> list[type[Benchmark]]:
    """Every benchmark class, in registry order: the built-in ones, those registered, the plugins'."""
    if not _entry_points_loaded:
        _load_entry_points()
    return list(_table().values())


def output_formats() -> list[OutputFormat]:
    """The output file kinds of every benchmark, in the order a file is tried against them: the
    highest priority first, ties in registry order (a format two classes share is listed once)."""
    found: dict[int, OutputFormat] = {}
    for cls in registered():
        for fmt in cls.output_formats:
            found.setdefault(id(fmt), fmt)
    return sorted(found.values(), key=lambda fmt: -fmt.priority)


def recognise(text: str) -> OutputFormat | None:
    """The format of an output file's text, None when no benchmark recognises it."""
    return next((fmt for fmt in output_formats() if fmt.recognise(text)), None)


def recognised_titles() -> list[str]:
    """The benchmarks whose output files an import recognises and stores (HPL, HPCC, ...), in registry order."""
    titles: list[str] = []
    for cls in registered():
        titles += [fmt.title for fmt in cls.output_formats if fmt.title and fmt.title not in titles]
    return titles


class Drawn(NamedTuple):
    """A metric a report section draws: which benchmark stores it, its declaration, and the use."""

    benchmark: str
    spec: MetricSpec
    use: ReportUse


def drawn(section: str, role: str | None = None, benchmark: str | None = None) -> list[Drawn]:
    """What this report section draws (in this role), ordered by the uses' `order`, then registry order.
    With `benchmark`, only what that benchmark declares (only its module imported; unknown: UserInputError)."""
    classes = [benchmark_class(benchmark)] if benchmark is not None else registered()
    out = [Drawn(cls.name, spec, use) for cls in classes for spec in cls.metrics for use in spec.uses
           if use.section == section and role in (None, use.role)]
    return sorted(out, key=lambda d: d.use.order)


class Availability(NamedTuple):
    name: str
    available: bool
    detail: str  # what it would use here, or why it cannot run
    install_hint: str  # how to get the program it needs ("" when there is nothing to install)


def availability() -> list[Availability]:
    """Whether each benchmark can run here, as its class finds out (its program on PATH, in
    $CLUSTERBENCH_PATH or its variable, or built by `clusterbench build`), and its install hint."""
    out = []
    for cls in registered():
        ok, detail = cls.available()
        out.append(Availability(cls.name, ok, detail, getattr(cls, "install_hint", "")))
    return out


def build_recipes() -> list[BuildRecipe]:
    """How each official code is built from source (`clusterbench build NAME`), in BUILDS order."""
    return [importlib.import_module(module).BUILD for module in BUILDS]


def build_recipe(name: str) -> BuildRecipe:
    """The build recipe of one official code (`hpl`, `stream`, ...)."""
    found = next((r for r in build_recipes() if r.name == name), None)
    if found is None:
        raise UserInputError(f"no build of {name!r}", hint=suggest(name, [r.name for r in build_recipes()], "builds"))
    return found


def derived(name: str) -> Derived | None:
    """The derived value a campaign names `name` (`n: {hpl_n: {...}}`), as the benchmark that knows how
    declares it (`derived`); None when no benchmark declares one of that name."""
    for cls in registered():
        for found in cls.derived:
            if found.name == name:
                return found
    return None


def derived_values() -> list[Derived]:
    """Every derived value the benchmarks declare, in registry order (each once)."""
    out: list[Derived] = []
    for cls in registered():
        out += [d for d in cls.derived if all(d.name != seen.name for seen in out)]
    return out
