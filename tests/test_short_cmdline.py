"""The sampler and the placement probe have short command lines (issue 36): `ps` or `top` on a node shows what
runs, not the sampler's whole source.

Each test starts the real thing and reads its /proc/PID/cmdline while it runs: the sampler of this machine as
the executor starts it (activity.local_sampler_argv), a node's sampler as ssh's remote shell runs it (`bash -c`
with the shlex-joined command, its source written into the pipe first, as execution/observe.py does), a Slurm
job's sampler step (observe.slurm_lines' own lines, with `srun` a shell function that runs the step here), and
a rank's placement probe (placement.wrapped). The samplers' samples must still come and parse, and closing the
pipe (or the stop file) must still end them with a last sample. The bootstrap that reads a node's source from
stdin is also fed what it must refuse: a source cut short, another program of the same length, a length over
its bound; a control run shows it does run a program it is given, so the refusals mean something.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from clusterbench.execution import observe
from clusterbench.execution.placement import PROBE, wrapped
from clusterbench.launch.spec import Launch, Placement
from clusterbench.pinning import probe
from clusterbench.pinning.verify import PROBE_DIR, read_observations
from clusterbench.system import activity
from clusterbench.system.activity import MAX_SOURCE_BYTES, Series, parse_series, summarise

MAX_CMDLINE = 300  # bytes of /proc/PID/cmdline (the old sampler's was its 26 KB source and more)
INTERVAL = 0.2
OLD_LOADER_CHARS = 143  # characters of the probe's loader before issue 36 (its prefix was then 300 here)


def cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def shown(line: bytes) -> str:
    """A command line as `ps -o args` prints it, with its length in bytes."""
    return f"{len(line)} bytes: " + line.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")


def wait_samples(path: Path, proc: subprocess.Popen, count: int, timeout_s: float = 60.0) -> Series:
    """The sampler's output once it holds a header and `count` samples (bounded in time)."""
    deadline = time.monotonic() + timeout_s
    while True:
        series = parse_series(path.read_text(errors="replace"), "here")
        if series.header and len(series.samples) >= count:
            return series
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            pytest.fail(f"the sampler ended (exit {proc.returncode}) after {len(series.samples)} samples: {err}")
        assert time.monotonic() < deadline, f"fewer than {count} samples in {timeout_s:.0f} s: {path.read_text()}"
        time.sleep(0.05)


def close_and_wait(proc: subprocess.Popen) -> float:
    """Close the sampler's pipe as Samplers.stop does; seconds until it exited."""
    t0 = time.monotonic()
    proc.stdin.close()
    proc.wait(timeout=15)
    return time.monotonic() - t0


def ended_by_its_pipe(path: Path, proc: subprocess.Popen, seconds: float) -> Series:
    series = parse_series(path.read_text(), "here")
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else proc.returncode
    assert series.end == "stdin closed" and seconds < 10 * INTERVAL, (series.end, seconds)
    assert series.skipped == 0 and summarise(series)["samples"] >= 3
    return series


def reap(proc: subprocess.Popen, group: bool = False) -> None:
    """End what a failed test left running: the process, and with `group` the session it leads (a
    process group's id is not reused while one of its processes lives)."""
    if group:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:  # the group is gone: nothing left
            pass
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_this_machines_sampler_has_a_short_command_line_and_still_samples_and_stops(tmp_path):
    out = tmp_path / "activity.jsonl"
    with out.open("wb") as sink:
        proc = subprocess.Popen(activity.local_sampler_argv(INTERVAL, 60), stdin=subprocess.PIPE, stdout=sink,
                                stderr=subprocess.PIPE)
    try:
        series = wait_samples(out, proc, 2)
        line = cmdline(proc.pid)
        seconds = close_and_wait(proc)
    finally:
        reap(proc)
    print(f"\nlocal sampler: {shown(line)}")
    assert series.header["pid"] == proc.pid
    assert len(line) < MAX_CMDLINE and b"import sampler" in line, line
    ended_by_its_pipe(out, proc, seconds)


