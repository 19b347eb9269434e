"""`system:` settings in campaign files, on this machine: located refusals, MPI parameters swept
as settings, what the runs record, `diff`, and the report's tuning section.

Only MPI settings run here (they are environment variables of the run: nothing on this machine
changes); settings that change a node are applied on the virtual cluster's nodes in
test_system_state_vc.py, and the allow-list itself is tested in test_settings.py.
"""

from __future__ import annotations

import json

import pytest
from tests.conftest import cli, cli_json, query

from clusterbench.system.state import flatten

EAGER = """name: eager
benchmarks:
  - benchmark: pingpong
    params: {ranks: 2, interconnect: tcp, max_log2: 18, iter: 20, rounds: 1}
    repeats: 2
    system:
      mca: {btl_tcp_eager_limit: [32768, 131072]}
"""


@pytest.fixture(scope="module")
def eager_store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("eager")
    spec = folder / "eager.yaml"
    spec.write_text(EAGER)
    db = folder / "results.db"
    out = cli("campaign", "run", str(spec), "--json", env={"CLUSTERBENCH_DB": str(db)})
    assert out.returncode == 0, out.stdout + out.stderr
    return db


def test_an_mpi_setting_is_a_parameter_an_environment_variable_and_read_back(eager_store):
    runs = query(eager_store, "SELECT id, params, env, facts, status FROM runs")
    assert len(runs) == 4 and {r["status"] for r in runs} == {"ok"}
    for r in runs:
        value = json.loads(r["params"])["system.mca.btl_tcp_eager_limit"]
        assert json.loads(r["env"])["OMPI_MCA_btl_tcp_eager_limit"] == value
        (node,) = json.loads(r["facts"])["state"].values()
        read = flatten(node)
        assert read["mpi.openmpi.btl_tcp_eager_limit"] == value, read
        assert read["mpi.openmpi_source.btl_tcp_eager_limit"] == "environment"


def test_diff_names_the_setting_where_it_was_asked_set_and_read(eager_store):
    ids = {}
    for r in query(eager_store, "SELECT id, params FROM runs WHERE repeat = 0"):
        ids[json.loads(r["params"])["system.mca.btl_tcp_eager_limit"]] = r["id"]
    found = cli_json("diff", ids["32768"], ids["131072"], "--json", env={"CLUSTERBENCH_DB": str(eager_store)})
    keys = {(d["section"], d["key"].split(": ", 1)[-1]) for d in found}
    assert {("parameters", "system.mca.btl_tcp_eager_limit"), ("environment", "OMPI_MCA_btl_tcp_eager_limit"),
            ("mpi", "mpi.openmpi.btl_tcp_eager_limit")} <= keys, keys
    assert all(section in ("parameters", "environment", "mpi") for section, _ in keys), keys


def test_compare_says_what_differs_between_its_sides(eager_store, tmp_path):
    out = cli("compare", "param:system.mca.btl_tcp_eager_limit=32768", "param:system.mca.btl_tcp_eager_limit=131072",
              env={"CLUSTERBENCH_DB": str(eager_store), "COLUMNS": "200"})
    if out.returncode == 2 and "param:" in out.stderr:  # selections by parameter come with issue 19
        out = cli("compare", *_run_sets(eager_store), env={"CLUSTERBENCH_DB": str(eager_store), "COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    head = out.stdout.split("Comparison")[0] if "Comparison" in out.stdout else out.stdout
    assert "What differs between the sides" in head and "btl_tcp_eager_limit" in head, out.stdout


def _run_sets(db) -> tuple[str, str]:
    by_value: dict[str, list[str]] = {}
    for r in query(db, "SELECT id, params FROM runs"):
        by_value.setdefault(json.loads(r["params"])["system.mca.btl_tcp_eager_limit"], []).append(r["id"])
    return ",".join(f"run:{i}" for i in by_value["32768"]), ",".join(f"run:{i}" for i in by_value["131072"])


def test_the_report_tabulates_each_configuration_with_its_tcp_counters(eager_store, tmp_path):
    out = cli("report", "eager", "--out", str(tmp_path / "r"), env={"CLUSTERBENCH_DB": str(eager_store)})
    assert out.returncode == 0, out.stderr
    rows = (tmp_path / "r" / "tuning-configurations.csv").read_text().splitlines()
    configs = [line for line in rows[1:] if "pingpong_bandwidth" in line]
    assert len(configs) == 2, rows  # the baseline, and the other value by the setting's short name
    assert sum(c.split(",")[1] == "baseline" for c in configs) == 1, configs
    assert sum(c.split(",")[1] in ("btl_tcp_eager_limit=32768", "btl_tcp_eager_limit=131072") for c in configs) == 1
    assert (tmp_path / "r" / "tuning-pingpong-bandwidth.svg").is_file()
    assert "System settings" in (tmp_path / "r" / "report.html").read_text()


@pytest.mark.parametrize(("block", "where", "says"), [
    ("system: {sysctl: {kernel.panic: 1}}", "benchmarks[0].system.sysctl", "kernel.panic"),
    ("system: {mtu: [1500, 99999999]}", "benchmarks[0].system.mtu", "mtu"),
    ("system: {sysctl: 5}", "benchmarks[0].system.sysctl", "mapping"),
    ("system: {mtu: '1500; reboot'}", "benchmarks[0].system.mtu", "mtu"),
    ("system: {shell: 'rm -rf /'}", "benchmarks[0].system.shell", "shell"),
])
def test_a_setting_off_the_allow_list_or_out_of_range_is_refused_with_its_line(tmp_path, block, where, says):
    spec = tmp_path / "bad.yaml"
    spec.write_text(f"name: bad\nbenchmarks:\n  - benchmark: pingpong\n    {block}\n")
    out = cli("campaign", "run", str(spec))
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"bad.yaml:4: {where}" in out.stderr and says in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_the_plan_shows_the_settings_of_each_run(tmp_path):
    spec = tmp_path / "eager.yaml"
    spec.write_text(EAGER)
    plan = cli_json("plan", str(spec), "--json")
    assert sorted(r["params"]["system.mca.btl_tcp_eager_limit"] for r in plan["plan"]) == [
        "131072", "131072", "32768", "32768"]


def test_settings_on_nodes_that_do_not_answer_stop_before_anything_runs_as_an_environment_problem(tmp_path):
    spec = tmp_path / "gone.yaml"
    spec.write_text("name: gone\ncluster: {launcher: mpirun, hosts: 'cbgone-x[1-2]', preflight: false}\n"
                    "benchmarks:\n  - benchmark: pingpong\n    params: {nodes: 2}\n    system: {mtu: 9000}\n")
    out = cli("campaign", "run", str(spec))
    assert out.returncode == 1, out.stdout + out.stderr  # the machines, not the file: exit code 1
    assert "cbgone-x1" in out.stderr and "unreachable" in out.stderr and "Traceback" not in out.stderr, out.stderr
