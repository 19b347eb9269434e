"""One node's state answer as structured facts, and those facts as dotted keys for `diff`.

`parse_state` never raises on a node's answer: a missing section is "absent", garbage is skipped,
a huge answer is clipped (and the facts' notes say so). The facts are JSON-able dicts of strings
(numbers only under "measured"), so they store as they are and compare key by key.

`flatten` gives keys such as "nic.eth0.mtu", "tcp.sack", "route.10.77.0.12.rto_min",
"kernel.preempt", "mpi.openmpi.btl_tcp_eager_limit"; values that change on every run (the
measured clock, how long the collection took) sit under "measured." so that a diff can show them
apart or within a tolerance. `SECTIONS` names the diff section of each first key part.
"""

from __future__ import annotations

import math
import re

from clusterbench.system.microarch import estimate_peak
from clusterbench.system.sources import from_lscpu_text
from clusterbench.system.state_nic import nic_facts, route_facts
from clusterbench.system.state_text import ABSENT, MAX_KEYS, Sections, clip, files_of, summarise
from clusterbench.system.topology import parse_cpulist

FORMAT = 1
SECTIONS: dict[str, str] = {
    "kernel": "software",
    "mpi": "mpi",
    "cpu": "settings",
    "memory": "settings",
    "net": "settings",
    "tcp": "settings",
    "nic": "settings",
    "route": "settings",
    "clock": "hardware",
    "measured": "measured",
    "notes": "measured",
}
MAX_FLAT_KEYS = 20_000

# Kernel command-line parameters that change how a benchmark runs (the rest is not recorded:
# a command line can carry anything, and most of it is noise for a diff).
CMDLINE_KEYS = ("preempt", "isolcpus", "nohz_full", "nohz", "rcu_nocbs", "irqaffinity", "threadirqs", "nosmt",
                "mitigations", "transparent_hugepage", "numa_balancing", "hugepages", "hugepagesz",
                "default_hugepagesz", "intel_pstate", "amd_pstate", "cpufreq.default_governor", "idle",
                "processor.max_cstate", "intel_idle.max_cstate", "skew_tick", "nosoftlockup", "audit")
_CPUFREQ = ("scaling_driver", "scaling_governor", "scaling_min_freq", "scaling_max_freq", "cpuinfo_min_freq",
            "cpuinfo_max_freq")
_TCP = {"sack": "tcp_sack", "timestamps": "tcp_timestamps", "rmem": "tcp_rmem", "wmem": "tcp_wmem",
        "congestion_control": "tcp_congestion_control"}


def parse_state(text: str, host: str) -> dict:
    """The JSON-able facts of one node from its `state_script` answer; bounded, never raises."""
    sec = Sections.split(text if isinstance(text, str) else "")
    files = files_of(sec.lines("files"))
    state: dict = {"host": clip(str(host), 256), "format": FORMAT,
                   "kernel": _kernel(files, sec.lines("bootconfig") or []),
                   "cpu": _cpu(files), "memory": _memory(files)}
    state["net"] = {"rps_sock_flow_entries": files.get("/proc/sys/net/core/rps_sock_flow_entries", ABSENT)}
    state["tcp"] = {key: files.get(f"/proc/sys/net/ipv4/{name}", ABSENT) for key, name in _TCP.items()}
    state["tcp"] |= {m: files.get(f"/proc/sys/net/core/{m}", ABSENT) for m in ("rmem_max", "wmem_max")}
    state["nic"] = nic_facts(sec, files)
    state["route"] = route_facts(sec)
    mpi, ompi_measured = _mpi(sec)
    state["mpi"] = mpi
    measured: dict = {"collect": _timing(sec.lines("timing") or [], sec.lines("clock") is not None) | ompi_measured}
    if sec.lines("clock") is not None:
        state["clock"], clock = _clock(sec)
        if clock:
            measured["clock"] = clock
    state["measured"] = measured
    state["notes"] = list(sec.notes)
    return state


