"""The hostile corpus, campaign files and options: every case is refused with a located message.

Each case runs the real CLI under a memory and time bound (tests/hostile.py) and checks the exit
code (2: bad input), the message (what, and where: `file:line` or the option), that no traceback
leaked, and that nothing was stored or run. The cases are those of issue 15: resource bombs,
shell injection, values no process can hold, and tracebacks that used to come out of careless
input. The database, import and process cases are in test_hostile_db.py,
test_hostile_import.py and test_orphans.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tests.conftest import query
from tests.hostile import assert_refused, run_bounded

# the "billion laughs": 9 levels of 9 aliases, 450 bytes that expand to 9^9 strings
BOMB = "name: bomb\na: &a [" + ", ".join(['"lol"'] * 9) + "]\n" + "".join(
    f"{b}: &{b} [" + ", ".join([f"*{a}"] * 9) + "]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True)
) + "benchmarks: [{benchmark: stream}]\n"

COMMAND = "name: c\nbenchmarks:\n  - benchmark: command\n    params: {command: 'echo {x}'%s}\n    space: %s\n"


def block(params: str, benchmark: str = "hpcc") -> str:
    return f"name: c\nbenchmarks:\n  - benchmark: {benchmark}\n    params: {params}\n"


# (id, campaign text, message fragments; the file's line is checked when given as ':N')
CAMPAIGNS = [
    ("yaml-alias-bomb", BOMB, ["max_yaml_nodes"]),
    ("yaml-nested-brackets", "name: x\nbenchmarks: " + "[" * 20000 + "]" * 20000 + "\n", ["max_yaml_depth", ":2"]),
    ("yaml-too-many-aliases", "name: x\na: &a 1\nb: [" + ", ".join(["*a"] * 101) + "]\nbenchmarks: []\n",
     ["max_yaml_aliases", ":3"]),
    ("yaml-non-scalar-key", "name: x\n? [a, b]\n: 1\nbenchmarks: [{benchmark: stream}]\n", ["key must be plain text"]),
    ("repeats-billion", "name: r\nrepeats: 1000000000\nbenchmarks: [{benchmark: stream}]\n", ["max_repeats", ":2"]),
    ("space-ten-million", COMMAND % ("", "{x: 1..10000, y: 1..1000}"), ["max_points", ":5"]),
    ("range-hundred-million", COMMAND % ("", "{x: 1..100000000}"), ["max_range_values", ":5"]),
    ("expr-nested-power", block("{n: {expr: '2**64**64'}}"), ["max_int_bits", ":4"]),
    ("expr-power-chain", block("{n: {expr: '((2**64)**64)**64'}}"), ["max_int_bits"]),
    ("expr-ten-billion-string", block("{n: {expr: \"len('a'*10**10)\"}}"), ["not allowed"]),
    ("expr-string-times-two-billion", COMMAND % (", y: {expr: \"'a'*(2*10**9)\"}", "{x: [1]}"),
     ["max_sequence", ":4"]),
    ("expr-list-times-million", COMMAND % (", y: {expr: '[1]*10**6'}", "{x: [1]}"), ["max_sequence"]),
    ("expr-twenty-thousand-brackets", block("{n: {expr: '" + "(" * 20000 + "1" + ")" * 20000 + "'}}"),
     ["max_expr_chars"]),
    ("expr-deep-nesting", block("{n: {expr: '" + "(" * 100 + "1" + ")" * 100 + "'}}"), ["max_expr_depth"]),
    ("hpl-n-negative-seconds", block("{n: {hpl_n: {seconds: -10}}, nb: 192}"), ["hpl_n seconds", ":4"]),
    ("hpl-n-text-fraction", block("{n: {hpl_n: {fraction: abc}}, nb: 192}"), ["hpl_n fraction", "finite"]),
    ("hpl-n-zero-efficiency", block("{n: {hpl_n: {seconds: 60, efficiency: 0}}, nb: 192}"),
     ["hpl_n efficiency", "(0, 1]"]),
    ("name-300-characters", "name: " + "a" * 300 + "\nbenchmarks: [{benchmark: stream}]\n",
     ["max_name_chars", ":1"]),
    ("block-name-with-slash", "name: b\nbenchmarks: [{benchmark: stream, name: ../../etc}]\n", ["cannot contain '/'"]),
    ("env-key-with-equals", "name: e\nenv: {'A=B': 1}\nbenchmarks: [{benchmark: stream}]\n",
     ["environment name", ":2"]),
    ("env-value-with-nul", 'name: e\nenv: {A: "x\\0y"}\nbenchmarks: [{benchmark: stream}]\n', ["NUL", ":2"]),
    ("timeout-nan", "name: t\ntimeout: .nan\nbenchmarks: [{benchmark: stream}]\n", ["finite duration", ":2"]),
    ("timeout-infinite", "name: t\nbenchmarks: [{benchmark: stream, timeout: .inf}]\n", ["finite duration"]),
    ("threshold-nan", block("{n: 1000, threshold: .nan}"), ["threshold must be a finite number", ":4"]),
    ("n-overflowing-to-infinity", block("{n: 1e999}"), ["n must be"]),
    ("ranks-billion", block("{max_log2: 4, ranks: 1000000000}", "pingpong"), ["ranks must be at most"]),
    ("command-value-with-nul", COMMAND % ("", '{x: ["a\\0b"]}'), ["NUL"]),
]


def write(tmp_path: Path, text: str | bytes, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def nothing_stored(db: Path) -> None:
    assert not db.exists() or not query(db, "SELECT id FROM runs"), "a refused campaign stored runs"
    runs_dir = db.parent / "runs"
    assert not runs_dir.exists() or not any(runs_dir.iterdir()), "a refused campaign made run directories"


@pytest.mark.parametrize("text,fragments", [c[1:] for c in CAMPAIGNS], ids=[c[0] for c in CAMPAIGNS])
def test_hostile_campaign_is_refused_before_anything_runs(tmp_path, isolated_db, text, fragments):
    path = write(tmp_path, text)
    out = run_bounded("campaign", "run", str(path))
    lines = [f"{path}{f}" for f in fragments if f.startswith(":")]
    assert_refused(out, 2, *[f for f in fragments if not f.startswith(":")], *lines)
    assert out.seconds < 30
    nothing_stored(isolated_db)


@pytest.mark.parametrize("raw,fragment", [
    (b"name: x\xff\nbenchmarks: []\n", "not UTF-8 text: byte 0xff at offset 7"),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00binary", "NUL byte"),
    (b"name: x\nbenchmarks: [{benchmark: stream}]\n" + b"#" * (5 * 2**20), "max_file_bytes"),
], ids=["latin-1-byte", "binary", "five-megabytes"])
def test_files_that_are_not_campaign_text(tmp_path, isolated_db, raw, fragment):
    path = write(tmp_path, raw)
    assert_refused(run_bounded("campaign", "run", str(path)), 2, fragment, str(path))
    nothing_stored(isolated_db)


def test_a_directory_is_not_a_campaign(tmp_path, isolated_db):
    assert_refused(run_bounded("campaign", "run", str(tmp_path)), 2, "is a directory")


def test_limits_can_be_raised_and_bad_limit_values_are_refused(tmp_path, isolated_db):
    path = write(tmp_path, COMMAND % ("", "{x: 1..150000}"))
    assert_refused(run_bounded("plan", str(path)), 2, "max_range_values=100000")
    raised = run_bounded("plan", str(path), "--json", env={"CLUSTERBENCH_LIMIT_MAX_RANGE_VALUES": "200000",
                                                           "CLUSTERBENCH_LIMIT_MAX_RUNS": "200000"})
    assert raised.code == 0, raised.text[-2000:]
    small = write(tmp_path, COMMAND % ("", "{x: [1, 2]}"), "small.yaml")
    assert_refused(run_bounded("plan", str(small), env={"CLUSTERBENCH_LIMIT_MAX_RUNS": "many"}), 2,
                   "CLUSTERBENCH_LIMIT_MAX_RUNS", "not a whole number")


def test_plan_hpl_nb_range_is_bounded():
    out = run_bounded("plan", "hpl", "--nb", "1..100000000:1")
    assert_refused(out, 2, "NB values", "max_range_values")
    assert out.seconds < 30


def test_shell_syntax_in_values_stays_text(tmp_path, isolated_db):
    marker = tmp_path / "pwned"
    values = [f"$(touch {marker}1)", f"`touch {marker}2`", f"a; touch {marker}3", "it's \"q\"\nline2 | cat"]
    path = write(tmp_path, "name: inj\nbenchmarks:\n  - benchmark: command\n    params: {command: 'echo {x}'}\n"
                 "    space:\n      x:\n" + "".join(f"        - {json.dumps(v)}\n" for v in values))
    out = run_bounded("campaign", "run", str(path))
    assert out.code == 0, out.text[-2000:]
    assert not list(tmp_path.glob("pwned*")), "a substituted value ran as shell syntax"
    printed = {(Path(r["workdir"]) / "stdout.txt").read_text() for r in query(isolated_db, "SELECT workdir FROM runs")}
    assert printed == {v + "\n" for v in values}


def test_catastrophic_metric_pattern_makes_the_run_invalid_in_bounded_time(tmp_path, isolated_db):
    path = write(tmp_path, "name: redos\nbenchmarks:\n  - benchmark: command\n    params:\n"
                 "      command: \"python3 -c 'print(\\\"x\\\" * 5000)'\"\n"
                 "      metrics: [{name: v, pattern: '(x+x+)+y'}]\n")
    out = run_bounded("campaign", "run", str(path), env={"CLUSTERBENCH_LIMIT_MAX_PARSE_SECONDS": "1"})
    assert out.seconds < 30, out.text[-2000:]
    (row,) = query(isolated_db, "SELECT status, valid, reason FROM runs")
    assert row["status"] == "invalid" and row["valid"] == 0
    assert "catastrophic backtracking" in row["reason"] and "max_parse_seconds" in row["reason"]


def test_bench_options_are_checked_like_campaign_values(isolated_db):
    assert_refused(run_bounded("bench", "hpcc", "-p", "n=1000", "-p", "threshold=.nan"), 2, "threshold", "finite")
    assert_refused(run_bounded("bench", "stream", "-p", "threads=99999999"), 2, "threads must be at most")
    assert not os.path.exists(isolated_db) or not query(isolated_db, "SELECT id FROM runs")


@pytest.mark.parametrize("args,fragments", [
    (["plan", "hpl", "--nodes", "0"], ["--nodes"]),
    (["plan", "hpl", "--nodes", "99999999999"], ["--nodes"]),
    (["plan", "hpl", "--memory", "9" * 400 + "GiB"], ["--memory", "larger than any machine"]),
    (["plan", "hpl", "--efficiency", "0"], ["--efficiency", "(0, 1]"]),
    (["plan", "hpl", "--fraction", "nan"], ["--fraction"]),
    (["plan", "hpl", "--n", "10000000000000"], ["--n"]),
    (["run", "--dry-run", "--budget", "9" * 50 + "d"], ["--budget", "longer than a year"]),
    (["run", "--dry-run", "--nb", "0"], ["--nb"]),
    (["system", "--frequency", "1e999"], ["--frequency"]),
    (["build", "stream", "--source", "/nonexistent", "--ntimes", "100000000"], ["--ntimes"]),
], ids=["nodes-zero", "nodes-huge", "memory-400-digits", "efficiency-zero", "fraction-nan", "n-huge",
        "budget-huge", "nb-zero", "frequency-infinite", "ntimes-huge"])
def test_options_with_sizes_and_counts_are_bounded(isolated_db, args, fragments):
    out = run_bounded(*args)
    assert_refused(out, 2, *fragments)
    assert out.seconds < 30
    assert not isolated_db.exists() or not query(isolated_db, "SELECT id FROM runs")
