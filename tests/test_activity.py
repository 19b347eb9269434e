"""The activity sampler run for real on this machine, its series parsed and summarised, and the report's
timelines drawn from a store built through the real Store API with real sampler output.

What cannot exist here is said where it matters: this VM has no hwmon, thermal zones, cpufreq or Intel
thermal_throttle counters, and it is not a Raspberry Pi. `vcgencmd` is therefore a stand-in: a script
on PATH that prints exactly the documented output format of `vcgencmd get_throttled`
("throttled=0x50005": bits 0-3 happening now, 16-19 the same since boot), so the sampler runs its real
code path (find it on PATH, run it once per sample, parse its answer) and the summary flags the node.

The captured series in tests/fixtures/activity/ came from this sampler on this machine (see its README);
`python -m tests.test_activity capture` writes a new one the same way.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from clusterbench.errors import UserInputError
from clusterbench.system import activity
from clusterbench.system.activity import parse_series, sampler_argv, summarise, summary_line, throttle_reasons, timeline

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "activity"
LOADED = FIXTURES / "vm-loaded.jsonl"
CPUS = sorted(os.sched_getaffinity(0))
BUSY = ("import os, sys, time\nos.sched_setaffinity(0, {int(sys.argv[1])})\nend = time.monotonic() + "
        "float(sys.argv[2])\nwhile time.monotonic() < end:\n    pass\n")


def start(interval: float = 0.25, max_seconds: float = 120, env: dict | None = None,
          stdout=subprocess.PIPE) -> subprocess.Popen:
    return subprocess.Popen(sampler_argv(interval, max_seconds), stdin=subprocess.PIPE, stdout=stdout,
                            stderr=subprocess.PIPE, env=env)


def finish(proc: subprocess.Popen, timeout: float = 10) -> tuple[str, float]:
    """Close the sampler's stdin as the executor does; (its output, seconds until it exited)."""
    t0 = time.monotonic()
    proc.stdin.close()
    proc.stdin = None  # communicate() would flush it
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return (out or b"").decode(), time.monotonic() - t0


