"""Expansion, ids, derived values, the schema, the examples, and the ETA model (no runs)."""

import json
import os
from pathlib import Path

import pytest
from tests.conftest import ROOT, cli, cli_json

from clusterbench.bench.hpl.planner import n_for_memory
from clusterbench.campaign.expand import expand
from clusterbench.campaign.spec import parse_campaign
from clusterbench.execution.loop import Eta
from clusterbench.system.discover import discover

SPEC = """\
name: t
repeats: 2
benchmarks:
  - benchmark: hpcc
    params:
      n: {hpl_n: {fraction: 0.5, memory: 64MiB}}
    space:
      nb: [32, 48]
      layout: [mpi, hybrid-node]
    where: ["nb == 32 or layout == 'mpi'"]
    env: {OMP_PLACES: cores, MY_THREADS: "{threads}"}
  - benchmark: command
    params: {command: "echo {a} {b}"}
    space: {a: [1, 2, 3], b: [x, y, z]}
    combine: zip
"""


@pytest.fixture(scope="module")
def system():
    return discover(with_software=False)


def test_expansion_is_complete_ordered_and_deterministic(system):
    campaign, source = parse_campaign(SPEC, "t.yaml")
    runs = expand(campaign, source, system)
    again = expand(*parse_campaign(SPEC, "t.yaml"), system)
    assert [r.id for r in runs] == [r.id for r in again]
    hpcc = [r for r in runs if r.benchmark == "hpcc"]
    assert len(hpcc) == 3 * 2  # (32,mpi) (32,hybrid) (48,mpi), 2 repeats each
    assert [r.repeat for r in runs] == sorted(r.repeat for r in runs)  # repeat-major
    for r in hpcc:  # the planner's N for each NB, applied to the element count
        assert r.params["n"] == n_for_memory(64 * 2**20, 0.5, r.params["nb"])
        assert r.params["ranks"] * r.params["threads"] == system.topology.cores_total
        assert r.params["p"] * r.params["q"] == r.params["ranks"]
        assert r.env["MY_THREADS"] == str(r.params["threads"])
        if r.params["layout"] == "mpi":
            assert r.params["threads"] == 1 and r.params["bind_to"] == "core"
        else:
            assert r.params["ranks"] == 1 and r.params["bind_to"] == "none"
    zipped = sorted((r.params["a"], r.params["b"]) for r in runs if r.benchmark == "command" and r.repeat == 0)
    assert zipped == [(1, "x"), (2, "y"), (3, "z")]


def test_changing_a_value_changes_only_affected_ids(system):
    runs = expand(*parse_campaign(SPEC, "t.yaml"), system)
    changed = expand(*parse_campaign(SPEC.replace("[1, 2, 3]", "[1, 2, 4]"), "t.yaml"), system)
    assert len({r.id for r in runs} & {r.id for r in changed}) == len(runs) - 2


def test_schema_is_json_schema():
    schema = cli_json("schema")
    assert schema["title"] == "clusterbench campaign"
    assert {"name", "benchmarks"} <= set(schema["required"])
    assert "BenchmarkBlock" in json.dumps(schema)


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "examples").glob("*.yaml")))
def test_examples_plan(example, request):
    env = {}
    if example.startswith("virtual-cluster") or example == "tcp-tuning.yaml":  # for the virtual cluster's nodes
        if os.geteuid() == 0:
            request.getfixturevalue("cluster")  # brought up when none is up (this test runs in the cluster group)
        state = Path("/run/clusterbench-vc/cbvc")
        if not (state / "size").exists():
            pytest.skip("needs the virtual cluster (scripts/virtual-cluster up 3)")
        env["SLURM_CONF"] = str(state / "slurm" / "slurm.conf")
    plan = cli_json("plan", str(ROOT / "examples" / example), "--json", env=env)
    assert plan["runs"] >= 3 and all(not r["done"] for r in plan["plan"])
    assert plan["pending_estimate_s"] < 600  # "a few minutes each" here


def test_plan_table(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(SPEC)
    out = cli("plan", str(path))
    assert out.returncode == 0 and "12 runs" in out.stdout and "pending" in out.stdout


def test_eta_learns_from_measured_durations(system):
    runs = expand(*parse_campaign(SPEC, "t.yaml"), system)
    hpcc = [r for r in runs if r.benchmark == "hpcc"]
    cmd = [r for r in runs if r.benchmark == "command"]
    eta = Eta({r.id: r for r in hpcc + cmd})
    assert eta.seconds() is None  # command runs have no estimate and nothing measured yet
    eta.add(cmd[0], 0.5)
    first = hpcc[0]
    eta.add(first, first.estimate_s / 4)  # it ran 4x faster than estimated
    left = eta.seconds()
    expected = sum(r.estimate_s for r in hpcc[1:]) / 4 + 0.5 * (len(cmd) - 1)
    assert left == pytest.approx(expected)
