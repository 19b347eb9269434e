"""The report on the four studies users brought (issue 19), with default options: the figures each study's
authors drew by hand, found again in what `clusterbench report` infers from what varies.

Each study is a store built by tests/studies.py (real-format files through the real importer, or live-like
runs through the Store API); the report is built and written as `clusterbench report` does it. What the
figures must show is computed here from the stored runs themselves and from what the generator wrote into
each file (its node count, BLAS, hosts, interconnect): a point is checked against the runs it names, a
series against the configuration it stands for. So a figure that pools unlike things (1 core with 1 node,
shm with TCP) or draws an invalid result fails, whatever its labels say.
"""

from __future__ import annotations

import csv
import json
import math
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.conftest import cli, query
from tests.studies import (
    PI_RPEAK_NODE_GFLOPS,
    STFC_HPL_HOSTS,
    STFC_LINKS,
    STFC_REPEATS,
    STFC_SYSTEM,
    Study,
    hpcc_study,
    jsc_study,
    pi_study,
    stfc_study,
)

from clusterbench.analysis.select import parse_selection, select_runs
from clusterbench.analysis.stats import t95
from clusterbench.report.build import build
from clusterbench.report.model import Figure, Options, Point, Report, Section, Series
from clusterbench.report.render import write
from clusterbench.store.db import Store

MAX_SERIES_PER_PANEL = 8
MAX_PANELS = 24
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass
class Reported:
    """A study's store, the report built from it with default options, and its runs as stored."""

    study: Study
    doc: Report
    out: Path
    runs: dict[str, dict]  # id -> decoded run, with 'metrics': [(name, value, labels, valid)]

    def truth(self, run_id: str) -> dict:
        return self.study.truth_of(self.runs[run_id])

    def section(self, slug: str) -> Section:
        found = [s for s in self.doc.sections if s.slug == slug]
        assert found, f"no {slug} section in the {self.study.name} report: {[s.slug for s in self.doc.sections]}"
        return found[0]

    def value(self, run_id: str, name: str) -> float | None:
        """The run's valid value of this metric (one per run for the metrics checked here)."""
        run = self.runs[run_id]
        values = [v for n, v, _labels, ok in run["metrics"] if n == name and ok and run["valid"]]
        return values[0] if values else None

    def csv_rows(self, slug: str) -> list[dict]:
        with (self.out / f"{slug}.csv").open(newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))


def stored_runs(db: Path) -> dict[str, dict]:
    runs = {}
    for row in query(db, "SELECT * FROM runs"):
        run = dict(row)
        for key in ("params", "tags", "facts"):
            run[key] = json.loads(run[key] or "{}")
        run["metrics"] = []
        runs[run["id"]] = run
    for m in query(db, "SELECT run_id, name, value, labels, valid FROM metrics"):
        runs[m["run_id"]]["metrics"].append((m["name"], m["value"], json.loads(m["labels"]), bool(m["valid"])))
    return runs


def report_on(study: Study, root: Path) -> Reported:
    """`clusterbench report` with default options (the Pi's node Rpeak given, as imports carry no system)."""
    with Store(study.db, read_only=True) as store:
        doc = build(store, parse_selection([], store), Options(rpeak_node_gflops=study.rpeak_node_gflops))
    out = root / f"{study.name}-report"
    write(doc, out)
    return Reported(study, doc, out, stored_runs(study.db))


@pytest.fixture(scope="module")
def pi(tmp_path_factory) -> Reported:
    root = tmp_path_factory.mktemp("pi")
    return report_on(pi_study(root), root)


@pytest.fixture(scope="module")
def stfc(tmp_path_factory) -> Reported:
    root = tmp_path_factory.mktemp("stfc")
    return report_on(stfc_study(root), root)


@pytest.fixture(scope="module")
def jsc(tmp_path_factory) -> Reported:
    root = tmp_path_factory.mktemp("jsc")
    return report_on(jsc_study(root), root)