# --------------------------------------------------------------------------- kernel, CPU, memory

def _kernel(files: dict[str, str], bootconfig: list[str]) -> dict:
    version = files.get("/proc/sys/kernel/version", ABSENT)
    cmdline = _cmdline(files.get("/proc/cmdline", ""))
    config = {}
    for line in bootconfig[:64]:
        key, sep, value = line.partition("=")
        if sep and re.fullmatch(r"CONFIG_[A-Z0-9_]{1,64}", key):
            config[key] = clip(value, 64)
    preempt, source = _preempt(files.get("/sys/kernel/debug/sched/preempt"), cmdline, config, version)
    return {"release": files.get("/proc/sys/kernel/osrelease", ABSENT), "version": version,
            "preempt": preempt, "preempt_source": source, "cmdline": cmdline, "config": config or ABSENT}


def _cmdline(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for token in text.split()[:1024]:
        if token == "--":  # what follows goes to init, not to the kernel
            break
        key, sep, value = token.partition("=")
        if key in CMDLINE_KEYS:
            out[key] = clip(value) if sep else "on"
    return out


def _preempt(debug: str | None, cmdline: dict[str, str], config: dict[str, str], version: str) -> tuple[str, str]:
    """The preemption model in use, and how it is known (most direct source first)."""
    if debug:
        chosen = re.search(r"\((\w+)\)", debug)
        if chosen:
            return chosen[1], "/sys/kernel/debug/sched/preempt"
    words = set(version.split())
    dynamic = "PREEMPT_DYNAMIC" in words or config.get("CONFIG_PREEMPT_DYNAMIC") == "y"
    if dynamic and cmdline.get("preempt"):
        return cmdline["preempt"], "preempt= on the kernel command line (PREEMPT_DYNAMIC kernel)"
    for option, mode in (("CONFIG_PREEMPT_RT", "rt"), ("CONFIG_PREEMPT_LAZY", "lazy"), ("CONFIG_PREEMPT", "full"),
                         ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"), ("CONFIG_PREEMPT_NONE", "none")):
        if config.get(option) == "y":
            return mode, "/boot/config" + (" (the default of a PREEMPT_DYNAMIC kernel)" if dynamic else "")
    for word, mode in (("PREEMPT_RT", "rt"), ("PREEMPT_LAZY", "lazy"), ("PREEMPT_DYNAMIC", "dynamic"),
                       ("PREEMPT", "full")):
        if word in words:
            note = ("; which mode is in use needs /sys/kernel/debug/sched/preempt (root, debugfs) or "
                    "/boot/config" if mode == "dynamic" else "")
            return mode, f"uname -v says {word}{note}"
    if version == ABSENT:
        return ABSENT, "no kernel version read"
    return "none or voluntary", "uname -v names no PREEMPT model, and there is no /boot/config to tell which"


def _cpu(files: dict[str, str]) -> dict:
    smt = {leaf: files.get(f"/sys/devices/system/cpu/smt/{leaf}", ABSENT) for leaf in ("control", "active")}
    return {"online": files.get("/sys/devices/system/cpu/online", ABSENT), "smt": smt, "cpufreq": _cpufreq(files)}


def _cpufreq(files: dict[str, str]) -> dict[str, str] | str:
    """Each cpufreq setting summarised over the CPUs (policies list the CPUs they govern)."""
    prefix = "/sys/devices/system/cpu/cpufreq/policy"
    policies: dict[str, dict[str, str]] = {}
    for path, value in files.items():
        if path.startswith(prefix):
            policy, _, leaf = path[len(prefix):].partition("/")
            if policy.isdigit() and len(policies) < 65536:
                policies.setdefault(policy, {})[leaf] = value
    if not policies:
        return ABSENT
    out: dict[str, str] = {}
    for leaf in _CPUFREQ:
        by_cpu: dict[int, str] = {}
        for policy, values in policies.items():
            try:
                cpus = parse_cpulist(values.get("affected_cpus", policy).replace(" ", ","))
            except ValueError:
                cpus = [int(policy)] if len(policy) < 6 else []
            for cpu in cpus:
                by_cpu[cpu] = values.get(leaf, "unreadable")
        key = leaf.replace("_freq", "_freq_khz")
        out[key] = summarise(by_cpu)
    return out


def _memory(files: dict[str, str]) -> dict[str, str]:
    def chosen(text: str | None) -> str:
        match = re.search(r"\[([^\]]+)\]", text or "")
        return match[1] if match else (text or ABSENT)

    thp = "/sys/kernel/mm/transparent_hugepage/"
    return {"thp_enabled": chosen(files.get(thp + "enabled")), "thp_defrag": chosen(files.get(thp + "defrag")),
            "numa_balancing": files.get("/proc/sys/kernel/numa_balancing", ABSENT)}


# --------------------------------------------------------------------------- MPI

def _mpi(sec: Sections) -> tuple[dict, dict]:
    """MPI variables, MCA parameter files, and Open MPI's non-default parameters and limits."""
    env = {}
    for line in (sec.lines("mpienv") or [])[:MAX_KEYS]:
        name, sep, value = line.partition("=")
        if sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", name):
            env[name] = clip(value, 1024)
    conf: dict[str, dict[str, str]] = {}
    for path in sec.args("mpiconf")[:8]:
        params = {}
        for line in (sec.lines("mpiconf", path) or [])[:MAX_KEYS]:
            key, sep, value = line.split("#", 1)[0].partition("=")
            if sep and key.strip():
                params[clip(key.strip(), 128)] = clip(value.strip())
        conf[path] = params
    mpi: dict = {"env": env, "conf": conf}
    measured: dict = {}
    lines = sec.lines("ompi_info")
    if not lines or lines[0] == ABSENT:
        mpi["openmpi"] = ABSENT if lines else "not read"
        return mpi, measured
    measured["ompi_info_cache"] = lines[0].removeprefix("cache ")
    params: dict[str, str] = {}
    sources: dict[str, str] = {}
    for line in lines[1:MAX_KEYS * 4]:
        parts = line.split("\t")
        if parts[0] == "version" and len(parts) == 2:
            mpi["openmpi_version"] = clip(parts[1], 64)
        elif line.startswith("seconds "):
            measured["ompi_info_seconds"] = _elapsed(line.split()[1:3])
        elif len(parts) == 3 and re.fullmatch(r"[a-z0-9_]{1,128}", parts[0]) and len(params) < MAX_KEYS * 2:
            params[parts[0]] = clip(parts[1])
            sources[parts[0]] = clip(parts[2])
    mpi["openmpi"] = params
    mpi["openmpi_source"] = sources
    return mpi, measured


# --------------------------------------------------------------------------- clock and timing

def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and 0 <= value < 1e12 else None


def _elapsed(pair: list[str]) -> float | None:
    if len(pair) != 2:
        return None
    start, end = _number(pair[0]), _number(pair[1])
    return round(end - start, 4) if start is not None and end is not None and end >= start else None


def _timing(lines: list[str], clocked: bool) -> dict:
    """How long the collection took on the node, and the clock kernel after it."""
    marks = {}
    for line in lines[:8]:
        name, _, value = line.partition(" ")
        marks[name] = value.strip()
    out = {}
    collect = _elapsed([marks.get("start", ""), marks.get("collected", "")])
    if collect is not None:
        out["seconds"] = collect
    clock = _elapsed([marks.get("collected", ""), marks.get("end", "")])
    if clock is not None and clocked:
        out["clock_seconds"] = clock
    return out


def _clock(sec: Sections) -> tuple[dict, dict]:
    """The fmaclock answer: (how it was measured, what it measured).

    GHz = the best slice's Gflop/s on one core / the core's DP flops per cycle (system.microarch,
    the same figure Rpeak uses), so efficiency can be stated against a measured peak too."""
    lines = sec.lines("clock") or []
    raw = {}
    for line in lines[:32]:
        key, _, value = line.partition(" ")
        raw[key] = value.strip()
    if "missing" in raw:
        return {"status": "binary missing: " + clip(raw["missing"])}, {}
    if raw.get("exit") != "0" or _number(raw.get("gflops", "")) is None:
        tail = clip(" | ".join(lines[-3:]), 300)
        return {"status": f"failed (exit {clip(raw.get('exit', '?'), 16)}): {tail}"}, {}
    method = {"status": "measured", "kernel": "fmaclock"}
    for key in ("vector_doubles", "chains", "flops_per_iteration", "fma", "cpu"):
        if raw.get(key, "").isdigit() and len(raw[key]) < 8:
            method[key] = raw[key]
    gflops = _number(raw["gflops"])
    measured = {"gflops": gflops, "gflops_mean": _number(raw.get("gflops_mean", "")),
                "seconds": _number(raw.get("seconds", ""))}
    topology = None
    if sec.lines("lscpu"):
        try:
            topology = from_lscpu_text("\n".join(sec.lines("lscpu")[:200]), source="lscpu (node state)")
        except (KeyError, ValueError) as exc:
            sec.note(f"lscpu not understood: {clip(str(exc), 100)}")
    if topology is None:
        method["flops_per_cycle"] = "unknown (no lscpu answer)"
        return method, {k: v for k, v in measured.items() if v is not None}
    peak = estimate_peak(topology)
    method["flops_per_cycle_reason"] = clip(peak.flops_reason)
    if peak.frequency_mhz:
        method["nominal_mhz"] = f"{peak.frequency_mhz:g}"
    width = 8 if "avx512f" in topology.flags else 4 if "avx2" in topology.flags else None
    if width and method.get("vector_doubles", "").isdigit() and int(method["vector_doubles"]) < width:
        sec.note(f"fmaclock was built for {method['vector_doubles']}-double vectors but the CPU has "
                 f"{width}: the measured clock is too low (rebuild with -march=native on this CPU)")
    if not peak.flops_per_cycle:
        method["flops_per_cycle"] = "unknown"
        return method, {k: v for k, v in measured.items() if v is not None}
    fpc = peak.flops_per_cycle
    method["flops_per_cycle"] = str(fpc)
    ghz = gflops / fpc
    measured |= {"ghz": round(ghz, 6), "rpeak_gflops": round(gflops * topology.cores_total, 2),
                 "derivation": f"{gflops:.2f} Gflop/s on one core / {fpc} DP flops per cycle = {ghz:.3f} GHz; "
                               f"x {topology.cores_total} cores = {gflops * topology.cores_total:.1f} Gflop/s"}
    return method, {k: v for k, v in measured.items() if v is not None}


# --------------------------------------------------------------------------- flatten

def flatten(state: dict) -> dict[str, str]:
    """Dotted keys -> text, for diffs: {"nic.eth0.mtu": "1500", "measured.clock.ghz": "2.74", ...}.

    "host" and "format" are the facts' identity, not facts, and are left out."""
    out: dict[str, str] = {}

    def walk(prefix: str, value: object, depth: int) -> None:
        if len(out) >= MAX_FLAT_KEYS:
            return
        if isinstance(value, dict) and depth < 8:
            if not value:
                out[prefix] = "none"
            for key, item in value.items():
                walk(f"{prefix}.{key}", item, depth + 1)
        elif isinstance(value, list) and depth < 8:
            for i, item in enumerate(value[:MAX_KEYS]):
                walk(f"{prefix}.{i}", item, depth + 1)
        else:
            out[prefix] = _text(value)

    if isinstance(state, dict):
        for key, value in state.items():
            if key not in ("host", "format"):
                walk(str(key), value, 1)
    return out


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if value is None:
        return ABSENT
    return clip(str(value), 2048)
