"""HPL and HPCC parsers on real outputs and on crafted failures.

The this-machine outputs ship in tests/fixtures; the cloud HPL 2.2 files (no licence) are read from ../shared
and their tests skip where it is absent.
"""

from __future__ import annotations

import re

import pytest

from clusterbench.bench.hpcc.output import hpcc_outcome, parse_summary
from clusterbench.bench.hpl.output import hpl_outcome, parse_hpl
from conftest import fixture

HERE = fixture("outputs/this-machine")


@pytest.mark.parametrize("name,time_s,gflops,start,end", [
    ("20170327_035001.out", 1788.85, 33.15, "Mon Mar 27 03:50:21 2017", "Mon Mar 27 04:20:09 2017"),
    ("20170327_105001.out", 1788.70, 33.16, "Mon Mar 27 10:50:20 2017", "Mon Mar 27 11:20:09 2017"),
    ("20170324_015001.out", 1996.04, 29.71, "Fri Mar 24 01:50:22 2017", "Fri Mar 24 02:23:38 2017"),
])
def test_hpl22_cloud(name, time_s, gflops, start, end):
    out = parse_hpl(fixture(f"outputs/hpl-cloud/{name}").read_text())
    assert out.version == "2.2"
    assert len(out.results) == 1  # the 247 'Column=... Gflops=' progress lines are not results
    r = out.results[0]
    assert (r.tv, r.n, r.nb, r.p, r.q) == ("WR11R2C4", 44640, 180, 2, 2)
    assert r.time_s == time_s and r.gflops == pytest.approx(gflops)
    assert r.residual == pytest.approx(0.0006845) and r.passed is True
    assert (r.start, r.end) == (start, end)
    assert (out.finished, out.passed, out.failed, out.skipped) == (1, 1, 0, 0)
    assert out.problems() == []
    assert out.parameters["PFACT"] == ["Crout"] and out.parameters["RFACT"] == ["Right"]


def _raw_results(text: str) -> list[tuple[int, float]]:
    """An independent reading of the result lines, to compare the parser against."""
    return [(int(m.group(1)), float(m.group(2))) for m in
            re.finditer(r"^WR\S+\s+\d+\s+(\d+)\s+\d+\s+\d+\s+\S+\s+(\S+)$", text, re.M)]


def test_hpl23_nb_sweep():
    text = (HERE / "hpl-nbsweep-N13440-1x2.log").read_text()
    out = parse_hpl(text)
    assert out.version == "2.3"
    assert [r.nb for r in out.results] == [64, 96, 128, 160, 192, 224, 256]
    assert [(r.nb, r.gflops) for r in out.results] == _raw_results(text)
    assert all(r.passed for r in out.results)
    assert out.results[0].residual == pytest.approx(2.33168918e-03)
    assert out.parameters["NB"] == ["64", "96", "128", "160", "192", "224", "256"]
    assert out.finished == 7 and out.best().gflops == max(g for _, g in _raw_results(text))


def test_hpl23_hybrid_log():
    out = parse_hpl((HERE / "hpl-N13440-1x1-omp2-bindnone.log").read_text())
    assert {(r.p, r.q) for r in out.results} == {(1, 1)}
    assert out.finished == len(out.results) == 4


def test_failed_residual_is_invalid_and_never_best():
    text = (HERE / "hpl-nbsweep-N13440-1x2.log").read_text()
    best_nb = max(parse_hpl(text).results, key=lambda r: r.gflops).nb
    # Fail the residual of the fastest result, and fix HPL's own summary to match.
    blocks = text.split("T/V                N")
    idx = next(i for i, b in enumerate(blocks) if re.search(rf"^WR\S+\s+13440\s+{best_nb}\s", b, re.M))
    blocks[idx] = blocks[idx].replace("PASSED", "FAILED")
    crafted = "T/V                N".join(blocks)
    crafted = crafted.replace("7 tests completed and passed", "6 tests completed and passed")
    crafted = crafted.replace("0 tests completed and failed", "1 tests completed and failed")
    out = parse_hpl(crafted)
    assert [r.passed for r in out.results].count(False) == 1
    assert out.best().nb != best_nb
    outcome = hpl_outcome(crafted)
    assert not outcome.valid and any("FAILED" in r for r in outcome.reasons)
    assert outcome.best("hpl_gflops").labels["nb"] != best_nb


def test_truncated_output():
    text = (HERE / "hpl-nbsweep-N13440-1x2.log").read_text()
    cut = text[: text.index("WR11C2R4       13440   160") + 80]
    out = parse_hpl(cut)
    assert out.truncated and len(out.results) == 4
    assert out.results[-1].passed is None
    outcome = hpl_outcome(cut)
    assert not outcome.valid
    assert any("truncated" in r for r in outcome.reasons)
    assert outcome.best("hpl_gflops").labels["nb"] in (64, 96, 128)


