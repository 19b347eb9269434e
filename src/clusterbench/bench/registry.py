"""Which benchmark modules there are: what a campaign can name, an import recognise, a report draw.

Built-in modules are listed here (adding one = one module + one line). A module outside the
package registers itself with `register(cls)`, or is found through the `clusterbench.benchmarks`
entry-point group of an installed distribution (`[project.entry-points."clusterbench.benchmarks"]
mybench = "mypkg.mybench:MyBench"`).

What each benchmark declares (bench/declare.py) is collected here for the code that does not run
benchmarks: `output_formats()` and `recognise()` for the importer, `drawn()` for the report
sections, `availability()` for `clusterbench system`.
"""

from __future__ import annotations

from typing import NamedTuple

from clusterbench.bench.affinity import Affinity
from clusterbench.bench.base import Benchmark
from clusterbench.bench.command import Command
from clusterbench.bench.declare import MetricSpec, OutputFormat, ReportUse
from clusterbench.bench.dgemm import Dgemm
from clusterbench.bench.hpcc.benchmark import Hpcc
from clusterbench.bench.hpcg.benchmark import Hpcg
from clusterbench.bench.hpl.benchmark import Hpl
from clusterbench.bench.imb.benchmark import Imb
from clusterbench.bench.iperf3 import Iperf3
from clusterbench.bench.lulesh.benchmark import Lulesh
from clusterbench.bench.osu.benchmark import Osu
from clusterbench.bench.pingpong import PingPong
from clusterbench.bench.stream.binary import StreamBinary
from clusterbench.bench.stream.kernel import Stream
from clusterbench.errors import UserInputError

BENCHMARKS: dict[str, type[Benchmark]] = {
    cls.name: cls for cls in (Hpl, Hpcc, Hpcg, Imb, Osu, StreamBinary, Iperf3, Lulesh,  # official binaries
                              Stream, PingPong, Dgemm, Affinity, Command)}  # clusterbench's own kernels


def register(cls: type[Benchmark]) -> type[Benchmark]:
    """Make a benchmark class known under its `name` (usable as a class decorator)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    BENCHMARKS[cls.name] = cls
    return cls


_entry_points_loaded = False


def _load_entry_points() -> None:
    global _entry_points_loaded
    from importlib.metadata import entry_points

    _entry_points_loaded = True
    for ep in entry_points(group="clusterbench.benchmarks"):
        if ep.name not in BENCHMARKS:
            try:
                register(ep.load())
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the tool
                raise UserInputError(f"benchmark plugin {ep.name!r} ({ep.value}) failed to load: {exc}") from None


def benchmark_class(name: str) -> type[Benchmark]:
    if name not in BENCHMARKS:
        _load_entry_points()
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise UserInputError(f"unknown benchmark {name!r}",
                             hint="known benchmarks: " + ", ".join(sorted(BENCHMARKS))) from None


# ---------------------------------------------------------------- what the benchmarks declare

def registered() -> list[type[Benchmark]]:
    """Every benchmark class, in registry order: the built-in ones, those registered, the plugins'."""
    if not _entry_points_loaded:
        _load_entry_points()
    return list(BENCHMARKS.values())


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


def drawn(section: str, role: str | None = None) -> list[Drawn]:
    """What this report section draws (in this role), ordered by the uses' `order`, then registry order."""
    out = [Drawn(cls.name, spec, use) for cls in registered() for spec in cls.metrics for use in spec.uses
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