@pytest.fixture(scope="module")
def hpcc(tmp_path_factory) -> Reported:
    root = tmp_path_factory.mktemp("hpcc")
    return report_on(hpcc_study(root), root)


# ---------------------------------------------------------------- reading figures and tables

def measured_points(figures: list[Figure]) -> list[tuple[Figure, str, Series, Point]]:
    """(figure, panel title, series, point) of every measured point of these figures, all panels."""
    return [(fig, panel.title, s, p) for fig in figures for panel in fig.all_panels() for s in panel.series
            if not s.reference for p in s.points]


def figures_by_x(section: Section, word: str) -> list[Figure]:
    found = [f for f in section.figures if word.lower() in f.x_label.lower()]
    assert found, f"no figure against {word!r} in {section.slug}: {[(f.slug, f.x_label) for f in section.figures]}"
    return found


def numbers(row: list) -> list[float]:
    """Every number a table row shows, in cells that are numbers or text ('12.3 (11.9-12.8)', '+4.1%')."""
    out = []
    for cell in row:
        if isinstance(cell, bool) or cell is None:
            continue
        if isinstance(cell, int | float):
            out.append(float(cell))
        elif isinstance(cell, str):
            out += [float(x) for x in _NUMBER.findall(cell)]
    return out


def shows(row: list, value: float, rel: float = 2e-3, abs_: float = 0.0) -> bool:
    return any(math.isclose(x, value, rel_tol=rel, abs_tol=abs_) for x in numbers(row))


def best_by(report: Reported, key, metric: str = "hpl_gflops") -> dict[tuple, tuple[float, str]]:
    """key(run id) -> (best valid value, its run), over the runs with that metric; key None: not counted."""
    best: dict[tuple, tuple[float, str]] = {}
    for run_id in report.runs:
        value = report.value(run_id, metric)
        k = key(run_id) if value is not None else None
        if k is not None and (k not in best or value > best[k][0]):
            best[k] = (value, run_id)
    return best


def check_best_points(figures: list[Figure], report: Reported, key, x_of) -> dict[tuple, float]:
    """Every measured point stands for one configuration `key` and is its best valid value at x; each
    configuration is one line (not split by a spelling, a file or a grid)."""
    # A flagged run (truncated, suspect, ...) is drawn marked, never a best (issue 31): it is no point here.
    flagged = {i for fig in figures for panel in fig.all_panels() for s in panel.series for p in s.marked
               for i in p.runs}
    expected = best_by(report, lambda i: None if i in flagged else (*key(i), x_of(i)))
    found = {}
    lines: dict[tuple, set[tuple]] = defaultdict(set)
    for fig, panel, series, point in measured_points(figures):
        configs = {key(i) for i in point.runs}
        where = f"{fig.slug} [{panel}] {series.label!r} at x={point.x:g}"
        assert len(configs) == 1, f"{where} pools unlike runs: {sorted(configs, key=str)}"
        config = configs.pop()
        lines[config].add((fig.slug, panel, series.label))
        assert (*config, point.x) in expected, f"{where}: no valid run of {config}"
        best = expected[(*config, point.x)][0]
        assert not set(point.runs) & flagged, f"{where}: a flagged run is part of a point"
        if point.bar == "ci95":  # 3 or more repeats of one configuration compete as their mean (issue 31)
            values = [report.value(i, "hpl_gflops") for i in point.runs]
            assert len(values) >= 3 and point.y == pytest.approx(sum(values) / len(values), rel=1e-9), where
            assert point.y <= best and point.y_min < point.y < point.y_max, where
        else:
            assert point.y == pytest.approx(best, rel=1e-9), f"{where}: not the best of {config}"
        found[(*config, point.x)] = point.y
    missing = sorted(set(expected) - set(found), key=str)
    assert not missing, f"configurations not drawn in {[f.slug for f in figures]}: {missing[:8]}"
    split = {config: drawn for config, drawn in lines.items() if len(drawn) > 1}
    assert not split, f"configurations drawn as several lines: {split}"
    return found


