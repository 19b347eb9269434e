"""The HPL calculator: problem size N, block size NB, process grids P x Q, rank layouts.

The memory rule is applied to the *element count*: the matrix holds N^2 doubles of 8 bytes,
so filling a fraction f of memory M gives N = sqrt(f * M / 8). Applying f to sqrt(M/8)
instead (as some published scripts did) fills only f^2 of memory: 64% for f = 0.8.
N is then rounded down to a multiple of NB so that every block is full.

Here too are the two users of these rules: `plan_hpl`, the table behind `clusterbench plan hpl`,
and `hpl_n`, a campaign's derived `n: {hpl_n: {...}}`; both size N the same way, from memory
or from a solve time at an assumed efficiency (timing.py, HPL's one time model). HPL's default
block sizes are declared here too, for every command that runs, plans or tunes HPL.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from clusterbench.bench.declare import Derived, Sizing
from clusterbench.bench.hpl.input import HplInput, render_hpccinf, render_hpl_dat
from clusterbench.bench.hpl.timing import DEFAULT_EFFICIENCY, HPL_TIME
from clusterbench.bench.hpl.timing import hpl_flops as hpl_flops  # its home was here: tests and scripts use it
from clusterbench.bench.layout import Layout, layouts
from clusterbench.errors import UserInputError
from clusterbench.units import parse_size

if TYPE_CHECKING:
    from clusterbench.bench.hpl.model import Rates
    from clusterbench.system.discover import SystemInfo

BYTES_PER_DOUBLE = 8
DEFAULT_MEMORY_FRACTION = 0.8  # of memory the matrix fills: the rest is left to the OS and MPI

# HPL's block size NB: the defaults of every command that runs or plans HPL, declared once here.
# One run with nothing tuned or measured (`clusterbench run`'s HPCC and standalone xhpl, the N the
# tuner sizes its levels with): 192 is in the range (128-256) where HPL studies on current x86 BLAS
# find the best NB, and the middle of the range searched below.
DEFAULT_NB = 192
# The cluster check's HPL (`clusterbench run -w`): runs of a few seconds, N as small as 1000, split
# over every core of every node. A smaller block keeps more blocks per rank at such N (N=1000 is 5
# blocks of 192 per row of the matrix, 7 of 128), so the ranks' load stays balanced.
SHORT_RUN_NB = 128
# The NBs `plan hpl` lists and writes to HPL.dat by default: each is a full-size run when the
# file is run by hand, so the sweep keeps to the range where the best NB usually is.
PLAN_NB_RANGE = "64..256:32"
# The NBs the tuner searches by default (`tune hpl`, docs/tune.md): wider, since its trials are
# small and a poor NB is dropped after one level; some BLAS (recent MKL, BLIS) are best above 256.
TUNE_NB_RANGE = "64..384:32"
# The same, declared once for the code outside this package (`Hpl.sizing`).
HPL_SIZING = Sizing(default_nb=DEFAULT_NB, short_run_nb=SHORT_RUN_NB, plan_nb_range=PLAN_NB_RANGE,
                    tune_nb_range=TUNE_NB_RANGE, memory_fraction=DEFAULT_MEMORY_FRACTION)


def n_for_memory(memory_bytes: float, fraction: float, nb: int) -> int:
    """N = floor(sqrt(f * M / 8) / NB) * NB."""
    if not 0 < fraction <= 1:
        raise UserInputError(f"memory fraction must be in (0, 1], got {fraction}")
    if nb <= 0:
        raise UserInputError(f"NB must be positive, got {nb}")
    return int(math.sqrt(fraction * memory_bytes / BYTES_PER_DOUBLE) // nb) * nb


def n_for_time(seconds: float, rpeak_gflops: float, efficiency: float, nb: int) -> int:
    """Largest multiple of NB (at least NB) whose HPL solve takes about `seconds` at efficiency x Rpeak."""
    return max(nb, HPL_TIME.largest_n(seconds, HPL_TIME.rate(rpeak_gflops, efficiency), nb))


def matrix_bytes(n: int) -> int:
    return BYTES_PER_DOUBLE * n * n


def usable_memory(per_node_bytes: list[int]) -> int:
    """All nodes together; HPL distributes evenly, so the smallest node limits each share."""
    if not per_node_bytes:
        raise UserInputError("no node memory known")
    return min(per_node_bytes) * len(per_node_bytes)


@lru_cache(maxsize=256)
def grids(ranks: int, ethernet: bool = False) -> list[tuple[int, int]]:
    """All P x Q = ranks with P <= Q, best first.

    Squarest first (the HPL FAQ: P and Q about equal, Q slightly larger). On Ethernet the FAQ
    advises flat grids (1x4, 1x8, 2x4) because the panel broadcast along a row is the
    bottleneck, so there the flattest comes first.
    """
    if ranks <= 0:
        raise UserInputError(f"rank count must be positive, got {ranks}")
    found = [(p, ranks // p) for p in range(1, int(math.isqrt(ranks)) + 1) if ranks % p == 0]
    return sorted(found, key=lambda g: g[0]) if ethernet else sorted(found, key=lambda g: g[1] - g[0])


def check_problem(n: int, nb: int, p: int, q: int, ranks: int,
                  available_bytes: int | None, headroom: float = 0.10, require_multiple: bool = True) -> None:
    """Refuse, before anything runs, a problem HPL would reject or that would swap.

    HPL itself accepts an N that is not a multiple of NB (the last block is partial); the
    planner insists on it because a partial block wastes work, campaigns may relax it.
    """
    if n <= 0 or nb <= 0:
        raise UserInputError(f"N and NB must be positive (N={n}, NB={nb})")
    if p * q != ranks:
        options = ", ".join(f"{a}x{b}" for a, b in grids(ranks))
        raise UserInputError(f"P x Q = {p}x{q} = {p * q} does not equal the {ranks} MPI ranks",
                             hint=f"grids for {ranks} ranks: {options}")
    if require_multiple and n % nb:
        lower = n // nb * nb
        raise UserInputError(f"N={n} is not a multiple of NB={nb}",
                             hint=f"use N={lower} or N={lower + nb}")
    if available_bytes is not None:
        limit = available_bytes * (1 - headroom)
        need = matrix_bytes(n)
        if need > limit:
            biggest = int(math.sqrt(limit / BYTES_PER_DOUBLE) // nb) * nb
            raise UserInputError(
                f"N={n} needs {need / 2**30:.1f} GiB for the matrix, more than the "
                f"{limit / 2**30:.1f} GiB usable ({int(headroom * 100)}% headroom kept)",
                hint=f"the largest N that fits with NB={nb} is {biggest}")


# ---------------------------------------------------------------- the plan of `clusterbench plan hpl`


@dataclass(frozen=True)
class PlanRow:
    """One NB of a plan: its N, the matrix's size and share of the usable memory, the solve time."""

    nb: int
    n: int
    matrix_bytes: int
    memory_fraction: float
    estimated_s: float | None


