"""Figures defined by what varies (analysis/shape.py): inference on small stores written through the real
Store API, the figures, tables and CSV the report makes of them, the CLI options and report.yaml, and the
HTML bounds at scale.

Every store here is real SQLite written by Store.begin_run/finish_run with Metric values shaped like what
the parsers store (HPL: one value per T/V line labelled tv, n, nb, p, q; IMB: a value per message size
labelled test, bytes); what a figure must show is computed in the test from the values written.
"""

from __future__ import annotations

import csv
import itertools
import random
from pathlib import Path

import numpy as np
import pytest
from tests.conftest import cli

from clusterbench.analysis import shape
from clusterbench.analysis.dataset import load
from clusterbench.analysis.select import Selection
from clusterbench.bench.metrics import Metric
from clusterbench.errors import UserInputError
from clusterbench.report import render
from clusterbench.report.build import build
from clusterbench.report.figures import csv_text
from clusterbench.report.model import Figure, Options, Panel, Point, Report, Section, Series, Table
from clusterbench.report.spec import parse_spec
from clusterbench.store.db import Store
from clusterbench.store.records import RunRecord

GRIDS = {1: [(1, 4), (2, 2)], 2: [(1, 8), (2, 4)], 4: [(2, 8), (4, 4)]}
BLAS = ("blis-serial", "openblas-serial")
NBS = (32, 64, 128, 256)
VARIANTS = ("WR00L2L2", "WR11C2R4")
NS = (8000, 12000)


def _run(store: Store, run_id: str, benchmark: str, params: dict, metrics: list[Metric], tags: dict | None = None,
         valid: bool = True, reason: str | None = None) -> None:
    store.begin_run(RunRecord(run_id, benchmark, params, campaign="c", tags=tags or {}))
    store.finish_run(run_id, "ok" if valid else "invalid", valid, reason, 0, 1.0, metrics)


def hpl_store(path: Path, seed: int = 3, tuned: bool = False) -> dict[str, tuple[dict, float]]:
    """An NB sweep like the Pi study's: 3 node counts x 2 BLAS x 2 grids x 2 variants x 2 N x 4 NB,
    one HPL line each. Returns run id -> (its labels and params, Rmax)."""
    rng = random.Random(seed)
    truth = {}
    with Store(path) as store, store.batch():
        for i, (nodes, blas, nb, n, tv) in enumerate(itertools.product(GRIDS, BLAS, NBS, NS, VARIANTS)):
            for p, q in GRIDS[nodes]:
                run_id = f"hpl-{i}-{p}x{q}"
                value = nodes * (9 if blas.startswith("openblas") else 7) * (nb / 256) ** 0.3 * rng.uniform(0.8, 1.2)
                labels = {"tv": tv, "n": n, "nb": nb, "p": p, "q": q}
                params = {"nodes": nodes, "blas": blas, "n": n, "nb": nb, "p": p, "q": q, "ranks": p * q}
                _run(store, run_id, "hpl", params, [Metric("hpl_gflops", value, "Gflop/s", True, labels)])
                truth[run_id] = (params | labels, value)
        if tuned:  # the Pi study's `blis.mtu_9000`: the same BLAS with a tuning, at two node counts
            for nodes, nb in itertools.product((1, 2), NBS):
                run_id = f"tuned-{nodes}-{nb}"
                p, q = GRIDS[nodes][0]
                labels = {"tv": "WR00L2L2", "n": 8000, "nb": nb, "p": p, "q": q}
                params = {"nodes": nodes, "blas": "blis-serial", "tuning": "mtu_9000", "n": 8000, "nb": nb, "p": p,
                          "q": q, "ranks": p * q}
                value = nodes * 7 * 1.1
                _run(store, run_id, "hpl", params, [Metric("hpl_gflops", value, "Gflop/s", True, labels)])
                truth[run_id] = (params | labels, value)
    return truth


def _report(path: Path, options: Options | None = None) -> Report:
    with Store(path, read_only=True) as store:
        return build(store, Selection(), options or Options())


def _figure(report: Report, slug: str) -> Figure:
    return next(f for s in report.sections for f in s.figures if f.slug == slug)


