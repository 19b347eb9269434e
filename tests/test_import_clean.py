"""Clean imports (issue 19): typed file-name fields, canonical BLAS and interconnect names, batch-job
wrappers (LSF job reports, Platform MPI -prot, echoed Slurm/PBS variables) and re-import with --tag.

Every case runs on files in the real formats: HPL 2.3 outputs built from this machine's real one (several
grids per file, named like the Raspberry Pi study), the crafted job reports of tests/fixtures/jobreports
(see its README), and the two real LSF reports of ../shared (read from there, skipped without it). The
expected values are read from the files themselves, never typed in twice.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from tests.conftest import SHARED_FIXTURES, cli, cli_json, fixture
from tests.hostile import assert_refused, run_bounded
from tests.imported import stored_runs

from clusterbench.errors import UserInputError
from clusterbench.store import jobreport
from clusterbench.store.filenames import MAX_FIELDS, MAX_PATTERN_CHARS, compile_name_pattern
from clusterbench.store.jobreport import parse_job

HPL_LOG = fixture("outputs/this-machine/hpl-nbsweep-N13440-1x2.log")
JOBS = Path(__file__).resolve().parent / "fixtures" / "jobreports"
LSF_SCD = SHARED_FIXTURES / "outputs" / "lsf-scd"
PI_PATTERN = "HPL.out.{nodes}_node_{n}_{nb}_{grids}.{blas}"
_RESULT_LINE = re.compile(r"^(W\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.e+-]+)\s*$", re.M)


# ---------------------------------------------------------------- HPL 2.3 multi-grid files named as in the Pi study

def hpl_multi_grid(grids: list[tuple[int, int]], nbs: list[int], day: int) -> str:
    """An HPL 2.3 output of this machine's N=13440 NB sweep, run on several P x Q grids (HPL's loop order:
    grids outside, NBs inside). Each result is the measured block of its NB with the grid written in; `day`
    shifts the start/end dates, so files with the same grids and NBs are different files."""
    text = HPL_LOG.read_text()
    first = text.index("================================================================================\nT/V")
    header, rest = text[:first], text[first:]
    blocks = {int(_RESULT_LINE.search(b).group(3)): b for b in re.findall(r"={80}\nT/V.*?PASSED\n", rest, re.S)}
    header = re.sub(r"^NB     :.*$", "NB     :" + "".join(f"{nb:>9}" for nb in nbs) + " ", header, flags=re.M)
    header = re.sub(r"^P      :.*$", "P      :" + "".join(f"{p:>8}" for p, _ in grids) + " ", header, flags=re.M)
    header = re.sub(r"^Q      :.*$", "Q      :" + "".join(f"{q:>8}" for _, q in grids) + " ", header, flags=re.M)
    body = []
    for p, q in grids:
        for nb in nbs:
            grid = f"{p:>6}{q:>6}"
            block = re.sub(r"^(WR11C2R4\s+13440\s+\d+)\s+\d+\s+\d+", rf"\g<1>{grid}", blocks[nb], flags=re.M)
            body.append(block.replace("Sun Nov 22", f"Sun Nov {day:2d}"))
    count = len(grids) * len(nbs)
    footer = (f"================================================================================\n\n"
              f"Finished {count:6d} tests with the following results:\n"
              f"         {count:6d} tests completed and passed residual checks,\n"
              "              0 tests completed and failed residual checks,\n"
              "              0 tests skipped because of illegal input values.\n"
              "--------------------------------------------------------------------------------\n\n"
              "End of Tests.\n"
              "================================================================================\n")
    return header + "".join(body) + footer


PI_FILES = {  # name -> (the grids run, the NBs run)
    "HPL.out.2_node_13440_128_1_4_2_2.blis_serial": ([(1, 4), (2, 2)], [128]),
    "HPL.out.1_node_13440_128_1_2.blis-serial": ([(1, 2)], [128]),
    "HPL.out.2_node_13440_128_1_4_2_2.blis.mtu_9000": ([(1, 4), (2, 2)], [128]),
    "HPL.out.2_node_13440_128_1_4_2_2.openblas_serial": ([(1, 4), (2, 2)], [128]),
    "HPL.out.4_node_13440_192_1_8_2_4.openblas-serial": ([(1, 8), (2, 4), (4, 2)], [192]),  # 4x2: not in the name
    "HPL.out.2_node_13440_64_1_4_2.blis_serial": ([(1, 4), (2, 2)], [64]),  # grids cut short: 3 numbers
}


@pytest.fixture
def pi_folder(tmp_path) -> Path:
    folder = tmp_path / "pi-hpl"
    folder.mkdir()
    for day, (name, (grids, nbs)) in enumerate(PI_FILES.items(), start=1):
        (folder / name).write_text(hpl_multi_grid(grids, nbs, day))
    return folder


def _runs(db) -> list[dict]:
    return [row | {k: json.loads(row[k]) for k in ("params", "tags", "facts")} for row in stored_runs(db)]


def test_pi_study_names_typed_and_canonical(pi_folder, isolated_db):
    out = cli("import", str(pi_folder), "--name-pattern", PI_PATTERN, "--tag", "system=pi4-cluster")
    assert out.returncode == 0, out.stderr
    runs = _runs(isolated_db)
    by_file: dict[str, list[dict]] = {}
    for run in runs:
        by_file.setdefault(run["name"], []).append(run)
    assert set(by_file) == set(PI_FILES)
    for name, file_runs in by_file.items():  # one run per T/V line of the file, with the line's own values
        lines = _RESULT_LINE.findall((pi_folder / name).read_text())
        assert [(r["params"]["nb"], r["params"]["p"], r["params"]["q"]) for r in file_runs] == [
            (int(nb), int(p), int(q)) for _tv, _n, nb, p, q, _t, _g in lines]
        nodes = int(name.split(".")[2].split("_")[0])
        for run in file_runs:
            assert run["params"]["nodes"] == nodes and isinstance(run["params"]["n"], int)
            assert "nodes" in run["facts"]["from_file_name"]  # the keys the name gave; values in params

    grids = {name: runs_[0]["params"]["grids"] for name, runs_ in by_file.items()}
    assert grids["HPL.out.2_node_13440_128_1_4_2_2.blis_serial"] == ["1x4", "2x2"]
    assert grids["HPL.out.1_node_13440_128_1_2.blis-serial"] == ["1x2"]
    assert grids["HPL.out.4_node_13440_192_1_8_2_4.openblas-serial"] == ["1x8", "2x4"]
    # never a number: '1_4_2' is not a list of grids, kept as written with the reason
    odd = by_file["HPL.out.2_node_13440_64_1_4_2.blis_serial"][0]
    assert odd["params"]["grids"] == "1_4_2"
    assert "odd count of numbers (3)" in odd["facts"]["file_name_problems"]["grids"]

    blas = {name: (r[0]["params"]["blas"], r[0]["params"].get("tuning"), r[0]["facts"].get("as_written"))
            for name, r in by_file.items()}
    assert blas["HPL.out.2_node_13440_128_1_4_2_2.blis_serial"] == ("blis-serial", None, {"blas": "blis_serial"})
    assert blas["HPL.out.1_node_13440_128_1_2.blis-serial"] == ("blis-serial", None, None)
    assert blas["HPL.out.2_node_13440_128_1_4_2_2.blis.mtu_9000"] == ("blis", "mtu_9000", {"blas": "blis.mtu_9000"})
    assert blas["HPL.out.2_node_13440_128_1_4_2_2.openblas_serial"] == ("openblas-serial", None,
                                                                        {"blas": "openblas_serial"})
    assert {r["params"]["blas"] for r in runs} == {"blis-serial", "blis", "openblas-serial"}

    # the output's own grid not among those the name lists: a conflict, on that result only
    conflicts = [(r["params"]["p"], r["params"]["q"], r["facts"].get("file_name_conflicts"))
                 for r in by_file["HPL.out.4_node_13440_192_1_8_2_4.openblas-serial"]]
    assert conflicts == [(1, 8, None), (2, 4, None), (4, 2, {"grids": ["1x8", "2x4"]})]
    assert all(r["tags"] == {"system": "pi4-cluster"} for r in runs)

    stats = cli_json("results", "--benchmark", "hpl", "--metric", "hpl_gflops", "--group-by", "blas,tuning",
                     "--stat", "n", "--format", "json")
    assert {(s["blas"], s.get("tuning") or None) for s in stats} == {("blis-serial", None), ("blis", "mtu_9000"),
                                                             ("openblas-serial", None)}


def test_pattern_types_and_defaults():
    pattern = compile_name_pattern("r{run:str}-{grid}-{g2:grid}-{x:float}-{k}-{label}-{net:interconnect}.{lib:blas}")
    got = pattern.read("r007-2x16-4_8-2.5-12-1_000-IB.OpenBLAS-OpenMP")
    assert got.values == {"run": "007", "grid": "2x16", "g2": "4x8", "x": 2.5, "k": 12, "label": "1_000",
                          "net": "infiniband", "lib": "openblas-openmp"}
    assert got.as_written == {"net": "IB", "lib": "OpenBLAS-OpenMP"} and got.problems == {}
    bad = compile_name_pattern("{nodes}-{grid}-{x:float}").read("four-2y16-1e999")
    assert bad.values == {"nodes": "four", "grid": "2y16", "x": "1e999"}
    assert set(bad.problems) == {"nodes", "grid", "x"}
    assert "does not match" in compile_name_pattern("HPL.{n}").read("other").problems["name"]


@pytest.mark.parametrize("pattern, fragment", [
    ("HPL.{n:integer}", "unknown type 'integer'"),
    ("HPL.{n}{nb}", "touch"),
    ("HPL.{n}_{n}", "appears twice"),
    ("HPL.{9n}", "is not a field name"),
    ("HPL.{n", "never closed"),
    ("x" * (MAX_PATTERN_CHARS + 1), f"more than the limit of {MAX_PATTERN_CHARS:,}"),
    ("_".join(f"{{f{i}}}" for i in range(MAX_FIELDS + 1)), f"more than {MAX_FIELDS} fields"),
])
def test_bad_patterns_exit_2_naming_the_field(pattern, fragment, tmp_path):
    (tmp_path / "HPL.out.1").write_text(HPL_LOG.read_text())
    out = run_bounded("import", str(tmp_path), "--name-pattern", pattern)
    assert_refused(out, 2, fragment)
    if "unknown type" in fragment:
        assert "int, float, str, grid, grids, blas, interconnect" in out.text
    with pytest.raises(UserInputError):
        compile_name_pattern(pattern)


def test_hostile_name_against_many_fields_is_matched_quickly(tmp_path, isolated_db):
    """32 fields cut by '_' against a 250-underscore name: a regular expression tries every cut (hours);
    the matcher stays within the CLI's bound."""
    name = "_" * 250
    (tmp_path / name).write_text(HPL_LOG.read_text())
    pattern = "_".join(f"{{f{i}}}" for i in range(MAX_FIELDS - 1)) + "_X{last}"
    out = run_bounded("import", str(tmp_path), "--name-pattern", pattern, timeout_s=60)
    assert_refused(out, 0, "7 result(s) stored")
    facts = _runs(isolated_db)[0]["facts"]
    assert "does not match" in facts["file_name_problems"]["name"] and facts["from_file_name"] == []


