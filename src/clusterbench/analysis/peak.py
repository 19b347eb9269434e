"""The peak a run is measured against: Rpeak of a node, and the peak measured on it where one is stored.

Rpeak is a node's theoretical figure: the user's (`--rpeak-node`), else the one the stored system
description derived (cores x clock x flops per cycle). A core can beat it (a boost clock above the
nominal one), so where the `clock` benchmark measured the FMA rate of a core on that system, the
measured peak of a node is that rate times the node's physical cores: what the nodes can really do.
The report's System and HPL sections, and the plausibility check (`analysis/plausibility.py`), read
the peak only here.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clusterbench.store.db import Store

CLOCK_METRIC = "clock_gflops"  # one core's best FMA rate (bench/clock.py)


@dataclass
class Peak:
    node_gflops: float
    derivation: str
    measured: bool = False  # from a stored FMA rate (clock), not the theoretical Rpeak


def stored_peak(system: dict | None) -> dict:
    """The `peak` part of a stored system description ({} when there is none)."""
    return ((system or {}).get("info") or {}).get("peak") or {}


def node_peak(runs: dict[str, dict], systems: dict[str, dict], rpeak_node_gflops: float | None = None) -> Peak | None:
    """Rpeak of one node: the user's figure, else the one derived for the system most runs used."""
    if rpeak_node_gflops:
        return Peak(rpeak_node_gflops, "given with --rpeak-node")
    counts = Counter(r["system_id"] for r in runs.values() if r.get("system_id") in systems)
    for system_id, _ in counts.most_common():
        peak = stored_peak(systems[system_id])
        if peak.get("rpeak_node_gflops"):
            return Peak(float(peak["rpeak_node_gflops"]), peak.get("derivation") or "")
    return None


def run_node_peak(systems: dict[str, dict], rpeak_node_gflops: float | None, run: dict) -> float | None:
    """Rpeak of a node of the system this run ran on; None for imported runs (unknown machine)
    unless the user gave one."""
    if rpeak_node_gflops:
        return rpeak_node_gflops
    return stored_peak(systems.get(run.get("system_id") or "")).get("rpeak_node_gflops")


def physical_cores(system: dict | None) -> int | None:
    """Cores of one node of a stored system (sockets x cores per socket), None when not described."""
    topo = ((system or {}).get("info") or {}).get("topology") or {}
    sockets, cores = topo.get("sockets"), topo.get("cores_per_socket")
    if isinstance(sockets, int) and isinstance(cores, int) and sockets > 0 and cores > 0:
        return sockets * cores
    return None


def measured_peaks(store: Store, systems: dict[str, dict]) -> dict[str, Peak]:
    """System id -> the node peak its stored `clock` runs measured (best valid FMA rate of a core x
    the node's cores); systems without a valid clock run or a described topology are absent."""
    out: dict[str, Peak] = {}
    for system_id, system in systems.items():
        cores = physical_cores(system)
        if cores is None:
            continue
        rates = [float(r["value"]) for r in store.metric_rows(CLOCK_METRIC, benchmark="clock", system_id=system_id,
                                                              valid_only=True)]
        if rates:
            best = max(rates)
            out[system_id] = Peak(best * cores, f"measured: {best:.1f} Gflop/s per core (clock, best of "
                                                f"{len(rates)}) x {cores} cores", measured=True)
    return out


def run_peak(run: dict, systems: dict[str, dict], rpeak_node_gflops: float | None,
             measured: dict[str, Peak] | None = None) -> Peak | None:
    """The node peak a run's Rmax is held against: the measured peak of its system where one is
    stored, else Rpeak (given with --rpeak-node, else its stored system's), else None."""
    if measured and (found := measured.get(run.get("system_id") or "")):
        return found
    if rpeak_node_gflops:
        return Peak(rpeak_node_gflops, "Rpeak given with --rpeak-node")
    peak = stored_peak(systems.get(run.get("system_id") or ""))
    if peak.get("rpeak_node_gflops"):
        return Peak(float(peak["rpeak_node_gflops"]), "Rpeak of the system" + (
            f" ({peak['derivation']})" if peak.get("derivation") else ""))
    return None
