"""Import says what it could not read and can be corrected (issue 31, Why 7 and 8, Deliver 6 and 7).

Every case imports real fixture files (tests/fixtures/outputs/this-machine, copied into a tmp folder under
the names a study would give them) with the real command line into a tmp database, and reads back what
was stored. Expected values are read from the files themselves, never typed in twice.
"""

from __future__ import annotations

import os
import re
import shutil
from datetime import UTC, datetime

from tests.conftest import cli, cli_json, fixture, query
from tests.imported import stored_runs

MACHINE = fixture("outputs/this-machine")
HPL_SWEEP = MACHINE / "hpl-nbsweep-N13440-1x2.log"  # 7 results, 2 ranks on a 1x2 grid
HPCC = MACHINE / "hpccoutf-2rank.txt"
HPCG = MACHINE / "HPCG-Benchmark_3.1_2rank_nx64_rt60.txt"
GOOD_PATTERN = "HPL.out.{nodes}_node_{n}.{blas}"
SWAPPED_PATTERN = "HPL.out.{n}_node_{nodes}.{blas}"  # the mistake: node count and N read the wrong way round


def _runs(db) -> list[dict]:
    import json

    keys = ("id", "params", "tags", "facts", "valid", "reason", "started_at", "ended_at", "duration_s")
    rows = [{k: run[k] for k in keys} for run in sorted(stored_runs(db), key=lambda run: run["id"])]
    out = []
    for r in rows:
        run = dict(r)
        for key in ("params", "tags", "facts"):
            run[key] = json.loads(run[key])
        out.append(run)
    return out


def _flat(text: str) -> str:
    return " ".join(text.split())


