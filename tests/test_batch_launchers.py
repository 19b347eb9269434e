"""Batch launchers: Slurm (the real slurmctld of the virtual cluster), LSF and PBS Professional.

LSF and PBS cannot be installed here, so tests/standins holds stand-ins for bsub, bjobs, bkill,
qsub, qstat and qdel (tests/standins/standin.py). They really run the submitted job script, detached
in a session of its own, with hosts of the virtual cluster and the scheduler's environment
(LSB_JOBID, LSB_JOBINDEX, LSB_DJOB_HOSTFILE, LSB_MCPU_HOSTS, LSB_HOSTS; PBS_JOBID, PBS_ARRAY_INDEX,
PBS_NODEFILE, PBS_O_WORKDIR), honour -o/-e/-cwd, arrays and begin times, and print the documented
formats: `Job <123> is submitted to default queue <normal>.` (bsub), `123.server` / `123[].server`
(qsub), bjobs -json ({"COMMAND":"bjobs","JOBS":N,"RECORDS":[{"JOBID":"123[4]","STAT":"RUN",...}]})
and PBS Pro's qstat -f -F json ({"timestamp":...,"pbs_version":...,"pbs_server":...,"Jobs":{...}});
bkill and qdel kill the job's process group. The parsers are also tested on fixed strings,
hostile ones included, and the multi-node tests run real MPI jobs on the virtual cluster.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import cli, interruptible, query

from clusterbench.campaign.spec import parse_campaign
from clusterbench.campaign.where import site_from_section
from clusterbench.errors import EnvironmentProblem, UserInputError
from clusterbench.execution import batch_jobs
from clusterbench.execution.request import PlannedRun
from clusterbench.launch import batch, lsf, pbs, slurm
from clusterbench.launch.hosts import current_allocation, inventory, lsf_allocation, pbs_allocation
from clusterbench.launch.mpirun import MpiLaunch
from clusterbench.launch.site import LsfOptions, PbsOptions, SlurmOptions, SrunOptions, srun_command

STANDINS = Path(__file__).resolve().parent / "standins"
sys.path.insert(0, str(STANDINS))
import standin  # noqa: E402  (the stand-ins' own module, for cleaning up after a test)

# The virtual cluster is brought up by the `cluster` fixture when none is up (as root); decided when the test
# runs, not when the module is collected, so a suite started with no cluster up runs these too.
needs_vc = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (the virtual cluster)")


# ------------------------------------------------------------------------------------------ parsers

BJOBS = """{
  "COMMAND":"bjobs",
  "JOBS":4,
  "RECORDS":[
    {"JOBID":"1234","STAT":"RUN","EXIT_CODE":"","RUN_TIME":"12 second(s)","EXEC_HOST":"4*node1:4*node2"},
    {"JOBID":"1235[1]","STAT":"DONE","EXIT_CODE":"","RUN_TIME":"3 second(s)","EXEC_HOST":"node1:node1"},
    {"JOBID":"1235[2]","STAT":"EXIT","EXIT_CODE":"2","RUN_TIME":"1 second(s)","EXEC_HOST":"node3"},
    {"JOBID":"999","ERROR":"Job <999> is not found"}
  ]
}"""

QSTAT = """{
    "timestamp":1700000000,
    "pbs_version":"19.1.3",
    "pbs_server":"server",
    "Jobs":{
        "123.server":{"job_state":"R","exec_host":"node1/0*2+node2/0*2",
                      "resources_used":{"walltime":"00:00:12","ncpus":4}},
        "124[].server":{"job_state":"B","array":"True"},
        "124[0].server":{"job_state":"X","Exit_status":0,"exec_host":"node1/0*2",
                         "resources_used":{"walltime":"00:01:02"}},
        "124[1].server":{"job_state":"X","Exit_status":-29,"exec_host":"node2/0"},
        "124[2].server":{"job_state":"X","Exit_status":271}
    }
}"""


def test_bjobs_json_is_read_with_array_elements():
    found = lsf.parse_bjobs(BJOBS)
    assert set(found) == {"1234", "1235[1]", "1235[2]"}
    assert found["1234"] == {"stat": "RUN", "exit_code": None, "run_time_s": 12.0, "nodes": "node[1-2]"}
    assert found["1235[2]"]["exit_code"] == 2 and found["1235[1]"]["nodes"] == "node1"
    # an element given as JOBID + JOBINDEX (the jobindex field of -o) is the same element
    assert set(lsf.parse_bjobs('{"RECORDS":[{"JOBID":"77","JOBINDEX":"3","STAT":"PEND"}]}')) == {"77[3]"}


def test_qstat_json_is_read_and_exit_status_mapped(monkeypatch):
    found = pbs.parse_qstat(QSTAT)
    assert found["123.server"] == {"state": "R", "exit_status": None, "walltime_s": 12.0, "nodes": "node[1-2]"}
    assert found["124[0].server"]["walltime_s"] == 62.0
    monkeypatch.setattr(pbs, "_qstat", lambda ids: found)
    assert pbs.active_states(["123.server", "124[0].server"]) == {"123.server": "R"}
    ok, walltime, killed = (pbs.final_state(f"124[{i}].server") for i in range(3))
    assert (ok.state, ok.exit_code, ok.nodes) == ("COMPLETED", 0, "node1")
    assert walltime.state == "TIMEOUT" and (killed.state, killed.signal) == ("FAILED", 15)
    assert pbs.final_state("124[0]").state == "COMPLETED"  # the server suffix may differ
    assert pbs.final_state("9.server").state == "UNKNOWN"


@pytest.mark.parametrize("parse", [lsf.parse_bjobs, pbs.parse_qstat])
@pytest.mark.parametrize("text, message", [
    ("Job <1> is not found", "did not answer JSON"),
    ('{"RECORDS": [', "did not answer JSON"),
    ("[1, 2]", "not an object"),
    ("[" * 100_000 + "]" * 100_000, "did not answer JSON"),
    ("x" * (batch.MAX_ANSWER_BYTES + 1), "more than"),
])
def test_hostile_scheduler_answers_give_clear_errors(parse, text, message):
    with pytest.raises(EnvironmentProblem, match=message):
        parse(text)


def test_huge_and_odd_fields_are_bounded_or_left_out():
    huge = "n" * 2_000_000
    text = json.dumps({"RECORDS": [{"JOBID": "5", "STAT": huge, "RUN_TIME": huge, "EXEC_HOST": ":".join(
        f"node{i}" for i in range(200_000))}, {"JOBID": "$(reboot)", "STAT": "RUN"}, "not a record",
        {"JOBID": {"nested": 1}, "STAT": "RUN"}]})
    found = lsf.parse_bjobs(text)
    assert list(found) == ["5"] and len(found["5"]["stat"]) <= 20 and found["5"]["run_time_s"] is None
    assert len(found["5"]["nodes"]) <= batch.MAX_FIELD_CHARS
    assert lsf.parse_bjobs('{"RECORDS":[]}') == {}
    with pytest.raises(EnvironmentProblem, match="RECORDS"):
        lsf.parse_bjobs('{"COMMAND":"bjobs","JOBS":0}')
    qs = pbs.parse_qstat(json.dumps({"Jobs": {"1.s": {"job_state": huge, "Exit_status": "1e999",
                                                      "resources_used": "no"}, "; rm -rf /": {}}}))
    assert qs == {"1.s": {"state": "nnnn", "exit_status": None, "walltime_s": None, "nodes": None}}


SACCT = """4242|COMPLETED|0:0|00:01:05|65|node[1-2]|1234|00:02:08.500|
4242.batch|COMPLETED|0:0|00:01:05|65|node1|600|00:00:00.100|3512K
4242.extern|COMPLETED|0:0|00:01:05|65|node[1-2]|0|00:00:00|1024K
4242.0|COMPLETED|0:0|00:01:04|64|node[1-2]|634|00:02:08.400|2.5M
"""


def test_sacct_lines_give_the_accounting():
    acc = slurm.parse_sacct(SACCT, "4242")
    assert acc == {"source": "sacct", "state": "COMPLETED", "exit_code": 0, "signal": 0, "elapsed_s": 65.0,
                   "nodes": "node[1-2]", "energy_j": 1234, "total_cpu_s": 128.5, "max_rss_bytes": 3512 * 1024}
    array = ("77_3|CANCELLED by 0|0:15|00:00:03|3|node1|||\n"
             "77_3.batch|CANCELLED|0:15|00:00:03|3|node1||00:00.010|900K\n")
    acc = slurm.parse_sacct(array, "77_3")
    assert (acc["state"], acc["signal"], acc["energy_j"], acc["max_rss_bytes"]) == ("CANCELLED", 15, None, 921600)
    assert acc["total_cpu_s"] == 0.01  # TotalCPU of the steps when the job's own is empty
    odd = slurm.parse_sacct("5|PENDING|||Unknown|None assigned|INVALID|garbage|16?\n", "5")
    assert odd["elapsed_s"] is None and odd["nodes"] is None and odd["energy_j"] is None
    assert odd["total_cpu_s"] is None and odd["max_rss_bytes"] is None
    assert slurm.parse_sacct("", "5") is None and slurm.parse_sacct("x|y\n" * 20000, "5") is None


def test_squeue_lines_with_array_tasks():
    text = "123_4 RUNNING\n123_[5-7%2] PENDING\n124 PENDING\n125_[0,3] PENDING\n126_[0-99999999] PENDING\njunk\n"
    states = slurm.parse_squeue(text)
    assert states == {"123_4": "RUNNING", "123_5": "PENDING", "123_6": "PENDING", "123_7": "PENDING",
                      "124": "PENDING", "125_0": "PENDING", "125_3": "PENDING"}


def test_inventory_from_the_lsf_and_pbs_allocation(tmp_path, monkeypatch):
    hostfile = tmp_path / "lsf_hosts"
    hostfile.write_text("node1\nnode1\nnode2\nnode2\n")
    inv = lsf_allocation({"LSB_DJOB_HOSTFILE": str(hostfile)})
    assert [(h.name, h.slots) for h in inv.hosts] == [("node1", 2), ("node2", 2)]
    inv = lsf_allocation({"LSB_MCPU_HOSTS": "hostA 4 hostB 2"})
    assert [(h.name, h.slots) for h in inv.hosts] == [("hostA", 4), ("hostB", 2)]
    nodefile = tmp_path / "pbs_nodes"
    nodefile.write_text("n2.cluster\nn2.cluster\nn1.cluster\n")
    assert [(h.name, h.slots) for h in pbs_allocation({"PBS_NODEFILE": str(nodefile)}).hosts] == [
        ("n2.cluster", 2), ("n1.cluster", 1)]
    assert current_allocation({"PBS_NODEFILE": str(nodefile)}).source.startswith("the PBS")
    assert current_allocation({"LSB_MCPU_HOSTS": "a 1"}).names == ["a"]
    assert current_allocation({"SLURM_JOB_NODELIST": "c[1-2]", "SLURM_JOB_CPUS_PER_NODE": "4(x2)"}).names == [
        "c1", "c2"]
    assert current_allocation({"HOME": "/root"}) is None
    for env, message in [({"LSB_MCPU_HOSTS": "hostA 4 hostB"}, "not 'host count"),
                         ({"LSB_MCPU_HOSTS": "$(reboot) 1"}, "not a host name"),
                         ({"LSB_DJOB_HOSTFILE": str(tmp_path / "missing")}, "cannot read"),
                         ({"PBS_NODEFILE": str(tmp_path)}, "cannot read")]:
        with pytest.raises(UserInputError, match=message):
            current_allocation(env)
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(17 * 2**20)
    with pytest.raises(UserInputError, match="larger than"):
        pbs_allocation({"PBS_NODEFILE": str(big)})
    for var in ("LSB_DJOB_HOSTFILE", "LSB_MCPU_HOSTS"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(UserInputError, match="not inside an LSF job"):
        inventory("lsf")
    monkeypatch.setenv("PBS_NODEFILE", str(nodefile))
    assert inventory("pbs").names == ["n2.cluster", "n1.cluster"]


def test_srun_applies_the_interconnect_of_the_run():
    tcp = srun_command(MpiLaunch(ranks=4, interconnect="tcp"), ["./probe"], SrunOptions(), 2, "Open MPI")
    assert tcp[:4] == ["env", "OMPI_MCA_pml=ob1", "OMPI_MCA_btl=self,tcp", "srun"]
    ib = srun_command(MpiLaunch(ranks=2, interconnect="ib", net_if="eth1"), ["x"], SrunOptions(), 2, "MPICH")
    assert ib[:ib.index("srun")] == ["env", "UCX_TLS=rc,ud,sm,self", "FI_PROVIDER=verbs", "FI_TCP_IFACE=eth1",
                                     "UCX_NET_DEVICES=eth1"]
    shm = srun_command(MpiLaunch(ranks=2, interconnect="shm", net_if="10.0.0.0/24"), ["x"], SrunOptions(), 1,
                       "Open MPI")
    assert "OMPI_MCA_btl_tcp_if_include=10.0.0.0/24" in shm and "OMPI_MCA_btl=self,vader" in shm
    assert srun_command(MpiLaunch(ranks=2), ["x"], SrunOptions(), 1)[0] == "srun"  # auto: nothing to say


# ------------------------------------------------------------------------------------------ scripts

def _array_request(tmp_path: Path) -> batch.JobRequest:
    odd = tmp_path / "it's a $(touch pwned) dir"
    tasks = [batch.Task(odd / f"r{i}", ["mpirun", "-np", "2", "./x; rm -rf ~"], {"V": "a b'c"}, ["echo before"], [])
             for i in range(5)]
    return batch.JobRequest("cb-point", tasks[0].workdir, [], {}, nodes=2, tasks_per_node=1, cpus_per_task=1,
                            timeout_s=100, array=tasks)


@pytest.mark.parametrize("name, opts, lines", [
    ("slurm", SlurmOptions(), ["#SBATCH --array=0-4", 'case "${SLURM_ARRAY_TASK_ID}" in', "4)"]),
    ("lsf", LsfOptions(queue="normal"), ["#BSUB -J 'cb-point[1-5]'", "#BSUB -n 2", "#BSUB -R 'span[ptile=1]'",
                                         "#BSUB -W 0:03", "#BSUB -x", 'case "${LSB_JOBINDEX}" in', "5)"]),
    ("pbs", PbsOptions(account="proj"), ["#PBS -J 0-4", "#PBS -l select=2:ncpus=1:mpiprocs=1",
                                         "#PBS -l walltime=00:03:00", "#PBS -A proj", 'case "${PBS_ARRAY_INDEX}" in']),
])
def test_array_scripts_dispatch_each_repeat_to_its_directory_quoted(tmp_path, name, opts, lines):
    req = _array_request(tmp_path)
    text = batch_jobs.SCHEDULERS[name].render_script(req, opts)
    for line in lines:
        assert line in text.splitlines(), (line, text)
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    # run the dispatch for element 2 with the command replaced: it lands in its own directory
    for task in req.array:
        task.workdir.mkdir(parents=True)
        task.command = ["sh", "-c", 'echo "$V" > here.txt', "x; rm -rf ~"]
    text = batch_jobs.SCHEDULERS[name].render_script(req, opts)
    index = {"slurm": 2, "lsf": 3, "pbs": 2}[name]
    var = {"slurm": "SLURM_ARRAY_TASK_ID", "lsf": "LSB_JOBINDEX", "pbs": "PBS_ARRAY_INDEX"}[name]
    out = subprocess.run(["bash", "-c", text], env={"PATH": os.environ["PATH"], var: str(index)}, cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert (req.array[2].workdir / "here.txt").read_text() == "a b'c\n"
    assert (req.array[2].workdir / "stdout.txt").exists() and not (tmp_path / "pwned").exists()
    assert not (req.array[1].workdir / "here.txt").exists()


def test_begin_times_and_refused_header_values(tmp_path):
    req = batch.JobRequest("cb-x", tmp_path, ["true"], {}, 1, 1, 1, begin_s=30)
    assert "#SBATCH --begin=now+30" in slurm.render_script(req, SlurmOptions())
    assert "#BSUB -b " in lsf.render_script(req, LsfOptions()) and "#PBS -a " in pbs.render_script(req, PbsOptions())
    assert lsf.begin_time(30, now=time.mktime((2026, 1, 2, 3, 4, 50, 0, 0, -1))) == "2026:01:02:03:06"
    assert pbs.begin_time(30, now=time.mktime((2026, 1, 2, 3, 4, 50, 0, 0, -1))) == "202601020305.20"
    for opts in (SlurmOptions(sbatch_args=["--x\n#SBATCH --y"]), LsfOptions(bsub_args=["-q a\nrm -rf ~"]),
                 PbsOptions(queue="q\nrm")):
        with pytest.raises(UserInputError, match="line break"):
            batch_jobs.SCHEDULERS[{SlurmOptions: "slurm", LsfOptions: "lsf", PbsOptions: "pbs"}[type(opts)]
                                  ].render_script(req, opts)


def test_repeats_are_grouped_per_point_and_spread_makes_single_jobs():
    def run(point, repeat):
        return PlannedRun(f"c-{point}-r{repeat}", "c", "b", "pingpong", {"max_log2": point}, repeat)

    pending = [run(p, r) for r in range(5) for p in (3, 4)]
    groups = batch_jobs.units(pending, arrays=True, max_size=100)
    assert [[r.id for r in g] for g in groups] == [[f"c-{p}-r{r}" for r in range(5)] for p in (3, 4)]
    assert [len(g) for g in batch_jobs.units(pending, arrays=True, max_size=2)] == [2, 2, 1, 2, 2, 1]
    assert [len(g) for g in batch_jobs.units(pending, arrays=False, max_size=100)] == [1] * 10


CLUSTER_YAML = "name: c\ncluster:\n  launcher: LAUNCHER\n  SECTION\nbenchmarks:\n  - benchmark: stream\n"


@pytest.mark.parametrize("launcher, section, where, message", [
    ("lsf", "lsf: {queue: normal, bsub_arg: [-x]}", "c.yaml:4", "unknown key"),
    ("lsf", "lsf: {time: 2h}", "c.yaml:4", "cluster.lsf.time"),
    ("pbs", "pbs: {walltime: soon}", "c.yaml:4", "cluster.pbs.walltime"),
    ("pbs", "pbs: {max_queued: 0}", "c.yaml:4", "cluster.pbs.max_queued"),
    ("sge", "pbs: {}", "c.yaml:3", "cluster.launcher"),
])
def test_lsf_and_pbs_sections_are_validated_with_their_line(launcher, section, where, message):
    with pytest.raises(UserInputError) as err:
        parse_campaign(CLUSTER_YAML.replace("LAUNCHER", launcher).replace("SECTION", section), "c.yaml")
    assert where in str(err.value) and message in str(err.value)


def test_sections_become_site_options():
    spec, _ = parse_campaign(CLUSTER_YAML.replace("LAUNCHER", "pbs").replace(
        "SECTION", "pbs: {queue: workq, account: p1, walltime: '01:00:00', qsub_args: ['-l place=excl'], poll: 5s}"))
    site = site_from_section(spec.cluster)
    assert site.batch() == ("pbs", PbsOptions("workq", "p1", "01:00:00", ["-l place=excl"], 5.0, 100))
    spec, _ = parse_campaign(CLUSTER_YAML.replace("LAUNCHER", "slurm").replace("SECTION", "lsf: {queue: q}"))
    with pytest.raises(UserInputError, match="cluster.lsf is given but cluster.launcher is slurm"):
        site_from_section(spec.cluster)


# ------------------------------------------------------------------------------------------ on the virtual cluster

@pytest.fixture
def standins(shared_db, monkeypatch):
    """The stand-ins first on PATH, their state beside the shared store; every job killed after the test."""
    state = shared_db.parent / "standin-state"
    monkeypatch.setenv("CB_STANDIN_STATE", str(state))
    monkeypatch.setenv("PATH", f"{STANDINS}{os.pathsep}{os.environ['PATH']}")
    yield state
    if state.exists():
        assert standin.kill_everything(state) == 0, "stand-in jobs were left running"


def squeue_ours(prefix: str) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-r", "-o", "%j %i"], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if line.startswith(prefix)]


def standin_active(state: Path) -> int:
    if not (state / "jobs").exists():
        return 0
    return sum(1 for rec in (state / "jobs").glob("*/el-*.json")
               if standin.element_state(rec.parent, int(rec.stem[3:]))["state"] in ("pending", "running"))


def _launcher_record(db, campaign: str, name: str) -> list[dict]:
    rows = query(db, "SELECT id, repeat, status, launcher, workdir FROM runs WHERE campaign = ? ORDER BY id", campaign)
    return [dict(r) | {"job": json.loads(r["launcher"])[f"{name}_job"]} for r in rows]


PARENT = {"slurm": lambda i: i.split("_")[0], "lsf": lambda i: i.split("[")[0], "pbs": lambda i: i.split("[")[0]}
INDEX = {"slurm": lambda i: int(i.split("_")[1]), "lsf": lambda i: int(i.split("[")[1][:-1]) - 1,
         "pbs": lambda i: int(i.split("[")[1].split("]")[0])}


@needs_vc
@pytest.mark.cluster
@pytest.mark.parametrize("name", ["slurm", "lsf", "pbs"])
def test_repeats_go_as_one_array_job_per_point(name, shared_db, standins, tmp_path, cluster):
    if name != "slurm" and not cluster["checkout_visible"]:
        pytest.skip("LSF/PBS jobs get their nodes only at dispatch: a checkout the nodes cannot see is not staged")
    campaign = f"arr-{name}"
    (tmp_path / "c.yaml").write_text(f"""
