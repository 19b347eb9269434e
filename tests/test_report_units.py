"""Units of the report: list placement, selections, the power meters, statistics of `compare`.

The power meters read hardware this VM does not have (no /sys/class/powercap, no BMC). They
are tested on a powercap tree laid out like the kernel's (intel-rapl:N/energy_uj,
max_energy_range_uj) and on a stand-in `ipmitool` printing the format of
`ipmitool dcmi power reading`: the only mocks here, for hardware that cannot exist in this VM.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from tests.conftest import cli, query

from clusterbench.analysis import lists
from clusterbench.analysis.compare import p_value, verdict
from clusterbench.analysis.dataset import Dataset
from clusterbench.analysis.select import parse_selection, select_runs
from clusterbench.errors import UserInputError
from clusterbench.report.figures import aggregate, size_label
from clusterbench.store.db import Store
from clusterbench.store.records import RunRecord
from clusterbench.system import power


def test_list_placement_on_bundled_editions():
    assert lists.editions() == ["2020-06", "2020-11", "2023-11", "2024-11"]
    edition, entries = lists.load("2020-06")
    assert len(entries) == 500 and entries[0].name == "Supercomputer Fugaku"
    at = lists.by_efficiency(entries, 103.41 / 65)
    assert (at.position, at.of) == (170, 206)
    assert at.above.gflops_per_watt > 103.41 / 65 > at.below.gflops_per_watt
    top = lists.by_efficiency(entries, 100.0)
    assert top.position == 1 and top.above is None and top.below.name == "MN-3"
    fugaku = lists.by_rmax(entries, 415530e3 + 1)
    assert fugaku.position == 1 and fugaku.below.rank == 1
    tiny = lists.by_rmax(entries, 1.0)
    assert tiny.position == 501 and tiny.below is None and tiny.above.rank == 500
    _, newest = lists.load()
    assert newest[0].name == "El Capitan"
    with pytest.raises(UserInputError):
        lists.load("1999-06")


def _store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "s.db")
    for i, (campaign, tags) in enumerate((("a", {"blas": "blis"}), ("a", {"blas": "openblas"}), ("b", {}))):
        store.begin_run(RunRecord(f"r{i}", "stream", {"threads": i + 1}, campaign=campaign, tags=tags))
        store.finish_run(f"r{i}", "ok", True, None, 0, 1.0, [])
    return store


def test_selection_terms_combine(tmp_path):
    store = _store(tmp_path)

    def ids(*words):
        return [r["id"] for r in select_runs(store, parse_selection(list(words), store))]

    assert ids() == ["r0", "r1", "r2"]
    assert ids("a") == ["r0", "r1"]
    assert ids("campaign:a,campaign:b") == ["r0", "r1", "r2"]
    assert ids("a", "blas=blis") == ["r0"]
    assert ids("tag:blas=openblas", "run:r1") == ["r1"]
    assert ids("r2") == ["r2"]
    assert ids("benchmark:hpl") == []
    for bad in ("nothing-here", "tag:noequals", "campaign:"):
        with pytest.raises(UserInputError):
            parse_selection([bad], store)


def test_series_labels_use_only_keys_that_split_the_runs():
    import pandas as pd

    from clusterbench.analysis import shape

    runs = {f"r{i}": {"id": f"r{i}", "benchmark": "stream", "params": {"bind_to": b, "threads": t},
                      "tags": {"block": "s"}, "campaign": "c", "facts": {}, "node_count": 1}
            for i, (b, t) in enumerate((b, t) for b in ("core", "none") for t in (1, 2))}
    metrics = pd.DataFrame([{"run_id": rid, "benchmark": "stream", "name": "stream_triad", "value": 1.0,
                             "unit": "MB/s", "labels": {}, "valid": True, "nodes": 1, "higher_is_better": True}
                            for rid in runs])
    data = Dataset(runs, metrics)
    values = shape.frame(data, data.of("stream_triad"))
    found = shape.infer(values, shape.Family(x=("threads",), series=("bind_to", "origin")))
    assert (found.x, found.series, found.facets) == ("threads", ["bind_to"], [])  # not the tag every run shares
    (panel,) = shape.draw(values, found).panels
    assert [s.label for s in panel.series] == ["core", "none"]


def test_aggregate_and_sizes():
    series = aggregate([("s", 8, 1.0, "a"), ("s", 8, 3.0, "b"), ("s", 1, 5.0, "c")])
    (s,) = series
    assert [(p.x, p.y, p.y_min, p.y_max, p.runs) for p in s.points] == [(1, 5.0, None, None, ["c"]),
                                                                        (8, 2.0, 1.0, 3.0, ["a", "b"])]
    assert [size_label(v) for v in (0, 1, 1024, 32768, 2**20 * 4)] == ["0 B", "1 B", "1 KiB", "32 KiB", "4 MiB"]


def test_compare_statistics():
    a, b = [10.0, 10.2, 9.9, 10.1], [12.0, 12.3, 11.8, 12.1]
    p = p_value(a, b)
    assert p is not None and p < 0.001
    assert verdict(a, b, p, 0.05, True) == "better" and verdict(a, b, p, 0.05, False) == "worse"
    assert verdict(a[:2], b, p_value(a[:2], b), 0.05, True).startswith("not enough repeats")
    assert p_value(a, [10.0, 10.2, 9.9, 10.1]) == pytest.approx(1.0)
    assert verdict([5.0] * 3, [5.0] * 3, p_value([5.0] * 3, [5.0] * 3), 0.05, True) == "identical samples"
    assert p_value(a, b, "mannwhitney") == pytest.approx(0.0286, abs=1e-3)


def _powercap(root: Path, energies: dict[str, int]) -> None:
    for name, uj in energies.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "energy_uj").write_text(f"{uj}\n")
        (root / name / "max_energy_range_uj").write_text("262143328850\n")


def test_rapl_meter_sums_packages_and_handles_wraparound(tmp_path):
    _powercap(tmp_path, {"intel-rapl:0": 1_000_000, "intel-rapl:1": 262143328850 - 500_000,
                         "intel-rapl:0:0": 5})  # a sub-zone: inside package 0, not counted again
    meter = power.RaplMeter([tmp_path / "intel-rapl:0", tmp_path / "intel-rapl:1"])
    meter.start()
    _powercap(tmp_path, {"intel-rapl:0": 31_000_000, "intel-rapl:1": 29_500_000})  # 30 J + 30 J (wrapped)
    reading = meter.stop()
    assert reading.source == "rapl" and reading.joules == pytest.approx(60.0)
    assert reading.watts == pytest.approx(60.0 / reading.seconds)
    power._discover.cache_clear()
    found = power.meter(str(tmp_path))
    assert isinstance(found, power.RaplMeter) and [d.name for d in found.domains] == ["intel-rapl:0", "intel-rapl:1"]
    os.environ["CLUSTERBENCH_POWER"] = "off"
    try:
        assert power.meter(str(tmp_path)) is None
    finally:
        del os.environ["CLUSTERBENCH_POWER"]


def test_ipmi_meter_parses_dcmi_power_reading(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "ipmitool"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\ncat <<'EOF'\n\n    Instantaneous power reading:                   187 Watts\n"
                    "    Minimum during sampling period:                 95 Watts\n"
                    "    Power reading state is:                   activated\nEOF\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    power._discover.cache_clear()
    meter = power.meter(str(tmp_path / "no-powercap"))
    assert isinstance(meter, power.IpmiMeter)
    meter.interval_s = 0.05
    meter.start()
    import time
    time.sleep(0.2)
    reading = meter.stop()
    assert reading.source == "ipmi" and reading.watts == 187.0
    power._discover.cache_clear()


CAMPAIGN = """\
name: powered
benchmarks:
  - benchmark: command
    params:
      command: "echo $(( $(cat {counter}) + 90000000 )) > {counter}.new && mv {counter}.new {counter} && echo rate 1.5"
      metrics: [{{name: rate, pattern: 'rate ([0-9.]+)', unit: GB/s}}]