def test_skipped_tests_and_other_variants():
    text = """HPLinpack 2.3  --  High-Performance Linpack benchmark  --   December 2, 2018
The following parameter values will be used:

N      :    1000
NB     :      32
================================================================================
T/V                N    NB     P     Q               Time                 Gflops
--------------------------------------------------------------------------------
WR00L2R4        1000    32     1     1               0.05             1.3330e+01
--------------------------------------------------------------------------------
||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=   2.35943830e-03 ...... PASSED
================================================================================

Finished      1 tests with the following results:
              1 tests completed and passed residual checks,
              0 tests completed and failed residual checks,
              2 tests skipped because of illegal input values.
"""
    out = parse_hpl(text)
    assert out.results[0].tv == "WR00L2R4" and out.results[0].residual == pytest.approx(2.3594383e-3)
    assert out.skipped == 2 and out.problems() == []


def test_lsf_wrapped_output():
    body = fixture("outputs/hpl-cloud/20170327_035001.out").read_text()
    wrapped = ("Sender: LSF System <lsfadmin@cn065>\nSubject: Job 1234: <hpl> Done\n\n"
               "Job was executed on host(s) <2*cn065>, in queue <scarf>, as user <u>.\n"
               "                            <2*cn066>\n#BSUB -n 4\n" + body +
               "\n\nResource usage summary:\n    CPU time :  7000.00 sec.\n")
    out = parse_hpl(wrapped)
    assert len(out.results) == 1 and out.results[0].gflops == pytest.approx(33.15)


def test_aborted_mpi_run():
    text = (HERE / "hpl-nbsweep-N13440-1x2.log").read_text()
    aborted = text[: text.index("WR11C2R4       13440    96")] + (
        "--------------------------------------------------------------------------\n"
        "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\nwith errorcode -1.\n")
    outcome = hpl_outcome(aborted)
    assert not outcome.valid
    assert len([m for m in outcome.metrics if m.name == "hpl_gflops"]) == 1


def test_no_result_at_all():
    outcome = hpl_outcome("mpirun was unable to launch the specified application\n")
    assert not outcome.valid and "no HPL result line found" in outcome.reasons


# ---------------------------------------------------------------------------- HPCC

def test_hpcc_summary_every_key():
    text = (HERE / "hpccoutf-2rank.txt").read_text()
    summary = parse_summary(text)
    block = text[text.index("Begin of Summary section.") + 26: text.index("End of Summary section.")]
    keys = [line.split("=")[0] for line in block.strip().splitlines()]
    assert list(summary) == keys
    assert summary["HPL_Tflops"] == "0.085421"


def test_hpcc_metrics_and_units():
    outcome = hpcc_outcome((HERE / "hpccoutf-2rank.txt").read_text())
    assert outcome.valid, outcome.reasons
    by = {m.name: m for m in outcome.metrics}
    assert by["HPL_Tflops"].value == pytest.approx(0.085421) and by["HPL_Tflops"].unit == "Tflop/s"
    assert by["hpl_gflops"].value == pytest.approx(85.42)
    labels = by["hpl_gflops"].labels
    assert (labels["n"], labels["nb"], labels["p"], labels["q"]) == (13440, 224, 1, 2)
    assert by["StarDGEMM_Gflops"].unit == "Gflop/s" and by["StarDGEMM_Gflops"].value == pytest.approx(46.8367)
    assert by["SingleSTREAM_Triad"].unit == "GB/s" and by["SingleSTREAM_Triad"].value == pytest.approx(28.0609)
    assert by["MinPingPongLatency_usec"].unit == "us" and not by["MinPingPongLatency_usec"].higher_is_better
    assert by["MaxPingPongBandwidth_GBytes"].value == pytest.approx(13.6941)
    assert by["MPIRandomAccess_GUPs"].unit == "GUP/s"
    assert "sizeof_int" not in by  # build facts are not measurements
    assert outcome.facts["hpcc_summary"]["CommWorldProcs"] == "2"


def test_hpcc_failed_hpl_residual():
    text = (HERE / "hpccoutf-2rank.txt").read_text()
    hpl_start = text.index("Begin of HPL section.")
    crafted = text[:hpl_start] + text[hpl_start:].replace("PASSED", "FAILED", 1).replace(
        "1 tests completed and passed", "0 tests completed and passed").replace(
        "0 tests completed and failed", "1 tests completed and failed")
    outcome = hpcc_outcome(crafted)
    assert not outcome.valid
    assert outcome.best("hpl_gflops") is None and outcome.best("HPL_Tflops") is None
    assert outcome.best("SingleDGEMM_Gflops") is not None  # other figures stay, run is invalid


def test_hpcc_truncated():
    text = (HERE / "hpccoutf-2rank.txt").read_text()
    outcome = hpcc_outcome(text[: text.index("Begin of HPL section.")])
    assert not outcome.valid
    assert any("Summary" in r for r in outcome.reasons)


def test_hpcc_stream_validation_failure():
    text = (HERE / "hpccoutf-2rank.txt").read_text().replace(
        "Solution Validates: avg error less than 1.000000e-13 on all three arrays",
        "Failed Validation on array c[]")
    outcome = hpcc_outcome(text)
    assert not outcome.valid and any("STREAM" in r for r in outcome.reasons)
