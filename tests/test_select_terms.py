"""Selection terms: KEY OP VALUE on tags, parameters, facts and run values, canonical and numeric
comparison, alternatives and ranges, bounds, the hint when nothing matches, and `results --select`."""

from __future__ import annotations

import csv
import io
import json

import pytest
from tests.conftest import cli, cli_json

from clusterbench.analysis.select import (
    MAX_TERM_CHARS,
    MAX_TERMS,
    Selection,
    no_match_error,
    parse_selection,
    select_rows,
    select_runs,
)
from clusterbench.bench.metrics import Metric
from clusterbench.errors import UserInputError
from clusterbench.store.db import Store
from clusterbench.store.records import RunRecord

# id, params, tags, nodes column, status, facts
RUNS = [
    ("a1", {"blas": "openblas-serial", "n": 13440, "nodes": 4, "interconnect": "tcp"}, {}, None, "ok", {}),
    ("a2", {"blas": "OpenBLAS.serial", "n": 30000, "interconnect": "IBV"}, {"system": "pi4"}, "n[1-8]", "ok",
     {"pinning": {"verdict": "match"}}),
    ("b1", {"blas": "blis_serial", "n": 20000, "nb": [64, 128]}, {"blas": "mkl"}, "n1", "invalid",
     {"pinning": {"verdict": "mismatch"}}),
    ("b2", {"blas": "blis-openmp", "n": 25000.0, "grid": "2x2"}, {"ht": True}, None, "ok", {}),
]


def _store(path) -> Store:
    store = Store(path)
    store.save_system("sys1", "node-a", {}, {})
    for i, (rid, params, tags, nodes, status, facts) in enumerate(RUNS):
        store.begin_run(RunRecord(rid, "hpl", params, campaign="camp-a" if rid.startswith("a") else "camp-b",
                                  tags=tags, nodes=nodes, system_id="sys1" if rid == "a1" else None))
        store.finish_run(rid, status, status == "ok", None, 0, 1.0 + i, [Metric("hpl_gflops", 10.0 + i, "Gflop/s")],
                         facts=facts)
    return store


def ids(store: Store, *words: str) -> list[str]:
    return sorted(r["id"] for r in select_runs(store, parse_selection(list(words), store)))


@pytest.fixture
def store(tmp_path):
    with _store(tmp_path / "s.db") as s:
        yield s


def test_canonical_blas_and_interconnect(store):
    assert ids(store, "blas=openblas_serial") == ["a1", "a2"]  # 'OpenBLAS.serial' is the same library
    assert ids(store, "blas=blis-serial") == []  # b1's tag blas=mkl wins over its parameter
    assert ids(store, "param:blas=blis-serial") == ["b1"]
    assert ids(store, "tag:blas=mkl") == ["b1"]
    assert ids(store, "interconnect=infiniband") == ["a2"]
    assert ids(store, "interconnect=ethernet") == ["a1"]


def test_numbers_compare_as_numbers(store):
    assert ids(store, "n>20000") == ["a2", "b2"]
    assert ids(store, "n>=20000") == ["a2", "b1", "b2"]
    assert ids(store, "n=25000") == ["b2"]  # 25000.0 stored
    assert ids(store, "n<1e5,n>2e4") == ["a2", "b2"]  # a range: both must hold
    assert ids(store, "n!=13440") == ["a2", "b1", "b2"]


def test_derived_values_nodes_system_status_campaign(store):
    assert ids(store, "nodes>=4") == ["a1", "a2"]  # a parameter (a1) and a node list n[1-8] (a2)
    assert ids(store, "nodes=1") == ["b1", "b2"]
    assert ids(store, "system=node-a") == ["a1"]  # the stored system's host name
    assert ids(store, "system=sys1") == ["a1"]  # or its id
    assert ids(store, "system=pi4") == ["a2"]  # a tag comes first
    assert ids(store, "status=invalid") == ["b1"]
    assert ids(store, "campaign=camp-b,status=ok") == ["b2"]
    assert ids(store, "campaign!=camp-a") == ["b1", "b2"]


