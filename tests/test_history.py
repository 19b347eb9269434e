"""History and regression alarms: E-Divisive change points, series per system and configuration,
`clusterbench history`, and the report's History section, over real SQLite stores."""

from __future__ import annotations

import csv
import io
import sqlite3
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from tests.conftest import cli, cli_json

from clusterbench.analysis import changepoint
from clusterbench.analysis.changepoint import detect
from clusterbench.analysis.dataset import load
from clusterbench.analysis.history import history, is_worse, parse_metric
from clusterbench.analysis.select import Selection
from clusterbench.bench.metrics import Metric
from clusterbench.errors import UserInputError
from clusterbench.report import history as history_section
from clusterbench.store import db
from clusterbench.store.db import Store
from clusterbench.store.records import RunRecord

START = datetime(2026, 1, 1, 6, 0, tzinfo=UTC)


def noisy(n: int, seed: int, step: float = 0.0, at: int | None = None, cv: float = 0.05) -> list[float]:
    """n values around 100 with a coefficient of variation cv; from `at` on multiplied by 1 + step."""
    rng = np.random.default_rng(seed)
    values = 100.0 * (1 + cv * rng.standard_normal(n))
    if step:
        values[at if at is not None else n // 2:] *= 1 + step
    return values.tolist()


def store_series(path, monkeypatch, values: list[float], *, metric: str = "stream_triad", benchmark: str = "stream",
                 unit: str = "MB/s", higher_is_better: bool = True, labels=lambda day: [{}],
                 params: dict | None = None, system: tuple[str, str] | None = ("sys-a", "node01"),
                 tags: dict | None = None, invalid: dict[int, float] | None = None, prefix: str = "r",
                 campaign: str | None = "nightly") -> list[str]:
    """One run a day through the Store API (begin_run, finish_run), its start set to that day, with
    one value per label set labels(day) gives. `invalid` adds, before value i, an invalid run with
    that value (a failed validation)."""
    ids = []
    day = 0
    with Store(path) as store:
        if system:
            store.save_system(system[0], system[1], {}, {})

        def one(value: float, valid: bool) -> None:
            nonlocal day
            stamp = (START + timedelta(days=day)).isoformat(timespec="milliseconds")
            monkeypatch.setattr(db, "now_iso", lambda: stamp)
            run_id = f"{prefix}{day:04d}"
            store.begin_run(RunRecord(id=run_id, benchmark=benchmark, params=params or {"threads": 2},
                                      campaign=campaign, system_id=system[0] if system else None, tags=tags or {}))
            metrics = [Metric(metric, value, unit, higher_is_better, lab) for lab in labels(day)]
            store.finish_run(run_id, "ok" if valid else "invalid", valid, None if valid else "validation failed",
                             0, 1.0, metrics)
            ids.append(run_id)
            day += 1

        for i, value in enumerate(values):
            if invalid and i in invalid:
                one(invalid[i], False)
            one(value, True)
    return ids


# ---------------------------------------------------------------- the method


def _brute_force_q(z: np.ndarray, m: int) -> float:
    """max over splits of Q(X, Y) as Matteson & James define it, pair by pair."""
    best = -np.inf
    for tau in range(m, len(z) - m + 1):
        for kappa in range(tau + m, len(z) + 1):
            x, y = z[:tau], z[tau:kappa]
            between = np.abs(x[:, None] - y[None, :]).mean()
            within_x = np.abs(x[:, None] - x[None, :]).sum() / (len(x) * (len(x) - 1))
            within_y = np.abs(y[:, None] - y[None, :]).sum() / (len(y) * (len(y) - 1))
            best = max(best, len(x) * len(y) / (len(x) + len(y)) * (2 * between - within_x - within_y))
    return best


@pytest.mark.parametrize("n", [6, 7, 13, 30])
def test_divergence_is_the_published_statistic(n):
    """The prefix-sum computation gives the same maximum as the definition, split by split."""
    z = np.random.default_rng(n).standard_normal(n)
    z[n // 2:] += 1.5
    q, tau, kappa = changepoint._best_splits(z[None, :], changepoint._Grids(3))
    assert q[0] == pytest.approx(_brute_force_q(z, 3), rel=1e-9)
    assert 3 <= tau[0] <= kappa[0] - 3 <= n - 3


def test_ten_percent_step_found_near_its_index():
    values = noisy(40, seed=11, step=-0.10, at=20)
    found = detect(values)
    assert len(found.change_points) == 1
    (cp,) = found.change_points
    assert abs(cp.index - 20) <= 2
    assert cp.change == pytest.approx(-0.10, abs=0.04)
    assert cp.p_value <= changepoint.ALPHA
    assert cp.before == pytest.approx(np.mean(values[:cp.index]))
    assert is_worse(cp, higher_is_better=True) and not is_worse(cp, higher_is_better=False)
    assert detect(values) == found  # seeded: the same series, the same answer


def test_no_step_no_change_point():
    assert detect(noisy(40, seed=5)).change_points == []


def test_false_alarms_over_200_seeded_series_are_rare():
    """Without a step the permutation test rejects at alpha = 1%: any change point in about 1% of
    series, a flagged regression (also worse by > 5%) in fewer. 200 series: at most 4 and 2."""
    found = flagged = 0
    for seed in range(200):
        points = detect(noisy(40, seed=1000 + seed)).change_points
        found += bool(points)
        flagged += bool(points) and is_worse(points[-1], True)
    assert found <= 4
    assert flagged <= 2


def test_bounds_and_degenerate_series():
    long = noisy(changepoint.MAX_POINTS + 30, seed=3)
    assert detect(long).analysed_from == 30
    assert detect([5.0] * 50).change_points == []  # constant: nothing to find, no division by zero
    assert detect([1e300, -1e300] * 10).change_points == []  # huge values do not overflow
    assert detect([1.0, 2.0]).change_points == []  # too short for two segments
    for bad in (dict(alpha=0), dict(permutations=10), dict(min_segment=1), dict(max_change_points=99)):
        with pytest.raises(ValueError):
            detect(noisy(20, seed=1), **bad)
    with pytest.raises(ValueError):
        detect([1.0, float("nan"), 2.0])


def test_two_steps_two_change_points():
    values = noisy(60, seed=21)
    values = [v * (0.85 if 20 <= i < 40 else 1.0) for i, v in enumerate(values)]
    found = detect(values).change_points
    assert [round(c.index / 20) * 20 for c in found] == [20, 40]
    assert found[0].change < 0 < found[1].change


# ---------------------------------------------------------------- series from a store


def test_drop_of_higher_is_better_metric_is_a_regression(isolated_db, monkeypatch):
    ids = store_series(isolated_db, monkeypatch, noisy(40, seed=11, step=-0.10, at=20), invalid={30: 1.0})
    with Store(isolated_db, read_only=True) as store:
        found = history(store, Selection(), "stream_triad")
    (group,) = found.groups
    assert group.system == "node01" and group.benchmark == "stream"
    assert group.configuration == {"threads": 2, "nodes": 1}  # nodes: identity's key (ran here: one machine)
    assert len(group.values) == 40 and group.judged and group.regression
    assert [v.run_id for v in group.values] == [i for i in ids if i != "r0030"]
    assert min(v.value for v in group.values) > 50  # the invalid run's 1.0 is not a value
    assert [(s.run_id, s.reason) for s in group.skipped] == [("r0030", "invalid: validation failed")]
    change = group.changes[-1]
    assert abs(change.index - 20) <= 2 and change.worse and change.change_pct < -5
    assert change.date == group.values[change.index].date and change.run_id == group.values[change.index].run_id


def test_lower_is_better_rise_is_a_regression(isolated_db, monkeypatch):
    store_series(isolated_db, monkeypatch, noisy(40, seed=11, step=0.10, at=20), metric="hpl_time",
                 benchmark="hpl", unit="s", higher_is_better=False)
    with Store(isolated_db, read_only=True) as store:
        assert history(store, Selection(), "hpl_time").groups[0].regression


def test_invalid_runs_never_make_a_regression(isolated_db, monkeypatch):
    """Ten invalid runs at a tenth of the value at the end of a flat series: skipped, no change."""
    values = noisy(30, seed=9)
    assert detect(values).change_points == []  # the valid values alone hold no change
    store_series(isolated_db, monkeypatch, values, invalid={i: 10.0 for i in range(20, 30)})
    with Store(isolated_db, read_only=True) as store:
        (group,) = history(store, Selection(), "stream_triad").groups
    assert len(group.values) == 30 and len(group.skipped) == 10
    assert group.changes == [] and not group.regression


def test_series_split_by_system_configuration_and_identifying_labels(isolated_db, monkeypatch):
    # HPL: residual and start labels change every run, but only T/V, N, NB, P, Q name the configuration.
    def hpl(day: int) -> list[dict]:
        return [{"tv": "WR11C2R4", "n": 8000, "nb": 192, "p": 1, "q": 2, "residual": 0.001 * day, "start": f"t{day}"}]

    store_series(isolated_db, monkeypatch, noisy(8, seed=2), metric="hpl_gflops", benchmark="hpl",
                 unit="Gflop/s", labels=hpl, params={"n": 8000, "nb": 192}, prefix="h")
    # IMB: one series per message size; another system (a `system` tag, no stored system) apart.
    sizes = [{"test": "PingPong", "bytes": 1024}, {"test": "PingPong", "bytes": 4194304}]
    store_series(isolated_db, monkeypatch, noisy(7, seed=3), metric="imb_bandwidth", benchmark="imb",
                 unit="MiB/s", labels=lambda day: sizes, prefix="i")
    store_series(isolated_db, monkeypatch, noisy(7, seed=4), metric="imb_bandwidth", benchmark="imb",
                 unit="MiB/s", labels=lambda day: sizes, prefix="j", system=None, tags={"system": "cluster-b"})
    with Store(isolated_db, read_only=True) as store:
        (hpl_group,) = history(store, Selection(), "hpl_gflops").groups
        imb = history(store, Selection(), "imb_bandwidth").groups
        one = history(store, Selection(), "imb_bandwidth[bytes=1024,test=PingPong]").groups
    assert len(hpl_group.values) == 8
    assert hpl_group.configuration == {"n": 8000, "nb": 192, "tv": "WR11C2R4", "p": 1, "q": 2, "nodes": 1}
    assert sorted((g.system, g.configuration["bytes"], len(g.values)) for g in imb) == [
        ("cluster-b", 1024, 7), ("cluster-b", 4194304, 7), ("node01", 1024, 7), ("node01", 4194304, 7)]
    assert sorted(g.system for g in one) == ["cluster-b", "node01"]
    assert all(g.configuration["bytes"] == 1024 for g in one)


def test_imported_runs_dated_by_their_output(isolated_db):
    """An imported run is dated by the start its output states, else its file's modification time,
    and its system is the folder it was imported from."""
    with Store(isolated_db) as store:
        for i in range(8):
            stated = i % 2 == 0
            facts = {"source_file": f"/old/results/cluster-x/HPL.out.{i}", "result_index": 0,
                     "stated_start": f"Mon Mar {i + 1} 03:50:21 2017" if stated else None,
                     "file_mtime": f"2018-01-0{i + 1}T00:00:00+00:00"}
            rec = RunRecord(id=f"import-hpl-{i}", benchmark="hpl", params={"n": 1000}, source="import",
                            content_hash=f"h{i}")
            store.add_imported_run(rec, True, None, [Metric("hpl_gflops", 10.0 + i, "Gflop/s")], facts, "HPL.out",
                                   b"x", f"2017-03-0{i + 1}T03:50:21" if stated else None, None, None)
    with Store(isolated_db, read_only=True) as store:
        (group,) = history(store, Selection(), "hpl_gflops").groups
    assert group.system == "cluster-x"
    by_run = {v.run_id: v for v in group.values}
    assert by_run["import-hpl-0"].date == "2017-03-01T03:50:21+00:00" and by_run["import-hpl-0"].dated_by == "start"
    assert by_run["import-hpl-1"].date == "2018-01-02T00:00:00+00:00"
    assert by_run["import-hpl-1"].dated_by == "file time"
    assert [v.date for v in group.values] == sorted(v.date for v in group.values)


def test_parse_metric_and_its_errors():
    assert parse_metric("hpl_gflops").labels == {}
    choice = parse_metric("imb_bandwidth[test=PingPong, bytes=1024]")
    assert (choice.name, choice.labels) == ("imb_bandwidth", {"test": "PingPong", "bytes": "1024"})
    for bad in ("", "x[bytes]", "a b", "x[" + ",".join(f"k{i}=1" for i in range(30)) + "]", "m" * 500):
        with pytest.raises(UserInputError):
            parse_metric(bad)


# ---------------------------------------------------------------- the command


def test_cli_fails_on_a_drop_and_passes_on_a_rise(isolated_db, monkeypatch, tmp_path):
    store_series(isolated_db, monkeypatch, noisy(40, seed=11, step=-0.10, at=20), invalid={5: 1.0})
    drop = cli("history", "-m", "stream_triad", "--fail-on-regression")
    assert drop.returncode == 1, drop.stderr
    assert "REGRESSION" in drop.stdout and "1 of 1 judged series end in a regression" in drop.stdout
    assert "skipped 1: r0005 (invalid: validation failed)" in drop.stdout
    assert cli("history", "-m", "stream_triad").returncode == 0  # without the flag: a report, not a failure
    assert cli("history", "-m", "stream_triad", "--fail-on-regression", "--min-change", "20").returncode == 0

    rise_db = tmp_path / "rise.db"
    store_series(rise_db, monkeypatch, noisy(40, seed=11, step=0.10, at=20))
    rise = cli("--db", str(rise_db), "history", "nightly", "-m", "stream_triad", "--fail-on-regression")
    assert rise.returncode == 0, rise.stderr
    assert "improvement" in rise.stdout and "no regression" in rise.stdout
    found = cli_json("--db", str(rise_db), "history", "-m", "stream_triad", "--json")
    (group,) = found["groups"]
    assert found["regressions"] == 0 and group["regression"] is False and group["judged"] is True
    assert len(group["values"]) == 40 and group["changes"][0]["change_pct"] > 5


def test_cli_flat_series_passes(isolated_db, monkeypatch):
    store_series(isolated_db, monkeypatch, noisy(40, seed=5))
    out = cli("history", "-m", "stream_triad", "--fail-on-regression")
    assert out.returncode == 0 and "no change beyond the noise" in out.stdout


def test_cli_too_few_values_cannot_judge(isolated_db, monkeypatch):
    store_series(isolated_db, monkeypatch, [100.0, 100.0, 100.0, 50.0, 50.0])
    out = cli("history", "-m", "stream_triad", "--fail-on-regression")
    assert out.returncode == 0, out.stderr
    assert "too few values to judge" in out.stdout and "need at least 10" in out.stdout


def test_cli_errors_exit_2(isolated_db, monkeypatch):
    store_series(isolated_db, monkeypatch, noisy(8, seed=1))
    cases = {
        ("-m", "stream_tirad"): "did you mean 'stream_triad'",
        ("-m", "nosuch"): "stored metrics: stream_triad",
        ("tag:site=none", "-m", "stream_triad"): "no stored runs match",
        ("-m", "stream_triad[kernel=copy]"): "no value of 'stream_triad' has the labels",
        ("-m", "stream_triad[kernel]"): "needs label=value",
        ("-m", "stream_triad", "--min-change", "-3"): "--min-change is a percentage",
        (): "which metric?",
    }
    for args, message in cases.items():
        out = cli("history", *args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert message in out.stderr, (args, out.stderr)
        assert "Traceback" not in out.stderr


def test_selection_without_the_metric_is_an_error(isolated_db, monkeypatch):
    store_series(isolated_db, monkeypatch, noisy(8, seed=1))
    store_series(isolated_db, monkeypatch, noisy(8, seed=1), metric="hpl_gflops", benchmark="hpl", prefix="h",
                 campaign="other")
    out = cli("history", "other", "-m", "stream_triad")
    assert out.returncode == 2 and "none of the 8 selected runs has the metric" in out.stderr
    assert "hpl_gflops" in out.stderr


# ---------------------------------------------------------------- the report section


def test_report_section_draws_each_series_with_its_csv(isolated_db, monkeypatch, tmp_path):
    store_series(isolated_db, monkeypatch, noisy(40, seed=11, step=-0.10, at=20), invalid={3: 1.0})
    with Store(isolated_db, read_only=True) as store:
        data = load(store, Selection(), history_section.metrics())
        section = history_section.section(data, None, store)
        fallback = history_section.section(load(store, Selection(), set()), None, store)  # names not loaded
    assert section is not None and section.title == "History"
    assert fallback is not None and len(fallback.pictures) == 1
    (picture,) = section.pictures
    assert picture.slug == "history-0" and picture.svg.startswith("<svg") and "regression" in picture.title
    rows = list(csv.DictReader(io.StringIO(picture.csv)))
    assert len(rows) == 40 and "r0003" not in {r["run"] for r in rows}  # the invalid run is not drawn
    starts = [i for i, r in enumerate(rows) if r["new_segment"] == "1"]
    assert len(starts) == 1 and abs(starts[0] - 20) <= 2
    means = {r["segment_mean"] for r in rows}
    assert len(means) == 2
    (table,) = section.tables
    assert table.rows[0][-1] == "regression" and table.rows[0][0] == [rows[starts[0]]["run"]]
    assert any("regression" in p for p in section.paragraphs)


def test_report_section_written_beside_the_others(isolated_db, monkeypatch, tmp_path):
    from clusterbench.report.build import build
    from clusterbench.report.model import Options
    from clusterbench.report.render import write

    store_series(isolated_db, monkeypatch, noisy(12, seed=2))
    with Store(isolated_db, read_only=True) as store:
        section = history_section.section(load(store, Selection(), history_section.metrics()), None, store)
        paths = write(build(store, Selection(), Options(), extra=[section]), tmp_path / "out")
    assert (tmp_path / "out" / "history-0.svg").read_text().startswith("<svg")
    assert (tmp_path / "out" / "history-0.csv").read_text().count("\n") == 13
    assert "History" in paths["html"].read_text()


def test_report_section_needs_six_dates(isolated_db, monkeypatch):
    store_series(isolated_db, monkeypatch, noisy(5, seed=2))
    with Store(isolated_db, read_only=True) as store:
        assert history_section.section(load(store, Selection(), history_section.metrics()), None, store) is None


def test_report_search_has_a_budget(isolated_db, monkeypatch):
    """Over the budget, the series with the newest values are searched and the rest are listed as not
    searched (never a partial answer presented as a full one)."""
    store_series(isolated_db, monkeypatch, noisy(10, seed=2), params={"threads": 1}, prefix="a")
    store_series(isolated_db, monkeypatch, noisy(11, seed=3), params={"threads": 2}, prefix="b")
    monkeypatch.setattr(history_section, "SEARCH_BUDGET", 121)  # one series of 11 values
    with Store(isolated_db, read_only=True) as store:
        section = history_section.section(load(store, Selection(), history_section.metrics()), None, store)
    (table,) = section.tables
    notes = sorted(row[-1] for row in table.rows)
    assert notes[0] == "no change beyond the noise"
    assert notes[1].startswith("not judged: not searched: over the report's budget")
    assert "1 of the 2 series were searched" in section.paragraphs[-1]
    assert len(section.pictures) == 2 and "not searched" in section.pictures[1].caption


def test_values_a_careless_store_holds_are_skipped_not_fatal(isolated_db, monkeypatch):
    """A store written by something else: a valid 'value' that is text or infinite, labels that are
    not a mapping, a start time that is no date, hostile text in names. Skipped with the reason;
    the command still answers (exit 0), with the text printed as text."""
    store_series(isolated_db, monkeypatch, noisy(10, seed=4), system=("s", "[bold]=cmd|x"))
    con = sqlite3.connect(isolated_db)
    with con:
        con.execute("UPDATE metrics SET value='abc' WHERE run_id='r0001'")
        con.execute("UPDATE metrics SET value=9e999 WHERE run_id='r0002'")
        con.execute("UPDATE metrics SET labels='[1, 2]' WHERE run_id='r0003'")
        con.execute("UPDATE runs SET started_at='yesterday' WHERE id='r0004'")
    con.close()
    with Store(isolated_db, read_only=True) as store:
        (group,) = history(store, Selection(), "stream_triad").groups
    reasons = {s.run_id: s.reason for s in group.skipped}
    # text and infinity: skipped here, or (since issue 31's not-applicable work) dropped by the dataset as no number
    for run_id in ("r0001", "r0002"):
        assert reasons.get(run_id, "not a finite number").startswith("not a finite number")
        assert run_id not in {v.run_id for v in group.values}
    assert reasons["r0004"] == "unreadable start time 'yesterday'"
    assert len(group.values) == 7 and group.system == "[bold]=cmd|x"
    out = cli("history", "-m", "stream_triad")
    assert out.returncode == 0 and "[bold]=cmd|x" in out.stdout and "Traceback" not in out.stderr
