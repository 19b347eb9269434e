"""The OS, network and MPI settings a campaign may change, and the shell scripts that read,
change and restore them on a node.

Why an allow-list: a campaign's `system:` section runs as root on every node of a cluster, so it
must not be a way to write any file under /proc or /sys. Each key below is one a tuning study
changed (SACK, rto_min, MTU, coalescing, RPS/RFS, buffer sizes, eager limits, the governor), with
the type and range of its value, whether the kernel wants root for it, and its scope:

- `netns`: per network namespace (net.ipv4 sysctls, interfaces, routes). On the virtual cluster
  every node has its own, so they can be tried there without touching this machine.
- `kernel`: one value for the whole kernel (kernel.*, vm.*, cpufreq, THP, the global net.core
  tables). Nodes that share a kernel (virtual cluster nodes, and this machine) share these.
- `process`: MPI parameters, which are only environment variables of the run (`mpi_env`).

Everything here is pure: values are checked and normalised to text (`validate`), scripts are
built with every substituted word passed through `shlex.quote`, and the nodes' answers are
parsed into plain data. Running the scripts, the journal and the lock are
`clusterbench.execution.settings`.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

MAX_SETTINGS = 128          # keys in one settings dict
MAX_VALUE_CHARS = 256       # a value, before its type is even looked at
MAX_KEY_CHARS = 128
MAX_READ_CHARS = 4096       # one value read back from a node (the script cuts it too)
MAX_ANSWER_LINES = 100_000  # lines of a node's answer that are parsed
MAX_CPU = 4095              # the highest CPU number an RPS list may name
INT_MAX = 2**31 - 1

HOST_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,252}$")
IFNAME_RE = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9_.@-]{1,15}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,99}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ROUTE_WORD = re.compile(r"^[A-Za-z0-9_.:/@-]{1,64}$")
_RPS_PATH = re.compile(r"^/sys/class/net/([A-Za-z0-9_.@-]{1,15})/queues/rx-[0-9]{1,5}/(rps_cpus|rps_flow_cnt)$")
_GOVERNOR_PATH = re.compile(r"^/sys/devices/system/cpu/cpu[0-9]{1,5}/cpufreq/scaling_governor$")
THP_PATH = "/sys/kernel/mm/transparent_hugepage/enabled"


# --- value checks: each takes the text of a value and returns it normalised, or raises ValueError


def _integer(lo: int, hi: int) -> Callable[[str], str]:
    def check(text: str) -> str:
        if not re.fullmatch(r"-?[0-9]{1,12}", text):
            raise ValueError(f"not an integer: {text!r}")
        if not lo <= int(text) <= hi:
            raise ValueError(f"{text} is out of range")
        return str(int(text))
    check.allowed = f"an integer from {lo} to {hi}"  # type: ignore[attr-defined]
    return check


_TRUE, _FALSE = {"1", "true", "on", "yes"}, {"0", "false", "off", "no"}


def _boolean(on: str = "1", off: str = "0") -> Callable[[str], str]:
    def check(text: str) -> str:
        if text.lower() in _TRUE:
            return on
        if text.lower() in _FALSE:
            return off
        raise ValueError(f"not {on} or {off}: {text!r}")
    check.allowed = f"{on} or {off}"  # type: ignore[attr-defined]
    return check


def _choice(*words: str) -> Callable[[str], str]:
    def check(text: str) -> str:
        if text not in words:
            raise ValueError(f"{text!r} is not one of them")
        return text
    check.allowed = "one of " + ", ".join(words)  # type: ignore[attr-defined]
    return check


def _name(what: str) -> Callable[[str], str]:
    """A lowercase word (congestion control, governor): the node says which exist (preflight)."""
    def check(text: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", text):
            raise ValueError(f"not a {what} name: {text!r}")
        return text
    check.allowed = f"a {what} name (lowercase letters, digits, _), available on the node"  # type: ignore[attr-defined]
    return check


def _triple(text: str) -> str:
    parts = text.replace(",", " ").split()
    if len(parts) != 3 or not all(re.fullmatch(r"[0-9]{1,10}", p) for p in parts):
        raise ValueError(f"not three integers: {text!r}")
    low, default, high = (int(p) for p in parts)
    if not (1 <= low <= default <= high <= INT_MAX):
        raise ValueError("needs 1 <= min <= default <= max <= 2147483647")
    return f"{low} {default} {high}"


_triple.allowed = "three byte counts 'min default max', min <= default <= max"  # type: ignore[attr-defined]


def _interface(text: str) -> str:
    if not IFNAME_RE.match(text):
        raise ValueError(f"not an interface name: {text!r}")
    return text


_interface.allowed = "an interface name (up to 15 of A-Z a-z 0-9 _ . @ -)"  # type: ignore[attr-defined]


def parse_cpulist(text: str) -> list[int]:
    """'0-3,6' -> [0, 1, 2, 3, 6], bounded by MAX_CPU."""
    if not re.fullmatch(r"[0-9]{1,4}(-[0-9]{1,4})?(,[0-9]{1,4}(-[0-9]{1,4})?){0,63}", text):
        raise ValueError(f"not a CPU list like 0-3 or 0,2: {text!r}")
    cpus: set[int] = set()
    for part in text.split(","):
        a, _, b = part.partition("-")
        lo, hi = int(a), int(b or a)
        if lo > hi or hi > MAX_CPU:
            raise ValueError(f"CPU range {part} is empty or beyond {MAX_CPU}")
        cpus.update(range(lo, hi + 1))
    return sorted(cpus)


def cpu_mask(cpus: Iterable[int]) -> str:
    """The hex mask the kernel reads from rps_cpus: 32-bit words, comma separated ('f', 'f,ffffffff')."""
    value = 0
    for cpu in cpus:
        value |= 1 << cpu
    digits = f"{value:x}"
    words = []
    while digits:
        words.insert(0, digits[-8:])
        digits = digits[:-8]
    return ",".join(words) or "0"


def _rps(text: str) -> str:
    if text.lower() in ("off", "0", "none"):
        return "off"
    parse_cpulist(text)
    return text


_rps.allowed = "a CPU list (0-3, 0,2) or off"  # type: ignore[attr-defined]


def duration_ms(text: str) -> int:
    """'5ms', '0.2s', '200000us', '5' (iproute2 reads a bare number as ms) -> milliseconds."""
    m = re.fullmatch(r"([0-9]{1,9}(?:\.[0-9]{1,6})?)(us|usec|ms|msec|s|sec|secs)?", text.strip())
    if not m:
        raise ValueError(f"not a duration like 5ms or 0.2s: {text!r}")
    scale = {"us": 1e-3, "usec": 1e-3, "s": 1e3, "sec": 1e3, "secs": 1e3}.get(m.group(2) or "ms", 1.0)
    return round(float(m.group(1)) * scale)


def _rto_min(text: str) -> str:
    ms = duration_ms(text)
    if not 1 <= ms <= 120_000:
        raise ValueError(f"{text} is out of range")
    return f"{ms}ms"


_rto_min.allowed = "a duration from 1ms to 120s (5ms, 200ms, 0.2s)"  # type: ignore[attr-defined]


def _env_value(text: str) -> str:
    return text


_env_value.allowed = f"any text up to {MAX_VALUE_CHARS} characters, no control characters"  # type: ignore[attr-defined]


# --- the allow-list


@dataclass(frozen=True)
class Tunable:
    """One key a campaign may set: how it is checked, where it lives, who may change it."""

    key: str            # 'sysctl.net.ipv4.tcp_sack', 'mtu', 'coalesce.rx-usecs'; 'mca.*' for a family
    kind: str           # sysctl | mtu | coalesce | rps | rps_flow_cnt | rto_min | governor | thp | interface | env
    scope: str          # netns | kernel | process
    needs_root: bool
    description: str    # what it is and why a study changes it
    check: Callable[[str], str] = field(compare=False, repr=False)

    @property
    def allowed(self) -> str:
        return getattr(self.check, "allowed", "")


def _sysctl(name: str, scope: str, check: Callable[[str], str], description: str) -> Tunable:
    return Tunable(f"sysctl.{name}", "sysctl", scope, True, description, check)


_COALESCE_USECS = ("rx-usecs", "rx-frames", "rx-usecs-irq", "rx-frames-irq",
                   "tx-usecs", "tx-frames", "tx-usecs-irq", "tx-frames-irq")

_LIST: list[Tunable] = [
    # TCP, per network namespace: what the Mont-Blanc and Pi studies changed on 1 GbE.
    _sysctl("net.ipv4.tcp_sack", "netns", _boolean(),
            "Selective acknowledgements; the Mont-Blanc study turned SACK off on a lossy 1 GbE fabric"),
    _sysctl("net.ipv4.tcp_timestamps", "netns", _integer(0, 2),
            "TCP timestamps (RTT samples that drive the retransmission timer); 2 = without random offset"),
    _sysctl("net.ipv4.tcp_rmem", "netns", _triple,
            "Receive buffer autotuning bounds (min default max): caps the bandwidth of one MPI connection"),
    _sysctl("net.ipv4.tcp_wmem", "netns", _triple,
            "Send buffer autotuning bounds (min default max), the send side of tcp_rmem"),
    _sysctl("net.ipv4.tcp_congestion_control", "netns", _name("congestion control"),
            "Congestion control algorithm (cubic, reno, bbr...): how a flow recovers after a drop"),
    _sysctl("net.ipv4.tcp_low_latency", "netns", _boolean(),
            "Prefer latency over throughput, on the older kernels of the Pi studies "
            "(a no-op since 4.14, absent from recent kernels)"),
    _sysctl("net.ipv4.tcp_slow_start_after_idle", "netns", _boolean(),
            "Restart from a small window after an idle period: MPI traffic is bursty, so it matters"),
    _sysctl("net.ipv4.tcp_no_metrics_save", "netns", _boolean(),
            "Do not cache RTT/cwnd per destination, so one sweep point does not inherit the previous one's"),
    _sysctl("net.ipv4.tcp_mtu_probing", "netns", _integer(0, 2),
            "Packetisation-layer path MTU discovery, for jumbo-frame (MTU 9000) trials"),
    # Socket buffer caps: per namespace on recent kernels (present in a namespace on 6.x), per
    # kernel before, where a namespaced node does not have them and preflight says so.
    _sysctl("net.core.rmem_max", "netns", _integer(4096, INT_MAX),
            "Largest receive buffer a socket may ask for (Open MPI btl_tcp_rcvbuf is capped by it)"),
    _sysctl("net.core.wmem_max", "netns", _integer(4096, INT_MAX),
            "Largest send buffer a socket may ask for (Open MPI btl_tcp_sndbuf is capped by it)"),
    _sysctl("net.core.rmem_default", "netns", _integer(4096, INT_MAX),
            "Receive buffer of a socket that does not ask (UDP, MPI libraries without tuning)"),
    _sysctl("net.core.wmem_default", "netns", _integer(4096, INT_MAX),
            "Send buffer of a socket that does not ask"),
    # Global receive-path tables, one per kernel.
    _sysctl("net.core.rps_sock_flow_entries", "kernel", _integer(0, 1 << 22),
            "RFS: size of the global flow table that steers packets to the CPU of the consuming thread"),
    _sysctl("net.core.netdev_max_backlog", "kernel", _integer(1, 1_000_000),
            "Packets queued per CPU before drops, when RPS moves receive work between CPUs"),
    _sysctl("net.core.busy_poll", "kernel", _integer(0, 1_000_000),
            "Microseconds poll/select busy-waits on the NIC: latency for CPU time"),
    _sysctl("net.core.busy_read", "kernel", _integer(0, 1_000_000),
            "Microseconds a blocking socket read busy-waits on the NIC"),
    # Scheduler and memory, one per kernel.
    _sysctl("kernel.numa_balancing", "kernel", _integer(0, 3),
            "Automatic NUMA page migration: moves STREAM/HPL memory under the benchmark's feet"),
    _sysctl("kernel.sched_autogroup_enabled", "kernel", _boolean(),
            "Per-session task groups: changes how ranks share a node with other sessions (SMP efficiency)"),
    _sysctl("kernel.sched_schedstats", "kernel", _boolean(),
            "Scheduler statistics (migrations, wait time per task) for the activity sampler"),
    _sysctl("kernel.sched_rt_runtime_us", "kernel", _integer(-1, 1_000_000),
            "RT throttling; -1 lets ranks pinned with SCHED_FIFO keep the whole CPU"),
    _sysctl("kernel.sched_migration_cost_ns", "kernel", _integer(0, 1_000_000_000),
            "How long a task counts as cache-hot and is not migrated (kernels before 5.13)"),
    _sysctl("kernel.sched_min_granularity_ns", "kernel", _integer(100_000, 1_000_000_000),
            "Shortest time slice under CFS (kernels before 5.13)"),
    _sysctl("kernel.sched_wakeup_granularity_ns", "kernel", _integer(0, 1_000_000_000),
            "How much a waking task must be owed to preempt (kernels before 5.13)"),
    _sysctl("kernel.sched_latency_ns", "kernel", _integer(100_000, 1_000_000_000),
            "CFS scheduling period (kernels before 5.13)"),
    _sysctl("vm.swappiness", "kernel", _integer(0, 200),
            "How eagerly anonymous memory is swapped: a large HPL problem near memory size"),
    _sysctl("vm.zone_reclaim_mode", "kernel", _integer(0, 7),
            "Reclaim on the local NUMA node before allocating remotely (memory locality)"),
    # The run's NICs and routes.
    Tunable("interface", "interface", "netns", False,
            "Which NIC the mtu, coalesce and rps settings (and rto_min's routes) apply to; "
            "default: the interface of the route to the run's other nodes (the default route on one node)",
            _interface),
    Tunable("mtu", "mtu", "netns", True,
            "MTU of the run's interface(s): 9000 (jumbo frames) against 1500", _integer(68, 65535)),
    Tunable("rto_min", "rto_min", "netns", True,
            "Minimum TCP retransmission timeout on the routes to the run's nodes (ip route ... rto_min); "
            "200ms by default, 5ms made LULESH 3.25x faster in the Mont-Blanc study", _rto_min),
    Tunable("rps", "rps", "netns", True,
            "Receive Packet Steering: CPUs that process the interface's received packets (rps_cpus "
            "of every rx queue), so NET_RX softirqs leave core 0", _rps),
    Tunable("rps_flow_cnt", "rps_flow_cnt", "netns", True,
            "RFS flow entries per rx queue (rps_flow_cnt), with net.core.rps_sock_flow_entries",
            _integer(0, 1 << 20)),
    Tunable("coalesce.adaptive-rx", "coalesce", "netns", True,
            "Adaptive RX interrupt coalescing (ethtool -C adaptive-rx), tried in the Pi study",
            _boolean("on", "off")),
    Tunable("coalesce.adaptive-tx", "coalesce", "netns", True,
            "Adaptive TX interrupt coalescing (ethtool -C adaptive-tx)", _boolean("on", "off")),
    *(Tunable(f"coalesce.{word}", "coalesce", "netns", True,
              f"Interrupt coalescing: ethtool -C {word} (fewer interrupts against more latency)",
              _integer(0, 1_000_000)) for word in _COALESCE_USECS),
    # The CPU, one per kernel.
    Tunable("governor", "governor", "kernel", True,
            "cpufreq scaling_governor of every CPU (performance, ondemand, schedutil...)",
            _name("cpufreq governor")),
    Tunable("thp", "thp", "kernel", True,
            "Transparent huge pages (transparent_hugepage/enabled): TLB reach of HPL and STREAM arrays",
            _choice("always", "madvise", "never")),
    # MPI parameters: environment variables of the run, nothing to apply or restore.
    Tunable("mca.*", "env", "process", False,
            "An Open MPI MCA parameter, set as OMPI_MCA_<param> (e.g. mca.btl_tcp_eager_limit)", _env_value),
    Tunable("cvar.*", "env", "process", False,
            "An MPICH control variable, set as MPIR_CVAR_<NAME> (e.g. cvar.CH3_EAGER_MAX_MSG_SIZE)", _env_value),
]

ALLOWED: dict[str, Tunable] = {t.key: t for t in _LIST}
# The keys a campaign's `system:` section writes as a mapping (`sysctl: {net.ipv4.tcp_sack: 0}`):
# the first part of every dotted key on the list.
GROUPS: frozenset[str] = frozenset(k.split(".", 1)[0] for k in ALLOWED if "." in k)
ENV_PREFIXES = {"mca.": "OMPI_MCA_", "cvar.": "MPIR_CVAR_"}
NIC_KINDS = {"mtu", "coalesce", "rps", "rps_flow_cnt", "rto_min"}


def lookup(key: str) -> Tunable:
    """The allow-list entry for `key` (a family such as mca.* included), or ValueError saying what is allowed."""
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS or _CONTROL.search(key):
        raise ValueError(f"not a setting name: {str(key)[:60]!r}")
    if key in ALLOWED:
        return ALLOWED[key]
    for prefix in ENV_PREFIXES:
        if key.startswith(prefix):
            name = key[len(prefix):]
            if not ENV_NAME_RE.match(name):
                raise ValueError(f"{key!r}: an MPI parameter name is a letter then letters, digits or _ "
                                 "(at most 100)")
            return ALLOWED[prefix + "*"]
    close = difflib.get_close_matches(key, list(ALLOWED), n=3)
    raise ValueError(f"{key!r} is not a setting clusterbench may change"
                     + (f" (did you mean {', '.join(close)}?)" if close else "")
                     + "; the allowed keys are listed by `clusterbench system settings` and in docs/settings.md")


def _as_text(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        if len(value) > MAX_VALUE_CHARS:
            raise ValueError(f"{key}: the value is {len(value):,} characters long (at most {MAX_VALUE_CHARS})")
        if _CONTROL.search(value):
            raise ValueError(f"{key}: the value holds a control character (newline, tab, NUL...)")
        return value.strip()
    raise ValueError(f"{key}: a single value is needed, not {type(value).__name__} (a list sweeps only in a "
                     "campaign's system: section)")


def validate(settings: dict[str, Any]) -> dict[str, str]:
    """Every key on the allow-list and every value of its type and in range, normalised to text.
    Raises ValueError naming the key and what is allowed. Runs before anything touches a node."""
    if not isinstance(settings, dict):
        raise ValueError(f"system settings must be a mapping of key: value, not {type(settings).__name__}")
    if len(settings) > MAX_SETTINGS:
        raise ValueError(f"{len(settings)} system settings at once (at most {MAX_SETTINGS})")
    out: dict[str, str] = {}
    for key, value in settings.items():
        tunable = lookup(key)
        text = _as_text(key, value)
        try:
            out[key] = tunable.check(text)
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}; allowed: {tunable.allowed}") from None
        if _CONTROL.search(out[key]) or not out[key]:
            raise ValueError(f"{key}: an empty value; allowed: {tunable.allowed}")
    return out


def mpi_env(settings: dict[str, Any]) -> dict[str, str]:
    """The environment variables of the MPI keys: mca.X -> OMPI_MCA_X, cvar.X -> MPIR_CVAR_X (upper case)."""
    env = {}
    for key, value in validate(settings).items():
        for prefix, var in ENV_PREFIXES.items():
            if key.startswith(prefix):
                name = key[len(prefix):]
                env[var + (name.upper() if prefix == "cvar." else name)] = value
    return env


def machine_keys(settings: dict[str, str]) -> dict[str, str]:
    """The keys that change a node (not the MPI environment, not the interface selector)."""
    return {k: v for k, v in settings.items() if lookup(k).kind not in ("env", "interface")}


def check_hosts(names: Iterable[str], what: str = "host") -> list[str]:
    """Host names that are safe as an ssh argument and inside a script (no leading '-', no spaces)."""
    out = []
    for name in names:
        if not isinstance(name, str) or not HOST_RE.match(name):
            raise ValueError(f"not a {what} name: {str(name)[:60]!r}")
        out.append(name)
    return out


# --- (a) the read script: current values, what exists, whether it can be written


_PRELUDE = r"""export LC_ALL=C
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
out() { local IFS=$'\t'; printf '%s\n' "$*"; }
clean() { local v=$1; v=${v//$'\t'/ }; v=${v//$'\n'/ }; v=${v//$'\r'/ }; printf '%s' "${v:0:4096}"; }
"""

_READ_FUNCS = r"""rd() {  # KEY TARGET FILE
  local v
  if [ ! -e "$3" ]; then out X "$1" "$2" "does not exist here"; return 0; fi
  if ! v=$(cat -- "$3" 2>&1); then out X "$1" "$2" "unreadable: $(clean "$v")"; return 0; fi
  out V "$1" "$2" "$(clean "$v")"
  [ -w "$3" ] || out W "$1" "$2" "not writable"
}
ifaces=()
add_if() { local i; for i in "${ifaces[@]}"; do [ "$i" = "$1" ] && return 0; done; ifaces+=("$1"); }
devof() { sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -n 1; }
out U "$(id -u)"
out B "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)"
out N "$(readlink /proc/self/ns/net 2>/dev/null)"
out C "$(cat /sys/devices/system/cpu/possible 2>/dev/null)"
"""


def sysctl_path(name: str) -> str:
    return "/proc/sys/" + name.replace(".", "/")


def read_script(keys: Iterable[str], peers: list[str], interfaces: Iterable[str] = (),
                resolve: bool = True) -> str:
    """Bash that prints, one tab-separated record a line, the current value of every key (and of
    every target it has: each interface, rx queue, CPU, route), what is missing, what this user
    cannot write, and the facts the checks need (uid, boot id, network namespace, CPUs, routes,
    the interfaces that lead to `peers`). Read-only; one ssh round trip."""
    keys = [k for k in keys if lookup(k).kind not in ("env",)]
    kinds = {lookup(k).kind for k in keys}
    q = shlex.quote
    lines = [_PRELUDE, _READ_FUNCS]
    for key in keys:
        t = lookup(key)
        if t.kind == "sysctl":
            name = key[len("sysctl."):]
            lines.append(f"rd {q(key)} {q(name)} {q(sysctl_path(name))}")
            if name == "net.ipv4.tcp_congestion_control":
                lines.append(f"out A {q(key)} \"$(cat /proc/sys/net/ipv4/tcp_available_congestion_control "
                             "2>/dev/null)\"")
        elif t.kind == "thp":
            lines.append(f"rd thp {q(THP_PATH)} {q(THP_PATH)}")
        elif t.kind == "governor":
            lines.append(r"""n=0
for f in /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor; do
  [ -e "$f" ] || continue; n=$((n + 1)); rd governor "$f" "$f"
done
[ "$n" = 0 ] && out X governor '' 'no cpufreq scaling_governor here (no frequency scaling driver)'
out A governor "$(cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_available_governors 2>/dev/null)"
""")
    if kinds & NIC_KINDS:
        for name in interfaces:
            lines.append(f"add_if {q(_interface(name))}")
        if resolve:
            others = check_hosts(peers, "peer")
            for peer in others:
                lines.append(f"""a=$(getent ahostsv4 {q(peer)} 2>/dev/null | awk 'NR == 1 {{print $1}}'); d=''
[ -n "$a" ] && d=$(ip -o route get "$a" 2>/dev/null | devof)
out P {q(peer)} "$a" "$d"; [ -n "$d" ] && [ "$d" != lo ] && add_if "$d"
""")
            if not others:
                lines.append("""d=$(ip -o route show default 2>/dev/null | devof)
out P '' default "$d"; [ -n "$d" ] && add_if "$d"
""")
        if "rto_min" in kinds:
            lines.append("""ip -o route show table main 2>/dev/null | head -n 1024 | while IFS= read -r line; do
  out T "$(clean "$line")"; done""")
        body = ["for i in \"${ifaces[@]}\"; do",
                '  if [ ! -e "/sys/class/net/$i" ]; then out X interface "$i" "no such interface"; continue; fi']
        if "mtu" in kinds:
            body += ['  rd mtu "$i" "/sys/class/net/$i/mtu"',
                     '  out L "$i" "$(ip -d -o link show dev "$i" 2>/dev/null | '
                     r"sed -n 's/.* minmtu \([0-9]*\) maxmtu \([0-9]*\).*/\1 \2/p')" + '"']
        for kind in ("rps_cpus", "rps_flow_cnt"):
            key = "rps" if kind == "rps_cpus" else kind
            if key in kinds:
                body += [f'  n=0; for q in /sys/class/net/"$i"/queues/rx-*; do [ -e "$q/{kind}" ] || continue',
                         f'    n=$((n + 1)); rd {key} "$q/{kind}" "$q/{kind}"; done',
                         f'  [ "$n" = 0 ] && out X {key} "$i" "no rx queue with {kind} (a kernel without RPS?)"']
        if "coalesce" in kinds:
            body += ['  if ! command -v ethtool >/dev/null; then out X coalesce "$i" "ethtool is not installed"',
                     '  elif c=$(ethtool -c "$i" 2>&1); then',
                     '    while IFS= read -r l; do [ -n "$l" ] && out K "$i" "$(clean "$l")"; done <<<"$c"',
                     '  else out X coalesce "$i" "ethtool -c: $(clean "$c")"; fi']
        lines += [*body, "done"]
    lines.append("exit 0")
    return "\n".join(lines) + "\n"


@dataclass
class Peer:
    name: str          # '' for the default route of a one-node run
    address: str
    dev: str


@dataclass
class NodeState:
    """A node's answer to `read_script`, parsed."""

    uid: int | None = None
    boot_id: str = ""
    netns: str = ""
    cpus: str = ""
    values: dict[str, dict[str, str]] = field(default_factory=dict)    # key -> target -> value
    missing: dict[str, dict[str, str]] = field(default_factory=dict)   # key -> target -> why
    unwritable: set[tuple[str, str]] = field(default_factory=set)
    available: dict[str, list[str]] = field(default_factory=dict)
    peers: list[Peer] = field(default_factory=list)
    routes: list[str] = field(default_factory=list)
    mtu_range: dict[str, tuple[int, int]] = field(default_factory=dict)
    coalesce: dict[str, dict[str, str]] = field(default_factory=dict)  # interface -> word -> value

    @property
    def max_cpu(self) -> int | None:
        try:
            return max(parse_cpulist(self.cpus))
        except ValueError:
            return None


def parse_read(text: str) -> NodeState:
    """The records `read_script` prints -> NodeState. Unknown or short lines are skipped."""
    state = NodeState()
    for line in text.splitlines()[:MAX_ANSWER_LINES]:
        tag, _, rest = line.partition("\t")
        f = rest.split("\t")
        if tag == "U" and f[0].isdigit():
            state.uid = int(f[0])
        elif tag == "B":
            state.boot_id = f[0]
        elif tag == "N":
            state.netns = f[0]
        elif tag == "C":
            state.cpus = f[0]
        elif tag == "V" and len(f) >= 3:
            state.values.setdefault(f[0], {})[f[1]] = " ".join("\t".join(f[2:]).split())[:MAX_READ_CHARS]
        elif tag == "X" and len(f) >= 3:
            state.missing.setdefault(f[0], {})[f[1]] = f[2]
        elif tag == "W" and len(f) >= 2:
            state.unwritable.add((f[0], f[1]))
        elif tag == "A" and len(f) >= 2:
            state.available[f[0]] = f[1].split()
        elif tag == "P" and len(f) >= 3:
            state.peers.append(Peer(f[0], f[1], f[2]))
        elif tag == "T":
            state.routes.append(rest)
        elif tag == "L" and len(f) >= 2 and re.fullmatch(r"[0-9]+ [0-9]+", f[1]):
            lo, hi = (int(x) for x in f[1].split())
            if hi > 0:  # the loopback says 'minmtu 0 maxmtu 0': no limit given
                state.mtu_range[f[0]] = (lo, hi)
        elif tag == "K" and len(f) >= 2:
            state.coalesce.setdefault(f[0], {}).update(parse_coalesce(f[1]))
    return state


def parse_coalesce(text: str) -> dict[str, str]:
    """Lines of `ethtool -c` -> {'adaptive-rx': 'off', 'rx-usecs': '0', ...}; 'n/a' kept as is."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^Adaptive RX:\s*(\S+)\s+TX:\s*(\S+)", line)
        if m:
            out["adaptive-rx"], out["adaptive-tx"] = m.group(1), m.group(2)
            continue
        m = re.match(r"^([a-z][a-z-]*):\s*(\S+)\s*$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


# --- routes: which ones rto_min changes, and the line that changes them


_ROUTE_TYPES = {"unicast", "local", "broadcast", "multicast", "throw", "unreachable", "prohibit", "blackhole", "nat",
                "anycast"}
_ROUTE_FLAGS = {"linkdown", "dead", "offload", "trap", "rt_offload", "rt_trap", "rt_offload_failed", "pervasive",
                "notify"}


def route_network(line: str) -> ipaddress.IPv4Network | None:
    """The destination of an `ip -o route` line (None for a non-unicast or unparsable one)."""
    words = line.split()
    if words and words[0] == "unicast":
        words = words[1:]
    if not words or words[0] in _ROUTE_TYPES:
        return None
    dest = "0.0.0.0/0" if words[0] == "default" else words[0]
    try:
        return ipaddress.IPv4Network(dest, strict=False)
    except ValueError:
        return None


def route_dev(line: str) -> str:
    m = re.search(r"\bdev (\S+)", line)
    return m.group(1) if m else ""


def split_rto_min(line: str) -> tuple[str, str]:
    """'10.0.0.0/24 dev eth0 ... rto_min lock 5ms' -> ('10.0.0.0/24 dev eth0 ...', '5ms'): the route
    as `ip route change` takes it back (state flags dropped) and its rto_min ('' when not set).
    iproute2 prints 'lock' for rto_min but does not accept it back."""
    words, base, original = line.split(), [], ""
    i = 0
    while i < len(words):
        if words[i] == "rto_min":
            j = i + 1
            if j < len(words) and words[j] == "lock":
                j += 1
            original = words[j] if j < len(words) else ""
            i = j + 1
            continue
        if words[i] not in _ROUTE_FLAGS:
            base.append(words[i])
        i += 1
    return " ".join(base), original


def select_routes(state: NodeState, interface: str | None) -> list[str]:
    """The main-table routes a run uses: to each peer the most specific one, or the default route
    on a one-node run; with `interface`, every route through it."""
    routes = [(route_network(r), route_dev(r), r) for r in state.routes]
    routes = [r for r in routes if r[0] is not None]
    if interface:
        return [r[2] for r in routes if r[1] == interface]
    chosen: list[str] = []
    for peer in state.peers:
        if not peer.name:
            candidates = [r for r in routes if r[0].prefixlen == 0]
        else:
            try:
                address = ipaddress.IPv4Address(peer.address)
            except ValueError:
                continue
            candidates = [r for r in routes if address in r[0]]
        if candidates:
            best = max(candidates, key=lambda r: r[0].prefixlen)[2]
            if best not in chosen:
                chosen.append(best)
    return chosen


# --- planning: what a node would change, or why it cannot


@dataclass
class Item:
    """One change on one node: `target` is the sysctl, file, interface or route; `original` what
    it held before (what a restore writes back); `value` what the setting writes."""

    key: str
    kind: str
    target: str
    original: str
    value: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Item:
        fields = ("key", "kind", "target", "original", "value")
        if not isinstance(d, dict) or not all(isinstance(d.get(f), str) for f in fields):
            raise ValueError(f"not a journal item: {str(d)[:200]}")
        return cls(**{f: d[f] for f in fields})


def interfaces_of(state: NodeState, interface: str | None) -> list[str]:
    if interface:
        return [interface]
    out: list[str] = []
    for peer in state.peers:
        if peer.dev and peer.dev != "lo" and peer.dev not in out:
            out.append(peer.dev)
    return out


def _root_problem(state: NodeState) -> str:
    return f"needs root (the settings run as uid {state.uid} there)"


def plan_node(state: NodeState, settings: dict[str, str]) -> tuple[list[Item], list[str]]:
    """The changes `settings` makes on a node in `state`, in the order they are applied, and the
    reasons it cannot (each 'key=value: why'). Nothing is changed here."""
    items: list[Item] = []
    problems: list[str] = []
    interface = settings.get("interface")
    nics = interfaces_of(state, interface)
    for key, value in settings.items():
        t = lookup(key)
        if t.kind in ("env", "interface"):
            continue
        say = f"{key}={value}: "
        if state.uid is None:
            problems.append(say + "the node gave no answer to the read script")
            continue
        if t.needs_root and state.uid != 0:
            problems.append(say + _root_problem(state))
            continue
        if t.kind in NIC_KINDS and not nics:
            problems.append(say + _no_interface(state))
            continue
        try:
            items += _plan_key(state, t, key, value, nics, interface)
        except ValueError as exc:
            problems.append(say + str(exc))
    return items, problems


def _no_interface(state: NodeState) -> str:
    unresolved = [p.name or "the default route" for p in state.peers if not p.dev]
    if unresolved:
        return (f"cannot tell which interface leads to {', '.join(unresolved)} (no address or route); "
                "name it with interface:")
    return "no interface found for the run's routes; name it with interface:"


def _targets(state: NodeState, key: str, nic: str | None = None) -> dict[str, str]:
    """A key's targets (those of interface `nic` only, if given): ValueError if missing or not
    writable there."""
    def mine(target: str) -> bool:
        return nic is None or target == nic or target.startswith(f"/sys/class/net/{nic}/")

    missing = {t: why for t, why in state.missing.get(key, {}).items() if mine(t)}
    if missing:
        target, why = next(iter(missing.items()))
        raise ValueError(f"{target}: {why}" if target else why)
    found = {t: v for t, v in state.values.get(key, {}).items() if mine(t)}
    for target in found:
        if (key, target) in state.unwritable:
            raise ValueError(f"{target} is not writable here (a read-only /proc or /sys?)")
    return found


def _plan_key(state: NodeState, t: Tunable, key: str, value: str, nics: list[str],
              interface: str | None) -> list[Item]:
    kind = t.kind
    for nic in nics if kind in NIC_KINDS else []:
        if nic in state.missing.get("interface", {}):
            raise ValueError(f"{nic}: no such interface")
    if kind == "sysctl":
        name = key[len("sysctl."):]
        found = _targets(state, key)
        if name not in found:
            raise ValueError(f"no {name} on this kernel")
        avail = state.available.get(key)
        if avail is not None and value not in avail:
            raise ValueError(f"not available here (available: {' '.join(avail) or 'none'})")
        return [Item(key, kind, name, found[name], value)]
    if kind == "thp":
        found = _targets(state, key)
        current = re.search(r"\[(\w+)\]", found.get(THP_PATH, ""))
        if not current:
            raise ValueError(f"cannot read the current mode from {THP_PATH}")
        return [Item(key, kind, THP_PATH, current.group(1), value)]
    if kind == "governor":
        found = _targets(state, key)
        avail = state.available.get("governor") or []
        if value not in avail:
            raise ValueError(f"not available here (available: {' '.join(avail) or 'none'})")
        return [Item(key, kind, path, old, value) for path, old in sorted(found.items())]
    items = []
    if kind == "mtu":
        for nic in nics:
            found = _targets(state, key, nic)
            if nic not in found:
                raise ValueError(f"cannot read the MTU of {nic}")
            lo, hi = state.mtu_range.get(nic, (68, 65535))
            if not lo <= int(value) <= hi:
                raise ValueError(f"{nic} takes an MTU from {lo} to {hi}")
            items.append(Item(key, kind, nic, found[nic], value))
    elif kind in ("rps", "rps_flow_cnt"):
        for nic in nics:
            found = _targets(state, key, nic)
            if not found:
                raise ValueError(f"{nic} has no rx queue with {'rps_cpus' if kind == 'rps' else kind}")
            write = value
            if kind == "rps":
                cpus = [] if value == "off" else parse_cpulist(value)
                top = state.max_cpu
                if cpus and top is not None and max(cpus) > top:
                    raise ValueError(f"CPU {max(cpus)} does not exist here (CPUs {state.cpus})")
                write = cpu_mask(cpus)
            items += [Item(key, kind, path, old, write) for path, old in sorted(found.items())]
    elif kind == "coalesce":
        word = key[len("coalesce."):]
        for nic in nics:
            _targets(state, "coalesce", nic)
            old = state.coalesce.get(nic, {}).get(word)
            if old is None or old == "n/a":
                raise ValueError(f"the driver of {nic} has no {word} (ethtool -c)")
            items.append(Item(key, kind, nic, old, value))
    elif kind == "rto_min":
        routes = select_routes(state, interface)
        if not routes:
            raise ValueError("no route in the main table leads to the run's nodes"
                             + (f" through {interface}" if interface else ""))
        for line in routes:
            base, old = split_rto_min(line)
            items.append(Item(key, kind, base, old, value))
    return items


# --- (b), (c) changing: apply a value or restore an original, with every word quoted


_CHANGE_FUNCS = r"""STOP=%d
put() { printf '%%s\n' "$2" > "$1"; }
step() {
  local i=$1 err; shift
  if err=$("$@" 2>&1); then out R "$i" ok
  else out R "$i" fail "$(clean "$err")"; [ "$STOP" = 1 ] && exit 0; fi
  return 0
}
"""


def _checked_text(item: Item, text: str) -> str:
    if len(text) > MAX_READ_CHARS or _CONTROL.search(text):
        raise ValueError(f"{item.key}: a value with control characters or too long for {item.target}")
    return text


def change_command(item: Item, text: str) -> list[str]:
    """The argv that sets `item.target` to `text` (the value, or the original on a restore).
    Targets are checked against what the kinds may touch, so a tampered journal cannot point a
    write anywhere else."""
    kind, target = item.kind, item.target
    text = _checked_text(item, text)
    if lookup(item.key).kind != kind:
        raise ValueError(f"{item.key}: kind {kind!r} does not match the allow-list")
    if kind == "sysctl":
        if item.key != f"sysctl.{target}":
            raise ValueError(f"{item.key}: target {target!r} is not its sysctl")
        return ["put", sysctl_path(target), text]
    if kind == "thp" and target == THP_PATH:
        return ["put", target, text]
    if kind == "governor" and _GOVERNOR_PATH.match(target):
        return ["put", target, text]
    if kind in ("rps", "rps_flow_cnt"):
        m = _RPS_PATH.match(target)
        if m and m.group(2) == ("rps_cpus" if kind == "rps" else "rps_flow_cnt"):
            return ["put", target, text]
    if kind == "mtu" and IFNAME_RE.match(target) and text.isdigit():
        return ["ip", "link", "set", "dev", target, "mtu", text]
    if kind == "coalesce" and IFNAME_RE.match(target) and re.fullmatch(r"[a-z0-9]{1,12}", text):
        return ["ethtool", "-C", target, item.key[len("coalesce."):], text]
    if kind == "rto_min":
        words = target.split()
        if words and all(_ROUTE_WORD.match(w) for w in words) and "rto_min" not in words:
            extra = ["rto_min", f"{duration_ms(text)}ms"] if text else []
            return ["ip", "route", "change", *words, *extra]
    raise ValueError(f"{item.key}: will not change {target!r}")


def change_script(items: list[Item], restore: bool = False) -> str:
    """Bash that applies the items' values in order, stopping at the first failure, or (restore)
    writes back their originals in reverse order, trying every one. Prints `R <index> ok|fail why`."""
    order = list(enumerate(items))
    if restore:
        order.reverse()
    lines = [_PRELUDE, _CHANGE_FUNCS % (0 if restore else 1)]
    for i, item in order:
        argv = change_command(item, item.original if restore else item.value)
        lines.append(f"step {i} " + " ".join(shlex.quote(a) for a in argv))
    lines.append("exit 0")
    return "\n".join(lines) + "\n"


def parse_results(text: str, count: int) -> dict[int, str | None]:
    """`R` records -> {index: None if done, else why not}; an index with no record is missing."""
    out: dict[int, str | None] = {}
    for line in text.splitlines()[:MAX_ANSWER_LINES]:
        f = line.split("\t")
        if len(f) >= 3 and f[0] == "R" and f[1].isdigit() and int(f[1]) < count:
            out[int(f[1])] = None if f[2] == "ok" else (f[3] if len(f) > 3 else "failed")
    return out


def describe(item: Item, restore: bool = False) -> str:
    """'mtu=1500 (eth0)', 'rto_min=(none) (10.0.0.0/24 dev eth0 ...)': for messages."""
    text = (item.original if restore else item.value) or "(none)"
    where = "" if item.kind in ("sysctl", "thp") else f" ({item.target})"
    return f"{item.key}={text}{where}"
