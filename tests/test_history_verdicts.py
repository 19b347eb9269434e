"""History verdicts (issue 31, point 5 and the history part of 6 and 11): a series is one configuration,
host groups that ran one after another are different series (never a regression), a series too short
for the test says "too few values to judge (need at least K)", a 10% step in 16 real imported HPL runs
is a regression, and runs that do not count (truncated, excluded) are skipped with their flag. The
command and the report's History section say the same words.

Every store is written in HPL's and LSF's real output formats (tests/studies.py's generators, derived
from this machine's outputs) and imported with the real `clusterbench import`."""

from __future__ import annotations

import json
import random
import sqlite3
from datetime import datetime, timedelta

import pytest
from tests import conclusions_corpus
from tests.conftest import cli
from tests.studies import HplLine, OutputFile, hpl_text, run_cli, write_files

from clusterbench.analysis import changepoint
from clusterbench.analysis.dataset import load
from clusterbench.analysis.select import Selection
from clusterbench.report import history as history_section
from clusterbench.store.db import Store

K = 10  # changepoint.min_points(0.01): checked by test_k_is_the_shortest_series_that_can_reach_the_level
N, NB = 13440, 192
BASE_GFLOPS = 22.0  # one node's HPL rate in the plain files (tests/conclusions_corpus.PLAIN_GFLOPS)


def history_json(db, *args: str) -> dict:
    out = cli("--db", str(db), "history", *args, "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def history_text(db, *args: str) -> str:
    out = cli("--db", str(db), "history", *args)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def report_section(db):
    with Store(db, read_only=True) as store:
        return history_section.section(load(store, Selection(), history_section.metrics()), None, store)


def hpl_series(tmp_path, rates: list[float], *, truncated_at: int | None = None, name: str = "series"):
    """One plain HPL file a day (1x2 grid, N=13440), imported in one `clusterbench import`; the file at
    `truncated_at` ends before its second result's residual (HPL killed)."""
    rng = random.Random(31)
    start = datetime(2025, 1, 6, 3, 0, 0)
    files = []
    for day, rate in enumerate(rates):
        when = start + timedelta(days=day)
        if day == truncated_at:
            text = hpl_text(N, NB, [HplLine(1, 2, "WR11C2R4", rate), HplLine(1, 2, "WR11C2R4", rate)], when, rng,
                            truncate_after=2)
        else:
            text = hpl_text(N, NB, [HplLine(1, 2, "WR11C2R4", rate)], when, rng)
        files.append(OutputFile(f"hpl-day{day:02d}.out", text, {"gflops": rate}))
    folder = tmp_path / name
    write_files(folder, files)
    db = tmp_path / f"{name}.db"
    run_cli(db, "import", "-q", str(folder), "--tag", "nodes=1")
    return db


def runs_of_file(db, file_name: str) -> list[str]:
    """The stored runs read from one imported file (one per HPL result line)."""
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT id FROM runs WHERE facts LIKE ? OR params LIKE ? OR tags LIKE ?",
                           (f"%{file_name}%",) * 3).fetchall()
    finally:
        con.close()
    assert rows, file_name
    return [r[0] for r in rows]


def test_k_is_the_shortest_series_that_can_reach_the_level():
    """Six values (segments of 3) can never give p <= 0.01: the floor is 2 / C(6, 3) = 0.1."""
    assert changepoint.smallest_p(6) == pytest.approx(0.1)
    assert changepoint.smallest_p(K) <= changepoint.ALPHA < changepoint.smallest_p(K - 1)
    assert K == 10 and changepoint.min_points(0.05) == 8


