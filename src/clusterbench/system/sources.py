"""Readers that turn each topology source into a `Topology`.

Live machines are read from sysfs and /proc (files only: no subprocess, so discovery stays
cheap). Saved inputs (`clusterbench system --from FILE`) may be hwloc XML (1.x or 2.x
dialect), an hwloc synthetic string, `lscpu -J`, `lscpu -p` or plain `lscpu` output; the
format is recognised from the content, not the file name.
"""

from __future__ import annotations

import glob
import json
import os
import re
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from clusterbench.errors import UserInputError
from clusterbench.system.topology import Cache, NumaDomain, Topology, group_pus, parse_cpulist

if TYPE_CHECKING:  # imported where hwloc XML is read: every run reads its placement without it (~9 ms)
    import xml.etree.ElementTree as ET

_CACHE_KIND = {"0": "unified", "1": "data", "2": "instruction"}

# Arm (implementer, part) -> core name, as lscpu names them.
ARM_PARTS = {
    ("0x41", "0xd03"): "Cortex-A53",
    ("0x41", "0xd07"): "Cortex-A57",
    ("0x41", "0xd08"): "Cortex-A72",
    ("0x41", "0xd0b"): "Cortex-A76",
    ("0x41", "0xd0c"): "Neoverse-N1",
    ("0x41", "0xd40"): "Neoverse-V1",
    ("0x41", "0xd49"): "Neoverse-N2",
    ("0x41", "0xd4f"): "Neoverse-V2",
    ("0x43", "0x0af"): "ThunderX2 99xx",
    ("0x46", "0x001"): "A64FX",
}


# --------------------------------------------------------------------------- dispatch

def topology_from_file(path: str | Path) -> Topology:
    """Recognise a saved topology file by its content and parse it."""
    import xml.etree.ElementTree as ET

    p = Path(path)
    if not p.is_file():
        raise UserInputError(f"topology file not found: {path}",
                             hint="give an hwloc XML, lscpu -J/-p or plain lscpu output")
    text = p.read_text(errors="replace")
    stripped = text.lstrip()
    where = str(path)
    try:
        if stripped.startswith("<"):
            return from_hwloc_xml(text, source=f"hwloc-xml:{p.name}")
        if stripped.startswith("{"):
            return from_lscpu_json(text, source=f"lscpu-json:{p.name}")
        if re.search(r"^#\s*CPU,", text, re.M) or re.match(r"^\d+,\d+", stripped):
            return from_lscpu_parse(text, source=f"lscpu-p:{p.name}")
        if "Socket(s):" in text or "CPU(s):" in text:
            return from_lscpu_text(text, source=f"lscpu:{p.name}")
        if re.match(r"^(package|numa|core|pu|group|l\d)\w*:\d", stripped, re.I):
            return from_hwloc_synthetic(stripped.splitlines()[0], source=f"hwloc-synthetic:{p.name}")
    except (ValueError, KeyError, ET.ParseError, json.JSONDecodeError) as exc:
        raise UserInputError(f"cannot parse topology: {exc}", where=where) from exc
    raise UserInputError(
        "unrecognised topology format", where=where,
        hint="supported: hwloc XML (lstopo --of xml), hwloc synthetic string, "
             "lscpu -J, lscpu -p=CPU,CORE,SOCKET,NODE, plain lscpu",
    )


# --------------------------------------------------------------------------- hwloc XML

def _bitmap(text: str | None) -> set[int]:
    """hwloc bitmap '0xffffffff,,0x00000003' (32-bit words, most significant first)."""
    if not text:
        return set()
    words = text.split(",")
    bits: set[int] = set()
    for i, word in enumerate(reversed(words)):
        if not word:
            continue
        value = int(word, 16)
        base = 32 * i
        while value:
            low = value & -value
            bits.add(base + low.bit_length() - 1)
            value ^= low
    return bits


def _infos(obj: ET.Element) -> dict[str, str]:
    return {i.get("name", ""): i.get("value", "") for i in obj.findall("info")}


