"""HPL's search space and fidelity levels, from the planner and the user, bounded before anything runs.

The dimensions are ordered value lists (the search treats neighbours in a list as similar):

- `nb`: the block size, the knob every HPL study finds first (default the HPL package's
  TUNE_NB_RANGE, 64..384:32, values above the smallest trial's N dropped);
- `grid`: "LAYOUT PxQ", the rank/thread layout and the process grid together, because a grid only
  exists for the rank count of its layout (P x Q = ranks). Layouts with the same ranks x threads as an
  earlier one are the same run under another name and are left out (on a one-socket node the two
  hybrids coincide);
- `blas`: the installed BLAS variants ('default' when the system has none to choose);
- HPL's algorithm knobs. By default only those the literature finds to matter after NB and P x Q
  (BCAST, DEPTH, PFACT); RFACT, NBMIN, NDIV, SWAP and its threshold keep HPL.dat's tuned defaults
  unless the user names them.

The user narrows, widens or fixes any of them with `--space KEY=VALUES` (a campaign block's `space:`
lists): `nb=64..256:32`, `bcast=1rm,2rm`, `depth=1`, `grid=mpi 1x2,hybrid-node 1x1` (or `mpi:1x2`, or a
layout alone for all its grids), `layout=mpi` (the grids of these layouts). Every value is checked
against the hpl benchmark's declared parameters; every count is bounded (MAX_VALUES per dimension,
MAX_SIZE points) before a list is built.

The fidelity levels are problem sizes: the top N (given, or sized so one trial takes about
max(5 s, budget / 60) by the model, capped by memory), and below it N / eta^((top - k) / 3): a
level-k trial costs about 1/eta of a level-(k+1) one, as successive halving wants.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from clusterbench.bench.hpl.benchmark import HPL_KNOB_PARAMS, Hpl
from clusterbench.bench.hpl.planner import DEFAULT_MEMORY_FRACTION, TUNE_NB_RANGE, check_problem, grids, matrix_bytes
from clusterbench.bench.layout import Layout, layouts
from clusterbench.bench.placement import DEFAULT_BLAS, LAYOUT_NAMES, blas_variants
from clusterbench.errors import UserInputError
from clusterbench.plan.ranges import is_range, parse_int_values
from clusterbench.system.discover import SystemInfo
from clusterbench.tune.search import Space

MAX_VALUES = 256  # values of one dimension
MAX_SIZE = 10**7  # points of the whole space
MAX_LEVELS = 6
MAX_N = 2_000_000  # beyond any cluster's memory today; refused before the memory check says more
N_FLOOR = 1000  # smallest trial N: below it start-up dominates and the ranking says little
N_MULTIPLE = 8
DEFAULT_KNOBS: dict[str, list] = {"bcast": ["1rg", "1rm", "2rg", "2rm", "lng", "lnm"], "depth": [0, 1, 2],
                                  "pfact": ["left", "crout", "right"]}
SPACE_KEYS = ("nb", "grid", "layout", "blas", *(p.name for p in HPL_KNOB_PARAMS))
_PARAMS = {p.name: p for p in Hpl.parameters}


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
    return sorted(blas_variants()) or [DEFAULT_BLAS]


@dataclass
class HplSpace:
    """The space to search, the fixed values every trial shares, and the fidelity levels' N."""

    space: Space
    fixed: dict
    ns: list[int]
    nodes: int

    def describe(self) -> list[tuple[str, str]]:
        return [(k, ", ".join(str(v) for v in vals)) for k, vals in self.space.dims.items()]


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
            known = ", ".join(lays) + (" (the others coincide with one of these here)"
                                       if name in LAYOUT_NAMES else "")
            raise UserInputError(f"{option}: no layout {name!r} on this system", hint=f"layouts: {known}")
        fitting = [lay for lay in candidates if lay.ranks == p * q and p >= 1 and q >= 1]
        if not fitting:
            ranks = ", ".join(f"{n}: {lay.ranks} ranks" for n, lay in lays.items())
            raise UserInputError(f"{option}: P x Q = {p}x{q} matches no layout's rank count", hint=ranks)
        out.append(Grid(fitting[0].name, p, q).text)
    return list(dict.fromkeys(out))


def build_space(system: SystemInfo, nodes: int, user: dict[str, object], *, option: Callable[[str], str],
                fixed: dict | None = None) -> tuple[Space, dict]:
    """The space from the defaults and the user's dimensions (`option(key)` names where each was written,
    for messages: '--space nb=...' or 'FILE: benchmarks[0].space.nb'). Returns it and the fixed values."""
    fixed = dict(fixed or {})
    lays = distinct_layouts(system, nodes)
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
        missing = [b for b in dims["blas"] if b not in installed]
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
    return Space(dims), fixed


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
    wanted = solve_n_for(max(5.0, budget_s / 60))
    if available:
        by_memory = int(math.sqrt(DEFAULT_MEMORY_FRACTION * available / 8))
        wanted = min(wanted, by_memory)
    return max(N_MULTIPLE, wanted // N_MULTIPLE * N_MULTIPLE)


def check_memory(n: int, available: int | None, option: str) -> None:
    """The planner's refusal of a matrix that would not fit, said about the option that asked for it."""
    try:
        check_problem(n, N_MULTIPLE, 1, 1, 1, available, require_multiple=False)
    except UserInputError as exc:
        raise UserInputError(f"{option} {n}: {exc.message}", hint=exc.hint) from None


def matrix_gib(n: int) -> float:
    return matrix_bytes(n) / 2**30