@dataclass
class HplPlan:
    """An HPL problem per NB on a layout and grid, every one already checked (`check_problem`)."""

    nodes: int
    memory_per_node_bytes: int
    usable_bytes: int
    fraction: float
    ranks: int
    layout: Layout
    grids: list[tuple[int, int]]  # every P x Q for the ranks, best first
    grid: tuple[int, int]  # the one checked and written to the input files
    rpeak_gflops: float | None
    efficiency: float
    rows: list[PlanRow]

    def to_dict(self) -> dict:
        """The plan as `plan hpl --json` prints it."""
        return {"nodes": self.nodes, "memory_per_node_bytes": self.memory_per_node_bytes,
                "usable_bytes": self.usable_bytes, "fraction": self.fraction, "ranks": self.ranks,
                "layout": asdict(self.layout), "grids": [f"{a}x{b}" for a, b in self.grids],
                "rpeak_gflops": self.rpeak_gflops, "efficiency": self.efficiency,
                "rows": [asdict(r) for r in self.rows]}

    def hpl_input(self) -> HplInput:
        """Every NB on the chosen grid, with the smallest N of the rows: one that fits for all."""
        return HplInput(ns=[min(r.n for r in self.rows)], nbs=[r.nb for r in self.rows], grids=[self.grid])

    def hpl_dat(self) -> str:
        return render_hpl_dat(self.hpl_input())

    def hpccinf(self) -> str:
        inp = self.hpl_input()
        inp.device_out = 8  # a file: HPCC writes its own report (hpccoutf.txt), not to stdout
        return render_hpccinf(inp)


