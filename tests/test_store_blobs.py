"""Raw outputs stored once per content (schema version 2): imports, live runs, the migration of a
version-1 database, reads of old files, damaged blobs and `db check`."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import zlib
from pathlib import Path

import pytest
from tests.conftest import cli, fixture, query

from clusterbench.bench.metrics import Metric
from clusterbench.errors import EnvironmentProblem
from clusterbench.store import blobs as store_blobs
from clusterbench.store.db import Store
from clusterbench.store.doctor import check
from clusterbench.store.records import RunRecord
from clusterbench.store.schema import SCHEMA, SCHEMA_VERSION, _statements

HPL_SWEEP = fixture("outputs/this-machine/hpl-nbsweep-N13440-1x2.log")  # 7 results in one file


def _blobs(path: Path) -> list:
    return query(path, "SELECT sha256, size, stored, codec FROM blobs ORDER BY sha256")


def _finished(store: Store, run_id: str, files: list[Path], status: str = "ok") -> None:
    store.begin_run(RunRecord(run_id, "hpl"))
    store.finish_run(run_id, status, status == "ok", None, 0, 1.0, [Metric("x", 1.0, "")], files)


def test_importing_n_results_of_one_file_adds_one_blob(isolated_db):
    out = cli("import", "-q", str(HPL_SWEEP))
    assert out.returncode == 0, out.stderr
    data = HPL_SWEEP.read_bytes()
    ((sha, size, stored, codec),) = _blobs(isolated_db)
    assert (sha, size, codec) == (hashlib.sha256(data).hexdigest(), len(data), "zlib") and stored < len(data) / 2
    # one import_files row names the output for the 7 results: no artifacts row of their own (version 4)
    assert not query(isolated_db, "SELECT 1 FROM artifacts")
    assert [tuple(r) for r in query(isolated_db, "SELECT sha256, name, size FROM import_files")] == [
        (sha, HPL_SWEEP.name, len(data))]
    with Store(isolated_db, read_only=True) as store:
        arts = [a for run in store.all_runs() for a in store.artifacts(run["id"])]
        assert len(arts) == 7 and {(a["sha256"], a["size"], a["name"]) for a in arts} == {
            (sha, len(data), HPL_SWEEP.name)}
        for art in arts:
            row = store.artifact(art["run_id"], HPL_SWEEP.name)
            assert row["content"] == data and row["path"] == str(HPL_SWEEP.resolve())
    assert cli("import", "-q", str(HPL_SWEEP)).returncode == 0  # again: nothing new
    assert len(_blobs(isolated_db)) == 1


def test_live_runs_share_identical_outputs_and_keep_incompressible_ones_raw(tmp_path):
    same, noise, big = tmp_path / "stdout.txt", tmp_path / "noise.bin", tmp_path / "huge.txt"
    same.write_text("HPL finished\n" * 200)
    noise.write_bytes(os.urandom(4096))
    big.write_text("x" * 5000)
    with Store(tmp_path / "r.db") as store:
        _finished(store, "r1", [same, noise])
        _finished(store, "r2", [same])
        store_blobs.MAX_BLOB_BYTES, kept = 4096, store_blobs.MAX_BLOB_BYTES  # as if huge.txt were over 8 MiB
        try:
            _finished(store, "r3", [big])
        finally:
            store_blobs.MAX_BLOB_BYTES = kept
        codecs = {row["size"]: row["codec"] for row in _blobs(store.path)}
        assert codecs == {len(same.read_bytes()): "zlib", 4096: "raw", 5000: "none"}
        assert store.artifact("r2", "stdout.txt")["content"] == same.read_bytes()
        assert store.artifact("r1", "noise.bin")["content"] == noise.read_bytes()
        huge = store.artifact("r3", "huge.txt")
        assert huge["content"] is None and huge["size"] == 5000 and huge["path"] == str(big.resolve())


def test_a_blob_goes_with_the_last_output_that_refers_to_it(tmp_path):
    out = tmp_path / "stdout.txt"
    out.write_text("first attempt\n")
    with Store(tmp_path / "r.db") as store:
        _finished(store, "shared", [out])
        store.begin_run(RunRecord("again", "hpl"))
        store.finish_run("again", "interrupted", False, "stopped", None, None, [], [out])
        first = hashlib.sha256(b"first attempt\n").hexdigest()
        out.write_text("second attempt\n")
        store.begin_run(RunRecord("again", "hpl"))  # the interrupted run is run again: its output replaced
        store.finish_run("again", "ok", True, None, 0, 1.0, [], [out])
        second = hashlib.sha256(out.read_bytes()).hexdigest()
        assert [r["sha256"] for r in _blobs(store.path)] == sorted([first, second])
        out.write_text("third\n")
        store.begin_run(RunRecord("lone", "hpl"))
        store.finish_run("lone", "interrupted", False, "stopped", None, None, [], [out])
        third = hashlib.sha256(b"third\n").hexdigest()
        assert third in {r["sha256"] for r in _blobs(store.path)}
        out.write_text("fourth\n")
        store.begin_run(RunRecord("lone", "hpl"))
        store.finish_run("lone", "ok", True, None, 0, 1.0, [], [out])
        assert third not in {r["sha256"] for r in _blobs(store.path)}  # nothing refers to it any more
        store.conn.execute("DELETE FROM runs WHERE id='lone'")  # a deleted run takes its blob along
        assert hashlib.sha256(b"fourth\n").hexdigest() not in {r["sha256"] for r in _blobs(store.path)}
        assert len(_blobs(store.path)) == 2


def _v1_database(path: Path) -> dict[tuple[str, str], bytes | None]:
    """A version-1 database as the v1 code wrote it: every artifact's bytes inline, an imported file
    repeated once per result, an output too large to keep (content NULL), and one damaged row."""
    con = sqlite3.connect(path)
    for statement in _statements(SCHEMA):
        con.execute(statement)
    con.execute("PRAGMA user_version = 1")
    sweep = HPL_SWEEP.read_bytes()
    expected: dict[tuple[str, str], bytes | None] = {}

    def add(run_id: str, name: str, data: bytes | None, size: int | None = None, sha: str | None = None) -> None:
        con.execute("INSERT OR IGNORE INTO runs (id, benchmark, status, source) VALUES (?, 'hpl', 'ok', 'import')",
                    (run_id,))
        con.execute("INSERT INTO artifacts (run_id, name, path, sha256, size, content) VALUES (?,?,?,?,?,?)",
                    (run_id, name, f"/old/{name}", sha or hashlib.sha256(data or b"").hexdigest(),
                     len(data) if size is None else size, data))
        expected[(run_id, name)] = data

    for i in range(30):  # an old import of a 30-result file
        add(f"import-{i}", HPL_SWEEP.name, sweep)
    add("live", "stdout.txt", b"one line\n")
    add("live", "huge.out", None, size=9 * 2**20, sha="ab" * 32)
    add("broken", "stdout.txt", b"changed after hashing", sha=hashlib.sha256(b"the original").hexdigest())
    con.commit()
    con.close()
    return expected


def test_migration_from_version_1_keeps_every_byte_and_shrinks_the_file(tmp_path):
    path = tmp_path / "old.db"
    expected = _v1_database(path)
    before = path.stat().st_size
    with Store(path) as store:
        assert store.migrated_from == 1
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
        for (run_id, name), data in expected.items():
            if run_id != "broken":
                assert store.artifact(run_id, name)["content"] == data, (run_id, name)
        with pytest.raises(EnvironmentProblem, match="SHA-256 differs"):  # damaged before: never handed on
            store.artifact("broken", "stdout.txt")
    # 30 copies of the sweep became one compressed blob (version 4's table, index and triggers: 3 pages more)
    assert path.stat().st_size <= before / 3 + 3 * 4096
    inline = query(path, "SELECT run_id, content FROM artifacts WHERE content IS NOT NULL")
    assert [tuple(r) for r in inline] == [("broken", b"changed after hashing")]  # as it was, for db check
    assert {r["codec"] for r in _blobs(path)} == {"zlib", "raw", "none"}
    assert sorted(t["name"] for t in query(path, "SELECT name FROM sqlite_master WHERE type='trigger'")) == [
        "artifacts_release_blob", "blobs_release_base", "import_files_release_blob", "runs_release_import_file"]
    report = check(path)
    assert report.problems == ["raw output damaged: output 'stdout.txt' of run broken: its SHA-256 differs from "
                               "the one recorded when it was stored"]


def test_read_commands_read_a_version_1_file_as_it_is(tmp_path):
    path = tmp_path / "old.db"
    expected = _v1_database(path)
    before = path.read_bytes()
    with Store(path, read_only=True) as store:
        assert not store.has_blobs
        assert store.artifact("import-3", HPL_SWEEP.name)["content"] == expected[("import-3", HPL_SWEEP.name)]
    out = cli("--db", str(path), "results", "--format", "json")
    assert out.returncode == 0, out.stderr
    assert path.read_bytes() == before  # never upgraded, or touched, by a read


def test_damaged_blobs_are_refused_and_reported(tmp_path):
    out = tmp_path / "stdout.txt"
    out.write_text("a result worth keeping\n" * 50)
    path = tmp_path / "r.db"
    with Store(path) as store:
        _finished(store, "r1", [out])
    con = sqlite3.connect(path)
    con.execute("UPDATE blobs SET content = ?", (zlib.compress(b"a forged result\n" * 50),))
    con.commit()
    con.close()
    with Store(path, read_only=True) as store, pytest.raises(EnvironmentProblem, match="damaged"):
        store.artifact("r1", "stdout.txt")
    refused = cli("--db", str(path), "db", "check")
    assert refused.returncode == 1 and "raw output damaged" in refused.stdout + refused.stderr


def test_a_decompression_bomb_is_bounded_by_the_recorded_size(tmp_path):
    out = tmp_path / "small.txt"
    out.write_text("tiny but compressible " * 10)
    path = tmp_path / "r.db"
    with Store(path) as store:
        _finished(store, "r1", [out])
    con = sqlite3.connect(path)
    con.execute("UPDATE blobs SET content = ?", (zlib.compress(b"\0" * 200 * 2**20, 9),))  # 200 MiB inflated
    con.commit()
    con.close()
    with Store(path, read_only=True) as store, pytest.raises(EnvironmentProblem, match="bytes where"):
        store.artifact("r1", "small.txt")
    assert "raw output damaged" in " ".join(check(path).problems)


def test_db_check_says_every_output_matches(isolated_db):
    assert cli("import", "-q", str(HPL_SWEEP)).returncode == 0
    out = cli("db", "check")
    said = " ".join(out.stdout.split())
    assert out.returncode == 0 and "1 stored raw outputs match their SHA-256" in said, out.stdout + out.stderr


def test_a_version_2_file_stamped_0_is_adopted_again_unharmed(tmp_path):
    out = tmp_path / "stdout.txt"
    out.write_text("kept\n" * 100)
    path = tmp_path / "r.db"
    with Store(path) as store:
        _finished(store, "r1", [out])
    con = sqlite3.connect(path)
    con.execute("PRAGMA user_version = 0")  # as a tool that does not know versions might leave it
    con.close()
    with Store(path) as store:
        assert store.migrated_from == 0 and store.artifact("r1", "stdout.txt")["content"] == out.read_bytes()
    triggers = query(path, "SELECT name FROM sqlite_master WHERE type='trigger'")
    assert sorted(t["name"] for t in triggers) == ["artifacts_release_blob", "blobs_release_base",
                                                   "import_files_release_blob", "runs_release_import_file"]
    assert not check(path).problems
