"""The tuned benchmark's model inputs for a system, read from the store (`rates_for`: HPL's by default).

What the inputs are and how they come from stored results is the benchmark's tuning declaration's
(bench/declare.py's `Tuning.model_inputs`; HPL's in bench/hpl/tuning.py: DGEMM per core, latency and
bandwidth, calibrated to the stored HPL results, with fallbacks said in the sentence). Here is only
what the store gives it: the valid values of a metric, on this system, of runs that count
(analysis/flags.counts: a truncated, suspect, disturbed or excluded run is no evidence of a rate).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable

from clusterbench.bench.declare import StoredValue, Tuning
from clusterbench.bench.registry import benchmark_class
from clusterbench.store.db import Store
from clusterbench.system.discover import SystemInfo

# The benchmark whose model `rates_for` and `hpl_points` answer for when no declaration is given:
# HPL's analytic model, the one `plan hpl` predicts with and the tuner is used with today.
DEFAULT_BENCHMARK = "hpl"


def declared(name: str = DEFAULT_BENCHMARK) -> Tuning:
    """The tuning declaration of a benchmark, through the registry."""
    tuning = benchmark_class(name).tuning
    if tuning is None:
        from clusterbench.errors import UserInputError

        raise UserInputError(f"{name} declares no tuning: it cannot be tuned")
    return tuning


# The default model's constants its fallbacks are checked against, read from its declaration when first asked
# for (importing this module does not import the benchmark).
MODEL_CONSTANTS = ("TYPICAL_DGEMM_EFFICIENCY", "TYPICAL_LINKS", "UNCALIBRATED_EFFICIENCY", "EFFICIENCY_BOUNDS")


def __getattr__(name: str):
    if name in MODEL_CONSTANTS:
        return getattr(declared(), name.lower())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def rates_for(store: Store | None, system: SystemInfo, nodes: int = 1, *,
              interconnect: str | None = None, tuning: Tuning | None = None) -> tuple[object, str]:
    """The model inputs and a sentence saying where each came from (stored runs, or assumed).

    `interconnect` (shm, infiniband, ethernet) names the typical link assumed across nodes when no
    multi-node measurement is stored (default: ethernet, the cautious guess)."""
    tuning = tuning or declared()
    return tuning.model_inputs(stored_values(store, system), system, nodes, interconnect=interconnect)


def stored_values(store: Store | None, system: SystemInfo | Iterable[str]) -> Callable[[str], list[StoredValue]]:
    """metric name -> (params, labels, value, unit, run id) of its valid values on this system (or these
    stored system ids), of the runs that count."""
    if store is None:
        return lambda name: []
    ids = system_ids(store, system) if isinstance(system, SystemInfo) else list(system)
    return lambda name: _rows(store, ids, name)


def hpl_points(store: Store, ids: list[str], tuning: Tuning | None = None) -> list:
    """The stored results the default model is calibrated to (HPL's: standalone HPL and HPCC's HPL), newest last."""
    return (tuning or declared()).points(stored_values(store, ids))


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


def _rows(store: Store | None, ids: Iterable[str], name: str) -> list[StoredValue]:
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


def stored_rates_view(bench, plan, system: SystemInfo, interconnect: str, from_file: bool) -> dict:
    """A plan as the benchmark's model sees it (`bench.plan_predictions`, `plan hpl`'s model column), with the
    rates of stored runs of this system, else fallbacks. The store is only read; one that cannot be read
    leaves the fallbacks (planning must not stop). `from_file`: `system` was read from a file and is used as
    it is; else this machine is discovered again with its software (the stored runs' identity)."""
    from clusterbench.system.discover import discover

    system = system if from_file else discover(nodes=plan.nodes)
    tuning = bench.tuning
    try:
        with Store(read_only=True) as store:
            rates, source = rates_for(store, system, plan.nodes, interconnect=interconnect, tuning=tuning)
    except Exception:  # noqa: BLE001 - no store, or one that cannot be read: the fallbacks
        rates, source = rates_for(None, system, plan.nodes, interconnect=interconnect, tuning=tuning)
    return bench.plan_predictions(plan, rates, source)
