"""HPL's efficiency (Rmax/Rpeak) as measured on this system, for planning the next runs.

The HPL planner sizes N for a solve time and estimates times at an assumed efficiency; a
value measured here beats the textbook default (planner.DEFAULT_EFFICIENCY), whose BLAS and
memory may be nothing like this machine's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from clusterbench.analysis.flags import counts
from clusterbench.analysis.identity import known_node_count
from clusterbench.bench import registry
from clusterbench.store.db import Store

if TYPE_CHECKING:
    from clusterbench.system.discover import SystemInfo


def learned_efficiency(system: SystemInfo, db: str | Path | None = None) -> float | None:
    """Median Rmax/Rpeak of the stored HPL results on this system that count, if any: the values of the
    metrics declared as an Rmax held against the peak (a `peak` use in the `rmax` role: HPL's Gflop/s).

    Each value is held against the Rpeak of the nodes its run states it used (a node's Rpeak x
    `identity.known_node_count`): a run whose node count is unknown says nothing about efficiency
    and is left out, and so are runs whose flags keep them from counting (truncated, suspect,
    excluded...) and values above 100%, which cannot be true. None also when the system cannot be
    recognised (a topology read from a file has no software or memory facts to fingerprint) or the
    store cannot be read: planning must not stop over it."""
    node_rpeak = system.rpeak_node_gflops
    if not node_rpeak or system.software is None and system.memory is None:
        return None
    try:
        with Store(db, read_only=True) as store:
            rows = [row for name in rmax_names()
                    for row in store.metric_rows(name, system_id=system.fingerprint(), valid_only=True)]
            extra = {r["id"]: r for r in store.find_runs(("id", "source", "nodes", "reason"))} if rows else {}
    except Exception:  # noqa: BLE001 - an unreadable store must not stop planning
        return None
    values = []
    for row in rows:
        more = extra.get(row["run_id"])
        run = {"params": json.loads(row["params"] or "{}"), "tags": json.loads(row["tags"] or "{}"),
               "facts": json.loads(row["facts"] or "{}"), "status": row["status"], "valid": row["run_valid"],
               "excluded": row["excluded"] if "excluded" in row.keys() else None,
               "source": more["source"] if more else None, "nodes": more["nodes"] if more else None,
               "reason": more["reason"] if more else None}
        nodes = known_node_count(run)
        if nodes is None or not counts(run):
            continue
        efficiency = row["value"] / (node_rpeak * nodes)
        if 0 < efficiency <= 1:
            values.append(efficiency)
    values.sort()
    return values[len(values) // 2] if values else None


def rmax_names() -> list[str]:
    """The names of the metrics that are an Rmax, each once (HPCC stores HPL's under the same name)."""
    return list(dict.fromkeys(d.spec.name for d in registry.drawn("peak", "rmax")))
