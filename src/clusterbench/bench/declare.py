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


@dataclass(frozen=True)
class TimeModel:
    """How long one run of a benchmark of size n takes: its one time model, declared by the benchmark
    (`time_model`) for every caller that plans, sizes or estimates its runs (`plan`, campaign estimates,
    `clusterbench run` and its cluster check), so that none keeps a model of its own:

        seconds(n) = startup_s + setup_coeff x n^2 + work(n) / rate

    The start-up is a constant per run (mpirun, initialisation, allocation); the setup grows with the
    data (generating and checking it, memory-bound); the solve is the benchmark's own operation count
    at the rate the run achieves (Gflop/s), `efficiency` x Rpeak when nothing measured says better.

    The model as declared is the solve alone (start-up and setup 0: sizing n for a solve time). Its two
    other uses are declared with it, rather than kept by their callers as models of their own:
    `planning()`, with a start-up margin on the safe side for any system and rank count (plans and
    estimates with nothing measured), and `measured()`, with the start-up and setup measured for the
    benchmark's program (fitting a tight budget, where a margin would waste it).
    """

    work: Callable[[float], float]  # floating-point operations of the solve at size n
    size_for_work: Callable[[float], float]  # an upper bound of n whose work is within this many operations
    efficiency: float  # rate / Rpeak assumed when nothing measured says better
    startup_s: float = 0.0
    setup_coeff: float = 0.0  # seconds per element of the n x n data
    planning_startup_s: float = 0.0  # the margin of `planning()`
    measured_startup_s: float = 0.0  # the terms of `measured()`
    measured_setup_coeff: float = 0.0
    use: str = "solve"  # which use of the model this is (solve, planning, measured): for messages

    def using(self, use: str, startup_s: float = 0.0, setup_coeff: float = 0.0) -> TimeModel:
        """The same model with other start-up and setup terms: one named use of it."""
        return dataclasses.replace(self, use=use, startup_s=startup_s, setup_coeff=setup_coeff)

    def planning(self) -> TimeModel:
        """The use for plans and estimates with nothing measured: the start-up margin, no setup term."""
        return self.using("planning", self.planning_startup_s)

    def measured(self) -> TimeModel:
        """The use for fitting a tight budget: the start-up and setup measured for the program."""
        return self.using("measured", self.measured_startup_s, self.measured_setup_coeff)

    def solve(self) -> TimeModel:
        """The use for sizing n for a solve time: start-up and setup 0."""
        return self.using("solve")

    def rate(self, rpeak_gflops: float, efficiency: float | None = None) -> float:
        """The rate (Gflop/s) assumed from a peak: `efficiency` (default the model's) x Rpeak."""
        return rpeak_gflops * (self.efficiency if efficiency is None else efficiency)

    def solve_seconds(self, n: float, gflops: float) -> float:
        """The solve alone at `gflops` Gflop/s (what the benchmark prints as its time)."""
        return self.work(n) / (gflops * 1e9)

    def seconds(self, n: float, gflops: float) -> float:
        """Wall time of one run of size n at `gflops` Gflop/s: start-up + setup + the solve."""
        return self.startup_s + self.setup_coeff * n * n + self.solve_seconds(n, gflops)

    def largest_n(self, seconds: float, gflops: float, step: int, n_max: int | None = None) -> int:
        """The largest multiple of `step` (at most n_max) whose run takes at most `seconds`; 0 when none does."""
        if step <= 0 or gflops <= 0:
            return 0
        # The solve alone bounds n; one step more against rounding.
        bound = int(self.size_for_work(max(seconds, 0.0) * gflops * 1e9)) + step
        if n_max is not None:
            bound = min(bound, n_max)
        n = max(bound, 0) // step * step
        while n > 0 and self.seconds(n, gflops) > seconds:
            n -= step
        return n


@dataclass(frozen=True)
class Sizing:
    """The sizes a benchmark's runs are given when the user gives none: block sizes, memory filled.

    Declared by the benchmark (`sizing`) for every command that runs, plans or tunes it, so that no
    command keeps a default of its own."""

    default_nb: int  # one run with nothing tuned or measured
    short_run_nb: int  # runs of a few seconds at a small size (the cluster check)
    plan_nb_range: str  # the block sizes a plan lists by default
    tune_nb_range: str  # the block sizes a tuner searches by default
    memory_fraction: float  # of memory the data fills by default


@dataclass(frozen=True)
class Derived:
    """A parameter value a campaign derives per point with `{name: {option: value, ...}}` (`n: {hpl_n:
    {fraction: 0.8}}`): declared by the benchmark that knows how (`derived`), found by name through the
    registry (`registry.derived(name)`), so that campaigns name no benchmark."""

    name: str  # the key of the mapping in a campaign: hpl_n
    options: frozenset[str]  # the options it takes
    inputs: frozenset[str]  # the point's values it reads: derived ones among them are computed first
    problem: Callable[[str, object], str | None]  # what is wrong with one option's value (None: nothing)
    compute: Callable[..., object]  # (options, point, system) -> the value
    schema: dict = dataclasses.field(default_factory=dict)  # JSON schema of its options (`clusterbench schema`)
    example: str = ""  # how a campaign writes it, for help texts: {hpl_n: {fraction: 0.8}}


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


# ---------------------------------------------------------------- tuning: what `clusterbench tune` asks of a benchmark


