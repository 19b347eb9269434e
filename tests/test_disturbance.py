"""A run that shares its CPUs with other work is flagged `disturbed`, with its evidence; the same run alone is not.

Real runs of our DGEMM kernel (2 ranks: every core of this machine) beside a real busy loop (`yes`), started
detached from the test (a process of another session, as another user's job would be). The tests run alone
(`quiet_machine`): the suite's other tests would be a disturbance too. The suite records disturbance without
flagging it (tests/conftest.py); these tests ask for the flag.
"""

from __future__ import annotations

import json
import subprocess
import time
from contextlib import contextmanager

import pytest
from tests.conftest import cli

FLAG = {"CLUSTERBENCH_DISTURBANCE": "flag"}


@contextmanager
def busy_loop(*prefix: str):
    """A `yes` burning one CPU, in a session of its own (as another user's job would be), on this machine or,
    with `prefix` (ssh node1), on a node; ended by its pid, and waited for until it is gone."""
    start = "setsid yes >/dev/null 2>&1 </dev/null & echo $!"
    out = subprocess.run([*prefix, start] if prefix else ["sh", "-c", start], capture_output=True, text=True,
                         timeout=60)  # over ssh the command is one string
    pid = out.stdout.strip()
    assert out.returncode == 0 and pid.isdigit(), out.stderr
    try:
        yield pid
    finally:
        subprocess.run([*prefix, f"kill {pid}"] if prefix else ["kill", pid], capture_output=True, timeout=60)
        deadline = time.monotonic() + 30
        while subprocess.run([*prefix, f"kill -0 {pid}"] if prefix else ["kill", "-0", pid],
                             capture_output=True, timeout=60).returncode == 0:
            assert time.monotonic() < deadline, f"the busy loop {pid} did not end"
            time.sleep(0.1)


def dgemm(*more: str, env: dict | None = None) -> dict:
    out = cli("bench", "dgemm", "-p", "ranks=2", "-p", "n=1500", "--json", *more, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    runs = json.loads(out.stdout)
    return runs[0] if isinstance(runs, list) else runs


@pytest.mark.quiet_machine
def test_a_run_beside_a_busy_loop_is_flagged_and_the_same_run_alone_is_not():
    """One test (a quiet one stops every other test while it runs): flagged beside the loop, recorded but not
    flagged with `record`, a quiet check refused beside the loop; then alone: not flagged, the check passes."""
    with busy_loop():
        shared = dgemm(env=FLAG)
        recorded = dgemm(env={"CLUSTERBENCH_DISTURBANCE": "record"})
        refused = cli("--quiet-check", "3s", "bench", "dgemm", "-p", "n=500")
    alone = dgemm(env=FLAG)
    ran = cli("--quiet-check", "30s", "bench", "dgemm", "-p", "n=500")
    evidence = shared["facts"]["disturbed"]["evidence"]
    assert any("`yes`" in e and "went to pid" in e or "other processes took" in e for e in evidence), evidence
    node = next(iter(shared["facts"]["disturbance"]["nodes"].values()))
    assert node["judged"] and node["others_percent"] >= 5, node
    # record: measured and stored, never flagged
    assert "disturbed" not in recorded["facts"] and recorded["facts"]["disturbance"]["evidence"]
    assert "disturbed" not in alone["facts"], alone["facts"].get("disturbed")
    quiet = next(iter(alone["facts"]["disturbance"]["nodes"].values()))
    assert quiet["judged"] and quiet["others_percent"] < 5, quiet
    # the listing marks it, the run's page says why
    listing = cli("results", env={"COLUMNS": "120"}).stdout
    line = next(row for row in listing.splitlines() if shared["id"] in row)
    assert "disturbed" in line and "disturbed" not in next(r for r in listing.splitlines() if alone["id"] in r)
    page = cli("results", shared["id"]).stdout
    assert "DISTURBED:" in page and "`yes`" in page or "other processes" in page, page[:2000]
    # --quiet-check: refused beside the loop with what keeps the node busy (exit 1), runs alone
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "not quiet" in refused.stderr and ("`yes`" in refused.stderr or "other processes" in refused.stderr)
    assert "Traceback" not in refused.stderr
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_a_quiet_check_limit_that_is_not_a_duration_is_refused():
    out = cli("--quiet-check", "soon", "bench", "dgemm")
    assert out.returncode == 2 and "--quiet-check" in out.stderr, out.stderr
