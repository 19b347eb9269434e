"""Placement verified in real runs on this machine: Open MPI's mpirun and MPICH's Hydra, every
strategy they can express, thread and task scaling; a narrowed run flagged; `clusterbench pin`.

The expected placement of each run is not written here: it is the calculator's prediction
(tested against the real launchers in test_pinning_mpirun.py / test_pinning_slurm.py), and the
test checks that the probe saw every rank and thread where the prediction put it. The affinity
kernel holds each thread busy for 300 ms so every thread is sampled after MPI_Init's own moves.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from tests.conftest import ROOT, cli, cli_json, query

from clusterbench.pinning.strategies import STRATEGIES, expressible

TOPOLOGY = ROOT / "tests" / "fixtures" / "topology"
needs_two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
MPIS = ["openmpi", pytest.param("mpich", marks=pytest.mark.skipif(not shutil.which("mpirun.mpich"),
                                                                   reason="needs Debian's mpich (make setup)"))]
OMP = {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}


def placed(*params: str, env: dict | None = None) -> dict:
    args = ["bench", "affinity", "-p", "hold_ms=300", *[a for p in params for a in ("-p", p)], "--json"]
    [run] = cli_json(*args, env=env)
    assert run["status"] == "ok", run
    return run["facts"]["pinning"]


@needs_two_cpus
@pytest.mark.parametrize("mpi", MPIS)
def test_every_expressible_strategy_runs_where_predicted(mpi):
    seen = {}
    for strategy in expressible("hydra" if mpi == "mpich" else "openmpi"):
        for scaling in ("thread", "task"):
            facts = placed(f"mpi={mpi}", f"pinning={strategy}", f"scaling={scaling}", "workers=2", env=OMP)
            seen[(strategy, scaling)] = facts["verdict"], facts["problems"]
            ranks = facts["ranks"]
            assert len(ranks) == (1 if scaling == "thread" else 2)
            assert facts["threads_seen"] >= 2
    assert {k: v for k, v in seen.items() if v[0] != "match"} == {}
    assert ("rank", "task") in seen if mpi == "mpich" else ("rank", "task") not in seen


@needs_two_cpus
def test_open_mpi_default_binds_one_rank_to_one_core_and_its_threads_share_it():
    """Open MPI binds to core when np <= 2: a one-rank, two-thread run gets one core (the
    prediction says so, and the run shows it), whatever OMP_NUM_THREADS asks for."""
    facts = placed("mpi=openmpi", "pinning=default", "scaling=thread", "workers=2", env=OMP)
    [rank] = facts["ranks"]
    assert facts["verdict"] == "match"
    assert len(rank["predicted"].split(",")) == 1 and "-" not in rank["predicted"]
    assert rank["threads_predicted"] == [rank["predicted"]] * 2


@needs_two_cpus
def test_pinning_default_records_what_the_launcher_did_not_an_invented_bind_to(isolated_db):
    """Issue 31, Why 9: with `pinning: default` mpirun gets no --bind-to, and Open MPI binds the one
    rank to a core. The stored parameters used to say bind_to=none (a planning default never passed
    on); now they state no binding, and the facts record the launcher's effective binding, from its
    documented defaults, checked by the probe."""
    [run] = cli_json("bench", "affinity", "-p", "hold_ms=300", "-p", "mpi=openmpi", "-p", "pinning=default",
                     "-p", "scaling=thread", "-p", "workers=2", "--json", env=OMP)
    [row] = query(isolated_db, "SELECT params FROM runs WHERE id = ?", run["id"])
    assert "bind_to" not in json.loads(row["params"]), row["params"]
    pinning = run["facts"]["pinning"]
    assert pinning["verdict"] == "match"
    effective = pinning["effective"]
    assert effective["bind_to"] == "core" and effective["map_by"] == "core"
    assert "np <= 2" in effective["from"] and effective["checked"] == "by the probes: match"


@needs_two_cpus
def test_a_narrowed_run_is_flagged(isolated_db):
    """An external taskset narrows every rank to one CPU: bind_to none predicts the whole node."""
    if not shutil.which("taskset"):
        pytest.skip("needs taskset")
    last = str(max(os.sched_getaffinity(0)))
    proc = subprocess.run(
        ["taskset", "-c", last, sys.executable, "-m", "clusterbench", "bench", "affinity", "-p", "hold_ms=200",
         "-p", "ranks=2", "-p", "bind_to=none", "-p", "mpi=openmpi", "--json"],
        capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    [run] = json.loads(proc.stdout)
    facts = run["facts"]["pinning"]
    assert facts["verdict"] == "mismatch" and run["status"] == "ok"
    assert any(f"bound to CPUs {last}" in p for p in facts["problems"])
    [row] = query(isolated_db, "SELECT facts FROM runs")
    assert json.loads(row["facts"])["pinning"]["verdict"] == "mismatch"
    listing = cli("results")
    assert "MISMATCH" in listing.stdout
    shown = cli("results", run["id"])
    assert "placement: mismatch" in shown.stdout and f"bound to CPUs {last}" in shown.stdout


def test_pin_draws_the_acceptance_case():
    """The issue's command: 8 tasks x 3 CPUs on the EPYC 7742 fixture, psslurm, --cpu-bind threads."""
    out = cli("pin", "--from", str(TOPOLOGY / "epyc7742-synthetic.xml"), "--launcher", "srun", "--flavour",
              "psslurm", "-n", "8", "-c", "3", "--cpu-bind", "threads", "--masks")
    assert out.returncode == 0, out.stderr
    assert "NUMA" in out.stdout and "physical" in out.stdout and "mask 0x" in out.stdout
    data = cli_json("pin", "--from", str(TOPOLOGY / "epyc7742-synthetic.xml"), "--launcher", "srun", "--flavour",
                    "psslurm", "-n", "8", "-c", "3", "--cpu-bind", "threads", "--json")
    tasks = data["tasks"]
    assert len(tasks) == 8 and all(t["node"] == 0 for t in tasks)


