"""The shape of one node: packages (sockets), NUMA domains, cores, hardware threads, caches.

Every source (live sysfs, `lscpu -J`, `lscpu -p`, plain `lscpu`, hwloc XML in the 1.x and 2.x
dialects, hwloc synthetic strings) is reduced to the same `Topology`, so the planner and the
placement code never care where the facts came from. `Topology.source` says where.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Cache:
    level: int
    kind: str  # "data", "instruction", "unified"
    size_bytes: int
    instances: int

    @property
    def name(self) -> str:
        suffix = {"data": "d", "instruction": "i"}.get(self.kind, "")
        return f"L{self.level}{suffix}"


@dataclass
class NumaDomain:
    os_index: int
    cpus: list[int]
    memory_bytes: int | None = None


@dataclass
class Topology:
    """One node's hardware layout. PU = hardware thread (a Linux 'CPU')."""

    source: str
    cores: list[list[int]]  # PUs of each core, in core order
    packages: list[list[int]]  # PUs of each package (socket)
    numa: list[NumaDomain]
    caches: list[Cache] = field(default_factory=list)
    model_name: str | None = None
    vendor: str | None = None
    architecture: str | None = None
    cpu_family: int | None = None
    cpu_model: int | None = None
    flags: set[str] = field(default_factory=set)
    frequency_mhz: float | None = None  # nominal, when the source states it
    frequency_source: str | None = None
    hostname: str | None = None
    accelerators: list[str] = field(default_factory=list)
    l3_groups: list[list[int]] = field(default_factory=list)  # PUs sharing each L3 (a CCX on AMD)

    @property
    def sockets(self) -> int:
        return len(self.packages)

    @property
    def cores_total(self) -> int:
        return len(self.cores)

    @property
    def pus_total(self) -> int:
        return sum(len(c) for c in self.cores)

    @property
    def cores_per_socket(self) -> int:
        return self.cores_total // max(1, self.sockets)

    @property
    def threads_per_core(self) -> int:
        return max((len(c) for c in self.cores), default=1)

    @property
    def numa_domains(self) -> int:
        return len(self.numa)

    @property
    def pus(self) -> list[int]:
        return sorted(p for c in self.cores for p in c)

    def core_of(self, pu: int) -> list[int]:
        """The PUs sharing a core with `pu` (its SMT siblings, itself included)."""
        for c in self.cores:
            if pu in c:
                return c
        raise KeyError(pu)

    def numa_of(self, pu: int) -> NumaDomain:
        for d in self.numa:
            if pu in d.cpus:
                return d
        raise KeyError(pu)

    def package_index(self, pu: int) -> int:
        for i, pkg in enumerate(self.packages):
            if pu in pkg:
                return i
        raise KeyError(pu)

    def core_index(self, pu: int) -> int:
        """The logical index of `pu`'s core (cores in the order of their first PU, as hwloc's L#)."""
        for i, c in enumerate(self.cores):
            if pu in c:
                return i
        raise KeyError(pu)

    def logical_pus(self) -> list[int]:
        """OS PU numbers in hwloc's logical order: core by core, SMT siblings together.
        Position i is PU L#i; with Linux block numbering core 0 is PUs 0 and N, so L#1 is P#N."""
        return [pu for c in self.cores for pu in c]

    def l3_domains(self) -> list[list[int]]:
        """PUs of each L3 group; a node whose source names no L3 has one per NUMA domain
        (the level Open MPI and Slurm fall back to are not ours to invent, so say so where used)."""
        return self.l3_groups or [list(d.cpus) for d in self.numa]

    def last_level_cache_bytes(self) -> int | None:
        """Total bytes of the last cache level over the node (STREAM sizes its arrays on it)."""
        levels = [c for c in self.caches if c.kind in ("unified", "data")]
        if not levels:
            return None
        top = max(c.level for c in levels)
        return sum(c.size_bytes * c.instances for c in levels if c.level == top)

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "hostname": self.hostname,
            "model_name": self.model_name,
            "vendor": self.vendor,
            "architecture": self.architecture,
            "cpu_family": self.cpu_family,
            "cpu_model": self.cpu_model,
            "sockets": self.sockets,
            "cores": self.cores_total,
            "cores_per_socket": self.cores_per_socket,
            "threads_per_core": self.threads_per_core,
            "pus": self.pus_total,
            "numa": [
                {"os_index": d.os_index, "cpus": compress_cpulist(d.cpus),
                 "memory_bytes": d.memory_bytes}
                for d in self.numa
            ],
            "caches": [
                {"name": c.name, "level": c.level, "kind": c.kind,
                 "size_bytes": c.size_bytes, "instances": c.instances}
                for c in self.caches
            ],
            "flags": sorted(self.flags),
            "frequency_mhz": self.frequency_mhz,
            "frequency_source": self.frequency_source,
            "accelerators": self.accelerators,
            "l3_groups": [compress_cpulist(g) for g in self.l3_groups],
        }


MAX_CPU = 1 << 16  # CPU numbers at or above this are no node's: refused before a list is built


def parse_cpulist(text: str) -> list[int]:
    """'0-3,8,10-11' -> [0,1,2,3,8,10,11] (the Linux cpulist format). ValueError for a number at or
    above MAX_CPU, checked before a range is expanded (a hostile '0-99999999' costs nothing)."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi or lo)
        if not 0 <= first <= last < MAX_CPU or len(cpus) + last - first >= MAX_CPU:
            raise ValueError(f"CPU range {part!r} is outside 0-{MAX_CPU - 1}")
        cpus.extend(range(first, last + 1))
    return cpus


def compress_cpulist(cpus: list[int]) -> str:
    """[0,1,2,3,8] -> '0-3,8'."""
    out: list[str] = []
    s = sorted(set(cpus))
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        out.append(str(s[i]) if i == j else f"{s[i]}-{s[j]}")
        i = j + 1
    return ",".join(out)


def group_pus(rows: list[tuple[int, int, int, int]]) -> tuple[list[list[int]], list[list[int]], dict[int, list[int]]]:
    """Rows of (pu, core_key, socket, numa) -> cores, packages, numa cpu lists.

    `core_key` need only be unique within a socket (Linux core_id is per package).
    """
    cores: dict[tuple[int, int], list[int]] = {}
    packages: dict[int, list[int]] = {}
    numa: dict[int, list[int]] = {}
    for pu, core, sock, node in sorted(rows):
        cores.setdefault((sock, core), []).append(pu)
        packages.setdefault(sock, []).append(pu)
        if node >= 0:
            numa.setdefault(node, []).append(pu)
    ordered_cores = sorted(cores.values(), key=lambda pus: min(pus))
    return ordered_cores, [packages[k] for k in sorted(packages)], numa