def _outputs_folder(tmp_path, count: int):
    """`count` distinct real output files of this machine (a variant with one more trailing newline is
    another file, with the same results), none named like an HPL study's file, plus a README."""
    folder = tmp_path / "outputs"
    folder.mkdir()
    real = sorted(p for p in MACHINE.iterdir() if p.name != "hpcg-log-nx64.txt")
    for i in range(count):
        source = real[i % len(real)]
        (folder / f"{i:02d}-{source.name}").write_bytes(source.read_bytes() + b"\n" * (i // len(real)))
    (folder / "README.txt").write_text("What these files are.\n")
    return folder


# ---------------------------------------------------------------- names that do not match --name-pattern

def test_names_that_do_not_match_the_pattern_are_counted_and_listed(tmp_path, isolated_db):
    folder = _outputs_folder(tmp_path, 13)
    shutil.copy(HPL_SWEEP, folder / "HPL.out.2_node_13440.blis")  # the one name that fits
    out = cli("import", str(folder), "--name-pattern", GOOD_PATTERN)
    assert out.returncode == 0, out.stderr
    text = _flat(out.stdout)
    assert f"13 output file(s) do not match --name-pattern '{GOOD_PATTERN}'" in text
    assert "and 3 more" in text  # 10 names listed, then the count of the rest
    assert "README.txt" not in text.split("do not match")[1]  # not an output: no mismatch
    summary = cli_json("import", str(folder), "--name-pattern", GOOD_PATTERN, "--json")
    assert summary["name_mismatches"] == 13 and len(summary["name_mismatch_files"]) == 10
    assert not any(f.endswith("HPL.out.2_node_13440.blis") for f in summary["name_mismatch_files"])
    by_file = {os.path.basename(f["file"]): f for f in summary["per_file"]}
    assert by_file["HPL.out.2_node_13440.blis"]["name_mismatch"] is False
    assert by_file["README.txt"]["name_mismatch"] is False
    matched = [r for r in _runs(isolated_db) if r["params"].get("nodes") == 2]
    assert len(matched) == 7 and all(r["params"]["blas"] == "blis" for r in matched)


def test_strict_refuses_mismatching_names_before_storing_anything(tmp_path, isolated_db):
    folder = _outputs_folder(tmp_path, 3)
    shutil.copy(HPL_SWEEP, folder / "HPL.out.2_node_13440.blis")
    out = cli("import", str(folder), "--name-pattern", GOOD_PATTERN, "--strict")
    assert out.returncode == 2, out.stdout + out.stderr
    err = _flat(out.stderr)
    assert "--strict: 3 output file(s) do not match --name-pattern" in err and "nothing was imported" in err
    assert "Traceback" not in out.stderr
    assert not isolated_db.exists() or query(isolated_db, "SELECT count(*) FROM runs")[0][0] == 0
    fitting = tmp_path / "fitting"
    fitting.mkdir()
    shutil.copy(HPL_SWEEP, fitting / "HPL.out.2_node_13440.blis")
    (fitting / "notes.txt").write_text("not an output: its name need not fit\n")
    ok = cli("import", str(fitting), "--name-pattern", GOOD_PATTERN, "--strict")
    assert ok.returncode == 0, ok.stderr
    assert query(isolated_db, "SELECT count(*) FROM runs")[0][0] == 7


# ---------------------------------------------------------------- re-import corrects what the import added

def test_reimport_with_a_corrected_pattern_updates_the_stored_results(tmp_path, isolated_db):
    folder = tmp_path / "study"
    folder.mkdir()
    shutil.copy(HPL_SWEEP, folder / "HPL.out.2_node_13440.blis")
    assert cli("import", str(folder), "--name-pattern", SWAPPED_PATTERN).returncode == 0
    first = _runs(isolated_db)
    assert len(first) == 7 and all(r["params"]["nodes"] == 13440 for r in first)
    assert all(r["facts"]["file_name_conflicts"] == {"n": 2} for r in first)  # the output states N=13440

    out = cli("import", str(folder), "--name-pattern", GOOD_PATTERN)
    assert out.returncode == 0, out.stderr
    text = _flat(out.stdout)
    assert "0 result(s) stored, 7 already stored" in text
    assert "7 result(s) updated: fields from names/tags changed" in text and "0 unchanged" in text
    second = _runs(isolated_db)
    assert [r["id"] for r in second] == [r["id"] for r in first]  # the same runs, none added
    for before, after in zip(first, second, strict=True):
        assert after["params"] == before["params"] | {"nodes": 2}  # what the output states is kept
        assert "file_name_conflicts" not in after["facts"]
        assert after["facts"]["from_file_name"] == ["blas", "n", "nodes"]

    again = cli("import", str(folder), "--name-pattern", GOOD_PATTERN)
    assert "7 result(s) stored before: unchanged" in _flat(again.stdout)
    plain = cli("import", str(folder))  # no pattern: what the last one read stays
    assert plain.returncode == 0 and all(r["params"]["nodes"] == 2 for r in _runs(isolated_db))


def test_reimport_recomputes_the_rpeak_bound_with_the_corrected_node_count(tmp_path, isolated_db):
    """--rpeak-node is remembered: with the node count corrected from 13440 to 2, a rate above 10x the Rpeak
    of 2 nodes becomes invalid, run and metric alike; those below stay valid."""
    folder = tmp_path / "study"
    folder.mkdir()
    shutil.copy(HPL_SWEEP, folder / "HPL.out.2_node_13440.blis")
    rates = sorted(float(m) for m in re.findall(r"^WR\S+(?:\s+\S+){5}\s+(\S+)\s*$", HPL_SWEEP.read_text(), re.M))
    assert len(rates) == 7
    rpeak_node = (rates[-2] + rates[-1]) / 2 / 20  # 10x the Rpeak of 2 nodes falls between the two best
    assert cli("import", str(folder), "--name-pattern", SWAPPED_PATTERN,
               "--rpeak-node", f"{rpeak_node:.6f}").returncode == 0
    assert all(r["valid"] == 1 for r in _runs(isolated_db))  # 13440 nodes: nothing is near the bound
    out = cli("import", str(folder), "--name-pattern", GOOD_PATTERN)
    assert out.returncode == 0 and "validity 1" in out.stdout
    invalid = [r for r in _runs(isolated_db) if r["valid"] == 0]
    assert len(invalid) == 1 and "2 node(s) (from the file name)" in invalid[0]["reason"]
    (metric,) = query(isolated_db, "SELECT value, valid FROM metrics WHERE run_id=? AND name='hpl_gflops'",
                      invalid[0]["id"])
    assert metric["value"] == rates[-1] and metric["valid"] == 0
    assert query(isolated_db, "SELECT count(*) FROM metrics WHERE valid=0")[0][0] == 2  # rate and time


def test_reimport_with_tag_nodes_updates_the_tags(tmp_path, isolated_db):
    folder = tmp_path / "suite"
    folder.mkdir()
    shutil.copy(HPCC, folder / HPCC.name)
    shutil.copy(HPL_SWEEP, folder / HPL_SWEEP.name)
    assert cli("import", str(folder)).returncode == 0
    ids = [r["id"] for r in _runs(isolated_db)]
    summary = cli_json("import", str(folder), "--tag", "nodes=8", "--json")
    assert (summary["stored"], summary["already_stored"], summary["updated"], summary["retagged"]) == (0, 8, 8, 8)
    assert summary["changed"] == {"tags": 8}
    runs = _runs(isolated_db)
    assert [r["id"] for r in runs] == ids and all(r["tags"] == {"nodes": 8} for r in runs)
    same = cli_json("import", str(folder), "--tag", "nodes=8", "--json")
    assert (same["updated"], same["unchanged"]) == (0, 8)


# ---------------------------------------------------------------- dates from the file

def _hpcc_times(text: str) -> tuple[str, str, float]:
    stamps = re.findall(r"^Current time \((\d+)\) is (.+)$", text, re.M)
    ctime = "%a %b %d %H:%M:%S %Y"
    start, end = stamps[0], stamps[-1]
    return (datetime.strptime(start[1].strip(), ctime).isoformat(), datetime.strptime(end[1].strip(), ctime)
            .isoformat(), float(int(end[0]) - int(start[0])))


def test_hpcc_and_hpcg_runs_are_dated_by_their_file(tmp_path, isolated_db):
    folder = tmp_path / "dated"
    folder.mkdir()
    shutil.copy(HPCC, folder / "hpccoutf.txt")
    named = folder / "HPCG-Benchmark_3.1_2026-11-22_02-40-12.txt"  # how HPCG names its report
    shutil.copy(HPCG, named)
    undated = tmp_path / "undated" / HPCG.name  # the fixture's own name holds no date
    undated.parent.mkdir()
    undated.write_bytes(HPCG.read_bytes() + b"\n")
    when = datetime(2025, 6, 1, 8, 30, tzinfo=UTC)
    os.utime(undated, (when.timestamp(), when.timestamp()))
    assert cli("import", str(folder), str(undated.parent)).returncode == 0
    runs = {r["facts"]["source_file"].rsplit("/", 1)[-1]: r for r in _runs(isolated_db)}
    start, end, seconds = _hpcc_times(HPCC.read_text())
    hpcc = runs["hpccoutf.txt"]
    assert (hpcc["started_at"], hpcc["ended_at"], hpcc["duration_s"]) == (start, end, seconds)
    assert hpcc["facts"]["dated_by"] == "file" and 100 < seconds < 300  # the suite ran 149 s
    hpcg = runs[named.name]
    assert hpcg["started_at"] == "2026-11-22T02:40:12" and hpcg["facts"]["dated_by"] == "file name"
    assert hpcg["ended_at"] == hpcg["started_at"]  # HPCG names the report when it writes it: the end
    plain = runs[undated.name]
    assert plain["facts"]["dated_by"] == "file time" and plain["started_at"] == when.isoformat()


def test_reimport_dates_a_run_that_an_older_import_dated_at_import_time(tmp_path, isolated_db):
    folder = tmp_path / "old"
    folder.mkdir()
    shutil.copy(HPCC, folder / HPCC.name)
    assert cli("import", str(folder)).returncode == 0
    import sqlite3

    con = sqlite3.connect(isolated_db)  # as the import before issue 31 stored it: the import time, no dated_by
    con.execute("UPDATE runs SET started_at='2030-01-01T00:00:00.000+00:00', ended_at=NULL, duration_s=NULL, "
                "facts=json_remove(facts, '$.dated_by')")
    con.commit()
    con.close()
    summary = cli_json("import", str(folder), "--json")
    assert summary["updated"] == 1 and summary["changed"] == {"date": 1}
    (run,) = _runs(isolated_db)
    start, end, seconds = _hpcc_times(HPCC.read_text())
    assert (run["started_at"], run["ended_at"], run["duration_s"]) == (start, end, seconds)
    assert run["facts"]["dated_by"] == "file"