# ---------------------------------------------------------------- batch-job wrappers (tests/fixtures/jobreports)

@pytest.fixture
def jobs_db(isolated_db):
    out = cli("import", str(JOBS))
    assert out.returncode == 0, out.stderr
    return isolated_db


def _file_runs(db, name: str) -> list[dict]:
    return [r for r in _runs(db) if r["name"] == name]


def test_lsf_imb_over_ibv_on_two_hosts(jobs_db):
    (run,) = _file_runs(jobs_db, "lsf-imb-pingpong-ibv-2hosts.out")
    assert run["params"]["nodes"] == 2 and run["params"]["interconnect"] == "infiniband"
    assert run["nodes"] == "node[017-018].crafted.example"
    job = run["facts"]["job"]
    assert (job["scheduler"], job["job_id"], job["queue"], job["cluster"], job["host_group"]) == (
        "lsf", "5120001", "parallel", "crafted", "ib-rack2")
    assert job["hosts"] == [["node017.crafted.example", 1], ["node018.crafted.example", 1]]
    assert job["requested_transport"] == "infiniband" and job["inter_node"] == "IBV"
    assert job["protocols"] == [["SHM", "IBV"], ["IBV", "SHM"]] and job["exit_status"] == 0
    assert job["options"]["slots"] == 2 and job["options"]["ptile"] == 1
    assert run["status"] == "ok" and run["reason"] is None