name: {campaign}
cluster: {{launcher: {name}, interconnect: tcp, {name}: {{poll: 0.3}}}}
benchmarks:
  - benchmark: pingpong
    params: {{nodes: 2, ranks: 2, bind_to: none, iter: 20, rounds: 1}}
    space: {{max_log2: [2, 3]}}
    repeats: 5
""")
    out = cli("campaign", "run", str(tmp_path / "c.yaml"), "--json", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["ok"] == 10
    runs = _launcher_record(shared_db, campaign, name)
    assert len(runs) == 10 and {r["status"] for r in runs} == {"ok"}
    parents: dict[str, list] = {}
    for r in runs:
        assert r["job"]["state"] == "COMPLETED" and r["job"]["nodes"] == "node[1-2]", r
        parents.setdefault(PARENT[name](r["job"]["id"]), []).append((INDEX[name](r["job"]["id"]), r["repeat"]))
        script = (Path(r["workdir"]) / batch_jobs.SCHEDULERS[name].SCRIPT).read_text()
        assert {"slurm": "#SBATCH --array=0-4", "lsf": "[1-5]'", "pbs": "#PBS -J 0-4"}[name] in script
        assert (Path(r["workdir"]) / "stdout.txt").stat().st_size > 0
    assert len(parents) == 2, parents  # one array job per point
    for elements in parents.values():
        assert sorted(elements) == [(i, i) for i in range(5)]  # element i ran repeat i
    if name != "slurm":  # mpirun got the allocation as a hostfile
        assert (Path(runs[0]["workdir"]) / "hostfile").read_text() == "node1 slots=1\nnode2 slots=1\n"


@needs_vc
@pytest.mark.cluster
@pytest.mark.parametrize("name", ["slurm", "lsf", "pbs"])
def test_interrupting_cancels_the_array_jobs_and_a_rerun_resumes(name, shared_db, standins, tmp_path):
    campaign = f"int-{name}-{os.getpid()}"
    spec = tmp_path / "c.yaml"
    delay = shared_db.parent / "delay"  # how long each point sleeps, outside its parameters (and so its run ids)
    (delay.parent / "delay-1").write_text("1")
    (delay.parent / "delay-30").write_text("30")
    spec.write_text(f"""
