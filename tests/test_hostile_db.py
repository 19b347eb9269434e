"""The hostile corpus, databases: whatever `--db` names, a command refuses it with a located message and
the right exit code (2 for a path that is not a database, 1 for an environment problem), never a
traceback, and leaves every existing file exactly as it was. Also the database commands (db check,
db backup), the global --limit option, the empty-filter messages of `results`, and CSV injection
in every export.

Each case runs the real CLI under a memory and time bound (tests/hostile.py). A database on a
read-only location is made with a read-only bind mount when running as root (permission bits do
not stop root), else with chmod.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from tests.conftest import LOCAL_FIXTURES, cli, query
from tests.hostile import assert_refused, run_bounded

OUTPUTS = LOCAL_FIXTURES / "outputs" / "this-machine"
STREAM_FILE = OUTPUTS / "stream-omp1.txt"
SIDE_FILES = ("-wal", "-shm", "-journal")
FORMULAS = ("=cmd|' /C calc'!A0", "+1", "@SUM(1)", "-2+3")


# ---------------------------------------------------------------- helpers

def snapshot(*paths: Path) -> dict:
    """Every file under these paths with its type, size, mtime and content hash: compare before/after."""
    out = {}
    for root in paths:
        entries = [root] + (sorted(root.rglob("*")) if root.is_dir() and not root.is_symlink() else [])
        for path in entries:
            info = path.lstat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(info.st_mode) else None
            out[str(path)] = (stat.S_IFMT(info.st_mode), info.st_size, info.st_mtime_ns, digest)
    return out


def make_db(path: Path, *extra: str) -> Path:
    """A real database: the local fixture outputs imported (19 results, a few hundred kB)."""
    out = cli("--db", str(path), "import", "-q", str(OUTPUTS), *extra)
    assert out.returncode == 0, out.stdout + out.stderr
    assert not any(path.with_name(path.name + s).exists() for s in ("-wal", "-shm")), "not cleanly closed"
    return path


@contextlib.contextmanager
def read_only_place(folder: Path):
    """`folder` seen read-only: a read-only bind mount as root (skips if mounting is not possible here),
    else chmod 0555 on the folder and 0444 on its files. Yields the read-only view."""
    if os.geteuid() != 0:
        files = [p for p in folder.iterdir() if p.is_file()]
        for p in files:
            p.chmod(0o444)
        folder.chmod(0o555)
        try:
            yield folder
        finally:
            folder.chmod(0o755)
            for p in files:
                p.chmod(0o644)
        return
    view = folder.with_name(folder.name + "-ro")
    view.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(folder), str(view)], capture_output=True, text=True)
    if mounted.returncode != 0:
        view.rmdir()
        pytest.skip(f"a read-only bind mount is needed as root and failed: {mounted.stderr.strip()}")
    try:
        remount = subprocess.run(["mount", "-o", "remount,ro,bind", str(view)], capture_output=True, text=True)
        if remount.returncode != 0:
            pytest.skip(f"cannot remount the bind mount read-only: {remount.stderr.strip()}")
        assert not os.access(view, os.W_OK)
        yield view
    finally:
        subprocess.run(["umount", str(view)], check=True)
        view.rmdir()


def csv_rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


# ---------------------------------------------------------------- files that are not databases

def test_text_file_is_refused_by_read_and_write_commands(tmp_path):
    db = tmp_path / "notes.txt"
    db.write_text("my notes, not a database\n" * 20)
    before = snapshot(tmp_path)
    for args in (["results"], ["report", "-o", str(tmp_path / "rep")], ["import", "-q", str(STREAM_FILE)],
                 ["db", "check"], ["db", "backup", str(tmp_path / "copy.db")]):
        out = run_bounded("--db", str(db), *args)
        assert_refused(out, 2, str(db), "not an SQLite database")
    assert snapshot(tmp_path) == before  # the file untouched, no -wal/-shm, no report, no copy


def test_dev_null_is_refused_and_nothing_appears_in_dev(tmp_path):
    before = snapshot(Path("/dev/null"))
    for args in (["results"], ["import", "-q", str(STREAM_FILE)], ["db", "check"]):
        out = run_bounded("--db", "/dev/null", *args)
        assert_refused(out, 2, "/dev/null", "character device")
    assert snapshot(Path("/dev/null"))[str(Path("/dev/null"))][:2] == before["/dev/null"][:2]
    assert not any(Path("/dev/null" + s).exists() for s in SIDE_FILES)


def test_directory_is_refused(tmp_path):
    folder = tmp_path / "dbdir"
    folder.mkdir()
    for args in (["results"], ["import", "-q", str(STREAM_FILE)], ["compare", "a", "b"]):
        out = run_bounded("--db", str(folder), *args)
        assert_refused(out, 2, str(folder), "is a directory", "results.db")
    assert list(folder.iterdir()) == []


def test_sqlite_database_of_another_program_is_never_written(tmp_path):
    db = tmp_path / "places.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
    con.execute("INSERT INTO moz_places (url) VALUES ('https://example.org')")
    con.commit()
    con.close()
    before = snapshot(tmp_path)
    for args in (["import", "-q", str(STREAM_FILE)], ["results"]):
        out = run_bounded("--db", str(db), *args)
        assert_refused(out, 2, str(db), "not a clusterbench one", "moz_places")
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------------- damaged and too-new databases

def test_truncated_database_is_refused_and_db_check_names_it(tmp_path):
    db = make_db(tmp_path / "results.db")
    data = db.read_bytes()
    db.write_bytes(data[:len(data) // 2])
    before = snapshot(tmp_path)
    for args, code in ((["results"], 1), (["report", "-o", str(tmp_path / "rep")], 1),
                       (["import", "-q", str(STREAM_FILE)], 1)):
        out = run_bounded("--db", str(db), *args)
        assert_refused(out, code, str(db), "corrupted", "truncated", "db check")
    assert snapshot(tmp_path) == before  # refused before SQLite opened it: not even a -wal/-shm
    out = run_bounded("--db", str(db), "db", "check")
    assert_refused(out, 1, str(db), "truncated", "problem", "backup")
    assert db.read_bytes() == data[:len(data) // 2]  # reported, never repaired


def test_corrupted_database_is_reported_by_db_check_and_never_repaired(tmp_path):
    db = make_db(tmp_path / "results.db")
    data = bytearray(db.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 8192] = b"\xa5" * 8192  # two pages of garbage in the middle
    db.write_bytes(bytes(data))
    out = run_bounded("--db", str(db), "db", "check")
    assert_refused(out, 1, str(db), "problem", "backup")
    assert "malformed" in out.text or "integrity: " in out.text, out.text  # where the damage falls decides
    out = run_bounded("--db", str(db), "results", "--limit", "0", "--format", "csv")
    if out.code != 0:  # whether a read meets the damage depends on the pages it needs
        assert_refused(out, 1, str(db), "corrupted", "db check")
    assert db.read_bytes() == bytes(data)


def test_database_from_a_newer_clusterbench_is_refused_with_both_versions(tmp_path):
    db = make_db(tmp_path / "results.db")
    con = sqlite3.connect(db)
    con.execute("PRAGMA user_version = 99")
    con.close()
    before = snapshot(tmp_path)
    for args in (["results"], ["report", "-o", str(tmp_path / "rep")], ["compare", "a", "b"],
                 ["import", "-q", str(STREAM_FILE)]):
        out = run_bounded("--db", str(db), *args)
        assert_refused(out, 1, str(db), "schema version 99", "up to 4", "upgrade clusterbench")
    assert snapshot(tmp_path) == before


def test_schema_version_is_written_and_an_unversioned_database_is_adopted(tmp_path):
    db = make_db(tmp_path / "results.db")
    assert query(db, "PRAGMA user_version")[0][0] == 4
    con = sqlite3.connect(db)  # as written before versions existed
    con.execute("PRAGMA user_version = 0")
    con.close()
    before = snapshot(tmp_path)
    out = run_bounded("--db", str(db), "results", "--format", "json")
    assert out.code == 0 and json.loads(out.stdout), out.text
    assert snapshot(tmp_path)[str(db)] == before[str(db)]  # a read does not stamp it
    out = run_bounded("--db", str(db), "db", "migrate")
    assert out.code == 0 and "0 -> 4" in out.stdout, out.text
    assert query(db, "PRAGMA user_version")[0][0] == 4


# ---------------------------------------------------------------- permissions and read-only places

def test_read_only_directory_refuses_write_commands_and_creates_nothing(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    make_db(folder / "results.db")
    before = snapshot(folder)
    with read_only_place(folder) as view:
        out = run_bounded("--db", str(view / "new.db"), "import", "-q", str(STREAM_FILE))
        assert_refused(out, 1, str(view / "new.db"), "read-only", "--db")
        out = run_bounded("--db", str(view / "results.db"), "import", "-q", str(STREAM_FILE))
        assert_refused(out, 1, str(view / "results.db"), "read-only", "db backup")
        assert not (view / "new.db").exists()
    assert snapshot(folder) == before


def test_valid_database_on_a_read_only_location_is_readable(tmp_path):
    folder = tmp_path / "archive"
    folder.mkdir()
    make_db(folder / "results.db", "--campaign", "archived")
    before = snapshot(folder)
    with read_only_place(folder) as view:
        db = str(view / "results.db")
        listed = run_bounded("--db", db, "results", "--format", "csv", "--limit", "0")
        assert listed.code == 0, listed.text
        assert {r["campaign"] for r in csv_rows(listed.stdout)} == {"archived"}
        report = run_bounded("--db", db, "report", "archived", "-o", str(tmp_path / "rep"))
        assert report.code == 0 and "Traceback" not in report.text, report.text
        assert len(csv_rows((tmp_path / "rep" / "runs.csv").read_text())) == 19
        checked = run_bounded("--db", db, "db", "check")
        assert checked.code == 0 and "ok" in checked.stdout, checked.text
        backup = run_bounded("--db", db, "db", "backup", str(tmp_path / "copy.db"))
        assert backup.code == 0, backup.text
    assert snapshot(folder) == before  # nothing written, not even SQLite's -wal/-shm files
    assert query(tmp_path / "copy.db", "SELECT COUNT(*) FROM runs")[0][0] == 19


def test_unreadable_database_is_refused_with_permission_denied(tmp_path, monkeypatch):
    place = Path(tempfile.mkdtemp(prefix="cb-unreadable-"))  # outside pytest's 0700 folders
    try:
        place.chmod(0o755)
        db = make_db(place / "results.db")
        db.chmod(0o000)
        if os.geteuid() == 0:  # root reads anything: run the CLI as nobody instead
            if not shutil.which("setpriv"):
                pytest.skip("running as root and setpriv is missing: cannot drop the permission to read")
            wrapper = place / "as-nobody"
            wrapper.write_text(f'#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups '
                               f'"{sys.executable}" "$@"\n')
            wrapper.chmod(0o755)
            importable = subprocess.run([str(wrapper), "-c", "import clusterbench"], capture_output=True)
            if importable.returncode != 0:  # a checkout under a private folder (mktemp, a 0700 home)
                pytest.skip("nobody cannot read this checkout or its venv, so the CLI cannot run as nobody")
            monkeypatch.setattr(sys, "executable", str(wrapper))
        before = snapshot(place)
        out = run_bounded("--db", str(db), "results", env={"HOME": str(place)})
        assert_refused(out, 1, str(db), "cannot read", "permission denied")
        assert snapshot(place) == before
    finally:
        shutil.rmtree(place, ignore_errors=True)


# ---------------------------------------------------------------- db backup

WRITER = """
import sys, time
from pathlib import Path
from clusterbench.bench.metrics import Metric
from clusterbench.store.db import Store
from clusterbench.store.records import RunRecord
with Store(sys.argv[1]) as store:
    for i in range(20000):  # until told to stop
        store.begin_run(RunRecord(id=f"w{i}", benchmark="stream"))
        store.finish_run(f"w{i}", "ok", True, None, 0, 1.0, [Metric("stream_triad", float(i), "MB/s")])
        if i == 5:
            print("writing", flush=True)
        if Path(sys.argv[2]).exists():
            break
        time.sleep(0.002)