def _cache_of(obj: ET.Element) -> tuple[int, str, int] | None:
    t = obj.get("type", "")
    if t == "Cache" or re.fullmatch(r"L\d[id]?Cache", t):
        level = int(obj.get("depth") or t[1])
        kind = _CACHE_KIND.get(obj.get("cache_type", "0"), "unified")
        return level, kind, int(obj.get("cache_size") or 0)
    return None


def from_hwloc_xml(text: str, source: str = "hwloc-xml") -> Topology:
    """Both dialects: hwloc 1.x (NUMANode parents of Package) and 2.x (NUMA memory children).

    Only the PUs in the machine's allowed cpuset count (on LLNL Lassen two cores per socket
    are reserved for the system and are not usable by jobs).
    """
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    machine = root.find("object")
    if machine is None:
        raise ValueError("no <object> in hwloc XML")
    allowed = _bitmap(machine.get("allowed_cpuset") or machine.get("cpuset"))

    infos: dict[str, str] = {}
    cores: list[list[int]] = []
    packages: list[list[int]] = []
    numa: list[NumaDomain] = []
    caches: dict[tuple[int, str], list[int]] = {}
    l3_groups: list[list[int]] = []
    accelerators: list[str] = []

    def walk(obj: ET.Element, package: str | None) -> None:
        t = obj.get("type", "")
        for k, v in _infos(obj).items():
            infos.setdefault(k, v)
        if t in ("Package", "Socket"):
            package = obj.get("os_index", str(len(packages)))
            pus = sorted(_bitmap(obj.get("cpuset")) & allowed)
            if pus:
                packages.append(pus)
        elif t == "NUMANode":
            pus = sorted(_bitmap(obj.get("cpuset")) & allowed)
            mem = obj.get("local_memory")
            numa.append(NumaDomain(int(obj.get("os_index", len(numa))), pus,
                                   int(mem) if mem else None))
        elif t == "Core":
            pus = sorted(int(pu.get("os_index")) for pu in obj.iter("object")
                         if pu.get("type") == "PU" and int(pu.get("os_index")) in allowed)
            if pus:
                cores.append(pus)
        elif t == "OSDev" and obj.get("osdev_type") == "5":
            accelerators.append(f"{obj.get('name')}@package{package}")
        cache = _cache_of(obj)
        if cache and _bitmap(obj.get("cpuset")) & allowed:
            caches.setdefault(cache[:2], []).append(cache[2])
            if cache[0] == 3 and cache[1] != "instruction":
                l3_groups.append(sorted(_bitmap(obj.get("cpuset")) & allowed))
        for child in obj.findall("object"):
            walk(child, package)

    walk(machine, None)
    if not cores:  # no Core objects: each allowed PU is its own core
        cores = [[pu.get("os_index")] for pu in machine.iter("object") if pu.get("type") == "PU"]
        cores = [[int(c[0])] for c in cores if int(c[0]) in allowed]
    if not packages:
        packages = [sorted(p for c in cores for p in c)]
    numa = [d for d in numa if d.cpus] or [NumaDomain(0, sorted(allowed))]
    cores.sort(key=min)
    freq, fsrc = _frequency_from_model(infos.get("CPUModel"))
    return Topology(
        source=source,
        cores=cores,
        packages=packages,
        numa=sorted(numa, key=lambda d: d.os_index),
        caches=[Cache(lvl, kind, max(sizes), len(sizes)) for (lvl, kind), sizes in sorted(caches.items())],
        model_name=infos.get("CPUModel") or None,
        vendor=infos.get("CPUVendor") or None,
        architecture=infos.get("Architecture") or None,
        cpu_family=_int(infos.get("CPUFamilyNumber")),
        cpu_model=_int(infos.get("CPUModelNumber")),
        hostname=infos.get("HostName") or None,
        accelerators=accelerators,
        frequency_mhz=freq,
        frequency_source=fsrc,
        l3_groups=sorted(l3_groups, key=min),
    )


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v not in (None, "") else None
    except ValueError:
        return None


# --------------------------------------------------------------------------- hwloc synthetic

