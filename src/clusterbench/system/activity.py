"""What the nodes did during a run: the sampler's command line, its series parsed, summarised, drawn.

The sampler (system/sampler.py, a standalone script) writes raw cumulative counters once a second
on every node of a run; the executor stores each node's lines as the artifact activity-HOST.jsonl
and the summary of each in the run's facts["activity"][host]. Everything here is pure: text in,
plain data out.

Why cumulative counters: the difference between any two samples is exact, so a series too long to
keep whole is thinned (every other sample dropped, as often as needed) without changing any total,
and a garbage line costs one interval's resolution, not a count. A counter that goes backwards (an
interface re-created, a CPU taken offline) adds nothing for that interval. The samples on both sides
of such a break, or of an interface or interrupt line that appears or goes, are kept by the thinning:
otherwise the traffic between the break and the next kept sample would count in the whole series and
not in the thinned one (up to half of the cap; a node whose interfaces churn beyond that loses the
exactness, never the bound).

The counters are the node's (its network namespace's), not the run's own: a run beside other
work sees that work too. That is the point when the question is "what else did the node do".
"""

from __future__ import annotations

import functools
import io
import json
import math
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.errors import UserInputError
from clusterbench.system import sampler as _sampler

SAMPLER = Path(_sampler.__file__)
STAT_FIELDS = _sampler.STAT_FIELDS
NET_FIELDS = _sampler.NET_FIELDS
SHARES = ("user", "system", "softirq", "irq", "iowait", "steal", "idle")  # user includes nice, as top's us+ni
MAX_LINE_CHARS = 4 * 2**20  # one sample of a 1024-CPU node is about 200 KB
MAX_LINES = 2_000_000
MAX_SAMPLES = 50_000  # kept; more are thinned (totals stay exact)
MAX_KEPT_VALUES = 3_000_000  # numbers kept over all samples: a node with many CPUs keeps fewer samples
MAX_NAME = _sampler.MAX_NAME
MAX_COUNTER = 2**64
MAX_ARGV_CHARS = 100_000  # the whole command, quoted for ssh, stays under Linux's 128 KiB per argument
VCGENCMD_BITS = {0: "under-voltage", 1: "arm frequency capped", 2: "throttled", 3: "soft temperature limit"}
NEGLIGIBLE_NET_RX = 100  # NET_RX softirqs over a whole run
MAX_TRACKED_PROCS = 65_536  # distinct processes followed over a run (a fork storm is counted, not kept)
SINCE_BOOT_SHIFT = 16  # bits 16-19: the same four, "has occurred since boot"


# ---------------------------------------------------------------- the command
# Three ways to start the sampler, all with a command line of a few hundred bytes at most, so `ps`
# and `top` on a node stay readable (not the 26 KB source, which sampler_argv puts there):
# - here: this interpreter imports sampler.py from its folder (local_sampler_argv);
# - over ssh: python3 with BOOTSTRAP, which reads the source from its stdin (stdin_sampler_argv;
#   the caller writes sampler_bytes() first, then keeps the pipe open as the sampler's lifeline);
# - in a Slurm batch job: the same BOOTSTRAP with its stdin redirected from a copy of the source the
#   job writes into the (shared) run directory (execution/observe.py slurm_lines).
# sampler_argv, with the whole source as an argument, stays for callers that cannot feed stdin.

MAX_SOURCE_BYTES = 65_536  # the bootstrap reads no more; also a pipe's capacity, so writing it never waits
# sys.argv[1] is 'LENGTH:CRC32' of the source. The bootstrap reads LENGTH bytes, or none when LENGTH is
# not within 1..MAX_SOURCE_BYTES (n * False is 0), and executes them only when exactly LENGTH arrived
# and their CRC-32 matches: a source cut short, or not the one announced, or too long, exits 1 with
# "clusterbench sampler: bad source" (the words to spot it by in ps), running nothing. What follows on
# stdin is left to the sampler: its lifeline. Python 3.8 syntax; about 190 characters, with no single
# quote (shlex.quote, for ssh, would make each one five).
BOOTSTRAP = ('import sys,zlib;n,c=map(int,sys.argv.pop(1).split(":"));'
             f"s=sys.stdin.buffer.read(n*(0<n<={MAX_SOURCE_BYTES}));"
             'exec(s)if len(s)==n>0 and zlib.crc32(s)==c else sys.exit("clusterbench sampler: bad source")')


