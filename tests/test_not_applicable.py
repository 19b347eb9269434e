"""Values that do not apply are absent, never averaged (issue 31, point 2).

HPCC prints -1 for a figure it did not run (with one process, every ping-pong and ring figure);
the report showed ping-pong latency as "-1 ± 0 (n=24) us". The HPCC declaration says -1 means
"not applicable", and every metric frame leaves such values out. The store holds the real HPCC
1.5 output of tests/fixtures and a copy of it whose ping-pong and ring figures read -1, as HPCC
writes them when it cannot run them.
"""

from __future__ import annotations

import os
import re

import pytest
from tests.conftest import cli, cli_json, fixture

from clusterbench.analysis.applicable import applies
from clusterbench.analysis.dataset import load
from clusterbench.analysis.select import Selection
from clusterbench.analysis.stats import metric_frame
from clusterbench.bench import registry
from clusterbench.store.db import Store

HPCC = "outputs/this-machine/hpccoutf-2rank.txt"
LATENCY = "MinPingPongLatency_usec"
REAL_LATENCY = 0.163313  # read from the file's summary


def _not_run_copy(tmp_path):
    """The real output with the latency and bandwidth figures of the summary as HPCC prints a test it did not run."""
    text = fixture(HPCC).read_text()
    text, count = re.subn(r"^((?:\w+PingPong|\w+OrderedRing)(?:Latency_usec|Bandwidth_GBytes))=.*$", r"\1=-1",
                          text, flags=re.M)
    assert count == 10
    target = tmp_path / "hpccoutf-not-run.txt"
    target.write_text(text)
    return target


@pytest.fixture
def two_hpcc_runs(tmp_path):
    for path in (fixture(HPCC), _not_run_copy(tmp_path)):
        out = cli("import", str(path), "-q")
        assert out.returncode == 0, out.stdout + out.stderr


def test_hpcc_minus_one_is_not_a_latency(two_hpcc_runs):
    with Store(os.environ["CLUSTERBENCH_DB"], read_only=True) as store:
        assert len(store.metric_rows(LATENCY)) == 2  # both stored as printed: the file is kept as it is
        data = load(store, Selection(), {LATENCY, "AvgPingPongLatency_usec", "StarSTREAM_Triad"})
        frame = metric_frame(store, metric=LATENCY)
    latency = data.of(LATENCY)
    assert list(latency["value"]) == [REAL_LATENCY]  # the -1 is absent, not a second sample
    assert len(data.of("AvgPingPongLatency_usec")) == 1  # a figure no section draws, declared all the same
    assert len(data.of("StarSTREAM_Triad")) == 2  # the copy's other figures are real measurements
    assert list(frame["value"]) == [REAL_LATENCY]


def test_results_stat_never_averages_minus_one(two_hpcc_runs):
    rows = cli_json("results", "--metric", LATENCY, "--stat", "n,mean,min", "--format", "json")
    assert len(rows) == 1
    assert rows[0]["n"] == 1 and rows[0]["mean"] == pytest.approx(REAL_LATENCY) and rows[0]["min"] > 0


def test_declarations_say_what_does_not_apply():
    specs = {(cls.name, spec.name): spec for cls in registry.registered() for spec in cls.metrics}
    hpcc = specs[("hpcc", LATENCY)]
    assert not hpcc.applies(-1.0) and hpcc.applies(REAL_LATENCY)
    assert not specs[("imb", "imb_time_us")].applies(-0.5) and specs[("imb", "imb_time_us")].applies(0.17)
    assert not applies("hpl", "hpl_gflops", float("nan")) and not applies("anything", "x", float("inf"))
    assert applies("anything", "x", -3.0)  # undeclared: only NaN and infinities are absent