name: {campaign}
cluster: {{launcher: {name}, {name}: {{poll: 0.3}}}}
benchmarks:
  - benchmark: command
    params:
      command: "sleep $(cat {delay}-{{seconds}}); echo slept {{seconds}}"
      metrics: [{{name: slept, pattern: 'slept (\\d+)', unit: s}}]
    space: {{seconds: [1, 30]}}
    repeats: 3
""")

    def active() -> int:
        return len(squeue_ours(f"cb-{campaign}")) if name == "slurm" else standin_active(standins)

    proc = subprocess.Popen([sys.executable, "-m", "clusterbench", "campaign", "run", str(spec)],
                            env=dict(os.environ, COLUMNS="200"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=interruptible)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (active() < 3 or not _any_done(shared_db, campaign)):
            time.sleep(0.3)
        assert active() >= 3
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, output
    time.sleep(1)
    assert active() == 0, "jobs left in the queue"
    statuses = [r["status"] for r in query(shared_db, "SELECT status FROM runs WHERE campaign = ?", campaign)]
    assert statuses.count("interrupted") >= 3, statuses
    # again, quickly: the interrupted runs are submitted again, the finished ones kept
    (delay.parent / "delay-30").write_text("0.3")
    out = cli("campaign", "run", str(spec), "--json", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    summary = json.loads(out.stdout)
    assert summary["skipped"] == statuses.count("ok") and summary["executed"] == 6 - statuses.count("ok"), summary


def _any_done(db, campaign: str) -> bool:
    return bool(db.exists() and query(db, "SELECT id FROM runs WHERE campaign = ? AND status = 'ok'", campaign))


@needs_vc
@pytest.mark.cluster
@pytest.mark.parametrize("name", ["slurm", "pbs"])
def test_spread_submits_each_round_with_a_begin_time(name, shared_db, standins, tmp_path):
    campaign = f"spread-{name}"
    (tmp_path / "c.yaml").write_text(f"""