def test_lsf_hpl_on_four_hosts_of_sixteen_slots(jobs_db):
    text = (JOBS / "lsf-hpl23-4hosts.out").read_text()
    runs = _file_runs(jobs_db, "lsf-hpl23-4hosts.out")
    assert len(runs) == len(_RESULT_LINE.findall(text)) == 7
    hosts = re.findall(r"<16\*([\w.]+)>", text)
    for run in runs:
        assert run["params"]["nodes"] == len(hosts) == 4 and run["params"]["interconnect"] == "infiniband"
        assert run["nodes"] == "cn[101-104].crafted.example"
        assert run["facts"]["job"]["hosts"] == [[h, 16] for h in hosts]
        assert run["facts"]["job"]["interconnect_from"].startswith("-prot")
        assert "requested_transport" not in run["facts"]["job"]  # no flag: the -prot line says what was used


def test_lsf_failed_job_keeps_its_results_with_the_failure_named(jobs_db):
    runs = _file_runs(jobs_db, "lsf-hpl-exited.out")
    assert len(runs) == len(_RESULT_LINE.findall((JOBS / "lsf-hpl-exited.out").read_text())) == 2
    for run in runs:
        assert run["status"] == "ok"  # each line PASSED its residual check: the job died after it
        assert "the LSF job exited with code 1" in run["reason"]
        assert run["facts"]["job"]["exit_status"] == 1 and run["facts"]["job"]["state"] == "Exited"
        assert run["params"]["interconnect"] == "tcp" and run["facts"]["job"]["interconnect_from"] == "mpirun -TCP"
        assert run["params"]["nodes"] == 2 and run["nodes"] == "cn[201-202].crafted.example"
    listing = cli_json("results", "--benchmark", "hpl", "--format", "json")
    flags = [r["flags"] for r in listing if r["run_id"] in {run["id"] for run in runs}]
    assert len(flags) == 4 and all(f == ["truncated"] for f in flags)  # hpl_gflops and hpl_time of each


