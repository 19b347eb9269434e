"""What a benchmark declares about itself, for the code that never runs it: the importer and the report.

A benchmark package states, beside its parser (in its `output.py`):

- `OutputFormat`s: how an output file of its kind is recognised by content, and how it is split
  into `Result`s, the runs an import stores (`store/importer.py` asks the registry which format
  a file is, never a benchmark by name);
- `MetricSpec`s: for every metric name its unit, better direction, the labels that tell its values
  apart within a run, which printed values mean "not applicable" (HPCC's -1), and the
  `ReportUse`s: which report section draws it, in which role, and how
  it is shown there (`report/*` ask the registry which metrics they draw).

Its Benchmark class points at them (`output_formats`, `metrics`); `bench/registry.py` collects
them over every registered benchmark, plugins included.

An official code clusterbench builds from source also states, beside its build (in its
`build.py`), a `BuildRecipe`: the build function, the options of its `clusterbench build NAME`
command beyond the common ones, and what the command prints of the result (cli/build_cmd.py makes
every command from these, through the registry's `build_recipes()`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterbench.bench.metrics import Outcome, is_finite

if TYPE_CHECKING:
    from clusterbench.build.common import Built


@dataclass
class Result:
    """One result found in an output file: what ran, with which stated parameters, and its outcome."""

    benchmark: str  # the benchmark name the run is stored under
    params: dict
    outcome: Outcome
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float | None = None


@dataclass(frozen=True)
class OutputFormat:
    """An output file kind: recognised by its content, split into results (one stored run each).

    Formats are tried from the highest `priority` down (ties: in registry order, then in the
    order a class lists them); a format whose files can contain another's output must be above
    it (HPCC's output holds an HPL section). A format with no `split` is recognised and stored as
    nothing, with `note` saying why (an HPCG log, whose results are in the HPCG report file).
    """

    kind: str  # what the import report says the file was recognised as
    recognise: Callable[[str], bool]  # on the whole text of the file
    split: Callable[[str, int], list[Result]] | None  # (text, most results allowed) -> results
    title: str | None = None  # how the import names the benchmark among those it recognises; None: unlisted
    priority: int = 0
    note: str | None = None  # why nothing is stored from a file of this kind (split is None)
    # Invalidate a result above 10x a given Rpeak: (outcome, Rpeak Gflop/s, what it is the Rpeak of).
    rpeak_check: Callable[[Outcome, float, str], None] | None = None


@dataclass(frozen=True)
class ReportUse:
    """Where a report section (or an analysis a report and a command share) draws a metric, in which
    role, and how it is shown there: the section asks the registry (`drawn(section, role)`) instead of
    naming benchmarks and their metrics."""

    section: str  # a report section (network, memory, hpl, hpcc, energy, pinning, cluster, figures), `peak`, `listing`
    role: str  # what the section draws it as: latency, bandwidth, triad, rmax, summary, figure, column, node, ...
    title: str = ""  # how the section names its values: a series prefix (IMB PingPong), a row (PTRANS), a figure
    unit: str = ""  # the unit it is shown in ('': the metric's own); the value is converted (see `convert`)
    where: tuple[tuple[str, object], ...] = ()  # only values whose label, when they have it, equals this
    order: int = 0  # among the section's sources, lowest first (ties: registry order)
    # The name the section gives what it makes of these values, where that name is part of its output:
    # a figure's id (pinning-hpl), a column's key in a table and in JSON (a cluster run's per-node `hpl`).
    key: str = ""
    axis: str = ""  # a figure's value axis ("Triad (GB/s)"); '' = the section's own
    sustained: bool = False  # the rate over all repetitions (best x min time / average time), not the best one
    # A figure of it shows the best over these keys, not the mean: the parameters a study varies to find
    # the best (HPL's grid, N, variant), so a figure asked for by name draws it as the studies do.
    best_over: tuple[str, ...] = ()
    # One value per run, the one at the smallest or the largest value of a label (("bytes", "smallest"):
    # a ping-pong's latency is its 0-byte time); None: the run's best value.
    pick: tuple[str, str] | None = None

    def selects(self, labels: dict) -> bool:
        """Is a value with these labels drawn? (A value without the label is.)"""
        return all(labels.get(key, wanted) == wanted for key, wanted in self.where)


@dataclass(frozen=True)
class MetricSpec:
    """One metric a benchmark stores: its unit, better direction, identifying labels, report uses."""

    name: str
    unit: str
    higher_is_better: bool = True
    labels: tuple[str, ...] = ()  # the labels that tell its values within one run apart (test, bytes)
    uses: tuple[ReportUse, ...] = ()
    # What "does not apply" looks like when the benchmark prints it: values it writes instead of a
    # measurement (HPCC's -1 for a figure it did not run), and whether any negative value is one (a
    # latency, a bandwidth, a rate cannot be negative). Such values, and NaN or infinities, are absent
    # from every table and figure: never averaged, never a best.
    not_applicable: tuple[float, ...] = ()
    negative_not_applicable: bool = False

    def applies(self, value: float) -> bool:
        """Is this stored value a measurement (not a "does not apply" marker, nor NaN/inf)?"""
        return is_finite(value) and value not in self.not_applicable and not (
            self.negative_not_applicable and value < 0)

    def use(self, section: str, role: str | None = None) -> ReportUse | None:
        """Its use in this section (in this role), None if the section does not draw it."""
        return next((u for u in self.uses if u.section == section and role in (None, u.role)), None)

    def shown(self, use: ReportUse, unit: str | None = None) -> Callable[[float], float]:
        """The value as `use` shows it: converted to `unit`, else the use's unit, else left as it is."""
        return converter(self.unit, unit or use.unit or self.unit)


# The metric that is a benchmark's figure of merit: the one its history follows (report/history.py, one
# per benchmark). Declared on that metric with `merit(MetricSpec(...))`, so no report lists benchmarks.
FIGURE_OF_MERIT = ReportUse("history", "merit")


def merit(spec: MetricSpec) -> MetricSpec:
    """`spec`, declared as its benchmark's figure of merit (FIGURE_OF_MERIT among its uses)."""
    return dataclasses.replace(spec, uses=(*spec.uses, FIGURE_OF_MERIT))


def not_merit(spec: MetricSpec) -> MetricSpec:
    """`spec` without FIGURE_OF_MERIT: another benchmark's metric that this one stores too, but is not its
    figure of merit (HPCC stores HPL's Rmax lines; its figure of merit is its summary's HPL_Tflops)."""
    return dataclasses.replace(spec, uses=tuple(u for u in spec.uses if u != FIGURE_OF_MERIT))


# Units a report converts between: (quantity, size of the unit in the quantity's base unit).
UNITS: dict[str, tuple[str, float]] = {
    "B/s": ("bytes/s", 1.0), "KB/s": ("bytes/s", 1e3), "MB/s": ("bytes/s", 1e6), "GB/s": ("bytes/s", 1e9),
    "KiB/s": ("bytes/s", 2.0**10), "MiB/s": ("bytes/s", 2.0**20), "GiB/s": ("bytes/s", 2.0**30),
    "Mflop/s": ("flop/s", 1e6), "Gflop/s": ("flop/s", 1e9), "Tflop/s": ("flop/s", 1e12), "Pflop/s": ("flop/s", 1e15),
    "ns": ("s", 1e-9), "us": ("s", 1e-6), "ms": ("s", 1e-3), "s": ("s", 1.0),
}


def converter(unit: str, to: str) -> Callable[[float], float]:
    """value in `unit` -> value in `to` (MiB/s -> MB/s multiplies by 2^20/10^6; MB/s -> GB/s divides
    by 1000). The factor is applied in one multiplication or division, the way a hand-written
    conversion would, so a figure does not change by a rounding when its conversion became declared."""
    if unit == to:
        return lambda value: value
    try:
        (quantity, size), (target, target_size) = UNITS[unit], UNITS[to]
    except KeyError:
        raise ValueError(f"no conversion from {unit!r} to {to!r}") from None
    if quantity != target:
        raise ValueError(f"no conversion from {unit!r} ({quantity}) to {to!r} ({target})")
    if size >= target_size:
        factor = size / target_size
        return lambda value: value * factor
    divisor = target_size / size
    return lambda value: value / divisor


@dataclass(frozen=True)
class BuildOption:
    """An option of one `clusterbench build NAME` command beyond the common ones: the keyword its
    build function takes (`array_size` is `--array-size`), its type (a bool is a flag pair,
    `--openmp/--no-openmp`), its default, its help, and for a number its bounds."""

    name: str
    type: type
    default: object
    help: str
    minimum: int | None = None
    maximum: int | None = None


OPENMP_OPTION = BuildOption("openmp", bool, True, "MPI + OpenMP (default) or MPI only.")


@dataclass(frozen=True)
class BuildRecipe:
    """How `clusterbench build NAME` builds one official code and says what it built.

    The command takes --source, the `options`, --cflags, --mpi (when `mpi`), --force and --json,
    in that order, and calls `build(source, **options, cflags=..., force=..., log=..., mpi=...)`
    (no `mpi` when the code is built without MPI). It prints "<name> ready: <binary> (built now|
    cached; `summary(provenance)`)", then `then`; with --json, the provenance alone.
    """

    name: str  # the command: clusterbench build NAME
    title: str  # what the command says it is building
    help: str  # the command's help
    build: Callable[..., Built]
    default_cflags: str  # when --cflags is not given
    summary: Callable[[dict], str]  # the provenance of a build, in one line
    then: str = ""  # what uses the build now
    options: tuple[BuildOption, ...] = ()
    mpi: bool = True  # built with an MPI, chosen by --mpi
    source_help: str = "The official source tree or tarball."
    source_required: bool = True  # False: the build finds a source itself when none is given
    cflags_help: str = "Compiler flags (default: -O3 -march=native)."