def test_host_groups_of_one_cluster_in_sequence_are_separate_series(tmp_path, monkeypatch):
    """LSF jobs of one cluster, the fast host group's ten then the slow one's ten (-64%): two series of
    the same configuration each, no regression (old code: one series, 'REGRESSION -64%')."""
    monkeypatch.setattr(conclusions_corpus, "GROUP_JOBS", 10)
    corpus = conclusions_corpus.host_groups(tmp_path)
    found = history_json(corpus.db, "-m", "hpl_gflops", "--fail-on-regression")
    assert found["regressions"] == 0
    groups = found["groups"]
    assert len(groups) == 2
    by_group = {g["configuration"]["host_group"]: g for g in groups}
    assert set(by_group) == set(conclusions_corpus.HOST_GROUPS)
    for name, (per_node, _, _) in conclusions_corpus.HOST_GROUPS.items():
        group = by_group[name]
        assert len(group["values"]) == 10 and group["verdict"] == "no change beyond the noise"
        expected = per_node * conclusions_corpus.GROUP_NODES
        assert all(abs(v["value"] / expected - 1) < 0.02 for v in group["values"])
    text = history_text(corpus.db, "-m", "hpl_gflops")
    assert "REGRESSION" not in text and "host_group=broadwell256G" in text and "host_group=haswell128G" in text
    section = report_section(corpus.db)
    assert section is not None
    (table,) = section.tables
    by_metric = {}
    for row in table.rows:  # HPL and IMB: one series per host group each
        by_metric.setdefault(row[3], []).append(row[-1])
    assert by_metric["hpl_gflops"] == ["no change beyond the noise"] * 2
    assert set(by_metric["peak_bandwidth"]) <= {"no change beyond the noise", "within threshold"}
    assert not any("regression" in p.lower() and "whose newest" in p.lower() for p in section.paragraphs)


def test_six_values_are_too_few_to_judge_never_no_change(tmp_path):
    """A six-run series with a -20% step in its middle: the test cannot reach p <= 0.01, so the
    verdict is 'too few values to judge (need at least 10)', in the command and the report."""
    db = hpl_series(tmp_path, [BASE_GFLOPS] * 3 + [BASE_GFLOPS * 0.8] * 3)
    found = history_json(db, "-m", "hpl_gflops", "--fail-on-regression")
    (group,) = found["groups"]
    assert len(group["values"]) == 6 and not group["judged"]
    assert group["verdict"] == f"too few values to judge (need at least {K})"
    text = history_text(db, "-m", "hpl_gflops")
    assert "too few values to judge (need at least 10)" in " ".join(text.split())
    assert "no change beyond the noise" not in text and "no significant change" not in text
    (table,) = report_section(db).tables
    (row,) = table.rows
    assert row[-1] == group["verdict"]


def _stepped(n: int, step: float, at: int, seed: int = 5) -> list[float]:
    """n HPL rates around BASE_GFLOPS with +-1% uniform noise (the corpus' jitter), from `at` on x (1 + step)."""
    rng = random.Random(seed)
    return [BASE_GFLOPS * (1 + (step if i >= at else 0)) * (1 + rng.uniform(-0.01, 0.01)) for i in range(n)]


def test_ten_percent_step_in_sixteen_runs_is_a_regression_in_command_and_report(tmp_path):
    db = hpl_series(tmp_path, _stepped(16, -0.10, 8))
    found = history_json(db, "-m", "hpl_gflops")
    (group,) = found["groups"]
    assert group["judged"] and group["verdict"] == "regression" and found["regressions"] == 1
    (step,) = [c for c in group["changes"] if c["worse"]]  # E-Divisive may add a change within the noise after it
    assert step["index"] == 8 and -13 < step["change_pct"] < -7 and step["p_value"] <= 0.01
    assert all(abs(c["change_pct"]) < 5 for c in group["changes"] if c is not step)
    out = cli("--db", str(db), "history", "-m", "hpl_gflops", "--fail-on-regression")
    assert out.returncode == 1 and "REGRESSION" in out.stdout
    section = report_section(db)
    (table,) = section.tables
    verdicts = {row[0][0]: row[-1] for row in table.rows}
    assert verdicts[step["run_id"]] == "regression"
    assert set(verdicts.values()) <= {"regression", "within threshold"}
    assert "(regression)" in section.pictures[0].title


