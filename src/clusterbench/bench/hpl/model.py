"""An analytic HPL performance model: solve time and Gflop/s of a problem (N, NB, P x Q, nodes,
threads) from a few measured rates, for problems and node counts that were never run.

It starts from HPL's own scalability analysis (netlib HPL, "Algorithm/Scalability"), where
gamma3 is the time of one flop of the trailing update, alpha the latency and beta the time per
double of one message:

    T = 2 N^3 / (3 P Q) * gamma3  +  beta N^2 (3P + Q) / (2 P Q)  +  alpha N ((NB + 1) log2 P + P) / NB

and adds what that crude machine model leaves out but real machines show:

- **DGEMM falls at small NB.** The trailing update is a rank-NB DGEMM; its rate saturates with
  the inner dimension: r(NB) = core_gflops * NB / (NB + nb_half). A small NB starves the
  BLAS, a large one pays in the panel (below): the two together make NB's optimum.
- **Threads multiply the per-process rate**, less a small loss per extra thread (memory and
  synchronisation): t / (1 + thread_loss (t - 1)).
- **The panel factorisation runs at a lower rate.** Each of the N/NB panels is factorised by
  one process column (P processes); it is made of narrow BLAS-2/3 calls and a pivot search
  per column, which run at a fraction `panel_ratio` of the DGEMM rate. Summed over the panels
  that is N^2 NB / 2 flops. Without look-ahead (HPL's DEPTH 0) every other process waits for
  the panel: it is on the critical path, N^2 NB / (2 P) at that rate. With look-ahead (DEPTH 1,
  HPL's default) the next panel is factorised while the other Q - 1 process columns update, so
  it costs about its share: N^2 NB / (2 P Q).
- **Row swaps cost memory time even without messages.** For each panel every process swaps NB
  rows of its n/Q columns and copies them for U: strided accesses, one cache line per double,
  about 3 N^2 / (2Q) doubles in all, at `swap_s` each. This is HPL's beta term of the columns
  with the memory as the link; it is what makes a Px1 grid (or one rank with threads, Q = 1)
  slower than 1xQ on one node, and much of why Gflop/s rise with N.
- **Terms vanish with their dimension.** HPL's formula is written for P, Q > 1. With Q = 1 no
  panel is broadcast along a row (the beta N^2 / (2P) part), with P = 1 no row is swapped or
  pivot searched across processes (the 3 beta N^2 / (2Q) part, and the log2 P latencies), and a
  single process sends nothing. With P, Q > 1 the communication is exactly HPL's formula.
- **A calibration factor.** `efficiency` divides the whole time: what the terms above miss
  (start of the BLAS threads, cache effects, the operating system, imperfect overlap) is fitted
  to measured HPL runs of the system (tuning.py's fit_rates), 1 when none were measured.

Gflop/s are computed as HPL prints them: (2/3 N^3 + 3/2 N^2) / time. The rates are those of the
node count asked for: across nodes when nodes > 1 (tuning.py's model_rates picks them); the model knows
no hierarchy of links and no sharing of a node's network card between its ranks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from clusterbench.bench.hpl.timing import hpl_flops

BYTES_PER_DOUBLE = 8


@dataclass(frozen=True)
class Rates:
    """What the model needs to know of a machine, measured (tuning.py's model_rates, from the values
    tune/rates.py reads from the store)."""

    core_gflops: float  # DGEMM rate of one core at a large NB, Gflop/s
    latency_s: float  # one MPI message between two ranks (across nodes when nodes > 1)
    bandwidth_bytes_s: float  # large-message bandwidth between two ranks (same)
    nb_half: float = 24.0  # NB at which the DGEMM rate reaches half of core_gflops
    efficiency: float = 1.0  # calibration to measured HPL runs of this system (1: none)
    panel_ratio: float = 0.5  # panel factorisation's rate as a fraction of the DGEMM rate
    swap_s: float = 1e-8  # time per double of the local row swaps and U copies (strided memory access)
    thread_loss: float = 0.05  # per extra thread of a rank: t threads run at t / (1 + loss (t - 1))


@dataclass(frozen=True)
class Problem:
    n: int
    nb: int
    p: int
    q: int
    nodes: int = 1
    threads_per_rank: int = 1
    depth: int = 1  # HPL's look-ahead depth (0: the panel factorisation is wholly on the critical path)


@dataclass(frozen=True)
class Prediction:
    seconds: float  # the solve, as HPL's Time column
    gflops: float  # as HPL's Gflops column
    compute_s: float
    communication_s: float
    update_s: float = 0.0  # the trailing-matrix update (part of compute_s)
    panel_s: float = 0.0  # the panel factorisation on the critical path (part of compute_s)
    swap_s: float = 0.0  # the local row swaps and U copies (part of compute_s)


def dgemm_rate(rates: Rates, nb: int) -> float:
    """Gflop/s of one core in a rank-NB update: the saturating curve core * NB / (NB + nb_half)."""
    return rates.core_gflops * nb / (nb + rates.nb_half)


def thread_factor(threads: int, loss: float) -> float:
    """How many cores' worth of DGEMM t threads of one rank give."""
    return threads / (1.0 + loss * (threads - 1))


