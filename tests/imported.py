"""What the tests of `clusterbench import` read back: stored runs as the Store's readers see them.

Since schema version 4 an imported file's results share one `import_files` row (the output they name,
the facts text they have in common), so a raw `JOIN artifacts` or `SELECT facts FROM runs` no longer shows
what was imported; these helpers read through the Store, as every reader of the code does.
"""

from __future__ import annotations

from clusterbench.store.db import Store

# What an import adds, counted (a second import of the same files must add none of it).
COUNTS_SQL = ("SELECT (SELECT COUNT(*) FROM runs), (SELECT COUNT(*) FROM metrics), (SELECT COUNT(*) FROM artifacts),"
              " (SELECT COUNT(*) FROM import_files), (SELECT COUNT(*) FROM blobs)")


def stored_runs(db) -> list[dict]:
    """Every run (full row, facts as written) with `name`, the name of its one output, in storing order."""
    with Store(db, read_only=True) as store:
        ids = [row[0] for row in store.conn.execute("SELECT id FROM runs ORDER BY rowid")]
        rows = store.runs_by_id(ids)
        out = []
        for run_id in ids:
            names = [a["name"] for a in store.artifacts(run_id)]
            out.append(dict(rows[run_id]) | {"name": names[0] if names else None})
        return out


def runs_of_output(db, name: str) -> list[str]:
    """The ids of the runs whose output is called `name`, in storing order."""
    return [run["id"] for run in stored_runs(db) if run["name"] == name]
