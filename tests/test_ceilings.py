"""Node ceilings and `explain` (issue 35): real clock, DGEMM, STREAM and HPL runs, stored, then read back.

The acceptance case: with OPENBLAS_CORETYPE forced to a generic core (it stands in for a BLAS that does not
know its CPU), `explain` names the BLAS kernel as the bottleneck and gives the remedy; for the library's own
choice it does not. The suite runs benchmarks side by side, so its runs are measured but not flagged
disturbed (CLUSTERBENCH_DISTURBANCE=record, tests/conftest.py): the bottleneck here is never "other work"."""

from __future__ import annotations

import sqlite3

import pytest
from tests.conftest import cli, cli_json


def _latest(db, benchmark: str) -> str:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT id FROM runs WHERE benchmark=? ORDER BY started_at DESC, rowid DESC LIMIT 1",
                           (benchmark,)).fetchone()[0]
    finally:
        con.close()


def _best(db, metric: str, benchmark: str) -> float:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT max(m.value) FROM metrics m JOIN runs r ON r.id=m.run_id WHERE m.name=? AND "
                           "r.benchmark=? AND r.valid=1 AND m.valid=1", (metric, benchmark)).fetchone()[0]
    finally:
        con.close()


def _bench(*args: str, env: dict | None = None) -> None:
    out = cli("bench", *args, env=env)
    assert out.returncode == 0, out.stderr[-2000:] + out.stdout[-2000:]


@pytest.fixture
def measured(isolated_db, xhpl):
    """A store with every ceiling of this node measured once, and two HPL runs: native and generic kernels."""
    _bench("clock", "-p", "ms=100")
    _bench("dgemm", "-p", "n=600", "-p", "ranks=1", "-p", "threads=1", "-p", "blas=openblas-serial")
    _bench("stream", "-p", "n=2000000", "-p", "ranks=1", "-p", "threads=1")
    _bench("hpl", "-p", "n=1200", "-p", "blas=openblas-serial")
    native = _latest(isolated_db, "hpl")
    _bench("hpl", "-p", "n=1200", "-p", "blas=openblas-serial", env={"OPENBLAS_CORETYPE": "Prescott"})
    generic = _latest(isolated_db, "hpl")
    assert native != generic
    return isolated_db, native, generic


def test_ceilings_are_the_best_counted_figures_of_the_kernels(measured):
    db, _, _ = measured
    found = {c["measure"]: c for c in cli_json("ceilings", "--json")}
    assert set(found) == {"fma", "dgemm", "memory"}
    assert found["fma"]["value"] == pytest.approx(_best(db, "clock_gflops", "clock"))
    assert found["dgemm"]["value"] == pytest.approx(_best(db, "dgemm_gflops", "dgemm"))
    assert found["dgemm"]["cores"] == 1 and found["dgemm"]["variant"] == "openblas-serial"
    assert found["memory"]["value"] == pytest.approx(_best(db, "stream_triad", "stream"))
    table = cli("ceilings", env={"COLUMNS": "80"})
    assert table.returncode == 0 and all(len(line) <= 80 for line in table.stdout.splitlines()), table.stdout


def test_explain_names_a_generic_blas_kernel_with_its_remedy_and_not_the_native_one(measured):
    _, native, generic = measured
    slow = cli_json("explain", generic, "--json")
    assert slow["bottleneck"] == "the BLAS kernel", slow
    assert any("remedy: OPENBLAS_CORETYPE=" in line and "Prescott" in line for line in slow["evidence"]), slow
    assert "setting: OPENBLAS_CORETYPE=Prescott" in slow["facts"]
    fast = cli_json("explain", native, "--json")
    assert fast["bottleneck"] != "the BLAS kernel" and not any("remedy" in e for e in fast["evidence"]), fast
    # Placed against DGEMM on its cores, the measured FMA peak and the nominal Rpeak, each a real fraction.
    kinds = [a["ceiling"] for a in fast["against"]]
    assert any(k.startswith("DGEMM") for k in kinds) and any(k.startswith("FMA peak") for k in kinds), kinds
    for placed in fast["against"]:
        assert placed["fraction"] == pytest.approx(fast["value"] / placed["value"], rel=1e-3)
    text = cli("explain", generic, env={"COLUMNS": "80"})
    assert text.returncode == 0 and "bottleneck: the BLAS kernel" in text.stdout
    assert all(len(line) <= 80 for line in text.stdout.splitlines()), text.stdout


def test_explain_of_a_stream_run_and_of_an_unknown_run(measured):
    db, _, _ = measured
    placed = cli_json("explain", _latest(db, "stream"), "--json")
    assert placed["figure"] == "stream_triad" and placed["bottleneck"].startswith("memory bandwidth")
    assert placed["against"] and 0 < placed["against"][0]["fraction"] <= 1.0 + 1e-9
    out = cli("explain", "no-such-run")
    assert out.returncode == 2 and "no stored run" in out.stderr and "Traceback" not in out.stderr


def test_run_summary_gives_efficiency_against_the_measured_peak_too(isolated_db):
    """`run`'s summary holds Rmax against the nominal Rpeak and against the peak the clock kernel measured on
    this system (stored), each labelled; with no clock run stored it says none is."""
    from clusterbench.suite.summary import _measured_peak
    from clusterbench.system.discover import discover

    info = discover()
    _bench("dgemm", "-p", "n=300", "-p", "ranks=1", "-p", "threads=1")  # stores the system, no clock run
    assert _measured_peak(str(isolated_db), info, 50.0) is None
    _bench("clock", "-p", "ms=100")
    peak = _measured_peak(str(isolated_db), info, 50.0)
    cores = info.topology.sockets * info.topology.cores_per_socket
    assert peak["gflops"] == pytest.approx(_best(isolated_db, "clock_gflops", "clock") * cores)
    assert peak["efficiency"] == pytest.approx(50.0 / peak["gflops"]) and "clock" in peak["derivation"]


def test_the_report_places_the_runs_against_the_ceilings(measured, tmp_path):
    import csv

    db, _, generic = measured
    out = cli("report", "-o", str(tmp_path / "rep"))
    assert out.returncode == 0, out.stderr[-2000:]
    with open(tmp_path / "rep" / "ceilings.csv") as f:
        table = {row["ceiling"]: float(row["value"]) for row in csv.DictReader(f)}
    assert table == {c["label"] if "label" in c else _label(c): pytest.approx(c["value"], abs=1e-3)
                     for c in cli_json("ceilings", "--json")}
    with open(tmp_path / "rep" / "ceilings-placed.csv") as f:
        placed = {row["runs"]: row for row in csv.DictReader(f)}
    assert placed[generic]["bottleneck"] == "the BLAS kernel" and "remedy" in placed[generic]["evidence"]
    assert 'id="ceilings"' in (tmp_path / "rep" / "report.html").read_text()


def _label(c: dict) -> str:
    from clusterbench.analysis.ceilings import Ceiling

    return Ceiling(**c).label()