# ---------------------------------------------------------------- every study: readable figures

@pytest.mark.parametrize("name", ["pi", "stfc", "jsc", "hpcc"])
def test_every_figure_has_at_most_8_series_per_panel(name, request):
    report: Reported = request.getfixturevalue(name)
    figures = [f for s in report.doc.sections for f in s.figures]
    assert figures, f"the {name} report draws no figure"
    for fig in figures:
        panels = fig.all_panels()
        assert 1 <= len(panels) <= MAX_PANELS, f"{fig.slug}: {len(panels)} panels"
        assert fig.has_data(), fig.slug
        for panel in panels:
            lines = [s.label for s in panel.series if not s.reference]
            assert len(lines) <= MAX_SERIES_PER_PANEL, f"{fig.slug} [{panel.title}]: {len(lines)} series {lines}"
            assert len(set(lines)) == len(lines), f"{fig.slug} [{panel.title}]: two series share a label {lines}"
        assert (report.out / f"{fig.slug}.svg").is_file() and (report.out / f"{fig.slug}.csv").is_file()


# ---------------------------------------------------------------- Pi: HPL 2.3 on a Raspberry Pi 4 cluster

def pi_layout(report: Reported):
    """(node count, ranks, BLAS, tuning) of a run: 1 core, 1 node, 2 nodes..., serial or OpenMP."""
    def key(run_id: str) -> tuple:
        truth, params = report.truth(run_id), report.runs[run_id]["params"]
        return truth["nodes"], params["ranks"], truth["blas"], truth["tuning"]
    return key


def test_pi_rmax_against_nb_per_blas_for_1_core_1_node_2_nodes_serial_and_openmp(pi):
    figures = figures_by_x(pi.section("hpl"), "NB")
    found = check_best_points(figures, pi, pi_layout(pi), lambda i: float(pi.runs[i]["params"]["nb"]))
    layouts = {(nodes, ranks, blas) for nodes, ranks, blas, _tuning, _nb in found}
    for wanted in ((1, 1, "blis-serial"), (1, 4, "blis-serial"), (2, 8, "openblas-serial"),
                   (1, 1, "openblas-openmp"), (2, 2, "openblas-openmp"), (4, 16, "blis-serial")):
        assert wanted in layouts, f"{wanted} (nodes, ranks, BLAS) has no line of its own: {sorted(layouts)}"
    for fig in figures:
        assert "best" in fig.caption.lower(), f"{fig.slug}: the caption does not say points are bests: {fig.caption!r}"


def test_pi_rmax_against_nodes_per_blas_under_rpeak_and_a_fraction_of_it(pi):
    figures = figures_by_x(pi.section("hpl"), "node")

    def per_blas(run_id: str) -> tuple:  # best over everything else: NB, grid, variant, N, ranks
        truth = pi.truth(run_id)
        return truth["blas"], truth["tuning"]

    found = check_best_points(figures, pi, per_blas, lambda i: float(pi.truth(i)["nodes"]))
    assert {blas for blas, _tuning, _x in found} == {"blis-serial", "openblas-serial", "openblas-openmp", "blis"}
    references = [s for fig in figures for panel in fig.all_panels() for s in panel.series if s.reference]
    for fraction in (1.0, 0.75):
        lines = [s for s in references
                 if {(p.x, round(p.y, 6)) for p in s.points} >= {(x, round(fraction * PI_RPEAK_NODE_GFLOPS * x, 6))
                                                                 for x in (1.0, 2.0, 4.0)}]
        assert lines, f"no reference line at {fraction:.0%} of Rpeak: {[(s.label, s.points) for s in references]}"