def test_slurm_and_pbs_echoed_variables(jobs_db):
    slurm = _file_runs(jobs_db, "slurm-hpl-env.out")
    assert len(slurm) == 7
    for run in slurm:
        job = run["facts"]["job"]
        assert (job["scheduler"], job["job_id"], job["queue"], job["cluster"]) == (
            "slurm", "884211", "compute", "picluster")
        assert job["hosts"] == [[f"pi0{k}", 4] for k in range(1, 5)] and run["nodes"] == "pi[01-04]"
        assert run["params"]["nodes"] == 4 and run["params"]["interconnect"] == "tcp"
        assert job["interconnect_from"] == "MCA btl tcp,self"
    (pbs,) = _file_runs(jobs_db, "pbs-imb-env.out")
    job = pbs["facts"]["job"]
    assert (job["scheduler"], job["job_id"], job["queue"]) == ("pbs", "31337.pbs01.crafted.example", "workq")
    assert "nodes" not in pbs["params"] and pbs["nodes"] is None  # PBS_NODEFILE's names are not in the output
    assert pbs["params"]["interconnect"] == "infiniband" and job["interconnect_from"] == "I_MPI_FABRICS=shm:ofa"


def test_job_hosts_win_over_the_name_and_feed_the_rpeak_bound(tmp_path, isolated_db):
    target = tmp_path / "HPL.out.2_node_run1.blis"
    shutil.copy(JOBS / "lsf-hpl23-4hosts.out", target)
    out = cli("import", str(target), "--name-pattern", "HPL.out.{nodes}_node_{run}.{blas}", "--rpeak-node", "2")
    assert out.returncode == 0, out.stderr
    runs = _runs(isolated_db)
    gflops = [float(g) for *_, g in _RESULT_LINE.findall(target.read_text())]
    bound = 10 * 2 * 4  # 10 x Rpeak x the 4 hosts of the job report (the name says 2)
    for run, value in zip(runs, gflops, strict=True):
        assert run["params"]["nodes"] == 4 and run["facts"]["file_name_conflicts"] == {"nodes": 2}
        assert run["status"] == ("invalid" if value > bound else "ok")
        if value > bound:
            assert "4 node(s) (hosts in the job report)" in run["reason"]
    assert {r["status"] for r in runs} == {"ok", "invalid"}  # the bound splits this file's results


