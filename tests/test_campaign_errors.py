"""Malformed campaigns: one clear message naming file, line and field; exit code 2; nothing runs."""

import sqlite3
import textwrap

import pytest
from tests.conftest import cli

GOOD_BLOCK = """\
name: bad
benchmarks:
  - benchmark: hpcc
    params:
      n: 400
    space:
      nb: [32, 64]
"""

# (description, campaign text, expected line, text the message must contain)
CASES = [
    ("unknown top-level key", "name: x\nnmae: y\nbenchmarks:\n  - benchmark: hpcc\n    params: {n: 400}\n",
     2, "nmae: unknown key"),
    ("unknown block key", GOOD_BLOCK + "    spaces: {nb: [1]}\n", 8, "benchmarks[0].spaces: unknown key"),
    ("wrong type", GOOD_BLOCK + "    repeats: three\n", 8, "benchmarks[0].repeats"),
    ("empty space", GOOD_BLOCK.replace("nb: [32, 64]", "nb: []"), 7, "benchmarks[0].space.nb: empty list"),
    ("contradictory constraint", GOOD_BLOCK + "    where: nb > 1000\n", 8,
     "benchmarks[0].where: the constraints remove all 2 point(s)"),
    ("negative N", GOOD_BLOCK.replace("n: 400", "n: -5"), 5, "benchmarks[0].params.n: n must be at least 1"),
    ("unknown benchmark", GOOD_BLOCK.replace("hpcc", "linpack"), 3, "benchmarks[0].benchmark: unknown benchmark"),
    ("reversed range", GOOD_BLOCK.replace("[32, 64]", "'256..32'"), 7, "benchmarks[0].space.nb: invalid nb range"),
    ("forbidden expression", GOOD_BLOCK + "    where: \"__import__('os').system('touch /tmp/pwned')\"\n", 8,
     "not allowed"),
    ("unknown name in expression", GOOD_BLOCK + "    where: ['nb > 0', 'foo < 3']\n", 8,
     "benchmarks[0].where[1]: unknown name 'foo'"),
    ("zip of unequal lists", GOOD_BLOCK.replace("nb: [32, 64]", "nb: [32, 64]\n      p: [1]") + "    combine: zip\n",
     9, "benchmarks[0].combine: combine: zip needs lists of equal length"),
    ("undeclared parameter", GOOD_BLOCK.replace("n: 400", "n: 400\n      nbb: 3"), 6,
     "benchmarks[0].params.nbb: hpcc has no parameter 'nbb'"),
    ("BLAS not installed", GOOD_BLOCK + "      blas: [openblas-turbo]\n", 8,
     "benchmarks[0].space.blas: BLAS variant 'openblas-turbo' is not installed"),
    ("grid does not match ranks", GOOD_BLOCK.replace("n: 400", "n: 400\n      p: 3\n      q: 3"), 6,
     "benchmarks[0].params.p: P x Q = 3x3 = 9 does not equal"),
    ("YAML syntax", "name: x\nbenchmarks:\n  - benchmark: hpcc\n    params: {n: 400\n", 5, "not valid YAML"),
    ("duplicate key", GOOD_BLOCK.replace("    space:", "    params:\n      nb: 1\n    space:"), 6,
     "benchmarks[0].params: duplicate key"),
    ("bad timeout", GOOD_BLOCK + "    timeout: 10 parsecs\n", 8, "benchmarks[0].timeout"),
    ("derived cycle", GOOD_BLOCK.replace("n: 400", "n: {expr: 'q * 2'}\n      q: {expr: 'n // 2'}"), 5,
     "cycle"),
    ("matrix larger than memory", GOOD_BLOCK.replace("n: 400", "n: 4000000"), 5,
     "benchmarks[0].params.n: N=4000000 needs"),
    ("missing required parameter", GOOD_BLOCK.replace("      n: 400\n", "      nb: 64\n").replace(
        "    space:\n      nb: [32, 64]\n", ""), 4, "hpcc needs the parameter 'n'"),
]


@pytest.mark.parametrize("what, text, line, message", CASES, ids=[c[0] for c in CASES])
def test_malformed_campaign(tmp_path, isolated_db, what, text, line, message):
    path = tmp_path / "campaign.yaml"
    path.write_text(textwrap.dedent(text))
    out = cli("campaign", "run", str(path))
    err = " ".join(out.stderr.split())
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"{path}:{line}:" in err, err
    assert message in err, err
    assert "Traceback" not in out.stderr
    if isolated_db.exists():  # nothing ran: not a single run row
        assert sqlite3.connect(isolated_db).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_plan_reports_the_same_error(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(GOOD_BLOCK.replace("n: 400", "n: -5"))
    out = cli("plan", str(path))
    assert out.returncode == 2 and f"{path}:5:" in out.stderr


def test_missing_binary_stops_before_anything_runs(tmp_path, isolated_db):
    path = tmp_path / "c.yaml"
    path.write_text(GOOD_BLOCK.replace("n: 400", "n: 400\n      binary: /nonexistent/hpcc"))
    out = cli("campaign", "run", str(path))
    assert out.returncode == 2 and "hpcc binary not found" in out.stderr
    assert sqlite3.connect(isolated_db).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
