"""`clusterbench tune hpl`: the space and its bounds, the refusals (exit 2, located), a real short tune with
its outputs and tagged runs, an interrupted session that continues without repeating a trial, and a
campaign block as the space. Real xhpl, tiny N (top level <= 1200), budgets of 20-30 s."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from tests.conftest import cli, interruptible, query

from clusterbench.bench.hpl.tuning import MAX_VALUES, build_space, level_ns
from clusterbench.errors import UserInputError
from clusterbench.system.discover import discover

SMALL = ["--n", "1200", "--levels", "2", "--space", "nb=64,128", "--space", "grid=mpi 1x2,mpi 2x1",
         "--space", "bcast=1rm,2rm", "--space", "depth=0,1", "--space", "pfact=right", "--eta", "2", "--repeats", "2"]


def _search_ready() -> bool:
    from clusterbench.tune.search import Space, search

    class _Never:
        def estimate_s(self, config, level):
            return 1e9

        def evaluate(self, config, level, repeat):
            raise AssertionError

    try:
        search(Space({"a": [1]}), 1, _Never(), 1.0)
    except NotImplementedError:
        return False
    except Exception:  # noqa: BLE001 - any other answer means the search exists
        return True
    return True


needs_search = pytest.mark.skipif(not _search_ready(), reason="tune.search.search() is not implemented yet")


def _opt(key: str) -> str:
    return f"--space {key}"


# ---------------------------------------------------------------- the space (unit)


def test_default_space_and_user_dimensions():
    system = discover()
    space, fixed = build_space(system, 1, {}, option=_opt)
    assert {"nb", "grid", "blas", "bcast", "depth", "pfact"} <= set(space.dims)
    assert fixed == {}
    ranks = {g.split()[0] for g in space.dims["grid"]}
    assert "mpi" in ranks
    space, _ = build_space(system, 1, {"nb": "64..256:64", "bcast": "1rm,2rm", "depth": "1", "rfact": "left,right"},
                           option=_opt)
    assert space.dims["nb"] == [64, 128, 192, 256]
    assert space.dims["bcast"] == ["1rm", "2rm"]
    assert space.dims["depth"] == [1]
    assert space.dims["rfact"] == ["left", "right"]
    space, _ = build_space(system, 1, {"grid": "mpi"}, option=_opt)
    assert all(g.startswith("mpi ") for g in space.dims["grid"])
    assert all(int(p) * int(q) == system.topology.cores_total
               for p, q in (g.split()[1].split("x") for g in space.dims["grid"]))


@pytest.mark.parametrize(("space", "message"), [
    ({"bcast": "9"}, "--space bcast: bcast must be one of 1rg, 1rm"),
    ({"foo": "1"}, "hpl has no tunable 'foo'"),
    ({"nb": "1..5000"}, f"more than {MAX_VALUES} in one dimension"),
    ({"depth": "99"}, "depth must be at most 16"),
    ({"grid": "mpi 3x7"}, "matches no layout's rank count"),
    ({"grid": "nonsense"}, "is not a grid"),
    ({"blas": "no-such-blas"}, "is not installed"),
    ({"nb": "8..2048:8", "bcast": "1rg,1rm,2rg,2rm,lng,lnm", "depth": "0..16", "nbmin": "1..64", "ndiv": "2..40",
      "swap_threshold": "0..255"}, "points"),
])
def test_space_refusals(space, message):
    with pytest.raises(UserInputError) as err:
        build_space(discover(), 1, space, option=_opt)
    assert message in str(err.value)


def test_levels():
    assert level_ns(6000, 3, 3) == [2888, 4160, 6000]
    assert level_ns(1200, 3, 3) == [1000, 1200]  # the floor merges the two lower levels
    assert all(n % 8 == 0 for n in level_ns(10_000, 4, 3))


# ---------------------------------------------------------------- refusals through the command line


def test_memory_refusal_is_exit_2_and_located():
    out = cli("tune", "hpl", "--n", "1000000", "--dry-run")
    assert out.returncode == 2, out.stderr
    assert "--n 1000000" in out.stderr and "GiB usable" in out.stderr
    assert "Traceback" not in out.stderr


def test_tiny_budget_refused():
    out = cli("tune", "hpl", "--n", "2000", "--budget", "1s", "--dry-run")
    assert out.returncode == 2, out.stderr
    assert "--budget 1s is less than one trial" in out.stderr and "N=" in out.stderr
    out = cli("tune", "hpl", "--n", "2000", "--budget", "6s", "--dry-run")  # one trial, not one round
    assert out.returncode == 2, out.stderr
    assert "less than the search's first round" in out.stderr


def test_bad_space_option_exit_2():
    out = cli("tune", "hpl", "--n", "2000", "--space", "bcast=9", "--dry-run")
    assert out.returncode == 2
    assert "--space bcast=9: bcast must be one of" in out.stderr


def test_dry_run_json():
    info = json.loads(cli("tune", "hpl", *SMALL, "--budget", "25s", "--dry-run", "--json").stdout)
    assert info["levels_n"] == [1000, 1200]
    assert info["space_size"] == 2 * 2 * len(info["space"]["blas"]) * 2 * 2
    assert info["sweep_estimate_s"] > info["cheapest_trial_s"] > 0


def _store_hpl_results(store, system_id: str, gflops: float, count: int = 4) -> None:
    """HPL results of this system as runs would leave them: what the rates are calibrated from."""
    from clusterbench.bench.metrics import Metric
    from clusterbench.store.records import RunRecord

    for i in range(count):
        run_id = f"calibration-{gflops}-{i}"
        store.begin_run(RunRecord(run_id, "hpl", {"n": 2000, "nb": 128, "p": 1, "q": 2}, system_id=system_id))
        labels = {"n": 2000, "nb": 128, "p": 1, "q": 2}
        store.finish_run(run_id, "ok", True, None, 0, 2.0 + i, [Metric("hpl_gflops", gflops, "Gflop/s", True, labels)])


def test_a_resumed_session_keeps_the_model_inputs_it_began_with(tmp_path):
    """The rates are fitted from the store, which by a resume holds the session's own trials: refitted, they
    reordered the candidates and a resumed session replayed 2 of its 3 finished trials (CI, 2026-12-01)."""
    from clusterbench.store.db import Store
    from clusterbench.tune.session import TuneOptions, prepare

    system = discover()
    space = {"nb": ["64", "128"], "grid": ["mpi 1x2", "mpi 2x1"]}
    with Store(tmp_path / "r.db") as store:
        system_id = store.remember_system(system)
        _store_hpl_results(store, system_id, 1.0)

        def session(seed: int = 0):
            return prepare(store, TuneOptions(budget_s=600, n=1200, levels=2, eta=2, repeats=2, space=dict(space),
                                              seed=seed), system, system_id=system_id)

        first = session()
        first.keep_inputs()  # as run() does before its first trial
        _store_hpl_results(store, system_id, 20.0, count=8)  # the session's trials, twenty times faster
        again, other = session(), session(seed=1)
    assert again.name == first.name
    assert again.evaluator.rates == first.evaluator.rates, "a resumed session refitted its rates"
    assert again.evaluator.startup_s == first.evaluator.startup_s
    assert "as when this session began" in again.rates_source
    assert other.evaluator.rates != first.evaluator.rates, "another request is fitted afresh (the store did change)"


# ---------------------------------------------------------------- real tuning


@needs_search
def test_short_tune_writes_outputs_and_tags_runs(xhpl, tmp_path, isolated_db):
    out_dir = tmp_path / "out"
    out = cli("tune", "hpl", *SMALL, "--space", "blas=openblas-serial", "--budget", "25s",
              "--out", str(out_dir), "--json", env={"CLUSTERBENCH_XHPL": xhpl}, timeout=240)
    assert out.returncode == 0, out.stderr + out.stdout
    info = json.loads(out.stdout)
    assert info["trials"]["ran"] >= 2
    assert (out_dir / "HPL.dat").read_text().startswith("HPLinpack benchmark input file")
    assert (out_dir / "trials.csv").read_text().count("\n") == info["trials"]["ran"] + 1
    assert (out_dir / "best-so-far.svg").read_text().startswith("<svg")
    rows = query(isolated_db, "SELECT id, tags FROM runs WHERE campaign=?", info["session"])
    assert len(rows) == info["trials"]["ran"]
    tags = [json.loads(r["tags"]) for r in rows]
    assert all(t["tune"] == info["session"] for t in tags)
    if info["best"] is not None:
        assert any(t.get("tune_best") == info["session"] for t in tags)
        assert info["best"]["median_gflops"] > 0


def _ok_runs_so_far(db) -> list[str]:
    """The ids of the finished trials, read while the tuner writes: none while the store is still being
    created (its file can exist a moment before its tables do)."""
    import sqlite3

    try:
        return [r["id"] for r in query(db, "SELECT id FROM runs WHERE status='ok'")] if db.exists() else []
    except sqlite3.OperationalError:  # no such table yet, or the schema being written
        return []


@needs_search
def test_interrupted_tune_continues_without_repeating(xhpl, tmp_path, isolated_db):
    # The first call's budget is far more than 3 trials take even on a busy machine, so it is still running when
    # interrupted (with 25 s, a loaded machine could spend it all before the 3rd trial); the session's name does
    # not depend on the budget, so the second call, with 25 s, continues the same session.
    common = [sys.executable, "-m", "clusterbench", "tune", "hpl", *SMALL, "--json", "--out", str(tmp_path / "o")]
    args = [*common, "--budget", "25s"]
    env = dict(os.environ) | {"CLUSTERBENCH_XHPL": xhpl}
    proc = subprocess.Popen([*common, "--budget", "10m"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=interruptible)  # SIGINT as Ctrl-C, even under a background harness
    wait_s = 300
    deadline = time.monotonic() + wait_s
    first: list[str] = []
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.3)
        first = _ok_runs_so_far(isolated_db)
        if len(first) >= 3:
            break
    if proc.poll() is None and len(first) < 3:
        proc.kill()
        pytest.fail(f"only {len(first)} of 3 trials finished within {wait_s} s: " + proc.communicate()[1][-2000:])
    assert proc.poll() is None, "the tune finished before it could be interrupted: " + proc.communicate()[1]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    stored = {r["id"]: r["status"] for r in query(isolated_db, "SELECT id, status FROM runs")}
    done_before = {i for i, s in stored.items() if s == "ok"}
    assert len(done_before) >= 3

    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["trials"]["replayed"] >= len(done_before)
    rows = query(isolated_db, "SELECT id, status FROM runs")
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids))
    trials = (tmp_path / "o" / "trials.csv").read_text().splitlines()[1:]
    new = [line.split(",")[1] for line in trials if line.endswith(",0")]
    assert not set(new) & done_before  # the second call ran none of the finished trials again


@needs_search
def test_campaign_block_is_the_space(xhpl, tmp_path, isolated_db):
    spec = tmp_path / "tune.yaml"
    spec.write_text(f"""name: tune-test
