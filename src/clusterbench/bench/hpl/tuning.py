"""HPL's tuning declaration (bench/declare.py's `Tuning`): what `clusterbench tune hpl` searches and how.

The tuner (src/clusterbench/tune/) is generic; this is everything in it that is HPL's.

**The space.** The dimensions are ordered value lists (the search treats neighbours in a list as similar):

- `nb`: the block size, the knob every HPL study finds first (default the planner's TUNE_NB_RANGE,
  64..384:32, values above the smallest trial's N dropped);
- `grid`: "LAYOUT PxQ", the rank/thread layout and the process grid together, because a grid only
  exists for the rank count of its layout (P x Q = ranks). Layouts with the same ranks x threads as an
  earlier one are the same run under another name and are left out of the default (on a one-socket
  node the two hybrids coincide); one the user names (`hybrid-node 1x1`) is taken as named;
- `blas`: the installed BLAS variants ('default' when the system has none to choose), paired with the
  grids (HplSpace.joint): a layout of more than one thread per rank only with a threaded variant;
- HPL's algorithm knobs. By default only those the literature finds to matter after NB and P x Q
  (BCAST, DEPTH, PFACT); RFACT, NBMIN, NDIV, SWAP and its threshold keep HPL.dat's tuned defaults
  unless the user names them.

The user narrows, widens or fixes any of them with `--space KEY=VALUES` (a campaign block's `space:`
lists): `nb=64..256:32`, `bcast=1rm,2rm`, `depth=1`, `grid=mpi 1x2,hybrid-node 1x1` (or `mpi:1x2`, or a
layout alone for all its grids), `layout=mpi` (the grids of these layouts). Every value is checked
against the hpl benchmark's declared parameters; every count is bounded (MAX_VALUES per dimension,
MAX_SIZE points) before a list is built.

**The fidelity** is the problem size N: the top N (given, or sized so one trial takes about
budget / 60, at least min(5 s, budget / 20), by the model, capped by memory), and below it N / eta^((top - k) / 3): a
level-k trial costs about 1/eta of a level-(k+1) one, as successive halving wants.

**The model** that predicts a trial's time (to keep the budget, and as the search's prior) is the
analytic one of model.py, fed with the rates measured on this system: DGEMM per core, latency and
bandwidth, calibrated to the stored HPL results (`model_inputs`, below; tune/rates.py reads the stored
values from the store and hands them here).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace

from clusterbench.bench.declare import StoredValue, Tuning, TuningSpace
from clusterbench.bench.hpl.benchmark import HPL_KNOB_PARAMS, HPL_KNOBS, Hpl, knob_input
from clusterbench.bench.hpl.input import HplInput, render_hpl_dat
from clusterbench.bench.hpl.model import Problem, Rates, predict
from clusterbench.bench.hpl.planner import (
    DEFAULT_MEMORY_FRACTION,
    DEFAULT_NB,
    TUNE_NB_RANGE,
    check_problem,
    grids,
    matrix_bytes,
)
from clusterbench.bench.hpl.timing import PLANNING_STARTUP_S, hpl_flops
from clusterbench.bench.layout import Layout, layouts
from clusterbench.bench.placement import DEFAULT_BLAS, LAYOUT_NAMES, blas_variants, remedy_variants, split_blas
from clusterbench.errors import UserInputError
from clusterbench.plan.ranges import is_range, parse_int_values
from clusterbench.system.discover import SystemInfo

MAX_VALUES = 256  # values of one dimension
MAX_SIZE = 10**7  # points of the whole space
MAX_N = 2_000_000  # beyond any cluster's memory today; refused before the memory check says more
N_FLOOR = 1000  # smallest trial N: below it start-up dominates and the ranking says little
N_MULTIPLE = 8
DEFAULT_KNOBS: dict[str, list] = {"bcast": ["1rg", "1rm", "2rg", "2rm", "lng", "lnm"], "depth": [0, 1, 2],
                                  "pfact": ["left", "crout", "right"]}
SPACE_KEYS = ("nb", "grid", "layout", "blas", *(p.name for p in HPL_KNOB_PARAMS))
_PARAMS = {p.name: p for p in Hpl.parameters}


# ---------------------------------------------------------------- the space


@dataclass(frozen=True)
class Grid:
    """One value of the grid dimension: a layout and a P x Q of its ranks."""

    layout: str
    p: int
    q: int

    @property
    def text(self) -> str:
        return f"{self.layout} {self.p}x{self.q}"

    @classmethod
    def parse(cls, text: str) -> Grid:
        layout, _, pq = text.replace(":", " ").strip().partition(" ")
        p, _, q = pq.strip().partition("x")
        return cls(layout, int(p), int(q))


HplSpace = TuningSpace  # HPL's space fills `joint` (grids x BLAS variants) and `dropped` (declare.py)


def every_layout(system: SystemInfo, nodes: int) -> dict[str, Layout]:
    """Every named layout of `nodes` nodes, those that coincide on this system included."""
    topo = system.topology
    sockets = max(topo.sockets, 1)
    return layouts(nodes, sockets, max(topo.cores_total // sockets, 1))


def distinct_layouts(system: SystemInfo, nodes: int) -> dict[str, Layout]:
    """The named layouts of `nodes` nodes, the first of each ranks x threads only."""
    topo = system.topology
    sockets = max(topo.sockets, 1)
    out: dict[str, Layout] = {}
    seen: set[tuple[int, int]] = set()
    for name, lay in layouts(nodes, sockets, max(topo.cores_total // sockets, 1)).items():
        if (lay.ranks, lay.threads_per_rank) not in seen:
            seen.add((lay.ranks, lay.threads_per_rank))
            out[name] = lay
    return out


def layout_grids(lay: Layout) -> list[str]:
    """Every P x Q of the layout's ranks: the planner's (P <= Q, best first), then their transposes."""
    found = grids(lay.ranks)
    pairs = found + [(q, p) for p, q in found if p != q]
    return [Grid(lay.name, p, q).text for p, q in pairs]


def default_blas(system: SystemInfo) -> list[str]:
    """Every installed variant, and NAME@CORE for each whose OpenBLAS runs generic kernels here (the remedy,
    tried as a variant: placement.remedy_variants)."""
    installed = sorted(blas_variants())
    return installed + remedy_variants(installed) if installed else [DEFAULT_BLAS]


SERIAL_WORDS = ("serial", "seq", "sequential")
THREADED_WORDS = ("openmp", "pthread", "thread", "omp", "tbb")


def blas_threaded(blas: str, system: SystemInfo) -> bool | None:
    """Whether a BLAS variant runs a rank's threads (True), one thread only (False), or cannot tell (None):
    by its name (openblas-serial, blis-openmp, openblas-pthread); 'default' is the system's alternative,
    when discovery named it."""
    name = str(blas).lower()
    if name == DEFAULT_BLAS:
        variant = system.software.blas.variant if system.software and system.software.blas else None
        return blas_threaded(variant, system) if variant and variant != DEFAULT_BLAS else None
    if any(word in name for word in SERIAL_WORDS):
        return False
    if any(word in name for word in THREADED_WORDS):
        return True
    return None


def pair_threads(dims: dict[str, list], lays: dict[str, Layout], system: SystemInfo) -> tuple[dict, list[str]]:
    """The grid x BLAS combinations that use every core: a layout with more than one thread per rank only
    with a threaded BLAS (a serial one leaves all but one core of each rank idle); a threaded BLAS with one
    thread per rank is kept (it runs one thread). A BLAS whose threading cannot be told is kept, and said.
    Returns the joint combinations ({} when nothing is dropped) and the sentences saying what was dropped."""
    grids_, blases = dims.get("grid"), dims.get("blas")
    if not grids_ or not blases:
        return {}, []
    others = math.prod(len(v) for k, v in dims.items() if k not in ("grid", "blas"))
    pairs, dropped, unknown = [], [], set()
    for g in grids_:
        lay = lays.get(Grid.parse(g).layout)
        for b in blases:
            threaded = blas_threaded(b, system)
            if lay is not None and lay.threads_per_rank > 1 and threaded is False:
                dropped.append((g, b))
                continue
            if lay is not None and lay.threads_per_rank > 1 and threaded is None:
                unknown.add(b)
            pairs.append((b, g))
    notes = []
    if dropped:
        gs = sorted({g for g, _ in dropped})
        bs = sorted({b for _, b in dropped})
        notes.append(f"{len(dropped) * others:,} points dropped: a serial BLAS ({', '.join(bs)}) with a layout of "
                     f"more than one thread per rank ({', '.join(gs)}) leaves all but one core of each rank idle")
    if unknown:
        notes.append(f"kept with threaded layouts, threading unknown: {', '.join(sorted(unknown))}")
    return ({("blas", "grid"): pairs} if dropped else {}), notes


def _values(option: str, key: str, raw) -> list:
    """One dimension's values as written (a list, a range, a comma list, or one value), bounded and checked."""
    if key not in SPACE_KEYS:
        raise UserInputError(f"{option}: hpl has no tunable {key!r}", hint="tunable: " + ", ".join(SPACE_KEYS))
    if isinstance(raw, list):
        items = raw
    elif key in ("grid", "layout", "blas") or not is_range(raw):
        items = [v.strip() for v in str(raw).split(",") if v.strip()] if isinstance(raw, str) else [raw]
    else:
        try:
            items = parse_int_values(raw, key)
        except UserInputError as exc:
            raise UserInputError(f"{option}: {exc.message}", hint=exc.hint) from None
    if not items:
        raise UserInputError(f"{option}: no values", hint=f"e.g. {key}={'1rm,2rm' if key == 'bcast' else '64..256:32'}")
    if len(items) > MAX_VALUES:
        raise UserInputError(f"{option}: {len(items)} values, more than {MAX_VALUES} in one dimension",
                             hint="narrow it, e.g. a range with a larger step")
    if key in ("grid", "layout"):
        return [str(v) for v in items]
    param = _PARAMS[key]
    out = []
    for v in items:
        if param.kind is int and isinstance(v, str) and v.lstrip("-").isdigit():
            v = int(v)
        try:
            out.append(param.check(v))
        except UserInputError as exc:
            raise UserInputError(f"{option}: {exc.message}", hint=param.help) from None
    return list(dict.fromkeys(out))