def plan_hpl(system: SystemInfo, nbs: list[int], nodes: int = 1, memory_per_node: int | None = None,
             fraction: float = DEFAULT_MEMORY_FRACTION, seconds: float | None = None,
             efficiency: float | None = None, layout: str = "mpi", ranks: int | None = None,
             ethernet: bool = False, n: int | None = None, grid: tuple[int, int] | None = None) -> HplPlan:
    """N for each NB (`n` as given, else sized for a solve time of `seconds`, else for a `fraction`
    of memory), on the ranks of `layout` (or `ranks`) and the best grid (or `grid`). Every problem
    is checked before the plan is returned, so nothing is written for one HPL would refuse.
    `memory_per_node` defaults to the system's; `efficiency` to DEFAULT_EFFICIENCY."""
    per_node = memory_per_node if memory_per_node is not None else system.memory_bytes()
    if not per_node:
        raise UserInputError("memory per node unknown", hint="give --memory, e.g. --memory 4GiB")
    usable = usable_memory([per_node] * nodes)
    topo = system.topology
    lay = layouts(nodes, topo.sockets, topo.cores_per_socket)[layout]
    rank_count = ranks or lay.ranks
    grid_list = grids(rank_count, ethernet=ethernet)
    rpeak = system.rpeak_total_gflops
    eff = efficiency or DEFAULT_EFFICIENCY
    if n is None and seconds is not None and not rpeak:
        raise UserInputError("Rpeak unknown, cannot size N from time",
                             hint="give --flops-per-cycle/--frequency via `clusterbench system`")
    rows = []
    for nb in nbs:
        if n is not None:
            size = n
        elif seconds is not None:
            size = min(n_for_time(seconds, rpeak, eff, nb), n_for_memory(usable, fraction, nb))
        else:
            size = n_for_memory(usable, fraction, nb)
        need = matrix_bytes(size)
        est = HPL_TIME.solve_seconds(size, HPL_TIME.rate(rpeak, eff)) if rpeak else None
        rows.append(PlanRow(nb, size, need, need / usable, est))
    chosen = grid or grid_list[0]
    for row in rows:
        check_problem(row.n, row.nb, chosen[0], chosen[1], rank_count, usable)
    return HplPlan(nodes, per_node, usable, fraction, rank_count, lay, grid_list, chosen, rpeak, eff, rows)


# ---------------------------------------------------------------- a campaign's `n: {hpl_n: {...}}`

HPL_N_OPTIONS = {"fraction", "memory", "seconds", "efficiency", "max"}
HPL_N_INPUTS = {"nb", "nodes"}  # the point's values hpl_n reads: derived ones are computed first