def test_lists_facts_booleans_and_alternatives(store):
    assert ids(store, "nb=128") == ["b1"]  # a list matches when it holds the value
    assert ids(store, "nb!=128") == []
    assert ids(store, "fact:pinning.verdict=match") == ["a2"]
    assert ids(store, "fact:pinning.verdict!=match") == ["b1"]  # a run without the fact never matches
    assert ids(store, "ht=true") == ids(store, "ht=yes") == ["b2"]  # --tag ht=yes stores True
    assert ids(store, "blas=mkl,blas=blis-openmp") == ["b1", "b2"]  # equal terms of one key: alternatives
    assert ids(store, "camp-a", "n>20000") == ["a2"]
    assert ids(store, "campaign:camp-a,campaign:camp-b") == ["a1", "a2", "b1", "b2"]
    assert ids(store, "grid=2x2", "benchmark:hpl", "source:run") == ["b2"]
    assert ids(store, "a1", "run:b2") == ["a1", "b2"]  # a bare run id is a run term: alternatives
    assert ids(store, "run:a1", "status=invalid") == []


def test_selections_built_by_callers_still_work(store):
    everything = [f"r{i}" for i in range(600)] + ["a1", "b1"]  # more ids than SQL is asked about
    assert sorted(r["id"] for r in select_runs(store, Selection({"run": set(everything)}))) == ["a1", "b1"]
    assert [r["id"] for r in select_runs(store, Selection({"tag": {"system=pi4"}}))] == ["a2"]
    assert [r["id"] for r in select_runs(store, Selection())] == ["a1", "a2", "b1", "b2"]
    run = select_runs(store, Selection({"run": {"a2"}}))[0]
    assert parse_selection("fact:pinning.verdict=match", store).matches(run)


@pytest.mark.parametrize("bad, says", [
    ("n=>5", "malformed operator"), ("n==5", "malformed operator"), ("n<>5", "malformed operator"),
    ("n!5", "malformed operator"), ("blas=", "needs a key and a value"), ("=3", "needs a key and a value"),
    ("kind:x=1", "unknown kind 'kind'"), ("param:nothing", "has no operator"), ("campaign:", "write campaign:VALUE"),
    ("nowhere", "neither a campaign"), ("fact:a..b=1", "dotted path"),
])
def test_malformed_terms_say_the_syntax(store, bad, says):
    with pytest.raises(UserInputError) as err:
        parse_selection(bad, store)
    assert says in str(err.value)


def test_terms_are_bounded(store):
    with pytest.raises(UserInputError, match=f"more than {MAX_TERMS} selection terms"):
        parse_selection(",".join(f"n={i}" for i in range(MAX_TERMS + 1)), store)
    with pytest.raises(UserInputError, match="characters"):
        parse_selection("x=" + "y" * MAX_TERM_CHARS, store)
    with pytest.raises(UserInputError, match="longer than"):
        parse_selection("," * (MAX_TERMS * (MAX_TERM_CHARS + 2)), store)
    assert ids(store, *[f"n={i}" for i in range(MAX_TERMS)]) == []


def test_a_term_that_matches_nothing_names_the_stored_values(store):
    selection = parse_selection("blas=netlib", store)
    assert select_rows(store, selection) == []
    err = no_match_error(store, selection)
    assert "blas=netlib" in err.message
    assert err.hint.startswith("blas: OpenBLAS.serial, blis-openmp, mkl, openblas-serial")
    err = no_match_error(store, parse_selection("nosuch>3", store))
    assert "no selected run has a nosuch" in err.hint and "parameters: blas, grid, interconnect, n" in err.hint
    err = no_match_error(store, parse_selection("benchmark:stream", store))
    assert err.hint == "benchmark: hpl"
    err = no_match_error(store, parse_selection("camp-a,status=invalid", store))
    assert "among the 2 runs campaign:camp-a selects" in err.message and err.hint == "status: ok"
    err = no_match_error(store, parse_selection("nodes>=4,status=invalid", store))
    assert "not all together" in err.message