name: {campaign}
cluster: {{launcher: {name}, {name}: {{poll: 0.3}}}}
benchmarks:
  - benchmark: command
    params:
      command: "date +%s.%N"
      metrics: [{{name: at, pattern: '^([0-9.]+)', unit: s}}]
    repeats: 2
""")
    before = time.time()
    out = cli("campaign", "run", str(tmp_path / "c.yaml"), "--spread", "16s", "--json", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = query(shared_db, "SELECT r.repeat, r.workdir, m.value FROM runs r JOIN metrics m ON m.run_id = r.id "
                 "WHERE r.campaign = ? AND m.name = 'at' ORDER BY r.repeat", campaign)
    assert [r["repeat"] for r in rows] == [0, 1]
    # The second round begins 8 s after the campaign started (to the second): never before, whenever the
    # scheduler starts the first (a loaded machine's slurmctld once started it 2.1 s late, leaving 5.9 s between)
    assert rows[1]["value"] - before >= 7.0 and rows[1]["value"] > rows[0]["value"], \
        [before] + [r["value"] for r in rows]
    script = (Path(rows[1]["workdir"]) / batch_jobs.SCHEDULERS[name].SCRIPT).read_text()
    assert ("#SBATCH --begin=now+" in script) if name == "slurm" else ("#PBS -a " in script)
    assert "--array" not in script and "#PBS -J" not in script


def _sacct_answers() -> str | None:
    try:
        out = subprocess.run(["sacct", "-n", "-X", "-S", "now-1hour"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"sacct cannot be run: {exc}"
    text = out.stdout + out.stderr
    if out.returncode != 0 or "disabled" in text or "not running" in text.lower():
        return f"sacct gives no answer here ({text.strip()[:80]})"
    return None


@needs_vc
@pytest.mark.cluster
def test_sacct_accounting_is_stored_with_the_run(shared_db, tmp_path):
    why = _sacct_answers()
    if why:
        pytest.skip(f"no Slurm accounting storage: {why}")
    (tmp_path / "c.yaml").write_text("""
