"""Tags after import: Store.update_tags and `clusterbench tag` / `untag`."""

from __future__ import annotations

import json

import pytest
from tests.conftest import cli, cli_json, fixture, query

from clusterbench.errors import UserInputError
from clusterbench.store.curation import MAX_TAG_KEY_CHARS, MAX_TAG_VALUE_CHARS, MAX_TAGS_PER_RUN
from clusterbench.store.db import Store
from clusterbench.store.records import RunRecord

OUTPUTS = fixture("outputs/this-machine")


def _tags(db) -> dict[str, dict]:
    return {r["id"]: json.loads(r["tags"]) for r in query(db, "SELECT id, tags FROM runs")}


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "t.db") as s:
        for rid, tags in (("r1", {}), ("r2", {"system": "pi4"}), ("r3", {"system": "pi4", "old": 1})):
            s.begin_run(RunRecord(rid, "stream", tags=tags))
            s.finish_run(rid, "ok", True, None, 0, 1.0, [])
        yield s


def test_update_tags_adds_replaces_removes_and_counts_changes(store):
    assert store.update_tags(["r1", "r2", "r3", "nosuch"], {"system": "pi4"}) == 1  # r2, r3 had it already
    assert store.update_tags(["r2", "r3"], {"system": "pi5", "blas": "blis"}, remove=["old"]) == 2
    assert _tags(store.path) == {"r1": {"system": "pi4"}, "r2": {"system": "pi5", "blas": "blis"},
                                 "r3": {"system": "pi5", "blas": "blis"}}
    assert store.update_tags(["r1"], {}, remove=["absent"]) == 0
    assert store.update_tags(["r1"], {"flag": True}) == 1 and store.update_tags(["r1"], {"flag": 1}) == 1  # not equal
    assert store.update_tags(iter(["r1", "r1"]), {}, remove=["flag"]) == 1


@pytest.mark.parametrize("add, remove, says", [
    ({"": "x"}, [], "invalid tag key"), ({"a b": "x"}, [], "invalid tag key"), ({"a,b": 1}, [], "invalid tag key"),
    ({"n>3": 1}, [], "invalid tag key"), ({"k" * (MAX_TAG_KEY_CHARS + 1): 1}, [], "invalid tag key"),
    ({"k": "v" * (MAX_TAG_VALUE_CHARS + 1)}, [], "characters, more than"), ({"k": "a\nb"}, [], "control character"),
    ({"k": {"nested": 1}}, [], "a dict"), ({"k": None}, [], "a NoneType"), ({"k": float("nan")}, [], "a float"),
    ({}, ["bad key"], "invalid tag key"),
])
def test_bad_tags_are_refused_before_anything_is_written(store, add, remove, says):
    before = _tags(store.path)
    with pytest.raises(UserInputError, match=says):
        store.update_tags(["r1", "r2"], {"fine": "yes"} | add, remove)
    assert _tags(store.path) == before


def test_too_many_tags_on_one_run_change_no_run(store):
    before = _tags(store.path)
    with pytest.raises(UserInputError, match=f"more than the limit of {MAX_TAGS_PER_RUN}"):
        store.update_tags(["r1", "r3"], {f"k{i}": i for i in range(MAX_TAGS_PER_RUN - 1)})  # r3 already has 2
    assert _tags(store.path) == before  # one transaction: r1 was not changed either


def test_tag_and_untag_on_the_command_line(isolated_db):
    assert cli("import", "-q", str(OUTPUTS)).returncode == 0
    hpl = {r["id"] for r in query(isolated_db, "SELECT id FROM runs WHERE benchmark='hpl'")}
    before = isolated_db.read_bytes()
    dry = cli("tag", "benchmark:hpl,nb>=192", "system=pi4-cluster", "interconnect=tcp", "--dry-run")
    assert dry.returncode == 0 and "would change 6 of the 6 selected runs" in dry.stdout, dry.stdout + dry.stderr
    assert isolated_db.read_bytes() == before
    done = cli("tag", "benchmark:hpl,nb>=192", "system=pi4-cluster", "interconnect=tcp")
    assert done.returncode == 0 and "changed 6 of the 6 selected runs" in done.stdout, done.stdout + done.stderr
    wanted = {"system": "pi4-cluster", "interconnect": "tcp"}
    tagged = {rid for rid, tags in _tags(isolated_db).items() if tags == wanted}
    assert len(tagged) == 6 and tagged <= hpl
    again = cli("tag", "source:import", "system=pi4-cluster")
    said = " ".join(again.stdout.split())
    assert "changed 13 of the 19 selected runs (system=pi4-cluster); 6 had them already" in said
    listed = cli_json("results", "--select", "system=pi4-cluster,interconnect=ethernet", "--format", "json")
    assert {r["run_id"] for r in listed} == tagged  # ethernet is tcp, canonically
    gone = cli("untag", "interconnect=tcp", "interconnect", "system")
    assert gone.returncode == 0 and "changed 6 of the 6 selected runs" in gone.stdout
    assert sum(1 for tags in _tags(isolated_db).values() if tags == {"system": "pi4-cluster"}) == 13


@pytest.mark.parametrize("args, says", [
    (["tag", "blas=nothing", "x=1"], "no stored run matches blas=nothing"),
    (["tag", "benchmark:nope", "x=1"], "benchmark: hpcc, hpcg, hpl, imb, osu, stream"),
    (["tag", "source:import", "novalue"], "not KEY=VALUE"),
    (["tag", "source:import", "bad key=1"], "invalid tag key"),
    (["tag", "", "x=1"], "empty selection"),
    (["tag", "n=>3", "x=1"], "malformed operator"),
    (["untag", "source:import", "x=1"], "untag takes tag keys"),
    (["untag", "source:import", "a,b"], "invalid tag key"),
])
def test_refusals_exit_2_and_write_nothing(isolated_db, args, says):
    assert cli("import", "-q", str(OUTPUTS)).returncode == 0
    before = isolated_db.read_bytes()
    out = cli(*args)
    assert out.returncode == 2 and says in " ".join(out.stderr.split()), out.stdout + out.stderr
    assert "Traceback" not in out.stderr and isolated_db.read_bytes() == before


def test_tag_on_a_missing_database_creates_nothing(isolated_db):
    out = cli("tag", "source:import", "x=1")
    assert out.returncode == 2 and "no runs stored yet" in out.stderr and not isolated_db.exists()