def test_pi_baseline_against_mtu_9000_table(pi):
    hpl = pi.section("hpl")
    tables = [t for t in hpl.tables if re.search(r"baseline|optimi[sz]", f"{t.slug} {t.title}", re.I)]
    assert tables, f"no baseline-against-optimisation table: {[t.title for t in hpl.tables]}"
    best = best_by(pi, lambda i: (pi.truth(i)["nodes"], pi.truth(i)["tuning"]) if pi.truth(i)["blas"] == "blis"
                   else None)
    assert {nodes for nodes, _ in best} == {2, 4}
    for nodes in (2, 4):
        base, tuned = best[(nodes, "")][0], best[(nodes, "mtu_9000")][0]
        change = 100 * (tuned - base) / base
        rows = [row for t in tables for row in t.rows
                if any(str(c).strip() == "blis" for c in row)
                and any(str(c).strip() in (str(nodes), f"{nodes} nodes") for c in row)]
        assert rows, f"no row for blis on {nodes} nodes in {[t.rows for t in tables]}"
        assert any(shows(r, base) and shows(r, tuned) and shows(r, change, rel=0, abs_=0.15) for r in rows), (
            f"{nodes} nodes: wanted baseline {base:.4g}, mtu_9000 {tuned:.4g}, change {change:+.2f}% in {rows}")


def test_pi_csv_beside_each_figure_names_the_winning_grid_and_variant(pi):
    for fig in figures_by_x(pi.section("hpl"), "NB") + figures_by_x(pi.section("hpl"), "node"):
        rows = [r for r in pi.csv_rows(fig.slug) if r.get("kind") == "measured"]
        assert rows, fig.slug
        for row in rows:
            ids = [i for i in row["run_ids"].split(";") if i]
            values = {i: pi.value(i, "hpl_gflops") for i in ids}
            assert None not in values.values(), f"{fig.slug}: an invalid run behind {row}"
            winner = max(values, key=values.__getitem__)
            params = pi.runs[winner]["params"]
            cells = {str(c).strip() for c in row.values()}
            assert float(row[fig.y_label]) == values[winner], f"{fig.slug}: {row}"
            assert params["tv"] in cells, f"{fig.slug}: the winning variant {params['tv']} not in {row}"
            assert f"{params['p']}x{params['q']}" in cells, f"{fig.slug}: the winning grid not in {row}"


def test_pi_invalid_results_are_never_drawn(pi):
    invalid = {i for i, run in pi.runs.items() if not run["valid"]}
    truth = [pi.truth(i) for i in invalid]
    assert len(invalid) == 3 and sum(1 for t in truth if t["failed_line"] is not None) == 1  # 2 truncated, 1 FAILED
    drawn = {i for fig in pi.section("hpl").figures for *_, point in measured_points([fig]) for i in point.runs}
    assert drawn and not drawn & invalid
    for fig in pi.section("hpl").figures:
        assert not any(i in (pi.out / f"{fig.slug}.csv").read_text() for i in invalid), fig.slug


def test_pi_selection_by_any_spelling_and_grids_stored_as_lists(pi, tmp_path):
    for run_id, run in pi.runs.items():
        truth = pi.truth(run_id)
        assert run["params"]["blas"] == truth["blas"], (run["params"], truth["as_written"])
        assert run["params"].get("tuning", "") == truth["tuning"], run["params"]
        assert run["params"]["grids"] == truth["grids"], run["params"]
    wanted = {i for i in pi.runs if pi.truth(i)["blas"] == "openblas-serial"}
    assert {pi.truth(i)["as_written"] for i in wanted} == {"openblas_serial", "openblas-serial"}
    with Store(pi.study.db, read_only=True) as store:
        chosen = {run["id"] for run in select_runs(store, parse_selection(["blas=openblas_serial"], store))}
    assert chosen == wanted
    out = cli("report", "blas=openblas_serial", "--rpeak-node", "48", "--out", str(tmp_path / "r"),
              env={"CLUSTERBENCH_DB": str(pi.study.db)})
    assert out.returncode == 0, out.stdout + out.stderr
    with (tmp_path / "r" / "runs.csv").open(newline="", encoding="utf-8") as fh:
        assert {row["runs"] for row in csv.DictReader(fh)} == wanted