def communication_s(problem: Problem, rates: Rates) -> float:
    """HPL's alpha-beta terms, each only where its messages exist (see the module docstring)."""
    n, nb, p, q = problem.n, problem.nb, problem.p, problem.q
    if p * q <= 1:
        return 0.0
    beta = BYTES_PER_DOUBLE / rates.bandwidth_bytes_s
    alpha = rates.latency_s
    row_bcast = beta * n * n / (2 * p) if q > 1 else 0.0  # the panel, along each process row
    column = beta * 3 * n * n / (2 * q) if p > 1 else 0.0  # row swaps and U, down each process column
    latency = alpha * n * ((nb + 1) * math.log2(p) + p) / nb  # pivot searches, then one start per panel
    return row_bcast + column + latency


def predict(problem: Problem, rates: Rates) -> Prediction:
    """Time and Gflop/s of one HPL solve (see the module docstring for the terms)."""
    n, nb, p, q = problem.n, problem.nb, problem.p, problem.q
    if min(n, nb, p, q, problem.nodes, problem.threads_per_rank) <= 0 or problem.depth < 0:
        raise ValueError(f"the problem's sizes must be positive: {problem}")
    if min(rates.core_gflops, rates.bandwidth_bytes_s, rates.efficiency, rates.panel_ratio) <= 0 \
            or min(rates.latency_s, rates.nb_half, rates.thread_loss, rates.swap_s) < 0:
        raise ValueError(f"rates must be positive: {rates}")
    per_process = dgemm_rate(rates, min(nb, n)) * thread_factor(problem.threads_per_rank, rates.thread_loss) * 1e9
    update = 2.0 * n**3 / (3.0 * p * q * per_process)
    sharing = p * q if problem.depth > 0 else p  # who shares the panel's time (module docstring)
    panel = n * n * min(nb, n) / (2.0 * sharing * per_process * rates.panel_ratio)
    swaps = rates.swap_s * 3.0 * n * n / (2.0 * q)
    comm = communication_s(problem, rates)
    scale = 1.0 / rates.efficiency
    seconds = (update + panel + swaps + comm) * scale
    return Prediction(seconds, hpl_flops(n) / seconds / 1e9, (update + panel + swaps) * scale, comm * scale,
                      update * scale, panel * scale, swaps * scale)


def grid_shapes(ranks: int) -> list[tuple[int, int]]:
    """Every P x Q = ranks (P <= Q and P > Q both: HPL treats them differently)."""
    return [(p, ranks // p) for p in range(1, ranks + 1) if ranks % p == 0]


def best_configurations(n: int, ranks: int, rates: Rates, nbs: Iterable[int] = range(32, 385, 32),
                        nodes: int = 1, threads_per_rank: int = 1,
                        grids: Iterable[tuple[int, int]] | None = None) -> list[tuple[Problem, Prediction]]:
    """Every NB x grid of `ranks` for this N, fastest first: the model's preference (the tuner's prior).
    N is rounded down to a multiple of each NB, as the planner does, and the Gflop/s compared."""
    out = []
    for nb in nbs:
        size = max(nb, n // nb * nb)
        for p, q in (grids if grids is not None else grid_shapes(ranks)):
            problem = Problem(size, nb, p, q, nodes, threads_per_rank)
            out.append((problem, predict(problem, rates)))
    return sorted(out, key=lambda item: -item[1].gflops)
