"""Baselines are declared or refused, and `compare` answers the question asked (issue 31, Why 4 and 6).

Every store here is built by importing real outputs (tests/fixtures, ../shared/fixtures) with the real
importer, and read by the real report build and the real command line:

- the HPL baseline table never takes an HPCC run as HPL's baseline, nor N=13440 as the baseline of
  N=44640, and an untagged run is the baseline only when it is otherwise the same configuration;
- `compare` of two BLAS each run at its own N and NB is refused with the nearest pairs (it used to say
  "no metric in common"), as is a tag whose runs differ in N;
- `compare` with many labels starts with one verdict (geometric mean ratio with a 95% interval) and
  summarises the pairs of single values instead of listing them;
- a truncated run is on neither side, and the comparison says it was left out.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from tests.conftest import cli, fixture

from clusterbench.analysis.select import Selection
from clusterbench.report.build import build
from clusterbench.report.model import Options
from clusterbench.store.db import Store

SWEEP = "outputs/this-machine/hpl-nbsweep-N13440-1x2.log"  # HPL 2.3, N=13440, NB 64..256, 1x2: 7 lines
HPCC = "outputs/this-machine/hpccoutf-2rank.txt"  # HPCC 1.5, its HPL at N=13440 NB=224 1x2
CLOUD = ("outputs/hpl-cloud/20170324_015001.out", "outputs/hpl-cloud/20170327_035001.out",
         "outputs/hpl-cloud/20170327_105001.out")  # HPL 2.2, N=44640 NB=180 2x2: 29.71, 33.15, 33.16 Gflop/s
IMB_CORE = "outputs/this-machine/imb-pingpong-bindcore.txt"
IMB_SAMECORE = "outputs/this-machine/imb-pingpong-oversub-samecore.txt"


def _import(db: Path, path: Path | str, *tags: str) -> None:
    """The real importer; every file is said to come from one node (the files do not say), so the
    node count is known and equal, and only what the test is about differs."""
    if not any(t.startswith("nodes=") for t in tags):
        tags = (*tags, "nodes=1")
    args = ["import", "-q", str(path)] + [w for t in tags for w in ("--tag", t)]
    out = cli(*args, env={"CLUSTERBENCH_DB": str(db)})
    assert out.returncode == 0, out.stderr + out.stdout


def _compare(db: Path, *args: str):
    return cli("compare", *args, env={"CLUSTERBENCH_DB": str(db), "COLUMNS": "80"})


def _baseline_rows(db: Path) -> list[list]:
    with Store(db, read_only=True) as store:
        report = build(store, Selection(), Options())
    tables = [t for s in report.sections for t in s.tables if t.slug.startswith("hpl-baseline")]
    assert tables, [t.slug for s in report.sections for t in s.tables]
    return [row for t in tables for row in t.rows]


def _refused(row: list) -> str:
    return " ".join(str(c) for c in row if isinstance(c, str) and c.startswith("no comparable baseline"))


# ---------------------------------------------------------------- the report's baseline tables


def test_hpcc_is_never_hpls_baseline(tmp_path):
    db = tmp_path / "s.db"
    _import(db, fixture(HPCC))  # untagged: lacks the key, but it is HPCC
    _import(db, fixture(SWEEP), "opt=tuned")
    rows = _baseline_rows(db)
    assert rows and all(row[4] is None and row[5] is None for row in rows), rows
    assert all("benchmark" in _refused(row) for row in rows), rows


def test_n13440_is_never_the_baseline_of_n44640(tmp_path):
    db = tmp_path / "s.db"
    _import(db, fixture(SWEEP))  # untagged, N=13440
    _import(db, fixture(CLOUD[1]), "opt=tuned")  # N=44640
    (row,) = _baseline_rows(db)
    assert row[4] is None and row[5] is None, row
    differ = _refused(row)
    assert "n," in differ or differ.endswith(" n)") or ", n" in differ, row
    assert "nb" in differ, row


def test_an_untagged_run_is_the_baseline_only_when_otherwise_equal(tmp_path):
    db = tmp_path / "s.db"
    _import(db, fixture(SWEEP))  # untagged, N=13440 at 84 Gflop/s: not comparable
    _import(db, fixture(HPCC))  # untagged HPCC: not comparable
    _import(db, fixture(CLOUD[0]))  # untagged, N=44640 NB=180 2x2: the one comparable baseline
    for path in CLOUD[1:]:
        _import(db, fixture(path), "opt=tuned")
    (row,) = _baseline_rows(db)
    assert row[2] == "tuned"
    assert row[3] == pytest.approx(33.16, abs=0.01) and row[4] == pytest.approx(29.71, abs=0.01), row
    assert row[5] == pytest.approx(100 * (row[3] - row[4]) / row[4]) and 10 < row[5] < 13


# ---------------------------------------------------------------- compare


def test_two_blas_at_their_own_n_and_nb_are_refused_with_the_nearest_pairs(tmp_path):
    db = tmp_path / "s.db"
    _import(db, fixture(SWEEP), "blas=openblas", "nodes=8")
    _import(db, fixture(CLOUD[0]), "blas=mkl", "nodes=8")
    out = _compare(db, "blas=openblas", "blas=mkl", "-m", "hpl_gflops")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "no metric in common" not in out.stderr and "Traceback" not in out.stderr
    assert "differ in more than blas" in out.stderr and "nearest pairs" in out.stderr, out.stderr
    differ_lines = [line for line in out.stderr.splitlines() if line.strip().startswith("differ in ")]
    assert differ_lines and all("n, nb" in line for line in differ_lines), out.stderr
    assert "n=13440" in out.stderr and "n=44640" in out.stderr
    assert "--match-on" in out.stderr
    assert max(len(line) for line in out.stderr.splitlines()) <= 80, out.stderr
    # Allowed to match on fewer keys: best against best, labelled so, never a paired verdict.
    best = _compare(db, "blas=openblas", "blas=mkl", "-m", "hpl_gflops", "--match-on", "nodes", "--json")
    assert best.returncode == 0, best.stderr
    found = json.loads(best.stdout)
    (row,) = found["rows"]
    assert found["match_on"] == ["nodes"] and row["verdict"].startswith("best vs best")
    assert row["a"]["mean"] == pytest.approx(83.991) and row["b"]["mean"] == pytest.approx(29.71)


def test_a_tag_whose_runs_differ_in_n_is_refused_naming_n(tmp_path):
    db = tmp_path / "s.db"
    _import(db, fixture(SWEEP), "opt=base")  # N=13440
    _import(db, fixture(CLOUD[1]), "opt=tuned")  # N=44640
    out = _compare(db, "opt=base", "opt=tuned", "-m", "hpl_gflops")
    assert out.returncode == 2, out.stdout
    line = next(x for x in out.stderr.splitlines() if x.strip().startswith("differ in "))
    assert "n" in line.split("differ in ")[1].rstrip(":").split(", "), out.stderr


def test_many_labels_start_with_one_geometric_mean_verdict(tmp_path):
    db = tmp_path / "s.db"
    _import(db, fixture(IMB_CORE), "pin=core")
    _import(db, fixture(IMB_SAMECORE), "pin=samecore")
    out = _compare(db, "pin=core", "pin=samecore")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("Verdict: worse."), out.stdout  # both ranks on one core: slower everywhere
    assert "95% interval" in lines[1] and "matched pairs" in lines[1]
    assert "not enough repeats" not in out.stdout  # summarised, not one line per message size
    assert any("a single value" in x for x in lines) and max(len(x) for x in lines) <= 80, out.stdout
    found = json.loads(_compare(db, "pin=core", "pin=samecore", "--json").stdout)
    verdict = found["verdict"]
    assert verdict["pairs"] >= 20 and verdict["single"] == verdict["untested"] == len(found["rows"])
    assert verdict["low"] < verdict["ratio"] < verdict["high"] < 1
    assert found["under_study"] == ["pin"]
    # The geometric mean is of each pair's candidate/baseline, time-like metrics inverted.
    logs = [math.log(r["ratio"]) * (1 if r["higher_is_better"] else -1) for r in found["rows"] if r["ratio"]]
    assert verdict["ratio"] == pytest.approx(math.exp(sum(logs) / len(logs)))
    for row in found["rows"]:  # pairs are the same message size and test on both sides
        assert row["a"]["n"] == row["b"]["n"] == 1 and "bytes=" in row["labels"]


def test_flagged_runs_are_on_neither_side_and_counted(tmp_path):
    db = tmp_path / "s.db"
    cut = tmp_path / "cut" / "hpl-cloud-truncated.out"
    cut.parent.mkdir()
    text = fixture(CLOUD[2]).read_text().splitlines(keepends=True)
    cut.write_text("".join(text[: next(i for i, x in enumerate(text) if x.startswith("Finished"))]))
    _import(db, fixture(CLOUD[0]), "opt=base")
    _import(db, fixture(CLOUD[1]), "opt=tuned")
    _import(db, cut, "opt=tuned")  # the same run cut before HPL's summary: truncated
    found = json.loads(_compare(db, "opt=base", "opt=tuned", "-m", "hpl_gflops", "--json").stdout)
    assert found["left_out"] == {"baseline": {}, "candidate": {"truncated": 1}}
    (row,) = found["rows"]
    assert row["b"]["n"] == 1 and row["b"]["mean"] == pytest.approx(33.15, abs=0.01)
    shown = _compare(db, "opt=base", "opt=tuned", "-m", "hpl_gflops")
    assert "candidate: 1 flagged run left out (truncated 1)" in shown.stdout


def test_flagged_runs_are_never_in_a_baseline_table(tmp_path):
    """The report's baseline table with the report's dataset (what report/hpl.py passes): the truncated
    copy of a run is on neither side."""
    from dataclasses import replace

    from clusterbench.analysis import flags, shape
    from clusterbench.analysis.dataset import load
    from clusterbench.report import baselines, hpl

    db = tmp_path / "s.db"
    cut = tmp_path / "cut" / "hpl-cloud-truncated.out"
    cut.parent.mkdir()
    text = fixture(CLOUD[2]).read_text().splitlines(keepends=True)
    cut.write_text("".join(text[: next(i for i, x in enumerate(text) if x.startswith("Finished"))]))
    _import(db, fixture(CLOUD[0]))
    _import(db, fixture(CLOUD[1]), "opt=tuned")
    _import(db, cut, "opt=tuned")
    with Store(db, read_only=True) as store:
        data = load(store, Selection(), names=set(hpl.rmax()[0]))
        truncated = {rid for rid, run in data.runs.items() if "truncated" in flags.run_flags(run)}
        assert len(truncated) == 1
        rows = data.of(*hpl.rmax()[0])
        values = shape.frame(data, rows, label_keys=hpl.label_keys())
        best = replace(shape.infer(values, hpl.BY_NODES), x="nodes", facets=[], combine=shape.BEST)
        tables = baselines.tables(values, best, data)
    found = [row for t in tables for row in t.rows]
    assert found and all(not truncated & set(row[-1]) for row in found), found
    assert all(row[4] == pytest.approx(29.71, abs=0.01) and row[3] == pytest.approx(33.15, abs=0.01)
               for row in found), found
