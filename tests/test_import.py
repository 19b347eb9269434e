"""`clusterbench import`: every fixture recognised by content, values as in the files, idempotent.

The this-machine outputs ship in tests/fixtures; the cloud and LSF ones (no licence) only exist where ../shared
does, so the tests reading them skip elsewhere and the whole-folder counts follow the folder actually imported.
"""

import json
import re
import shutil
from collections import Counter

import pytest
from tests.conftest import HAS_SHARED, LOCAL_FIXTURES, OUTPUTS, SHARED_FIXTURES, cli, fixture, query
from tests.imported import COUNTS_SQL, runs_of_output, stored_runs

HERE = fixture("outputs/this-machine")
# Runs stored per outputs folder: one per HPL result line (7 + 4 here), one per IMB section, one per LSF report.
RUNS_PER_GROUP = {"this-machine": {"hpl": 11, "hpcc": 1, "hpcg": 1, "imb": 2, "osu": 2, "stream": 2},
                  "hpl-cloud": {"hpl": 3}, "imb-cloud": {"imb": 3}, "lsf-scd": {"hpl": 1, "imb": 1}}


def _metrics(db, source_name: str, name: str) -> list:
    ids = runs_of_output(db, source_name)
    return query(db, "SELECT m.value, m.labels, m.valid, r.params, r.status FROM metrics m JOIN runs r ON r.id=m.run_id"
                     f" WHERE r.id IN ({','.join('?' * len(ids))}) AND m.name=? ORDER BY m.id", *ids, name)


def test_import_all_fixtures_twice(isolated_db):
    first = cli("import", str(OUTPUTS))
    assert first.returncode == 0, first.stderr
    n_files = sum(1 for p in OUTPUTS.rglob("*") if p.is_file())
    assert f"from {n_files} file(s)" in first.stdout
    groups = {p.name for p in OUTPUTS.iterdir() if p.is_dir()}
    assert groups == (set(RUNS_PER_GROUP) if HAS_SHARED else {"this-machine"})
    expected = sum((Counter(RUNS_PER_GROUP[g]) for g in groups), Counter())
    runs = query(isolated_db, "SELECT benchmark, COUNT(*) AS c FROM runs GROUP BY benchmark")
    assert {r["benchmark"]: r["c"] for r in runs} == expected
    assert "HPCG log file" in " ".join(first.stdout.split())
    counts = query(isolated_db, COUNTS_SQL)[0]
    second = cli("import", str(OUTPUTS))
    already = f"0 result(s) stored, {expected.total()} already stored"
    assert second.returncode == 0 and already in " ".join(second.stdout.split())
    assert tuple(query(isolated_db, COUNTS_SQL)[0]) == tuple(counts)


@pytest.fixture
def imported(isolated_db):
    out = cli("import", str(OUTPUTS), "-q")
    assert out.returncode == 0, out.stderr
    return isolated_db


def _assert_every_hpl_line_stored(db, path) -> None:
    lines = re.findall(r"^(W\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.e+-]+)\s*$",
                       path.read_text(), re.M)
    stored = _metrics(db, path.name, "hpl_gflops")
    assert len(stored) == len(lines) > 0
    for (tv, n, nb, p, q, _t, gflops), row in zip(lines, stored, strict=True):
        params = json.loads(row["params"])
        assert (params["tv"], params["n"], params["nb"], params["p"], params["q"]) == (tv, int(n), int(nb),
                                                                                      int(p), int(q))
        assert row["value"] == pytest.approx(float(gflops)) and row["valid"] == 1


def test_hpl_every_result_line_is_a_run_with_the_values_of_the_file(imported):
    for path in [HERE / "hpl-nbsweep-N13440-1x2.log", HERE / "hpl-N13440-1x1-omp2-bindnone.log"]:
        _assert_every_hpl_line_stored(imported, path)


def test_hpl_cloud_result_lines_are_runs_with_the_values_of_the_files(imported):
    for path in fixture("outputs/hpl-cloud").iterdir():
        _assert_every_hpl_line_stored(imported, path)
    cloud = _metrics(imported, "20170324_015001.out", "hpl_time")[0]
    assert cloud["value"] == pytest.approx(1996.04)


def test_imb_cloud_rows_latency_and_peak(imported):
    expected = {"20170322_154501.out": (1, 0.27, 6831.94, 2097152, 4478.11),
                "20170323_020501.out": (2, 60.83, 457.94, 2097152, 443.96),
                "20170323_040501.out": (2, 55.21, 441.89, 1048576, 423.57)}
    for name, (hosts, latency, peak, peak_at, last) in expected.items():
        text = fixture(f"outputs/imb-cloud/{name}").read_text()
        rows = re.findall(r"^\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s*$", text, re.M)
        assert len(rows) == 26
        bw = _metrics(imported, name, "imb_bandwidth")
        assert [r["value"] for r in bw] == [float(r[3]) for r in rows]
        assert json.loads(bw[-1]["labels"])["bytes"] == 16777216 and bw[-1]["value"] == last
        (lat,) = _metrics(imported, name, "latency_us")
        (pk,) = _metrics(imported, name, "peak_bandwidth")
        assert lat["value"] == latency and pk["value"] == peak and json.loads(pk["labels"])["bytes"] == peak_at
        params = json.loads(lat["params"])
        assert (params["test"], params["ranks"], params["hosts"]) == ("PingPong", 2, hosts)


def test_imb_oversubscribed_latency_is_stored_as_measured(imported):
    oversub = _metrics(imported, "imb-pingpong-oversub-samecore.txt", "latency_us")[0]
    assert oversub["value"] == 4000.0  # pathological but real: stored as measured


