"""Sizing and time as the benchmarks declare them (bench/declare.py): HPL's one time model and its named
uses, its NB defaults, and `hpl_n` found through the registry, so that code outside bench/ names no
benchmark module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from clusterbench.bench.declare import Derived, Sizing, TimeModel
from clusterbench.bench.hpl import planner, timing
from clusterbench.bench.registry import benchmark_class, derived, derived_values

SRC = Path(__file__).resolve().parents[1] / "src" / "clusterbench"


def test_hpl_declares_one_time_model_whose_uses_are_the_old_constants():
    hpl = benchmark_class("hpl")
    model = hpl.time_model
    assert isinstance(model, TimeModel) and (model.startup_s, model.setup_coeff) == (0.0, 0.0)
    assert model.efficiency == timing.DEFAULT_EFFICIENCY
    planning, measured = model.planning(), model.measured()
    assert (planning.startup_s, planning.setup_coeff) == (timing.PLANNING_STARTUP_S, 0.0)
    assert (measured.startup_s, measured.setup_coeff) == (timing.XHPL_STARTUP_S, timing.XHPL_SETUP_COEFF)
    for n, gflops in ((1000, 5.0), (10_000, 100.0), (40_000, 2000.0)):
        assert planning.seconds(n, gflops) == timing.run_seconds(n, gflops)
        assert measured.seconds(n, gflops) == timing.run_seconds(n, gflops, timing.XHPL_STARTUP_S,
                                                                  timing.XHPL_SETUP_COEFF)
        assert model.solve_seconds(n, gflops) == timing.solve_seconds(n, gflops)
        assert model.largest_n(60, gflops, 192) == timing.n_for_seconds(60, gflops, 192)
        assert measured.largest_n(30, gflops, 128, n_max=n) == timing.n_for_seconds(
            30, gflops, 128, timing.XHPL_STARTUP_S, timing.XHPL_SETUP_COEFF, n_max=n)


def test_the_estimate_of_a_campaign_run_is_the_planning_use():
    from clusterbench.system.discover import discover

    system = discover(with_software=False)
    hpl = benchmark_class("hpl")
    point = {"n": 8000, "nodes": 1, "ranks": 1, "threads": 1}
    estimate = hpl.estimate_s(point, system)
    if estimate is None:
        pytest.skip("Rpeak unknown on this machine")
    assert estimate > hpl.time_model.planning_startup_s


def test_hpl_and_hpcc_declare_the_same_sizing():
    sizing = benchmark_class("hpl").sizing
    assert isinstance(sizing, Sizing) and benchmark_class("hpcc").sizing is sizing
    assert (sizing.default_nb, sizing.short_run_nb) == (planner.DEFAULT_NB, planner.SHORT_RUN_NB)
    assert (sizing.plan_nb_range, sizing.tune_nb_range) == (planner.PLAN_NB_RANGE, planner.TUNE_NB_RANGE)
    assert sizing.memory_fraction == planner.DEFAULT_MEMORY_FRACTION


def test_hpl_n_is_found_through_the_registry():
    found = derived("hpl_n")
    assert isinstance(found, Derived) and found in benchmark_class("hpl").derived
    assert found.options == frozenset(planner.HPL_N_OPTIONS) and found.inputs == frozenset(planner.HPL_N_INPUTS)
    assert found.problem("fraction", 2) == "must be in (0, 1]"
    assert derived("no_such_value") is None and [d.name for d in derived_values()] == ["hpl_n"]


# The modules issue 33 freed of a benchmark's own modules: they ask the registry instead.
FREED = ("campaign", "suite", "cli/run_cmd.py", "cli/plan_cmd.py", "cli/cluster_run.py")
BENCHMARK_PACKAGES = ("hpl", "hpcc", "hpcg", "imb", "osu", "stream", "lulesh")


@pytest.mark.parametrize("where", FREED)
def test_no_module_outside_bench_imports_a_benchmark_package(where):
    paths = sorted((SRC / where).glob("*.py")) if (SRC / where).is_dir() else [SRC / where]
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                parts = name.split(".")
                assert not (parts[:2] == ["clusterbench", "bench"] and len(parts) > 2
                            and parts[2] in BENCHMARK_PACKAGES), f"{path.relative_to(SRC)} imports {name}"


def test_hpcc_time_model_learns_from_the_stored_figures_it_declares(tmp_path):
    """The store reads the figures HPCC's model names (store.recent_figures: no benchmark named in the
    store); runs of another system, a failed run and a run missing a figure are not learned from."""
    from clusterbench.bench.metrics import Metric
    from clusterbench.bench.registry import benchmark_class
    from clusterbench.store.db import Store
    from clusterbench.store.records import RunRecord

    model = benchmark_class("hpcc").run_time
    with Store(tmp_path / "r.db") as store:
        for system in ("sys1", "sys2"):  # two systems as the store knows them (remember_system's row)
            store.conn.execute("INSERT INTO systems VALUES (?, 'node', '{}', '{}', '2026-12-02T00:00:00Z')",
                               (system,))

        def stored(run_id, system, status, n, total, figures):
            store.begin_run(RunRecord(run_id, "hpcc", {"n": n}, system_id=system))
            store.finish_run(run_id, status, status == "ok", None, 0, total,
                             [Metric(name, value, "s" if name == "HPL_time" else "Gflop/s")
                              for name, value in figures.items()])

        stored("a", "sys1", "ok", 2000, 12.0, {"HPL_time": 4.0, "hpl_gflops": 40.0})
        stored("b", "sys1", "ok", 4000, 30.0, {"HPL_time": 9.0, "hpl_gflops": 60.0})
        stored("c", "sys2", "ok", 4000, 99.0, {"HPL_time": 9.0, "hpl_gflops": 1.0})
        stored("d", "sys1", "failed", 4000, 99.0, {"HPL_time": 9.0, "hpl_gflops": 1.0})
        stored("e", "sys1", "ok", 4000, 99.0, {"HPL_time": 9.0})
        figures = store.recent_figures("hpcc", "sys1", model.HISTORY_METRICS)
    assert sorted((p["n"], total, values) for p, total, values in figures) == [
        (2000, 12.0, [4.0, 40.0]), (4000, 30.0, [9.0, 60.0])]
    learned = model.learned_from(100.0, figures)
    assert "learned from 2 stored hpcc run(s)" in learned.source
    assert 0.4 <= learned.efficiency <= 0.6  # the median of 0.4 and 0.6 of the 100 Gflop/s Rpeak