print(i + 1, flush=True)
"""


def test_db_backup_while_another_process_writes(tmp_path):
    db = make_db(tmp_path / "results.db")
    dest, stop = tmp_path / "backup.db", tmp_path / "stop"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(stop)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "writing"
        out = run_bounded("--db", str(db), "db", "backup", str(dest))
        assert out.code == 0 and "checked" in out.stdout, out.text
        assert writer.poll() is None, "the writer stopped before the backup ended: the test proves nothing"
    finally:
        stop.touch()
        written = int(writer.stdout.readline())
        assert writer.wait(timeout=120) == 0
    copied = query(dest, "SELECT COUNT(*) FROM runs")[0][0]
    assert 19 + 6 <= copied < 19 + written  # a consistent snapshot taken mid-way
    finished = query(dest, "SELECT COUNT(*) FROM runs WHERE id LIKE 'w%' AND status = 'ok'")[0][0]
    assert finished >= copied - 19 - 1  # at most the run between its start and its finish is 'running'
    assert query(dest, "SELECT COUNT(*) FROM metrics WHERE run_id LIKE 'w%'")[0][0] == finished  # none half-stored
    assert run_bounded("--db", str(dest), "db", "check").code == 0
    assert not list(tmp_path.glob(".backup.db*"))  # no partial file left beside it


def test_db_backup_never_overwrites_without_force(tmp_path):
    db = make_db(tmp_path / "results.db")
    dest = tmp_path / "precious.txt"
    dest.write_text("do not overwrite me\n")
    before = snapshot(dest)
    out = run_bounded("--db", str(db), "db", "backup", str(dest))
    assert_refused(out, 2, str(dest), "exists already", "--force")
    assert snapshot(dest) == before
    out = run_bounded("--db", str(db), "db", "backup", str(tmp_path))
    assert_refused(out, 2, str(tmp_path), "is a directory")
    out = run_bounded("--db", str(tmp_path / "none.db"), "db", "backup", str(tmp_path / "b.db"))
    assert_refused(out, 2, str(tmp_path / "none.db"), "nothing to back up")
    assert not (tmp_path / "none.db").exists() and not (tmp_path / "b.db").exists()
    out = run_bounded("--db", str(db), "db", "backup", "--force", str(dest))
    assert out.code == 0, out.text
    assert query(dest, "SELECT COUNT(*) FROM runs")[0][0] == 19


# ---------------------------------------------------------------- read commands create nothing

def test_read_commands_create_no_database(tmp_path):
    db = tmp_path / "new" / "results.db"
    out = run_bounded("--db", str(db), "results")
    assert out.code == 0 and "no runs stored yet" in out.text, out.text
    out = run_bounded("--db", str(db), "report", "-o", str(tmp_path / "rep"))
    assert_refused(out, 2, "no stored runs match")
    out = run_bounded("--db", str(db), "db", "check")
    assert_refused(out, 2, str(db), "no database here")
    assert not (tmp_path / "new").exists()


# ---------------------------------------------------------------- options

@pytest.mark.parametrize(("option", "fragments"), [
    ("max_runs=x", ("--limit max_runs", "'x' is not a whole number")),
    ("max_runs=0", ("--limit max_runs", "out of range")),
    ("no_such_limit=5", ("unknown limit 'no_such_limit'", "max_runs")),
    ("max_runs", ("invalid --limit 'max_runs'", "NAME=VALUE")),
])
def test_limit_option_is_checked_before_the_command(option, fragments, isolated_db):
    out = run_bounded("--limit", option, "results")
    assert_refused(out, 2, *fragments)
    assert not isolated_db.exists()


def test_results_filters_that_match_nothing_say_so(tmp_path):
    db = tmp_path / "results.db"
    assert cli("--db", str(db), "import", "-q", str(STREAM_FILE), "--campaign", "streams").returncode == 0
    db = str(make_db(db, "--campaign", "fixtures"))
    for args, fragments in (
            (["--campaign", "nope"], ("no run matches campaign 'nope'", "19 runs are stored", "fixtures, streams")),
            (["--benchmark", "nope"], ("no run matches benchmark 'nope'", "hpl", "stream")),
            (["--status", "nope"], ("no run matches status 'nope'", "stored statuses:", "ok")),
            (["--campaign", "streams", "--benchmark", "hpl"], ("campaign 'streams' and benchmark 'hpl' together",)),
            (["--metric", "nope", "--format", "json"], ("no metric 'nope'", "their metrics: ", "HPL_Tflops")),
            (["--metric", "stream_triads"], ("no metric 'stream_triads'", "did you mean 'stream_triad'")),
            (["--campaign", "nope", "--stat", "mean"], ("no run matches campaign 'nope'", "fixtures"))):
        out = run_bounded("--db", db, "results", *args)
        assert_refused(out, 2, *fragments)
        assert "no runs stored yet" not in out.text


# ---------------------------------------------------------------- CSV injection

def _hostile_store(tmp_path: Path) -> Path:
    """Runs whose campaign names, tag keys and values, host name and CPU are spreadsheet formulas, plus
    a run whose metric and duration are negative numbers (those must stay numbers)."""
    from clusterbench.bench.metrics import Metric
    from clusterbench.store.db import Store
    from clusterbench.store.records import RunRecord

    db = tmp_path / "results.db"
    files = sorted(p for p in OUTPUTS.iterdir() if p.name.startswith(("stream", "osu", "hpl-")))
    for name, path in zip(FORMULAS, files, strict=False):
        out = cli("--db", str(db), "import", "-q", str(path), "--campaign", name, "--tag=@SUM(1)=1",
                  "--tag=-2+3=x", "--tag", "k==1+2")
        if out.returncode != 0:  # input validation may refuse such a name: store it as another tool could
            assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
            with Store(db) as store:
                store.begin_run(RunRecord(id=f"r-{len(name)}", benchmark="stream", campaign=name,
                                          tags={"@SUM(1)": 1, "-2+3": "x", "k": "=1+2"}))
                store.finish_run(f"r-{len(name)}", "ok", True, None, 0, 1.0, [Metric("stream_triad", 1.0, "MB/s")])
    with Store(db) as store:
        store.save_system("sys-1", "=HYPERLINK(\"http://evil\")", {}, {"topology": {"model_name": "@cpu"}})
        store.begin_run(RunRecord(id="neg-1", benchmark="stream", campaign="+1", system_id="sys-1",
                                  tags={"k": "=1+2"}))
        store.finish_run("neg-1", "ok", True, None, 0, -2.5, [Metric("clock_offset_us", -3.5, "us")])
    return db


def _assert_neutral(cell: str) -> None:
    """No cell a spreadsheet would run: only a number written from a number may start with '-'."""
    if cell.startswith("-"):
        float(cell)
    else:
        assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell


def test_csv_exports_neutralise_formulas_and_keep_negative_numbers(tmp_path):
    db = _hostile_store(tmp_path)
    out = run_bounded("--db", str(db), "results", "--format", "csv", "--limit", "0")
    assert out.code == 0, out.text
    rows = csv_rows(out.stdout)
    assert {r["campaign"] for r in rows} == {"'" + name for name in FORMULAS}
    for row in rows:
        for value in row.values():
            _assert_neutral(value)
    (negative,) = [r for r in rows if r["metric"] == "clock_offset_us"]
    assert negative["value"] == "-3.5" and float(negative["value"]) == -3.5  # a number stays a number

    out = run_bounded("--db", str(db), "results", "--format", "csv", "--group-by", "k,-2+3", "--stat", "mean,min")
    assert out.code == 0, out.text
    stats = csv_rows(out.stdout)
    assert {r["k"] for r in stats} == {"'=1+2"} and "'-2+3" in stats[0]  # cells and the header
    for row in stats:
        for value in row.values():
            _assert_neutral(value)
    assert [r["mean"] for r in stats if r["metric"] == "clock_offset_us"] == ["-3.5"]

    out = run_bounded("--db", str(db), "report", "-o", str(tmp_path / "rep"))
    assert out.code == 0, out.text
    runs = csv_rows((tmp_path / "rep" / "runs.csv").read_text())
    assert {r["campaign"] for r in runs} == {"'" + name for name in FORMULAS}
    assert all(r["tags"].startswith("'@SUM(1)=1") for r in runs if r["runs"] != "neg-1")
    (negative,) = [r for r in runs if r["runs"] == "neg-1"]
    assert negative["duration (s)"] == "-2.5"
    hardware = csv_rows((tmp_path / "rep" / "system-hardware.csv").read_text())
    assert hardware[0]["host"] == "'=HYPERLINK(\"http://evil\")" and hardware[0]["CPU"] == "'@cpu"
    for path in (tmp_path / "rep").glob("*.csv"):  # every table and figure CSV of the report
        for row in csv.reader(io.StringIO(path.read_text())):
            for value in row:
                _assert_neutral(value)


def test_csv_rule_unit():
    from clusterbench.report import csvsafe

    assert [csvsafe.cell(v) for v in ("=1", "+1", "-1", "@a", "\tx", "\rx", "a=1", "", None, -3.5, 7)] == [
        "'=1", "'+1", "'-1", "'@a", "'\tx", "'\rx", "a=1", "", None, -3.5, 7]
