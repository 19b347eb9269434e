"""The `lulesh` benchmark: LULESH 2.0's output parsed, its points checked, and the real code run in campaigns.

The parser tests read real outputs of this machine (tests/fixtures/lulesh, README there: the
commands, date and machine), the failed ones included (a rank count that is not a cube, a run
killed mid-way, a run with no cycle and an infinite grind time, a run whose symmetry check
fails with nan and 1), and hostile variants made from them (cut at every line, edited figures,
huge numbers). The slow tests build LULESH from ../shared/sources/lulesh-2.0.tar.gz once per
session and run campaigns through the real command line.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from tests.conftest import LOCAL_FIXTURES, SHARED, cli, cli_json, query

from clusterbench.bench import registry
from clusterbench.bench.lulesh import output
from clusterbench.bench.lulesh.benchmark import Lulesh, lulesh_memory, nearest_cubes
from clusterbench.bench.lulesh.output import (
    MAX_REL_DIFF,
    cube_root,
    lulesh_outcome,
    parse_lulesh,
    recognise,
    split_results,
)
from clusterbench.bench.metrics import TooManyResults
from clusterbench.errors import UserInputError
from clusterbench.store.db import Store
from clusterbench.store.importer import import_paths
from clusterbench.system.discover import discover

HERE = LOCAL_FIXTURES / "lulesh"
VALID = ("s10-i20-np1.txt", "s5-i10-np8-oversubscribed.txt", "s12-i50-np1-omp2.txt", "s5-np1-to-stop-time.txt",
         "s5-i3-np1-progress.txt")
TARBALL = SHARED / "sources" / "lulesh-2.0.tar.gz"


def text(name: str) -> str:
    return (HERE / name).read_text()


def outcome(source: str):
    (run,) = parse_lulesh(source)
    return lulesh_outcome(run)


def metric(out, name: str) -> float:
    (m,) = [m for m in out.metrics if m.name == name]
    return m.value


def parse_as_run(source: str, tmp_path: Path, **point):
    """Lulesh.parse on this stdout, for a run that asked for `point`."""
    (tmp_path / "stdout.txt").write_text(source)
    full = {"s": 30, "i": None, "ranks": 1, "threads": 1, "p": False} | point
    return Lulesh(point=full, binary="/bin/true").parse(tmp_path)


# ---------------------------------------------------------------- real outputs

def test_a_real_run_gives_its_printed_figures():
    out = outcome(text("s10-i20-np1.txt"))
    assert out.valid and out.reasons == []
    assert metric(out, "lulesh_fom") == 1429.6018  # "FOM = 1429.6018 (z/s)"
    assert metric(out, "lulesh_elapsed_s") == 0.01398991  # the 8-digit "overall" figure, not "0.014"
    assert metric(out, "lulesh_grind_domain_us") == 0.6994955
    assert metric(out, "lulesh_grind_us") == 0.6994955  # one rank: per domain = over all ranks
    assert out.facts["elapsed_printed_s"] == 0.014
    assert (out.facts["lulesh_problem_size"], out.facts["lulesh_mpi_tasks"], out.facts["lulesh_threads"],
            out.facts["lulesh_iterations"], out.facts["lulesh_zones"]) == (10, 1, 1, 20, 1000)
    assert out.facts["final_origin_energy"] == 1.622358e05
    assert (out.facts["max_abs_diff"], out.facts["total_abs_diff"], out.facts["max_rel_diff"]) == (
        5.456968e-12, 6.053843e-12, 1.081397e-14)
    units = {m.name: (m.unit, m.higher_is_better) for m in out.metrics}
    assert units == {s.name: (s.unit, s.higher_is_better) for s in Lulesh.metrics}


@pytest.mark.parametrize("name", VALID)
def test_the_fom_is_thousands_of_zone_cycles_per_second(name):
    """LULESH labels its FOM "(z/s)"; the value is 10^3 zone-cycles per second, in every real output."""
    out = outcome(text(name))
    f = out.facts
    zone_cycles_per_s = f["lulesh_zones"] * f["lulesh_iterations"] / metric(out, "lulesh_elapsed_s")
    assert out.valid
    assert metric(out, "lulesh_fom") == pytest.approx(zone_cycles_per_s / 1000, rel=1e-6)
    assert f["max_rel_diff"] < MAX_REL_DIFF / 1000  # real runs: three orders and more below the threshold


def test_eight_oversubscribed_ranks_process_eight_cubes():
    out = outcome(text("s5-i10-np8-oversubscribed.txt"))
    assert out.valid
    assert (out.facts["lulesh_mpi_tasks"], out.facts["lulesh_problem_size"], out.facts["lulesh_zones"]) == (8, 5, 1000)
    # LULESH's two grind times: per domain (one rank's zones) is 8 x the one over all ranks
    assert metric(out, "lulesh_grind_domain_us") == pytest.approx(8 * metric(out, "lulesh_grind_us"), rel=1e-6)


def test_threads_and_the_stop_time(tmp_path):
    assert outcome(text("s12-i50-np1-omp2.txt")).facts["lulesh_threads"] == 2
    full = parse_as_run(text("s5-np1-to-stop-time.txt"), tmp_path, s=5)
    assert full.valid and full.facts["lulesh_iterations"] == 72 and full.facts["lulesh_stopped_by"] == "stop time"
    counted = parse_as_run(text("s5-i3-np1-progress.txt"), tmp_path, s=5, i=3, p=True)
    assert counted.valid and counted.facts["lulesh_stopped_by"] == "cycle count"
    asked_more = parse_as_run(text("s5-np1-to-stop-time.txt"), tmp_path, s=5, i=500)
    assert asked_more.valid and asked_more.facts["lulesh_stopped_by"] == "stop time"  # 72 < 500: the problem ended


def test_failed_real_runs_are_invalid_with_their_reason():
    cube = outcome(text("np2-not-a-cube.txt"))
    assert not cube.valid and cube.metrics == [] and "must be a cube" in cube.reasons[0]
    killed = outcome(text("s30-np1-progress-killed.txt"))
    assert not killed.valid and killed.metrics == [] and "no 'Run completed' block" in killed.reasons[0]
    assert killed.facts["lulesh_last_cycle"] == 76 and killed.facts["lulesh_threads"] == 1
    no_cycle = outcome(text("s5-i0-np1-inf-grind.txt"))  # grind "inf", FOM 0
    assert not no_cycle.valid and not any(m.valid for m in no_cycle.metrics)
    assert no_cycle.facts["non_finite_metrics"] == {"lulesh_grind_domain_us": "inf"}
    assert "fom 0 is impossible (must be > 0)" in no_cycle.reasons
    assert "iterations 0 is impossible (must be > 0)" in no_cycle.reasons
    asymmetric = outcome(text("s5-i5-np1-c-5-asymmetric.txt"))  # TotalAbsDiff nan, MaxRelDiff 1
    assert not asymmetric.valid and not any(m.valid for m in asymmetric.metrics)
    assert "total_abs_diff is not a finite number (nan)" in asymmetric.reasons
    assert any(r.startswith("symmetry check failed: MaxRelDiff 1 > 1e-08") for r in asymmetric.reasons)


# ---------------------------------------------------------------- hostile variants of real outputs

def test_every_cut_of_a_real_output_is_invalid_and_never_crashes():
    full = text("s5-i10-np8-oversubscribed.txt")
    lines = full.splitlines(keepends=True)
    last = max(k for k, line in enumerate(lines) if line.startswith("FOM"))
    for k in range(len(lines)):
        out = outcome("".join(lines[:k]))
        assert out.valid == (k > last), k  # valid only once the FOM line is there
    assert outcome(full[: full.index("FOM") + 20]).valid is False  # "FOM = " cut inside the number


def test_edited_figures_are_caught():
    real = text("s10-i20-np1.txt")
    just_below = real.replace("MaxRelDiff   = 1.081397e-14", "MaxRelDiff   = 9.000000e-09")
    assert outcome(just_below).valid  # below the 1e-8 threshold
    above = real.replace("MaxRelDiff   = 1.081397e-14", "MaxRelDiff   = 2.000000e-08")
    assert outcome(above).reasons[0].startswith("symmetry check failed: MaxRelDiff 2e-08 > 1e-08")
    doubled = outcome(real.replace("1429.6018 (z/s)", "2859.2036 (z/s)"))
    assert not doubled.valid and "disagrees with 1 x 10^3 zones x 20 cycles" in doubled.reasons[0]
    overflow = outcome(real.replace("1429.6018 (z/s)", "1e999 (z/s)"))
    assert not overflow.valid and overflow.facts["non_finite_metrics"] == {"lulesh_fom": "inf"}
    negative = outcome(real.replace("MaxAbsDiff   = 5.456968e-12", "MaxAbsDiff   = -5.456968e-12"))
    assert not negative.valid and "negative" in negative.reasons[0]
    two_ranks = outcome(real.replace("MPI tasks           =  1", "MPI tasks           =  2"))
    assert not two_ranks.valid and "2 MPI tasks is not a cube" in " ".join(two_ranks.reasons)
    wrong_header = outcome(real.replace("Running problem size 10^3", "Running problem size 11^3"))
    assert not wrong_header.valid and "the header says size 11, the result 10" in wrong_header.reasons


def test_huge_garbage_and_empty_inputs_are_invalid_not_errors():
    real = text("s10-i20-np1.txt")
    huge = real.replace("Problem size        =  10", "Problem size        =  " + "9" * 5000)
    out = outcome(huge)  # more digits than Python converts: read as missing, not an exception
    assert not out.valid and "problem_size" in out.reasons[0]
    word = outcome(real.replace("Iteration count     =  20", "Iteration count     =  twenty"))
    assert not word.valid and "iterations" in word.reasons[0]
    for junk in ("", "\x00\xff" * 1000, "Run completed:\n" * 3):
        runs = parse_lulesh(junk)
        assert all(not lulesh_outcome(r).valid for r in runs)


def test_a_run_must_be_what_was_asked(tmp_path):
    real = text("s10-i20-np1.txt")
    assert parse_as_run(real, tmp_path, s=10, i=20).valid
    wrong = parse_as_run(real, tmp_path, s=12, i=20, ranks=1, threads=2)
    assert not wrong.valid and not any(m.valid for m in wrong.metrics)
    assert "LULESH ran with problem size 10, the run asked for 12" in wrong.reasons
    assert "LULESH ran with threads 1, the run asked for 2" in wrong.reasons
    assert "more than the 5 asked for" in parse_as_run(real, tmp_path, s=10, i=5).reasons[0]
    twice = parse_as_run(real + real, tmp_path, s=10, i=20)
    assert not twice.valid and "more than one 'Run completed' block" in twice.reasons[0]


def test_progress_reads_the_last_cycle(tmp_path):
    (tmp_path / "stdout.txt").write_text(text("s30-np1-progress-killed.txt"))
    assert Lulesh(point={"p": True, "i": None}).progress(tmp_path) == "cycle 76"
    assert Lulesh(point={"p": True, "i": 100}).progress(tmp_path) == "cycle 76/100"
    assert Lulesh(point={"p": False}).progress(tmp_path) is None  # without -p LULESH prints no cycles
    assert Lulesh(point={"p": True}).progress(tmp_path / "absent") is None


# ---------------------------------------------------------------- import

def test_a_log_of_runs_splits_into_one_result_per_block():
    log = "".join(text(n) for n in (*VALID, "s5-i5-np1-c-5-asymmetric.txt"))
    assert recognise(log) and not recognise("HPLinpack 2.3\n")
    results = split_results(log, 100)
    assert [r.params for r in results] == [
        {"s": 10, "ranks": 1, "threads": 1}, {"s": 5, "ranks": 8, "threads": 1}, {"s": 12, "ranks": 1, "threads": 2},
        {"s": 5, "ranks": 1, "threads": 1}, {"s": 5, "ranks": 1, "threads": 1}, {"s": 5, "ranks": 1, "threads": 1}]
    assert [r.outcome.valid for r in results] == [True] * 5 + [False]
    with pytest.raises(TooManyResults):
        split_results(log, 5)


def test_the_importer_stores_lulesh_outputs(tmp_path, isolated_db):
    """`clusterbench import` recognises LULESH's output by its declared format."""
    folder = tmp_path / "old"
    folder.mkdir()
    for name in ("s10-i20-np1.txt", "s5-i10-np8-oversubscribed.txt", "np2-not-a-cube.txt"):
        (folder / name).write_text(text(name))
    assert registry.recognise(text("s10-i20-np1.txt")) is output.FORMAT
    with Store(isolated_db) as store:
        report = import_paths(store, [str(folder)])
    assert sorted((f.kind, f.stored, f.invalid) for f in report.files) == [("lulesh", 1, 0), ("lulesh", 1, 0),
                                                                           ("lulesh", 1, 1)]
    runs = query(isolated_db, "SELECT benchmark, params, valid FROM runs")
    stored = sorted((r["benchmark"], sorted(json.loads(r["params"]).items()), r["valid"]) for r in runs)
    assert stored == [("lulesh", [("ranks", 1), ("s", 10), ("threads", 1)], 1),
                      ("lulesh", [("ranks", 2), ("s", 5), ("threads", 1)], 0),  # refused by LULESH: from its header
                      ("lulesh", [("ranks", 8), ("s", 5), ("threads", 1)], 1)]
    fom = query(isolated_db, "SELECT value, unit FROM metrics WHERE name = 'lulesh_fom' ORDER BY value")
    assert [(r["value"], r["unit"]) for r in fom] == [(601.8183, "kz/s"), (1429.6018, "kz/s")]