def _grid_values(option: str, items: list[str], lays: dict[str, Layout]) -> list[str]:
    """'mpi 1x2' / 'mpi:1x2' / 'mpi' (all its grids) / '1x2' (the layout with that many ranks), checked."""
    out: list[str] = []
    for item in items:
        text = item.replace(":", " ").strip()
        if text in lays:
            out += layout_grids(lays[text])
            continue
        name, _, pq = text.rpartition(" ") if " " in text else ("", "", text)
        name = name.strip()
        try:
            p, q = (int(x) for x in pq.split("x"))
        except ValueError:
            raise UserInputError(f"{option}: {item!r} is not a grid",
                                 hint="write LAYOUT PxQ (or LAYOUT:PxQ), e.g. 'mpi 1x2'; layouts here: "
                                      + ", ".join(lays)) from None
        candidates = [lays[name]] if name in lays else [lay for lay in lays.values() if lay.ranks == p * q] \
            if not name else []
        if name and name not in lays:
            raise UserInputError(f"{option}: no layout {name!r} on this system",
                                 hint=f"layouts: {', '.join(lays)}")
        fitting = [lay for lay in candidates if lay.ranks == p * q and p >= 1 and q >= 1]
        if not fitting:
            ranks = ", ".join(f"{n}: {lay.ranks} ranks" for n, lay in lays.items())
            raise UserInputError(f"{option}: P x Q = {p}x{q} matches no layout's rank count", hint=ranks)
        out.append(Grid(fitting[0].name, p, q).text)
    return list(dict.fromkeys(out))


