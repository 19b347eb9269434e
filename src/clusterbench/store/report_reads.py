"""Bulk reads of a report, answered as the Store's own read methods answer them (read-only).

A report over 100,000 runs reads most of the metrics table (ping-pong sweeps alone are two thirds of
its rows). Through the name index SQLite visits those rows in index order and then sorts them back by
id; walking the table once in id order gives the same rows without the sort and the scattered page
reads: measured on report_scale.py's store, IMB's 520,000 rows in 2.3 s instead of 3.8 s. For a name
with few rows the index stays the faster way, so the plan is chosen from the index's own count.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from clusterbench.store.queries import METRIC_VALUE_COLUMNS, Reads

SCAN_SHARE = 0.2  # a read of more than this share of the metric rows walks the table in id order


def metric_values(store: Reads, names: Iterable[str] | None = None) -> list[sqlite3.Row]:
    """`store.metric_values(names)`: the same rows in the same order (by id), read by one walk over the
    table when the names hold more than SCAN_SHARE of its rows (a count the name index answers)."""
    if names is None:
        return store.metric_values(None)
    args = sorted(set(names))
    if not args or not _mostly(store, args):
        return store.metric_values(args)
    marks = ",".join("?" * len(args))
    return store.conn.execute(f"SELECT {METRIC_VALUE_COLUMNS} FROM metrics NOT INDEXED WHERE name IN ({marks}) "
                              "ORDER BY id", args).fetchall()


def _mostly(store: Reads, names: list[str]) -> bool:
    """Do these names hold more than SCAN_SHARE of the metric rows? max(id) stands for the row count
    (a count of the table is itself a walk of it; ids only grow, so it errs towards the index)."""
    marks = ",".join("?" * len(names))
    wanted = store.conn.execute(f"SELECT count(*) FROM metrics WHERE name IN ({marks})", names).fetchone()[0]
    total = store.conn.execute("SELECT max(id) FROM metrics").fetchone()[0] or 0
    return wanted > SCAN_SHARE * total