# ---------------------------------------------------------------- STFC: IMB and HPL in LSF job reports

def stfc_link(report: Reported):
    """(system, hosts, interconnect) of an IMB run: what must never be pooled."""
    def key(run_id: str) -> tuple:
        truth = report.truth(run_id)
        return truth["system"], truth["hosts"], truth["interconnect"]
    return key


def test_stfc_latency_and_bandwidth_per_interconnect_and_host_count_never_pooled(stfc):
    network = stfc.section("network")
    key = stfc_link(stfc)
    assert network.figures
    for fig in network.figures:
        drawn = []
        for panel in fig.all_panels():
            for series in (s for s in panel.series if not s.reference):
                runs = {i for p in series.points for i in p.runs}
                configs = {key(i) for i in runs}
                where = f"{fig.slug} [{panel.title}] {series.label!r}"
                assert len(configs) == 1, f"{where} pools {sorted(configs, key=str)}"
                smallest = min(series.points, key=lambda p: p.x)
                if smallest.y_min is not None and smallest.y_min > 0:
                    assert smallest.y_max / smallest.y_min <= 1.5, (
                        f"{where} at {smallest.x:g} B spans {smallest.y_min}-{smallest.y_max}")
                drawn.append(runs)
        for (interconnect, hosts) in STFC_LINKS:
            runs = {i for i in stfc.runs if stfc.truth(i).get("kind") == "imb" and not stfc.truth(i).get("real")
                    and key(i) == (STFC_SYSTEM, hosts, interconnect)}
            assert len(runs) == STFC_REPEATS
            assert runs in drawn, f"{fig.slug}: no line of its own for {interconnect} on {hosts} host(s)"


def test_stfc_hpl_per_host_count_read_from_the_lsf_reports(stfc):
    figures = figures_by_x(stfc.section("hpl"), "node")
    found = check_best_points(figures, stfc, lambda i: (stfc.truth(i)["system"],),
                              lambda i: float(stfc.truth(i)["hosts"]))
    assert {x for system, x in found if system == STFC_SYSTEM} == {float(h) for h in STFC_HPL_HOSTS}
    failed = [i for i in stfc.runs if stfc.truth(i).get("failed")]
    assert len(failed) == 1 and not stfc.runs[failed[0]]["valid"]
    listed = [t for t in stfc.section("hpl").tables if "nvalid" in t.title]
    assert any(failed[0] in json.dumps(t.rows) for t in listed), "the killed job is not listed apart"


# ---------------------------------------------------------------- JSC: STREAM against threads per binding

def test_jsc_stream_triad_against_threads_per_binding_strategy(jsc):
    figures = jsc.section("memory").figures
    assert figures
    triad: dict[tuple, list[float]] = defaultdict(list)
    for run_id in jsc.runs:
        truth = jsc.truth(run_id)
        triad[(truth["strategy"], float(truth["threads"]))].append(jsc.value(run_id, "stream_triad") / 1000)
    found = set()
    for fig, panel, series, point in measured_points(figures):
        strategies = {jsc.truth(i)["strategy"] for p in series.points for i in p.runs}
        assert len(strategies) == 1, f"{fig.slug} [{panel}] {series.label!r} pools {strategies}"
        key = (strategies.pop(), point.x)
        assert {float(jsc.truth(i)["threads"]) for i in point.runs} == {point.x}
        values = triad[key]
        assert point.y == pytest.approx(sum(values) / len(values), rel=1e-9), key
        if point.bar == "ci95":  # 3 repeats of one configuration: the 95% t-interval of their mean (issue 31)
            half = t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
            assert len(values) >= 3 and (point.y_min, point.y_max) == (
                pytest.approx(point.y - half), pytest.approx(point.y + half)), key
        else:
            assert (point.y_min, point.y_max) == (pytest.approx(min(values)), pytest.approx(max(values))), key
        found.add(key)
    assert found == set(triad), f"not drawn: {sorted(set(triad) - found)}"