def test_flagged_runs_are_skipped_with_their_flag(tmp_path):
    """A truncated file and an excluded run never enter the series: listed as skipped with the flag
    (and the exclusion's reason), in the command and the report (old code: the truncated run's first,
    passed result was a point of the series)."""
    rates = _stepped(12, 0.0, 0)
    rates[5] = BASE_GFLOPS * 1.5  # the truncated run's rate: would be an outlier of the series
    db = hpl_series(tmp_path, rates, truncated_at=5)
    (excluded,) = runs_of_file(db, "hpl-day07.out")
    run_cli(db, "exclude", excluded, "--reason", "node ran at 1.2 GHz")
    truncated = runs_of_file(db, "hpl-day05.out")
    found = history_json(db, "-m", "hpl_gflops")
    (group,) = found["groups"]
    points = {v["run_id"] for v in group["values"]}
    assert not points & {*truncated, excluded} and len(points) == 10
    reasons = {s["run_id"]: s["reason"] for s in group["skipped"]}
    # the passed first result: flagged truncated only; the second: invalid (no residual) and truncated
    assert all("truncated" in reasons[t] for t in truncated)
    assert any(reasons[t].startswith("truncated:") for t in truncated)
    assert reasons[excluded].startswith("excluded: node ran at 1.2 GHz")
    text = " ".join(history_text(db, "-m", "hpl_gflops").split())
    assert "skipped 3" in text and "excluded: node ran at 1.2 GHz" in text and "truncated" in text
    (table,) = report_section(db).tables
    skipped_cell = table.rows[0][-2]
    assert skipped_cell.startswith("3:") and "excluded: node ran at 1.2 GHz" in skipped_cell
    assert table.rows[0][-1] == group["verdict"]


def test_tags_split_series_only_when_asked(tmp_path):
    """kernel=6.8 then kernel=6.9 over 12 runs: one series across the tag (what a history shows), two
    with --by-tag kernel."""
    rng = random.Random(7)
    folder = tmp_path / "kernels"
    db = tmp_path / "kernels.db"
    for half, kernel in enumerate(("6.8", "6.9")):
        files = [OutputFile(f"hpl-{kernel}-{i}.out",
                            hpl_text(N, NB, [HplLine(1, 2, "WR11C2R4", BASE_GFLOPS * (1 + rng.uniform(-0.01, 0.01)))],
                                     datetime(2025, 2, 1) + timedelta(days=6 * half + i), rng), {})
                 for i in range(6)]
        write_files(folder / kernel, files)
        run_cli(db, "import", "-q", str(folder / kernel), "--tag", f"kernel={kernel}", "--tag", "nodes=1",
                "--tag", "system=node7")
    (one,) = history_json(db, "-m", "hpl_gflops")["groups"]
    assert len(one["values"]) == 12 and one["judged"]
    split = history_json(db, "-m", "hpl_gflops", "--by-tag", "kernel")["groups"]
    assert sorted(str(g["configuration"]["tag:kernel"]) for g in split) == ["6.8", "6.9"]
    assert all(len(g["values"]) == 6 and g["verdict"] == f"too few values to judge (need at least {K})"
               for g in split)
    bad = cli("--db", str(db), "history", "-m", "hpl_gflops", "--by-tag", "kernel=6.8")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_at_80_columns_no_run_id_is_cut(tmp_path):
    """`results` and `history` on an 80-column terminal (or a pipe, which Rich treats as 80) print every
    run id whole: the runs table takes its narrow layout and says where the left-out columns are."""
    db = hpl_series(tmp_path, _stepped(16, -0.10, 8))
    ids = sorted({r["run_id"] for r in json.loads(cli("--db", str(db), "results", "--format", "json").stdout)})
    assert len(ids) == 16
    narrow = {"COLUMNS": "80"}
    listing = cli("--db", str(db), "results", "--limit", "0", env=narrow)
    assert listing.returncode == 0, listing.stderr
    assert all(id_ in listing.stdout for id_ in ids), listing.stdout
    assert max(map(len, listing.stdout.splitlines())) <= 80 and "results RUN" in listing.stdout
    found = history_json(db, "-m", "hpl_gflops")
    steps = [c["run_id"] for g in found["groups"] for c in g["changes"]]
    assert steps
    text = cli("--db", str(db), "history", "-m", "hpl_gflops", env=narrow).stdout
    assert all(step in text for step in steps), text
