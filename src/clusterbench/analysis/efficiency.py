"""HPL's efficiency (Rmax/Rpeak) as measured on this system, for planning the next runs.

The HPL planner sizes N for a solve time and estimates times at an assumed efficiency; a
value measured here beats the textbook default (planner.DEFAULT_EFFICIENCY), whose BLAS and
memory may be nothing like this machine's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from clusterbench.store.db import Store

if TYPE_CHECKING:
    from clusterbench.system.discover import SystemInfo


def learned_hpl_efficiency(system: SystemInfo, db: str | Path | None = None) -> float | None:
    """Median Rmax/Rpeak of valid stored HPL results on this system, if any.

    None also when the system cannot be recognised (a topology read from a file has no software
    or memory facts to fingerprint) or the store cannot be read: planning must not stop over it."""
    rpeak = system.rpeak_total_gflops
    if not rpeak or system.software is None and system.memory is None:
        return None
    try:
        with Store(db, read_only=True) as store:
            rows = store.metric_rows("hpl_gflops", system_id=system.fingerprint(), valid_only=True)
    except Exception:  # noqa: BLE001 - an unreadable store must not stop planning
        return None
    values = sorted(r["value"] / rpeak for r in rows)
    return values[len(values) // 2] if values else None
