"""The activity sampler: what one node did while a run ran, as JSON lines on stdout, once a second.

The executor starts it on every node of a run, beside the benchmark: locally as clusterbench's own
Python importing this file (`-I -S -c "...; import sampler; ..." ARGS`, from its cached bytecode),
remotely as `ssh HOST python3 -I -S -c BOOTSTRAP LENGTH:CRC ARGS`, with a pipe as its stdin and its
stdout written to RUN/activity-HOST.jsonl. Nothing has to be installed or shared on a node: the
executor writes this file's bytes into the pipe first, the bootstrap (system/activity.py) reads
exactly LENGTH of them and runs them only if their CRC-32 matches, and the pipe then stays the
lifeline below; the output travels back on the same connection. So the command line `ps` shows on
a node is a few hundred bytes, not this file (which must stay under 64 KiB: it fits a pipe).

It ends, after one last sample, when
- its stdin reaches end of file: the executor closes the pipe at the end of the run; when
  clusterbench dies, even by kill -9, the kernel closes the pipe; over ssh, sshd closes it when
  the connection goes;
- it gets SIGTERM, SIGHUP or SIGINT;
- its parent changes (the parent died and the process was re-parented), or stdout is gone;
- `--max-seconds` have passed (a backstop, so nothing can keep it alive for ever).
A stdin that is /dev/null or a file therefore ends it at once (but with --stop-file, as in a batch
job, stdin is not watched): it is made to watch a pipe. Its
stdout should be a file (as the executor gives it) or a pipe that is read as it goes: a pipe
nobody reads fills after 64 KiB, about 40 samples here, and the sampler waits on it.

Line 1 is a header (host, CPU count, clock ticks, interval, start time, the readable sources, the
column order of every counter). Each further line is a sample of raw *cumulative* counters, so a
lost or thinned line loses resolution, never a total; the parser (clusterbench.system.activity)
takes the differences:
- /proc/stat: per CPU and node-wide user nice system idle iowait irq softirq steal; ctxt,
  procs_running, procs_blocked;
- /proc/softirqs: per type (NET_RX, NET_TX, TIMER, SCHED, ...) one count per CPU column;
- /proc/interrupts: the lines of network devices' queues (eth0-rx-0, virtio2-input.0,
  mlx5_comp3@pci:0000:3b:00.0, ...), as {CPU: count} with the zero counts left out;
- /proc/net/dev per interface: rx bytes packets errs drop, tx bytes packets errs drop;
- /proc/net/snmp Tcp and a chosen set of /proc/net/netstat TcpExt counters (retransmissions,
  timeouts, recoveries, drops);
- temperatures (hwmon temp*_input, thermal_zone*/temp, in degrees C), current frequencies
  (cpufreq scaling_cur_freq, kHz), Intel thermal_throttle event counts, and on a Raspberry Pi the
  bits of `vcgencmd get_throttled` (as printed: "throttled=0x50005").
- the process table (/proc/PID/stat of every process but kernel threads: parent, name, CPU ticks, the
  CPU it last ran on, start time): whole in the header, then in the first PROCS_EARLY samples, every
  PROCS_EVERY-th and the last, only the processes whose ticks changed. It tells which processes
  took the run's CPUs (system/disturbance.py); the header also names the process table (boot id and
  PID namespace), so a run's processes seen from another node of the same machine are recognised.
The last sample says why the sampler ended and how much CPU time it used itself.

Cheap by construction: each file is read once per sample, the files to read are found once at
the start, nothing is written but one line per sample. Every count is bounded (CPUs, interfaces,
interrupt lines, sensors, bytes read per file). Standard library only, no clusterbench import,
and Python 3.8 syntax: it runs with whatever python3 the node has.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import sys
import time

FORMAT = 1
STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
NET_FIELDS = ("rx_bytes", "rx_packets", "rx_errors", "rx_drops", "tx_bytes", "tx_packets", "tx_errors", "tx_drops")
NET_COLUMNS = (0, 1, 2, 3, 8, 9, 10, 11)  # of the 16 numbers /proc/net/dev gives per interface
TCPEXT_KEYS = ("TCPTimeouts", "TCPLostRetransmit", "TCPSackRecovery", "TCPRenoRecovery", "TCPFastRetrans",
               "TCPSlowStartRetrans", "TCPSynRetrans", "TCPRetransFail", "TCPLossProbes", "TCPSpuriousRTOs",
               "TCPSackFailures", "TCPBacklogDrop", "TCPRcvQDrop", "TCPOFODrop", "ListenDrops", "ListenOverflows")
TCP_SETTINGS = ("RtoAlgorithm", "RtoMin", "RtoMax", "MaxConn")  # in the Tcp line, but constants, not counters
TRIP_TYPES = ("passive", "hot", "critical")  # trip points where the kernel throttles or stops; not fans
INTERVAL_RANGE = (0.05, 60.0)
MAX_SECONDS_RANGE = (1.0, 7 * 86400.0)
MAX_CPUS = 1024
MAX_IFACES = 64
MAX_IRQ_LINES = 256
MAX_SOFTIRQ_TYPES = 16
MAX_TCP_KEYS = 32
MAX_SENSORS = 64
MAX_READ = 8 * 1024 * 1024  # bytes read of one file (/proc/interrupts of a very large node)
MAX_NAME = 64  # characters of an interface, sensor or interrupt name
VCGENCMD_TIMEOUT_S = 2.0
MAX_PROCS = 8192  # processes read per snapshot of the process table
PROCS_EARLY = 5  # samples that all carry a snapshot (a short run is seen more than at its ends)
PROCS_EVERY = 5  # then one sample in this many (about 0.03 ms per process: 3 ms for 100 here)
PF_KTHREAD = 0x00200000  # kernel threads (kworker, ksoftirqd) serve the run as much as anyone
_THROTTLED = re.compile(r"throttled=(0x[0-9a-fA-F]{1,8})")


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_READ).decode("ascii", "replace")
    except OSError:
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _column_cpus(first_line: str) -> list[int]:
    """'    CPU0  CPU1  CPU3' -> [0, 1, 3]: the column order of /proc/softirqs and /proc/interrupts."""
    return [int(t[3:]) for t in first_line.split()[:MAX_CPUS] if t.startswith("CPU") and t[3:].isdigit()]


# ---------------------------------------------------------------- what is read, found once

def nic_tokens() -> dict[str, str]:
    """{token: interface}: the names by which a network device's queues appear in /proc/interrupts.

    Drivers name their vectors after the interface (eth0-rx-0, enp1s0f0-TxRx-3), after the bus
    device (virtio2-input.0 for the virtio device behind eth0), or after the PCI address
    (mlx5_comp0@pci:0000:3b:00.0). lo and virtual devices have no device of their own.
    """
    tokens = {}
    for name in _listdir("/sys/class/net")[:MAX_IFACES]:
        if name == "lo":
            continue
        tokens[name] = name
        device = os.path.realpath(f"/sys/class/net/{name}/device")
        if os.path.exists(device) and "/virtual/" not in device:
            tokens[os.path.basename(device)] = name
    return tokens


def _matches(action: str, tokens: dict[str, str]) -> bool:
    for token in tokens:
        if action == token or action.startswith(token) and action[len(token)] in "-_.@:":
            return True
        if ":" in token and action.endswith("@pci:" + token):  # mlx5_comp0@pci:0000:3b:00.0
            return True
    return False


def nic_irq_lines(text: str | None, tokens: dict[str, str]) -> list[str]:
    """The IRQ numbers (first column) whose action names belong to a network device."""
    found = []
    for line in (text or "").splitlines()[1:]:
        head, _, rest = line.partition(":")
        if not head.strip().isdigit():
            continue
        if any(_matches(a, tokens) for a in rest.replace(",", " ").split()[-4:]):
            found.append(head.strip())
            if len(found) >= MAX_IRQ_LINES:
                break
    return found


def _hwmon_sensors() -> tuple[list[tuple[str, str]], dict[str, float]]:
    """([(name, temp*_input path)], {name: crit C}) of every hwmon temperature sensor."""
    sensors, trips = [], {}
    for hw in _listdir("/sys/class/hwmon"):
        base = f"/sys/class/hwmon/{hw}"
        chip = (_read(base + "/name") or hw).strip()[:MAX_NAME]
        for entry in _listdir(base):
            if not (entry.startswith("temp") and entry.endswith("_input")):
                continue
            stem = entry[:-len("_input")]
            label = (_read(f"{base}/{stem}_label") or "").strip()[:MAX_NAME]
            name = f"{chip}/{stem}" + (f" ({label})" if label else "")
            sensors.append((name, f"{base}/{entry}"))
            crit = _int(_read(f"{base}/{stem}_crit"))
            if crit:
                trips[name] = crit / 1000.0
            if len(sensors) >= MAX_SENSORS:
                return sensors, trips
    return sensors, trips


def _thermal_zones() -> tuple[list[tuple[str, str]], dict[str, float]]:
    """([(name, temp path)], {name: lowest passive/hot/critical trip C}) of the thermal zones."""
    zones, trips = [], {}
    for zone in _listdir("/sys/class/thermal"):
        if not zone.startswith("thermal_zone"):
            continue
        base = f"/sys/class/thermal/{zone}"
        name = f"{zone} ({(_read(base + '/type') or '?').strip()[:MAX_NAME]})"
        zones.append((name, base + "/temp"))
        for i in range(32):
            kind = _read(f"{base}/trip_point_{i}_type")
            if kind is None:
                break
            temp = _int(_read(f"{base}/trip_point_{i}_temp"))
            if kind.strip() in TRIP_TYPES and temp and temp > 0:
                trips[name] = min(trips.get(name, 1e9), temp / 1000.0)
        if len(zones) >= MAX_SENSORS:
            break
    return zones, trips


def _cpus() -> list[int]:
    cpus = []
    for part in (_read("/sys/devices/system/cpu/online") or "").strip().split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit():
            cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus[:MAX_CPUS] or list(range(min(os.cpu_count() or 1, MAX_CPUS)))


def _throttle_paths(cpus: list[int]) -> tuple[list[str], list[str]]:
    """Intel's per-core and per-package thermal event counters, read from one CPU of each core and
    package (its siblings show the same count)."""
    cores, packages, seen_core, seen_pkg = [], [], set(), set()
    for cpu in cpus:
        base = f"/sys/devices/system/cpu/cpu{cpu}"
        if not os.path.exists(base + "/thermal_throttle/core_throttle_count"):
            continue
        core = (_read(base + "/topology/core_cpus_list") or _read(base + "/topology/thread_siblings_list")
                or str(cpu)).strip()
        pkg = (_read(base + "/topology/physical_package_id") or "0").strip()
        if core not in seen_core:
            seen_core.add(core)
            cores.append(base + "/thermal_throttle/core_throttle_count")
        if pkg not in seen_pkg and os.path.exists(base + "/thermal_throttle/package_throttle_count"):
            seen_pkg.add(pkg)
            packages.append(base + "/thermal_throttle/package_throttle_count")
    return cores, packages


def _which(program: str) -> str | None:
    for folder in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep):
        path = os.path.join(folder or ".", program)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


class Sources:
    """Everything the samples read, found once: the sample loop only opens known paths."""

    def __init__(self) -> None:
        self.cpus = _cpus()
        self.tokens = nic_tokens()
        self.irqs = set(nic_irq_lines(_read("/proc/interrupts"), self.tokens))
        hw, hw_trips = _hwmon_sensors()
        zones, zone_trips = _thermal_zones()
        self.sensors = (hw + zones)[:MAX_SENSORS]
        self.trips = {**hw_trips, **zone_trips}
        self.freqs = [(cpu, f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq") for cpu in self.cpus]
        self.freqs = [(cpu, path) for cpu, path in self.freqs if os.path.exists(path)]
        self.core_throttle, self.package_throttle = _throttle_paths(self.cpus)
        self.vcgencmd = _which("vcgencmd")
        softirqs = _read("/proc/softirqs") or ""
        self.softirq_cpus = _column_cpus(softirqs.split("\n", 1)[0])
        interrupts = _read("/proc/interrupts") or ""
        self.irq_cpus = _column_cpus(interrupts.split("\n", 1)[0])

    def header(self, interval: float, max_seconds: float) -> dict:
        readable = {name: os.access(path, os.R_OK) for name, path in (
            ("stat", "/proc/stat"), ("softirqs", "/proc/softirqs"), ("interrupts", "/proc/interrupts"),
            ("net_dev", "/proc/net/dev"), ("snmp", "/proc/net/snmp"), ("netstat", "/proc/net/netstat"))}
        readable.update(nic_irq_lines=len(self.irqs), sensors=len(self.sensors), cpufreq=len(self.freqs),
                        thermal_throttle=len(self.core_throttle) + len(self.package_throttle),
                        vcgencmd=self.vcgencmd is not None)
        return {"type": "header", "format": FORMAT, "host": os.uname().nodename[:MAX_NAME],
                "cpus": len(self.cpus), "online": self.cpus, "clk_tck": os.sysconf("SC_CLK_TCK"),
                "interval_s": interval, "max_seconds": max_seconds, "start_wall": round(time.time(), 3),
                "start_mono": round(time.monotonic(), 3), "pid": os.getpid(), "python": sys.version.split()[0],
                "sources": readable, "stat_fields": STAT_FIELDS, "net_fields": NET_FIELDS,
                "softirq_cpus": self.softirq_cpus, "irq_cpus": self.irq_cpus,
                "nics": sorted(set(self.tokens.values())), "trips_c": self.trips,
                "startup_cpu_s": _own_cpu(), "ppid": os.getppid(), **process_table_id()}


# ---------------------------------------------------------------- one sample

def read_stat(text: str | None, sample: dict) -> None:
    per_cpu = {}
    for line in (text or "").splitlines():
        if line.startswith("cpu"):
            fields = line.split()
            values = [int(v) for v in fields[1:1 + len(STAT_FIELDS)]]
            if fields[0] == "cpu":
                sample["all"] = values
            elif fields[0][3:].isdigit() and len(per_cpu) < MAX_CPUS:
                per_cpu[fields[0][3:]] = values
        elif line.startswith(("ctxt ", "procs_running ", "procs_blocked ")):
            key, _, value = line.partition(" ")
            sample[key] = int(value)
    sample["cpu"] = per_cpu


def read_softirqs(text: str | None) -> dict[str, list[int]]:
    out = {}
    for line in (text or "").splitlines()[1:MAX_SOFTIRQ_TYPES + 1]:
        name, _, counts = line.partition(":")
        out[name.strip()[:MAX_NAME]] = [int(v) for v in counts.split()[:MAX_CPUS]]
    return out


def read_nic_irqs(text: str | None, irqs: set[str], columns: list[int]) -> dict[str, dict[str, int]]:
    """{'38 virtio2-input.0': {'0': 77168}}: counts per CPU of the network queues' IRQ lines."""
    out = {}
    for line in (text or "").splitlines()[1:]:
        head, _, rest = line.partition(":")
        if head.strip() not in irqs:
            continue
        fields = rest.split()
        counts = {str(columns[i]): int(v) for i, v in enumerate(fields[:len(columns)]) if v.isdigit() and v != "0"}
        name = fields[-1][:MAX_NAME] if len(fields) > len(columns) else "?"
        out[f"{head.strip()} {name}"] = counts
    return out


