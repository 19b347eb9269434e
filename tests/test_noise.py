"""Know when a number is noise (issue 34): noise floors learned from repeats, held against `compare` and
`history`, and `--repeats auto` / `repeats: auto`, which repeat a point until its headline is precise.

Real runs of the built-in STREAM kernel at a small size (a fraction of a second each) give the floors
and the automatic repeats; the verdict tests store chosen values in a real SQLite store (the values a
test needs to be significant by Welch's test and still within the floor cannot come from a busy
machine). Nothing asserts one run's speed: only the forms of the lines, counts within their bounds,
and relations between verdicts with and without a floor.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests.conftest import cli, query

from clusterbench.analysis import noise
from clusterbench.analysis.flags import counts
from clusterbench.analysis.history import Group, Value, change_verdict, judge
from clusterbench.bench.metrics import Metric, Outcome
from clusterbench.campaign.precision import AutoRepeats, decide, relative_half_width, sampler, until_precise
from clusterbench.execution.executor import RunResult
from clusterbench.store.db import Store
from clusterbench.store.records import RunRecord

STREAM = ("bench", "stream", "-p", "n=100000", "-p", "ntimes=3")
STOPPED = re.compile(r"stream: stopped (after (\d+) runs: 95% interval \+-[\d.]+% <= 50%"
                     r"|at the maximum of (\d+) runs: (\+-[\d.]+% > 50%|\d+ counted runs?, no interval))")


# ---------------------------------------------------------------- the pure rules


def test_robust_cv_and_pooling_are_the_documented_quantities():
    # median 100, absolute deviations 5, 0, 5 -> MAD 5 -> 1.4826 * 5 / 100
    assert noise.robust_cv([95.0, 100.0, 105.0]) == pytest.approx(0.07413)
    assert noise.robust_cv([95.0, 100.0]) is None  # fewer than 3 repeats: no floor
    assert noise.robust_cv([1.0, 100.0, 100.0, 100.0, 100.0]) == 0.0  # one slow run does not make the floor
    assert noise.pooled([(0.03, 3), (0.04, 5)]) == pytest.approx(((2 * 0.0009 + 4 * 0.0016) / 6) ** 0.5)


def test_a_key_one_run_does_not_state_keeps_it_apart():
    stated = {"benchmark": "stream", "n": 100000, "threads": 2, "system": "vm"}
    unstated = {"benchmark": "stream", "n": 100000, "system": "vm"}
    assert noise.configuration_text(stated) != noise.configuration_text(unstated)
    assert noise.configuration_text(stated) == noise.configuration_text(stated | {"n": 100000.0})


def test_the_stopping_rule_says_why_it_stopped():
    policy = AutoRepeats(0.02, 5)
    assert not decide([100.0, 100.5], 2, policy).stop  # never fewer than 3 samples
    precise = decide([100.0, 100.5, 99.5], 3, policy)
    assert precise.stop and re.fullmatch(r"stopped after 3 runs: 95% interval \+-[\d.]+% <= 2%", precise.reason)
    assert precise.half_width == pytest.approx(relative_half_width([100.0, 100.5, 99.5]))
    wide = decide([100.0, 120.0, 80.0, 110.0, 90.0], 5, policy)
    assert wide.stop and re.fullmatch(r"stopped at the maximum of 5 runs: \+-[\d.]+% > 2%", wide.reason)
    going = decide([100.0, 120.0, 80.0], 4, policy, {"disturbed": 1})
    assert not going.stop and going.counted == 3
    failed = decide([], 3, policy, {"failed": 3})
    assert failed.stop and failed.reason == "stopped after 3 runs: none counted, no interval (3 not counted: failed 3)"


def test_a_history_change_within_the_floor_is_not_a_regression():
    start = datetime(2026, 1, 1, tzinfo=UTC)
    values = [100.0 + (i % 3 - 1) * 0.3 for i in range(10)] + [94.0 + (i % 3 - 1) * 0.3 for i in range(10)]

    def series(floor):
        group = Group("vm", "stream", {}, "stream", "MB/s", True, noise_floor=floor)
        group.values = [Value(f"r{i}", (start + timedelta(days=i)).isoformat(), v) for i, v in enumerate(values)]
        judge(group, 0.05)
        return group

    plain = series(None)
    assert plain.verdict == "regression"  # -6% beyond the 5% asked for
    held = series(0.08)
    assert held.verdict == "no change beyond the noise" and not held.regression
    assert [change_verdict(held, c) for c in held.changes] == ["within the noise floor (8%)"]
    assert series(0.03).verdict == "regression"  # a floor below the change changes nothing


# ---------------------------------------------------------------- floors from real repeats


def test_the_floor_is_learned_from_repeats_stored_and_listed(isolated_db):
    out = cli(*STREAM, "--repeats", "3", "--json")
    assert out.returncode == 0, out.stderr
    ids = {r["id"] for r in json.loads(out.stdout)}
    rows = query(isolated_db, "SELECT * FROM noise_floors WHERE metric='stream_triad'")
    assert len(rows) == 1
    row = rows[0]
    assert row["n"] == 3 and set(json.loads(row["runs"])) == ids and 0 <= row["floor"] < 5
    assert json.loads(row["configuration"])["n"] == "100000"
    # the same point with a tag is another configuration: never pooled with the untagged runs
    assert cli(*STREAM, "--repeats", "3", "--tag", "variant=x").returncode == 0
    rows = query(isolated_db, "SELECT configuration, n FROM noise_floors WHERE metric='stream_triad'")
    assert len(rows) == 2 and all(r["n"] == 3 for r in rows)
    assert sum("tag:variant" in r["configuration"] for r in rows) == 1
    listed = cli("history", "--noise", "-m", "stream_triad", env={"COLUMNS": "80"})
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert sum("stream_triad" in line for line in lines) == 2
    assert any("tag:variant=x" in line for line in lines) and any("not stated" in line for line in lines)


def test_no_floor_without_three_counted_repeats(isolated_db):
    assert cli(*STREAM, "--repeats", "2").returncode == 0
    out = cli("history", "--noise")
    assert out.returncode == 2 and "no noise floor" in out.stderr


# ---------------------------------------------------------------- compare held to the floor


def _stored(db, side: str, values: list[float], tags: dict | None = None, facts: dict | None = None,
            system: str | None = "testbox") -> None:
    """Runs of one configuration stored with chosen values; `system` names the machine (a tag, as an
    import's --tag system=... does), None leaves it unknown."""
    with Store(db) as store:
        for i, value in enumerate(values):
            run_id = f"{side}-{i:03d}"
            machine = {"system": system} if system else {}
            store.begin_run(RunRecord(run_id, "stream", params={"n": 100000, "threads": 1},
                                      tags={"variant": side} | machine | (tags or {})))
            store.finish_run(run_id, "ok", True, None, 0, 1.0, [Metric("stream_triad", value, "MB/s")],
                             facts=facts)


def test_runs_that_do_not_say_which_machine_ran_them_make_no_floor(isolated_db):
    _stored(isolated_db, "a", [100.0, 101.0, 99.0], system=None)
    out = cli("history", "--noise")
    assert out.returncode == 2 and "no noise floor" in out.stderr


def test_a_disturbed_run_never_makes_a_floor(isolated_db):
    _stored(isolated_db, "a", [100.0, 101.0, 99.0])
    _stored(isolated_db, "d", [10.0, 200.0, 50.0], tags={"variant": "a"}, facts={"disturbed": {"steal_pct": 40}})
    assert cli("history", "--noise").returncode == 0
    rows = query(isolated_db, "SELECT n, runs, floor FROM noise_floors")
    assert len(rows) == 1 and rows[0]["n"] == 3
    assert set(json.loads(rows[0]["runs"])) == {"a-000", "a-001", "a-002"}
    assert rows[0]["floor"] == pytest.approx(0.014826)


def test_compare_calls_a_difference_within_the_floor_noise(isolated_db):
    spread = [95.0, 100.0, 105.0] * 10  # robust CV 7.4%; 30 values make +4% significant by Welch's test
    _stored(isolated_db, "a", spread)
    _stored(isolated_db, "b", [v * 1.04 for v in spread])
    _stored(isolated_db, "c", [v * 1.20 for v in spread])
    before = cli("compare", "variant=a", "variant=b", "-m", "stream_triad", "--json")
    assert before.returncode == 0, before.stderr
    found = json.loads(before.stdout)
    assert [r["verdict"] for r in found["rows"]] == ["better"] and found["rows"][0]["p_value"] < 0.05
    assert found["noise_note"].startswith("no noise floor known")
    text = cli("compare", "variant=a", "variant=b", "-m", "stream_triad", env={"COLUMNS": "80"}).stdout
    assert text.count("no noise floor known") == 1

    assert cli("history", "--noise").returncode == 0  # learns the floors of a, b and c
    after = json.loads(cli("compare", "variant=a", "variant=b", "-m", "stream_triad", "--json").stdout)
    row = after["rows"][0]
    assert row["verdict"] == "within the noise floor (7.4%)" and row["noise_floor"] == pytest.approx(0.0741, abs=1e-3)
    assert after["verdict"]["better"] == 0 and after["verdict"]["within_noise"] == 1
    assert after["noise_note"] == ""
    assert after["verdict"]["noise_floor"] == pytest.approx(row["noise_floor"])
    text = cli("compare", "variant=a", "variant=b", "-m", "stream_triad", env={"COLUMNS": "80"}).stdout
    assert "within the noise floor" in text and "no noise floor known" not in text
    beyond = json.loads(cli("compare", "variant=a", "variant=c", "-m", "stream_triad", "--json").stdout)
    assert [r["verdict"] for r in beyond["rows"]] == ["better"]  # +20% is beyond a 7.4% floor


def test_history_says_once_that_no_floor_is_known(isolated_db):
    _stored(isolated_db, "a", [100.0, 101.0, 99.0])
    out = cli("history", "-m", "stream_triad")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("no noise floor known") == 1
    assert cli("history", "--noise").returncode == 0
    out = cli("history", "-m", "stream_triad", env={"COLUMNS": "200"})
    assert "noise floor 1.5%" in out.stdout and "no noise floor known" not in out.stdout


# ---------------------------------------------------------------- repeat until precise


def test_bench_repeats_auto_stops_with_its_reason(isolated_db):
    out = cli(*STREAM, "--repeats", "auto", "--precision", "50%", "--max-repeats", "4", "--json")
    assert out.returncode == 0, out.stderr
    runs = json.loads(out.stdout)
    found = STOPPED.search(out.stderr)
    assert found, out.stderr
    count = int(found.group(2) or found.group(3))
    assert 3 <= count <= 4 and len(runs) == count
    shown = cli(*STREAM, "--repeats", "auto", "--precision", "0.5", "--max-repeats", "3")
    assert shown.returncode == 0 and STOPPED.search(shown.stdout), shown.stdout
    assert len(query(isolated_db, "SELECT id FROM runs")) == count + 3


@pytest.mark.parametrize("args, words", [
    (("--repeats", "0"), "--repeats"),
    (("--repeats", "many"), "'auto'"),
    (("--repeats", "auto", "--precision", "2"), "ambiguous"),
    (("--repeats", "auto", "--precision", "80%"), "0.001 to 0.5"),
    (("--repeats", "3", "--precision", "2%"), "only with --repeats auto"),
    (("--repeats", "auto", "--max-repeats", "1000"), "3 to 100"),
])
def test_bad_repeats_are_refused(isolated_db, args, words):
    out = cli(*STREAM, *args)
    assert out.returncode == 2 and "error" in out.stderr and words in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert not isolated_db.exists() or not query(isolated_db, "SELECT id FROM runs")  # refused before any run


def test_a_disturbed_or_failed_repeat_is_not_a_sample():
    sample = sampler("stream", counts)
    plain = RunResult("r0", "ok", True, None, 1.0, Path("."), Outcome([Metric("stream_triad", 100.0, "MB/s")]))
    disturbed = RunResult("r1", "ok", True, None, 1.0, Path("."),
                          Outcome([Metric("stream_triad", 10.0, "MB/s")], facts={"disturbed": {"steal_pct": 40}}))
    failed = RunResult("r2", "failed", False, "exit code 1", 1.0, Path("."), Outcome())
    assert sample(plain) == (100.0, "") and sample(disturbed) == (None, "disturbed")
    assert sample(failed) == (None, "failed")
    script = iter([plain, disturbed, plain, failed, plain])
    results, decision = until_precise(lambda _repeat: next(script), sample, AutoRepeats(0.02, 10))
    assert len(results) == 5 and decision.counted == 3
    assert decision.reason == "stopped after 5 runs: 95% interval +-0% <= 2% (2 not counted: disturbed 1, failed 1)"


def test_a_benchmark_without_a_headline_cannot_repeat_until_precise(isolated_db):
    out = cli("bench", "clock", "--repeats", "auto")
    assert out.returncode == 2 and "no headline metric" in out.stderr and "--repeats 5" in out.stderr


CAMPAIGN = """name: precise
repeats: {auto: {precision: 0.5, max: 4}}
benchmarks:
  - benchmark: stream
    params: {n: 100000, ntimes: 3}
    space: {threads: [1, 2]}
"""


def test_a_campaign_repeats_auto_validates_and_runs(isolated_db, tmp_path):
    path = tmp_path / "precise.yaml"
    path.write_text(CAMPAIGN)
    out = cli("campaign", "run", str(path), env={"COLUMNS": "100"})
    assert out.returncode == 0, out.stderr + out.stdout
    lines = [line for line in out.stdout.splitlines() if "stopped" in line]
    assert len(lines) == 2 and all(re.search(r"threads=[12]: stopped (after|at the maximum of) \d+ runs", line)
                                   for line in lines), out.stdout
    per_point = query(isolated_db, "SELECT json_extract(params, '$.threads') AS t, COUNT(*) AS k FROM runs "
                                   "WHERE campaign='precise' GROUP BY t")
    assert len(per_point) == 2 and all(3 <= r["k"] <= 4 for r in per_point)
    again = cli("campaign", "run", str(path))  # resumed: decides again from the stored runs, runs nothing
    assert again.returncode == 0 and "0 executed" in again.stdout
    assert query(isolated_db, "SELECT COUNT(*) FROM runs")[0][0] == sum(r["k"] for r in per_point)


@pytest.mark.parametrize("repeats, words", [
    ("{auto: {max: 1}}", "3 to 100"),
    ("{auto: {precision: 5}}", "0.001 to 0.5"),
    ("{auto: {every: 2}}", "auto takes precision"),
    ("sometimes", "must be a whole number, auto"),
])
def test_a_bad_repeats_auto_is_refused_where_it_is_written(tmp_path, repeats, words):
    path = tmp_path / "bad.yaml"
    path.write_text(CAMPAIGN.replace("{auto: {precision: 0.5, max: 4}}", repeats))
    out = cli("plan", str(path))
    assert out.returncode == 2 and f"{path}:2" in out.stderr and "repeats" in out.stderr and words in out.stderr, \
        out.stderr
