"""System section: the hardware and software the runs ran on, and the peak they are measured against.

The peak itself is analysis's (analysis/peak.py: Rpeak, and the peak the `clock` runs measured);
`node_peak` and `run_node_peak` stay here for the sections that import them. "nodes used (max)"
counts only the runs that state their node count: an imported file that does not is never 1.
"""

from __future__ import annotations

from collections import Counter

from clusterbench.analysis import peak
from clusterbench.analysis.dataset import Dataset
from clusterbench.analysis.peak import Peak
from clusterbench.report.model import Options, Section, Table


def metrics() -> set[str]:
    return set()  # reads the stored system descriptions only


def _stored_peak(system: dict | None) -> dict:
    """The `peak` part of a stored system description ({} when there is none)."""
    return peak.stored_peak(system)


def node_peak(data: Dataset, options: Options) -> Peak | None:
    """Rpeak of one node: the user's figure, else the one derived for the system most runs used."""
    return peak.node_peak(data.runs, data.systems, options.rpeak_node_gflops)


def run_node_peak(data: Dataset, options: Options, run: dict) -> float | None:
    """Rpeak of a node of the system this run ran on; None for imported runs (unknown machine)."""
    return peak.run_node_peak(data.systems, options.rpeak_node_gflops, run)


def _max_nodes(counts: list[int | None]) -> int | None:
    """The most nodes the runs used, over those that state it (None when none does)."""
    known = [c for c in counts if c is not None]
    return max(known) if known else None


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
        topo, mem, stored = info.get("topology") or {}, info.get("memory") or {}, _stored_peak(system)
        sw = info.get("software") or {}
        ids = [r["id"] for r in data.runs.values() if r.get("system_id") == system_id]
        max_nodes = _max_nodes([data.runs[i].get("node_count") for i in ids])
        hardware.rows.append([
            system_id, system["hostname"], topo.get("model_name"),
            f"{topo.get('sockets')} x {topo.get('cores_per_socket')} x {topo.get('threads_per_core')}",
            round(mem["total_bytes"] / 2**30, 1) if mem.get("total_bytes") else None, ids])
        mpi = sw.get("mpi") or {}
        software.rows.append([system_id, sw.get("os"), sw.get("kernel"),
                              " ".join(str(v) for v in (mpi.get("implementation"), mpi.get("version")) if v),
                              (sw.get("blas") or {}).get("variant"), (sw.get("compilers") or {}).get("cc")])
        node = stored.get("rpeak_node_gflops")
        peaks.rows.append([system_id, node, max_nodes, node * max_nodes if node and max_nodes else None,
                           stored.get("derivation")])
        if system_id in data.measured:
            measured = data.measured[system_id]
            peaks.rows.append([system_id, round(measured.node_gflops, 1), max_nodes,
                               round(measured.node_gflops * max_nodes, 1) if max_nodes else None, measured.derivation])
    if options.rpeak_node_gflops:
        max_nodes = _max_nodes([r.get("node_count") for r in data.runs.values()])
        peaks.rows.append(["(given)", options.rpeak_node_gflops, max_nodes,
                           options.rpeak_node_gflops * max_nodes if max_nodes else None,
                           "given with --rpeak-node" + ("" if max_nodes else "; no run states its node count")])
    described = sum(used.values())
    paragraphs = [f"{len(data.runs) - described} of {len(data.runs)} selected runs (imported ones) carry no "
                  "system description and are not counted here."] if described < len(data.runs) else []
    return Section("system", "System", paragraphs, [t for t in (hardware, software, peaks) if t.rows])
