"""The best HPL configuration known for a system: what `clusterbench run` uses for its standalone HPL.

Two sources, in this order:

1. a tuning session's verdict: `clusterbench tune hpl` tags the runs of its incumbent `tune_best=<session>`;
   the newest such session of this system wins (a later session was tuned with more knowledge);
2. the stored standalone HPL runs of this system: the configuration with the best median Gflop/s among
   those measured at least twice at one of the larger problem sizes (N at least half the largest stored).
   One fast sample is not evidence on a machine where identical runs differ by 25%, hence "twice"; and
   "twice" means two runs of the same configuration (analysis/identity.py) that count (flags.counts).

A configuration is what a run of `hpl` may set besides N: NB, the grid, the layout, the BLAS variant and
HPL's algorithm knobs. Parameters left at their defaults are left out, so the run that reuses it states
only what the source stated.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass

from clusterbench.analysis.flags import counts
from clusterbench.analysis.identity import configuration_ids, identity_frame
from clusterbench.bench.hpl.benchmark import HPL_KNOBS
from clusterbench.store.db import Store

CONFIG_KEYS = ("nb", "p", "q", "layout", "blas", *HPL_KNOBS)
MIN_SAMPLES = 2
LARGE_N_SHARE = 0.5  # stored runs count when their N is at least this share of the largest stored N


@dataclass(frozen=True)
class KnownConfig:
    params: dict  # the hpl parameters of the configuration (nb, p, q, layout, blas, knobs it set)
    gflops: float  # median of its valid results at `n`
    n: int
    samples: int
    source: str  # one sentence: where it comes from

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.params.items())


def config_of(params: dict) -> dict:
    """The configuration part of a stored run's parameters (defaults and N left out)."""
    return {k: params[k] for k in CONFIG_KEYS if params.get(k) is not None and params.get(k) != "default"}


def best_known(store: Store, system_id: str) -> KnownConfig | None:
    """The configuration to run HPL with on this system, or None when nothing stored is evidence enough.

    Runs are pooled as repeats only when they are the same configuration (analysis/identity.py:
    every key they state equal, N apart, the tuner's session tags aside) and count (flags.counts:
    not truncated, suspect, disturbed, excluded): a fast run of another BLAS or thread count is
    never a second sample of this one."""
    rows = store.metric_rows("hpl_gflops", benchmark="hpl", system_id=system_id, valid_only=True)
    runs = _counted_runs(store, rows)
    if not runs:
        return None
    frame = identity_frame(runs, store.hostnames())
    same = configuration_ids(frame, [c for c in frame.columns if c not in SESSION_KEYS])
    groups: dict[tuple[int, int], list[float]] = {}
    sessions: dict[tuple[str, int, int], str] = {}  # (session, configuration, N) -> newest start time
    configs: dict[int, dict] = {}
    for row in rows:
        run = runs.get(row["run_id"])
        if run is None:
            continue
        key = int(same[row["run_id"]])
        configs[key] = config_of(run["params"])
        n = int(run["params"].get("n") or 0)
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


# The tuner's bookkeeping tags name sessions, not configurations; N is grouped on its own.
SESSION_KEYS = frozenset({"n", "tag:tune", "tag:tune_level", "tag:tune_best"})


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