@pytest.mark.parametrize("fixture", ["epyc7742-synthetic.xml", "cts1-pascal.xml", "cts1-quartz-smt1.xml"])
@pytest.mark.parametrize("strategy", list(STRATEGIES))
@pytest.mark.parametrize("flavour", ["psslurm", "slurm"])
def test_pin_every_strategy_on_three_fixtures(fixture, strategy, flavour, tmp_path):
    """The thesis's strategies (8 tasks x 4 CPUs) drawn for JSC's psslurm and for stock Slurm 22.05,
    which refuses rank and rank_ldom unless the step has the whole node (as the real srun does:
    tests/fixtures/pinning/srun/, 'Entire node must be allocated')."""
    svg = tmp_path / "p.svg"
    out = cli("pin", "--from", str(TOPOLOGY / fixture), "--launcher", "srun", "--flavour", flavour, "-n", "8",
              "-c", "4", "--strategy", strategy, "--svg", str(svg))
    if flavour == "slurm" and strategy in ("rank", "rank_ldom"):
        assert out.returncode == 2 and "Entire node must be allocated" in out.stderr
        return
    assert out.returncode == 0, out.stderr + out.stdout
    assert "<svg" in svg.read_text()[:300] and "physical" in out.stdout


@pytest.mark.parametrize("args, where", [
    (["-n", "300", "-c", "1"], "--ntasks"),  # more tasks x CPUs than the 256 CPUs, no --overcommit
    (["-n", "8", "--strategy", "nonsense"], "pinning"),
    (["-n", "2", "--cpu-bind", "map_cpu:0,999"], "--cpu-bind"),
    (["-n", "2", "--cpu-bind", "mask_cpu:0x1" + "0" * 80], "--cpu-bind"),
    (["-n", "2", "--launcher", "openmpi", "--map-by", "sideways"], "--map-by"),
    (["-n", "2", "--launcher", "openmpi", "--strategy", "rank"], "pinning"),
    (["-n", "2", "-c", "2", "--omp-places", "{0:99999999}"], "OMP_PLACES"),
    (["-n", "2", "--launcher", "pbs"], "--launcher"),
])
def test_pin_refuses_bad_input_with_a_located_message(args, where):
    out = cli("pin", "--from", str(TOPOLOGY / "epyc7742-synthetic.xml"), *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert where in out.stderr and "Traceback" not in out.stderr


def test_campaign_refuses_an_unknown_strategy(tmp_path):
    campaign = tmp_path / "c.yaml"
    campaign.write_text("name: bad-pin\nbenchmarks:\n  - benchmark: affinity\n    params: {pinning: sideways}\n")
    out = cli("campaign", "run", str(campaign))
    assert out.returncode == 2 and "pinning" in out.stderr and "Traceback" not in out.stderr


@needs_two_cpus
def test_study_report_shows_strategies_beside_their_pictures(isolated_db, tmp_path):
    """A small version of examples/pinning-study.yaml (STREAM only, one repeat): the report's
    pinning section has both figures' data, a table row per strategy and mode, and an inline
    placement picture per strategy, every run marked with its placement verdict."""
    campaign = tmp_path / "study.yaml"
    campaign.write_text("name: pin-study\nenv: {OMP_PROC_BIND: close, OMP_PLACES: cores}\nbenchmarks:\n"
                        "  - benchmark: stream\n    params: {n: 2000000, ntimes: 5, workers: 2}\n"
                        "    space: {pinning: [default, cores], scaling: [thread, task]}\n")
    out = cli("campaign", "run", str(campaign), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["ok"] == 4
    report = tmp_path / "report"
    out = cli("report", "pin-study", "--out", str(report))
    assert out.returncode == 0, out.stderr
    html = (report / "report.html").read_text()
    assert 'data-section="pinning"' in html and 'data-figure="pinning-stream"' in html
    assert html.count('data-picture="pinning-picture-') == 4  # 2 strategies x 2 modes
    table = (report / "pinning-table.csv").read_text().splitlines()
    # partial: a thread of a run this short may live between two samples (never a mismatch here)
    assert len(table) == 1 + 4 and all(",match," in row or ",partial," in row for row in table[1:])
    assert (report / "pinning-picture-0.svg").read_text().lstrip().startswith(("<svg", "<?xml"))


USER_STRATEGIES = """
name: user-strategy
cluster:
  strategies:
    free:
      summary: ranks dealt round-robin over sockets, not bound
      openmpi: {map_by: socket, bind_to: none}
      hydra: {bind_to: none}
    srun-only:
      srun: {cpu_bind: cores}
benchmarks:
  - benchmark: affinity
    params: {ranks: 2, threads: 1, hold_ms: 200, mpi: openmpi}
    space: {pinning: PINNING}
"""


@needs_two_cpus
def test_a_campaign_defines_its_own_strategy(isolated_db, tmp_path):
    campaign = tmp_path / "u.yaml"
    campaign.write_text(USER_STRATEGIES.replace("PINNING", "[free, cores]"))
    out = cli("campaign", "run", str(campaign), "--json")
    assert out.returncode == 0, out.stderr
    stored = query(isolated_db, "SELECT params, facts, command FROM runs")
    rows = {json.loads(r["params"])["pinning"]: r for r in stored}
    assert "--map-by socket --bind-to none" in rows["free"]["command"]
    free = json.loads(rows["free"]["facts"])["pinning"]
    assert free["verdict"] == "match" and all(r["predicted"] == r["observed"] for r in free["ranks"])
    assert len({r["predicted"] for r in free["ranks"]}) == 1  # not bound: both ranks may use every CPU
    campaign.write_text(USER_STRATEGIES.replace("PINNING", "[free, srun-only]"))
    out = cli("campaign", "run", str(campaign))
    assert out.returncode == 2 and "u.yaml:" in out.stderr
    assert "'srun-only' cannot be expressed with openmpi" in out.stderr
    campaign.write_text(USER_STRATEGIES.replace("free:", "cores:").replace("PINNING", "[cores]"))
    out = cli("campaign", "run", str(campaign))
    assert out.returncode == 2 and "is built in" in out.stderr
