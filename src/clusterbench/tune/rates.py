"""The HPL model's measured inputs for a system (bench/hpl/model.py), read from the store.

- **DGEMM per core**: the built-in `dgemm` kernel (per-rank average / threads) or HPCC's
  StarDGEMM (per process / threads), from the runs that loaded the most cores of a node at once
  (HPL keeps every core busy, and a lone DGEMM runs faster than one among others), corrected
  from the kernel's N to "large NB" with the saturating curve.
- **Latency and bandwidth**: the `pingpong` kernel, IMB or OSU (`latency_us`, `peak_bandwidth`)
  and HPCC's ping-pong, within a node for one node and across nodes (runs with nodes > 1) for
  more: HPL on K nodes talks over the network.
- **Calibration**: when HPL results of this system are stored (`hpl`, or HPCC's HPL section),
  `efficiency` is fitted to them by least squares on log time, and `nb_half`, `panel_ratio`,
  `swap_s` and `thread_loss` too when the results vary NB (two or three values), N or Q, or
  threads; every fitted
  value stays in a bounded range, so a few noisy runs cannot make the model absurd.

What is missing falls back, said in the sentence: Rpeak per core x a typical DGEMM efficiency,
typical link figures for shared memory or the interconnect, and an uncalibrated efficiency.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, replace

from clusterbench.bench.hpl.model import Problem, Rates, predict
from clusterbench.bench.hpl.timing import hpl_flops
from clusterbench.store.db import Store
from clusterbench.system.discover import SystemInfo

TYPICAL_DGEMM_EFFICIENCY = 0.85  # a tuned BLAS's DGEMM, of the core's Rpeak
UNKNOWN_CORE_GFLOPS = 10.0  # neither a DGEMM run nor an Rpeak: a modest core of the 2020s
# Calibration when no HPL run of the system is stored: what the model, fed with measured DGEMM and
# ping-pong, still missed on the machine of docs/hpl-model.md: none (fitted 0.9 to 1.15 there).
UNCALIBRATED_EFFICIENCY = 1.0
# Typical (latency s, bandwidth bytes/s) of a link between two ranks when none was measured.
TYPICAL_LINKS = {
    "shm": (0.5e-6, 5e9),  # shared memory inside a node
    "infiniband": (2e-6, 10e9),  # HDR/EDR-class verbs
    "ethernet": (30e-6, 1.1e9),  # TCP over 10 Gbit/s
}
_UNIT_BYTES = {"MB/s": 1e6, "MiB/s": 2.0**20, "GB/s": 1e9, "GiB/s": 2.0**30, "B/s": 1.0}
MAX_POINTS = 400  # newest stored HPL results the fit reads
MIN_SECONDS = 0.02  # shorter solves are mostly timer and start-up noise
NB_HALF_GRID = (0.0, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0, 96.0)  # beyond: no BLAS is that poor
PANEL_GRID = (0.03, 0.05, 0.08, 0.12, 0.18, 0.25, 0.35, 0.5, 0.7, 1.0)
THREAD_LOSS_GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
SWAP_GRID = (0.0, 1e-9, 2e-9, 4e-9, 7e-9, 1e-8, 1.5e-8, 2e-8, 3e-8, 5e-8, 8e-8)
FIT_PASSES = 4
EFFICIENCY_BOUNDS = (0.05, 1.5)


@dataclass(frozen=True)
class HplPoint:
    """One stored HPL result as the fit sees it: the problem and its measured solve time."""

    problem: Problem
    seconds: float
    run_id: str = ""


@dataclass(frozen=True)
class Link:
    latency_s: float
    bandwidth_bytes_s: float
    source: str


@dataclass(frozen=True)
class Fit:
    rates: Rates
    points: int
    rms_log_error: float  # of the fitted model on its own points
    fitted: tuple[str, ...]  # the names of the values fitted


def rates_for(store: Store | None, system: SystemInfo, nodes: int = 1, *,
              interconnect: str | None = None) -> tuple[Rates, str]:
    """The rates and a sentence saying where each came from (stored DGEMM/ping-pong/HPL runs, or Rpeak).

    `interconnect` (shm, infiniband, ethernet) names the typical link assumed across nodes when no
    multi-node ping-pong is stored (default: ethernet, the cautious guess)."""
    ids = system_ids(store, system) if store is not None else []
    core, dgemm_n, core_source = core_rate(store, ids, system)
    local = link(store, ids, across=False, interconnect=interconnect)
    across = link(store, ids, across=True, interconnect=interconnect)
    chosen = across if nodes > 1 else local
    base = Rates(core_gflops=core, latency_s=chosen.latency_s, bandwidth_bytes_s=chosen.bandwidth_bytes_s)
    points = hpl_points(store, ids) if store is not None else []
    parts = [core_source, f"{'across nodes' if nodes > 1 else 'within a node'}: {chosen.source}"]
    if points:
        fit = fit_rates(points, base, dgemm_n, local, across)
        rates = replace(fit.rates, latency_s=chosen.latency_s, bandwidth_bytes_s=chosen.bandwidth_bytes_s)
        rms = 100 * (math.exp(fit.rms_log_error) - 1)
        parts.append(f"{', '.join(f'{name} {getattr(rates, name):.3g}' for name in fit.fitted)} fitted to "
                     f"{fit.points} stored HPL result(s) (their rms error {rms:.0f}%)")
    else:
        rates = replace(base, core_gflops=corrected(core, dgemm_n, base.nb_half), efficiency=UNCALIBRATED_EFFICIENCY)
        parts.append(f"no stored HPL run of this system: efficiency {UNCALIBRATED_EFFICIENCY} assumed (uncalibrated)")
    return rates, "; ".join(parts)


def system_ids(store: Store, system: SystemInfo) -> list[str]:
    """The stored systems that are this one: its fingerprint, and when its software is unknown (a
    topology-only discovery, as `plan` makes) the stored systems with the same hardware facts."""
    ids = [system.fingerprint()]
    if system.software is None:
        want = system.fingerprint_facts()
        keys = ("hostname", "model", "sockets", "cores", "pus") + (("memory_gib",) if system.memory_bytes() else ())
        for row in store.systems():
            try:
                facts = json.loads(row["facts"])
            except (TypeError, ValueError):
                continue
            if row["id"] not in ids and all(facts.get(k) == want[k] for k in keys):
                ids.append(row["id"])
    return ids


def _rows(store: Store | None, ids: Iterable[str], name: str) -> list[tuple[dict, dict, float, str, str]]:
    """(params, labels, value, unit, run id) of the valid `name` metrics of these systems."""
    if store is None:
        return []
    from clusterbench.analysis.flags import counts

    out = []
    for sid in ids:
        for row in store.metric_rows(name, system_id=sid, valid_only=True):
            try:
                params, labels = json.loads(row["params"] or "{}"), json.loads(row["labels"] or "{}")
                facts = json.loads(row["facts"] or "{}")
            except ValueError:
                continue
            run = {"status": row["status"], "valid": row["run_valid"], "facts": facts, "excluded": row["excluded"]}
            if not counts(run):  # a truncated, suspect, disturbed or excluded run is no evidence of a rate
                continue
            if math.isfinite(row["value"]) and row["value"] > 0:
                out.append((params, labels, float(row["value"]), row["unit"], row["run_id"]))
    return out


def _int(value, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def core_rate(store: Store | None, ids: list[str], system: SystemInfo) -> tuple[float, int | None, str]:
    """DGEMM Gflop/s of one core with the node loaded, the N it was measured at, and where it came from."""
    found: list[tuple[int, float, int | None, str]] = []  # (cores busy per node, per core, N, benchmark)
    for params, labels, value, _unit, _run in _rows(store, ids, "dgemm_gflops_per_rank"):
        if labels.get("stat") == "avg":
            threads, ranks, nodes = _int(params.get("threads"), 1), _int(params.get("ranks"), 1), \
                _int(params.get("nodes"), 1)
            found.append((max(1, ranks // max(nodes, 1)) * threads, value / threads,
                          _int(labels.get("n"), 0) or None, "dgemm"))
    for params, _labels, value, _unit, _run in _rows(store, ids, "StarDGEMM_Gflops"):
        threads, ranks = _int(params.get("threads"), 1), _int(params.get("ranks"), 1)
        nodes = _int(params.get("nodes"), 1)
        found.append((max(1, ranks // max(nodes, 1)) * threads, value / threads, None, "HPCC StarDGEMM"))
    if found:
        busy = max(f[0] for f in found)
        chosen = [f for f in found if f[0] == busy]
        value = statistics.median(f[1] for f in chosen)
        sizes = [f[2] for f in chosen if f[2]]
        n = int(statistics.median(sizes)) if sizes else None
        kinds = " and ".join(sorted({f[3] for f in chosen}))
        return value, n, (f"DGEMM {value:.3g} Gflop/s per core from {len(chosen)} stored {kinds} run(s) "
                          f"with {busy} core(s) busy")
    rpeak, cores = system.rpeak_node_gflops, system.topology.cores_total
    if rpeak and cores:
        value = rpeak / cores * TYPICAL_DGEMM_EFFICIENCY
        return value, None, (f"DGEMM {value:.3g} Gflop/s per core assumed: Rpeak {rpeak / cores:.3g} per core x "
                             f"{TYPICAL_DGEMM_EFFICIENCY} (no stored dgemm or HPCC run; `clusterbench bench dgemm` "
                             "measures it)")
    return UNKNOWN_CORE_GFLOPS, None, (f"DGEMM {UNKNOWN_CORE_GFLOPS:g} Gflop/s per core assumed (neither a stored "
                                       "dgemm run nor an Rpeak)")


def corrected(measured: float, n: int | None, nb_half: float) -> float:
    """The rate at a large NB from one measured at inner dimension n (the saturating curve)."""
    return measured * (n + nb_half) / n if n else measured


def _across(params: dict) -> bool:
    return _int(params.get("nodes"), 1) > 1


def link(store: Store | None, ids: list[str], across: bool, interconnect: str | None = None) -> Link:
    """Median latency and bandwidth of the stored ping-pongs within a node (across=False) or across nodes."""
    def wanted(params: dict) -> bool:
        # within a node, HPL talks through shared memory: a ping-pong forced onto TCP is not that link
        return _across(params) if across else not _across(params) and params.get("interconnect") != "tcp"

    lat = [v * 1e-6 for p, _l, v, _u, _r in _rows(store, ids, "latency_us") if wanted(p)]
    lat += [v * 1e-6 for p, _l, v, _u, _r in _rows(store, ids, "MinPingPongLatency_usec") if wanted(p)]
    bw = [v * _UNIT_BYTES[u] for p, _l, v, u, _r in _rows(store, ids, "peak_bandwidth")
          if wanted(p) and u in _UNIT_BYTES]
    bw += [v * 1e9 for p, _l, v, _u, _r in _rows(store, ids, "MaxPingPongBandwidth_GBytes") if wanted(p)]
    kind = "shm" if not across else (interconnect if interconnect in TYPICAL_LINKS else "ethernet")
    typical_lat, typical_bw = TYPICAL_LINKS[kind]
    what = {"shm": "shared memory", "infiniband": "InfiniBand", "ethernet": "Ethernet (TCP)"}[kind]
    if lat and bw:
        return Link(statistics.median(lat), statistics.median(bw),
                    f"latency {statistics.median(lat) * 1e6:.3g} us and bandwidth {statistics.median(bw) / 1e9:.3g} "
                    f"GB/s from {len(lat)} stored ping-pong result(s)")
    latency = statistics.median(lat) if lat else typical_lat
    bandwidth = statistics.median(bw) if bw else typical_bw
    return Link(latency, bandwidth, f"latency {latency * 1e6:.3g} us ({'stored' if lat else 'typical ' + what}) and "
                f"bandwidth {bandwidth / 1e9:.3g} GB/s ({'stored' if bw else 'typical ' + what})")


def hpl_points(store: Store, ids: list[str]) -> list[HplPoint]:
    """The stored valid HPL results of these systems (standalone HPL and HPCC's HPL), newest last.
    The time is recomputed from the printed Gflop/s, which carry more digits than HPL's Time."""
    out = []
    for params, labels, gflops, _unit, run_id in _rows(store, ids, "hpl_gflops"):
        try:
            n, nb, p, q = (int(labels[k]) for k in ("n", "nb", "p", "q"))
        except (KeyError, TypeError, ValueError):
            continue
        if min(n, nb, p, q) <= 0:
            continue
        seconds = hpl_flops(n) / (gflops * 1e9)
        if seconds < MIN_SECONDS:
            continue
        problem = Problem(n, nb, p, q, max(1, _int(params.get("nodes"), 1)), max(1, _int(params.get("threads"), 1)),
                          max(0, _int(params.get("depth"), 1)))
        out.append(HplPoint(problem, seconds, run_id))
    return out[-MAX_POINTS:]


def fit_rates(points: list[HplPoint], base: Rates, dgemm_n: int | None, local: Link, across: Link) -> Fit:
    """Least squares on log time, the best efficiency in closed form for each trial, the other values
    by coordinate descent over bounded grids; each is fitted only when the points vary what it
    explains (NB for nb_half and panel_ratio, N or Q for swap_s, threads for thread_loss)."""
    nbs = {pt.problem.nb for pt in points}
    grids: dict[str, tuple[float, ...]] = {}
    if len(nbs) >= 2:
        grids["nb_half"] = NB_HALF_GRID
    if len({pt.problem.n for pt in points}) >= 2 or len({pt.problem.q for pt in points}) >= 2:
        grids["swap_s"] = SWAP_GRID
    if len(nbs) >= 3:
        grids["panel_ratio"] = PANEL_GRID
    if len({pt.problem.threads_per_rank > 1 for pt in points}) == 2:
        grids["thread_loss"] = THREAD_LOSS_GRID
    logs = [math.log(pt.seconds) for pt in points]

    def score(values: dict[str, float]) -> tuple[float, Rates]:
        trial = replace(base, **values, efficiency=1.0)
        trial = replace(trial, core_gflops=corrected(base.core_gflops, dgemm_n, trial.nb_half))
        raw = [math.log(predict(pt.problem, _with_link(trial, across if pt.problem.nodes > 1 else local)).seconds)
               for pt in points]
        log_eff = statistics.fmean(r - m for r, m in zip(raw, logs, strict=True))
        log_eff = min(max(log_eff, math.log(EFFICIENCY_BOUNDS[0])), math.log(EFFICIENCY_BOUNDS[1]))
        sse = sum((r - log_eff - m) ** 2 for r, m in zip(raw, logs, strict=True))
        return sse, replace(trial, efficiency=math.exp(log_eff))

    values = {name: getattr(base, name) for name in grids}
    best = score(values)
    for _ in range(FIT_PASSES):
        before = dict(values)
        for name, grid in grids.items():
            for candidate in grid:
                trial = values | {name: candidate}
                result = score(trial)
                if result[0] < best[0] - 1e-12:
                    best, values = result, trial
        if values == before:
            break
    return Fit(best[1], len(points), math.sqrt(best[0] / len(points)), ("efficiency", *grids))


def _with_link(rates: Rates, chosen: Link) -> Rates:
    return replace(rates, latency_s=chosen.latency_s, bandwidth_bytes_s=chosen.bandwidth_bytes_s)
