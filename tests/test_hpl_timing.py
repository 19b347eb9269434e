"""HPL's one time model (bench/hpl/timing.py): the run's parts add up, and N for a time is its inverse."""

from __future__ import annotations

import pytest

from clusterbench.bench.hpl.timing import (
    PLANNING_STARTUP_S,
    XHPL_SETUP_COEFF,
    XHPL_STARTUP_S,
    hpl_flops,
    n_for_seconds,
    run_seconds,
    solve_seconds,
)


def test_a_run_is_start_up_plus_setup_plus_the_solve():
    assert solve_seconds(10_000, 100.0) == pytest.approx(hpl_flops(10_000) / 100e9)
    assert run_seconds(10_000, 100.0) == pytest.approx(PLANNING_STARTUP_S + solve_seconds(10_000, 100.0))
    measured = run_seconds(10_000, 100.0, XHPL_STARTUP_S, XHPL_SETUP_COEFF)
    assert measured == pytest.approx(XHPL_STARTUP_S + XHPL_SETUP_COEFF * 1e8 + solve_seconds(10_000, 100.0))


@pytest.mark.parametrize(("seconds", "gflops", "nb", "startup", "setup"), [
    (60, 80, 128, 0.0, 0.0), (5, 3.5, 192, 0.0, 0.0), (30, 20, 192, XHPL_STARTUP_S, XHPL_SETUP_COEFF),
    (3600, 1000, 256, PLANNING_STARTUP_S, 0.0),
])
def test_n_for_seconds_is_the_largest_multiple_of_nb_that_fits(seconds, gflops, nb, startup, setup):
    n = n_for_seconds(seconds, gflops, nb, startup, setup)
    assert n > 0 and n % nb == 0
    assert run_seconds(n, gflops, startup, setup) <= seconds < run_seconds(n + nb, gflops, startup, setup)


def test_n_for_seconds_keeps_to_n_max_and_gives_0_when_nothing_fits():
    assert n_for_seconds(3600, 1000, 192, n_max=10_000) == 10_000 // 192 * 192
    assert n_for_seconds(0.3, 1000, 192, XHPL_STARTUP_S) == 0  # less than the start-up alone
    assert n_for_seconds(10, 0, 192) == 0
