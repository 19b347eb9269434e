"""`run --repeats N|auto`: the main job's headline run made again, and one line that says why it stopped."""

from __future__ import annotations

import json
import re

import pytest
from tests.conftest import cli


def test_run_repeats_auto_stops_with_its_reason_within_its_bounds():
    out = cli("run", "--budget", "12s", "--n", "1152", "--no-kernels", "--no-hpl", "--repeats", "auto",
              "--precision", "50%", "--max-repeats", "3", "--json", timeout=600)  # N given: HPCC runs ~2 s
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    summary = json.loads(out.stdout)
    rep = summary["repeats"]
    assert rep["benchmark"] == "hpcc" and len(rep["runs"]) == 3, rep
    assert re.fullmatch(r"stopped (after \d runs: 95% interval \+-[\d.]+% <= 50%|at the maximum of \d runs: "
                        r"\+-[\d.]+% > 50%)( \(.*\))?( \(the most the budget holds\))?", rep["reason"]), rep["reason"]
    assert set(rep["runs"]) <= {r["id"] for r in summary["runs"]}
    assert rep["samples"] <= len(rep["runs"]) and (rep["median"] is None) == (rep["samples"] == 0)


@pytest.mark.parametrize("args, words", [
    (["--repeats", "0"], "--repeats"),
    (["--precision", "2%"], "--precision applies only with --repeats auto"),
    (["--repeats", "auto", "--precision", "2"], "ambiguous"),
    (["-w", "node[1-2]", "--repeats", "3"], "--repeats applies to one machine"),
])
def test_bad_repeat_options_of_run_are_refused(args, words):
    out = cli("run", *args, "--dry-run")
    assert out.returncode == 2 and words in out.stderr, out.stderr