# ---------------------------------------------------------------- checks before anything runs

@pytest.fixture(scope="module")
def here():
    return discover(with_software=False)


def resolved(here, **point):
    full = {p.name: p.default for p in Lulesh.parameters} | point
    Lulesh.resolve(full, here)
    return full


def test_only_cube_rank_counts_are_accepted(here):
    assert cube_root(27) == 3 and cube_root(26) is None and cube_root(10**60) == 10**20
    assert nearest_cubes(10) == (8, 27) and nearest_cubes(2) == (1, 8) and nearest_cubes(64) == (64, 125)
    for ranks in (1, 8):
        assert resolved(here, s=5, ranks=ranks)["ranks"] == ranks
    with pytest.raises(UserInputError) as err:
        resolved(here, s=5, ranks=10)
    assert err.value.message.startswith("ranks=10: LULESH runs on a cube number of ranks")
    assert err.value.hint == "the nearest cubes are 8 and 27"


def test_oversubscribed_ranks_are_left_unbound(here):
    cores = here.topology.cores_total
    crowded = 8 if cores < 8 else 27 if cores < 27 else 1000
    point = resolved(here, s=5, ranks=crowded, threads=1)
    assert point["bind_to"] == "none" and point["mpi"] in ("openmpi", "mpich")
    assert Lulesh(point=point, binary="/x/lulesh2.0").placement().oversubscribe == (crowded > os.cpu_count())
    if point["mpi"] == "openmpi":
        with pytest.raises(UserInputError, match="Open MPI refuses to bind"):
            resolved(here, s=5, ranks=crowded, threads=1, bind_to="core")
    assert resolved(here, s=5, ranks=1, threads=1)["bind_to"] == "core"