@functools.cache
def sampler_bytes() -> bytes:
    """The sampler's source as sent to BOOTSTRAP (bounded: a source that outgrew the bound is a bug here)."""
    data = SAMPLER.read_bytes()
    if not 0 < len(data) <= MAX_SOURCE_BYTES:
        raise RuntimeError(f"{SAMPLER} is {len(data)} bytes: the bootstrap reads at most {MAX_SOURCE_BYTES}")
    return data


def sampler_source() -> str:
    return sampler_bytes().decode("utf-8")


def source_spec() -> str:
    """'LENGTH:CRC32' of sampler_bytes(): BOOTSTRAP's first argument."""
    data = sampler_bytes()
    return f"{len(data)}:{zlib.crc32(data)}"


def local_sampler_argv(interval_s: float = 1.0, max_seconds: float = 86400) -> list[str]:
    """The sampler for this machine, as sampler_argv gives it but with this interpreter importing
    sampler.py from its folder instead of compiling SOURCE: it starts from the bytecode cached when
    clusterbench imported it, not compiling 500 lines on a core the run's processes are starting on.
    Its stdin is only its lifeline: nothing is written to it."""
    argv = sampler_argv(interval_s, max_seconds, python=sys.executable)
    code = (f"import sys; sys.path.append({str(SAMPLER.parent)!r}); import sampler; "
            "sampler.os._exit(sampler.main(sys.argv[1:]))")  # each line is flushed: no interpreter teardown
    return [*argv[:4], code, *argv[5:]]


def stdin_sampler_argv(interval_s: float = 1.0, max_seconds: float = 86400, python: str = "python3") -> list[str]:
    """['python3', '-I', '-S', '-c', BOOTSTRAP, 'LENGTH:CRC', '--interval', ..., '--max-seconds', ...]:
    the sampler for a node that may not have clusterbench, with a short command line. Whoever starts it
    writes sampler_bytes() to its stdin first (all of it at once: it fits the pipe) and then keeps
    the pipe open: closing it ends the sampler, as for the others. For ssh, joined with shlex.join."""
    argv = sampler_argv(interval_s, max_seconds, python)
    return [*argv[:4], BOOTSTRAP, source_spec(), *argv[5:]]


def sampler_argv(interval_s: float = 1.0, max_seconds: float = 86400, python: str = "python3") -> list[str]:
    """['python3', '-I', '-S', '-c', SOURCE, '--interval', ..., '--max-seconds', ...]: the sampler as an
    argument list that needs nothing on its stdin but the lifeline (its whole source is an argument:
    `ps` shows it all; the executor uses the forms above)."""
    low, high = _sampler.INTERVAL_RANGE
    if isinstance(interval_s, bool) or not isinstance(interval_s, int | float) or not low <= interval_s <= high:
        raise UserInputError(f"sampling interval must be within {low:g}..{high:g} s, got {interval_s!r}",
                             hint="1 s is what the timelines are drawn for")
    low, high = _sampler.MAX_SECONDS_RANGE
    if isinstance(max_seconds, bool) or not isinstance(max_seconds, int | float) or not low <= max_seconds <= high:
        raise UserInputError(f"sampler backstop must be within {low:g}..{high:g} s, got {max_seconds!r}",
                             hint="give the run's timeout plus a margin")
    if not isinstance(python, str) or not python or len(python) > 4096 or "\0" in python:
        raise UserInputError("the Python that runs the sampler must be a program name or path",
                             hint="python3, or the node's absolute path to it")
    return [python, "-I", "-S", "-c", sampler_source(), "--interval", repr(float(interval_s)),
            "--max-seconds", repr(float(max_seconds))]


# ---------------------------------------------------------------- parsing