def _table(report: Report, slug: str) -> Table:
    return next(t for s in report.sections for t in s.tables if t.slug == slug)


def _csv(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


# ---------------------------------------------------------------- HPL


def test_hpl_nb_sweep_is_one_line_per_blas_one_panel_per_node_count_best_over_the_rest(tmp_path):
    db = tmp_path / "s.db"
    truth = hpl_store(db)
    report = _report(db)
    fig = _figure(report, "hpl-rmax-vs-nb")
    panels = fig.all_panels()
    assert [p.title for p in panels] == ["1 node", "2 nodes", "4 nodes"]
    for panel, nodes in zip(panels, GRIDS, strict=True):
        assert [s.label for s in panel.series] == list(BLAS)
        for series in panel.series:
            assert [p.x for p in series.points] == list(NBS)
            for point in series.points:
                group = {rid: v for rid, (k, v) in truth.items()
                         if k["nodes"] == nodes and k["blas"] == series.label and k["nb"] == point.x}
                assert len(group) == len(GRIDS[nodes]) * len(VARIANTS) * len(NS)  # 8 values behind a point
                winner = max(group, key=group.get)
                assert point.y == group[winner] and point.runs == [winner]
                labels = truth[winner][0]
                assert point.extra == {"grid": f"{labels['p']}x{labels['q']}", "tv": labels["tv"],
                                       "n": labels["n"], "best of": 8}
    assert "P x Q, T/V variant and N" in fig.caption and "one panel per node count" in fig.caption
    assert "one line per BLAS" in fig.caption
    # the CSV beside it: a panel column, the winner's grid, variant and N, plain numbers
    out = tmp_path / "out"
    render.write(report, out)
    rows = _csv(out / "hpl-rmax-vs-nb.csv")
    assert len(rows) == 3 * 2 * 4 and {r["panel"] for r in rows} == {"1 node", "2 nodes", "4 nodes"}
    for row in rows:
        (labels, value), = [truth[row["run_ids"]]]
        assert float(row["Rmax (Gflop/s)"]) == value and row["grid"] == f"{labels['p']}x{labels['q']}"
        assert row["tv"] == labels["tv"] and row["n"] == str(labels["n"]) and row["best of"] == "8"
    assert "np." not in (out / "hpl-rmax-vs-nb.csv").read_text()


def test_hpl_rmax_against_nodes_is_one_line_per_blas_under_rpeak_and_the_best_table_per_blas(tmp_path):
    db = tmp_path / "s.db"
    truth = hpl_store(db)
    report = _report(db, Options(rpeak_node_gflops=40.0, rpeak_fraction=0.5))
    fig = _figure(report, "hpl-rmax-vs-nodes")
    (panel,) = fig.all_panels()
    measured = [s for s in panel.series if not s.reference]
    assert [s.label for s in measured] == list(BLAS)
    for series in measured:
        for point in series.points:
            best = max(v for k, v in truth.values() if k["nodes"] == point.x and k["blas"] == series.label)
            assert point.y == best and point.extra["best of"] == 4 * len(GRIDS[int(point.x)]) * 4
    references = {s.label: [(p.x, p.y) for p in s.points] for s in panel.series if s.reference}
    assert references == {"Rpeak": [(1.0, 40.0), (2.0, 80.0), (4.0, 160.0)],
                          "50% of Rpeak": [(1.0, 20.0), (2.0, 40.0), (4.0, 80.0)]}
    best = _table(report, "hpl-best")
    assert [(r[0], r[4]) for r in best.rows] == [(n, f"hpl, {b}") for n in GRIDS for b in BLAS]
    for row in best.rows:
        (run_id,) = row[-1]
        assert row[5] == truth[run_id][1] and row[6] == pytest.approx(100 * row[5] / (40.0 * row[0]))


def test_an_invalid_value_is_never_drawn_or_best(tmp_path):
    db = tmp_path / "s.db"
    truth = hpl_store(db)
    with Store(db) as store:  # the best line of 2 nodes / openblas / NB 64 gets a FAILED residual
        group = {r: v for r, (k, v) in truth.items() if (k["nodes"], k["blas"], k["nb"]) == (2, BLAS[1], 64)}
        bad = max(group, key=group.get)
        _run(store, bad + "-x", "hpl", {"nodes": 2, "blas": BLAS[1]},
             [Metric("hpl_gflops", 1e6, "Gflop/s", True, {"tv": "WR00L2L2", "n": 8000, "nb": 64, "p": 1, "q": 8},
                     valid=False)], valid=False, reason="HPL residual FAILED")
    report = _report(db)
    point = next(p for s in _figure(report, "hpl-rmax-vs-nb").all_panels()[1].series if s.label == BLAS[1]
                 for p in s.points if p.x == 64)
    assert point.y == group[bad] and bad + "-x" not in point.runs
    assert [r[0] for r in _table(report, "hpl-invalid").rows] == [[bad + "-x"]]


def test_baseline_against_optimisation_table_for_a_tuning(tmp_path):
    db = tmp_path / "s.db"
    truth = hpl_store(db, tuned=True)
    table = _table(_report(db), "hpl-baseline-0")
    assert table.columns[2] == "tuning"
    rows = {(r[0], r[1]): r for r in table.rows}
    assert set(rows) == {(1, "blis-serial"), (2, "blis-serial")}  # openblas has no tuned runs: no row
    for (nodes, blas), row in rows.items():
        # The baseline is the best over the configurations the tuned runs also ran (N 8000, WR00L2L2, the first
        # grid): never a baseline at another N, variant or grid (issue 31).
        p, q = GRIDS[nodes][0]
        base = max(v for k, v in truth.values() if k["nodes"] == nodes and k["blas"] == blas and "tuning" not in k
                   and (k["n"], k["tv"], k["p"], k["q"]) == (8000, "WR00L2L2", p, q))
        assert row[2] == "mtu_9000" and row[3] == pytest.approx(nodes * 7.7) and row[4] == base
        assert row[5] == pytest.approx(100 * (row[3] - base) / base)


# ---------------------------------------------------------------- network


def network_store(path: Path) -> None:
    """IMB PingPong over shm on 1 host, TCP and InfiniBand on 2, 2 repeats each: 0-byte latency 0.2, 30
    and 1.5 us. The same message sizes, never pooled."""
    base = {"shm": (1, 0.2, 8000.0), "tcp": (2, 30.0, 110.0), "infiniband": (2, 1.5, 6000.0)}
    with Store(path) as store:
        for (interconnect, (hosts, latency, bandwidth)), repeat in itertools.product(base.items(), range(2)):
            metrics = []
            for size in (0, 1024, 65536, 1 << 20):
                jitter = 1 + 0.01 * repeat
                labels = {"test": "PingPong", "bytes": size}
                metrics.append(Metric("imb_time_us", latency * jitter + size / bandwidth, "us", False, labels))
                if size:
                    metrics.append(Metric("imb_bandwidth", bandwidth * jitter / 1.048576, "MiB/s", True, labels))
            metrics.append(Metric("imb_time_us", 99.0, "us", False, {"test": "Sendrecv", "bytes": 0}))
            _run(store, f"imb-{interconnect}-{repeat}", "imb",
                 {"hosts": hosts, "ranks": 2, "test": "PingPong", "interconnect": interconnect}, metrics)


def test_network_never_pools_interconnects_or_host_counts(tmp_path):
    db = tmp_path / "s.db"
    network_store(db)
    report = _report(db)
    (panel,) = _figure(report, "network-latency").all_panels()
    assert sorted(s.label for s in panel.series) == ["IMB PingPong, 1 node, shm", "IMB PingPong, 2 nodes, infiniband",
                                                     "IMB PingPong, 2 nodes, tcp"]
    rows = {r[0]: r for r in _table(report, "network-latency-table").rows}
    # 0 B: only shm's two repeats; every cell of repeats says n and CV (issue 31)
    assert rows["IMB PingPong, 1 node, shm"][1].startswith("0.201 (0.2-0.202), n=2, CV 0.7%")
    assert rows["IMB PingPong, 2 nodes, tcp"][1].startswith("30.15 (30-30.3), n=2, CV 0.7%")
    assert rows["IMB PingPong, 2 nodes, infiniband"][1].startswith("1.508 (1.5-1.515), n=2, CV 0.7%")
    assert all(99.0 not in (p.y for p in s.points) for s in panel.series)  # Sendrecv is not PingPong
    bandwidth = _figure(report, "network-bandwidth").all_panels()[0]
    shm = next(s for s in bandwidth.series if "shm" in s.label)
    assert shm.points[0].y == pytest.approx(8000.0 * 1.005)  # MiB/s converted back to MB/s, mean of 2


def test_more_than_eight_lines_become_small_multiples_and_one_key_with_too_many_a_table(tmp_path):
    db = tmp_path / "s.db"
    with Store(db) as store:
        for interconnect, mpi, size in itertools.product(("shm", "tcp", "infiniband"), ("a", "b", "c", "d"), (1, 2)):
            _run(store, f"r-{interconnect}-{mpi}-{size}", "imb", {"interconnect": interconnect, "ranks": 2},
                 [Metric("imb_time_us", 1.0 + size, "us", False, {"test": "PingPong", "bytes": size})],
                 tags={"mpi": mpi})
    fig = _figure(_report(db), "network-latency")
    panels = fig.all_panels()
    assert 1 < len(panels) <= shape.MAX_PANELS
    assert all(len([s for s in p.series if not s.reference]) <= shape.MAX_SERIES for p in panels)
    assert sum(len(p.series) for p in panels) == 12  # every combination still drawn, none pooled
    assert "were split into panels" in fig.caption
    # one key alone with 12 values: a table instead of a legend wall
    db2 = tmp_path / "s2.db"
    with Store(db2) as store:
        for k, size in itertools.product(range(12), (1, 2)):
            _run(store, f"r-{k}-{size}", "imb", {"ranks": 2},
                 [Metric("imb_time_us", 1.0 + k, "us", False, {"test": "PingPong", "bytes": size})],
                 tags={"placement": f"p{k:02d}"})
    report = _report(db2)
    assert not [f for s in report.sections for f in s.figures if f.slug == "network-latency"]
    table = _table(report, "network-latency-points")
    assert len(table.rows) == 24 and "12 lines in one panel" in table.note


def test_panels_beyond_the_bound_go_to_a_table(tmp_path):
    db = tmp_path / "s.db"
    with Store(db) as store:
        for nodes, nb in itertools.product(range(1, 16), (64, 128)):
            _run(store, f"r{nodes}-{nb}", "hpl", {"nodes": nodes, "blas": "blis-serial"},
                 [Metric("hpl_gflops", nodes * nb / 10, "Gflop/s", True, {"tv": "W", "n": 1000, "nb": nb, "p": 1,
                                                                            "q": nodes})])
    report = _report(db)
    fig = _figure(report, "hpl-rmax-vs-nb")
    assert [p.title for p in fig.all_panels()] == [f"{n} node{'s' if n > 1 else ''}" for n in range(1, 13)]
    rest = _table(report, "hpl-rmax-vs-nb-points")
    assert sorted({r[0] for r in rest.rows}) == ["13 nodes", "14 nodes", "15 nodes"] and len(rest.rows) == 6


def test_inference_units_on_a_frame():
    """STREAM threads per pinning (the JSC study): x = threads x tasks, a line per binding, repeats averaged."""
    runs, records = {}, []
    for bind, threads, repeat in itertools.product(("close", "spread"), (1, 2, 4), range(3)):
        rid = f"{bind}-{threads}-{repeat}"
        runs[rid] = {"id": rid, "benchmark": "stream", "params": {"threads": threads, "places": "cores",
                                                                   "proc_bind": bind, "n": 10**7},
                     "tags": {}, "facts": {}, "node_count": 1, "campaign": "jsc"}
        records.append({"run_id": rid, "benchmark": "stream", "name": "stream_triad", "unit": "MB/s",
                        "value": 1000.0 * threads * (2 if bind == "spread" else 1) + repeat, "labels": {},
                        "valid": True, "nodes": 1, "higher_is_better": True})
    import pandas as pd

    from clusterbench.analysis.dataset import Dataset
    data = Dataset(runs, pd.DataFrame(records))
    values = shape.frame(data, data.of("stream_triad"))
    found = shape.infer(values, shape.Family(x=("workers", "threads")))
    assert (found.x, found.series, found.facets, found.combine, found.repeats) == (
        "workers", ["proc_bind"], [], shape.MEAN, True)
    drawing = shape.draw(values, found)
    (panel,) = drawing.panels
    spread = next(s for s in panel.series if s.label == "spread")
    # 3 repeats of one configuration (values m-1, m, m+1: std 1): the mean with its 95% t-interval, no longer
    # the min-max range (issue 31, point 10)
    half = 4.303 / 3 ** 0.5
    assert [(p.x, p.y, p.y_min, p.y_max, p.bar, p.n) for p in spread.points] == [
        (x, m, pytest.approx(m - half), pytest.approx(m + half), "ci95", 3)
        for x, m in ((1.0, 2001.0), (2.0, 4001.0), (4.0, 8001.0))]
    with pytest.raises(UserInputError, match="no key 'nosuch'"):
        shape.infer(values, shape.Family(x=("threads",)), shape.Choice(series=("nosuch",)))
    with pytest.raises(UserInputError, match="holds text"):
        shape.infer(values, shape.Family(x=("threads",)), shape.Choice(x="proc_bind"))
    chosen = shape.infer(values, shape.Family(x=("threads",)), shape.Choice(series=(), facets=("proc_bind",)))
    assert (chosen.series, chosen.facets, chosen.chosen) == ([], ["proc_bind"], True)


# ---------------------------------------------------------------- the CLI and report.yaml


def test_cli_options_override_the_inferred_figure(tmp_path, isolated_db):
    truth = hpl_store(isolated_db)
    out = tmp_path / "r"
    result = cli("report", "--out", str(out), "--x", "nb", "--series", "nodes", "--facet", "blas")
    assert result.returncode == 0, result.stderr
    rows = _csv(out / "hpl-rmax-vs-nb.csv")
    assert {r["panel"] for r in rows} == set(BLAS) and {r["series"] for r in rows} == {"1 node", "2 nodes", "4 nodes"}
    assert not (out / "hpl-rmax-vs-nodes.csv").exists()  # the same figure twice is drawn once
    mean = cli("report", "--out", str(tmp_path / "m"), "--mean")
    assert mean.returncode == 0, mean.stderr
    rows = _csv(tmp_path / "m" / "hpl-rmax-vs-nb.csv")
    assert "best of" not in rows[0] and all(r["n_runs"] == "8" and r["y_min"] and r["y_max"] for r in rows)
    for row in rows:  # the mean of the 8 values behind each point (grids x variants x N)
        ids = row["run_ids"].split(";")
        assert float(row["Rmax (Gflop/s)"]) == pytest.approx(sum(truth[i][1] for i in ids) / len(ids))
    bad = cli("report", "--out", str(tmp_path / "b"), "--series", "blas,colour")
    assert bad.returncode == 2 and "no key 'colour'" in bad.stderr and "blas" in bad.stderr and "nb" in bad.stderr
    both = cli("report", "--out", str(tmp_path / "b"), "--best-over", "grid", "--mean")
    assert both.returncode == 2 and "exclude each other" in both.stderr
    unknown = cli("report", "--out", str(tmp_path / "b"), "--metric", "nosuch_metric", "--x", "nb")
    assert unknown.returncode == 2 and "hpl_gflops" in unknown.stderr  # lists the stored metrics
    many = cli("report", "--out", str(tmp_path / "b"), "--series", ",".join(f"k{i}" for i in range(9)))
    assert many.returncode == 2 and "more than 8" in many.stderr


GOOD_SPEC = """\
figures:
  - metric: hpl_gflops
    x: n
    series: blas
    facet: [nodes]
    best_over: [grid, tv, nb]
    title: Rmax against N
  - metric: hpl_gflops
    x: nodes
    series: [blas]
    mean: true
"""


def test_report_yaml_draws_its_figures_and_locates_its_mistakes(tmp_path, isolated_db):
    hpl_store(isolated_db)
    spec = tmp_path / "report.yaml"
    spec.write_text(GOOD_SPEC)
    out = tmp_path / "r"
    result = cli("report", "--out", str(out), "--spec", str(spec))
    assert result.returncode == 0, result.stderr
    first = _csv(out / "figure-1.csv")
    assert {r["panel"] for r in first} == {"1 node", "2 nodes", "4 nodes"} and {float(r["problem size N"])
                                                                               for r in first} == set(NS)
    assert {r["series"] for r in first} == set(BLAS) and all(r["grid"] and r["nb"] for r in first)
    second = _csv(out / "figure-2.csv")
    assert all(r["y_min"] and r["y_max"] for r in second)  # a mean over 32 values, with its range
    assert "Rmax against N" in (out / "report.html").read_text()
    spec.write_text("figures:\n  - metric: hpl_gflops\n    x: nb\n    series: [blas, nosuch]\n")
    bad = cli("report", "--out", str(tmp_path / "b"), "--spec", str(spec))
    assert bad.returncode == 2 and f"{spec}:4: figures[0].series: series: no key 'nosuch'" in bad.stderr
    assert "blas" in bad.stderr and "tv" in bad.stderr  # the keys there are


SPEC_MISTAKES = [
    ("figures:\n  - metric: hpl_gflops\n    colour: red\n", 3, "figures[0].colour: unknown key"),
    ("figures:\n  - metric: hpl_gflops\n    x: nb\n    series: [blas, nosuch]\n", 4,
     "figures[0].series: series: no key 'nosuch'"),
    ("figures:\n  - metric: hpl_gflops\n    x: blas\n", 3, "figures[0].x: x: 'blas' holds text"),
    ("figures:\n  - metric: hpl_gflops\n  - metric: no_such_metric\n", 3, "figures[1].metric: no values"),
    ("figures:\n  - metric: hpl_gflops\n    mean: true\n    best_over: [grid]\n", 2, "exclude each other"),
    ("figures:\n  - x: nb\n", 2, "figures[0].metric: this required key is missing"),
    ("figures:\n  - metric: hpl_gflops\n    labels: {test: PingPong}\n", 3, "figures[0].labels"),
    ("figures:\n  - metric: hpl_gflops\n    facet: [a, b, c, d, e, f, g, h, i]\n", 3, "at most 8"),
    ("figures:\n  - metric: hpl_gflops\n    series: ['@value']\n", 3, "figures[0].series[0]"),
    ("figures: [\n", 2, "not valid YAML"),
    ("figures:\n" + "  - metric: m\n" * 51, 1, "at most 50"),
    ("- metric: m\n", 1, "a mapping with figures:"),
]


@pytest.mark.parametrize(("text", "line", "message"), SPEC_MISTAKES)
def test_report_yaml_mistakes_name_file_line_and_field(text, line, message, tmp_path):
    db = tmp_path / "s.db"
    with Store(db) as store:
        _run(store, "a", "hpl", {"nodes": 1, "blas": "blis"},
             [Metric("hpl_gflops", 1.0, "Gflop/s", True, {"tv": "W", "n": 100, "nb": 64, "p": 1, "q": 1})])
    with pytest.raises(UserInputError) as caught:
        figures = parse_spec(text, "report.yaml")
        _report(db, Options(figures=figures))
    assert caught.value.exit_code == 2
    assert str(caught.value).startswith(f"report.yaml:{line}: ") and message in str(caught.value), str(caught.value)


def test_parse_spec_reads_comma_lists_and_remembers_lines():
    (choice,) = parse_spec("figures:\n  - metric: imb_time_us\n    series: interconnect, nodes\n"
                           "    labels: {test: PingPong}\n", "r.yaml")
    assert choice.series == ("interconnect", "nodes") and choice.labels == {"test": "PingPong"}
    assert choice.where["series"] == "r.yaml:3" and choice.where["labels"] == "r.yaml:4"


# ---------------------------------------------------------------- CSV and HTML at scale


def test_csv_cells_are_plain_numbers_whatever_numpy_gave():
    table = Table("t", "t", ["a", "b", "c", "d", "runs"],
                  [[np.float64(53.859375), np.int64(3), np.float32(0.5), np.float64("nan"), ["r1"]]])
    assert render.table_csv(table).splitlines()[1] == "53.859375,3,0.5,,r1"
    fig = Figure("f", "t", "x", "y", [], panels=[Panel("p", [Series("s", [
        Point(np.float64(64.0), np.float64(1.25), np.float64(1.0), np.float64(1.5), ["r1"],
              {"n": np.int64(8000), "grid": "=1x2"})])])])
    text = csv_text(fig)
    # the empty cells: n_values, repeats, cv, bar, flags, tied_with, high_cv (unknown for a point made by hand)
    assert "np." not in text and text.splitlines()[1] == "p,s,measured,64.0,1.25,1.0,1.5,1,r1,,,,,,,,8000,'=1x2"
    assert render.html_cells([np.float64(2.5), np.int64(7)]) == [{"text": "2.5", "numeric": True},
                                                                 {"text": "7", "numeric": True}]


def test_html_lists_at_most_500_runs_linked_first_and_truncates_long_tables(tmp_path):
    runs = Table("runs", "Runs", ["runs", "benchmark", "flags"], [[[f"r{i:04d}"], "hpl", ""] for i in range(1200)])
    long = Table("long", "Long", ["i", "runs"], [[i, [f"r{1199 - i:04d}"]] for i in range(300)])
    report = Report("t", "all", "now", "db", [Section("s", "S", tables=[long])], runs)
    render.write(report, tmp_path)
    html = (tmp_path / "report.html").read_text()
    listed = html.count('<tr id="run-')
    assert listed == render.MAX_APPENDIX_RUNS
    for i in range(render.MAX_HTML_ROWS):  # the 200 rows shown link to runs the appendix lists
        assert f'id="run-r{1199 - i:04d}"' in html and f'href="#run-r{1199 - i:04d}"' in html
    assert "r0999" not in html  # row 200 of the long table is not shown, nor its run listed
    assert 'id="run-r0000"' in html  # the appendix is filled up with the first runs linked nowhere
    assert "200 of 300 rows shown" in html and "500 of 1200 rows shown" in html
    assert len(_csv(tmp_path / "runs.csv")) == 1200 and len(_csv(tmp_path / "long.csv")) == 300
    assert "First 200 of 300 rows" in (tmp_path / "report.md").read_text()


def test_runs_table_flags_truncated_and_invalid_runs(tmp_path, isolated_db):
    with Store(isolated_db) as store:
        _run(store, "ok-1", "hpl", {"nodes": 1}, [Metric("hpl_gflops", 5.0, "Gflop/s", True, {"nb": 64})])
        _run(store, "cut-1", "hpl", {"nodes": 1}, [Metric("hpl_gflops", 6.0, "Gflop/s", True, {"nb": 128})],
             reason="output truncated before the summary")
        _run(store, "bad-1", "hpl", {"nodes": 1}, [], valid=False, reason="HPL residual FAILED")
    result = cli("report", "--out", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    flags = {r["runs"]: r["flags"] for r in _csv(tmp_path / "r" / "runs.csv")}
    assert flags == {"ok-1": "", "cut-1": "truncated", "bad-1": "invalid"}


def test_dataset_run_keys_hold_params_tags_and_derived_keys(tmp_path):
    db = tmp_path / "s.db"
    with Store(db) as store:
        _run(store, "a", "hpl", {"nodes": 2, "grids": ["1x4", "2x2"], "blas": "blis", "env": {"X": "1"}},
             [Metric("hpl_gflops", 1.0, "Gflop/s", True, {"nb": 64, "p": 2, "q": 2})], tags={"system": "pi"})
    with Store(db, read_only=True) as store:
        data = load(store, Selection(), {"hpl_gflops"})
    keys = data.run_keys().loc["a"].to_dict()
    assert keys["grids"] == "1x4,2x2" and keys["tag:system"] == "pi" and keys["system"] == "pi"
    assert keys["nodes"] == 2 and keys["benchmark"] == "hpl" and "env" not in keys
    values = shape.frame(data, data.of("hpl_gflops"))
    row = values.iloc[0]
    assert (row["grid"], row["ppn"], row["workers"], row["nb"]) == ("2x2", 2.0, 4.0, 64)
    assert shape.resolve(values, "system", "series") == "system"
    assert shape.value_text("bytes", 32768) == "32 KiB" and shape.value_text("nodes", 1.0) == "1 node"
    assert shape.value_text("tag:placement", "close") == "placement=close"
    assert shape.value_text("tuning", None) == "tuning not stated"


# ---------------------------------------------------------------- HPCC


def test_hpcc_configurations_and_smp_efficiency_per_process_against_one_per_node(tmp_path):
    """HPL and ring bandwidth of the whole job; StarDGEMM per process; latency lower-is-better."""
    db = tmp_path / "s.db"
    hpl = {(1, 1): 10.0, (1, 2): 16.0, (2, 1): 19.0, (2, 2): 30.0}  # Gflop/s of the whole job
    dgemm = {(1, 1): 10.0, (1, 2): 9.0, (2, 1): 10.0, (2, 2): 8.5}  # per process
    latency = {(1, 1): 2.0, (1, 2): 2.5, (2, 1): 20.0, (2, 2): 25.0}
    with Store(db) as store:
        for (nodes, ppn), repeat in itertools.product(hpl, range(2)):
            ranks, jitter = nodes * ppn, 1 + 0.01 * repeat
            # threads stated: an SMP efficiency against ranks of unknown threads is refused (issue 31)
            _run(store, f"hpcc-{nodes}-{ppn}-{repeat}", "hpcc",
                 {"nodes": nodes, "ranks": ranks, "threads": 1, "p": 1, "q": ranks},
                 [Metric("HPL_Tflops", hpl[(nodes, ppn)] * jitter / 1000, "Tflop/s"),
                  Metric("StarDGEMM_Gflops", dgemm[(nodes, ppn)] * jitter, "Gflop/s"),
                  Metric("MinPingPongLatency_usec", latency[(nodes, ppn)], "us", False),
                  Metric("RandomlyOrderedRingBandwidth_GBytes", 0.5, "GB/s"),
                  Metric("CommWorldProcs", ranks, "")])
    report = _report(db)
    summary = _table(report, "hpcc-summary")
    assert summary.columns[2:] == ["1 node x 1 per node, 1x1", "1 node x 2 per node, 1x2",
                                   "2 nodes x 1 per node, 1x2", "2 nodes x 2 per node, 1x4"]
    hpl_row = next(r for r in summary.rows if r[0] == "HPL")
    assert hpl_row[2] == "10.05 +- 0.0707 (n=2, CV 0.7%)"  # mean of 10.0 and 10.1 Gflop/s, from Tflop/s
    balance = next(r for r in summary.rows if r[0].startswith("Balance"))
    assert balance[2].startswith(f"{0.5 / (10.05 / 1):.4g}")  # mean of 0.5 / 10.0 and 0.5 / 10.1 byte/flop
    smp = _table(report, "hpcc-smp-efficiency")
    assert smp.columns == ["metric", "1 node x 2 per node, 1x2", "2 nodes x 2 per node, 1x4"]
    rows = {r[0]: r[1:] for r in smp.rows}
    assert rows["HPL"] == [pytest.approx(100 * (16 / 2) / 10, abs=0.05), pytest.approx(100 * (30 / 4) / (19 / 2),
                                                                                      abs=0.05)]
    assert rows["DGEMM per process (star)"] == [pytest.approx(90.0, abs=0.05), pytest.approx(85.0, abs=0.05)]
    assert rows["Ping-pong latency, min"] == [pytest.approx(80.0), pytest.approx(80.0)]  # 2.0 / 2.5: turned round
    assert rows["runs"][0] == ["hpcc-1-1-0", "hpcc-1-1-1", "hpcc-1-2-0", "hpcc-1-2-1"]


def test_a_figure_asked_for_splits_on_what_a_value_measured_never_on_its_residual():
    """HPL stores each line's residual and start time as labels beside T/V, N, NB, P and Q: a figure of
    hpl_gflops asked for in report.yaml once made one panel per residual. Only declared labels are keys."""
    from clusterbench.report.custom import _label_keys

    keys = _label_keys(shape.Choice(metric="hpl_gflops"))
    assert {"nb", "n", "p", "q", "tv"} <= set(keys) and not {"residual", "start", "end"} & set(keys)
    assert "bytes" in _label_keys(shape.Choice(metric="pingpong_time_us", labels={"bytes": "0"}))
    assert _label_keys(shape.Choice(metric="no_such_metric")) is None
