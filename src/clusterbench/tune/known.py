"""The best configuration of a tunable benchmark known for a system: what `clusterbench run` uses for its
standalone HPL (the default benchmark, tune/rates.py's DEFAULT_BENCHMARK).

Two sources, in this order:

1. a tuning session's verdict: `clusterbench tune hpl` tags the runs of its incumbent `tune_best=<session>`;
   the newest such session of this system wins (a later session was tuned with more knowledge);
2. the stored runs of the benchmark on this system: the configuration with the best median figure of merit
   (HPL's Gflop/s) among those measured at least twice at one of the larger fidelities (HPL's N at least
   half the largest stored). One fast sample is not evidence on a machine where identical runs differ by
   25%, hence "twice"; and "twice" means two runs of the same configuration (analysis/identity.py) that
   count (flags.counts).

A configuration is what a run may set besides the fidelity: the tuning declaration's `config_keys` (for
HPL: NB, the grid, the layout, the BLAS variant and HPL's algorithm knobs). Parameters left at their
defaults are left out, so the run that reuses it states only what the source stated.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass

from clusterbench.analysis.flags import counts
from clusterbench.analysis.identity import configuration_ids, identity_frame
from clusterbench.bench.declare import Tuning
from clusterbench.store.db import Store
from clusterbench.tune.rates import declared

MIN_SAMPLES = 2
LARGE_N_SHARE = 0.5  # stored runs count when their N is at least this share of the largest stored N


@dataclass(frozen=True)
class KnownConfig:
    params: dict  # the parameters of the configuration (HPL: nb, p, q, layout, blas, knobs it set)
    gflops: float  # median of its valid figures of merit at `n` (HPL: Gflop/s)
    n: int  # the fidelity (HPL: N)
    samples: int
    source: str  # one sentence: where it comes from

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.params.items())


def config_of(params: dict, tuning: Tuning | None = None) -> dict:
    """The configuration part of a stored run's parameters (defaults and the fidelity left out)."""
    keys = (tuning or declared()).config_keys
    return {k: params[k] for k in keys if params.get(k) is not None and params.get(k) != "default"}


def best_known(store: Store, system_id: str, tuning: Tuning | None = None) -> KnownConfig | None:
    """The configuration to run the benchmark (default HPL) with on this system, or None when nothing stored
    is evidence enough.

    Runs are pooled as repeats only when they are the same configuration (analysis/identity.py:
    every key they state equal, N apart, the tuner's session tags aside) and count (flags.counts:
    not truncated, suspect, disturbed, excluded): a fast run of another BLAS or thread count is
    never a second sample of this one."""
    tuning = tuning or declared()
    rows = store.metric_rows(tuning.merit, benchmark=tuning.benchmark, system_id=system_id, valid_only=True)
    runs = _counted_runs(store, rows)
    if not runs:
        return None
    frame = identity_frame(runs, store.hostnames())
    session_keys = SESSION_TAGS | {tuning.fidelity}
    same = configuration_ids(frame, [c for c in frame.columns if c not in session_keys])
    groups: dict[tuple[int, int], list[float]] = {}
    sessions: dict[tuple[str, int, int], str] = {}  # (session, configuration, N) -> newest start time
    configs: dict[int, dict] = {}
    for row in rows:
        run = runs.get(row["run_id"])
        if run is None:
            continue
        key = int(same[row["run_id"]])
        configs[key] = config_of(run["params"], tuning)
        n = int(run["params"].get(tuning.fidelity) or 0)
        groups.setdefault((key, n), []).append(float(row["value"]))
        if run["tags"].get("tune_best"):
            best = (run["tags"]["tune_best"], key, n)
            sessions[best] = max(sessions.get(best, ""), row["started_at"] or "")
    if sessions:
        session, key, n = max(sessions, key=sessions.__getitem__)
        values = groups[(key, n)]
        return KnownConfig(configs[key], statistics.median(values), n, len(values),
                           f"tuning session {session} (median of {len(values)} runs at N={n})")
    if not groups:
        return None
    largest = max(n for _, n in groups)
    candidates = [(statistics.median(v), key, n, len(v)) for (key, n), v in groups.items()
                  if n >= LARGE_N_SHARE * largest and len(v) >= MIN_SAMPLES]
    if not candidates:
        return None
    gflops, key, n, count = max(candidates)
    return KnownConfig(configs[key], gflops, n, count,
                       f"stored runs of this system (median of {count} runs at N={n}, one configuration)")


# The tuner's bookkeeping tags name sessions, not configurations; the fidelity (N) is grouped on its own.
SESSION_TAGS = frozenset({"tag:tune", "tag:tune_level", "tag:tune_best"})


def _counted_runs(store: Store, rows) -> dict[str, dict]:
    """Run id -> the decoded run (what identity and flags read) of the rows' runs that count."""
    runs: dict[str, dict] = {}
    for row in rows:
        if row["run_id"] not in runs:
            runs[row["run_id"]] = {"id": row["run_id"], "benchmark": row["benchmark"], "status": row["status"],
                                   "valid": row["run_valid"], "system_id": row["system_id"],
                                   "params": json.loads(row["params"]), "tags": json.loads(row["tags"] or "{}"),
                                   "facts": json.loads(row["facts"] or "{}"),
                                   "excluded": row["excluded"] if "excluded" in row.keys() else None}
    if not runs:
        return runs
    for row in store.find_runs(("id", "source", "nodes", "reason"), id=list(runs)) if len(runs) <= 500 else \
            store.find_runs(("id", "source", "nodes", "reason")):
        if (run := runs.get(row["id"])) is not None:
            run.update(source=row["source"], nodes=row["nodes"], reason=row["reason"])
    return {rid: run for rid, run in runs.items() if counts(run)}