def test_a_nodes_sampler_reads_its_source_from_the_pipe_which_stays_its_lifeline(tmp_path):
    """As over ssh: the remote shell gets the joined command; the source comes first on the same stdin."""
    command = shlex.join(activity.stdin_sampler_argv(INTERVAL, 60))  # python3, as on a node
    assert len(command) < MAX_CMDLINE, command  # also what the ssh client's own command line carries
    out = tmp_path / "activity.jsonl"
    with out.open("wb") as sink:
        proc = subprocess.Popen(["bash", "-c", command], stdin=subprocess.PIPE, stdout=sink, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(activity.sampler_bytes())
        proc.stdin.flush()
        series = wait_samples(out, proc, 2)
        pid = series.header["pid"]  # the sampler itself, whether bash became it or stayed its parent
        line = cmdline(pid)
        seconds = close_and_wait(proc)
    finally:
        reap(proc)
    print(f"\nnode's sampler: {shown(line)}")
    assert len(line) < MAX_CMDLINE and b"clusterbench sampler" in line and b"def " not in line, line
    series = ended_by_its_pipe(out, proc, seconds)
    assert any(key[0] == pid for key in series.procs)  # it still sees itself, by the pid its header names


FAKE_SRUN = r"""
srun() {  # the step, run here: its --output named for this node as srun's %N would name it
  local out=/dev/stdout
  while [ "${1#--}" != "$1" ]; do
    case $1 in --output=*) out=${1#--output=}; out=${out//\%N/$(uname -n)} ;; esac
    shift
  done
  "$@" >"$out"
}
export SLURM_JOB_NUM_NODES=1
"""


def test_a_slurm_jobs_sampler_reads_its_source_from_the_run_directory(tmp_path):
    before, after = observe.slurm_lines(tmp_path, {}, None, interval_s=INTERVAL, max_seconds=60)
    go = tmp_path / "go"
    sampling = [line for line in before if "state-%N.txt" not in line]  # the state read is not this test's
    script = "\n".join([FAKE_SRUN, *sampling, f"until [ -e {shlex.quote(str(go))} ]; do sleep 0.05; done", *after])
    [step] = [line for line in before if "activity-%N.jsonl" in line]
    assert len(step) < 1000 and "def " not in step, step  # the source is in the printf line, not the step's
    job = subprocess.Popen(["bash", "-c", script], stdin=subprocess.DEVNULL, cwd=tmp_path, stderr=subprocess.PIPE,
                           start_new_session=True)  # reap ends its background step too
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob("activity-*.jsonl")):
            if job.poll() is not None:
                pytest.fail(f"the job ended (exit {job.returncode}) before its sampler: {job.stderr.read()}")
            assert time.monotonic() < deadline, "no activity-*.jsonl in 60 s"
            time.sleep(0.05)
        [out] = tmp_path.glob("activity-*.jsonl")
        series = wait_samples(out, job, 2)
        line = cmdline(series.header["pid"])
        go.touch()
        job.wait(timeout=15)
    finally:
        reap(job, group=True)
    print(f"\nSlurm step's sampler: {shown(line)}")
    stop = str(tmp_path / "activity.stop")
    args = line.split(b"\0")
    assert os.path.basename(args[0]).startswith(b"python3") and args[1:4] == [b"-I", b"-S", b"-c"], args[:4]
    assert line.endswith(stop.encode() + b"\0"), line
    assert len(line) < MAX_CMDLINE + len(" --stop-file " + stop), line  # the stop file's path on top
    assert (tmp_path / "activity-sampler.py").read_bytes() == activity.sampler_bytes()
    observed = observe.read_slurm_files(tmp_path)
    [summary] = observed.facts["activity"].values()
    assert summary["end"] == "stop file" and summary["samples"] >= 3, summary


def bootstrap(spec: str, feed: bytes) -> subprocess.CompletedProcess:
    argv = [*activity.stdin_sampler_argv(INTERVAL, 60)[:5], spec, "--interval", "0.2", "--max-seconds", "5"]
    return subprocess.run(argv, input=feed, capture_output=True, timeout=60)


def program(length: int) -> bytes:
    """A program of exactly `length` bytes that prints RAN: what the bootstrap must not run unasked."""
    head = b"print('RAN')\n#"
    return head + b"x" * (length - len(head) - 1) + b"\n"


def test_the_bootstrap_runs_a_program_it_is_given_exactly():
    given = program(100)
    done = bootstrap(f"{len(given)}:{zlib.crc32(given)}", given)
    assert (done.returncode, done.stdout) == (0, b"RAN\n"), done.stderr


@pytest.mark.parametrize("case", ["cut short", "another program", "over the bound", "empty", "negative"])
def test_the_bootstrap_refuses_what_it_was_not_given(case):
    source = activity.sampler_bytes()
    spec = activity.source_spec()
    big = program(MAX_SOURCE_BYTES + 1)
    spec, feed = {"cut short": (spec, source[:-1]),
                  "another program": (spec, program(len(source))),  # the right length, not the right bytes
                  "over the bound": (f"{len(big)}:{zlib.crc32(big)}", big),  # announced as it is: still too long
                  "empty": ("0:0", b""),
                  "negative": (f"-1:{zlib.crc32(big)}", big)}[case]  # read(-1) would read to the end
    done = bootstrap(spec, feed)
    assert done.returncode == 1 and b"clusterbench sampler: bad source" in done.stderr, done
    assert done.stdout == b"", done.stdout  # nothing ran: no RAN, no header


def test_the_source_fits_the_bound_and_the_announcement_names_it():
    source = activity.sampler_bytes()
    length, crc = activity.source_spec().split(":")
    assert 0 < int(length) == len(source) <= MAX_SOURCE_BYTES and int(crc) == zlib.crc32(source)
    assert activity.sampler_source().encode() == source


def test_a_ranks_probe_has_a_short_prefix_and_still_writes_its_record(tmp_path):
    """The program is the probe's child: it prints its parent's command line, as ps would show the probe."""
    launch = wrapped(Launch(program=("sh", "-c", r'tr "\0" "\n" </proc/$PPID/cmdline'), placement=Placement()),
                     tmp_path)
    done = subprocess.run(list(launch.program), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    args = done.stdout.decode().split("\n")
    prefix = args[:args.index("--")]
    assert prefix == [sys.executable, "-I", "-S", "-c", probe.LOADER, str(PROBE), str(tmp_path / PROBE_DIR)]
    length = len(" ".join(prefix))
    fixed = length - len(sys.executable) - len(str(PROBE)) - len(str(tmp_path / PROBE_DIR))
    print(f"\nprobe's prefix: {length} characters, {fixed} of them besides its three paths")
    assert len(probe.LOADER) <= OLD_LOADER_CHARS - 30 and length < MAX_CMDLINE, prefix
    [record] = read_observations(tmp_path)
    assert record.pid and record.launcher_pid == os.getpid()
