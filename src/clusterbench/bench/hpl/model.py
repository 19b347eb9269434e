"""An analytic HPL performance model (helper A writes this module).

Interface fixed by the integrator; the helper may add to it, not change what is below."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rates:
    """What the model needs to know of a machine, measured (tune/rates.py reads them from the store)."""

    core_gflops: float  # DGEMM rate of one core at a large NB, Gflop/s
    latency_s: float  # one MPI message between two ranks (across nodes when nodes > 1)
    bandwidth_bytes_s: float  # large-message bandwidth between two ranks (same)
    nb_half: float = 24.0  # NB at which the DGEMM rate reaches half of core_gflops
    efficiency: float = 1.0  # calibration to measured HPL runs of this system (1: none)


@dataclass(frozen=True)
class Problem:
    n: int
    nb: int
    p: int
    q: int
    nodes: int = 1
    threads_per_rank: int = 1


@dataclass(frozen=True)
class Prediction:
    seconds: float  # the solve, as HPL's Time column
    gflops: float  # as HPL's Gflops column
    compute_s: float
    communication_s: float


def predict(problem: Problem, rates: Rates) -> Prediction:
    raise NotImplementedError
