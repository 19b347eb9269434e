"""The registry drives import, report and `clusterbench system`: what a benchmark declares is what they do.

A benchmark class registered at test time, with its own output format and metric declarations, is
recognised by the importer (real files, real SQLite) and drawn by the report's network section in MB/s,
though no import or report code names it; unregistered, the same file is not recognised and nothing is
drawn. The built-in declarations are checked against what the parsers really store, and `clusterbench
system` reports a program clusterbench built as there, with the class's own install hints.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from tests.conftest import cli_json, fixture, query

from clusterbench.analysis.select import Selection
from clusterbench.bench import registry
from clusterbench.bench.base import Benchmark
from clusterbench.bench.declare import MetricSpec, OutputFormat, ReportUse, Result, converter
from clusterbench.bench.metrics import Metric, Outcome
from clusterbench.report.build import build
from clusterbench.report.model import Options
from clusterbench.store.db import Store
from clusterbench.store.importer import import_paths

HERE = fixture("outputs/this-machine")

TOY_OUTPUT = """# TOYNET one-way test v0.1
# bytes  latency_us  bandwidth_GB/s
0 1.50 0.000
1024 2.00 0.512
65536 10.0 6.5536
# done
"""


def _toy_split(text: str, max_results: int) -> list[Result]:
    rows = [[float(v) for v in line.split()] for line in text.splitlines() if line and not line.startswith("#")]
    out = Outcome(facts={"toy_version": "0.1"})
    for size, latency, bandwidth in rows:
        labels = {"bytes": int(size)}
        out.metrics.append(Metric("toy_latency_us", latency, "us", False, labels))
        out.metrics.append(Metric("toy_bandwidth", bandwidth, "GB/s", True, labels))
    return [Result("toynet", {"ranks": 2}, out.check_values())]


class ToyNet(Benchmark):
    """`toynet`: a benchmark that exists only in this test."""

    name = "toynet"
    output_formats = (OutputFormat("toynet", lambda text: text.startswith("# TOYNET"), _toy_split, title="TOYNET"),)
    metrics = (
        MetricSpec("toy_latency_us", "us", False, ("bytes",), uses=(ReportUse("network", "latency", "toy net"),)),
        MetricSpec("toy_bandwidth", "GB/s", True, ("bytes",), uses=(ReportUse("network", "bandwidth", "toy net"),)),
    )

    def params(self) -> dict:
        return {}

    def command(self) -> list[str]:
        return ["true"]

    def parse(self, workdir: Path) -> Outcome:
        return _toy_split((workdir / "stdout.txt").read_text(), 1)[0].outcome


@pytest.fixture
def toynet():
    registry.register(ToyNet)
    yield ToyNet
    registry.BENCHMARKS.pop(ToyNet.name, None)


def _toy_file(tmp_path: Path) -> Path:
    path = tmp_path / "outputs" / "run-17.txt"  # the name says nothing: the content is recognised
    path.parent.mkdir()
    path.write_text(TOY_OUTPUT)
    return path


def _network(store: Store):
    report = build(store, Selection(), Options())
    return next((s for s in report.sections if s.slug == "network"), None)


def test_an_unregistered_format_is_not_recognised_and_not_drawn(tmp_path, isolated_db):
    path = _toy_file(tmp_path)
    with Store(isolated_db) as store:
        report = import_paths(store, [str(path)])
        (rep,) = report.files
        assert rep.kind is None and rep.stored == 0
        assert rep.note == "not a recognised benchmark output (HPL, HPCC, HPCG, IMB, OSU, LULESH, STREAM)"
    assert query(isolated_db, "SELECT COUNT(*) FROM runs")[0][0] == 0


def test_a_registered_benchmark_is_imported_by_its_own_format(tmp_path, isolated_db, toynet):
    path = _toy_file(tmp_path)
    with Store(isolated_db) as store:
        report = import_paths(store, [str(path.parent)])
    (rep,) = report.files
    assert (rep.kind, rep.stored, rep.invalid, rep.skipped) == ("toynet", 1, 0, None)
    runs = query(isolated_db, "SELECT id, benchmark, params, source, status FROM runs")
    assert [(r["benchmark"], json.loads(r["params"]), r["source"], r["status"]) for r in runs] == [
        ("toynet", {"ranks": 2}, "import", "ok")]
    metrics = query(isolated_db, "SELECT name, value, unit, labels FROM metrics ORDER BY id")
    assert [(m["name"], m["value"], m["unit"], json.loads(m["labels"])["bytes"]) for m in metrics][:2] == [
        ("toy_latency_us", 1.5, "us", 0), ("toy_bandwidth", 0.0, "GB/s", 0)]
    with Store(isolated_db) as store:  # importing again stores nothing new
        again = import_paths(store, [str(path)])
    assert (again.files[0].stored, again.files[0].duplicates) == (0, 1)
    other = tmp_path / "notes.txt"
    other.write_text("nothing a benchmark wrote\n")
    with Store(isolated_db) as store:
        (rep,) = import_paths(store, [str(other)]).files
    assert rep.note == "not a recognised benchmark output (HPL, HPCC, HPCG, IMB, OSU, LULESH, STREAM, TOYNET)"


def test_the_report_draws_a_registered_benchmarks_declared_metrics(tmp_path, isolated_db, toynet):
    with Store(isolated_db) as store:
        import_paths(store, [str(_toy_file(tmp_path))])
        network = _network(store)
    assert network is not None
    figures = {f.slug: f for f in network.figures}
    (latency,) = figures["network-latency"].series
    (bandwidth,) = figures["network-bandwidth"].series
    # The file states no node count: no link (shared memory, a fabric) is assumed for it (issue 31).
    assert latency.label == "toy net" and bandwidth.label == latency.label
    assert [(p.x, p.y) for p in latency.points] == [(1024.0, 2.0), (65536.0, 10.0)]  # no 0 on a log axis
    # Declared in GB/s, drawn in MB/s: the section converts from the unit the benchmark declares.
    assert [(p.x, p.y) for p in bandwidth.points] == [(1024.0, pytest.approx(512.0)),
                                                      (65536.0, pytest.approx(6553.6))]
    tables = {t.slug: t for t in network.tables}
    (row,) = tables["network-latency-table"].rows
    assert row[0] == latency.label and row[1].startswith("1.5")  # the 0-byte latency, in the table only
    registry.BENCHMARKS.pop(ToyNet.name)  # the same stored runs, the declaration gone: nothing to draw
    with Store(isolated_db) as store:
        assert _network(store) is None


def test_formats_are_tried_by_priority(tmp_path, isolated_db):
    hpl_file = HERE / "hpl-N13440-1x1-omp2-bindnone.log"

    def shadow(priority: int) -> type[Benchmark]:
        fmt = OutputFormat("hpl-shadow", lambda text: "HPLinpack" in text, lambda text, limit: [],
                           priority=priority, note="claimed by the shadow format")
        return type("Shadow", (ToyNet,), {"name": "shadow", "output_formats": (fmt,), "metrics": ()})

    try:
        for priority, kind in ((-1, "hpl"), (5, "hpl-shadow")):
            registry.register(shadow(priority))
            with Store(isolated_db) as store:
                (rep,) = import_paths(store, [str(hpl_file)]).files
            assert rep.kind == kind
        assert rep.note == "claimed by the shadow format" and rep.stored == 0
        registry.register(shadow(30))  # above HPCC too
        assert registry.output_formats()[0].kind == "hpl-shadow"
    finally:
        registry.BENCHMARKS.pop("shadow", None)
    assert [f.kind for f in registry.output_formats()] == ["hpcc", "hpcg", "hpcg-log", "hpl", "imb", "osu", "lulesh",
                                                           "stream"]


def test_builtin_declarations_are_what_the_parsers_store(isolated_db):
    with Store(isolated_db) as store:
        report = import_paths(store, [str(HERE)])
    assert not report.skipped
    rows = query(isolated_db, "SELECT r.benchmark, m.name, m.unit, m.higher_is_better, m.labels FROM metrics m "
                              "JOIN runs r ON r.id = m.run_id")
    seen: set[tuple[str, str]] = set()
    for row in rows:
        specs = {s.name: s for s in registry.benchmark_class(row["benchmark"]).metrics}
        spec = specs.get(row["name"])
        if spec is None:
            # HPCC stores every summary key; it declares those its report section draws
            assert row["benchmark"] == "hpcc", f"{row['benchmark']} stores {row['name']}, which it does not declare"
            continue
        seen.add((row["benchmark"], row["name"]))
        assert (row["unit"], bool(row["higher_is_better"])) == (spec.unit, spec.higher_is_better), row["name"]
        assert set(spec.labels) <= set(json.loads(row["labels"])), row["name"]
    drawn = {(d.benchmark, d.spec.name) for section in ("network", "memory", "hpl", "hpcc", "energy")
             for d in registry.drawn(section) if d.benchmark != "pingpong"}  # ping-pong is never imported
    assert drawn and drawn <= seen, drawn - seen


def test_unit_conversions_are_one_multiplication_or_division():
    assert converter("MiB/s", "MB/s")(457.94) == 457.94 * (2**20 / 1e6)
    assert converter("MB/s", "GB/s")(12345.6) == 12345.6 / 1000.0
    assert converter("Tflop/s", "Gflop/s")(0.0871) == 0.0871 * 1000.0
    assert converter("GUP/s", "GUP/s")(0.02) == 0.02
    for bad in (("MB/s", "us"), ("MB/s", "furlongs")):
        with pytest.raises(ValueError):
            converter(*bad)


def test_system_lists_a_program_clusterbench_built_with_the_classes_install_hints(tmp_path):
    from clusterbench.bench.hpcg.benchmark import Hpcg

    cache = tmp_path / "cache"
    binary = tmp_path / "built" / "xhpcg"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\nexit 0\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    (cache / "builds").mkdir(parents=True)
    (cache / "builds" / "registry.json").write_text(json.dumps(
        [{"name": "xhpcg", "binary": str(binary), "source": "hpcg-3.1.tar.gz", "built_at": "2024-01-01T00:00:00"}]))
    env = {"CLUSTERBENCH_CACHE": str(cache), "PATH": os.defpath, "CLUSTERBENCH_PATH": "", "CLUSTERBENCH_HPCG": ""}
    listed = {b["name"]: b for b in cli_json("system", "--json", env=env)["benchmarks"]}
    assert listed["hpcg"]["available"] is True and str(binary) in listed["hpcg"]["detail"]
    assert "built by clusterbench" in listed["hpcg"]["detail"]
    assert listed["hpcg"]["install_hint"] == Hpcg.install_hint
    assert set(listed) == set(registry.BENCHMARKS)
    for name, entry in listed.items():
        assert entry["install_hint"] == getattr(registry.BENCHMARKS[name], "install_hint", ""), name
    (cache / "builds" / "registry.json").unlink()
    gone = {b["name"]: b for b in cli_json("system", "--json", env=env)["benchmarks"]}
    assert gone["hpcg"]["available"] is False and Hpcg.install_hint in gone["hpcg"]["detail"]


def test_each_benchmark_that_is_measured_declares_one_figure_of_merit_and_history_follows_it():
    """The history section follows what the benchmarks declare (bench/declare.py `merit`), one metric each: a
    benchmark that stores another's metrics (HPCC stores HPL's Rmax lines) declares them `not_merit`."""
    from clusterbench.bench.declare import FIGURE_OF_MERIT, merit, not_merit
    from clusterbench.report import history

    merits: dict[str, list[str]] = {}
    for cls in registry.registered():
        merits[cls.name] = [s.name for s in cls.metrics if FIGURE_OF_MERIT in s.uses]
    assert all(len(found) <= 1 for found in merits.values()), merits
    assert history.headlines() == {b: found[0] for b, found in merits.items() if found}
    assert history.headlines()["hpcc"] == "HPL_Tflops" and history.headlines()["hpl"] == "hpl_gflops"
    assert set(history.headlines()) >= {"hpl", "hpcc", "hpcg", "stream", "stream-binary", "imb", "osu", "lulesh"}
    assert not {"affinity", "command"} & set(history.headlines())  # nothing to follow over time
    spec = MetricSpec("x", "s", False, uses=(ReportUse("hpl", "rmax"),))
    assert not_merit(merit(spec)) == spec and FIGURE_OF_MERIT in merit(spec).uses