name: acct
cluster: {launcher: slurm, interconnect: tcp, slurm: {poll: 0.3}}
benchmarks:
  - benchmark: pingpong
    params: {nodes: 2, ranks: 2, bind_to: none, iter: 20, max_log2: 3}
    repeats: 2
""")
    out = cli("campaign", "run", str(tmp_path / "c.yaml"), "--json", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    for r in _launcher_record(shared_db, "acct", "slurm"):
        acc = r["job"]["accounting"]
        assert acc["source"] == "sacct" and acc["state"] == "COMPLETED" and acc["exit_code"] == 0, acc
        assert acc["elapsed_s"] is not None and acc["nodes"] == "node[1-2]", acc
        assert set(acc) >= {"energy_j", "total_cpu_s", "max_rss_bytes"}
        # the figures stored are sacct's own, asked again now (null where this cluster gathers none)
        now = slurm.sacct_accounting(r["job"]["id"])
        assert {k: acc[k] for k in ("total_cpu_s", "max_rss_bytes", "energy_j")} == {
            k: now[k] for k in ("total_cpu_s", "max_rss_bytes", "energy_j")}, (acc, now)


def test_resume_cancels_the_lsf_array_element_of_a_dead_runner(tmp_path, monkeypatch):
    """The run directory names the element and its scheduler; a resume cancels just that element."""
    (tmp_path / batch_jobs.JOB_RECORD).write_text(json.dumps({"job_id": "77[3]", "scheduler": "lsf", "array": "77"}))
    queue = {"77[3]": "RUN", "77[4]": "PEND"}
    cancelled: list[str] = []
    monkeypatch.setattr(lsf, "active_states", lambda ids: {i: queue[i] for i in ids if i in queue})
    monkeypatch.setattr(lsf, "cancel", lambda ids: (cancelled.extend(ids), [queue.pop(i) for i in ids]))
    assert "LSF job 77[3] was still queued or running and was cancelled" in batch_jobs.settle_job(tmp_path)
    assert cancelled == ["77[3]"] and queue == {"77[4]": "PEND"}
    monkeypatch.setattr(lsf, "active_states", lambda ids: None)  # bjobs did not answer
    assert "could not be checked" in batch_jobs.settle_job(tmp_path)