def hpl_n_problem(option: str, value: Any) -> str | None:
    """What is wrong with one hpl_n option's value (None: nothing), checked before any point."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if option == "memory":
        if not isinstance(value, str):
            return "must be a size such as 4GiB"
        try:
            return None if parse_size(value) > 0 else "must be a positive size"
        except UserInputError as exc:
            return exc.message
    if not number or not math.isfinite(value):
        return "must be a finite number"
    if option in ("fraction", "efficiency") and not 0 < value <= 1:
        return "must be in (0, 1]"
    if option == "seconds" and value <= 0:
        return "must be a positive number of seconds"
    if option == "max" and (not float(value).is_integer() or value < 1):
        return "must be a whole number of at least 1"
    return None


def hpl_n(opts: Mapping[str, Any], point: Mapping[str, Any], system: SystemInfo) -> int:
    """N for this point's NB and node count, from memory (fraction) or a solve time (seconds)."""
    nb = point.get("nb")
    if not isinstance(nb, int) or nb <= 0:
        raise UserInputError("hpl_n needs a positive integer nb in the point")
    nodes = point.get("nodes", 1)
    if "seconds" in opts:
        rpeak = (system.rpeak_node_gflops or 0) * nodes
        if rpeak <= 0:
            raise UserInputError("hpl_n with seconds needs a known Rpeak of the node")
        n = n_for_time(float(opts["seconds"]), rpeak, float(opts.get("efficiency", DEFAULT_EFFICIENCY)), nb)
    else:
        memory = parse_size(opts["memory"]) if "memory" in opts else system.memory_bytes()
        if not memory:
            raise UserInputError("hpl_n needs the node's memory: give memory: 4GiB")
        n = n_for_memory(memory * nodes, float(opts.get("fraction", DEFAULT_MEMORY_FRACTION)), nb)
    if "max" in opts:
        n = min(n, int(opts["max"]) // nb * nb)
    if n <= 0:
        raise UserInputError(f"hpl_n gives N={n} for NB={nb}: too little memory or time")
    return n


# hpl_n as the Hpl class declares it (`Hpl.derived`): campaigns find it by name through the registry.
HPL_N = Derived(
    name="hpl_n", options=frozenset(HPL_N_OPTIONS), inputs=frozenset(HPL_N_INPUTS), problem=hpl_n_problem,
    compute=hpl_n, example="{hpl_n: {fraction: 0.8}}",
    schema={"type": "object", "additionalProperties": False, "properties": {
        "fraction": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "memory": {"type": "string", "description": "memory per node, e.g. 2GiB (default: MemTotal)"},
        "seconds": {"type": "number", "description": "size N for this HPL solve time instead"},
        "efficiency": {"type": "number"},
        "max": {"type": "integer", "description": "upper bound on N"}}})


def resolve_grid(point: dict, ethernet: bool = False) -> None:
    """P x Q from the rank count when not given (squarest grid), and checked when given."""
    ranks = point["ranks"]
    p, q = point.get("p"), point.get("q")
    if p is None and q is None:
        point["p"], point["q"] = grids(ranks, ethernet)[0]
    elif p is None or q is None:
        given = p or q
        if ranks % given:
            raise UserInputError(f"{'p' if p else 'q'}={given} does not divide the {ranks} ranks")
        point["p"], point["q"] = (given, ranks // given) if p else (ranks // given, given)
    elif p * q != ranks:
        options = ", ".join(f"{a}x{b}" for a, b in grids(ranks))
        raise UserInputError(f"P x Q = {p}x{q} = {p * q} does not equal the {ranks} MPI ranks",
                             hint=f"grids for {ranks} ranks: {options}")


# ---------------------------------------------------------------- the model's view of a plan (`plan hpl`)


def model_predictions(plan: HplPlan, rates: Rates, source: str) -> dict:
    """The HPL model's time and Gflop/s of each row of `plan` on its chosen grid, and of every grid at
    the row the model finds fastest, with the rates' source (`rates`: the caller's, from stored runs of
    the system or fallbacks)."""
    from clusterbench.bench.hpl.model import Problem, predict

    threads = plan.layout.threads_per_rank
    p, q = plan.grid
    rows = []
    for r in plan.rows:
        pred = predict(Problem(r.n, r.nb, p, q, plan.nodes, threads), rates)
        rows.append({"nb": r.nb, "n": r.n, "grid": f"{p}x{q}", "seconds": pred.seconds, "gflops": pred.gflops,
                     "compute_s": pred.compute_s, "communication_s": pred.communication_s})
    fastest = max(rows, key=lambda row: row["gflops"])
    found = []
    for gp, gq in plan.grids:
        pred = predict(Problem(fastest["n"], fastest["nb"], gp, gq, plan.nodes, threads), rates)
        found.append({"grid": f"{gp}x{gq}", "seconds": pred.seconds, "gflops": pred.gflops,
                      "communication_s": pred.communication_s})
    found.sort(key=lambda g: -g["gflops"])
    return {"source": source, "rates": asdict(rates), "rows": rows,
            "grids_at": {"n": fastest["n"], "nb": fastest["nb"]}, "grids": found}
