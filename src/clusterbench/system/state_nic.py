"""The network part of a node's state: per NIC settings, the IRQs of its queues, and routes.

Parsed from the `state_script` answer (see `state`): sysfs values through `grep -sH`, `ethtool
-i/-c/-k/-g`, `/proc/interrupts` with each IRQ's smp_affinity_list, `ip route show` and `ip route
get ADDR` per peer. `ethtool` answers differ by driver (a veth has no coalescing or rings, a
virtio NIC no speed), so every field that a driver does not report is left out rather than
invented, and a whole command the driver refuses is recorded as "unsupported".
"""

from __future__ import annotations

import ipaddress
import re

from clusterbench.system.state_text import (
    ABSENT,
    MAX_KEYS,
    Sections,
    clip,
    compress,
    summarise,
)

MAX_NICS = 64
MAX_IRQS_PER_NIC = 256
MAX_ROUTES = 5000
_PCI = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]", re.I)
_NIC_NAME = re.compile(r"[^\s/:]{1,15}")  # what the kernel accepts as an interface name
_REFUSED = ("not supported", "netlink error", "Cannot get", "No such device", "no stats available")
_ROUTE_TYPES = {"unicast", "local", "broadcast", "blackhole", "unreachable", "prohibit", "throw", "multicast",
                "anycast", "nat"}


def nic_facts(sec: Sections, files: dict[str, str]) -> dict[str, dict]:
    """name -> settings of every network interface except lo (veths included)."""
    links = _links(sec.lines("nics") or [])
    irqs = _interrupts(sec.lines("interrupts") or [])
    out: dict[str, dict] = {}
    for name, target in links.items():
        if name == "lo":
            continue
        if len(out) >= MAX_NICS:
            sec.note(f"more than {MAX_NICS} network interfaces: the rest left out")
            break
        base = f"/sys/class/net/{name}/"
        speed = files.get(base + "speed")
        nic = {"mtu": files.get(base + "mtu", ABSENT),
               "speed_mbps": "unknown" if speed in (None, "-1") or not speed.isdigit() else speed,
               "duplex": files.get(base + "duplex", "unknown"),
               "operstate": files.get(base + "operstate", ABSENT),
               "tx_queue_len": files.get(base + "tx_queue_len", ABSENT)}
        nic |= _ethtool(sec, name)
        nic["rps"] = _rps(files, base)
        nic["irq"] = _nic_irqs(name, target, irqs)
        out[name] = nic
    return out


def _links(lines: list[str]) -> dict[str, str]:
    """`find /sys/class/net -printf '%f %l'`: name -> symlink target (it names the device)."""
    out: dict[str, str] = {}
    for line in lines[:MAX_NICS * 4]:
        name, _, target = line.partition(" ")
        if _NIC_NAME.fullmatch(name):
            out[name] = target
    return dict(sorted(out.items()))


def _ethtool(sec: Sections, name: str) -> dict:
    if sec.has("ethtool_absent"):
        return dict.fromkeys(("driver", "coalesce", "offload", "ring"), "ethtool absent")
    info = sec.lines("ethtool_i", name)
    if info is None:
        reason = "not read (too many NICs)" if sec.has("ethtool_clipped") else ABSENT
        return dict.fromkeys(("driver", "coalesce", "offload", "ring"), reason)
    fields = _colon_fields(info)
    out: dict = {"driver": fields.get("driver") or "unknown"}
    if fields.get("firmware-version"):
        out["firmware"] = fields["firmware-version"]
    out["coalesce"] = _coalesce(sec.lines("ethtool_c", name) or [])
    out["offload"] = _offload(sec.lines("ethtool_k", name) or [])
    out["ring"] = _ring(sec.lines("ethtool_g", name) or [])
    return out


def _refused(lines: list[str]) -> bool:
    return any(marker in line for line in lines[:5] for marker in _REFUSED)


