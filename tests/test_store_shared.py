"""Schema version 4: what the results of one imported file share is stored once (issue 32), and every
reader still gets exactly what was written: the same facts text, the same artifact of each result, the
same bytes. Also the step from version 3, and what deleting the runs of a file releases."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest
from tests.conftest import fixture, query

from clusterbench.bench.metrics import Metric
from clusterbench.store.blobs import _store_blob
from clusterbench.store.db import Store
from clusterbench.store.doctor import check
from clusterbench.store.importer import import_paths
from clusterbench.store.records import ImportedRun, RunRecord
from clusterbench.store.schema import MIGRATIONS
from clusterbench.store.shared_facts import FACT_MARKERS, decode_facts, encode_facts, shared_fragments

HPL_SWEEP = fixture("outputs/this-machine/hpl-nbsweep-N13440-1x2.log")  # 7 results in one file


def _snapshot(path) -> dict:
    """Everything the Store's readers give about every run: rows, metrics, artifacts and their bytes."""
    with Store(path, read_only=True) as store:
        runs = [dict(r) for r in store.all_runs()]
        ids = [r["id"] for r in runs]
        arts = {i: [dict(a) for a in store.artifacts(i)] for i in ids}
        return {"runs": runs, "by_id": {k: dict(v) for k, v in store.runs_by_id(ids).items()},
                "found": [dict(r) for r in store.find_runs(extracts=[("facts", "$.source_file")])],
                "metric_rows": [dict(r) for r in store.metric_rows()], "artifacts": arts,
                "bytes": {i: [store.artifact(i, a["name"])["content"] for a in arts[i]] for i in ids}}


def test_an_imported_file_is_stored_once_and_read_back_as_written(tmp_path):
    path = tmp_path / "r.db"
    with Store(path) as store:
        report = import_paths(store, [str(HPL_SWEEP)])
    assert report.total("stored") == 7
    assert not query(path, "SELECT 1 FROM artifacts")  # one import_files row names the output of all 7
    ((sha, name, size),) = [tuple(r) for r in query(path, "SELECT sha256, name, size FROM import_files")]
    data = HPL_SWEEP.read_bytes()
    assert (sha, name, size) == (hashlib.sha256(data).hexdigest(), HPL_SWEEP.name, len(data))
    raw = {r["id"]: r["facts"] for r in query(path, "SELECT id, facts FROM runs")}
    with Store(path, read_only=True) as store:
        for run in store.all_runs():
            facts = json.loads(run["facts"])
            assert facts["source_file"] == str(HPL_SWEEP.resolve()) and "file_mtime" in facts
            assert FACT_MARKERS[0] in raw[run["id"]] and len(raw[run["id"]]) < len(run["facts"])
            json.loads(raw[run["id"]])  # still JSON for one who reads the column itself
            (art,) = store.artifacts(run["id"])
            assert (art["name"], art["path"], art["sha256"], art["size"]) == (
                HPL_SWEEP.name, str(HPL_SWEEP.resolve()), sha, len(data))
            assert store.artifact(run["id"], HPL_SWEEP.name)["content"] == data
    assert not check(path).problems


def _v3_store(path, data: bytes) -> dict[str, str]:
    """A version-3 store as that code wrote an import: a 3-result file (one artifacts row per result) and
    a result whose output was named otherwise; returns run id -> facts text."""
    con = sqlite3.connect(path, isolation_level=None)
    for _version, _what, step in MIGRATIONS[:3]:
        step(con)
    con.execute("PRAGMA user_version = 3")
    digest = hashlib.sha256(data).hexdigest()
    _store_blob(con, digest, len(data), data)
    texts = {}
    for i, name in enumerate(("HPL.out", "HPL.out", "HPL.out", "other.out")):
        facts = {"hpl_version": "2.3", "threshold": 16.0, "source_file": f"/old/{name}", "result_index": i,
                 "from_file_name": ["n", "nb"], "file_mtime": "2019-01-01T00:00:00+00:00", "dated_by": "file"}
        run_id, texts[f"import-{i}"] = f"import-{i}", json.dumps(facts, separators=(",", ":"))
        con.execute("INSERT INTO runs (id, benchmark, status, valid, facts, source, content_hash) VALUES"
                    " (?, 'hpl', 'ok', 1, ?, 'import', ?)", (run_id, texts[run_id], f"{digest}:{i}"))
        con.execute("INSERT INTO metrics (run_id, name, value, unit, labels) VALUES (?, 'hpl_gflops', ?, 'Gflop/s',"
                    " '{\"n\":100}')", (run_id, 10.0 + i))
        con.execute("INSERT INTO artifacts (run_id, name, path, sha256, size) VALUES (?,?,?,?,?)",
                    (run_id, name, f"/old/{name}", digest, len(data)))
    con.close()
    return texts