def test_sizes_and_lulesh_int_limits_are_bounded(here):
    with pytest.raises(UserInputError) as err:
        resolved(here, s=1000, ranks=8)
    assert err.value.where == "s"
    assert re.match(r"s=1000 with 8 rank\(s\) per node needs about [\d.]+ TiB", err.value.message)
    largest = int(err.value.hint.split("=")[1].split()[0])
    assert resolved(here, s=largest, ranks=8)["s"] == largest  # the size the hint offers is accepted
    assert lulesh_memory(40, 1) == 700 * 41**3 + 16 * 2**20  # 64 MB; 61 MB measured resident
    with pytest.raises(UserInputError, match="overflow LULESH's int"):
        resolved(here, s=5, r=11, b=9)  # crashes LULESH 2.0 (measured)
    assert resolved(here, s=5, r=11, b=8)["b"] == 8
    params = {p.name: p for p in Lulesh.parameters}
    for name, bad in (("s", 0), ("s", 1001), ("i", 0), ("i", 10**8), ("r", 0), ("b", -2), ("c", -5)):
        with pytest.raises(UserInputError):
            params[name].check(bad)


def test_the_command_line_is_an_argument_list(here):
    point = resolved(here, s=7, i=3, ranks=1, p=True)
    assert Lulesh(point=point, binary="/x/lulesh2.0").launch().program == (
        "/x/lulesh2.0", "-s", "7", "-i", "3", "-r", "11", "-b", "1", "-c", "1", "-p")
    assert "-i" not in Lulesh(point=resolved(here, s=7), binary="/x").arguments()