def test_imb_hosts_line_still_read_without_a_job(tmp_path, isolated_db):
    text = fixture("outputs/this-machine/imb-pingpong-bindcore.txt").read_text()
    (tmp_path / "cloud.out").write_text("#HOSTS=2\n" + text)
    assert cli("import", str(tmp_path)).returncode == 0
    (run,) = _runs(isolated_db)
    assert run["params"]["hosts"] == 2 and "job" not in run["facts"] and run["nodes"] is None


# ---------------------------------------------------------------- the real LSF reports of ../shared

def _real(name: str) -> Path:
    path = LSF_SCD / name
    if not path.exists():
        pytest.skip(f"needs ../shared/fixtures/outputs/lsf-scd/{name} (not redistributable: no licence)")
    return path


def test_real_lsf_imb_report_480257(isolated_db):
    path = _real("480257.out")
    assert cli("import", str(path)).returncode == 0
    (run,) = _runs(isolated_db)
    assert run["params"]["nodes"] == 2 and run["params"]["interconnect"] == "tcp"
    assert run["nodes"] == "cn[078,080].scarf.rl.ac.uk"
    job = run["facts"]["job"]
    assert (job["job_id"], job["queue"], job["cluster"], job["host_group"]) == ("480257", "scarf", "sctsc", "scarf10")
    assert job["hosts"] == [["cn080.scarf.rl.ac.uk", 1], ["cn078.scarf.rl.ac.uk", 1]]
    assert job["requested_transport"] == "tcp" and job["protocols"] == [["SHM", "TCP"], ["TCP", "SHM"]]


def test_real_lsf_hpl_report_4099231(isolated_db):
    path = _real("4099231.out")
    assert cli("import", str(path)).returncode == 0
    (run,) = _runs(isolated_db)
    job = run["facts"]["job"]
    assert job["hosts"] == [["host347.jc.rl.ac.uk", 2], ["host321.jc.rl.ac.uk", 2]]
    assert (job["cluster"], job["queue"], job["host_group"]) == ("lotus", "par-multi", "broadwell256G")
    assert run["params"]["nodes"] == 2 and run["nodes"] == "host[321,347].jc.rl.ac.uk"
    # mpirun forced no transport (no -TCP/-IBV): nothing requested; what was used is what -prot printed
    assert "requested_transport" not in job and "-TCP" not in job["mpirun"]
    assert job["inter_node"] == "TCP" and run["params"]["interconnect"] == "tcp"
    assert job["interconnect_from"] == "-prot 'All Inter-node communication is' line"


# ---------------------------------------------------------------- jobreport on its own: precedence and bounds