def _named_layouts(system: SystemInfo, nodes: int, user: dict[str, object], fixed: dict) -> dict[str, Layout]:
    """The distinct layouts, plus any the user names that coincides with one of them here (a grid or a
    layout written `hybrid-node` on a one-socket node runs as `bench hpl -p layout=hybrid-node` does)."""
    lays = distinct_layouts(system, nodes)
    every = every_layout(system, nodes)
    written = " ".join(str(v) for key in ("grid", "layout") for v in
                       (user.get(key) if isinstance(user.get(key), list) else [user.get(key) or ""]))
    for name in LAYOUT_NAMES:
        if name not in lays and name in every and (name in written.replace(":", " ").replace(",", " ").split()
                                                   or fixed.get("layout") == name):
            lays[name] = every[name]
    return lays


def build_space(system: SystemInfo, nodes: int, user: dict[str, object], *, option: Callable[[str], str],
                fixed: dict | None = None) -> tuple[TuningSpace, dict]:
    """The space from the defaults and the user's dimensions (`option(key)` names where each was written,
    for messages: '--space nb=...' or 'FILE: benchmarks[0].space.nb'). Returns it and the fixed values.

    Grids and BLAS variants are paired (pair_threads): a serial BLAS never runs a layout of several threads
    per rank; the space says how many points that dropped."""
    fixed = dict(fixed or {})
    lays = _named_layouts(system, nodes, user, fixed)
    values = {key: _values(option(key), key, raw) for key, raw in user.items()}
    for key in fixed:
        if key in values:
            raise UserInputError(f"{option(key)}: {key!r} is both fixed (params) and searched (space)")
    dims: dict[str, list] = {}
    dims["nb"] = values.get("nb") or parse_int_values(TUNE_NB_RANGE, "nb")
    if "layout" in values:
        unknown = [v for v in values["layout"] if v not in lays]
        if unknown:
            raise UserInputError(f"{option('layout')}: no layout {unknown[0]!r} on this system",
                                 hint="layouts: " + ", ".join(lays))
    chosen = {n: lays[n] for n in values.get("layout", lays)}
    if "layout" in fixed:
        chosen = {n: lay for n, lay in lays.items() if n == fixed["layout"]} or \
            {n: lay for n, lay in layouts(nodes, max(system.topology.sockets, 1),
                                          max(system.topology.cores_per_socket, 1)).items() if n == fixed["layout"]}
    if "grid" in values:
        dims["grid"] = _grid_values(option("grid"), values["grid"], lays)
        if "layout" in values:
            dims["grid"] = [g for g in dims["grid"] if Grid.parse(g).layout in chosen]
            if not dims["grid"]:
                raise UserInputError(f"{option('grid')}: no grid of the layouts {', '.join(chosen)}")
    elif not {"p", "q"} & set(fixed):
        dims["grid"] = [g for lay in chosen.values() for g in layout_grids(lay)]
    if "blas" not in fixed:
        dims["blas"] = values.get("blas") or default_blas(system)
        installed = set(blas_variants()) | {DEFAULT_BLAS}
        missing = [b for b in dims["blas"] if split_blas(b)[0] not in installed]
        if missing:
            raise UserInputError(f"{option('blas')}: BLAS variant {missing[0]!r} is not installed here",
                                 hint="installed: " + ", ".join(sorted(installed)))
    for key, default in DEFAULT_KNOBS.items():
        if key not in fixed:
            dims[key] = values.get(key) or list(default)
    for key, vals in values.items():
        if key not in dims and key != "layout":
            dims[key] = vals
    size = math.prod(len(v) for v in dims.values())
    if size > MAX_SIZE:
        detail = " x ".join(f"{k} {len(v)}" for k, v in dims.items())
        raise UserInputError(f"{option('space')}: the space has {size:,} points ({detail}), more than {MAX_SIZE:,}",
                             hint="narrow a dimension or fix one (e.g. --space depth=1)")
    dropped = _drop_serial_with_threads(dims, fixed, lays, system, option)
    joint, notes = pair_threads(dims, lays, system)
    if joint and not joint[("blas", "grid")]:
        raise UserInputError(f"{option('blas')}: no BLAS variant given can run the grids' threads",
                             hint="add a threaded variant (openblas-pthread, blis-openmp) or an mpi grid")
    return HplSpace(dims, joint, dropped + notes), fixed


