"""Curating what counts (issue 31, Deliver 11): `exclude`/`include`, `note`, `db delete`, and the
contract the analysis relies on: every run dict carries `excluded` (reason or None) and `notes`."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess

import pytest
from tests.cli_fork import run_cli
from tests.conftest import cli, cli_json, fixture, query

from clusterbench.analysis.flags import counts, run_flags
from clusterbench.analysis.select import Selection, parse_selection, select_runs
from clusterbench.bench.metrics import Metric
from clusterbench.errors import UserInputError
from clusterbench.store.curation import MAX_NOTE_CHARS, MAX_NOTES_PER_RUN, MAX_REASON_CHARS
from clusterbench.store.db import Store
from clusterbench.store.queries import decoded_run
from clusterbench.store.records import RunRecord
from clusterbench.store.schema import SCHEMA_VERSION

OUTPUTS = fixture("outputs/this-machine")


@pytest.fixture
def three_runs(isolated_db):
    """Three finished STREAM runs, each with its run directory (an output file) under the runs dir;
    r1 and r2 wrote identical output (one stored blob), r3 its own."""
    with Store(isolated_db) as store:
        for run_id, text in (("r1", "same output\n"), ("r2", "same output\n"), ("r3", "its own output\n")):
            workdir = store.runs_dir / run_id
            workdir.mkdir(parents=True)
            (workdir / "stdout.txt").write_text(text)
            store.begin_run(RunRecord(run_id, "stream", params={"threads": 1}, workdir=str(workdir)))
            store.finish_run(run_id, "ok", True, None, 0, 1.0, [Metric("stream_triad", 1000.0 + len(run_id), "MB/s")],
                             artifacts=[workdir / "stdout.txt"])
    return isolated_db


def answering(*args: str, input_text: str) -> subprocess.CompletedProcess:
    """The real command line with `input_text` as its standard input (the answer to a prompt)."""
    return run_cli(args, dict(os.environ) | {"COLUMNS": "200"}, stdin=input_text)


def _run(db, run_id: str) -> dict:
    with Store(db, read_only=True) as store:
        return next(r for r in select_runs(store, Selection()) if r["id"] == run_id)


def test_exclude_keeps_the_run_listed_with_its_reason_out_of_what_counts_and_include_undoes_it(three_runs):
    assert counts(_run(three_runs, "r1"))
    out = cli("exclude", "run:r1", "--reason", "node3 ran at 1.2 GHz")
    assert out.returncode == 0 and "excluded 1 run of the 1 selected" in out.stdout, out.stderr
    run = _run(three_runs, "r1")
    assert run["excluded"] == "node3 ran at 1.2 GHz" and "excluded" in run_flags(run) and not counts(run)
    assert _run(three_runs, "r2")["excluded"] is None and counts(_run(three_runs, "r2"))
    table = cli("results")
    assert "excluded (node3 ran at 1.2 GHz)" in table.stdout and table.stdout.count("excluded") == 1
    records = {r["run_id"]: r for r in cli_json("results", "--format", "json")}
    assert records["r1"]["excluded"] == "node3 ran at 1.2 GHz" and "excluded" in records["r1"]["flags"]
    assert records["r2"]["excluded"] is None and records["r2"]["flags"] == []
    shown = cli("results", "r1")
    assert "excluded: node3 ran at 1.2 GHz" in shown.stdout
    assert cli("exclude", "run:r1", "--reason", "node3 ran at 1.2 GHz").stdout.count("already") == 1
    back = cli("include", "run:r1,run:r2")
    assert back.returncode == 0 and "counted again: 1 run of the 2 selected; 1 run had not been excluded" in back.stdout
    assert _run(three_runs, "r1")["excluded"] is None and counts(_run(three_runs, "r1"))


def test_every_way_the_analysis_reads_runs_carries_excluded_and_notes(three_runs):
    with Store(three_runs) as store:
        assert store.exclude_runs(["r2", "r3", "nosuch"], "bad BIOS") == (2, 0)
        assert store.exclude_runs(["r2", "r3"], "bad BIOS, confirmed") == (0, 2)
        store.add_note("r2", "first")
        store.add_note("r2", "second")
    with Store(three_runs, read_only=True) as store:
        rows = [store.run("r2"), store.runs_by_id(["r2"])["r2"], *[r for r in store.runs() if r["id"] == "r2"],
                *store.find_runs(id=["r2"]), *[r for r in store.all_runs() if r["id"] == "r2"]]
        for row in rows:
            assert row["excluded"] == "bad BIOS, confirmed" and row["notes"] == ["first", "second"]
            assert dict(row)["notes"] == ["first", "second"]  # a list, not JSON text
        assert decoded_run(store.run("r1"))["excluded"] is None and decoded_run(store.run("r1"))["notes"] == []
        picked = select_runs(store, parse_selection("threads=1", store))  # the two-pass path of select.py
        assert {r["id"]: (r["excluded"], r["notes"]) for r in picked} == {
            "r1": (None, []), "r2": ("bad BIOS, confirmed", ["first", "second"]), "r3": ("bad BIOS, confirmed", [])}
        metric_rows = {r["run_id"]: r["excluded"] for r in store.metric_rows("stream_triad")}
        assert metric_rows == {"r1": None, "r2": "bad BIOS, confirmed", "r3": "bad BIOS, confirmed"}
    from clusterbench import api

    frame = api.runs(three_runs).set_index("id")
    assert frame.loc["r2", "excluded"] == "bad BIOS, confirmed" and "excluded" in frame.loc["r2", "flags"]
    assert frame.loc["r1", "flags"] == [] and frame.loc["r2", "notes"] == ["first", "second"]


def test_a_note_shows_in_results_run_and_its_export(three_runs):
    out = cli("note", "r1", "rerun after the BIOS update")
    assert out.returncode == 0 and "1 note" in out.stdout, out.stderr
    shown = cli("results", "r1")
    assert "note (" in shown.stdout and "rerun after the BIOS update" in shown.stdout
    data = cli_json("results", "r1", "--format", "json")
    assert data["notes"] == ["rerun after the BIOS update"] and len(data["notes_at"]) == 1
    assert "1 note: rerun after the BIOS update" in cli("results").stdout
    missing = cli("note", "nosuch", "text")
    assert missing.returncode == 2 and "no run with id 'nosuch'" in missing.stderr


def test_hostile_reasons_and_notes_are_bounded_and_never_drive_the_terminal(three_runs):
    too_long = cli("exclude", "run:r1", "--reason", "x" * (MAX_REASON_CHARS + 1))
    assert too_long.returncode == 2 and f"more than {MAX_REASON_CHARS}" in too_long.stderr
    control = cli("note", "r1", "a\x1b[2Jb")
    assert control.returncode == 2 and "control character" in control.stderr
    assert cli("exclude", "--reason", "why", "").returncode == 2  # an empty selection is not "every run"
    assert cli("note", "r1", "y" * (MAX_NOTE_CHARS + 1)).returncode == 2
    assert query(three_runs, "SELECT COUNT(*) FROM curation")[0][0] == 0
    assert query(three_runs, "SELECT COUNT(*) FROM notes")[0][0] == 0
    markup = cli("exclude", "run:r1", "--reason", "[bold red]fake[/] [link=file:///etc]x[/link]")
    assert markup.returncode == 0
    assert "[bold red]fake[/] [link=file:///etc]x[/link]" in cli("results", "r1").stdout  # shown, not obeyed
    con = sqlite3.connect(three_runs)  # a hostile database: a note written behind clusterbench's back
    con.execute("INSERT INTO notes (run_id, at, text) VALUES ('r1', 'x', ?)", ("evil\x1b]0;title\x07\x1b[2J",))
    con.commit()
    con.close()
    for args in (("results", "r1"), ("results",)):
        out = cli(*args)
        assert out.returncode == 0 and "\x1b" not in out.stdout and "evil?]0;title??[2J" in out.stdout
    with Store(three_runs) as store:
        for i in range(MAX_NOTES_PER_RUN - 1):
            store.add_note("r2", f"note {i}")
        store.add_note("r2", "the last one allowed")
        with pytest.raises(UserInputError, match="the limit"):
            store.add_note("r2", "one too many")


def test_db_delete_asks_and_with_yes_removes_runs_outputs_and_directories(three_runs):
    runs_dir = three_runs.parent / "runs"
    declined = answering("db", "delete", "run:r1", input_text="n\n")
    assert declined.returncode == 1 and "nothing deleted" in declined.stdout
    declined = answering("db", "delete", "run:r1", input_text="")  # no answer at all: no
    assert declined.returncode == 1 and "Delete them" in declined.stdout and "nothing deleted" in declined.stdout
    assert query(three_runs, "SELECT COUNT(*) FROM runs")[0][0] == 3 and (runs_dir / "r1").is_dir()
    blobs = query(three_runs, "SELECT COUNT(*) FROM blobs")[0][0]
    assert blobs == 2  # r1 and r2 share one output
    cli("note", "r1", "to go")
    one = cli("db", "delete", "run:r1", "--yes")
    assert one.returncode == 0, one.stderr
    assert "deleted 1 run: 1 metric value, 1 stored output (0 stored file contents" in one.stdout
    assert "1 note" in one.stdout and "removed 1 run directory" in one.stdout
    assert not (runs_dir / "r1").exists() and (runs_dir / "r2" / "stdout.txt").read_text() == "same output\n"
    assert query(three_runs, "SELECT COUNT(*) FROM blobs")[0][0] == 2  # r2 still refers to the shared one
    assert query(three_runs, "SELECT COUNT(*) FROM notes")[0][0] == 0
    with Store(three_runs, read_only=True) as store:
        assert store.artifact("r2", "stdout.txt")["content"] == b"same output\n"
    both = cli("db", "delete", "run:r2,run:r3", "-y")
    assert "deleted 2 runs" in both.stdout and "(2 stored file contents no other run shared, freed)" in both.stdout
    assert "removed 2 run directories" in both.stdout
    assert query(three_runs, "SELECT COUNT(*) FROM runs")[0][0] == 0
    assert query(three_runs, "SELECT COUNT(*) FROM blobs")[0][0] == 0 and list(runs_dir.iterdir()) == []
    assert cli("db", "check").returncode == 0


def test_db_delete_keeps_a_run_directory_that_a_run_still_stored_works_in(isolated_db):
    with Store(isolated_db) as store:
        shared = store.runs_dir / "campaign-x"
        shared.mkdir(parents=True)
        (shared / "hpl.dat").write_text("shared input\n")
        for run_id in ("s1", "s2"):
            store.begin_run(RunRecord(run_id, "hpl", workdir=str(shared)))
            store.finish_run(run_id, "ok", True, None, 0, 1.0, [])
        first = store.delete_runs(["s1"])
        assert first.runs == 1 and first.dirs == [] and shared.is_dir()
        assert first.kept_dirs == [f"{shared.resolve()} (runs still stored use it)"]
        last = store.delete_runs(["s2"])
        assert last.runs == 1 and last.dirs == [str(shared.resolve())] and not shared.exists()


def test_db_delete_answered_yes_and_an_imported_runs_folder_is_left_alone(isolated_db, tmp_path):
    import shutil

    folder = tmp_path / "study"
    shutil.copytree(OUTPUTS, folder)
    assert cli("import", "-q", str(folder)).returncode == 0
    before = sorted(p.name for p in folder.iterdir())
    stored = query(isolated_db, "SELECT COUNT(*) FROM runs")[0][0]
    streams = query(isolated_db, "SELECT COUNT(*) FROM runs WHERE benchmark='stream'")[0][0]
    assert streams >= 1
    out = answering("db", "delete", "benchmark:stream", input_text="y\n")
    assert out.returncode == 0 and f"deleted {streams} run" in out.stdout, out.stdout + out.stderr
    assert "left " in out.stdout and "as it is" in out.stdout and "removed 0 run directories" in out.stdout
    assert sorted(p.name for p in folder.iterdir()) == before  # the user's files are theirs
    assert query(isolated_db, "SELECT COUNT(*) FROM runs")[0][0] == stored - streams
    assert cli("db", "delete", "benchmark:stream", "--yes").returncode == 2  # nothing left to match
    assert cli("db", "check").returncode == 0


def test_an_old_database_is_upgraded_and_read_before_it_is(isolated_db):
    from tests.test_store_blobs import _v1_database

    isolated_db.parent.mkdir(parents=True)
    _v1_database(isolated_db)
    with Store(isolated_db, read_only=True) as store:  # read as it is: no curation yet, nothing written
        assert not store.has_curation and store.exclusion("ok") is None and store.notes("ok") == []
        runs = select_runs(store, Selection())
        assert runs and all(r["excluded"] is None and r["notes"] == [] for r in runs)
    assert query(isolated_db, "PRAGMA user_version")[0][0] == 1
    run_id = runs[0]["id"]
    shown = cli_json("results", run_id, "--format", "json")
    assert shown["excluded"] is None and shown["notes"] == [] and "excluded" not in shown["flags"]
    assert cli("results").returncode == 0
    out = cli("exclude", f"run:{run_id}", "--reason", "from before the upgrade")  # a write upgrades it
    assert out.returncode == 0, out.stderr
    assert query(isolated_db, "PRAGMA user_version")[0][0] == SCHEMA_VERSION == 4
    assert _run(isolated_db, run_id)["excluded"] == "from before the upgrade"


def test_version_two_database_is_migrated_by_db_migrate(isolated_db):
    with Store(isolated_db) as store:
        store.begin_run(RunRecord("old", "stream"))
        store.finish_run("old", "ok", True, None, 0, 1.0, [])
    con = sqlite3.connect(isolated_db)  # as version 2 left it: no curation tables
    con.executescript("DROP TABLE curation; DROP TABLE notes; PRAGMA user_version = 2;")
    con.close()
    out = cli("db", "migrate")
    assert out.returncode == 0 and "2 -> 4" in out.stdout, out.stdout + out.stderr
    tables = {r[0] for r in query(isolated_db, "SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"curation", "notes"} <= tables
    assert cli("note", "old", "kept through the upgrade").returncode == 0
    assert json.loads(cli("results", "old", "--format", "json").stdout)["notes"] == ["kept through the upgrade"]