def tcp_traffic(nbytes: int) -> int:
    """Send nbytes over a loopback TCP connection (a thread receives); returns what arrived."""
    server = socket.create_server(("127.0.0.1", 0))
    got = [0]

    def receive() -> None:
        conn, _ = server.accept()
        with conn:
            while chunk := conn.recv(1 << 16):
                got[0] += len(chunk)

    thread = threading.Thread(target=receive)
    thread.start()
    with socket.create_connection(server.getsockname()) as client:
        block = b"x" * (1 << 16)
        for _ in range(nbytes // len(block)):
            client.sendall(block)
    thread.join(30)
    server.close()
    return got[0]


def under_load(interval: float, busy_s: float, cpu: int, nbytes: int) -> tuple[str, int, float]:
    """The sampler's output while one CPU runs a busy loop and loopback TCP carries nbytes;
    (output, bytes received, seconds from closing stdin to the sampler's exit)."""
    proc = start(interval)
    first = ready(proc)
    busy = subprocess.Popen([sys.executable, "-c", BUSY, str(cpu), str(busy_s)])
    received = tcp_traffic(nbytes)
    busy.wait(busy_s + 30)
    out, took = finish(proc)
    return first + out, received, took


def ready(proc: subprocess.Popen) -> str:
    """The header and first sample: the load may start (Python takes 0.1-0.5 s to start on this VM)."""
    return proc.stdout.readline().decode() + proc.stdout.readline().decode()


@pytest.fixture(scope="module")
def loaded() -> dict:
    out, received, took = under_load(0.25, 2.0, CPUS[-1], 32 << 20)
    series = parse_series(out, "here")
    return {"out": out, "received": received, "took": took, "series": series, "summary": summarise(series)}


# ---------------------------------------------------------------- the sampler, for real

def test_sampler_sees_user_time_net_rx_and_loopback_bytes(loaded):
    s, series = loaded["summary"], loaded["series"]
    header = json.loads(loaded["out"].splitlines()[0])
    assert header["type"] == "header" and header["cpus"] == os.cpu_count() and header["clk_tck"] > 0
    assert header["sources"]["stat"] and header["sources"]["softirqs"] and header["sources"]["net_dev"]
    assert series.skipped == 0 and series.end == "stdin closed" and len(series.samples) >= 8
    loaded_cpu = s["per_cpu"][str(CPUS[-1])]
    assert loaded_cpu["user"] >= 50, loaded_cpu  # the busy loop ran there for most of the window
    assert s["softirqs"]["NET_RX"]["total"] > 0  # loopback receive runs as NET_RX softirqs
    assert sum(sum(v) for v in timeline(series)["net_rx"].values()) == s["softirqs"]["NET_RX"]["total"]
    assert s["interfaces"]["lo"]["rx_bytes"] >= loaded["received"] >= 32 << 20
    assert s["tcp"]["out_segments"] > 0 and s["context_switches_per_s"] > 0
    assert 99.5 <= sum(s[f"{k}_percent"] for k in activity.SHARES) <= 100.5


def test_stdin_eof_ends_it_within_an_interval_with_a_final_sample(loaded):
    assert loaded["took"] < 0.25 + 1.0  # woken by the end of file, not by its next beat
    last = json.loads(loaded["out"].splitlines()[-1])
    assert last["type"] == "sample" and last["end"] == "stdin closed" and last["samples"] >= 8
    assert last["self_cpu_s"] > 0


def test_a_one_second_sampler_ends_at_once_when_its_pipe_closes():
    proc = start(1.0)
    first = ready(proc)
    time.sleep(1.5)
    out, took = finish(proc)
    assert took < 1.0 + 0.5, took
    series = parse_series(first + out, "here")
    assert len(series.samples) == 3 and series.end == "stdin closed"  # t=0, t=1, and the final one


def test_sigterm_ends_it_with_a_last_sample():
    proc = start(0.5)
    first = ready(proc)
    time.sleep(0.7)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(10)  # stdin stays open (communicate would close it): only the signal can end it
    assert time.monotonic() - t0 < 1.0 and proc.returncode == 0
    assert parse_series(first + proc.stdout.read().decode(), "here").end == "SIGTERM"
    proc.stdin.close()


def test_a_stop_file_ends_it_and_an_empty_stdin_does_not(tmp_path):
    """Under srun in a batch job stdin is /dev/null: with --stop-file it samples until that file exists."""
    stop, lines = tmp_path / "stop", tmp_path / "out.jsonl"
    with lines.open("wb") as out:
        proc = subprocess.Popen([*sampler_argv(0.25, 120), "--stop-file", str(stop)], stdin=subprocess.DEVNULL,
                                stdout=out)
    # Until 4 samples are written (1 s at 0.25 s; far longer while a busy machine starts Python), bounded.
    deadline = time.monotonic() + 60
    while len(parse_series(lines.read_text(errors="replace"), "here").samples) < 4 and proc.poll() is None:
        assert time.monotonic() < deadline, "the sampler wrote fewer than 4 samples in 60 s: " + lines.read_text()
        time.sleep(0.1)
    assert proc.poll() is None, "ended although only the stop file may end it"
    stop.touch()
    proc.wait(timeout=10)
    series = parse_series(lines.read_text(), "here")
    assert series.end == "stop file" and len(series.samples) >= 4


PARENT = """
import subprocess, sys, time
out = open(sys.argv[1], "wb")
proc = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=out)
print(proc.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")  # a zombie has ended
    except OSError:
        return False


def test_kill_9_of_its_parent_ends_it_within_two_intervals(tmp_path):
    out = tmp_path / "activity.jsonl"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(out), *sampler_argv(0.5, 120)],
                              stdout=subprocess.PIPE, text=True)
    pid = int(parent.stdout.readline())
    t0 = time.monotonic()
    while out.read_text().count("\n") < 2 and time.monotonic() - t0 < 10:  # header and first sample
        time.sleep(0.05)
    time.sleep(0.6)
    assert _alive(pid)
    parent.kill()
    parent.wait()
    t0 = time.monotonic()
    while _alive(pid) and time.monotonic() - t0 < 5:
        time.sleep(0.05)
    assert not _alive(pid), "the sampler outlived the parent holding its pipe"
    assert time.monotonic() - t0 < 2 * 0.5
    series = parse_series(out.read_text(), "here")
    assert series.end in ("stdin closed", "parent gone") and len(series.samples) >= 2


def test_max_seconds_is_a_backstop():
    proc = start(0.2, max_seconds=1)
    proc.wait(10)  # stdin stays open: only the backstop can end it
    series = parse_series(proc.stdout.read().decode(), "here")
    proc.stdin.close()
    assert series.end == "max-seconds" and 1.0 <= series.samples[-1].mono - series.samples[0].mono < 1.5


def test_through_a_shell_as_ssh_runs_it():
    """ssh HOST CMD hands CMD to the remote shell: the quoted source must arrive intact."""
    command = shlex.join(sampler_argv(0.2, 60))
    assert len(command) < activity.MAX_ARGV_CHARS
    proc = subprocess.Popen(["sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    first = ready(proc)
    time.sleep(0.5)
    out, _ = finish(proc)
    series = parse_series(first + out, "here")
    assert series.header["cpus"] == os.cpu_count() and len(series.samples) >= 3 and series.skipped == 0


@pytest.mark.parametrize("argv", [["--interval", "0.001"], ["--interval", "nan"], ["--max-seconds", "1e9"],
                                  ["--interval"], ["--bogus", "1"], ["--interval", "$(reboot)"]])
def test_bad_arguments_exit_2(argv):
    cmd = sampler_argv()[:5] + argv
    done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
    assert done.returncode == 2 and "clusterbench sampler:" in done.stderr and not done.stdout


@pytest.mark.parametrize("kwargs", [{"interval_s": 0.01}, {"interval_s": 61}, {"interval_s": float("nan")},
                                    {"interval_s": True}, {"max_seconds": 0}, {"max_seconds": 1e9},
                                    {"python": ""}, {"python": "py\0thon"}])
def test_sampler_argv_refuses_out_of_bounds(kwargs):
    with pytest.raises(UserInputError):
        sampler_argv(**kwargs)


def test_nic_queue_interrupts_of_this_machine():
    """The queues of every network device with a bus device show up under its name: here the
    virtio device behind eth0 names its vectors virtioN-input.0 / -output.0."""
    from clusterbench.system import sampler

    tokens = sampler.nic_tokens()
    with open("/proc/interrupts") as f:
        text = f.read()
    lines = sampler.nic_irq_lines(text, tokens)
    devices = {t for t, name in tokens.items() if t != name}
    expected = [line.split(":")[0].strip() for line in text.splitlines()[1:]
                if any(line.split()[-1].startswith(d + "-") for d in devices)]
    if not expected:
        pytest.skip("no network device with its own interrupt lines on this machine")
    assert lines == expected
    assert not sampler._matches("virtio10-input.0", {"virtio1": "eth0"})  # a prefix is not a match
    assert sampler._matches("mlx5_comp0@pci:0000:3b:00.0", {"0000:3b:00.0": "ens1f0"})
    assert sampler._matches("eth0", {"eth0": "eth0"}) and sampler._matches("eth0-rx-0", {"eth0": "eth0"})


# ---------------------------------------------------------------- the captured series

def test_captured_series_summary_is_sane():
    series = parse_series(LOADED.read_text(), "node1")
    s = summarise(series)
    meta = json.loads((FIXTURES / "vm-loaded.json").read_text())
    assert series.skipped == 0 and series.thinned == 0 and s["samples"] == meta["samples"]
    assert 99.9 <= sum(s[f"{k}_percent"] for k in activity.SHARES) <= 100.1
    for cpu, shares in s["per_cpu"].items():
        assert 99.9 <= sum(shares.values()) <= 100.1, cpu
    assert s["per_cpu"][str(meta["busy_cpu"])]["user"] >= 0.8 * 100 * meta["busy_s"] / s["seconds"]
    assert s["interfaces"]["lo"]["rx_bytes"] >= meta["tcp_bytes"]
    assert s["throttled"] is None and throttle_reasons({"node1": s}) == []
    line = summary_line("node1", s)
    assert line.startswith(f"node1: {s['sy_si_percent']:.0f}% sy+si") and "TCP retransmit" in line
    tl = timeline(series)
    assert len(tl["t"]) == len(series.samples) - 1
    for i in range(len(tl["t"])):
        assert 99.9 <= sum(tl[k][i] for k in activity.SHARES) <= 100.1


def test_thinning_keeps_every_total_exact(monkeypatch, tmp_path):
    """Counters are cumulative: dropping every other sample, as often as needed, changes no total."""
    with (tmp_path / "a.jsonl").open("wb") as sink:  # a file, as the executor gives it: a pipe would fill
        proc = start(0.05, stdout=sink)
        t0 = time.monotonic()
        while (tmp_path / "a.jsonl").read_text().count("\n") < 2 and time.monotonic() - t0 < 10:
            time.sleep(0.05)
        time.sleep(6.0)
        finish(proc)
    out = (tmp_path / "a.jsonl").read_text()
    whole = summarise(parse_series(out, "here"))
    monkeypatch.setattr(activity, "MAX_KEPT_VALUES", 1)  # the cap falls to its floor of 64 samples
    series = parse_series(out, "here")
    assert whole["samples"] > 100 and len(series.samples) <= 65 and series.thinned > 0
    thin = summarise(series)
    for key in ("samples", "seconds", "softirqs", "interfaces", "tcp", "end"):
        assert thin[key] == whole[key], key
    assert thin["context_switches_per_s"] == whole["context_switches_per_s"]
    assert thin["per_cpu"] == whole["per_cpu"]
    assert len(timeline(series)["t"]) == len(series.samples) - 1
    lines = out.splitlines()
    for k in range(60, min(len(lines), 140)):  # wherever the series ends, the last state is kept
        prefix = "\n".join(lines[:k])
        monkeypatch.setattr(activity, "MAX_KEPT_VALUES", 10**9)
        exact = summarise(parse_series(prefix, "here"))
        monkeypatch.setattr(activity, "MAX_KEPT_VALUES", 1)
        thinned = summarise(parse_series(prefix, "here"))
        assert (thinned["seconds"], thinned["softirqs"]) == (exact["seconds"], exact["softirqs"]), k


# ---------------------------------------------------------------- hostile input

def _churning_series(samples: int = 300) -> str:
    """The captured VM series stretched to `samples` one-second samples with steady traffic, in which an
    interface appears at sample 101 and goes after sample 200, and another is re-created at sample 150 (its
    counters restart from zero): what a node shows while a virtual cluster or a container comes and goes."""
    lines = LOADED.read_text().splitlines()
    header, first = lines[0], json.loads(lines[1])
    out = [header]
    for k in range(samples):
        s = json.loads(json.dumps(first))
        s["mono"], s["wall"] = first["mono"] + k, first["wall"] + k
        s["all"] = [v + 50 * k for v in first["all"]]
        s["cpu"] = {c: [v + 25 * k for v in vals] for c, vals in first["cpu"].items()}
        s["net"] = {name: [v + 1000 * k for v in vals] for name, vals in first["net"].items()}
        if k >= 150:  # re-created: its counters start again
            s["net"]["linkvcv1"] = [700 * (k - 150) + 1 for _ in first["net"]["linkvcv1"]]
        if 100 < k <= 200:  # appears, then goes
            s["net"]["cbvcv9"] = [300 * (k - 100) + 7 for _ in range(8)]
        out.append(json.dumps(s))
    return "\n".join(out) + "\n"


def test_thinning_keeps_totals_when_interfaces_appear_go_or_restart(monkeypatch):
    """The samples beside a break are kept: the thinned series counts the traffic of an interface that
    came, went or was re-created exactly as the whole series does (a virtual cluster beside the run)."""
    text = _churning_series()
    whole = summarise(parse_series(text, "here"))
    monkeypatch.setattr(activity, "MAX_KEPT_VALUES", 1)  # the cap falls to its floor of 64 samples
    series = parse_series(text, "here")
    assert len(series.samples) <= 64 + 4 and series.thinned > 200
    thin = summarise(series)
    assert whole["interfaces"]["cbvcv9"]["rx_bytes"] == 300 * 99  # from its first sample to its last
    assert thin["interfaces"] == whole["interfaces"]
    assert (thin["seconds"], thin["samples"]) == (whole["seconds"], whole["samples"])


def test_garbage_lines_are_skipped_counted_and_bounded():
    lines = LOADED.read_text().splitlines()
    header, first, second = lines[0], json.loads(lines[1]), json.loads(lines[2])
    many_cpus = dict(second, cpu={str(i): first["cpu"]["0"] for i in range(5000)})
    bad = [
        "not json", "[" * 100_000, "{" * 50, '{"type": "sample", "mono": 1e999}', "1" * 5000, "null",
        '{"type":"sample","mono":"soon"}', json.dumps(dict(first, type="other")), "x" * (5 * 2**20),
        json.dumps(dict(second, mono=first["mono"] - 5)),  # goes back in time
    ]
    text = "\n".join([header, json.dumps(first), *bad, json.dumps(many_cpus), json.dumps(
        dict(second, mono=second["mono"] + 1, cpu={"0": [-1] * 8, "1": ["a"] * 8, "x" * 100: first["cpu"]["0"]},
             net={"lo": [2**70] * 8, "=cmd|' /C calc'!A0": first["net"]["lo"]}, softirqs={"NET_RX": "many"},
             vcgencmd="0xZZ", temp_c={"t": float("nan")}, freq_khz={"0": 10**12}))])
    series = parse_series(text, "host\nname" * 20)
    assert series.skipped == len(bad) and len(series.samples) == 3
    assert len(series.host) <= activity.MAX_NAME
    assert len(series.samples[1].cpu) == 1024  # of 5000 claimed
    last = series.samples[-1]
    assert last.cpu == {} and "lo" not in last.net and "=cmd|' /C calc'!A0" in last.net
    assert last.softirqs == {} and last.vcgencmd is None and last.temps == {} and last.freqs == {}
    summarise(series)  # no exception, whatever survived
    assert parse_series("", "h").samples == [] and summarise(parse_series("", "h"))["seconds"] == 0.0
    assert summary_line("h", summarise(parse_series("", "h"))).startswith("h: no activity")


def test_too_many_lines_are_not_read(monkeypatch):
    monkeypatch.setattr(activity, "MAX_LINES", 5)
    series = parse_series(LOADED.read_text(), "node1")
    assert series.truncated and len(series.samples) == 4


# ---------------------------------------------------------------- throttling (vcgencmd stand-in)

VCGENCMD = "#!/bin/sh\n# stand-in: the documented output of `vcgencmd get_throttled`\necho 'throttled={code}'\n"
VCGENCMD_CHANGING = ("#!/bin/sh\n# stand-in: 0x0 on the first call, then under-voltage has occurred\n"
                     "if [ -e {state} ]; then echo 'throttled=0x10000'; else : > {state}; echo 'throttled=0x0'; fi\n")


def _with_vcgencmd(tmp_path: Path, script: str) -> activity.Series:
    folder = tmp_path / "bin"
    folder.mkdir(parents=True)
    (folder / "vcgencmd").write_text(script)
    (folder / "vcgencmd").chmod(0o755)
    env = dict(os.environ, PATH=f"{folder}{os.pathsep}{os.environ['PATH']}")
    proc = start(0.1, env=env)
    first = ready(proc)
    time.sleep(0.5)
    out, _ = finish(proc)
    return parse_series(first + out, "pi4")


def test_vcgencmd_throttled_now_flags_the_node(tmp_path):
    series = _with_vcgencmd(tmp_path, VCGENCMD.format(code="0x50005"))
    assert series.header["sources"]["vcgencmd"] is True
    s = summarise(series)
    assert s["throttled"] == "vcgencmd 0x50005: under-voltage now, throttled now"
    assert summary_line("pi4", s).endswith("; throttled (vcgencmd 0x50005: under-voltage now, throttled now)")
    assert throttle_reasons({"pi4": s, "pi3": summarise(parse_series(LOADED.read_text(), "pi3"))}) == [
        "pi4: vcgencmd 0x50005: under-voltage now, throttled now"]


def test_vcgencmd_since_boot_bits_count_only_when_they_appear_during_the_run(tmp_path):
    before = summarise(_with_vcgencmd(tmp_path / "a", VCGENCMD.format(code="0x50000")))
    assert before["throttled"] is None
    assert before["vcgencmd"]["before_run"] == "under-voltage, throttled since boot, before the run"
    during = summarise(_with_vcgencmd(tmp_path / "b", VCGENCMD_CHANGING.format(state=tmp_path / "seen")))
    assert during["throttled"] == "vcgencmd 0x10000: under-voltage during the run"


# ---------------------------------------------------------------- the report

def two_nodes(load: bool) -> dict[str, str]:
    """Two samplers at once, as on two nodes of one run (both here, so both see the same load)."""
    procs = {host: start(0.25) for host in ("node1", "node2")}
    first = {host: ready(proc) for host, proc in procs.items()}
    if load:
        busy = subprocess.Popen([sys.executable, "-c", BUSY, str(CPUS[-1]), "1.5"])
        tcp_traffic(32 << 20)
        busy.wait(60)
    else:
        time.sleep(1.0)
    return {host: first[host] + finish(proc)[0] for host, proc in procs.items()}


def test_report_draws_a_timeline_per_chosen_run(tmp_path):
    from clusterbench.analysis.select import Selection
    from clusterbench.report import build, render
    from clusterbench.report.activity import MAX_TIMELINES
    from clusterbench.report.model import Options
    from clusterbench.store.db import Store
    from clusterbench.store.records import RunRecord

    store = Store(tmp_path / "r.db")
    texts_of = {"lulesh-busy": two_nodes(load=True), "lulesh-quiet": two_nodes(load=False),
                "command-1": {"vm": LOADED.read_text()}}
    summaries_of = {}
    for rid, hosts in texts_of.items():
        workdir = tmp_path / rid
        workdir.mkdir()
        summaries = summaries_of[rid] = {}
        for host, body in hosts.items():
            (workdir / f"activity-{host}.jsonl").write_text(body)
            summaries[host] = summarise(parse_series(body, host))
        store.begin_run(RunRecord(rid, rid.split("-")[0], params={}, workdir=str(workdir), nodes=",".join(hosts)))
        store.finish_run(rid, "ok", True, None, 0, 3.0, [], artifacts=sorted(workdir.iterdir()),
                         facts={"activity": summaries})
    report = build.build(store, Selection(), Options())
    (section,) = [s for s in report.sections if s.slug == "activity"]
    table = section.tables[0]
    assert len(table.rows) == 5 and {r[2] for r in table.rows} == {"node1", "node2", "vm"}
    pictures = section.pictures
    assert 1 <= len(pictures) <= MAX_TIMELINES and len(pictures) == 2  # one per benchmark
    scores = {rid: max(s["sy_si_percent"] for s in summaries_of[rid].values()) for rid in ("lulesh-busy",
                                                                                         "lulesh-quiet")}
    chosen = max(scores, key=lambda rid: (scores[rid], rid))  # the rule the caption states
    (picture,) = [p for p in pictures if p.title.startswith("lulesh run")]
    assert picture.title.startswith(f"lulesh run {chosen}:")
    assert all(p.csv and p.svg.startswith("<svg") for p in pictures)
    rows = picture.csv.splitlines()
    intervals = sum(len(timeline(parse_series(body, h))["t"]) for h, body in texts_of[chosen].items())
    assert rows[0].startswith("run,host,t_s") and len(rows) - 1 == intervals
    files = render.write(report, tmp_path / "out")
    svg = (tmp_path / "out" / f"{picture.slug}.svg").read_text()
    assert "node1: " in svg and "node2: " in svg and "TCP retransmits/s" in svg
    assert "What the nodes did during the runs" in files["html"].read_text()
    store.close()


# ---------------------------------------------------------------- the fixture

def capture() -> None:
    """Write tests/fixtures/activity/vm-loaded.jsonl: 1 s samples while one CPU is busy and loopback TCP
    carries 256 MiB, then quiet for a few seconds."""
    FIXTURES.mkdir(parents=True, exist_ok=True)
    proc = start(1.0, stdout=subprocess.PIPE)
    first = ready(proc)
    time.sleep(1.5)
    busy = subprocess.Popen([sys.executable, "-c", BUSY, str(CPUS[-1]), "4"])
    received = tcp_traffic(256 << 20)
    busy.wait()
    time.sleep(2.0)
    out = first + finish(proc)[0]
    LOADED.write_text(out)
    series = parse_series(out, "vm")
    (FIXTURES / "vm-loaded.json").write_text(json.dumps(
        {"samples": len(series.samples), "busy_cpu": CPUS[-1], "busy_s": 4, "tcp_bytes": received}, indent=1) + "\n")
    print(summary_line("vm", summarise(series)))


if __name__ == "__main__" and sys.argv[1:] == ["capture"]:
    capture()


def test_report_and_summary_line_survive_hostile_facts(tmp_path):
    """Facts come back from a store that anything may have written: wrong types are left out."""
    from clusterbench.analysis.select import Selection
    from clusterbench.report import build
    from clusterbench.report.model import Options
    from clusterbench.store.db import Store
    from clusterbench.store.records import RunRecord

    real = summarise(parse_series(LOADED.read_text(), "vm"))
    odd = {"seconds": 5, "net_rx": "x", "tcp": [1], "sy_si_percent": "9", "throttled": 5, "user_percent": True}
    store = Store(tmp_path / "r.db")
    facts = [{"activity": {"<script>alert(1)</script>": odd, "=cmd|' /C calc'!A0": real, "": real, "n": 3}},
             {"activity": []}, {"activity": {"x" * 300: real}}, {"activity": {"vm": dict(real, sy_si_percent=1e308)}}]
    for i, f in enumerate(facts):
        store.begin_run(RunRecord(f"r{i}", "command"))
        store.finish_run(f"r{i}", "ok", True, None, 0, 1.0, [], facts=f)
    (section,) = [s for s in build.build(store, Selection(), Options()).sections if s.slug == "activity"]
    assert sorted(r[2] for r in section.tables[0].rows) == ["<script>alert(1)</script>", "=cmd|' /C calc'!A0", "vm"]
    assert section.pictures == []  # no series stored for these runs
    assert summary_line("n", odd) == "n: CPU shares unknown"
    store.close()