def _colon_fields(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lines[:MAX_KEYS]:
        key, sep, value = line.partition(":")
        if sep and key.strip():
            out.setdefault(clip(key.strip()), clip(value.strip()))
    return out


def _coalesce(lines: list[str]) -> dict[str, str] | str:
    """`ethtool -c`: adaptive RX/TX and the usecs/frames values the driver reports (n/a left out)."""
    if not lines or _refused(lines):
        return "unsupported"
    out: dict[str, str] = {}
    for line in lines[:MAX_KEYS]:
        pair = re.fullmatch(r"(Adaptive|CQE mode) RX: (\S+)\s+TX: (\S+)", line.strip())
        if pair:
            kind = "adaptive" if pair[1] == "Adaptive" else "cqe_mode"
            out |= {f"{kind}_rx": pair[2], f"{kind}_tx": pair[3]}
            continue
        key, sep, value = line.partition(":")
        if sep and not key.startswith("Coalesce parameters") and value.strip() not in ("", "n/a"):
            out[clip(key.strip())] = clip(value.strip())
    return {k: v for k, v in out.items() if v != "n/a"} or "unsupported"


def _offload(lines: list[str]) -> dict[str, str] | str:
    """`ethtool -k`: every feature's on/off ("[fixed]": the driver cannot change it; kept apart)."""
    if not lines or _refused(lines):
        return "unsupported"
    out: dict[str, str] = {}
    for line in lines[:MAX_KEYS]:
        key, sep, value = line.strip().partition(": ")
        state = value.split()[0] if value.split() else ""
        if sep and state in ("on", "off") and not key.startswith("Features for"):
            out[clip(key)] = state + (" fixed" if "[fixed]" in value else "")
    return out or "unsupported"


def _ring(lines: list[str]) -> dict[str, str] | str:
    """`ethtool -g`: current ring sizes (rx, tx, ...) and their maxima (rx_max, ...)."""
    if not lines or _refused(lines):
        return "unsupported"
    out: dict[str, str] = {}
    suffix = ""
    for line in lines[:MAX_KEYS]:
        if line.startswith("Pre-set maximums"):
            suffix = "_max"
        elif line.startswith("Current hardware settings"):
            suffix = ""
        else:
            key, sep, value = line.partition(":")
            value = value.strip()
            if sep and value and value != "n/a" and not key.startswith("Ring parameters"):
                out[clip(key.strip().lower().replace(" ", "_")) + suffix] = clip(value)
    return out or "unsupported"


def _rps(files: dict[str, str], base: str) -> dict[str, str] | str:
    """RPS per rx queue, summarised over the queues: "all 4 rx queues: none" or what differs."""
    cpus: dict[int, str] = {}
    flows: dict[int, str] = {}
    for path, value in files.items():
        if not path.startswith(base + "queues/rx-"):
            continue
        queue, _, leaf = path[len(base + "queues/rx-"):].partition("/")
        if not queue.isdigit() or len(queue) > 6:
            continue
        if leaf == "rps_cpus":
            cpus[int(queue)] = mask_to_cpus(value)
        elif leaf == "rps_flow_cnt":
            flows[int(queue)] = value
    if not cpus and not flows:
        return ABSENT
    return {"rps_cpus": summarise(cpus, "rx queues"), "rps_flow_cnt": summarise(flows, "rx queues")}


def mask_to_cpus(mask: str) -> str:
    """A sysfs CPU mask ("00000000,00000003") as a CPU list ("0-1"), "none" for an empty mask."""
    digits = mask.replace(",", "").strip()
    if not digits or len(digits) > 2048 or not re.fullmatch(r"[0-9a-fA-F]+", digits):
        return clip(mask)
    bits = int(digits, 16)
    if not bits:
        return "none"
    return compress([i for i in range(bits.bit_length()) if bits >> i & 1])


def _interrupts(lines: list[str]) -> list[tuple[str, str, list[str]]]:
    """(irq, affinity list, name fields) from the script's digest of /proc/interrupts."""
    out = []
    for line in lines[:8192]:
        parts = line.split("\t")
        if len(parts) == 3 and parts[0].isdigit():
            out.append((parts[0], clip(parts[1]), parts[2].split()[:8]))
    return out


def _identifiers(name: str, target: str) -> tuple[set[str], str | None]:
    """What the IRQ names of a NIC's queues contain: its name, its device (virtio2), and the PCI
    address of the device itself (not of the bridges above it, whose IRQs are not the NIC's)."""
    parts = target.split("/")
    ids = {name}
    if "net" in parts:
        at = len(parts) - 1 - parts[::-1].index("net")
        if at > 0 and parts[at - 1] not in ("virtual", "devices", ".."):
            ids.add(parts[at - 1])
    pcis = [p for p in parts if _PCI.fullmatch(p)]
    return ids, (pcis[-1] if pcis else None)


def _nic_irqs(name: str, target: str, irqs: list[tuple[str, str, list[str]]]) -> dict[str, str] | str:
    ids, pci = _identifiers(name, target)
    out: dict[str, str] = {}
    for irq, affinity, fields in irqs:
        hit = any(tok == i or tok.startswith((i + "-", i + "_", i + "@")) for tok in fields for i in ids)
        if not hit and pci:
            hit = any(tok.endswith(pci) for tok in fields)
        if hit and len(out) < MAX_IRQS_PER_NIC:
            label = clip(fields[-1]) if fields else irq
            out[label if label not in out else f"{label}#{irq}"] = affinity
    return out or "none found"


# --------------------------------------------------------------------------- routes

def route_facts(sec: Sections) -> dict[str, dict]:
    """peer -> the route the kernel uses to reach it, and its rto_min ("default": 200 ms)."""
    table = [_route_fields(line) for line in (sec.lines("routes") or [])[:MAX_ROUTES]]
    out: dict[str, dict] = {}
    for peer in sec.args("route_get")[:256]:
        lines = sec.lines("route_get", peer) or []
        address = lines[0].removeprefix("address ").strip() if lines else "unresolved"
        facts: dict[str, str] = {"address": clip(address)}
        answer = " ".join(line.strip() for line in lines[1:6])
        got = _route_fields(answer) if answer else None
        if address == "unresolved":
            pass
        elif not got or not got.get("dev"):
            facts["error"] = clip(answer) or "no answer"
        else:
            facts |= {k: got[k] for k in ("dev", "via", "src") if k in got}
            facts["rto_min"] = got.get("rto_min", "default")
            if "mtu" in got:
                facts["mtu"] = got["mtu"]
            kind = answer.split()[0]
            facts["route"] = (f"{kind} (not in the main table)" if kind in _ROUTE_TYPES - {"unicast"}
                              else _longest_match(address, got.get("dev"), table))
        out[clip(peer)] = facts
    return out


def _route_fields(line: str) -> dict[str, str]:
    """The named fields of one `ip route` line; "prefix" is its destination."""
    tokens = line.split()[:64]
    out: dict[str, str] = {"line": clip(" ".join(tokens))}
    if tokens and tokens[0] in _ROUTE_TYPES:
        tokens = tokens[1:]
    if tokens:
        out["prefix"] = tokens[0]
    for i, tok in enumerate(tokens[:-1]):
        if tok in ("dev", "via", "src", "table", "proto", "scope"):
            out.setdefault(tok, clip(tokens[i + 1]))
        elif tok in ("rto_min", "mtu"):
            value = tokens[i + 1]
            if value == "lock" and i + 2 < len(tokens):
                value = tokens[i + 2]
            out.setdefault(tok, clip(value))
    return out


def _longest_match(address: str, dev: str | None, table: list[dict[str, str]]) -> str:
    """The `ip route show` line through `dev` whose prefix holds the address, longest first."""
    try:
        addr = ipaddress.ip_address(address)
    except ValueError:
        return "unknown"
    best: tuple[int, str] | None = None
    for route in table:
        prefix = route.get("prefix", "")
        try:
            net = ipaddress.ip_network("0.0.0.0/0" if prefix == "default" else prefix, strict=False)
        except ValueError:
            continue
        if net.version == addr.version and addr in net and route.get("dev") == dev:
            if best is None or net.prefixlen > best[0]:
                best = (net.prefixlen, route["line"])
    return best[1] if best else "none in the main table"
