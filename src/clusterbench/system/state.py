"""A node's system state as structured facts: the bash script that reads it, in one ssh round trip.

Two runs that differ in MTU, interrupt coalescing, rto_min, SACK, the Open MPI eager limit, the
CPU governor or the kernel's preemption model used to look identical in the store. The executor
runs `state_script(...)` on every node of a run before it starts (through
`launch.remote.run_everywhere`, one round trip for all of it) and stores `parse_state(answer)`;
`flatten` turns it into dotted keys that `clusterbench diff` compares.

The script only reads: sysfs/procfs through one `grep -sH`, `ethtool -i/-c/-k/-g` per NIC, `ip
route`, and `ompi_info`. Anything missing (no cpufreq in a VM, no ethtool, no ompi_info, a
debugfs file only root may read) is printed as nothing and recorded as absent, never an error.
It stays fast because it is paid before every run: `ompi_info` (about 0.25 s) is cached on the
node under `${XDG_CACHE_HOME:-$HOME/.cache}/clusterbench/`, keyed by a hash of the binary's path,
size and mtime, the MCA parameter files' content and the MPI variables in the environment.

Every value substituted into the script is shell-quoted, and peers and variable names are
checked first: a peer named `$(touch /tmp/x)` is refused, and would run nothing if it were not.
The parser lives in `state_parse` (sections, kernel, CPU, MPI, clock) and `state_nic` (NICs,
interrupts, routes); this module re-exports its interface.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from collections.abc import Mapping, Sequence

from clusterbench.errors import UserInputError
from clusterbench.system.state_parse import SECTIONS, flatten, parse_state

__all__ = ["SECTIONS", "flatten", "parse_state", "state_script", "MPI_PREFIXES"]

# The variables that change what an MPI library does; the rest of a run's environment is
# stored by the executor already, and exporting it here (PATH, LD_PRELOAD) could change what
# this script runs.
MPI_PREFIXES = ("OMPI_MCA_", "MPIR_CVAR_", "PMIX_MCA_", "PRTE_MCA_")
MAX_PEERS = 256
MAX_MPI_VARS = 256
MAX_MPI_VALUE_CHARS = 4096
MAX_NICS = 32  # ethtool costs four processes per NIC; a host with 500 veths must not take seconds
CLOCK_MS_RANGE = (10, 5000)

_HOSTNAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?")
_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")

# One grep reads all the single-value files: each answer line is "path:value".
_FILES = [
    "/proc/sys/kernel/osrelease", "/proc/sys/kernel/version", "/proc/cmdline",
    "/sys/kernel/debug/sched/preempt",
    "/sys/devices/system/cpu/online", "/sys/devices/system/cpu/smt/control", "/sys/devices/system/cpu/smt/active",
    "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/kernel/mm/transparent_hugepage/defrag",
    "/proc/sys/kernel/numa_balancing",
    "/proc/sys/net/ipv4/tcp_sack", "/proc/sys/net/ipv4/tcp_timestamps", "/proc/sys/net/ipv4/tcp_rmem",
    "/proc/sys/net/ipv4/tcp_wmem", "/proc/sys/net/ipv4/tcp_congestion_control",
    "/proc/sys/net/core/rmem_max", "/proc/sys/net/core/wmem_max", "/proc/sys/net/core/rps_sock_flow_entries",
]
# Globs, expanded by bash on the node (an unmatched one stays literal and grep -s ignores it).
_GLOBS = [
    "/sys/devices/system/cpu/cpufreq/policy*/{affected_cpus,scaling_driver,scaling_governor,"
    "scaling_min_freq,scaling_max_freq,cpuinfo_min_freq,cpuinfo_max_freq}",
    "/sys/class/net/*/{mtu,speed,duplex,operstate,tx_queue_len}",
    "/sys/class/net/*/queues/rx-*/{rps_cpus,rps_flow_cnt}",
]

# /proc/interrupts without the per-CPU counts (they grow with the CPU count and change every
# second), each IRQ with its smp_affinity_list: "irq<TAB>affinity<TAB>chip and name".
_INTERRUPTS_AWK = r"""NR > 1 && NR < 8192 && $1 ~ /^[0-9]+:$/ {
  n = substr($1, 1, length($1) - 1); name = ""
  for (i = 2; i <= NF; i++) if ($i !~ /^[0-9]+$/) name = name " " $i
  a = "-"; f = "/proc/irq/" n "/smp_affinity_list"
  if ((getline line < f) > 0) a = line
  close(f); print n "\t" a "\t" substr(name, 2) }"""

# From `ompi_info --parsable --all --level 9` (600 kB) keep the version, every parameter whose
# source is not "default", and the limits and selections a study wants to see even at their
# defaults: "name<TAB>value<TAB>source".
_OMPI_AWK = r"""BEGIN { FS = ":" }
$1 == "ompi" && $2 == "version" && $3 == "full" { print "version\t" $4 }
$1 == "mca" && $4 == "param" && ($6 == "value" || $6 == "source") {
  p = $1 ":" $2 ":" $3 ":" $4 ":" $5 ":" $6 ":"; v = substr($0, length(p) + 1)
  if ($6 == "value") { if (!($5 in val)) order[++n] = $5; val[$5] = v } else src[$5] = v }