@dataclass
class Sample:
    mono: float
    wall: float | None = None
    cpu: dict[int, tuple[int, ...]] = field(default_factory=dict)  # STAT_FIELDS per CPU
    all: tuple[int, ...] | None = None  # the node-wide line
    ctxt: int | None = None
    procs_running: int | None = None
    softirqs: dict[str, tuple[int, ...]] = field(default_factory=dict)  # per column of header softirq_cpus
    nic_irqs: dict[str, dict[int, int]] = field(default_factory=dict)  # "38 virtio2-input.0" -> {CPU: count}
    net: dict[str, tuple[int, ...]] = field(default_factory=dict)  # NET_FIELDS per interface
    tcp: dict[str, int] = field(default_factory=dict)  # Tcp and the TcpExt counters, by kernel name
    temps: dict[str, float] = field(default_factory=dict)  # degrees C
    freqs: dict[int, int] = field(default_factory=dict)  # kHz
    throttle: dict[str, int] = field(default_factory=dict)  # core / package thermal events
    vcgencmd: int | None = None

    def size(self) -> int:
        return (len(self.cpu) * 8 + sum(len(v) for v in self.softirqs.values()) + len(self.net) * 8
                + sum(len(v) for v in self.nic_irqs.values()) + len(self.tcp) + len(self.temps) + len(self.freqs) + 8)


@dataclass
class ProcessUse:
    """One process seen by the sampler: its parent and name when last seen, and the CPU ticks it used
    while the sampler watched, by the CPU it was on at each snapshot (a snapshot's difference is put on
    the CPU the process was last on then: the kernel says no more without tracing)."""

    pid: int
    ppid: int
    comm: str
    first_ticks: int  # at the header's snapshot, 0 for a process born later
    last_ticks: int
    by_cpu: dict[int, int] = field(default_factory=dict)

    @property
    def ticks(self) -> int:
        return max(0, self.last_ticks - self.first_ticks)