def read_net_dev(text: str | None) -> dict[str, list[int]]:
    out = {}
    for line in (text or "").splitlines()[2:]:
        name, _, numbers = line.partition(":")
        values = numbers.split()
        if len(values) >= 16 and len(out) < MAX_IFACES:
            out[name.strip()[:MAX_NAME]] = [int(values[i]) for i in NET_COLUMNS]
    return out


def read_proto(text: str | None, prefix: str, keys: tuple[str, ...] | None) -> dict[str, int]:
    """The named counters of one protocol in /proc/net/snmp or /proc/net/netstat (a line of names,
    then a line of values, both starting with `prefix`); all but TCP_SETTINGS when keys is None."""
    lines = [line.split() for line in (text or "").splitlines() if line.startswith(prefix)]
    if len(lines) < 2:
        return {}
    names, values = lines[0][1:], lines[1][1:]
    out = {}
    for name, value in zip(names, values):  # noqa: B905 (strict= needs Python 3.10; nodes may be older)
        if (name in keys if keys is not None else name not in TCP_SETTINGS) and len(out) < MAX_TCP_KEYS:
            out[name[:MAX_NAME]] = int(value)
    return out


def read_vcgencmd(path: str) -> str | None:
    """'0x50005' from `vcgencmd get_throttled` (throttled=0x50005), None if it failed."""
    import subprocess  # only on a node that has vcgencmd: a Raspberry Pi

    try:
        out = subprocess.run([path, "get_throttled"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             stdin=subprocess.DEVNULL, timeout=VCGENCMD_TIMEOUT_S).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = _THROTTLED.search(out[:256].decode("ascii", "replace"))
    return match.group(1).lower() if match else None


def take(sources: Sources) -> dict:
    """One sample: every source read once."""
    sample = {"type": "sample", "mono": round(time.monotonic(), 3), "wall": round(time.time(), 3)}
    try:  # the kernel's formats are stable; a surprise costs one sample's field, not the sampler
        read_stat(_read("/proc/stat"), sample)
        sample["softirqs"] = read_softirqs(_read("/proc/softirqs"))
        if sources.irqs:
            sample["nic_irqs"] = read_nic_irqs(_read("/proc/interrupts"), sources.irqs, sources.irq_cpus)
        sample["net"] = read_net_dev(_read("/proc/net/dev"))
        sample["tcp"] = read_proto(_read("/proc/net/snmp"), "Tcp:", None)
        sample["tcpext"] = read_proto(_read("/proc/net/netstat"), "TcpExt:", TCPEXT_KEYS)
    except (ValueError, IndexError) as exc:
        sample["error"] = str(exc)[:200]
    if sources.sensors:
        temps = {}
        for name, path in sources.sensors:
            value = _int(_read(path))
            if value is not None:
                temps[name] = value / 1000.0
        sample["temp_c"] = temps
    if sources.freqs:
        freqs = {}
        for cpu, path in sources.freqs:
            value = _int(_read(path))
            if value is not None:
                freqs[str(cpu)] = value
        sample["freq_khz"] = freqs
    if sources.core_throttle:
        sample["thermal_throttle"] = {
            "core": sum(_int(_read(p)) or 0 for p in sources.core_throttle),
            "package": sum(_int(_read(p)) or 0 for p in sources.package_throttle)}
    if sources.vcgencmd:
        sample["vcgencmd"] = read_vcgencmd(sources.vcgencmd)
    return sample


def read_procs() -> dict[int, list]:
    """{pid: [parent pid, name, CPU ticks (user + system), last CPU, start ticks]} of every process
    but kernel threads, at most MAX_PROCS; a process that goes while it is read is left out."""
    out: dict[int, list] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/" + name + "/stat", "rb") as f:
                data = f.read(4096)
            head, _, rest = data.rpartition(b")")
            fields = rest.split()
            if int(fields[6]) & PF_KTHREAD:
                continue
            comm = head.partition(b"(")[2].decode("ascii", "replace")[:16]
            out[int(name)] = [int(fields[1]), comm, int(fields[11]) + int(fields[12]), int(fields[36]),
                              int(fields[19])]
        except (OSError, ValueError, IndexError):
            continue
        if len(out) >= MAX_PROCS:
            break
    return out


class ProcessTable:
    """The snapshots of the process table: whole once, then only what changed (a process is new, or
    its ticks moved), so an idle node's hundreds of processes cost a line once."""

    def __init__(self) -> None:
        self.last: dict[int, list] = {}

    def whole(self) -> list[list]:
        self.last = read_procs()
        return [[pid, *row] for pid, row in self.last.items()]

    def changed(self) -> list[list]:
        now = read_procs()
        out = [[pid, *row] for pid, row in now.items()
               if (old := self.last.get(pid)) is None or old[2] != row[2] or old[4] != row[4]]
        self.last = now
        return out


def process_table_id() -> dict:
    """What names this node's process table: the boot and the PID namespace (nodes that are
    namespaces of one machine share it)."""
    try:
        pid_ns = os.readlink("/proc/self/ns/pid")[:64]
    except OSError:
        pid_ns = ""
    try:  # a small read: sysctl files refuse one of MAX_READ bytes (ENOMEM)
        with open("/proc/sys/kernel/random/boot_id", "rb") as f:
            boot_id = f.read(64).decode("ascii", "replace").strip()
    except OSError:
        boot_id = ""
    return {"boot_id": boot_id, "pid_ns": pid_ns}


# ---------------------------------------------------------------- the loop

def _own_cpu() -> float:
    """CPU seconds used so far, to the microsecond (os.times alone counts in 10 ms ticks), with vcgencmd's."""
    t = os.times()
    return round(time.process_time() + t.children_user + t.children_system, 6)


def _emit(record: dict) -> None:
    sys.stdout.write(json.dumps(record, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def parse_args(argv: list[str]) -> tuple[float, float, str | None]:
    """(interval, max seconds, stop file) from --interval S --max-seconds S [--stop-file PATH];
    exits 2 on anything else. With --stop-file, stdin is not watched (in a batch job it is the file
    the source was read from, or /dev/null) and the sampler ends once the stop file exists."""
    values: dict[str, float] = {"--interval": 1.0, "--max-seconds": 86400.0}
    bounds = {"--interval": INTERVAL_RANGE, "--max-seconds": MAX_SECONDS_RANGE}
    stop_file = None
    args = list(argv)
    while args:
        key = args.pop(0)
        if key == "--stop-file" and args:
            stop_file = args.pop(0)
            if not stop_file or len(stop_file) > 4096 or "\0" in stop_file:
                _usage("--stop-file needs a path of at most 4096 characters")
            continue
        if key not in values or not args:
            _usage(f"unknown or incomplete option {key[:40]!r}")
        try:
            value = float(args.pop(0))
        except ValueError:
            _usage(f"{key} needs a number")
        low, high = bounds[key]
        if not low <= value <= high:  # also refuses nan
            _usage(f"{key} must be within {low:g}..{high:g} seconds")
        values[key] = value
    return values["--interval"], values["--max-seconds"], stop_file


def _usage(problem: str) -> None:
    sys.stderr.write(f"clusterbench sampler: {problem}\n"
                     "usage: sampler.py [--interval S] [--max-seconds S] [--stop-file PATH]\n")
    sys.exit(2)


class Stop:
    """Why the loop ends: set by a signal handler or by the loop itself."""

    reason: str | None = None


def _on_signal(signum: int, _frame) -> None:
    Stop.reason = Stop.reason or signal.Signals(signum).name


def wait(until: float, wakeup: int, parent: int, stop_file: str | None = None) -> None:
    """Sleep until `until` (monotonic), or less when stdin closes (or the stop file appears), a
    signal arrives or the parent goes."""
    watched = [wakeup] if stop_file else [0, wakeup]
    while Stop.reason is None:
        left = until - time.monotonic()
        if left <= 0:
            return
        try:
            ready, _, _ = select.select(watched, [], [], min(left, 1.0))
        except (OSError, ValueError):  # stdin is not selectable (closed): rely on the other ends
            ready = [wakeup] if select.select([wakeup], [], [], min(left, 1.0))[0] else []
        if 0 in ready:
            try:
                if not os.read(0, 65536):
                    Stop.reason = "stdin closed"
            except OSError:
                Stop.reason = "stdin closed"
        if wakeup in ready:
            try:
                os.read(wakeup, 512)
            except OSError:
                pass
        if os.getppid() != parent:
            Stop.reason = Stop.reason or "parent gone"
        if stop_file and os.path.exists(stop_file):
            Stop.reason = Stop.reason or "stop file"


def run(interval: float, max_seconds: float, stop_file: str | None = None) -> int:
    sources = Sources()
    parent = os.getppid()
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end)
    for name in ("SIGTERM", "SIGHUP", "SIGINT"):
        signal.signal(getattr(signal, name), _on_signal)
    header = sources.header(interval, max_seconds)
    table = ProcessTable()
    header["procs"] = table.whole()
    _emit(header)
    start, count = time.monotonic(), 0
    while True:
        sample = take(sources)
        count += 1
        now = time.monotonic()
        if Stop.reason is None and now - start >= max_seconds:
            Stop.reason = "max-seconds"
        if count <= PROCS_EARLY or count % PROCS_EVERY == 0 or Stop.reason is not None:
            sample["procs"] = table.changed()
        if Stop.reason is not None:
            sample.update(end=Stop.reason, samples=count, self_cpu_s=_own_cpu())
            _emit(sample)
            return 0
        _emit(sample)
        due = start + count * interval
        if due < now:  # a slow sample: skip the missed beats rather than catch up in a burst
            due = now + interval - (now - start) % interval
        wait(min(due, start + max_seconds), read_end, parent, stop_file)


def main(argv: list[str]) -> int:
    interval, max_seconds, stop_file = parse_args(argv)
    try:
        return run(interval, max_seconds, stop_file)
    except BrokenPipeError:  # nobody reads any more: the run is over
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        except OSError:
            pass
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
