"""The placement probe (pinning/probe.py) and the comparison with a prediction (pinning/verify.py).

The probe is run for real around real programs (`sh`, `taskset`, the MPI launchers in
test_pinning_runs.py); the comparison is checked on records the probe wrote and on hand-edited
copies of them, so every verdict (match, mismatch, partial, unobserved) is seen to be reachable.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterbench.pinning.model import Prediction, TaskPlacement
from clusterbench.pinning.verify import PROBE_DIR, compare, read_observations, read_record
from clusterbench.system.sources import from_sysfs

PROBE = Path(__file__).resolve().parents[1] / "src" / "clusterbench" / "pinning" / "probe.py"
CPUS = frozenset(os.sched_getaffinity(0))


def probe(tmp_path: Path, *program: str, env: dict | None = None, prefix: tuple = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-I", "-S", str(PROBE), str(tmp_path / PROBE_DIR), "--",
                           *program], capture_output=True, text=True, timeout=60, env=(dict(os.environ) | (env or {})))


def one_task(cpus=CPUS, threads=()) -> Prediction:
    return Prediction(from_sysfs(), [TaskPlacement(0, 0, frozenset(cpus), True, tuple(threads))], "none")


def test_probe_passes_exit_code_and_output_through(tmp_path):
    out = probe(tmp_path, "sh", "-c", "echo hello; echo oops >&2; exit 7")
    assert (out.returncode, out.stdout, out.stderr) == (7, "hello\n", "oops\n")
    [record] = read_observations(tmp_path)
    assert record.launcher_cpus == CPUS  # a program this short may end before the first sample
    assert "CPU,Core,Socket,Node" in record.node_layout


def test_probe_dies_of_the_programs_signal(tmp_path):
    out = probe(tmp_path, "sh", "-c", "kill -TERM $$")
    assert out.returncode == -signal.SIGTERM


def test_probe_reports_a_missing_program(tmp_path):
    out = probe(tmp_path, "/nonexistent/program")
    assert out.returncode == 127 and "cannot run /nonexistent/program" in out.stderr


def test_probe_forwards_sigterm_and_the_program_never_outlives_it(tmp_path):
    marker = tmp_path / "started"
    proc = subprocess.Popen([sys.executable, "-I", "-S", str(PROBE), str(tmp_path / PROBE_DIR), "--", "sh", "-c",
                             f"trap 'exit 3' TERM; touch {marker}; while :; do sleep 0.05; done"])
    deadline = time.monotonic() + 10
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 3
    # kill -9 of the probe: its program gets SIGKILL from the kernel (PR_SET_PDEATHSIG)
    marker.unlink()
    proc = subprocess.Popen([sys.executable, "-I", "-S", str(PROBE), str(tmp_path / "other"), "--", "sh", "-c",
                             f"touch {marker}; echo $$ > {marker}.pid; exec sleep 60"])
    while not (tmp_path / "started.pid").exists() and time.monotonic() < deadline + 10:
        time.sleep(0.02)
    time.sleep(0.1)
    child = int((tmp_path / "started.pid").read_text())
    proc.kill()
    proc.wait(timeout=10)
    for _ in range(100):
        if not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the program outlived its probe")


def test_threads_of_an_openmp_program_are_seen_with_their_binding(tmp_path):
    if not shutil.which("gcc"):
        pytest.skip("needs gcc to build a two-thread OpenMP program")
    src = tmp_path / "spin.c"
    src.write_text("#include <omp.h>\nint main(void){volatile double x=0;\n#pragma omp parallel\n"
                   "{for(long i=0;i<60000000;i++) x+=i;}\nreturn 0;}\n")
    subprocess.run(["gcc", "-fopenmp", "-O1", "-o", str(tmp_path / "spin"), str(src)], check=True)
    if len(CPUS) < 2:
        pytest.skip("needs 2 CPUs")
    out = probe(tmp_path, str(tmp_path / "spin"),
                env={"OMP_NUM_THREADS": "2", "OMP_PLACES": "threads", "OMP_PROC_BIND": "close"})
    assert out.returncode == 0, out.stderr
    [record] = read_observations(tmp_path)
    masks = sorted(sorted(t.mask) for t in record.threads)
    first, second = sorted(CPUS)[:2]
    assert [[first], [second]] == masks[:2] or masks == [[first], [second]]
    assert record.env["OMP_PROC_BIND"] == "close"
    threads = (frozenset({first}), frozenset({second}))
    assert compare(one_task(CPUS, threads), [record], threads_per_rank=2).verdict == "match"
    wrong = (frozenset({second}), frozenset({second}))
    check = compare(one_task(CPUS, wrong), [record], threads_per_rank=2)
    assert check.verdict == "mismatch" and "thread 0 (the main thread)" in check.problems[0]


def test_a_narrowed_process_is_a_mismatch(tmp_path):
    if len(CPUS) < 2 or not shutil.which("taskset"):
        pytest.skip("needs 2 CPUs and taskset")
    last = max(CPUS)
    out = probe(tmp_path, "sh", "-c", "sleep 0.2", prefix=("taskset", "-c", str(last)))
    assert out.returncode == 0
    check = compare(one_task(), read_observations(tmp_path))
    assert check.verdict == "mismatch"
    assert f"bound to CPUs {last}" in check.problems[0]
    assert compare(one_task({last}), read_observations(tmp_path)).verdict == "match"


def test_verdicts_for_missing_and_foreign_records(tmp_path):
    assert compare(one_task(), []).verdict == "unobserved"
    out = probe(tmp_path, "true")
    assert out.returncode == 0
    [record] = read_observations(tmp_path)
    two = Prediction(from_sysfs(), [TaskPlacement(0, 0, CPUS), TaskPlacement(1, 0, CPUS)], "none")
    record.rank = 0
    check = compare(two, [record])
    assert check.verdict == "partial" and "rank 1: no probe record" in check.problems[0]
    record.rank = 5
    assert "ranks 5 ran but were not predicted" in compare(two, [record]).problems[0]


@pytest.mark.parametrize("content", ["", "{", "[]", '{"host": 1}',
                                     json.dumps({"host": "h", "launcher_cpus": "0-99999999"}),
                                     json.dumps({"host": "h", "launcher_cpus": "0", "threads": [{"tid": "x"}]}),
                                     "x" * 100])
def test_hostile_or_cut_records_are_ignored(tmp_path, content):
    path = tmp_path / "probe-h-1.json"
    path.write_text(content)
    assert read_record(path) is None