@dataclass
class Series:
    """One node's samples, in order, bounded. `skipped` counts lines that were neither a header nor a
    valid sample; `thinned` the samples dropped to stay within bounds."""

    host: str
    header: dict = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    skipped: int = 0
    thinned: int = 0
    truncated: bool = False  # more lines than MAX_LINES: the rest was not read
    end: str | None = None  # why the sampler ended, from its last sample
    self_cpu_s: float | None = None  # the sampler's own CPU time, from its last sample
    procs: dict[tuple[int, int], ProcessUse] = field(default_factory=dict)  # (pid, start ticks) -> use
    procs_untracked: int = 0  # processes beyond MAX_TRACKED_PROCS: their use is not attributed
    _stride: int = 1
    _seen: int = 0
    _pending: Sample | None = None
    _pinned: set[int] = field(default_factory=set)  # id() of kept samples beside a break (see the module)

    def add(self, sample: Sample) -> None:
        """Keep every `_stride`-th sample; when too many are kept, drop every other one and double it."""
        if self.samples and sample.mono <= self.samples[-1].mono or (
                self._pending and sample.mono <= self._pending.mono):
            self.skipped += 1  # out of order or repeated: not a later state of the counters
            return
        last = self._pending if self._pending is not None else (self.samples[-1] if self.samples else None)
        broken = last is not None and _breaks(last, sample)  # against the latest seen, kept or not
        if broken and self._pending is not None:  # the state before the break counts too
            self.samples.append(self._pending)
            self._pinned.add(id(self._pending))
        if broken or self._seen % self._stride == 0:
            self.samples.append(sample)
            self._pending = None
            if broken:
                self._pinned.add(id(sample))
        else:
            self._pending = sample
        self._seen += 1
        cap = max(64, min(MAX_SAMPLES, MAX_KEPT_VALUES // max(1, sample.size())))
        while len(self.samples) > cap:  # the cap shrinks when samples grow (an interface appears)
            latest = self.samples[-1]
            if len(self._pinned) > cap // 2:
                self._pinned.clear()  # churn beyond the bound: exactness gives way, the bound holds
            kept = [s for i, s in enumerate(self.samples) if i % 2 == 0 or id(s) in self._pinned]
            if len(kept) == len(self.samples):
                self._pinned.clear()
                kept = self.samples[::2]
            self.samples = kept
            self._pinned &= {id(s) for s in kept}
            self._stride *= 2
            if self.samples[-1] is not latest and self._pending is None:  # it may be the last state of all
                self._pending = latest

    def see_procs(self, rows, baseline: bool = False) -> None:
        """A snapshot of the process table (the sampler's rows [pid, ppid, name, ticks, cpu, start])."""
        if not isinstance(rows, list):
            return
        for row in rows[:_sampler.MAX_PROCS]:
            if not (isinstance(row, list) and len(row) == 6 and isinstance(row[2], str)):
                continue
            pid, ppid, ticks, cpu, start = (_counter(row[i]) for i in (0, 1, 3, 4, 5))
            if None in (pid, ppid, ticks, cpu, start):
                continue
            key = (pid, start)
            use = self.procs.get(key)
            if use is None:
                if len(self.procs) >= MAX_TRACKED_PROCS:
                    self.procs_untracked += 1
                    continue
                self.procs[key] = ProcessUse(pid, ppid, row[2][:16], ticks if baseline else 0,
                                             ticks if baseline else 0)
                use = self.procs[key]
            if ticks > use.last_ticks:
                use.by_cpu[cpu] = use.by_cpu.get(cpu, 0) + ticks - use.last_ticks
                use.last_ticks = ticks
            use.ppid, use.comm = ppid, row[2][:16]

    def finish(self) -> Series:
        if self._pending is not None:  # the last state always counts: totals run to the end
            self.samples.append(self._pending)
            self._pending = None
        self.thinned = self._seen - len(self.samples)
        return self


def parse_series(text: str, host: str) -> Series:
    """The sampler's lines of one node: garbage lines (not JSON, wrong types, out of order) are
    skipped and counted, every name and number bounded."""
    series = Series(host=str(host)[:MAX_NAME])
    for number, line in enumerate(io.StringIO(text)):
        if number >= MAX_LINES:
            series.truncated = True
            break
        if not line.strip():
            continue
        record = _json(line)
        kind = record.get("type") if isinstance(record, dict) else None
        if kind == "header" and not series.header:
            series.header = _header(record)
            series.see_procs(record.get("procs"), baseline=True)
        elif kind == "sample" and (sample := _sample(record)) is not None:
            series.add(sample)
            series.see_procs(record.get("procs"))
            if isinstance(record.get("end"), str):
                series.end = record["end"][:40]
                series.self_cpu_s = _real(record.get("self_cpu_s"), 0, 1e9)
        else:
            series.skipped += 1
    return series.finish()


def _json(line: str):
    if len(line) > MAX_LINE_CHARS:
        return None
    try:
        return json.loads(line)
    except (ValueError, RecursionError):  # ValueError includes JSONDecodeError and over-long integers
        return None


def _counter(value) -> int | None:
    return value if type(value) is int and 0 <= value < MAX_COUNTER else None


def _real(value, low: float, high: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and low <= value <= high else None


def _name(key) -> str | None:
    return key if isinstance(key, str) and 0 < len(key) <= MAX_NAME else None


def _cpu_id(key) -> int | None:
    return int(key) if isinstance(key, str) and key.isdigit() and len(key) <= 6 else None


def _counters(values, length: int | None = None, limit: int = _sampler.MAX_CPUS) -> tuple[int, ...] | None:
    if not isinstance(values, list) or len(values) > limit or length is not None and len(values) != length:
        return None
    out = tuple(_counter(v) for v in values)
    return None if None in out else out


def _mapping(value, limit: int) -> dict:
    return dict(list(value.items())[:limit]) if isinstance(value, dict) else {}


def _header(record: dict) -> dict:
    out = {"host": _name(record.get("host")), "format": _counter(record.get("format")),
           "cpus": _counter(record.get("cpus")), "clk_tck": _counter(record.get("clk_tck")),
           "interval_s": _real(record.get("interval_s"), 0, 3600),
           "start_wall": _real(record.get("start_wall"), 0, 1e11),
           "startup_cpu_s": _real(record.get("startup_cpu_s"), 0, 1e6),
           "pid": _counter(record.get("pid")), "ppid": _counter(record.get("ppid")),
           "table": (record["boot_id"][:64], record["pid_ns"][:64])
           if isinstance(record.get("boot_id"), str) and isinstance(record.get("pid_ns"), str)
           and record["boot_id"] and record["pid_ns"] else None}
    sources = _mapping(record.get("sources"), 32)
    out["sources"] = {k: v for k, v in sources.items() if _name(k) and type(v) in (bool, int)}
    for key in ("softirq_cpus", "irq_cpus"):
        cpus = _counters(record.get(key))
        out[key] = list(cpus) if cpus is not None else []
    trips = _mapping(record.get("trips_c"), _sampler.MAX_SENSORS)
    out["trips_c"] = {k: t for k, v in trips.items() if _name(k) and (t := _real(v, -100, 1000)) is not None}
    return out


def _sample(record: dict) -> Sample | None:
    mono = _real(record.get("mono"), 0, 1e12)
    if mono is None:
        return None
    s = Sample(mono, wall=_real(record.get("wall"), 0, 1e11), all=_counters(record.get("all"), len(STAT_FIELDS)),
               ctxt=_counter(record.get("ctxt")), procs_running=_counter(record.get("procs_running")))
    for key, values in _mapping(record.get("cpu"), _sampler.MAX_CPUS).items():
        cpu, counts = _cpu_id(key), _counters(values, len(STAT_FIELDS))
        if cpu is not None and counts is not None:
            s.cpu[cpu] = counts
    for key, values in _mapping(record.get("softirqs"), _sampler.MAX_SOFTIRQ_TYPES).items():
        if _name(key) and (counts := _counters(values)) is not None:
            s.softirqs[key] = counts
    for key, per_cpu in _mapping(record.get("nic_irqs"), _sampler.MAX_IRQ_LINES).items():
        if _name(key):
            cells = ((_cpu_id(c), _counter(v)) for c, v in _mapping(per_cpu, _sampler.MAX_CPUS).items())
            s.nic_irqs[key] = {c: v for c, v in cells if c is not None and v is not None}
    for key, values in _mapping(record.get("net"), _sampler.MAX_IFACES).items():
        if _name(key) and (counts := _counters(values, len(NET_FIELDS))) is not None:
            s.net[key] = counts
    for part in ("tcp", "tcpext"):
        for key, value in _mapping(record.get(part), _sampler.MAX_TCP_KEYS).items():
            if _name(key) and (count := _counter(value)) is not None:
                s.tcp[key] = count
    for key, value in _mapping(record.get("temp_c"), _sampler.MAX_SENSORS).items():
        if _name(key) and (temp := _real(value, -100, 400)) is not None:
            s.temps[key] = temp
    for key, value in _mapping(record.get("freq_khz"), _sampler.MAX_CPUS).items():
        if (cpu := _cpu_id(key)) is not None and (khz := _counter(value)) is not None and khz < 10**8:
            s.freqs[cpu] = khz
    for key in ("core", "package"):
        if (count := _counter(_mapping(record.get("thermal_throttle"), 2).get(key))) is not None:
            s.throttle[key] = count
    code = record.get("vcgencmd")
    if isinstance(code, str) and code.startswith("0x") and 2 < len(code) <= 10:
        try:
            s.vcgencmd = int(code, 16)
        except ValueError:
            pass
    return s


# ---------------------------------------------------------------- differences

def _breaks(a: Sample, b: Sample) -> bool:
    """Does a counter appear, go or run backwards between these two samples (an interface or interrupt line
    created, removed or re-created)? Then a difference across a longer span would not add up to theirs."""
    if a.net.keys() != b.net.keys() or a.nic_irqs.keys() != b.nic_irqs.keys():
        return True
    return any(len(a.net[name]) != len(counts) or any(y < x for x, y in zip(a.net[name], counts, strict=True))
               for name, counts in b.net.items())


def _diff(a: tuple[int, ...] | None, b: tuple[int, ...] | None) -> list[int] | None:
    if a is None or b is None or len(a) != len(b):
        return None
    return [max(0, y - x) for x, y in zip(a, b, strict=True)]


def _node_cpu(a: Sample, b: Sample) -> list[int]:
    """STAT_FIELDS ticks of the whole node between two samples (the node-wide line, else the CPUs' sum)."""
    whole = _diff(a.all, b.all)
    if whole is not None:
        return whole
    out = [0] * len(STAT_FIELDS)
    for cpu, counts in b.cpu.items():
        for i, d in enumerate(_diff(a.cpu.get(cpu), counts) or ()):
            out[i] += d
    return out


def _shares(ticks: list[int]) -> dict[str, float]:
    """Percent of the ticks per SHARES entry (user includes nice); zeros when nothing was counted."""
    named = dict(zip(STAT_FIELDS, ticks, strict=True))
    named["user"] += named.pop("nice")
    total = sum(named.values())
    return {k: round(100.0 * named[k] / total, 2) if total else 0.0 for k in SHARES}


def _column_cpu(header: dict, key: str, index: int) -> int:
    cpus = header.get(key) or []
    return cpus[index] if index < len(cpus) else index


# ---------------------------------------------------------------- the summary

def summarise(series: Series) -> dict:
    """What the node did over the whole series, JSON-able (stored in facts["activity"][host])."""
    samples = series.samples
    first, last = (samples[0], samples[-1]) if samples else (None, None)
    seconds = round(last.mono - first.mono, 3) if samples else 0.0
    out: dict = {"host": series.host, "samples": len(samples) + series.thinned, "seconds": seconds,
                 "interval_s": series.header.get("interval_s"), "cpus": series.header.get("cpus"),
                 "skipped_lines": series.skipped, "thinned": series.thinned, "end": series.end,
                 "sampler_cpu_ms_per_sample": _sampler_cost(series)}
    pairs = list(zip(samples, samples[1:], strict=False))
    node = [0] * len(STAT_FIELDS)
    per_cpu: dict[int, list[int]] = {}
    softirqs: dict[str, dict[int, int]] = {}
    irqs: dict[str, dict[int, int]] = {}
    nets: dict[str, list[int]] = {}
    tcp: dict[str, int] = {}
    ctxt = 0
    for a, b in pairs:
        node = [x + y for x, y in zip(node, _node_cpu(a, b), strict=True)]
        for cpu, counts in b.cpu.items():
            if (d := _diff(a.cpu.get(cpu), counts)) is not None:
                per_cpu[cpu] = [x + y for x, y in zip(per_cpu.get(cpu, [0] * len(d)), d, strict=True)]
        for kind, counts in b.softirqs.items():
            for i, d in enumerate(_diff(a.softirqs.get(kind), counts) or ()):
                cpu = _column_cpu(series.header, "softirq_cpus", i)
                softirqs.setdefault(kind, {})[cpu] = softirqs.get(kind, {}).get(cpu, 0) + d
        for line, counts in b.nic_irqs.items():
            before = a.nic_irqs.get(line, {})
            for cpu, count in counts.items():
                irqs.setdefault(line, {})[cpu] = irqs.get(line, {}).get(cpu, 0) + max(0, count - before.get(cpu, 0))
        for name, counts in b.net.items():
            if (d := _diff(a.net.get(name), counts)) is not None:
                nets[name] = [x + y for x, y in zip(nets.get(name, [0] * len(d)), d, strict=True)]
        for key, count in b.tcp.items():
            if key in a.tcp:
                tcp[key] = tcp.get(key, 0) + max(0, count - a.tcp[key])
        if a.ctxt is not None and b.ctxt is not None:
            ctxt += max(0, b.ctxt - a.ctxt)
    shares = _shares(node)
    out.update({f"{k}_percent": v for k, v in shares.items()})
    out["sy_si_percent"] = round(shares["system"] + shares["softirq"], 2)
    out["per_cpu"] = {str(cpu): _shares(t) for cpu, t in sorted(per_cpu.items())}
    out["softirqs"] = {kind: {"total": sum(by.values()), "per_cpu": {str(c): n for c, n in sorted(by.items()) if n}}
                       for kind, by in softirqs.items() if any(by.values())}
    out["net_rx"] = net_rx_where(softirqs.get("NET_RX", {}))
    out["nic_irqs"] = {line: {str(c): n for c, n in sorted(by.items()) if n} for line, by in irqs.items()
                       if any(by.values())}
    out["interfaces"] = {name: dict(zip(NET_FIELDS, d, strict=True)) for name, d in nets.items() if any(d)}
    out["tcp"] = _tcp(tcp)
    out["context_switches_per_s"] = round(ctxt / seconds, 1) if seconds > 0 else None
    out.update(_thermal(series))
    return out


def _sampler_cost(series: Series) -> float | None:
    """The sampler's CPU time per sample after its start-up (ms): what sampling costs the node."""
    startup = series.header.get("startup_cpu_s")
    count = len(series.samples) + series.thinned
    if series.self_cpu_s is None or startup is None or count < 2:
        return None
    return round(1000.0 * max(0.0, series.self_cpu_s - startup) / count, 3)


def net_rx_where(per_cpu: dict[int, int]) -> dict:
    """Where network receive processing ran: on one CPU only, mostly on one, or spread (below
    NEGLIGIBLE_NET_RX softirqs in all, a node's background chatter, where is not worth saying)."""
    total = sum(per_cpu.values())
    if not total:
        return {"where": "none", "total": 0}
    if total < NEGLIGIBLE_NET_RX:
        return {"where": f"negligible ({total})", "total": total}
    top = max(per_cpu, key=lambda c: per_cpu[c])
    share = per_cpu[top] / total
    busy = sorted(c for c, n in per_cpu.items() if n / total >= 0.05)
    if len(per_cpu) == 1:
        where = f"on CPU {top} (the node's only CPU)"
    elif share >= 0.99:
        where = f"on CPU {top} only"
    elif share >= 0.75:
        where = f"mostly on CPU {top} ({share:.0%})"
    else:
        where = f"spread over {len(busy)} CPUs"
    return {"where": where, "total": total, "top_cpu": top, "top_share": round(share, 4), "cpus": busy}


def _tcp(counts: dict[str, int]) -> dict:
    out = {"retransmits": counts.get("RetransSegs"), "timeouts": counts.get("TCPTimeouts"),
           "out_segments": counts.get("OutSegs"), "in_segments": counts.get("InSegs")}
    if counts.get("OutSegs") and counts.get("RetransSegs") is not None:
        out["retransmit_percent"] = round(100.0 * counts["RetransSegs"] / counts["OutSegs"], 3)
    out["counters"] = {k: v for k, v in sorted(counts.items()) if k != "CurrEstab"}
    return out


def _thermal(series: Series) -> dict:
    """Temperature maximum, frequency range, and whether (and why) the node throttled."""
    samples, trips = series.samples, series.header.get("trips_c", {})
    reasons: list[str] = []
    hottest: tuple[float, str] | None = None
    over: dict[str, float] = {}
    for s in samples:
        for name, temp in s.temps.items():
            if hottest is None or temp > hottest[0]:
                hottest = (temp, name)
            if name in trips and temp >= trips[name]:
                over[name] = max(over.get(name, temp), temp)
    for name, temp in sorted(over.items()):
        reasons.append(f"{name} reached {temp:.0f} C (trip point {trips[name]:.0f} C)")
    freqs = [khz for s in samples for khz in s.freqs.values()]
    events = None
    if any(s.throttle for s in samples):
        events = {k: sum(max(0, b.throttle[k] - a.throttle[k]) for a, b in zip(samples, samples[1:], strict=False)
                         if k in a.throttle and k in b.throttle) for k in ("core", "package")}
    if events and any(events.values()):
        reasons.append(f"thermal_throttle: {events['core']} core, {events['package']} package events")
    vc = vcgencmd_verdict([s.vcgencmd for s in samples if s.vcgencmd is not None])
    if vc.get("reason"):
        reasons.append(vc["reason"])
    return {"temperature_max_c": hottest[0] if hottest else None, "temperature_sensor": hottest[1] if hottest else None,
            "frequency_mhz": {"min": min(freqs) // 1000, "max": max(freqs) // 1000} if freqs else None,
            "thermal_throttle_events": events,
            "vcgencmd": vc or None, "throttled": "; ".join(reasons) or None}


def _bits(code: int, shift: int) -> list[str]:
    return [name for bit, name in VCGENCMD_BITS.items() if code >> (bit + shift) & 1]


def vcgencmd_verdict(codes: list[int]) -> dict:
    """Raspberry Pi throttling from `vcgencmd get_throttled` codes in sample order: bits 0-3 set in
    any sample (happening now), or bits 16-19 ("has occurred") that were not yet set at the start."""
    if not codes:
        return {}
    seen = functools.reduce(lambda x, y: x | y, codes)
    now = seen & 0xF
    new = (seen >> SINCE_BOOT_SHIFT & 0xF) & ~(codes[0] >> SINCE_BOOT_SHIFT & 0xF)
    out = {"codes": sorted({f"0x{c:x}" for c in codes})[:8], "seen": f"0x{seen:x}"}
    if now or new:
        parts = [f"{n} now" for n in _bits(now, 0)] + [f"{n} during the run" for n in _bits(new, 0) if n not in
                                                       _bits(now, 0)]
        out["reason"] = f"vcgencmd 0x{seen:x}: " + ", ".join(parts)
    elif codes[0] >> SINCE_BOOT_SHIFT & 0xF:
        out["before_run"] = ", ".join(_bits(codes[0], SINCE_BOOT_SHIFT)) + " since boot, before the run"
    return out


def summary_line(host: str, summary: dict) -> str:
    """'node3: 31% sy+si, NET_RX on CPU 0 only; 1,204 TCP retransmits; throttled (vcgencmd 0x50005: ...)'.
    The summary may come back from a store: a field of the wrong type is left out, never an error."""
    if not isinstance(summary, dict) or not summary.get("seconds"):
        return f"{host}: no activity recorded (fewer than two samples)"
    sy_si = summary.get("sy_si_percent")
    net_rx, tcp = summary.get("net_rx"), summary.get("tcp")
    where = net_rx.get("where") if isinstance(net_rx, dict) else None
    retrans = tcp.get("retransmits") if isinstance(tcp, dict) else None
    ok = isinstance(sy_si, int | float) and not isinstance(sy_si, bool) and math.isfinite(sy_si)
    text = f"{host}: {sy_si:.0f}% sy+si" if ok else f"{host}: CPU shares unknown"
    if isinstance(where, str) and where != "none" and not where.startswith("negligible"):
        text += f", NET_RX {where}"
    if type(retrans) is int:
        text += f"; {retrans:,} TCP retransmit{'s' if retrans != 1 else ''}"
    if isinstance(summary.get("throttled"), str):
        text += f"; throttled ({summary['throttled']})"
    return text


def throttle_reasons(summaries: dict[str, dict]) -> list[str]:
    """'host: reason' for each node that throttled during the run: the run's flag."""
    return [f"{host}: {s['throttled']}" for host, s in sorted(summaries.items())
            if isinstance(s, dict) and isinstance(s.get("throttled"), str)]


# ---------------------------------------------------------------- the timeline

def timeline(series: Series, max_points: int | None = None) -> dict:
    """Per-interval arrays for a figure: t (s since the first sample, at each interval's end), the
    node-wide shares in percent (SHARES), TCP retransmits per interval and per second, NET_RX per
    CPU. With max_points, consecutive intervals are merged (exactly: the counters are cumulative)."""
    samples = series.samples
    if max_points is not None and len(samples) - 1 > max(1, max_points):
        stride = math.ceil((len(samples) - 1) / max(1, max_points))
        picked = samples[::stride]
        samples = picked if picked[-1] is samples[-1] else [*picked, samples[-1]]
    out: dict = {"host": series.host, "t": [], "dt": [], **{k: [] for k in SHARES}, "retransmits": [],
                 "retransmits_per_s": [], "net_rx": {}}
    columns = len(samples[-1].softirqs.get("NET_RX", ())) if samples else 0
    rx = {str(_column_cpu(series.header, "softirq_cpus", i)): [] for i in range(columns)}
    for a, b in zip(samples, samples[1:], strict=False):
        dt = b.mono - a.mono
        out["t"].append(round(b.mono - samples[0].mono, 3))
        out["dt"].append(round(dt, 3))
        for k, v in _shares(_node_cpu(a, b)).items():
            out[k].append(v)
        retrans = max(0, b.tcp["RetransSegs"] - a.tcp["RetransSegs"]) if "RetransSegs" in a.tcp and \
            "RetransSegs" in b.tcp else 0
        out["retransmits"].append(retrans)
        out["retransmits_per_s"].append(round(retrans / dt, 3) if dt > 0 else 0.0)
        d = _diff(a.softirqs.get("NET_RX"), b.softirqs.get("NET_RX")) or [0] * columns
        for i, cpu in enumerate(rx):
            rx[cpu].append(d[i] if i < len(d) else 0)
    out["net_rx"] = rx
    return out