def test_osu_stream_hpcg_hpcc_values(imported):
    text = (HERE / "osu_latency-bindcore-r1.txt").read_text()
    rows = re.findall(r"^(\d+)\s+([\d.]+)$", text, re.M)
    lat = _metrics(imported, "osu_latency-bindcore-r1.txt", "osu_latency_us")
    assert [(json.loads(r["labels"])["bytes"], r["value"]) for r in lat] == [(int(s), float(v)) for s, v in rows]
    bw = re.findall(r"^(\d+)\s+([\d.]+)$", (HERE / "osu_bw-bindcore-r1.txt").read_text(), re.M)
    (peak,) = _metrics(imported, "osu_bw-bindcore-r1.txt", "peak_bandwidth")
    assert peak["value"] == max(float(v) for _, v in bw)

    for name, threads in (("stream-omp1.txt", 1), ("stream-omp2.txt", 2)):
        text = (HERE / name).read_text()
        triad = float(re.search(r"^Triad:\s+([\d.]+)", text, re.M).group(1))
        (row,) = _metrics(imported, name, "stream_triad")
        assert row["value"] == triad and json.loads(row["params"])["threads"] == threads and row["valid"] == 1

    text = (HERE / "HPCG-Benchmark_3.1_2rank_nx64_rt60.txt").read_text()
    rating = float(re.search(r"GFLOP/s rating of=([\d.]+)", text).group(1))
    (row,) = _metrics(imported, "HPCG-Benchmark_3.1_2rank_nx64_rt60.txt", "hpcg_gflops")
    params = json.loads(row["params"])
    assert row["value"] == rating and (params["ranks"], params["nx"]) == (2, 64)
    facts = json.loads(query(imported, "SELECT facts FROM runs WHERE benchmark='hpcg'")[0]["facts"])
    assert facts["list_eligible"] is False

    (row,) = _metrics(imported, "hpccoutf-2rank.txt", "HPL_Tflops")
    params = json.loads(row["params"])
    assert row["value"] == 0.085421 and (params["n"], params["nb"], params["p"], params["q"]) == (13440, 224, 1, 2)


def test_name_pattern_tags_and_conflicts(tmp_path, isolated_db):
    target = tmp_path / "HPL.out.8_node_52416_180_2x2.blis_serial"
    shutil.copy(fixture("outputs/hpl-cloud/20170327_035001.out"), target)
    out = cli("import", str(tmp_path / "HPL.out.*"), "--tag", "system=pi4-cluster", "--tag", "rack=3",
              "--name-pattern", "HPL.out.{nodes}_node_{n}_{nb}_{grids}.{blas}")
    assert out.returncode == 0, out.stderr
    (run,) = query(isolated_db, "SELECT params, tags, facts FROM runs")
    params, tags, facts = (json.loads(run[k]) for k in ("params", "tags", "facts"))
    assert params["nodes"] == 8 and params["blas"] == "blis-serial" and params["grids"] == ["2x2"]
    assert facts["as_written"] == {"blas": "blis_serial"}  # the canonical name is stored, the spelling kept
    assert params["n"] == 44640 and params["nb"] == 180  # the output wins over the file name
    assert facts["file_name_conflicts"] == {"n": 52416}
    assert tags == {"system": "pi4-cluster", "rack": 3}


def test_truncated_and_failed_results_are_stored_invalid(tmp_path, isolated_db):
    text = (HERE / "hpl-nbsweep-N13440-1x2.log").read_text()
    first = text.index("||Ax-b||")
    failed = text[:first] + text[first:].replace("PASSED", "FAILED", 1)
    (tmp_path / "failed.out").write_text(failed)
    cut = text[: text.index("WR11C2R4       13440   160") + 80]
    (tmp_path / "truncated.out").write_text(cut)
    (tmp_path / "notes.txt").write_text("nothing to see here\n")
    out = cli("import", str(tmp_path))
    assert out.returncode == 0
    assert "not a recognised benchmark output" in " ".join(out.stdout.split())
    statuses = stored_runs(isolated_db)
    by_file: dict = {}
    for row in statuses:
        by_file.setdefault(row["name"], []).append(row["status"])
    assert by_file["failed.out"].count("invalid") == 1 and by_file["failed.out"].count("ok") == 6
    assert by_file["truncated.out"] == ["ok", "ok", "ok", "invalid"]
    stats = json.loads(cli("results", "--benchmark", "hpl", "--metric", "hpl_gflops", "--group-by", "nb",
                           "--stat", "n,mean", "--format", "json").stdout)
    assert sum(s["n_invalid"] for s in stats) == 2


def test_bad_inputs_exit_2(tmp_path):
    assert cli("import", str(tmp_path / "missing")).returncode == 2
    assert cli("import", str(HERE), "--tag", "novalue").returncode == 2  # an importable folder: the tag is bad


def test_our_copies_are_the_shared_files():
    """tests/fixtures/outputs must stay byte-identical to the shared corpus it was copied from."""
    if not HAS_SHARED:
        pytest.skip("needs ../shared/fixtures to compare our copies with (present in CI)")
    ours = LOCAL_FIXTURES / "outputs" / "this-machine"
    theirs = SHARED_FIXTURES / "outputs" / "this-machine"
    assert sorted(p.name for p in ours.iterdir()) == sorted(p.name for p in theirs.iterdir())
    for path in ours.iterdir():
        assert path.read_bytes() == (theirs / path.name).read_bytes(), path.name
