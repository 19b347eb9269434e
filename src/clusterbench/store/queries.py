"""Reading stored runs: the Store's read methods (class Reads) and the columns of a run row.

Every read puts back what the store keeps once for many runs (an imported file's shared facts and the
output it names: `run_columns`, `_artifact_rows`) and adds each run's curation (`curation_columns`), so
readers get the rows as written. All SQL of the readers is here: analysis, report and the tuner call
these methods.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from clusterbench.errors import EnvironmentProblem
from clusterbench.store.blobs import DELTA_CODEC, BlobDamaged, unpack
from clusterbench.store.curation import decode_notes
from clusterbench.store.shared_facts import facts_sql

JSON_RUN_COLUMNS = ("params", "env", "launcher", "tags", "facts")
METRIC_VALUE_COLUMNS = "run_id, name, value, unit, higher_is_better, labels, valid"  # a metric row as read
RUN_COLUMNS = ("id", "campaign", "benchmark", "params", "repeat", "status", "valid", "reason", "exit_code",
               "started_at", "ended_at", "duration_s", "command", "workdir", "env", "launcher", "system_id",
               "nodes", "tags", "facts", "source", "content_hash")


class Reads:
    """The Store's read methods (see the module's docstring)."""

    conn: sqlite3.Connection
    path: Path
    has_blobs: bool
    has_import_files: bool

    def facts_column(self, table: str = "runs") -> str:
        """The SQL of a run's facts as written, named facts (see run_columns)."""
        return f"{facts_sql(table)} AS facts" if self.has_import_files else f"{table}.facts"

    def run_columns(self, table: str = "runs") -> str:
        """The SQL of every column of a run row, in the table's order, for a query on `table` (a name or
        an alias of runs): `*`, but with the facts as written (facts_sql) once imported files share theirs."""
        if not self.has_import_files:
            return f"{table}.*"
        return ", ".join(f"{facts_sql(table)} AS facts" if c == "facts" else f"{table}.{c}" for c in RUN_COLUMNS)

    def run(self, run_id: str) -> sqlite3.Row | None:
        return self.conn.execute(f"SELECT {self.run_columns()}, {self.curation_columns()} FROM runs WHERE id=?",
                                 (run_id,)).fetchone()

    def runs(self, benchmark: str | None = None, campaign: str | None = None,
             status: str | None = None, limit: int | None = None) -> list[sqlite3.Row]:
        """Runs matching the filters, newest first, at most `limit` (None or 0: all)."""
        where, args = self._filters(benchmark, campaign, status)
        sql = (f"SELECT {self.run_columns()}, {self.curation_columns()} FROM runs WHERE 1=1{where}"
               " ORDER BY started_at DESC")
        if limit:
            sql += f" LIMIT {int(limit)}"
        return self.conn.execute(sql, args).fetchall()

    def count_runs(self, benchmark: str | None = None, campaign: str | None = None,
                   status: str | None = None) -> int:
        """How many runs match the filters of `runs` (what a listing that shows fewer says it hides)."""
        where, args = self._filters(benchmark, campaign, status)
        return self.conn.execute(f"SELECT COUNT(*) FROM runs WHERE 1=1{where}", args).fetchone()[0]

    @staticmethod
    def _filters(benchmark: str | None, campaign: str | None, status: str | None) -> tuple[str, list]:
        sql, args = "", []
        for col, val in (("benchmark", benchmark), ("campaign", campaign), ("status", status)):
            if val is not None:
                sql += f" AND {col}=?"
                args.append(val)
        return sql, args

    def finished_ids(self, ids: list[str], statuses: tuple[str, ...]) -> set[str]:
        """Which of these run ids are stored with one of these statuses."""
        done: set[str] = set()
        for start in range(0, len(ids), 500):  # SQLite limits the number of parameters
            chunk = ids[start:start + 500]
            rows = self.conn.execute(
                f"SELECT id FROM runs WHERE status IN ({','.join('?' * len(statuses))})"
                f" AND id IN ({','.join('?' * len(chunk))})", (*statuses, *chunk)).fetchall()
            done.update(row[0] for row in rows)
        return done

    def durations(self, campaign: str) -> dict[str, float]:
        """Run id -> measured duration of a campaign's completed (ok or invalid) runs."""
        rows = self.conn.execute("SELECT id, duration_s FROM runs WHERE campaign=? AND duration_s IS NOT NULL"
                                 " AND status IN ('ok', 'invalid')", (campaign,)).fetchall()
        return {row[0]: row[1] for row in rows}

    def campaign_counts(self) -> list[sqlite3.Row]:
        return self.conn.execute(
            "SELECT campaign, COUNT(*) AS runs, SUM(status='ok') AS ok, SUM(status='invalid') AS invalid,"
            " SUM(status='failed') AS failed, SUM(status='timeout') AS timeout,"
            " SUM(status IN ('running','interrupted')) AS unfinished, MAX(started_at) AS last"
            " FROM runs WHERE campaign IS NOT NULL GROUP BY campaign ORDER BY last DESC").fetchall()

    def metrics(self, run_id: str) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM metrics WHERE run_id=? ORDER BY id", (run_id,)).fetchall()

    def artifact(self, run_id: str, name: str) -> dict | None:
        """One stored output: run_id, name, path, sha256, size and `content`, its original bytes
        (None when larger than MAX_BLOB_BYTES: read `path` then). Bytes that do not decode to their
        recorded size and hash are refused (EnvironmentProblem), never handed on."""
        if not self.has_blobs:  # a version-1 file opened read-only: the bytes are inline
            row = self.conn.execute("SELECT run_id, name, path, sha256, size, content AS inline, NULL AS codec,"
                                    " NULL AS packed FROM artifacts WHERE run_id=? AND name=?",
                                    (run_id, name)).fetchone()
        else:
            base = (", b.base, c.codec AS base_codec, c.content AS base_packed, c.size AS base_size"
                    " FROM ({}) a LEFT JOIN blobs b ON b.sha256 = a.sha256 LEFT JOIN blobs c ON c.sha256 = b.base"
                    if self.has_import_files else " FROM ({}) a LEFT JOIN blobs b ON b.sha256 = a.sha256")
            row = self.conn.execute(
                "SELECT a.run_id, a.name, a.path, a.sha256, a.size, a.content AS inline, b.codec,"
                " b.content AS packed" + base.format(self._artifact_rows()) + " WHERE a.name=?",
                (run_id, run_id, name) if self.has_import_files else (run_id, name)).fetchone()
        if row is None:
            return None
        out = {k: row[k] for k in ("run_id", "name", "path", "sha256", "size")}
        codec, packed = ("raw", row["inline"]) if row["inline"] is not None else (row["codec"], row["packed"])
        try:
            base = None
            if codec == DELTA_CODEC and row["base_codec"] is not None:
                base = unpack(row["base_codec"], row["base_packed"], row["base_size"], row["base"])
            out["content"] = unpack(codec, packed, row["size"], row["sha256"], base)
        except BlobDamaged as exc:
            raise EnvironmentProblem(f"the stored copy of output {name!r} of run {run_id} is damaged: {exc}",
                                     where=str(self.path),
                                     hint=f"see every damaged output: clusterbench --db {self.path} db check; "
                                          + (f"the file itself may still be at {row['path']}" if row["path"]
                                             else "restore a backup")) from None
        return out

    def artifacts(self, run_id: str) -> list[sqlite3.Row]:
        return self.conn.execute(f"SELECT run_id, name, path, sha256, size FROM ({self._artifact_rows()})",
                                 (run_id, run_id) if self.has_import_files else (run_id,)).fetchall()

    def _artifact_rows(self) -> str:
        """The SQL of one run's artifact rows (run_id, name, path, sha256, size, content), the run id its
        parameter (twice once files are shared): its own rows, else the output its imported file's row
        names (version 4 writes no artifacts row for that)."""
        own = "SELECT run_id, name, path, sha256, size, content FROM artifacts WHERE run_id=?"
        if not self.has_import_files:
            return own
        return (f"{own} UNION ALL SELECT r.id, f.name, f.path, f.sha256, f.size, NULL FROM runs r"
                " JOIN import_files f ON f.sha256 = substr(r.content_hash, 1, 64)"
                " WHERE r.id=? AND r.content_hash IS NOT NULL"
                " AND NOT EXISTS (SELECT 1 FROM artifacts o WHERE o.run_id = r.id)")

    def system(self, system_id: str) -> sqlite3.Row | None:
        return self.conn.execute("SELECT * FROM systems WHERE id=?", (system_id,)).fetchone()

    def metric_rows(self, name: str | None = None, benchmark: str | None = None,
                    system_id: str | None = None, valid_only: bool = False,
                    campaign: str | None = None) -> list[sqlite3.Row]:
        """Metrics joined with their runs: the shape analysis and the planner read."""
        sql = ("SELECT r.id AS run_id, r.benchmark, r.campaign, r.params, r.repeat, r.status,"
               f" r.valid AS run_valid, r.system_id, r.started_at, r.duration_s, r.tags, {self.facts_column('r')},"
               f" m.name, m.value, m.unit, m.higher_is_better, m.labels, m.valid, {self.curation_columns('r')}"
               " FROM metrics m JOIN runs r ON r.id = m.run_id WHERE 1=1")
        args: list = []
        for col, val in (("m.name", name), ("r.benchmark", benchmark), ("r.system_id", system_id),
                         ("r.campaign", campaign)):
            if val is not None:
                sql += f" AND {col}=?"
                args.append(val)
        if valid_only:
            sql += " AND m.valid=1 AND r.valid=1"
        return self.conn.execute(sql + " ORDER BY r.started_at, m.id", args).fetchall()

    def recent_figures(self, benchmark: str, system_id: str, metrics: tuple[str, ...],
                       limit: int = 5) -> list[tuple[dict, float, list[float]]]:
        """(params, total seconds, [the value of each of `metrics`]) of the last `limit` ok runs of
        `benchmark` on this system, newest first; runs missing a figure or a duration are left out.
        What a benchmark's time model learns from (HPCC's: its N, total time, HPL time and rate)."""
        if not 1 <= len(metrics) <= 8:
            raise ValueError("between 1 and 8 metrics")
        figures = ", ".join(f"(SELECT value FROM metrics WHERE run_id=r.id AND name=?) AS m{i}"
                            for i in range(len(metrics)))
        rows = self.conn.execute(
            f"SELECT r.params, r.duration_s, {figures} FROM runs r WHERE r.benchmark=? AND r.system_id=? "
            "AND r.status='ok' ORDER BY r.started_at DESC LIMIT ?",
            (*metrics, benchmark, system_id, int(limit))).fetchall()
        out = []
        for r in rows:
            values = [r[f"m{i}"] for i in range(len(metrics))]
            if r["duration_s"] and all(values):
                out.append((json.loads(r["params"]), float(r["duration_s"]), [float(v) for v in values]))
        return out

    def run_durations(self, benchmark: str, system_id: str, limit: int = 30) -> list[sqlite3.Row]:
        """(params, duration_s) of the last `limit` ok runs of `benchmark` on this system with a measured
        duration, newest first: what the tuner measures the harness's cost of one run with
        (tune.trials.measured_startup)."""
        return self.conn.execute("SELECT params, duration_s FROM runs WHERE benchmark=? AND status='ok' AND "
                                 "system_id=? AND duration_s IS NOT NULL ORDER BY started_at DESC LIMIT ?",
                                 (benchmark, system_id, int(limit))).fetchall()

    def find_runs(self, columns: Iterable[str] | None = None, extracts: Iterable[tuple[str, str]] = (),
                  **alternatives: Iterable[str]) -> list[sqlite3.Row]:
        """Runs whose columns (id, campaign, source, benchmark) each hold one of the values given
        for them, oldest first: the part of a selection SQL answers with its indexes.

        `columns`: only these (a selection testing 100,000 runs reads a third of the bytes; see
        runs_by_id). `extracts`: (JSON column, JSON path) pairs read by SQLite, each as t<i> (its
        json_type, NULL when absent) and v<i> (its json_extract), so a term on one parameter does
        not decode every run's parameters in Python. A malformed JSON text makes SQLite fail the
        query (sqlite3.OperationalError): the caller then decodes in Python."""
        names, args = f"{self.run_columns()}, {self.curation_columns()}", []
        if columns is not None:
            columns = list(columns)
            unknown = [c for c in columns if c not in RUN_COLUMNS]
            if unknown:
                raise ValueError(f"not a run column: {unknown[0]}")
            names = ", ".join(self.facts_column() if c == "facts" else c for c in columns)
        for i, (column, path) in enumerate(extracts):
            if column not in JSON_RUN_COLUMNS:
                raise ValueError(f"not a JSON run column: {column}")
            value = self.facts_column().removesuffix(" AS facts") if column == "facts" else column
            names += f", json_type({value}, ?) AS t{i}, json_extract({value}, ?) AS v{i}"
            args += [path, path]
        sql = f"SELECT {names} FROM runs WHERE 1=1"
        for column, values in alternatives.items():
            if column not in ("id", "campaign", "source", "benchmark"):
                raise ValueError(f"not a selectable run column: {column}")
            values = sorted(set(values))
            if len(values) > 500:  # SQLite limits the number of parameters: callers match more in Python
                raise ValueError(f"{len(values)} values for {column}, more than 500")
            sql += f" AND {column} IN ({','.join('?' * len(values))})"
            args += values
        return self.conn.execute(sql + " ORDER BY started_at, id", args).fetchall()

    def runs_by_id(self, ids: Iterable[str]) -> dict[str, sqlite3.Row]:
        """Run id -> full row, for these ids (unknown ones left out)."""
        ids, rows, extra = list(ids), {}, self.curation_columns()
        for start in range(0, len(ids), 500):  # SQLite limits the number of parameters
            chunk = ids[start:start + 500]
            for row in self.conn.execute(f"SELECT {self.run_columns()}, {extra} FROM runs"
                                         f" WHERE id IN ({','.join('?' * len(chunk))})", chunk):
                rows[row["id"]] = row
        return rows

    def hostnames(self) -> dict[str, str | None]:
        """System id -> host name of every stored system (what `system=HOST` selects by)."""
        return {row[0]: row[1] for row in self.conn.execute("SELECT id, hostname FROM systems")}

    def all_runs(self) -> list[sqlite3.Row]:
        """Every run, oldest first: what selections (reports, comparisons) filter."""
        return self.conn.execute(f"SELECT {self.run_columns()}, {self.curation_columns()} FROM runs"
                                 " ORDER BY started_at, id").fetchall()

    def run_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]

    def distinct(self, column: str) -> list[str]:
        """The stored values of one run column (campaign, benchmark, status), sorted, without NULL."""
        if column not in ("campaign", "benchmark", "status", "source", "system_id"):
            raise ValueError(f"not a filterable run column: {column}")
        rows = self.conn.execute(f"SELECT DISTINCT {column} FROM runs WHERE {column} IS NOT NULL"
                                 f" ORDER BY {column}").fetchall()
        return [row[0] for row in rows]

    def metric_names(self, run_ids: Iterable[str] | None = None) -> list[str]:
        """The stored metric names, sorted; only those of these runs when given."""
        if run_ids is None:
            rows = self.conn.execute("SELECT DISTINCT name FROM metrics ORDER BY name").fetchall()
            return [row[0] for row in rows]
        ids, names = list(run_ids), set()
        for start in range(0, len(ids), 500):  # SQLite limits the number of parameters
            chunk = ids[start:start + 500]
            names.update(row[0] for row in self.conn.execute(
                f"SELECT DISTINCT name FROM metrics WHERE run_id IN ({','.join('?' * len(chunk))})", chunk))
        return sorted(names)

    def campaign_names(self) -> set[str]:
        rows = self.conn.execute("SELECT name FROM campaigns UNION SELECT DISTINCT campaign FROM runs"
                                 " WHERE campaign IS NOT NULL").fetchall()
        return {row[0] for row in rows}

    def systems(self) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM systems ORDER BY created_at").fetchall()

    def metric_values(self, names: Iterable[str] | None = None) -> list[sqlite3.Row]:
        """Metric rows (run id, name, value, unit, labels, valid), only these names when given:
        a report reads a few dozen metric names, not every HPCC by-product."""
        sql, args = f"SELECT {METRIC_VALUE_COLUMNS} FROM metrics", []
        if names is not None:
            args = sorted(set(names))
            sql += f" WHERE name IN ({','.join('?' * len(args))})"
        return self.conn.execute(sql + " ORDER BY id", args).fetchall()


def decoded_run(row: sqlite3.Row) -> dict:
    """A run row as a dict with its JSON columns (params, env, launcher, tags, facts) decoded, and
    its curation: `excluded` (the reason, or None) and `notes` (a list of texts, oldest first)."""
    run = dict(row)
    for key in JSON_RUN_COLUMNS:
        run[key] = json.loads(run[key]) if run.get(key) else {}
    run.setdefault("excluded", None)
    run["notes"] = decode_notes(run.get("notes"))
    return run
