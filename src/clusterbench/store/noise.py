"""The stored noise floors (analysis/noise.py computes them): one row per benchmark, configuration,
metric and unit, replaced as a whole for the benchmarks a refresh covered. All of the floors' SQL.

Also the one read the campaign engine needs to know a campaign's repeat policy when its caller does
not pass it: the campaign file as recorded when it started (`campaign_spec`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable

from clusterbench.store.encoding import now_iso
from clusterbench.store.schema import ensure_noise

MAX_RUNS_KEPT = 200  # run ids kept per floor: enough to trace it, bounded for a configuration repeated 10,000 times
COLUMNS = ("benchmark", "configuration", "metric", "unit", "system", "floor", "n", "groups", "runs", "computed_at")


def _has_table(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='noise_floors'").fetchone() \
        is not None


def replace_floors(store, floors: Iterable[dict], benchmarks: Iterable[str] | None = None) -> int:
    """Store `floors` (dicts with COLUMNS but computed_at), first dropping every floor of `benchmarks`
    (all of them when None): a configuration whose repeats no longer count loses its floor. Returns
    how many were stored."""
    at = now_iso()
    rows = [(f["benchmark"], f["configuration"], f["metric"], f["unit"] or "", f.get("system"), float(f["floor"]),
             int(f["n"]), int(f["groups"]), json.dumps(list(f.get("runs") or [])[:MAX_RUNS_KEPT]), at)
            for f in floors]
    with store.transaction() as conn:
        ensure_noise(conn)
        if benchmarks is None:
            conn.execute("DELETE FROM noise_floors")
        else:
            conn.executemany("DELETE FROM noise_floors WHERE benchmark=?", [(b,) for b in set(benchmarks)])
        conn.executemany(f"INSERT OR REPLACE INTO noise_floors ({', '.join(COLUMNS)}) "
                         f"VALUES ({', '.join('?' * len(COLUMNS))})", rows)
    return len(rows)


def read_floors(store, benchmarks: Iterable[str] | None = None, metrics: Iterable[str] | None = None) -> list[dict]:
    """The stored floors (of these benchmarks and metrics when given), runs decoded; none when the
    table was never written."""
    conn = store.conn
    if not _has_table(conn):
        return []
    where, args = [], []
    for column, values in (("benchmark", benchmarks), ("metric", metrics)):
        if values is not None:
            values = sorted(set(values))
            if not values:
                return []
            where.append(f"{column} IN ({', '.join('?' * len(values))})")
            args += values
    sql = f"SELECT {', '.join(COLUMNS)} FROM noise_floors" + (f" WHERE {' AND '.join(where)}" if where else "")
    out = []
    for row in conn.execute(sql + " ORDER BY benchmark, metric, system, configuration", args):
        item = dict(zip(COLUMNS, row, strict=True))
        try:
            item["runs"] = json.loads(item["runs"] or "[]")
        except ValueError:
            item["runs"] = []
        out.append(item)
    return out


def campaign_spec(store, name: str) -> str | None:
    """The text of the campaign file `name` as recorded when it last started, or None."""
    row = store.conn.execute("SELECT spec FROM campaigns WHERE name=?", (name,)).fetchone()
    return None if row is None else str(row[0])