@pytest.mark.parametrize("name", VALID)
def test_the_estimate_is_above_what_the_real_run_took(here, name):
    f = outcome(text(name)).facts
    i = None if "stop-time" in name else f["lulesh_iterations"]
    point = resolved(here, s=f["lulesh_problem_size"], i=i, ranks=f["lulesh_mpi_tasks"], threads=f["lulesh_threads"])
    assert Lulesh.estimate_s(point, here) > metric(outcome(text(name)), "lulesh_elapsed_s")
    bigger = resolved(here, s=30, ranks=1, threads=1)  # to the stop time: 932 cycles, 24 s measured here
    assert 24 < Lulesh.estimate_s(bigger, here) < 24 * 10


# ---------------------------------------------------------------- the real code, built and run

@pytest.fixture(scope="session")
def lulesh_cache(tmp_path_factory) -> Path:
    """A build cache holding LULESH built from the shared tarball (once per session)."""
    if not TARBALL.is_file():
        pytest.skip("needs ../shared/sources/lulesh-2.0.tar.gz (CI has it)")
    cache = tmp_path_factory.mktemp("lulesh-build")
    built = cli("build", "lulesh", "--source", str(TARBALL), "--json", env={"CLUSTERBENCH_CACHE": str(cache)},
                timeout=900)
    assert built.returncode == 0, built.stderr + built.stdout
    assert json.loads(built.stdout)["version"] == "2.0"
    return cache


