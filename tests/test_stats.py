"""Statistics over repeats: the numbers, the t quantiles, and what counts as a sample."""

import math

import pandas as pd
import pytest

from clusterbench.analysis.stats import describe, summarise, t95


def test_describe_known_values():
    d = describe([1.0, 2.0, 3.0, 4.0])
    assert d["n"] == 4 and d["mean"] == 2.5 and d["median"] == 2.5 and (d["min"], d["max"]) == (1.0, 4.0)
    assert d["std"] == pytest.approx(math.sqrt(5 / 3))
    assert d["ci95"] == pytest.approx(3.182 * math.sqrt(5 / 3) / 2)
    assert d["ci95_low"] == pytest.approx(2.5 - d["ci95"])
    assert d["cv"] == pytest.approx(math.sqrt(5 / 3) / 2.5)
    assert "high variation" in d["warning"]


def test_single_sample_and_no_sample():
    assert describe([5.0])["std"] is None and "one sample" in describe([5.0])["warning"]
    assert describe([])["n"] == 0 and describe([])["mean"] is None


def test_low_variation_has_no_warning():
    assert describe([100.0, 101.0, 99.0])["warning"] is None


def test_t_quantiles():
    assert t95(1) == 12.706 and t95(30) == 2.042 and t95(120) == pytest.approx(1.980)
    assert 1.962 < t95(1000) < 1.963  # true value 1.9623 and 2.021 < t95(35) < 2.042


def test_summarise_excludes_invalid_repeats():
    frame = pd.DataFrame([
        {"run_id": f"r{i}", "benchmark": "hpl", "metric": "hpl_gflops", "unit": "Gflop/s", "value": v,
         "valid": ok, "param.nb": nb}
        for i, (v, ok, nb) in enumerate([(80.0, True, 64), (82.0, True, 64), (999.0, False, 64),
                                         (70.0, True, 128), (72.0, True, 128)])])
    out = summarise(frame, ["nb"]).set_index("nb")
    assert out.loc[64, "n"] == 2 and out.loc[64, "mean"] == 81.0 and out.loc[64, "max"] == 82.0
    assert out.loc[64, "n_invalid"] == 1 and out.loc[128, "n_invalid"] == 0


def test_api_stats_over_imported_nb_sweep(isolated_db):
    from tests.conftest import cli, fixture

    from clusterbench import api

    assert cli("import", str(fixture("outputs/this-machine/hpl-nbsweep-N13440-1x2.log")), "-q").returncode == 0
    table = api.stats(metric="hpl_gflops", group_by=["nb"])
    assert sorted(table["nb"]) == [64, 96, 128, 160, 192, 224, 256]
    assert set(table["n"]) == {1} and table["warning"].str.contains("one sample").all()
