"""`clusterbench import` on hostile or malformed files: each file is its own transaction.

Every case runs the real CLI under a memory and time bound (tests/hostile.py) and asserts the exit code,
that the bad file is named with its reason, that no traceback leaked, and exactly what was stored: the good
neighbours always, the bad file never, or stored as *invalid* when its figures cannot be true.

Unreadable files: the tests run as root here, and root reads a chmod 000 file, so the cases that are really
unreadable whoever runs them are a dangling symbolic link and a symbolic-link loop (open fails), plus a FIFO
(not a regular file: opening it for reading would block). The chmod 000 case runs only as a normal user.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from tests.conftest import fixture, query
from tests.hostile import assert_refused, run_bounded
from tests.imported import COUNTS_SQL, stored_runs

HERE = fixture("outputs/this-machine")
HPL = HERE / "hpl-N13440-1x1-omp2-bindnone.log"  # 4 result lines, N=13440, 1x1, 85-88 Gflop/s
STREAM = HERE / "stream-omp1.txt"
HPCC = HERE / "hpccoutf-2rank.txt"
NEIGHBOURS = {HPL.name: 4, STREAM.name: 1}  # results each good neighbour stores
BOUND_S = 30  # every case below, even the 50 MB ones, takes a few seconds


def _folder(tmp_path: Path, **bad: str | bytes) -> Path:
    """A folder with the good neighbours and the given bad files (name -> content)."""
    folder = tmp_path / "outputs"
    folder.mkdir()
    for good in (HPL, STREAM):
        shutil.copy(good, folder / good.name)
    for name, content in bad.items():
        (folder / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    return folder


def _runs(db) -> dict[str, list[tuple[str, str | None]]]:
    """Stored runs per source file name: [(status, reason)], in storing order."""
    if not Path(db).exists():
        return {}
    out: dict[str, list] = {}
    for row in stored_runs(db):
        out.setdefault(row["name"], []).append((row["status"], row["reason"]))
    return out


def _assert_neighbours_stored(db) -> None:
    runs = _runs(db)
    for name, count in NEIGHBOURS.items():
        assert [s for s, _ in runs.get(name, [])] == ["ok"] * count, (name, runs.get(name))


def _import(*args: str):
    out = run_bounded("import", *args)
    assert out.seconds < BOUND_S, f"took {out.seconds:.1f} s"
    return out


def _no_impossible_metric_stored(db) -> None:
    """No inf or nan reached the metrics table, and no value above 1e300 is valid."""
    (row,) = query(db, "SELECT COUNT(*) AS n FROM metrics WHERE value > 1e308 OR value < -1e308 OR value != value"
                       " OR (valid = 1 AND value >= 1e300)")
    assert row["n"] == 0


def _hpl_with(old: str, new: str) -> str:
    text = HPL.read_text()
    assert old in text
    return text.replace(old, new, 1)


# ---------------------------------------------------------------- bad files: skipped, neighbours stored

def test_unparsable_gflops_skips_that_file_only(tmp_path, isolated_db):
    folder = _folder(tmp_path, **{"bad.out": _hpl_with("8.7333e+01", "1.2.3")})
    out = _import(str(folder))
    assert_refused(out, 0, f"skipped {folder / 'bad.out'}: unparsable number (line 47): "
                           "could not convert string to float: '1.2.3'", "1 file(s) skipped")
    _assert_neighbours_stored(isolated_db)
    assert "bad.out" not in _runs(isolated_db)  # all of the file or nothing: its 3 good lines are not stored


def test_dangling_symlink_is_named_and_skipped(tmp_path, isolated_db):
    folder = _folder(tmp_path)
    (folder / "gone.out").symlink_to("/nonexistent/HPL.out")
    out = _import(str(folder))
    assert_refused(out, 0, f"skipped {folder / 'gone.out'}: unreadable: a symbolic link to '/nonexistent/HPL.out',"
                           " which does not resolve (No such file or directory)")
    _assert_neighbours_stored(isolated_db)
    alone = _import(str(folder / "gone.out"))  # the only file named, and it cannot be read: bad input
    assert_refused(alone, 2, "unreadable", "no file could be imported: 1 of 1 file(s) skipped")


def test_symlink_loop_is_unreadable_even_for_root(tmp_path, isolated_db):
    folder = _folder(tmp_path)
    (folder / "loop.out").symlink_to(folder / "loop.out")
    out = _import(str(folder))
    assert_refused(out, 0, f"skipped {folder / 'loop.out'}: unreadable: a symbolic link loop "
                           "(Too many levels of symbolic links)")
    _assert_neighbours_stored(isolated_db)


def test_fifo_is_not_read_and_does_not_hang(tmp_path, isolated_db):
    folder = _folder(tmp_path)
    os.mkfifo(folder / "HPL.out.fifo")  # reading it would wait forever for a writer
    out = _import(str(folder))
    assert_refused(out, 0, f"skipped {folder / 'HPL.out.fifo'}: not a regular file (a FIFO)")
    _assert_neighbours_stored(isolated_db)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file: the symlink and FIFO cases stand in")
def test_chmod_000_file_is_unreadable(tmp_path, isolated_db):
    folder = _folder(tmp_path, **{"locked.out": HPL.read_text()})
    (folder / "locked.out").chmod(0)
    out = _import(str(folder))
    assert_refused(out, 0, f"skipped {folder / 'locked.out'}: unreadable: Permission denied")
    _assert_neighbours_stored(isolated_db)


def test_binary_and_compressed_files_are_named(tmp_path, isolated_db):
    # What sits next to HPL.out files: the xhpl binary (it holds 'HPLinpack' and 'T/V' as strings), a gzip'd output.
    binary = b"\x7fELF\x02\x01\x01\x00" + os.urandom(4096) + b"HPLinpack %s T/V N NB P Q Time Gflops\0" * 10
    folder = _folder(tmp_path, **{"xhpl": binary, "HPL.out.gz": gzip.compress(HPL.read_bytes())})
    out = _import(str(folder))
    assert_refused(out, 0, f"skipped {folder / 'xhpl'}: binary data (a NUL byte at offset 7)",
                   f"skipped {folder / 'HPL.out.gz'}: compressed (gzip): decompress it first")
    _assert_neighbours_stored(isolated_db)
    assert set(_runs(isolated_db)) == set(NEIGHBOURS)


def test_empty_file(tmp_path, isolated_db):
    folder = _folder(tmp_path, **{"HPL.out.empty": b""})
    out = _import(str(folder))
    assert_refused(out, 0, f"skipped {folder / 'HPL.out.empty'}: empty file (0 bytes)")
    _assert_neighbours_stored(isolated_db)
    alone = _import(str(folder / "HPL.out.empty"))
    assert_refused(alone, 2, "empty file (0 bytes)", "no file could be imported")


def test_every_file_bad_exits_2_naming_each(tmp_path, isolated_db):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "a.out").write_text(_hpl_with("8.7333e+01", "1.2.3"))
    (folder / "b.out").write_bytes(b"")
    (folder / "c.out").write_bytes(b"\0\1\2binary")
    out = _import(str(folder))
    assert_refused(out, 2, f"skipped {folder / 'a.out'}: unparsable number", f"skipped {folder / 'b.out'}: empty",
                   f"skipped {folder / 'c.out'}: binary data", "no file could be imported: 3 of 3 file(s) skipped")
    assert _runs(isolated_db) == {}


def test_strict_exits_2_but_stores_the_good_files(tmp_path, isolated_db):
    folder = _folder(tmp_path, **{"bad.out": _hpl_with("8.7333e+01", "1.2.3")})
    out = _import(str(folder), "--strict")
    assert_refused(out, 2, f"skipped {folder / 'bad.out'}: unparsable number", "--strict: 1 file(s) skipped")
    _assert_neighbours_stored(isolated_db)


def test_json_summary_lists_skipped_files_with_reasons(tmp_path, isolated_db):
    folder = _folder(tmp_path, **{"bad.out": _hpl_with("8.7333e+01", "1.2.3"), "empty.out": b""})
    out = _import(str(folder), "--json")
    assert_refused(out, 0)
    summary = json.loads(out.stdout)
    assert summary["stored"] == 5 and summary["files"] == 4 and summary["files_imported"] == 2
    assert {s["file"]: s["reason"].split(":")[0] for s in summary["skipped"]} == {
        str(folder / "bad.out"): "unparsable number (line 47)", str(folder / "empty.out"): "empty file (0 bytes)"}
    assert "warning: 2 file(s) skipped" in out.stderr


def test_reimport_is_idempotent_and_names_the_bad_file_again(tmp_path, isolated_db):
    folder = _folder(tmp_path, **{"bad.out": _hpl_with("8.7333e+01", "1.2.3")})
    assert_refused(_import(str(folder)), 0, "5 result(s) stored")
    counts = tuple(query(isolated_db, COUNTS_SQL)[0])
    again = _import(str(folder))
    assert_refused(again, 0, "0 result(s) stored, 5 already stored", f"skipped {folder / 'bad.out'}: unparsable")
    assert tuple(query(isolated_db, COUNTS_SQL)[0]) == counts


# ---------------------------------------------------------------- values that cannot be true: stored invalid

def test_nan_in_hpcc_summary_is_stored_invalid_without_the_nan(tmp_path, isolated_db):
    text = re.sub(r"^HPL_Tflops=.*$", "HPL_Tflops=nan", HPCC.read_text(), flags=re.M)
    folder = _folder(tmp_path, **{"hpccoutf.txt": text})
    out = _import(str(folder), "--json")
    assert_refused(out, 0)
    (entry,) = [f for f in json.loads(out.stdout)["per_file"] if f["file"].endswith("hpccoutf.txt")]
    assert entry["invalid"] == 1 and "metric HPL_Tflops is not finite (nan)" in entry["invalid_reasons"]
    assert _runs(isolated_db)["hpccoutf.txt"] == [("invalid", "metric HPL_Tflops is not finite (nan)")]
    (run,) = query(isolated_db, "SELECT id, facts FROM runs WHERE benchmark='hpcc'")
    assert json.loads(run["facts"])["non_finite_metrics"] == {"HPL_Tflops": "nan"}
    assert not query(isolated_db, "SELECT 1 FROM metrics WHERE run_id=? AND name='HPL_Tflops'", run["id"])
    _assert_neighbours_stored(isolated_db)
    _no_impossible_metric_stored(isolated_db)


def test_gflops_1e999_is_invalid_never_a_valid_infinity(tmp_path, isolated_db):
    folder = _folder(tmp_path, **{"inf.out": _hpl_with("8.7333e+01", "1e999")})
    assert_refused(_import(str(folder)), 0, "9 result(s) stored", "1 invalid")
    runs = _runs(isolated_db)["inf.out"]
    assert runs[0] == ("invalid", "metric hpl_gflops is not finite (inf)") and [s for s, _ in runs[1:]] == ["ok"] * 3
    _assert_neighbours_stored(isolated_db)
    _no_impossible_metric_stored(isolated_db)


def test_gflops_1e300_is_stored_invalid_with_its_value(tmp_path, isolated_db):
    folder = _folder(tmp_path, **{"huge.out": _hpl_with("8.7333e+01", "1e300")})
    assert_refused(_import(str(folder)), 0)
    status, reason = _runs(isolated_db)["huge.out"][0]
    assert status == "invalid"
    assert "1e+300 Gflop/s from 1 process(es) is above 1e+07 Gflop/s per process" in reason
    assert "does not follow from N=13440 in 18.54 s (printed)" in reason
    (row,) = query(isolated_db, "SELECT m.valid, r.valid AS run_valid FROM metrics m JOIN runs r ON r.id = m.run_id"
                                " WHERE m.name = 'hpl_gflops' AND m.value = 1e300")
    assert (row["valid"], row["run_valid"]) == (0, 0)  # kept as evidence, never a valid figure
    _no_impossible_metric_stored(isolated_db)


def test_zero_seconds_zero_gflops_line_is_invalid(tmp_path, isolated_db):
    zero = _hpl_with("             18.54             8.7333e+01", "              0.00             0.0000e+00")
    edited_time = _hpl_with("             18.54             8.7333e+01", "              0.00             8.7333e+01")
    folder = _folder(tmp_path, **{"zero.out": zero, "zerotime.out": edited_time})
    assert_refused(_import(str(folder)), 0)
    runs = _runs(isolated_db)
    assert runs["zero.out"][0][0] == "invalid" and "0 Gflop/s is impossible" in runs["zero.out"][0][1]
    assert runs["zerotime.out"][0][0] == "invalid"
    assert "87.33 Gflop/s does not follow from N=13440 in 0.00 s (printed)" in runs["zerotime.out"][0][1]
    assert [s for s, _ in runs["zero.out"][1:]] == ["ok"] * 3


def test_a_tiny_solve_printed_as_0_00_s_stays_valid(tmp_path, isolated_db):
    """HPL prints two decimals: N=200 really takes under 5 ms (a live HPCC run printed this line)."""
    text = HPL.read_text()
    first = re.search(r"^WR11C2R4\s+13440\s+224\s+1\s+1\s+18\.54\s+8\.7333e\+01\s*$", text, re.M)
    tiny = text[:first.start()] + "WR11C2R4         200    40     1     1               0.00              7.378e+00" \
        + text[first.end():]
    folder = _folder(tmp_path, **{"tiny.out": tiny})
    assert_refused(_import(str(folder)), 0)
    assert [s for s, _ in _runs(isolated_db)["tiny.out"]] == ["ok"] * 4


def test_truncated_hpl_file_mid_number(tmp_path, isolated_db):
    text = HPL.read_text()
    cut = text[: text.index("8.5840e+01") + 4]  # the job died while HPL printed '8.5840e+01': '8.58' is left
    folder = _folder(tmp_path, **{"cut.out": cut})
    assert_refused(_import(str(folder)), 0)
    runs = _runs(isolated_db)["cut.out"]
    assert [s for s, _ in runs] == ["ok", "ok", "ok", "invalid"]
    assert "8.58 Gflop/s does not follow from N=13440" in runs[3][1] and "no residual check" in runs[3][1]


def test_rpeak_node_bounds_hpl_results(tmp_path, isolated_db):
    folder = _folder(tmp_path)
    assert_refused(_import(str(folder / HPL.name), "--rpeak-node", "5"), 0, "4 invalid")
    runs = _runs(isolated_db)[HPL.name]
    assert all(s == "invalid" and "is above 10x the Rpeak of 1 node(s)" in r for s, r in runs)
    bad = _import(str(folder), "--rpeak-node", "nan")
    assert_refused(bad, 2, "--rpeak-node must be a positive number")


def test_rpeak_node_leaves_plausible_results_valid(tmp_path, isolated_db):
    folder = _folder(tmp_path)
    assert_refused(_import(str(folder), "--rpeak-node", "100"), 0, "5 result(s) stored", "0 invalid")
    _assert_neighbours_stored(isolated_db)


# ---------------------------------------------------------------- size and shape bombs: bounded

def test_huge_single_line_file(tmp_path, isolated_db):
    folder = _folder(tmp_path, **{"one-line.out": b"x" * 50_000_000})
    out = _import(str(folder))
    assert_refused(out, 0, "5 result(s) stored", "from 3 file(s)")
    assert "not a recognised" in " ".join(out.stdout.split())
    _assert_neighbours_stored(isolated_db)


def test_million_hpcc_section_markers_parse_in_linear_time(tmp_path, isolated_db):
    """A regex search for 'Begin ... (.*?) End' restarts at every marker: 2 million markers never finished."""
    bomb = "HPC Challenge Benchmark\n" + "Begin of Summary section.Begin of HPL section.\n" * 1_000_000
    folder = _folder(tmp_path, **{"hpccoutf.txt": bomb})
    out = _import(str(folder))
    assert_refused(out, 0, "6 result(s) stored", "1 invalid")
    assert _runs(isolated_db)["hpccoutf.txt"][0][0] == "invalid"
    _assert_neighbours_stored(isolated_db)


def test_imb_calling_sequence_with_a_million_newlines(tmp_path, isolated_db):
    bomb = "#  Intel(R) MPI Benchmarks 2021.3\n# Calling sequence was:" + "\n" * 1_000_000 + "x"
    folder = _folder(tmp_path, **{"imb.out": bomb})
    out = _import(str(folder))
    assert_refused(out, 0, "5 result(s) stored")
    _assert_neighbours_stored(isolated_db)


def test_file_with_a_million_result_lines(tmp_path, isolated_db):
    text = HPL.read_text()
    head = text[: text.index("T/V                N")]
    bomb = head + "T/V                N    NB     P     Q               Time                 Gflops\n" \
        + "WR00L2L2 1 1 1 1 0.00 1.0\n" * 1_000_000
    folder = _folder(tmp_path, **{"million.out": bomb})
    out = _import(str(folder))
    assert_refused(out, 0, f"skipped {folder / 'million.out'}: more than 10,000 HPL result lines in one output")
    _assert_neighbours_stored(isolated_db)
    assert "million.out" not in _runs(isolated_db)


def test_file_larger_than_the_limit(tmp_path, isolated_db):
    folder = _folder(tmp_path)
    with open(folder / "big.out", "wb") as fh:
        fh.truncate(65 * 2**20)  # sparse: 65 MiB of NULs without using the disk
    out = _import(str(folder))
    assert_refused(out, 0, f"skipped {folder / 'big.out'}: larger than 64 MiB")
    _assert_neighbours_stored(isolated_db)


# ---------------------------------------------------------------- names and contents that are not UTF-8

def test_invalid_utf8_in_a_file_name_and_a_name_pattern(tmp_path, isolated_db):
    folder = tmp_path / "names"
    folder.mkdir()
    name = os.fsdecode(b"HPL.out.4_node_\xff\xfe.blis")  # what a Latin-1 job script once wrote
    shutil.copy(HPL, folder / name)
    out = _import(str(folder), "--name-pattern", "HPL.out.{nodes}_node_{site}.{blas}")
    assert_refused(out, 0, "4 result(s) stored", "0 invalid")
    rows = stored_runs(isolated_db)
    assert len(rows) == 4 and {r["name"] for r in rows} == {"HPL.out.4_node_\\xff\\xfe.blis"}
    params = json.loads(rows[0]["params"])
    assert (params["nodes"], params["site"], params["blas"]) == (4, "\\xff\\xfe", "blis")
    again = _import(str(folder), "--name-pattern", os.fsdecode(b"HPL.out.{nodes}_node_\xff\xfe.{blas}"))
    assert_refused(again, 0, "0 result(s) stored, 4 already stored")


def test_invalid_utf8_inside_a_good_output_is_harmless(tmp_path, isolated_db):
    text = HPL.read_bytes().replace(b"HPLinpack 2.3", b"HPLinpack 2.3 (built on h\xf6st\xff)", 1)
    folder = _folder(tmp_path, **{"latin1.out": text})
    assert_refused(_import(str(folder)), 0, "9 result(s) stored", "0 invalid")
    assert [s for s, _ in _runs(isolated_db)["latin1.out"]] == ["ok"] * 4


# ---------------------------------------------------------------- the report never ranks an impossible figure

def test_report_best_and_top500_placement_ignore_impossible_results(tmp_path, isolated_db):
    from clusterbench.analysis.select import Selection
    from clusterbench.report.build import build
    from clusterbench.report.model import Options
    from clusterbench.store.db import Store

    folder = _folder(tmp_path, **{"huge.out": _hpl_with("8.7333e+01", "1e300"),
                                  "inf.out": _hpl_with("8.7333e+01", "1e999")})
    assert_refused(_import(str(folder)), 0)
    with Store(isolated_db) as store:
        report = build(store, Selection(), Options())
    tables = {t.slug: t for s in report.sections for t in s.tables}
    best_valid = 88.087  # the fastest valid line of the fixture
    assert max(row[5] for row in tables["hpl-best"].rows) == pytest.approx(best_valid)
    summary = {row[0]: row for row in tables["energy-summary"].rows}
    assert summary["Rmax (Gflop/s)"][1] == pytest.approx(best_valid)
    rank = next(v[1] for k, v in summary.items() if "rank by Rmax" in k)
    assert str(rank).startswith("below the list")  # 88 Gflop/s; the 1e300 line would have been "1 (of 500)"
    invalid_ids = {r["id"] for r in query(isolated_db, "SELECT id FROM runs WHERE status = 'invalid'")}
    assert len(invalid_ids) == 2  # the 1e300 line (its value kept) and the 1e999 line (its inf dropped)
    listed = {i for row in tables["hpl-invalid"].rows for i in row[0]}
    assert invalid_ids <= listed  # listed apart as invalid, with their reasons


# ---------------------------------------------------------------- 2,000 good files and 3 bad ones

def test_two_thousand_good_files_and_three_bad_ones(tmp_path, isolated_db):
    """Generated from the 4-result HPL fixture: each copy's first line is re-timed (a consistent time and Gflops).
    About 5 s here (2 cores): 8,000 results, one transaction per file."""
    text = HPL.read_text()
    line = re.search(r"^(WR11C2R4\s+13440\s+224\s+1\s+1)\s+18\.54\s+8\.7333e\+01\s*$", text, re.M)
    work = (2 / 3 * 13440 ** 3 + 1.5 * 13440 ** 2) / 1e9
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(2000):
        seconds = 18.00 + i * 0.01  # 18.00 .. 37.99 s, each file different
        edited = f"{line.group(1)}  {seconds:17.2f}  {work / seconds:17.4e}"
        (folder / f"HPL.out.{i:04d}").write_text(text[:line.start()] + edited + text[line.end():])
    bad = {"HPL.out.bad-number": _hpl_with("8.7333e+01", "1.2.3"), "HPL.out.bad-binary": b"\0\1\2\3",
           "HPL.out.bad-empty": b""}
    for name, content in bad.items():
        (folder / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    started = time.monotonic()
    out = run_bounded("import", str(folder), "-q", "--json", timeout_s=600)
    seconds = time.monotonic() - started
    assert_refused(out, 0)
    summary = json.loads(out.stdout)
    print(f"\n2,003 files: {summary['stored']} results stored from {summary['files_imported']} files, "
          f"{len(summary['skipped'])} skipped, in {seconds:.1f} s")
    assert summary["stored"] == 8000 and summary["invalid"] == 0 and summary["files_imported"] == 2000
    assert sorted(s["file"] for s in summary["skipped"]) == sorted(str(folder / n) for n in bad)
    for name in bad:
        assert f"skipped {folder / name}:" in out.stderr
    (row,) = query(isolated_db, "SELECT COUNT(*) AS runs, SUM(status = 'ok') AS ok FROM runs")
    assert (row["runs"], row["ok"]) == (8000, 8000)


# ---------------------------------------------------------------- database failures (in process: injected)

def _fail_on(monkeypatch, name: str, error: Exception) -> None:
    """Make the store raise `error` while storing results of the file called `name`."""
    from clusterbench.store.db import Store

    real = Store.add_imported_runs

    def add(self, runs, artifact_name, *rest):
        if artifact_name == name:
            raise error
        return real(self, runs, artifact_name, *rest)

    monkeypatch.setattr(Store, "add_imported_runs", add)


def test_a_value_the_database_refuses_skips_that_file_only(tmp_path, isolated_db, monkeypatch):
    import sqlite3

    from clusterbench.store.db import Store
    from clusterbench.store.importer import import_paths

    folder = _folder(tmp_path)
    _fail_on(monkeypatch, STREAM.name, sqlite3.IntegrityError("NOT NULL constraint failed: metrics.value"))
    with Store(isolated_db) as store:
        report = import_paths(store, [str(folder)])
    (bad,) = report.skipped
    assert bad.path == str(folder / STREAM.name) and "the database refused a value of it" in bad.skipped
    assert [s for s, _ in _runs(isolated_db)[HPL.name]] == ["ok"] * 4 and STREAM.name not in _runs(isolated_db)


def test_a_failing_database_stops_the_import_and_keeps_the_files_before(tmp_path, isolated_db, monkeypatch):
    import sqlite3

    from clusterbench.errors import EnvironmentProblem
    from clusterbench.store.db import Store
    from clusterbench.store.importer import import_paths

    folder = _folder(tmp_path)  # imported in name order: the HPL file, then the STREAM file
    _fail_on(monkeypatch, STREAM.name, sqlite3.OperationalError("database or disk is full"))
    with pytest.raises(EnvironmentProblem) as caught, Store(isolated_db) as store:
        import_paths(store, [str(folder)])
    assert caught.value.exit_code == 1 and "disk is full" in str(caught.value)
    assert f"the files before {folder / STREAM.name} are stored" in str(caught.value)
    assert [s for s, _ in _runs(isolated_db)[HPL.name]] == ["ok"] * 4
