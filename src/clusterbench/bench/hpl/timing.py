"""How long one HPL run takes, and the largest N that fits a time: HPL's one time model (`HPL_TIME`).

    seconds(N) = start-up + setup_coeff x N^2 + hpl_flops(N) / rate

- start-up: mpirun, MPI_Init, allocation and first touch; a constant per run;
- setup: generating the random matrix and checking the solution, both O(N^2) (memory-bound, so they do
  not go at the solve's rate);
- the solve: HPL's own operation count at the rate the run achieves.

It is one `bench.declare.TimeModel`, declared on the Hpl class (`Hpl.time_model`), and every caller
uses it, through one of its named uses, with the inputs it knows, rather than a model of its own:

- `PLANNING_TIME`, planning with nothing measured (`plan hpl`'s "est. HPL time", a campaign's hpl run
  estimate, HPCC's budget, the tuner before it has seen a run): the conservative `PLANNING_STARTUP_S`,
  no setup term (the pessimistic start-up covers it at the small N these plans size for) and
  `DEFAULT_EFFICIENCY` of Rpeak;
- `XHPL_TIME`, sizing the standalone xhpl of `clusterbench run`, whose budget is tight and whose N is
  large: the start-up and setup measured for xhpl (`XHPL_STARTUP_S`, `XHPL_SETUP_COEFF`), at the best
  rate known;
- `HPL_TIME` itself, sizing N for a *solve* time (`plan hpl --seconds`, a campaign's `hpl_n: {seconds:
  ...}`, the cluster check's HPL phases, whose budget share leaves start-up to the rest): start-up and
  setup 0;
- the tuner (tune/hpl.py): the same sum, with the solve's rate predicted per configuration by the
  analytic model (model.py) and the start-up measured on the system when it can be (tune.hpl's
  measured_startup, at most 3 x PLANNING_STARTUP_S), else PLANNING_STARTUP_S.

The two start-ups are not two models but two uses of one: 2.0 s is a margin meant to be on the safe side
for any system and rank count (the tuner also uses it as the bound of a measured start-up), 0.4 s is
what a 2-rank xhpl measured on one machine, used where the budget is tight and the run is the one measured.

The rates of the cluster check's short HPL runs, before any of them ran, are declared here too
(`SHORT_RUN_RATES`): a guess from Rpeak, then what DGEMM or a one-node HPL measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from clusterbench.bench.declare import TimeModel

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


def _n_bound(flops: float) -> float:
    """The solve alone bounds N: 2/3 N^3 < hpl_flops(N), so N < (1.5 x flops)^(1/3)."""
    return (1.5 * flops) ** (1 / 3)


# HPL's one time model, as the Hpl class declares it (`Hpl.time_model`): the solve alone (sizing N for a
# solve time), with the terms of its two other uses.
HPL_TIME = TimeModel(work=hpl_flops, size_for_work=_n_bound, efficiency=DEFAULT_EFFICIENCY,
                     planning_startup_s=PLANNING_STARTUP_S, measured_startup_s=XHPL_STARTUP_S,
                     measured_setup_coeff=XHPL_SETUP_COEFF)
# Planning with nothing measured: the conservative start-up margin covers start-up and setup at any rank count.
PLANNING_TIME = HPL_TIME.planning()
# The standalone xhpl of `clusterbench run`: its tight budget is fitted with the terms measured for xhpl.
XHPL_TIME = HPL_TIME.measured()


@lru_cache(maxsize=64)
def _with_terms(startup_s: float, setup_coeff: float) -> TimeModel:
    """HPL_TIME with these start-up and setup terms (a planner's loop asks for the same few again and again)."""
    return HPL_TIME.using("given", startup_s, setup_coeff)


def solve_seconds(n: float, gflops: float) -> float:
    """HPL's solve alone (what HPL prints as its Time) at `gflops` Gflop/s."""
    return HPL_TIME.solve_seconds(n, gflops)


def run_seconds(n: float, gflops: float, startup_s: float = PLANNING_STARTUP_S, setup_coeff: float = 0.0) -> float:
    """Wall time of one HPL run of size N at `gflops` Gflop/s: start-up + setup_coeff x N^2 + the solve."""
    return _with_terms(startup_s, setup_coeff).seconds(n, gflops)


def n_for_seconds(seconds: float, gflops: float, nb: int, startup_s: float = 0.0, setup_coeff: float = 0.0,
                  n_max: int | None = None) -> int:
    """The largest multiple of NB (at most n_max) whose `run_seconds` is within `seconds`; 0 when none is.

    With the default start-up and setup of 0, the N whose *solve* takes about `seconds`."""
    return _with_terms(startup_s, setup_coeff).largest_n(seconds, gflops, nb, n_max)


@dataclass(frozen=True)
class ShortRunRates:
    """The rates the cluster check (`clusterbench run -w`) expects of its short HPL runs, N about 1000 to
    a few thousand over every core: far below a full run's efficiency, so they are declared apart from
    DEFAULT_EFFICIENCY. The first guess is a share of Rpeak; once DGEMM ran on the node, a share of its
    rate (a small HPL spends much of its time outside DGEMM: panels, start-up); across nodes, a share of
    the one-node rate per node (communication)."""

    guess_efficiency: float = 0.3  # of Rpeak, when nothing measured says better
    of_dgemm: float = 0.6  # a small HPL's rate against the same node's DGEMM
    across_nodes: float = 0.6  # all-node HPL per node against one-node HPL

    def scale(self, nodes: int) -> float:
        """Per-node loss to communication: 1 on one node."""
        return self.across_nodes if nodes > 1 else 1.0


SHORT_RUN_RATES = ShortRunRates()