def _prot(table: list[str], inter_line: str | None = None, hosts: int = 2) -> str:
    lines = [f"Host {i} -- ip 10.0.0.{i + 1} -- ranks {i}" for i in range(hosts)]
    lines += ["", " host | " + "    ".join(str(i) for i in range(hosts)), "======|" + "=" * 12, *table, ""]
    lines.append(" Prot -  All Intra-node communication is: SHM")
    if inter_line:
        lines.append(f" Prot -  All Inter-node communication is: {inter_line}")
    return "\n".join(lines) + "\n"


def test_prot_table_alone_and_mixed():
    job = parse_job(_prot(["    0 : SHM  IBV", "    1 : IBV  SHM"]))
    assert (job.interconnect, job.interconnect_from) == ("infiniband", "-prot host table")
    assert job.node_list() == "10.0.0.[1-2]"
    mixed = parse_job(_prot(["    0 : SHM  IBV  TCP", "    1 : IBV  SHM  TCP", "    2 : TCP  TCP  SHM"], hosts=3))
    assert mixed.interconnect is None and "several inter-node protocols: IBV, TCP" in mixed.problems[0]


def test_what_the_mpi_used_wins_over_what_was_asked():
    text = "mpirun -prot -TCP ./xhpl\n" + _prot(["    0 : SHM  IBV", "    1 : IBV  SHM"], "IBV")
    job = parse_job(text)
    assert job.interconnect == "infiniband" and job.requested == "tcp"
    assert "asked for tcp" in job.problems[0]


@pytest.mark.parametrize("line, transport", [
    ("mpirun --mca pml ucx -np 4 ./xhpl", "ucx"),
    ("mpirun -mca btl openib,vader,self -np 4 ./xhpl", "infiniband"),
    ("mpirun --mca btl ^openib -np 4 ./xhpl", None),  # an exclusion says nothing of what was used
    ("mpirun -genv I_MPI_FABRICS shm:tcp -n 4 ./xhpl", "tcp"),
    ("mpirun -x OMPI_MCA_pml=ucx -np 4 ./xhpl", "ucx"),
    ("mpirun -ibv -np 4 ./xhpl", "infiniband"),
    ("mpirun -PSM -np 4 ./xhpl", "infiniband"),
    ("mpirun -np 4 ./xhpl", None),
])
def test_transport_requested_by_the_mpirun_line(line, transport):
    job = parse_job(f"+ {line}\nSLURM_JOB_ID=7\nSLURM_JOB_NODELIST=n[1-2]\n")
    assert job.interconnect == transport and job.hosts == [("n1", None), ("n2", None)]


def test_one_host_is_shared_memory_whatever_was_asked():
    job = parse_job("SLURM_JOB_ID=8\nSLURM_JOB_NODELIST=n7\n+ mpirun --mca btl tcp,self -np 2 ./IMB-MPI1\n")
    assert (job.interconnect, job.interconnect_from, job.requested) == ("shm", "one host", "tcp")


def test_open_mpi_error_message_is_no_mpirun_line():
    assert parse_job("mpirun noticed that process rank 1 with PID 0 on node n1 exited on signal 9.\n") is None


def test_host_lists_are_bounded(monkeypatch):
    monkeypatch.setattr(jobreport, "MAX_HOSTS", 3)
    lines = ["Sender: LSF System <lsfadmin@h0>", "Job was executed on host(s) <1*h0>, in queue <q>, as user <u>.",
             *(f"{'':28}<1*h{k}>" for k in range(1, 10))]
    job = parse_job("\n".join(lines) + "\n")
    assert [h for h, _ in job.hosts] == ["h0", "h1", "h2"] and "more than 3 hosts" in job.problems[0]
    huge = parse_job("SLURM_JOB_ID=9\nSLURM_JOB_NODELIST=n[1-1000000000]\n")
    assert huge.hosts == [] and "more than 3" in huge.problems[0]
    long_line = parse_job("SLURM_JOB_ID=10\nSLURM_JOB_NODELIST=" + "n" * 100_000 + "\n")
    assert long_line.hosts == []  # a line longer than any scheduler writes is not read