# ---------------------------------------------------------------- HPCC: per configuration, SMP efficiency, balance

def hpcc_configs(report: Reported) -> dict[tuple[int, int], list[str]]:
    configs: dict[tuple[int, int], list[str]] = defaultdict(list)
    for run_id in report.runs:
        truth = report.truth(run_id)
        configs[(truth["nodes"], truth["ppn"])].append(run_id)
    return configs


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def test_hpcc_summary_per_configuration_with_its_balance(hpcc):
    configs = hpcc_configs(hpcc)
    assert len(configs) == 4 and all(len(ids) == 3 for ids in configs.values())
    tables = [t for t in hpcc.section("hpcc").tables if any(row and row[0] == "runs" for row in t.rows)]
    assert tables, "no HPCC table names the runs of each configuration"
    table = tables[0]
    runs_row = next(row for row in table.rows if row[0] == "runs")
    hpl_row = next(row for row in table.rows if str(row[0]).startswith("HPL"))
    balance_row = next(row for row in table.rows if str(row[0]).startswith("Balance"))
    for (nodes, ppn), ids in configs.items():
        columns = [j for j, cell in enumerate(runs_row) if isinstance(cell, list) and set(cell) == set(ids)]
        assert len(columns) == 1, f"{nodes} node(s) x {ppn} per node: no column of its own in {runs_row}"
        j = columns[0]
        hpl = [1000 * hpcc.value(i, "HPL_Tflops") for i in ids]
        assert numbers([hpl_row[j]])[0] == pytest.approx(mean(hpl), rel=1e-3), (nodes, ppn, hpl_row[j])
        procs = nodes * ppn
        if procs == 1:  # no pair to measure: HPCC leaves -1 where the ring bandwidth would be
            assert balance_row[j] is None or numbers([balance_row[j]])[0] >= 0, balance_row[j]
            continue
        balance = [hpcc.value(i, "RandomlyOrderedRingBandwidth_GBytes") / (1000 * hpcc.value(i, "HPL_Tflops") / procs)
                   for i in ids]
        assert numbers([balance_row[j]])[0] == pytest.approx(mean(balance), rel=1e-3), (nodes, ppn, balance_row[j])


def test_hpcc_smp_efficiency_two_processes_per_node_against_one(hpcc):
    configs = hpcc_configs(hpcc)
    rows = [row for t in hpcc.section("hpcc").tables for row in t.rows
            if re.search("smp", f"{t.slug} {t.title}", re.I) or re.search("smp", str(row[0]), re.I)]
    assert rows, f"no SMP efficiency in the HPCC section: {[t.title for t in hpcc.section('hpcc').tables]}"

    def per_process(run_id: str, metric: str) -> float:
        value = hpcc.value(run_id, metric)
        return value if metric.startswith("Star") else value / hpcc.value(run_id, "CommWorldProcs")

    for metric, label in (("StarSTREAM_Triad", r"STREAM Triad.*star"), ("HPL_Tflops", r"^(SMP\W*)?HPL\b")):
        candidates = [row for row in rows if re.search(label, str(row[0]), re.I)]
        assert candidates, f"no SMP efficiency row for {metric}: {[row[0] for row in rows]}"
        for nodes in (1, 2):
            two = mean([per_process(i, metric) for i in configs[(nodes, 2)]])
            one = mean([per_process(i, metric) for i in configs[(nodes, 1)]])
            efficiency = 100 * two / one
            assert any(shows(row, efficiency, rel=0, abs_=1.0) for row in candidates), (
                f"{metric} on {nodes} node(s): SMP efficiency {efficiency:.1f}% not in {candidates}")