def _drop_serial_with_threads(dims: dict[str, list], fixed: dict, lays: dict[str, Layout], system: SystemInfo,
                              option: Callable[[str], str]) -> list[str]:
    """With a fixed serial BLAS (a campaign's params: blas), the grids of threaded layouts are dropped."""
    if "blas" not in fixed or blas_threaded(str(fixed["blas"]), system) is not False or "grid" not in dims:
        return []
    kept = [g for g in dims["grid"] if (lay := lays.get(Grid.parse(g).layout)) is None or lay.threads_per_rank == 1]
    gone = [g for g in dims["grid"] if g not in kept]
    if not gone:
        return []
    if not kept:
        raise UserInputError(f"{option('grid')}: the fixed BLAS {fixed['blas']} is serial and every grid has threads",
                             hint="fix a threaded BLAS (blis-openmp, openblas-pthread) or search mpi grids")
    dims["grid"] = kept
    return [f"grids dropped: {', '.join(gone)} (the fixed BLAS {fixed['blas']} is serial: one core per rank)"]


# ---------------------------------------------------------------- the fidelity levels


def level_ns(n_top: int, levels: int, eta: int, floor: int = N_FLOOR) -> list[int]:
    """N_k = N_top / eta^((top - k) / 3), a multiple of 8, at least `floor` (or N_top if smaller);
    equal neighbours merged, so fewer levels come back when N_top is small."""
    out: list[int] = []
    for k in range(levels):
        n = n_top / eta ** ((levels - 1 - k) / 3)
        n = max(min(floor, n_top), int(round(n / N_MULTIPLE)) * N_MULTIPLE)
        n = min(n, n_top) if k < levels - 1 else n_top
        if not out or n > out[-1]:
            out.append(n)
    return out


def memory_limit(system: SystemInfo, nodes: int) -> int | None:
    memory = system.memory_bytes()
    return memory * nodes if memory else None


