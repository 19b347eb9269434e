"""System section: the hardware and software the runs ran on, and the peak they are measured against."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from clusterbench.analysis.dataset import Dataset
from clusterbench.report.model import Options, Section, Table


def metrics() -> set[str]:
    return set()  # reads the stored system descriptions only


@dataclass
class Peak:
    node_gflops: float
    derivation: str


def _stored_peak(system: dict | None) -> dict:
    """The `peak` part of a stored system description ({} when there is none)."""
    return ((system or {}).get("info") or {}).get("peak") or {}


def node_peak(data: Dataset, options: Options) -> Peak | None:
    """Rpeak of one node: the user's figure, else the one derived for the system most runs used."""
    if options.rpeak_node_gflops:
        return Peak(options.rpeak_node_gflops, "given with --rpeak-node")
    counts = Counter(r["system_id"] for r in data.runs.values() if r.get("system_id") in data.systems)
    for system_id, _ in counts.most_common():
        peak = _stored_peak(data.systems[system_id])
        if peak.get("rpeak_node_gflops"):
            return Peak(float(peak["rpeak_node_gflops"]), peak.get("derivation") or "")
    return None


def run_node_peak(data: Dataset, options: Options, run: dict) -> float | None:
    """Rpeak of a node of the system this run ran on; None for imported runs (unknown machine)."""
    if options.rpeak_node_gflops:
        return options.rpeak_node_gflops
    return _stored_peak(data.systems.get(run.get("system_id") or "")).get("rpeak_node_gflops")


def section(data: Dataset, options: Options) -> Section | None:
    if not data.systems and not options.rpeak_node_gflops:
        return None
    used = Counter(r["system_id"] for r in data.runs.values() if r.get("system_id"))
    hardware = Table("system-hardware", "Hardware", ["system", "host", "CPU", "sockets x cores x threads",
                                                     "memory per node (GiB)", "runs"], [])
    software = Table("system-software", "Software", ["system", "OS", "kernel", "MPI", "BLAS", "compiler"], [])
    peaks = Table("system-rpeak", "Theoretical peak (Rpeak)",
                  ["system", "Rpeak per node (Gflop/s)", "nodes used (max)", "Rpeak total (Gflop/s)",
                   "how it was derived"], [])
    for system_id, system in data.systems.items():
        info = system["info"]
        topo, mem, peak = info.get("topology") or {}, info.get("memory") or {}, _stored_peak(system)
        sw = info.get("software") or {}
        ids = [r["id"] for r in data.runs.values() if r.get("system_id") == system_id]
        max_nodes = max(data.runs[i]["node_count"] for i in ids)
        hardware.rows.append([
            system_id, system["hostname"], topo.get("model_name"),
            f"{topo.get('sockets')} x {topo.get('cores_per_socket')} x {topo.get('threads_per_core')}",
            round(mem["total_bytes"] / 2**30, 1) if mem.get("total_bytes") else None, ids])
        mpi = sw.get("mpi") or {}
        software.rows.append([system_id, sw.get("os"), sw.get("kernel"),
                              " ".join(str(v) for v in (mpi.get("implementation"), mpi.get("version")) if v),
                              (sw.get("blas") or {}).get("variant"), (sw.get("compilers") or {}).get("cc")])
        node = peak.get("rpeak_node_gflops")
        peaks.rows.append([system_id, node, max_nodes, node * max_nodes if node else None,
                           peak.get("derivation")])
    if options.rpeak_node_gflops:
        max_nodes = max(r["node_count"] for r in data.runs.values())
        peaks.rows.append(["(given)", options.rpeak_node_gflops, max_nodes,
                           options.rpeak_node_gflops * max_nodes, "given with --rpeak-node"])
    described = sum(used.values())
    paragraphs = [f"{len(data.runs) - described} of {len(data.runs)} selected runs (imported ones) carry no "
                  "system description and are not counted here."] if described < len(data.runs) else []
    return Section("system", "System", paragraphs, [t for t in (hardware, software, peaks) if t.rows])