"""


def test_a_run_stores_the_power_it_drew_and_the_report_uses_it(tmp_path, isolated_db):
    """The command itself advances the (stand-in) RAPL counter by 90 J while it runs."""
    _powercap(tmp_path / "powercap", {"intel-rapl:0": 1_000_000})
    counter = tmp_path / "powercap" / "intel-rapl:0" / "energy_uj"
    spec = tmp_path / "powered.yaml"
    spec.write_text(CAMPAIGN.format(counter=counter))
    out = cli("campaign", "run", str(spec), env={"CLUSTERBENCH_POWERCAP": str(tmp_path / "powercap")})
    assert out.returncode == 0, out.stdout + out.stderr
    rows = {r["name"]: r for r in query(isolated_db, "SELECT name, value, labels FROM metrics")}
    assert rows["energy_j"]["value"] == pytest.approx(90.0)
    assert rows["power_w"]["value"] > 0 and json.loads(rows["power_w"]["labels"])["source"] == "rapl"


def test_energy_section_takes_the_measured_power_of_the_best_run():
    import pandas as pd

    from clusterbench.report import energy
    from clusterbench.report.model import Options
    runs = {"x": {"id": "x", "benchmark": "hpl", "params": {}, "tags": {}, "facts": {}, "node_count": 1}}
    metrics = pd.DataFrame([
        {"run_id": "x", "benchmark": "hpl", "name": "hpl_gflops", "value": 103.41, "unit": "Gflop/s",
         "labels": {}, "valid": True, "nodes": 1, "higher_is_better": True},
        {"run_id": "x", "benchmark": "hpl", "name": "power_w", "value": 65.0, "unit": "W",
         "labels": {"source": "rapl"}, "valid": True, "nodes": 1, "higher_is_better": False}])
    section = energy.section(Dataset(runs, metrics), Options(top500_edition="2020-06"))
    summary = {row[0]: row for row in section.tables[0].rows}
    assert summary["power during HPL (W)"][2] == "measured during the run (rapl)"
    green = section.tables[-1]
    assert [row[0] for row in green.rows] == [169, 170, 171]


def test_a_report_over_hpl_runs_without_any_metric_lists_them(isolated_db):
    """A failed HPL run stores no metric: the HPL section must still say so, not stop the report."""
    from clusterbench.analysis.select import Selection
    from clusterbench.report.build import build
    from clusterbench.report.model import Options

    with Store(isolated_db) as store:
        store.begin_run(RunRecord("hpl-failed", "hpl", {"n": 1000, "nb": 64}))
        store.finish_run("hpl-failed", "failed", False, "exit code 1: mpirun was killed", 1, 2.0, [])
        report = build(store, Selection(), Options())
    (hpl,) = [s for s in report.sections if s.slug == "hpl"]
    assert any("hpl-failed" in str(row) for table in hpl.tables for row in table.rows)