_SYN_LEVEL = re.compile(r"(\w+):(\d+)(?:\(([^)]*)\))?")


def from_hwloc_synthetic(text: str, source: str = "hwloc-synthetic") -> Topology:
    """'package:2 numa:4 core:16 pu:2(indexes=core)' -> Topology.

    Without `indexes=core` hwloc numbers PUs depth-first (core 0 -> 0,1); with it, Linux-style
    (the k-th PU of core c is c + k * cores).
    """
    levels = [(m.group(1).lower(), int(m.group(2)), m.group(3) or "") for m in _SYN_LEVEL.finditer(text)]
    if not levels or levels[-1][0] != "pu":
        raise ValueError("synthetic description must end with a pu:N level")
    counts = [n for _, n, _ in levels]
    names = [name for name, _, _ in levels]
    total_cores = 1
    for _, n, _ in levels[:-1]:
        total_cores *= n
    smt = levels[-1][1]
    linux_numbering = "indexes=core" in levels[-1][2]

    def pu_number(core: int, k: int) -> int:
        return core + k * total_cores if linux_numbering else core * smt + k

    def per(level_name: str) -> int:
        """How many cores share one object of this level (1 when absent)."""
        if level_name not in names:
            return total_cores
        idx = names.index(level_name)
        size = 1
        for n in counts[idx + 1:-1]:
            size *= n
        return size

    cores = [[pu_number(c, k) for k in range(smt)] for c in range(total_cores)]
    pkg_size, numa_size = per("package"), per("numa") if "numa" in names else per("package")

    def chunks(size: int) -> list[list[int]]:
        return [sorted(p for c in cores[i:i + size] for p in c) for i in range(0, total_cores, size)]

    caches = []
    l3_groups = chunks(per("l3")) if "l3" in names else []
    for name, _, attrs in levels:
        m = re.fullmatch(r"l(\d)([id]?)", name)
        if m:
            size = re.search(r"size=(\d+)([KMG]?B?)", attrs)
            nbytes = int(size.group(1)) * {"": 1, "B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}.get(
                size.group(2), 1) if size else 0
            caches.append(Cache(int(m.group(1)), {"i": "instruction", "d": "data"}.get(m.group(2), "unified"),
                                nbytes, total_cores // per(name)))
    return Topology(
        source=source,
        cores=cores,
        packages=chunks(pkg_size),
        numa=[NumaDomain(i, pus) for i, pus in enumerate(chunks(numa_size))],
        caches=caches,
        l3_groups=l3_groups,
    )


# --------------------------------------------------------------------------- lscpu

def _lscpu_fields_from_json(data: object) -> dict[str, str]:
    """Flatten util-linux's lscpu -J (flat list, or nested 'children' in newer versions)."""
    fields: dict[str, str] = {}

    def visit(entries: list) -> None:
        for e in entries:
            key = str(e.get("field", "")).rstrip(":").strip()
            if key and e.get("data") is not None:
                fields.setdefault(key, str(e["data"]))
            visit(e.get("children", []) or [])

    visit(data.get("lscpu", []) if isinstance(data, dict) else [])
    return fields


def _lscpu_fields_from_text(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            fields.setdefault(k.strip(), v.strip())
    return fields


_LSCPU_CACHE = re.compile(r"^L(\d)([di]?) cache$")
_SIZE_WITH_INSTANCES = re.compile(r"([\d.]+)\s*([KMG]i?B?)(?:\s*\((\d+) instances?\))?", re.I)


def _lscpu_caches(fields: dict[str, str], sockets: int) -> list[Cache]:
    caches = []
    for key, value in fields.items():
        m = _LSCPU_CACHE.match(key)
        s = _SIZE_WITH_INSTANCES.search(value)
        if not (m and s):
            continue
        mult = {"K": 1024, "M": 1024**2, "G": 1024**3}[s.group(2)[0].upper()]
        total = float(s.group(1)) * mult
        instances = int(s.group(3)) if s.group(3) else sockets
        kind = {"d": "data", "i": "instruction"}.get(m.group(2), "unified")
        caches.append(Cache(int(m.group(1)), kind, int(total / max(1, instances)), instances))
    return sorted(caches, key=lambda c: (c.level, c.kind))


def _from_lscpu_fields(fields: dict[str, str], source: str) -> Topology:
    """Counts are exact; which PUs share a core is assumed Linux block numbering (c, c+cores)."""
    sockets = int(fields.get("Socket(s)", "1") or 1)
    cps = int(fields["Core(s) per socket"])
    tpc = int(fields.get("Thread(s) per core", "1") or 1)
    total_cores = sockets * cps
    cores = [[c + k * total_cores for k in range(tpc)] for c in range(total_cores)]
    packages = [sorted(p for c in cores[s * cps:(s + 1) * cps] for p in c) for s in range(sockets)]
    numa = []
    for key, value in fields.items():
        m = re.fullmatch(r"NUMA node(\d+) CPU\(s\)", key)
        if m and value:
            numa.append(NumaDomain(int(m.group(1)), parse_cpulist(value)))
    if not numa:
        numa = [NumaDomain(0, sorted(p for c in cores for p in c))]
    freq, fsrc = _frequency_from_model(fields.get("Model name"))
    if freq is None and fields.get("CPU max MHz"):
        freq, fsrc = float(fields["CPU max MHz"]), "lscpu CPU max MHz"
    return Topology(
        source=source,
        cores=cores,
        packages=packages,
        numa=sorted(numa, key=lambda d: d.os_index),
        caches=_lscpu_caches(fields, sockets),
        model_name=fields.get("Model name"),
        vendor=fields.get("Vendor ID"),
        architecture=fields.get("Architecture"),
        cpu_family=_int(fields.get("CPU family")),
        cpu_model=_int(fields.get("Model")),
        flags=set(fields.get("Flags", "").split()),
        frequency_mhz=freq,
        frequency_source=fsrc,
    )


def from_lscpu_json(text: str, source: str = "lscpu-json") -> Topology:
    return _from_lscpu_fields(_lscpu_fields_from_json(json.loads(text)), source)


def from_lscpu_text(text: str, source: str = "lscpu") -> Topology:
    return _from_lscpu_fields(_lscpu_fields_from_text(text), source)


def from_lscpu_parse(text: str, source: str = "lscpu-p") -> Topology:
    """`lscpu -p=CPU,CORE,SOCKET,NODE[,CACHE]`: exact PU-to-core mapping, no sizes or model."""
    header = ["CPU", "Core", "Socket", "Node"]
    rows = []
    l3: dict[int, list[int]] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            cols = line.lstrip("#").strip().split(",")
            if cols and cols[0].upper() == "CPU":
                header = cols
            continue
        if not line.strip():
            continue
        values = line.split(",")
        rec = dict(zip([h.lower() for h in header], values, strict=False))
        rows.append((int(rec["cpu"]), int(rec.get("core") or rec["cpu"]),
                     int(rec.get("socket") or 0), int(rec.get("node") or 0)))
        if (rec.get("l3") or "").strip().isdigit():
            l3.setdefault(int(rec["l3"]), []).append(int(rec["cpu"]))
    cores, packages, numa = group_pus(rows)
    return Topology(source=source, cores=cores, packages=packages,
                    numa=[NumaDomain(k, v) for k, v in sorted(numa.items())],
                    l3_groups=sorted((sorted(g) for g in l3.values()), key=min))


# --------------------------------------------------------------------------- live (sysfs)

def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _frequency_from_model(model: str | None) -> tuple[float | None, str | None]:
    m = re.search(r"@\s*([\d.]+)\s*GHz", model or "")
    return (float(m.group(1)) * 1000, "model name") if m else (None, None)


def cpuinfo_fields(root: str = "/") -> dict[str, str]:
    """The first processor block of /proc/cpuinfo (fields are identical across cores)."""
    text = _read(os.path.join(root, "proc/cpuinfo")) or ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        if ":" in line:
            k, v = line.split(":", 1)
            fields.setdefault(k.strip(), v.strip())
    return fields


def _size_text(text: str) -> int:
    m = re.fullmatch(r"(\d+)([KMG]?)", text.strip())
    return int(m.group(1)) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2)] if m else 0


def from_sysfs(root: str = "/") -> Topology:
    """Read the live node: /sys/devices/system/{cpu,node} and /proc/cpuinfo."""
    cpu_dir = os.path.join(root, "sys/devices/system/cpu")
    online = parse_cpulist(_read(os.path.join(cpu_dir, "online")) or "0")
    node_of: dict[int, int] = {}
    numa_mem: dict[int, int] = {}
    for node_path in glob.glob(os.path.join(root, "sys/devices/system/node/node[0-9]*")):
        idx = int(re.search(r"node(\d+)$", node_path).group(1))
        for cpu in parse_cpulist(_read(os.path.join(node_path, "cpulist")) or ""):
            node_of[cpu] = idx
        m = re.search(r"MemTotal:\s+(\d+) kB", _read(os.path.join(node_path, "meminfo")) or "")
        if m:
            numa_mem[idx] = int(m.group(1)) * 1024
    rows = []
    for cpu in online:
        topo = os.path.join(cpu_dir, f"cpu{cpu}", "topology")
        core = _int(_read(os.path.join(topo, "core_id")))
        sock = _int(_read(os.path.join(topo, "physical_package_id")))
        rows.append((cpu, cpu if core is None else core, 0 if sock is None or sock < 0 else sock,
                     node_of.get(cpu, 0)))
    cores, packages, numa = group_pus(rows)

    caches: dict[tuple[int, str], tuple[int, set[str]]] = {}
    for cpu in online:
        for index in glob.glob(os.path.join(cpu_dir, f"cpu{cpu}", "cache", "index[0-9]*")):
            level = _int(_read(os.path.join(index, "level")))
            kind = (_read(os.path.join(index, "type")) or "Unified").lower()
            size = _size_text(_read(os.path.join(index, "size")) or "")
            shared = _read(os.path.join(index, "shared_cpu_list")) or str(cpu)
            if level is None or not size:
                continue
            key = (level, kind)
            caches.setdefault(key, (size, set()))[1].add(shared)

    info = cpuinfo_fields(root)
    model = info.get("model name")
    if not model and ("CPU implementer", "CPU part") <= info.keys():
        model = ARM_PARTS.get((info["CPU implementer"].lower(), info["CPU part"].lower()))
    freq, fsrc = _frequency_from_model(model)
    if freq is None:
        base = _read(os.path.join(cpu_dir, "cpu0", "cpufreq", "base_frequency"))
        if base:
            freq, fsrc = int(base) / 1000, "cpufreq base_frequency"
    if freq is None and info.get("cpu MHz"):
        freq, fsrc = float(info["cpu MHz"]), "/proc/cpuinfo cpu MHz"
    if freq is None:
        top = _read(os.path.join(cpu_dir, "cpu0", "cpufreq", "cpuinfo_max_freq"))
        if top:
            freq, fsrc = int(top) / 1000, "cpufreq cpuinfo_max_freq (maximum, not nominal)"
    l3_sets = caches.get((3, "unified"), (0, set()))[1] | caches.get((3, "data"), (0, set()))[1]
    return Topology(
        source="sysfs",
        l3_groups=sorted((parse_cpulist(g) for g in l3_sets), key=min),
        cores=cores,
        packages=packages,
        numa=[NumaDomain(k, v, numa_mem.get(k)) for k, v in sorted(numa.items())],
        caches=[Cache(lvl, kind, size, len(shared)) for (lvl, kind), (size, shared) in sorted(caches.items())],
        model_name=model,
        vendor=info.get("vendor_id") or info.get("CPU implementer"),
        architecture=os.uname().machine,
        cpu_family=_int(info.get("cpu family")),
        cpu_model=_int(info.get("model")),
        flags=set((info.get("flags") or info.get("Features") or "").split()),
        frequency_mhz=freq,
        frequency_source=fsrc,
        hostname=socket.gethostname(),
    )