benchmarks:
  - benchmark: hpl
    params: {{n: 1200, binary: {xhpl}, pfact: right, blas: openblas-serial}}
    space:
      nb: [64, 128]
      grid: ["mpi 1x2"]
      bcast: [1rm, 2rm]
      depth: [0, 1]
""")
    dry = cli("tune", "hpl", "--campaign", str(spec), "--levels", "2", "--eta", "2", "--budget", "25s", "--dry-run",
              "--json")
    assert dry.returncode == 0, dry.stderr
    info = json.loads(dry.stdout)
    assert info["space"]["nb"] == [64, 128] and info["fixed"]["pfact"] == "right"
    bad = spec.read_text().replace("[1rm, 2rm]", "[1rm, 9]")
    spec.write_text(bad)
    out = cli("tune", "hpl", "--campaign", str(spec), "--dry-run")
    assert out.returncode == 2
    assert f"{spec}:" in out.stderr and "benchmarks[0].space.bcast" in out.stderr
    spec.write_text(bad.replace("[1rm, 9]", "[1rm, 2rm]"))
    run = cli("tune", "hpl", "--campaign", str(spec), "--levels", "2", "--eta", "2", "--budget", "25s",
              "--repeats", "2", "--out", str(tmp_path / "c"), "--json", timeout=240)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["trials"]["ran"] >= 1


# ---------------------------------------------------------------- the command given twice


@needs_search
def test_tune_given_twice_replays_the_first_sessions_trials(xhpl, tmp_path, isolated_db):
    """The acceptance: the same `tune hpl` (N sized from the budget, not given) run again resumes the session
    and replays every trial the first call ran."""
    args = ["tune", "hpl", "--budget", "20s", "--levels", "2", "--eta", "2", "--repeats", "2",
            "--space", "nb=64,128", "--space", "grid=mpi 1x2", "--space", "bcast=1rm,2rm", "--space", "depth=1",
            "--space", "pfact=right", "--space", "blas=openblas-pthread", "--json"]
    env = {"CLUSTERBENCH_XHPL": xhpl}
    one = cli(*args, "--out", str(tmp_path / "one"), env=env, timeout=300)
    assert one.returncode == 0, one.stderr
    first = json.loads(one.stdout)
    assert first["trials"]["ran"] >= 1
    two = cli(*args, "--out", str(tmp_path / "two"), env=env, timeout=300)
    assert two.returncode == 0, two.stderr
    second = json.loads(two.stdout)
    assert second["session"] == first["session"] and second["levels_n"] == first["levels_n"]
    assert f"resuming session {first['session']}" in two.stderr
    ran_first = {line.split(",")[1] for line in (tmp_path / "one" / "trials.csv").read_text().splitlines()[1:]}
    replayed = {line.split(",")[1] for line in (tmp_path / "two" / "trials.csv").read_text().splitlines()[1:]
                if line.endswith(",1")}
    assert ran_first <= replayed, "the second call ran again a trial the first one finished"