END { for (i = 1; i <= n; i++) { k = order[i]
  if (src[k] != "default" || k ~ KEEP) print k "\t" val[k] "\t" src[k] } }"""
OMPI_ALWAYS = (r"^(btl|pml|mtl|coll|osc)$|^btl_(tcp|vader|sm|self)_(eager_limit|rndv_eager_limit|max_send_size|"
               r"links|sndbuf|rcvbuf|if_include|if_exclude)$")


def _checked_peers(peers: Sequence[str]) -> list[str]:
    if isinstance(peers, str):
        raise UserInputError("peers must be a list of host names or addresses, not one string")
    if len(peers) > MAX_PEERS:
        raise UserInputError(f"{len(peers)} peers given for the route facts; at most {MAX_PEERS}",
                             hint="record the routes to a sample of the nodes")
    out: list[str] = []
    for peer in peers:
        if not isinstance(peer, str) or not (_is_ip(peer) or _HOSTNAME.fullmatch(peer)):
            raise UserInputError(f"peer {str(peer)[:80]!r} is neither a host name nor an IP address",
                                 hint="host names use letters, digits, '.', '-' and '_'")
        if peer not in out:
            out.append(peer)
    return out


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _checked_env(mpi_env: Mapping[str, str]) -> dict[str, str]:
    """The MPI variables of the run; other names are left out (see MPI_PREFIXES)."""
    chosen = {k: v for k, v in mpi_env.items() if isinstance(k, str) and k.startswith(MPI_PREFIXES)}
    if len(chosen) > MAX_MPI_VARS:
        raise UserInputError(f"{len(chosen)} MPI variables given; at most {MAX_MPI_VARS}")
    for name, value in chosen.items():
        if not _VAR.fullmatch(name):
            raise UserInputError(f"MPI variable name {name[:80]!r} is not a valid environment variable name")
        if not isinstance(value, str) or len(value) > MAX_MPI_VALUE_CHARS or "\0" in value:
            raise UserInputError(f"the value of {name} is not a string of at most {MAX_MPI_VALUE_CHARS} "
                                 "characters without NUL")
    return chosen


def _checked_clock(clock_binary: str | None, clock_ms: int) -> None:
    lo, hi = CLOCK_MS_RANGE
    if isinstance(clock_ms, bool) or not isinstance(clock_ms, int) or not lo <= clock_ms <= hi:
        raise UserInputError(f"clock_ms must be a whole number of milliseconds in {lo}..{hi}, not {clock_ms!r}")
    if clock_binary is not None and (not isinstance(clock_binary, str) or not clock_binary
                                     or "\0" in clock_binary or len(clock_binary) > 4096):
        raise UserInputError("clock_binary must be a path")


def state_script(mpi_env: Mapping[str, str] = {},  # noqa: B006 - read only, never mutated
                 peers: Sequence[str] = (), clock_binary: str | None = None, clock_ms: int = 100) -> str:
    """The bash script that prints one node's state as `@@cb:<section> [arg]` blocks.

    `mpi_env`: the run's OMPI_MCA_*/MPIR_CVAR_*/PMIX_MCA_*/PRTE_MCA_* variables (others are
    ignored), exported before `ompi_info` so it reports what the run will see. `peers`: the
    other nodes of the run, whose routes (and rto_min) are recorded. `clock_binary`: the
    fmaclock kernel (`native.build.clock_binary()`), run for `clock_ms` ms when given."""
    env = _checked_env(mpi_env)
    hosts = _checked_peers(peers)
    _checked_clock(clock_binary, clock_ms)
    return _script(env, hosts, clock_binary, clock_ms)


def _script(env: Mapping[str, str], peers: Sequence[str], clock_binary: str | None, clock_ms: int) -> str:
    """The script for already-checked inputs; every value is still quoted (defence in depth)."""
    q = shlex.quote
    lines = ["export LC_ALL=C", "t0=$EPOCHREALTIME"]
    lines += [f"export {name}={q(value)}" for name, value in env.items()]
    lines += [
        "echo @@cb:files",
        "grep -sH . " + " ".join(_FILES) + " " + " ".join(_GLOBS),
        "read -r release < /proc/sys/kernel/osrelease",
        "echo @@cb:bootconfig",
        "grep -sE '^CONFIG_(PREEMPT[A-Z_]*|HZ)=' \"/boot/config-$release\"",
        "echo @@cb:nics",
        "find /sys/class/net -mindepth 1 -maxdepth 1 -printf '%f %l\\n' 2>/dev/null",
        "if command -v ethtool >/dev/null 2>&1; then",
        "  n=0; for d in /sys/class/net/*; do nic=${d##*/}; [ \"$nic\" = lo ] && continue",
        f"    n=$((n + 1)); if [ $n -gt {MAX_NICS} ]; then echo @@cb:ethtool_clipped; break; fi",
        "    for o in i c k g; do echo \"@@cb:ethtool_$o $nic\"; ethtool -$o \"$nic\" 2>&1; done",
        "  done",
        "else echo @@cb:ethtool_absent; fi",
        "echo @@cb:interrupts",
        f"awk {q(_INTERRUPTS_AWK)} /proc/interrupts 2>/dev/null",
        "echo @@cb:routes",
        "ip route show 2>&1",
    ]
    for peer in peers:
        if _is_ip(peer):
            lines.append(f"addr={q(peer)}")
        else:
            lines.append(f"addr=; read -r addr _ < <(getent ahostsv4 {q(peer)} 2>/dev/null)")
        lines += [f"echo {q('@@cb:route_get ' + peer)}; echo \"address ${{addr:-unresolved}}\"",
                  "[ -n \"$addr\" ] && ip route get \"$addr\" 2>&1"]
    lines += _mpi_lines()
    lines.append("t1=$EPOCHREALTIME")
    if clock_binary is not None:
        lines += ["echo @@cb:lscpu", "lscpu 2>/dev/null", "echo @@cb:clock",
                  f"if [ -x {q(clock_binary)} ]; then {q(clock_binary)} --ms {int(clock_ms)} 2>&1; echo \"exit $?\"",
                  f"else echo missing {q(clock_binary)}; fi"]
    lines += ["echo @@cb:timing", "echo \"start $t0\"; echo \"collected $t1\"; echo \"end $EPOCHREALTIME\"",
              "echo @@cb:end"]
    return "\n".join(lines) + "\n"


def _mpi_lines() -> list[str]:
    """MPI variables as the node has them, MCA parameter files, and ompi_info through its cache."""
    prefixes = " ".join(f"${{!{p}@}}" for p in MPI_PREFIXES)
    return [
        "echo @@cb:mpienv",
        "nl=$'\\n'",
        f"for v in {prefixes}; do val=${{!v}}; printf '%s=%s\\n' \"$v\" \"${{val//$nl/\\\\n}}\"; done",
        "oi=$(command -v ompi_info)",
        "confs=(/etc/openmpi/openmpi-mca-params.conf)",
        "prefix=${oi%/bin/*}",
        "[ -n \"$oi\" ] && [ \"$prefix/etc\" != /etc/openmpi ] && confs+=(\"$prefix/etc/openmpi-mca-params.conf\")",
        "confs+=(\"$HOME/.openmpi/mca-params.conf\")",
        "for f in \"${confs[@]}\"; do [ -r \"$f\" ] && { echo \"@@cb:mpiconf $f\"; head -c 65536 \"$f\"; echo; }; done",
        "echo @@cb:ompi_info",
        "if [ -n \"$oi\" ]; then",
        "  key=$( { echo \"$oi\"; stat -Lc '%s %Y' \"$oi\"; for f in \"${confs[@]}\"; do echo \"== $f\";"
        " cat \"$f\" 2>/dev/null; done;"
        f" for v in {prefixes}; do echo \"$v=${{!v}}\"; done; }} | sha256sum)",
        "  dir=${XDG_CACHE_HOME:-$HOME/.cache}/clusterbench; cf=\"$dir/ompi_info-${key:0:24}.txt\"",
        "  if [ -s \"$cf\" ]; then echo 'cache hit'; cat \"$cf\"",
        "  else",
        "    echo 'cache miss'; m0=$EPOCHREALTIME",
        "    out=$(set -o pipefail; ompi_info --parsable --all --level 9 2>/dev/null |"
        f" awk -v KEEP={shlex.quote(OMPI_ALWAYS)} {shlex.quote(_OMPI_AWK)}); rc=$?",
        "    echo \"seconds $m0 $EPOCHREALTIME\"; printf '%s\\n' \"$out\"",
        "    if [ $rc = 0 ] && [ -n \"$out\" ] && mkdir -p \"$dir\" 2>/dev/null; then",
        "      find \"$dir\" -maxdepth 1 -name 'ompi_info-*.txt' -mtime +30 -delete 2>/dev/null",
        "      printf '%s\\n' \"$out\" > \"$cf.$$\" 2>/dev/null && mv -f \"$cf.$$\" \"$cf\" 2>/dev/null",
        "      rm -f \"$cf.$$\" 2>/dev/null",
        "    fi",
        "  fi",
        "else echo absent; fi",
    ]
