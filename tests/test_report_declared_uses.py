"""What the report sections and analyses that used to name HPL's and STREAM's metrics now read from the
benchmarks' declarations (bench/declare.py ReportUse): the same metrics, keys, titles and order."""

from __future__ import annotations

from clusterbench.analysis import cluster, efficiency, plausibility
from clusterbench.bench import registry
from clusterbench.report import custom, hpl, pinning


def test_the_pinning_section_draws_triad_then_hpl():
    assert [(d.use.key, d.spec.name, d.use.axis) for d in pinning.drawn("figure")] == [
        ("pinning-stream", "stream_triad", "Triad (GB/s)"), ("pinning-hpl", "hpl_gflops", "Gflop/s")]
    assert [d.use.title for d in pinning.drawn("column")] == ["Triad", "HPL Gflop/s", "HPL time"]
    assert pinning.metrics() == {"stream_triad", "hpl_gflops", "hpl_time"}
    assert [pinning.scale(d) for d in pinning.drawn("column")] == [1 / 1000.0, 1.0, 1.0]


def test_a_cluster_run_compares_nodes_on_the_declared_figures():
    assert [(m.key, m.label, m.benchmark, m.metric, m.unit, m.scale, m.sustained) for m in cluster.node_measures()] == [
        ("stream_triad", "STREAM Triad", "stream", "stream_triad", "GB/s", 1e-3, True),
        ("dgemm", "DGEMM", "dgemm", "dgemm_gflops", "Gflop/s", 1.0, False),
        ("hpl", "HPL (one node)", "hpl", "hpl_gflops", "Gflop/s", 1.0, False),
        ("clock", "FMA rate (one core)", "clock", "clock_gflops_mean", "Gflop/s", 1.0, False)]
    assert cluster.NODE_MEASURES == cluster.node_measures()
    assert cluster.all_node_metrics() == ["hpl_gflops"]


def test_rmax_held_against_the_peak_is_hpls_gflops_wherever_it_is_stored():
    assert efficiency.rmax_names() == ["hpl_gflops"]
    assert set(plausibility.rmax_metrics()) == {(d.benchmark, d.spec.name) for d in registry.drawn("hpl", "rmax")}


def test_a_figure_asked_for_by_name_takes_the_best_over_what_the_hpl_section_does():
    assert custom._best_over("hpl_gflops") == hpl.NUISANCE
    assert custom._best_over("stream_triad") is None


def test_a_tuning_studys_table_gives_each_benchmarks_declared_headline():
    found: dict[str, list] = {}
    for d in registry.drawn("tuning", "headline"):
        found.setdefault(d.benchmark, []).append((d.spec.name, *(d.use.pick or (None, None))))
    assert found == {"pingpong": [("latency_us", "bytes", "smallest"), ("pingpong_bandwidth", "bytes", "largest")],
                     "hpl": [("hpl_gflops", None, None)], "hpcc": [("hpl_gflops", None, None)],
                     "lulesh": [("lulesh_fom", None, None)]}