@dataclass
class TuningSpace:
    """A benchmark's tunable space as its `Tuning` builds it: one ordered value list per knob (the
    search treats neighbours in a list as similar), what the tuner searches (tune/search.py's Space).
    `joint`: knobs whose values only go in the listed combinations (HPL: a serial BLAS only with one
    thread per rank); `dropped`: what the space left out, and why, in words the tuner prints."""

    dims: dict[str, list]
    joint: dict[tuple[str, ...], list[tuple]] = dataclasses.field(default_factory=dict)
    dropped: list[str] = dataclasses.field(default_factory=list)

    @property
    def size(self) -> int:
        size = 1
        for values in self.dims.values():
            size *= len(values)
        return size


# A stored metric value as the model inputs read it: (run params, labels, value, unit, run id), of
# runs that count (tune/rates.py reads them from the store: bench never does).
StoredValue = tuple[dict, dict, float, str, str]


class Tuning:
    """What the budgeted tuner (`clusterbench tune`, src/clusterbench/tune/) needs to know of a benchmark.

    The tuner is generic: a search over discrete knobs (tune/search.py) at fidelity levels (small
    problems prune, large ones decide), each trial one stored run of `benchmark`, scored by its
    `merit` metric. Everything that depends on the benchmark is asked here: the space of knobs and
    its bounds, the fidelity knob and its levels, how a configuration becomes a run's parameter
    point, the model that predicts a trial's time (to keep the budget and order candidates), the
    input file written for the best configuration, and what a stored "best configuration" is.
    A benchmark declares it as its class attribute `tuning` (None: it cannot be tuned).

    `inputs` below are the model's measured inputs (a benchmark's own object, e.g. HPL's Rates):
    the tuner only passes them back, and keeps them as `inputs_dict` gives them so a resumed session
    decides with the inputs it began with.
    """

    benchmark: str = ""  # the benchmark whose runs the trials are
    merit: str = ""  # the metric a trial's value is the median of (higher is better)
    merit_unit: str = ""  # its unit
    fidelity: str = ""  # the parameter the levels vary (HPL's n): the knob that makes a trial cheap
    config_keys: tuple[str, ...] = ()  # the parameters a known best configuration sets (besides the fidelity)
    cost_keys: tuple[str, ...] = ()  # the knobs the time model depends on (the others do not change a trial's cost)
    startup_s: float = 0.0  # one run's harness cost assumed when none was measured (at most 3x that measured)
    best_input: tuple[str, str] = ("", "")  # (output key, file name) of the input file written for the best
    space_example: str = ""  # a --space KEY=VALUES example, for messages

    def space(self, system, nodes: int, user: dict, *, option: Callable[[str], str],
              fixed: dict | None = None) -> tuple[TuningSpace, dict]:
        """The space from the defaults and the user's dimensions (`option(key)` names where each was
        written, for messages), bounded and checked; and the fixed values. Raises UserInputError."""
        raise NotImplementedError

    def levels(self, space: TuningSpace, system, nodes: int, given: int | None, budget_s: float, inputs,
               levels: int, eta: int, option: Callable[[str], str], where: Callable[[str], str]) -> list:
        """The fidelity value of each level (cheapest first; fewer than `levels` when they merge), with
        `space.dims` narrowed in place to what fits the cheapest level (HPL: no NB above its N). `given`: the
        top level's value asked for (HPL's --n), else sized from `budget_s` by the model with `inputs`;
        `option(key)` and `where(option)` name where a refused value was written."""
        raise NotImplementedError

    def check_fidelity(self, value, system, nodes: int, option: str) -> None:
        """Refuse a fidelity value (the written input's) that could not run on `nodes` nodes."""

    def config_params(self, config: dict) -> dict:
        """The benchmark parameters of a configuration (a knob may set several, as HPL's grid)."""
        return dict(config)

    def model_inputs(self, stored: Callable[[str], list[StoredValue]], system, nodes: int, *,
                     interconnect: str | None = None) -> tuple[object, str]:
        """The model's inputs for this system, from its stored values of a metric (`stored(name)`), and
        one sentence saying where each came from."""
        raise NotImplementedError

    def inputs_dict(self, inputs) -> dict:
        return dataclasses.asdict(inputs)

    def inputs_from(self, kept: dict):
        """The inputs `inputs_dict` kept (raises TypeError or ValueError when they are not that)."""
        raise NotImplementedError

    def solve_s(self, point: dict, nodes: int, inputs, *, blas_threads: bool = False) -> float:
        """The model's time of one trial's work at a resolved point (no start-up). `blas_threads`: count
        only the threads its BLAS variant really uses."""
        raise NotImplementedError

    def predicted_merit(self, point: dict, seconds: float) -> float:
        """The merit a trial of `point` would score if its work took `seconds` (the search's prior)."""
        raise NotImplementedError

    def stored_solve_s(self, params: dict, inputs) -> float | None:
        """The model's time of the work of a stored run of the benchmark (None: its params say too little)."""
        return None

    def promotion_group(self, config: dict) -> str | None:
        """The group a configuration is promoted within (tune/search.py's _promote: the best 1/eta of each
        group goes on), when the fidelity reorders the groups (HPL: layouts); None: one group."""
        return None

    def render_input(self, point: dict) -> str:
        """The input file (`best_input`) that runs this one configuration."""
        raise NotImplementedError


class Later:
    """A class attribute imported when first read, from "module:NAME": how a Benchmark class points at a
    declaration that would cost imports (or make a cycle) at the class's own import (its `tuning`)."""

    def __init__(self, target: str):
        self.target = target

    def __get__(self, instance, owner):
        import importlib

        module, _, name = self.target.partition(":")
        return getattr(importlib.import_module(module), name)


def declared_later(target: str) -> Tuning | None:
    """`Later(target)`, typed as the declaration it stands for (a Benchmark's `tuning`: see Later)."""
    return Later(target)
