"""The summary of `clusterbench run`: every figure from the suite's stored runs, as plain data.

The CLI prints it as a table or as JSON; nothing here formats for a terminal.
"""

from __future__ import annotations

from clusterbench.bench.registry import benchmark_class
from clusterbench.suite.characterise import SuiteResult
from clusterbench.system.discover import SystemInfo


def summarise(info: SystemInfo, result: SuiteResult, db_path: str) -> dict:
    """Every figure of the summary, each from the stored runs of this suite."""
    plan = result.plan
    rpeak = info.rpeak_total_gflops
    best = result.rmax()

    def val(name: str) -> float | None:
        m = result.metric(name)
        return m.value if m else None

    out = {
        "system": {"host": info.topology.hostname, "cpu": info.topology.model_name,
                   "cores": info.topology.cores_total, "sockets": info.topology.sockets,
                   "memory_bytes": info.memory_bytes(), "fingerprint": info.fingerprint()},
        "rpeak_gflops": rpeak,
        "rpeak_derivation": info.peak.derivation(),
        "rmax_gflops": best[0].value if best else None,
        "rmax_run": best[1] if best else None,
        "efficiency": (best[0].value / rpeak) if best and rpeak else None,
        "measured_peak": _measured_peak(db_path, info, best[0].value if best else None),
        "hpl": _hpl_entry(result, best),
        "repeats": result.repeats,
        "hpl_config_source": plan.hpl.config_source if plan.hpl else None,
        "hpl_plan": plan.hpl.to_dict() if plan.hpl else None,
        "dgemm_gflops": {"single": val("SingleDGEMM_Gflops"), "star_per_rank": val("StarDGEMM_Gflops")},
        "stream_gbs": {kind: {op: val(f"{kind.capitalize()}STREAM_{op}")
                              for op in ("Copy", "Scale", "Add", "Triad")}
                       for kind in ("single", "star")},
        "pingpong": {"latency_us_min": val("MinPingPongLatency_usec"),
                     "latency_us_avg": val("AvgPingPongLatency_usec"),
                     "bandwidth_gbs_max": val("MaxPingPongBandwidth_GBytes"),
                     "bandwidth_gbs_avg": val("AvgPingPongBandwidth_GBytes")},
        "hpcc_stream_array_bytes": benchmark_class("hpcc").vector_size(plan.n, plan.layout.ranks) * 8,
        "last_level_cache_bytes": info.topology.last_level_cache_bytes(),
        "stream_threads": _stream_scaling(result),
        "pingpong_curve": _pingpong_curve(result),
        "skipped": plan.skipped,
        "runs": [{"id": r.id, "status": r.status, "valid": r.valid, "reason": r.reason,
                  "duration_s": round(r.duration_s, 2), "workdir": str(r.workdir),
                  "blas_loaded": r.outcome.facts.get("blas_loaded_resolved")} for r in result.runs],
        "database": db_path,
    }
    return out




def _hpl_entry(result: SuiteResult, best) -> dict | None:
    """The Rmax result's labels with the layout of the run it came from (HPCC's or the standalone HPL's)."""
    if not best:
        return None
    run = next(r for r in result.runs if r.id == best[1])
    params = run.params
    return best[0].labels | {"benchmark": run.benchmark, "layout": params.get("layout", "mpi"),
                             "ranks": params.get("ranks"), "threads": params.get("threads"),
                             "blas": params.get("blas")}


def _stream_scaling(result: SuiteResult) -> list[dict]:
    """Triad (MB/s) of each valid stream kernel run, by thread count."""
    rows = []
    for run in result.runs:
        triad = run.outcome.best("stream_triad") if run.valid and run.benchmark == "stream" else None
        if triad:
            rows.append({"threads": run.params["threads"], "triad_mbs": triad.value,
                         "elements": run.params["n"], "run": run.id})
    return sorted(rows, key=lambda r: r["threads"])


def _pingpong_curve(result: SuiteResult) -> dict | None:
    """One-way time and bandwidth per message size of the ping-pong kernel run."""
    for run in result.runs:
        if run.valid and run.benchmark == "pingpong":
            times = {m.labels["bytes"]: m.value for m in run.outcome.metrics if m.name == "pingpong_time_us"}
            rates = {m.labels["bytes"]: m.value for m in run.outcome.metrics if m.name == "pingpong_bandwidth"}
            return {"run": run.id, "hosts": run.outcome.facts.get("hosts"),
                    "rows": [{"bytes": b, "time_us": times[b], "mbs": rates.get(b)} for b in sorted(times)]}
    return None


def _measured_peak(db_path: str, info: SystemInfo, rmax: float | None) -> dict | None:
    """The node peak the `clock` kernel measured on this system (best core x cores) and Rmax's share of it:
    the second reference beside the nominal Rpeak (a core can run above its nominal clock). None when no
    counted clock run of this system is stored (`clusterbench bench clock` measures it in a second)."""
    import json

    from clusterbench.analysis.peak import measured_peaks
    from clusterbench.store.db import Store

    with Store(db_path, read_only=True) as store:
        row = store.system(info.fingerprint())
        if row is None or not row["info"]:
            return None
        peak = measured_peaks(store, {row["id"]: {"info": json.loads(row["info"])}}).get(row["id"])
    if peak is None:
        return None
    return {"gflops": peak.node_gflops, "derivation": peak.derivation,
            "efficiency": rmax / peak.node_gflops if rmax and peak.node_gflops > 0 else None}