def test_results_select_and_flags_on_the_command_line(isolated_db):
    with _store(isolated_db) as store:
        store.begin_run(RunRecord("cut", "hpl", {"blas": "openblas-serial", "n": 50000}))
        store.finish_run("cut", "ok", True, "the output is truncated: it ends before HPL's summary", 0, 2.0,
                         [Metric("hpl_gflops", 5.5, "Gflop/s")], facts={"file_name_conflicts": {"n": 40000}})
    rows = list(csv.DictReader(io.StringIO(cli("results", "--select", "blas=openblas_serial,n>20000",
                                                "--format", "csv").stdout)))
    assert sorted((r["run_id"], r["value"], r["flags"]) for r in rows) == [  # runs begun in one ms: any order
        ("a2", "11.0", ""), ("cut", "5.5", "truncated, name-conflict")]
    records = cli_json("results", "--select", "blas=openblas-serial", "--select", "nodes>=4", "--format", "json")
    assert sorted((r["run_id"], r["flags"]) for r in records) == [("a1", []), ("a2", [])]
    table = cli("results", "--select", "status=ok,n>=50000")
    assert table.returncode == 0 and "truncated, name-conflict" in table.stdout and "a1" not in table.stdout
    detail = cli_json("results", "cut", "--format", "json")
    assert detail["flags"] == ["truncated", "name-conflict"]
    stats = cli("results", "--select", "campaign=camp-a", "--group-by", "n", "--stat", "n,mean", "--format", "csv")
    assert stats.returncode == 0, stats.stderr
    by_n = {float(r["param.n"]): r for r in csv.DictReader(io.StringIO(stats.stdout))}  # "n" is the count
    assert set(by_n) == {13440, 30000} and by_n[30000]["mean"] == "11.0"
    for fmt in ("csv", "json", "table"):
        out = cli("results", "--select", "n>0", "--group-by", "n,blas", "--format", fmt)
        assert out.returncode == 0 and "np." not in out.stdout, out.stdout + out.stderr
        out = cli("results", "--select", "n>0", "--format", fmt, "--limit", "0")
        assert out.returncode == 0 and "np." not in out.stdout, out.stdout + out.stderr
    json.loads(cli("results", "--select", "n>0", "--format", "json").stdout)


def test_results_select_refusals_exit_2(isolated_db):
    _store(isolated_db).close()
    out = cli("results", "--select", "blas=netlib")
    assert out.returncode == 2 and "blas: OpenBLAS.serial, blis-openmp" in out.stderr, out.stderr
    out = cli("results", "--select", "n=>4")
    assert out.returncode == 2 and "malformed operator" in out.stderr and "Traceback" not in out.stderr
    out = cli("results", "--select", "what:ever=1")
    assert out.returncode == 2 and "unknown kind 'what'" in out.stderr


def test_a_damaged_json_column_or_an_odd_key_falls_back_to_decoding_in_python(tmp_path):
    import sqlite3

    path = tmp_path / "s.db"
    _store(path).close()
    con = sqlite3.connect(path)
    con.execute("UPDATE runs SET params = 'not json {' WHERE id = 'b1'")  # SQLite's json_extract would fail
    con.commit()
    con.close()
    with Store(path, read_only=True) as store:
        assert ids(store, "n>=20000") == ["a2", "b2"]  # b1 now has no readable parameters
        assert ids(store, "tag:blas=mkl") == ["b1"]
        assert ids(store, 'param:we"ird=1') == []  # a key a JSON path cannot quote


def test_the_python_api_selects_with_the_same_terms(isolated_db):
    from clusterbench import api

    _store(isolated_db).close()
    frame = api.runs(select="blas=openblas_serial,n>20000")
    assert list(frame["id"]) == ["a2"] and list(frame["flags"]) == [[]]
    assert set(api.runs(select=["status=invalid"])["id"]) == {"b1"}
    assert list(api.runs(select="status=invalid")["flags"]) == [["invalid"]]
    with pytest.raises(UserInputError, match="malformed operator"):
        api.runs(select="n=>3")