CAMPAIGN = """\
name: lulesh-ranks
description: LULESH 2.0 on 1 rank and on 8 (oversubscribed on a 2-core machine)
timeout: 2m
benchmarks:
  - benchmark: lulesh
    params: {s: 6, i: 10, threads: 1}
    space:
      ranks: [1, 8]
"""


@pytest.mark.slow
def test_lulesh_runs_through_a_campaign_on_1_and_8_ranks(lulesh_cache, tmp_path, isolated_db, monkeypatch):
    """8 ranks on this 2-core machine are oversubscribed: PlacedProgram gives mpirun --oversubscribe
    when the ranks outnumber the CPUs (as for every placed benchmark), and Lulesh.resolve leaves them
    unbound (--bind-to none), since Open MPI refuses to bind more ranks than cores. Takes about 5 s."""
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(lulesh_cache))
    for var in ("CLUSTERBENCH_LULESH", "CLUSTERBENCH_PATH"):
        monkeypatch.delenv(var, raising=False)
    spec = tmp_path / "lulesh.yaml"
    spec.write_text(CAMPAIGN)
    summary = cli_json("campaign", "run", str(spec), "--json", timeout=300)
    assert (summary["runs"], summary["ok"], summary["invalid"], summary["failed"]) == (2, 2, 0, 0)
    runs = {json.loads(r["params"])["ranks"]: r for r in query(
        isolated_db, "SELECT id, status, valid, command, params, facts FROM runs WHERE campaign = 'lulesh-ranks'")}
    assert set(runs) == {1, 8} and all(r["status"] == "ok" and r["valid"] == 1 for r in runs.values())
    assert str(lulesh_cache) in runs[1]["command"] and "-s 6 -i 10" in runs[1]["command"]
    assert "--oversubscribe" in runs[8]["command"] and "--bind-to none" in runs[8]["command"]
    facts = {ranks: json.loads(r["facts"]) for ranks, r in runs.items()}
    assert facts[1]["lulesh_zones"] == 216 and facts[8]["lulesh_zones"] == 8 * 216  # 8 ranks: 8 cubes of 6^3
    for ranks, f in facts.items():
        assert (f["lulesh_mpi_tasks"], f["lulesh_iterations"], f["lulesh_stopped_by"]) == (ranks, 10, "cycle count")
        assert f["max_rel_diff"] < MAX_REL_DIFF and f["binary_provenance"]["version"] == "2.0"
    metrics = {(ranks, m["name"]): (m["value"], m["unit"], m["valid"]) for ranks, r in runs.items()
               for m in query(isolated_db, "SELECT name, value, unit, valid FROM metrics WHERE run_id = ?", r["id"])}
    for ranks in (1, 8):
        fom, unit, valid = metrics[(ranks, "lulesh_fom")]
        elapsed = metrics[(ranks, "lulesh_elapsed_s")][0]
        assert unit == "kz/s" and valid == 1 and fom > 0 and 0 < elapsed < 60
        assert fom == pytest.approx(facts[ranks]["lulesh_zones"] * 10 / elapsed / 1000, rel=1e-6)


@pytest.mark.slow
def test_a_rank_count_that_is_not_a_cube_is_refused_before_anything_runs(lulesh_cache, tmp_path, isolated_db,
                                                                          monkeypatch):
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(lulesh_cache))
    spec = tmp_path / "lulesh.yaml"
    spec.write_text(CAMPAIGN.replace("ranks: [1, 8]", "ranks: [1, 4]"))
    out = cli("campaign", "run", str(spec))
    assert out.returncode == 2, out.stdout + out.stderr
    message = " ".join(out.stderr.split())
    assert f"{spec}:" in message and "ranks=4: LULESH runs on a cube number of ranks" in message
    assert "the nearest cubes are 1 and 8" in message
    assert not isolated_db.exists() or query(isolated_db, "SELECT COUNT(*) FROM runs")[0][0] == 0


@pytest.mark.slow
def test_the_example_campaign_plans_here(lulesh_cache, monkeypatch):
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(lulesh_cache))
    plan = cli_json("plan", str(Path(__file__).resolve().parents[1] / "examples" / "lulesh.yaml"), "--json")
    assert plan["runs"] == len(plan["plan"]) > 0
    assert {r["params"]["ranks"] for r in plan["plan"]} == {1, 8}
