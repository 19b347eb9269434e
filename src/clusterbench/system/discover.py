"""Assemble what one node is: topology, memory, peak, software, into a `SystemInfo`.

`SystemInfo.fingerprint()` is the identity stored with every run. It hashes the facts that
change results (CPU, core counts, memory size, OS, kernel, MPI, BLAS, compiler), not the
ones that drift (free memory, load).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what discovers is imported by the functions that discover: the store and every
    # benchmark module import SystemInfo, and a listing discovers nothing (xml.etree, platform, glob)
    from clusterbench.system.microarch import PeakEstimate
    from clusterbench.system.software import Memory, Software
    from clusterbench.system.topology import Topology


@dataclass
class SystemInfo:
    topology: Topology
    memory: Memory | None
    peak: PeakEstimate
    software: Software | None
    nodes: int = 1

    @property
    def rpeak_node_gflops(self) -> float | None:
        return self.peak.rpeak_gflops

    @property
    def rpeak_total_gflops(self) -> float | None:
        r = self.peak.rpeak_gflops
        return None if r is None else r * self.nodes

    def memory_bytes(self) -> int | None:
        """Usable memory per node: MemTotal from /proc/meminfo, else hwloc's NUMA sum."""
        if self.memory:
            return self.memory.total_bytes
        numa = [d.memory_bytes for d in self.topology.numa if d.memory_bytes]
        return sum(numa) if numa else None

    def to_dict(self) -> dict:
        return {
            "topology": self.topology.to_dict(),
            "memory": None if self.memory is None else {
                "total_bytes": self.memory.total_bytes,
                "available_bytes": self.memory.available_bytes,
                "source": self.memory.source,
            },
            "peak": {
                "flops_per_cycle": self.peak.flops_per_cycle,
                "flops_reason": self.peak.flops_reason,
                "frequency_mhz": self.peak.frequency_mhz,
                "frequency_source": self.peak.frequency_source,
                "rpeak_node_gflops": self.rpeak_node_gflops,
                "rpeak_total_gflops": self.rpeak_total_gflops,
                "nodes": self.nodes,
                "derivation": self.peak.derivation(),
            },
            "software": None if self.software is None else self.software.to_dict(),
        }

    def fingerprint_facts(self) -> dict:
        t = self.topology
        sw = self.software
        return {
            "hostname": t.hostname,
            "model": t.model_name,
            "sockets": t.sockets,
            "cores": t.cores_total,
            "pus": t.pus_total,
            "memory_gib": round((self.memory_bytes() or 0) / 2**30),
            "os": sw.os if sw else None,
            "kernel": sw.kernel if sw else None,
            "mpi": sw.mpi.label if sw else None,
            "blas": sw.blas.variant if sw else None,
            "cc": sw.compilers.get("cc") if sw else None,
        }

    def fingerprint(self) -> str:
        blob = json.dumps(self.fingerprint_facts(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def discover(flops_per_cycle: int | None = None, frequency_mhz: float | None = None,
             nodes: int = 1, with_software: bool = True) -> SystemInfo:
    """The live node this process runs on."""
    from clusterbench.system.microarch import estimate_peak
    from clusterbench.system.software import detect_software, read_meminfo
    from clusterbench.system.sources import from_sysfs

    topo = from_sysfs()
    return SystemInfo(
        topology=topo,
        memory=read_meminfo(),
        peak=estimate_peak(topo, flops_per_cycle, frequency_mhz),
        software=detect_software() if with_software else None,
        nodes=nodes,
    )


def system_from_file(path: str, flops_per_cycle: int | None = None,
                     frequency_mhz: float | None = None, nodes: int = 1) -> SystemInfo:
    """A machine we do not have, from its saved lscpu/hwloc output (no software facts)."""
    from clusterbench.system.microarch import estimate_peak
    from clusterbench.system.sources import topology_from_file

    topo = topology_from_file(path)
    return SystemInfo(topo, None, estimate_peak(topo, flops_per_cycle, frequency_mhz), None, nodes)