def test_host_names_that_cannot_be_folded_are_kept_raw(tmp_path, isolated_db):
    text = (JOBS / "lsf-imb-pingpong-ibv-2hosts.out").read_text().replace("node018.crafted.example",
                                                                          "node[18].crafted,example")
    (tmp_path / "odd.out").write_text(text)
    assert cli("import", str(tmp_path)).returncode == 0
    (run,) = _runs(isolated_db)
    assert run["nodes"] is None and run["params"]["nodes"] == 2
    assert run["facts"]["job"]["hosts"][1] == ["node[18].crafted,example", 1]
    assert "node_list_problem" in run["facts"]["job"]


# ---------------------------------------------------------------- re-import with --tag

def test_reimport_with_tag_retags_the_stored_runs(tmp_path, isolated_db):
    folder = tmp_path / "two"
    folder.mkdir()
    shutil.copy(HPL_LOG, folder / HPL_LOG.name)
    shutil.copy(JOBS / "lsf-imb-pingpong-ibv-2hosts.out", folder / "imb.out")
    first = cli_json("import", str(folder), "--json")
    stored = first["stored"]
    assert stored == 8 and first["retagged"] == 0
    again = cli_json("import", str(folder), "--json", "--tag", "study=pi", "--tag", "rack=3")
    assert (again["stored"], again["already_stored"], again["retagged"]) == (0, stored, stored)
    assert sorted(f["retagged"] for f in again["per_file"]) == [1, 7]
    assert all(r["tags"] == {"study": "pi", "rack": 3} for r in _runs(isolated_db))
    same = cli("import", str(folder), "--tag", "study=pi", "--tag", "rack=3")
    assert same.returncode == 0 and f"{stored} already stored (0 retagged)" in " ".join(same.stdout.split())
    bad = cli("import", str(folder), "--tag", "bad key=1")
    assert bad.returncode == 2 and "invalid tag key" in bad.stderr and "Traceback" not in bad.stderr


# ---------------------------------------------------------------- a file is stored once, however many results it holds

def test_many_results_of_a_large_file_are_stored_with_one_copy(tmp_path, isolated_db):
    """2,000 results x a 1.1 MB file is 2.3 GB of copies: refused while each run kept its own copy; the
    store keeps the file once now, so it is imported and the database stays near the file's size."""
    text = HPL_LOG.read_text()
    blocks = re.findall(r"={80}\nT/V.*?PASSED\n", text, re.S)
    start = text.index(blocks[0])
    body = "".join(blocks[k % len(blocks)] for k in range(2000))
    footer = text[text.index("=" * 80 + "\n\nFinished"):].replace("Finished      7", "Finished   2000")
    big = text[:start] + body + footer
    path = tmp_path / "sweep.out"
    path.write_text(big)
    assert 2000 * path.stat().st_size > 2 * 2**30
    out = cli("import", str(path), "-q")
    assert out.returncode == 0, out.stderr
    assert "2000 result(s) stored" in " ".join(out.stdout.split())
    assert isolated_db.stat().st_size < 20 * path.stat().st_size


def test_a_fault_reading_the_job_keeps_the_results(monkeypatch, tmp_path):
    """The wrapper is extra: a bug reading it is recorded on the runs, and the benchmark's results are stored."""
    from clusterbench.store import importer
    from clusterbench.store.db import Store

    def broken(text):
        raise ValueError("a wrapper nobody foresaw")

    monkeypatch.setattr(importer, "parse_job", broken)
    with Store(tmp_path / "x.db") as store:
        report = importer.import_paths(store, [str(JOBS / "lsf-imb-pingpong-ibv-2hosts.out")])
    assert (report.total("stored"), report.skipped) == (1, [])
    (run,) = _runs(tmp_path / "x.db")
    assert run["facts"]["job"]["problems"] == ["the job around the output could not be read (ValueError: a wrapper "
                                               "nobody foresaw)"]
    assert "nodes" not in run["params"] and run["nodes"] is None