def top_n(system: SystemInfo, nodes: int, n: int | None, budget_s: float,
          solve_n_for: Callable[[float], int], option: str = "--n") -> int:
    """The top level's N: given (checked against memory), or the N whose solve takes about
    max(5 s, budget / 60) (the model, through `solve_n_for(seconds)`), capped by 0.8 of memory."""
    available = memory_limit(system, nodes)
    if n is not None:
        if n < 1 or n > MAX_N:
            raise UserInputError(f"{option} {n}: N must be between 1 and {MAX_N:,}")
        check_memory(n, available, option)
        return n
    wanted = solve_n_for(top_solve_s(budget_s))
    if available:
        by_memory = int(math.sqrt(DEFAULT_MEMORY_FRACTION * available / 8))
        wanted = min(wanted, by_memory)
    return max(N_MULTIPLE, wanted // N_MULTIPLE * N_MULTIPLE)


def top_solve_s(budget_s: float) -> float:
    """The top level's solve time a budget sizes N for: budget / 60, at least 5 s, but at most budget / 20 (a
    30 s budget gets 1.5 s trials: its smallest bracket, 3 + 1 + 3 trials, must fit in it)."""
    return max(min(5.0, budget_s / 20), budget_s / 60)


def check_memory(n: int, available: int | None, option: str) -> None:
    """The planner's refusal of a matrix that would not fit, said about the option that asked for it."""
    try:
        check_problem(n, N_MULTIPLE, 1, 1, 1, available, require_multiple=False)
    except UserInputError as exc:
        raise UserInputError(f"{option} {n}: {exc.message}", hint=exc.hint) from None


def matrix_gib(n: int) -> float:
    return matrix_bytes(n) / 2**30


# ---------------------------------------------------------------- the model's inputs, from stored values

TYPICAL_DGEMM_EFFICIENCY = 0.85  # a tuned BLAS's DGEMM, of the core's Rpeak
UNKNOWN_CORE_GFLOPS = 10.0  # neither a DGEMM run nor an Rpeak: a modest core of the 2020s
# Calibration when no HPL run of the system is stored: what the model, fed with measured DGEMM and
# ping-pong, still missed on the machine of docs/hpl-model.md: none (fitted 0.9 to 1.15 there).
UNCALIBRATED_EFFICIENCY = 1.0
# Typical (latency s, bandwidth bytes/s) of a link between two ranks when none was measured.
TYPICAL_LINKS = {
    "shm": (0.5e-6, 5e9),  # shared memory inside a node
    "infiniband": (2e-6, 10e9),  # HDR/EDR-class verbs
    "ethernet": (30e-6, 1.1e9),  # TCP over 10 Gbit/s
}
_UNIT_BYTES = {"MB/s": 1e6, "MiB/s": 2.0**20, "GB/s": 1e9, "GiB/s": 2.0**30, "B/s": 1.0}
MAX_POINTS = 400  # newest stored HPL results the fit reads
MIN_SECONDS = 0.02  # shorter solves are mostly timer and start-up noise
NB_HALF_GRID = (0.0, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0, 96.0)  # beyond: no BLAS is that poor
PANEL_GRID = (0.03, 0.05, 0.08, 0.12, 0.18, 0.25, 0.35, 0.5, 0.7, 1.0)
THREAD_LOSS_GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
SWAP_GRID = (0.0, 1e-9, 2e-9, 4e-9, 7e-9, 1e-8, 1.5e-8, 2e-8, 3e-8, 5e-8, 8e-8)
FIT_PASSES = 4
EFFICIENCY_BOUNDS = (0.05, 1.5)

Stored = Callable[[str], list[StoredValue]]  # a metric's name -> its stored values that count


@dataclass(frozen=True)
class HplPoint:
    """One stored HPL result as the fit sees it: the problem and its measured solve time."""

    problem: Problem
    seconds: float
    run_id: str = ""


@dataclass(frozen=True)
class Link:
    latency_s: float
    bandwidth_bytes_s: float
    source: str


@dataclass(frozen=True)
class Fit:
    rates: Rates
    points: int
    rms_log_error: float  # of the fitted model on its own points
    fitted: tuple[str, ...]  # the names of the values fitted


def model_rates(stored: Stored, system: SystemInfo, nodes: int = 1, *,
                interconnect: str | None = None) -> tuple[Rates, str]:
    """The rates and a sentence saying where each came from (stored DGEMM/ping-pong/HPL runs, or Rpeak).

    `interconnect` (shm, infiniband, ethernet) names the typical link assumed across nodes when no
    multi-node ping-pong is stored (default: ethernet, the cautious guess)."""
    core, dgemm_n, core_source = core_rate(stored, system)
    local = link(stored, across=False, interconnect=interconnect)
    across = link(stored, across=True, interconnect=interconnect)
    chosen = across if nodes > 1 else local
    base = Rates(core_gflops=core, latency_s=chosen.latency_s, bandwidth_bytes_s=chosen.bandwidth_bytes_s)
    points = hpl_points(stored)
    parts = [core_source, f"{'across nodes' if nodes > 1 else 'within a node'}: {chosen.source}"]
    if points:
        fit = fit_rates(points, base, dgemm_n, local, across)
        rates = replace(fit.rates, latency_s=chosen.latency_s, bandwidth_bytes_s=chosen.bandwidth_bytes_s)
        rms = 100 * (math.exp(fit.rms_log_error) - 1)
        parts.append(f"{', '.join(_fitted_text(name, getattr(rates, name)) for name in fit.fitted)} fitted to "
                     f"{fit.points} stored HPL result(s) (their rms error {rms:.0f}%)")
    else:
        rates = replace(base, core_gflops=corrected(core, dgemm_n, base.nb_half), efficiency=UNCALIBRATED_EFFICIENCY)
        parts.append(f"no stored HPL run of this system: efficiency {UNCALIBRATED_EFFICIENCY} assumed (uncalibrated)")
    return rates, "; ".join(parts)


def _fitted_text(name: str, value: float) -> str:
    """A fitted value as the rates' sentence says it. `efficiency` is no efficiency of a bound: it is the
    calibration that divides the model's time (measured runs this much faster than the terms predict, from
    rates that are assumed or low), so it is written as a factor; at its bound, the fit says so."""
    if name != "efficiency":
        return f"{name} {value:.3g}"
    bound = " (at its bound: the model's rates are far off)" if not \
        EFFICIENCY_BOUNDS[0] * 1.001 < value < EFFICIENCY_BOUNDS[1] * 0.999 else ""
    return f"calibration x{value:.3g} of the model's speed{bound}"


def _int(value, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def core_rate(stored: Stored, system: SystemInfo) -> tuple[float, int | None, str]:
    """DGEMM Gflop/s of one core with the node loaded, the N it was measured at, and where it came from.

    From the built-in `dgemm` kernel (per-rank average / threads) or HPCC's StarDGEMM (per process /
    threads), of the runs that loaded the most cores of a node at once (HPL keeps every core busy, and
    a lone DGEMM runs faster than one among others)."""
    found: list[tuple[int, float, int | None, str]] = []  # (cores busy per node, per core, N, benchmark)
    for params, labels, value, _unit, _run in stored("dgemm_gflops_per_rank"):
        if labels.get("stat") == "avg":
            threads, ranks, nodes = _int(params.get("threads"), 1), _int(params.get("ranks"), 1), \
                _int(params.get("nodes"), 1)
            found.append((max(1, ranks // max(nodes, 1)) * threads, value / threads,
                          _int(labels.get("n"), 0) or None, "dgemm"))
    for params, _labels, value, _unit, _run in stored("StarDGEMM_Gflops"):
        threads, ranks = _int(params.get("threads"), 1), _int(params.get("ranks"), 1)
        nodes = _int(params.get("nodes"), 1)
        found.append((max(1, ranks // max(nodes, 1)) * threads, value / threads, None, "HPCC StarDGEMM"))
    if found:
        busy = max(f[0] for f in found)
        chosen = [f for f in found if f[0] == busy]
        value = statistics.median(f[1] for f in chosen)
        sizes = [f[2] for f in chosen if f[2]]
        n = int(statistics.median(sizes)) if sizes else None
        kinds = " and ".join(sorted({f[3] for f in chosen}))
        return value, n, (f"DGEMM {value:.3g} Gflop/s per core from {len(chosen)} stored {kinds} run(s) "
                          f"with {busy} core(s) busy")
    rpeak, cores = system.rpeak_node_gflops, system.topology.cores_total
    if rpeak and cores:
        value = rpeak / cores * TYPICAL_DGEMM_EFFICIENCY
        return value, None, (f"DGEMM {value:.3g} Gflop/s per core assumed: Rpeak {rpeak / cores:.3g} per core x "
                             f"{TYPICAL_DGEMM_EFFICIENCY} (no stored dgemm or HPCC run; `clusterbench bench dgemm` "
                             "measures it)")
    return UNKNOWN_CORE_GFLOPS, None, (f"DGEMM {UNKNOWN_CORE_GFLOPS:g} Gflop/s per core assumed (neither a stored "
                                       "dgemm run nor an Rpeak)")


def corrected(measured: float, n: int | None, nb_half: float) -> float:
    """The rate at a large NB from one measured at inner dimension n (the saturating curve)."""
    return measured * (n + nb_half) / n if n else measured


def _across(params: dict) -> bool:
    return _int(params.get("nodes"), 1) > 1


def link(stored: Stored, across: bool, interconnect: str | None = None) -> Link:
    """Median latency and bandwidth of the stored ping-pongs (the `pingpong` kernel, IMB or OSU, HPCC's
    ping-pong) within a node (across=False) or across nodes: HPL on K nodes talks over the network."""
    def wanted(params: dict) -> bool:
        # within a node, HPL talks through shared memory: a ping-pong forced onto TCP is not that link
        return _across(params) if across else not _across(params) and params.get("interconnect") != "tcp"

    lat = [v * 1e-6 for p, _l, v, _u, _r in stored("latency_us") if wanted(p)]
    lat += [v * 1e-6 for p, _l, v, _u, _r in stored("MinPingPongLatency_usec") if wanted(p)]
    bw = [v * _UNIT_BYTES[u] for p, _l, v, u, _r in stored("peak_bandwidth")
          if wanted(p) and u in _UNIT_BYTES]
    bw += [v * 1e9 for p, _l, v, _u, _r in stored("MaxPingPongBandwidth_GBytes") if wanted(p)]
    kind = "shm" if not across else (interconnect if interconnect in TYPICAL_LINKS else "ethernet")
    typical_lat, typical_bw = TYPICAL_LINKS[kind]
    what = {"shm": "shared memory", "infiniband": "InfiniBand", "ethernet": "Ethernet (TCP)"}[kind]
    if lat and bw:
        return Link(statistics.median(lat), statistics.median(bw),
                    f"latency {statistics.median(lat) * 1e6:.3g} us and bandwidth {statistics.median(bw) / 1e9:.3g} "
                    f"GB/s from {len(lat)} stored ping-pong result(s)")
    latency = statistics.median(lat) if lat else typical_lat
    bandwidth = statistics.median(bw) if bw else typical_bw
    return Link(latency, bandwidth, f"latency {latency * 1e6:.3g} us ({'stored' if lat else 'typical ' + what}) and "
                f"bandwidth {bandwidth / 1e9:.3g} GB/s ({'stored' if bw else 'typical ' + what})")


def hpl_points(stored: Stored) -> list[HplPoint]:
    """The stored valid HPL results (standalone HPL and HPCC's HPL), newest last.
    The time is recomputed from the printed Gflop/s, which carry more digits than HPL's Time."""
    out = []
    for params, labels, gflops, _unit, run_id in stored("hpl_gflops"):
        try:
            n, nb, p, q = (int(labels[k]) for k in ("n", "nb", "p", "q"))
        except (KeyError, TypeError, ValueError):
            continue
        if min(n, nb, p, q) <= 0:
            continue
        seconds = hpl_flops(n) / (gflops * 1e9)
        if seconds < MIN_SECONDS:
            continue
        problem = Problem(n, nb, p, q, max(1, _int(params.get("nodes"), 1)), max(1, _int(params.get("threads"), 1)),
                          max(0, _int(params.get("depth"), 1)))
        out.append(HplPoint(problem, seconds, run_id))
    return out[-MAX_POINTS:]


def fit_rates(points: list[HplPoint], base: Rates, dgemm_n: int | None, local: Link, across: Link) -> Fit:
    """Least squares on log time, the best efficiency in closed form for each trial, the other values
    by coordinate descent over bounded grids; each is fitted only when the points vary what it
    explains (NB for nb_half and panel_ratio, N or Q for swap_s, threads for thread_loss). Every
    fitted value stays in a bounded range, so a few noisy runs cannot make the model absurd."""
    nbs = {pt.problem.nb for pt in points}
    fitted: dict[str, tuple[float, ...]] = {}
    if len(nbs) >= 2:
        fitted["nb_half"] = NB_HALF_GRID
    if len({pt.problem.n for pt in points}) >= 2 or len({pt.problem.q for pt in points}) >= 2:
        fitted["swap_s"] = SWAP_GRID
    if len(nbs) >= 3:
        fitted["panel_ratio"] = PANEL_GRID
    if len({pt.problem.threads_per_rank > 1 for pt in points}) == 2:
        fitted["thread_loss"] = THREAD_LOSS_GRID
    logs = [math.log(pt.seconds) for pt in points]

    def score(values: dict[str, float]) -> tuple[float, Rates]:
        trial = replace(base, **values, efficiency=1.0)
        trial = replace(trial, core_gflops=corrected(base.core_gflops, dgemm_n, trial.nb_half))
        raw = [math.log(predict(pt.problem, _with_link(trial, across if pt.problem.nodes > 1 else local)).seconds)
               for pt in points]
        log_eff = statistics.fmean(r - m for r, m in zip(raw, logs, strict=True))
        log_eff = min(max(log_eff, math.log(EFFICIENCY_BOUNDS[0])), math.log(EFFICIENCY_BOUNDS[1]))
        sse = sum((r - log_eff - m) ** 2 for r, m in zip(raw, logs, strict=True))
        return sse, replace(trial, efficiency=math.exp(log_eff))

    values = {name: getattr(base, name) for name in fitted}
    best = score(values)
    for _ in range(FIT_PASSES):
        before = dict(values)
        for name, grid in fitted.items():
            for candidate in grid:
                trial = values | {name: candidate}
                result = score(trial)
                if result[0] < best[0] - 1e-12:
                    best, values = result, trial
        if values == before:
            break
    return Fit(best[1], len(points), math.sqrt(best[0] / len(points)), ("efficiency", *fitted))


def _with_link(rates: Rates, chosen: Link) -> Rates:
    return replace(rates, latency_s=chosen.latency_s, bandwidth_bytes_s=chosen.bandwidth_bytes_s)


# ---------------------------------------------------------------- the declaration


def hpl_dat(point: dict) -> str:
    """HPL.dat for one configuration (one N, NB, grid and its knobs)."""
    inp = HplInput(ns=[point["n"]], nbs=[point["nb"]], grids=[(point["p"], point["q"])],
                   threshold=point.get("threshold", 16.0), **knob_input(point))
    return render_hpl_dat(inp)


class HplTuning(Tuning):
    """`clusterbench tune hpl`: NB, grid and layout, BLAS and the algorithm knobs, at problem sizes N."""

    benchmark = "hpl"
    merit = "hpl_gflops"
    merit_unit = "Gflop/s"
    fidelity = "n"
    config_keys = ("nb", "p", "q", "layout", "blas", *HPL_KNOBS)
    cost_keys = ("nb", "grid", "blas")  # the model's cost depends on these; the knobs do not change it
    startup_s = PLANNING_STARTUP_S
    best_input = ("hpl_dat", "HPL.dat")
    space_example = f"nb={TUNE_NB_RANGE}"
    # the model's fallbacks, for who checks them (tune/rates.py re-exports them)
    typical_dgemm_efficiency = TYPICAL_DGEMM_EFFICIENCY
    typical_links = TYPICAL_LINKS
    uncalibrated_efficiency = UNCALIBRATED_EFFICIENCY
    efficiency_bounds = EFFICIENCY_BOUNDS

    def space(self, system, nodes, user, *, option, fixed=None):
        return build_space(system, nodes, user, option=option, fixed=fixed)

    def levels(self, space, system, nodes, given, budget_s, inputs, levels, eta, option, where):
        """N per level (the top given, or sized from the budget by the model at the default NB on every
        core); NBs larger than the smallest level's N dropped from the space."""
        threads = max(system.topology.cores_total, 1)

        def solve_n_for(seconds: float) -> int:
            lo, hi = 8, 1_000_000
            while hi - lo > 8:
                mid = (lo + hi) // 2
                if predict(Problem(mid, DEFAULT_NB, 1, 1, nodes, threads * nodes), inputs).seconds < seconds:
                    lo = mid
                else:
                    hi = mid
            return lo

        ns = level_ns(top_n(system, nodes, given, budget_s, solve_n_for, where("--n")), levels, eta)
        if "nb" in space.dims:
            nbs = [nb for nb in space.dims["nb"] if nb <= ns[0]]
            if not nbs:
                raise UserInputError(f"{option('nb')}: every NB is larger than the smallest trial's N={ns[0]}",
                                     hint="give smaller NBs or a larger --n")
            space.dims["nb"] = nbs
        return ns

    def check_fidelity(self, value, system, nodes, option):
        check_memory(value, memory_limit(system, nodes), option)

    def promotion_group(self, config: dict) -> str | None:
        """A configuration's layout: the search promotes the best 1/eta of each layout from a small N to the
        next and each layout's best to the finals (tune/search.py's _promote), because N reorders the
        layouts: on the 2-core development VM two single-thread ranks win at N=3000 and one rank of two
        threads at N=8000."""
        grid = config.get("grid")
        return Grid.parse(grid).layout if grid else None

    def config_params(self, config):
        """The grid value split into layout, p and q."""
        out = {}
        for key, value in config.items():
            if key == "grid":
                g = Grid.parse(value)
                out.update(layout=g.layout, p=g.p, q=g.q)
            else:
                out[key] = value
        return out

    def model_inputs(self, stored, system, nodes, *, interconnect=None):
        return model_rates(stored, system, nodes, interconnect=interconnect)

    def inputs_from(self, kept):
        return Rates(**kept)

    def solve_s(self, point, nodes, inputs, *, blas_threads=False):
        threads = point.get("threads") or 1
        if blas_threads and "serial" in str(point.get("blas")):
            threads = 1  # a serial BLAS under a threaded rank runs on one core
        problem = Problem(point["n"], point["nb"], point["p"], point["q"], nodes, threads)
        return predict(problem, inputs).seconds

    def predicted_merit(self, point, seconds):
        return hpl_flops(point["n"]) / seconds / 1e9

    def stored_solve_s(self, params, inputs):
        """The solve of a stored hpl run (every one of its `samples`)."""
        try:
            return predict(Problem(int(params["n"]), int(params["nb"]), int(params["p"]), int(params["q"]),
                                   int(params.get("nodes") or 1), int(params.get("threads") or 1)),
                           inputs).seconds * int(params.get("samples") or 1)
        except (KeyError, TypeError, ValueError):
            return None

    def render_input(self, point):
        return hpl_dat(point)

    def points(self, stored: Stored) -> list[HplPoint]:
        """The stored HPL results the model is calibrated to (what tune/rates.py's hpl_points answers)."""
        return hpl_points(stored)


TUNING = HplTuning()
