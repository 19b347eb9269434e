"""The best HPL configuration known for a system: what `clusterbench run` uses for its standalone HPL.

Two sources, in this order:

1. a tuning session's verdict: `clusterbench tune hpl` tags the runs of its incumbent `tune_best=<session>`;
   the newest such session of this system wins (a later session was tuned with more knowledge);
2. the stored standalone HPL runs of this system: the configuration with the best median Gflop/s among
   those measured at least twice at one of the larger problem sizes (N at least half the largest stored).
   One fast sample is not evidence on a machine where identical runs differ by 25%, hence "twice".

A configuration is what a run of `hpl` may set besides N: NB, the grid, the layout, the BLAS variant and
HPL's algorithm knobs. Parameters left at their defaults are left out, so the run that reuses it states
only what the source stated.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass

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
    """The configuration to run HPL with on this system, or None when nothing stored is evidence enough."""
    rows = store.metric_rows("hpl_gflops", benchmark="hpl", system_id=system_id, valid_only=True)
    groups: dict[tuple[str, int], list[float]] = {}
    sessions: dict[tuple[str, str, int], str] = {}  # (session, configuration, N) -> newest start time
    configs: dict[str, dict] = {}
    for row in rows:
        params, tags = json.loads(row["params"]), json.loads(row["tags"] or "{}")
        config = config_of(params)
        key = json.dumps(config, sort_keys=True)
        configs[key] = config
        n = int(params.get("n") or 0)
        groups.setdefault((key, n), []).append(float(row["value"]))
        if tags.get("tune_best"):
            best = (tags["tune_best"], key, n)
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
                       f"stored runs of this system (median of {count} runs at N={n})")
