"""How long one HPL run takes, and the largest N that fits a time: HPL's one time model.

    seconds(N) = start-up + setup_coeff x N^2 + hpl_flops(N) / rate

- start-up: mpirun, MPI_Init, allocation and first touch; a constant per run;
- setup: generating the random matrix and checking the solution, both O(N^2) (memory-bound, so they do
  not go at the solve's rate);
- the solve: HPL's own operation count at the rate the run achieves.

Every caller uses this model with the inputs it knows, rather than a model of its own:

- planning with nothing measured (`plan hpl`'s "est. HPL time", a campaign's hpl run estimate,
  HPCC's budget, the tuner before it has seen a run): `PLANNING_STARTUP_S`, no setup term (the
  pessimistic start-up covers it at the small N these plans size for) and `DEFAULT_EFFICIENCY` of Rpeak;
- sizing the standalone xhpl of `clusterbench run`, whose budget is tight and whose N is large:
  the start-up and setup measured for xhpl (`XHPL_STARTUP_S`, `XHPL_SETUP_COEFF`), at the best rate known;
- sizing N for a *solve* time (`plan hpl --seconds`, a campaign's `hpl_n: {seconds: ...}`, the
  cluster check's HPL phases, whose budget share leaves start-up to the rest): start-up and setup 0;
- the tuner (tune/hpl.py): the same sum, with the solve's rate predicted per configuration by the
  analytic model (model.py) and the start-up measured on the system when it can be (tune.hpl's
  measured_startup, at most 3 x PLANNING_STARTUP_S), else PLANNING_STARTUP_S.

The two start-ups are not two models but two inputs: 2.0 s is a guess meant to be on the safe side
for any system and rank count (the tuner also uses it as the bound of a measured start-up), 0.4 s is
what a 2-rank xhpl measured on one machine.
"""

from __future__ import annotations

# Rmax/Rpeak assumed when nothing better is known (no stored run): typical of HPL on one node with
# a tuned BLAS. Time estimates of HPL and HPCC, and N sized from a solve time, all assume it.
DEFAULT_EFFICIENCY = 0.75
# mpirun start-up, allocation and first touch of one HPL-like run: a planning guess, on the safe side
# for an unknown system and rank count (a 2-rank run measured 0.4 s, see XHPL_STARTUP_S)
PLANNING_STARTUP_S = 2.0
# Measured on the 2-core Zen 3 VM the suite was tuned on (suite/characterise.py's standalone HPL):
XHPL_STARTUP_S = 0.4  # mpirun and MPI_Init of a 2-rank xhpl (0.36-0.41 s measured at N=1000)
XHPL_SETUP_COEFF = 2.2e-8  # s per matrix element: generating and checking A (2-2.9 s at N=10000 there)


def hpl_flops(n: float) -> float:
    """The operation count HPL itself uses to compute Gflops: 2/3 N^3 + 3/2 N^2 (planning, and the
    output parser's check that printed Gflops follow from N and the time). An N read from a file
    may be absurd: from 1e100 on, the count is infinite rather than an overflow."""
    if n >= 1e100:
        return float("inf")
    return 2.0 / 3.0 * n**3 + 1.5 * n**2


def solve_seconds(n: float, gflops: float) -> float:
    """HPL's solve alone (what HPL prints as its Time) at `gflops` Gflop/s."""
    return hpl_flops(n) / (gflops * 1e9)


def run_seconds(n: float, gflops: float, startup_s: float = PLANNING_STARTUP_S, setup_coeff: float = 0.0) -> float:
    """Wall time of one HPL run of size N at `gflops` Gflop/s: start-up + setup_coeff x N^2 + the solve."""
    return startup_s + setup_coeff * n * n + solve_seconds(n, gflops)


def n_for_seconds(seconds: float, gflops: float, nb: int, startup_s: float = 0.0, setup_coeff: float = 0.0,
                  n_max: int | None = None) -> int:
    """The largest multiple of NB (at most n_max) whose `run_seconds` is within `seconds`; 0 when none is.

    With the default start-up and setup of 0, the N whose *solve* takes about `seconds`."""
    if nb <= 0 or gflops <= 0:
        return 0
    # The solve alone bounds N: 2/3 N^3 < flops <= seconds x rate; one block more against rounding.
    bound = int((1.5 * max(seconds, 0.0) * gflops * 1e9) ** (1 / 3)) + nb
    if n_max is not None:
        bound = min(bound, n_max)
    n = max(bound, 0) // nb * nb
    while n > 0 and run_seconds(n, gflops, startup_s, setup_coeff) > seconds:
        n -= nb
    return n