def test_a_version_3_store_is_migrated_and_reads_the_same(tmp_path):
    path = tmp_path / "old.db"
    texts = _v3_store(path, HPL_SWEEP.read_bytes())
    before = _snapshot(path)  # read as it is: version 3, nothing written
    assert {r["id"]: r["facts"] for r in before["runs"]} == texts
    with Store(path) as store:
        assert store.migrated_from == 3
    assert _snapshot(path) == before
    assert query(path, "PRAGMA user_version")[0][0] == 4
    # the 4 results are not alike (one names another output): each keeps its own row, nothing is shared
    assert len(query(path, "SELECT 1 FROM artifacts")) == 4 and not query(path, "SELECT 1 FROM import_files")
    assert not check(path).problems


def test_a_version_3_import_of_alike_results_moves_into_one_row(tmp_path):
    path = tmp_path / "old.db"
    _v3_store(path, HPL_SWEEP.read_bytes())
    con = sqlite3.connect(path)
    con.execute("PRAGMA foreign_keys = ON")  # its artifacts row goes with it
    con.execute("DELETE FROM runs WHERE id = 'import-3'")  # the odd one out: the other 3 are alike
    con.commit()
    con.close()
    before = _snapshot(path)
    Store(path).close()
    assert _snapshot(path) == before
    assert not query(path, "SELECT 1 FROM artifacts") and len(query(path, "SELECT 1 FROM import_files")) == 1
    assert all(FACT_MARKERS[0] in r["facts"] for r in query(path, "SELECT facts FROM runs"))
    assert not check(path).problems


def test_deleting_the_runs_of_a_file_releases_its_row_and_bytes(tmp_path):
    """A second file of the same kind is compressed against the first (its base): the base's bytes stay
    while they are needed, and go with the last blob that needs them."""
    first = tmp_path / "in" / "a.out"
    first.parent.mkdir()
    first.write_bytes(HPL_SWEEP.read_bytes())
    second = tmp_path / "in" / "b.out"
    second.write_bytes(HPL_SWEEP.read_bytes() + b"# another run of the same\n")
    path = tmp_path / "r.db"
    with Store(path) as store:
        import_paths(store, [str(first.parent)])
    codecs = {r["codec"] for r in query(path, "SELECT codec FROM blobs")}
    assert codecs == {"zlib", "zlib+base"} and len(query(path, "SELECT 1 FROM import_files")) == 2
    with Store(path) as store:
        ids = {a: [r["id"] for r in store.all_runs() if store.artifacts(r["id"])[0]["name"] == a]
               for a in ("a.out", "b.out")}
        done = store.delete_runs(ids["a.out"])
        assert (done.runs, done.artifacts, done.blobs) == (7, 7, 0)  # a.out's bytes: b.out's base, kept
        assert [r[0] for r in query(path, "SELECT name FROM import_files")] == ["b.out"]
        assert store.artifact(ids["b.out"][0], "b.out")["content"] == second.read_bytes()
    assert not check(path).problems
    with Store(path) as store:
        done = store.delete_runs(ids["b.out"])
    assert (done.runs, done.artifacts, done.blobs) == (7, 7, 2)
    assert not query(path, "SELECT 1 FROM blobs") and not query(path, "SELECT 1 FROM import_files")


def test_facts_are_stored_changed_only_where_reading_gives_them_back(tmp_path):
    facts = [{"tool": "x" * 40, "odd": {"\n1": 0}, "i": i, "tail": "y" * 30} for i in range(3)]
    texts = [json.dumps(f, separators=(",", ":")) for f in facts]
    fragments = shared_fragments(facts, texts)
    assert fragments[0] == '"tool":"' + "x" * 40 + '","odd":{"\\n1":0}' and fragments[1] == '"tail":"' + "y" * 30 + '"'
    for text in texts:
        assert decode_facts(encode_facts(text, fragments), fragments) == text
    with pytest.raises(ValueError, match="marks a shared fragment"):  # never written by Python's json
        encode_facts('{"a":1,' + FACT_MARKERS[0] + "}", fragments)
    digest = "ab" * 32
    runs = [ImportedRun(RunRecord(f"r{i}", "hpl", content_hash=f"{digest}:{i}", source="import"), True, None,
                        [Metric("hpl_gflops", 1.0, "Gflop/s")], f, None, None, None) for i, f in enumerate(facts)]
    with Store(tmp_path / "r.db") as store:
        assert len(store.add_imported_runs(runs, "f.out", b"bytes", digest)) == 3
        assert [store.run(f"r{i}")["facts"] for i in range(3)] == texts
        store.set_imported_facts("r1", facts[1] | {"added": True})
        assert json.loads(store.run("r1")["facts"]) == facts[1] | {"added": True}
