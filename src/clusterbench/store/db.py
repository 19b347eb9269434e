"""The results store: one SQLite file (WAL mode) that owns all SQL of clusterbench.

A run is written in two steps: `begin_run` records it as 'running' before the process starts
(so a crash leaves a trace), and `finish_run` writes its status, metrics and raw outputs in
one transaction, so a finished result is either wholly stored or not at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from clusterbench.bench.metrics import Metric

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS systems (
    id TEXT PRIMARY KEY,
    hostname TEXT,
    facts TEXT NOT NULL,
    info TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    campaign TEXT,
    benchmark TEXT NOT NULL,
    params TEXT NOT NULL DEFAULT '{}',
    repeat INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL,
    valid INTEGER,
    reason TEXT,
    exit_code INTEGER,
    started_at TEXT,
    ended_at TEXT,
    duration_s REAL,
    command TEXT,
    workdir TEXT,
    env TEXT NOT NULL DEFAULT '{}',
    launcher TEXT NOT NULL DEFAULT '{}',
    system_id TEXT REFERENCES systems(id),
    nodes TEXT,
    tags TEXT NOT NULL DEFAULT '{}',
    facts TEXT NOT NULL DEFAULT '{}',
    source TEXT NOT NULL DEFAULT 'run',
    content_hash TEXT
);
CREATE INDEX IF NOT EXISTS runs_campaign ON runs(campaign);
CREATE INDEX IF NOT EXISTS runs_benchmark ON runs(benchmark);
CREATE UNIQUE INDEX IF NOT EXISTS runs_content ON runs(content_hash) WHERE content_hash IS NOT NULL;
CREATE TABLE IF NOT EXISTS metrics (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    value REAL NOT NULL,
    unit TEXT NOT NULL DEFAULT '',
    higher_is_better INTEGER NOT NULL DEFAULT 1,
    labels TEXT NOT NULL DEFAULT '{}',
    valid INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS metrics_run ON metrics(run_id);
CREATE INDEX IF NOT EXISTS metrics_name ON metrics(name);
CREATE TABLE IF NOT EXISTS campaigns (
    name TEXT PRIMARY KEY,
    path TEXT,
    description TEXT,
    spec TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS artifacts (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    path TEXT,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    content BLOB,
    PRIMARY KEY (run_id, name)
);
"""

# Raw outputs up to this size are kept inside the database as well as on disk.
MAX_BLOB_BYTES = 8 * 1024 * 1024

# Environment variables that change results and are stored with each run.
RELEVANT_ENV_PREFIXES = ("OMP_", "OPENBLAS_", "BLIS_", "MKL_", "GOMP_", "KMP_", "OMPI_", "PMIX_",
                         "MPICH_", "HYDRA_", "I_MPI_", "UCX_", "SLURM_", "LD_LIBRARY_PATH",
                         "CLUSTERBENCH_")


def relevant_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in sorted(env.items()) if k.startswith(RELEVANT_ENV_PREFIXES)}


def default_db_path() -> Path:
    """$CLUSTERBENCH_DB, else $XDG_DATA_HOME/clusterbench/results.db."""
    if os.environ.get("CLUSTERBENCH_DB"):
        return Path(os.environ["CLUSTERBENCH_DB"])
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "clusterbench" / "results.db"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass
class RunRecord:
    id: str
    benchmark: str
    params: dict = field(default_factory=dict)
    campaign: str | None = None
    repeat: int = 0
    command: str | None = None
    workdir: str | None = None
    env: dict = field(default_factory=dict)
    launcher: dict = field(default_factory=dict)
    system_id: str | None = None
    nodes: str | None = None
    tags: dict = field(default_factory=dict)
    source: str = "run"
    content_hash: str | None = None


class Store:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_db_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        self._batch: list[int] | None = None  # [writes since commit, commit every] inside batch()
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self.conn.executescript(SCHEMA)
        self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    @property
    def runs_dir(self) -> Path:
        """Run directories live beside the database, so moving one moves both."""
        return self.path.parent / "runs"

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """All or nothing. Inside `batch()` it is a savepoint of the batch's transaction."""
        if self._batch is not None:
            self.conn.execute("SAVEPOINT one")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK TO one")
                self.conn.execute("RELEASE one")
                raise
            self.conn.execute("RELEASE one")
            self._batch[0] += 1
            if self._batch[0] >= self._batch[1]:
                self.conn.execute("COMMIT")
                self.conn.execute("BEGIN IMMEDIATE")
                self._batch[0] = 0
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    @contextmanager
    def batch(self, every: int = 500) -> Iterator[None]:
        """Commit many small writes together (bulk import): one commit per `every` results.

        Each result stays atomic (a savepoint); an interruption loses only the uncommitted
        tail, which an idempotent import simply redoes next time.
        """
        self.conn.execute("BEGIN IMMEDIATE")
        self._batch = [0, every]
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        else:
            self.conn.execute("COMMIT")
        finally:
            self._batch = None

    # ------------------------------------------------------------------ writes

    def save_system(self, system_id: str, hostname: str | None, facts: dict, info: dict) -> None:
        self.conn.execute(
            "INSERT OR IGNORE INTO systems (id, hostname, facts, info, created_at) VALUES (?,?,?,?,?)",
            (system_id, hostname, json.dumps(facts, sort_keys=True), json.dumps(info), now_iso()))

    def save_campaign(self, name: str, path: str | None, spec: str, description: str = "") -> None:
        """The campaign file as it was when run: the provenance of its runs."""
        self.conn.execute(
            "INSERT INTO campaigns (name, path, description, spec, updated_at) VALUES (?,?,?,?,?)"
            " ON CONFLICT(name) DO UPDATE SET path=excluded.path, description=excluded.description,"
            " spec=excluded.spec, updated_at=excluded.updated_at",
            (name, path, description, spec, now_iso()))

    def begin_run(self, rec: RunRecord) -> None:
        """Record a run as 'running', replacing an unfinished attempt with the same id.

        One statement (an upsert), so it is atomic without an explicit transaction; a finished
        run with the same id is never overwritten (the statement then fails).
        """
        cur = self.conn.execute(
            "INSERT INTO runs (id, campaign, benchmark, params, repeat, status, started_at, command,"
            " workdir, env, launcher, system_id, nodes, tags, source, content_hash)"
            " VALUES (?,?,?,?,?,'running',?,?,?,?,?,?,?,?,?,?)"
            " ON CONFLICT(id) DO UPDATE SET campaign=excluded.campaign, benchmark=excluded.benchmark,"
            " params=excluded.params, repeat=excluded.repeat, status='running', valid=NULL, reason=NULL,"
            " exit_code=NULL, started_at=excluded.started_at, ended_at=NULL, duration_s=NULL,"
            " command=excluded.command, workdir=excluded.workdir, env=excluded.env, launcher=excluded.launcher,"
            " system_id=excluded.system_id, nodes=excluded.nodes, tags=excluded.tags, facts='{}',"
            " source=excluded.source, content_hash=excluded.content_hash"
            " WHERE runs.status IN ('running', 'interrupted')",
            (rec.id, rec.campaign, rec.benchmark, json.dumps(rec.params, sort_keys=True), rec.repeat,
             now_iso(), rec.command, rec.workdir, json.dumps(rec.env), json.dumps(rec.launcher),
             rec.system_id, rec.nodes, json.dumps(rec.tags), rec.source, rec.content_hash))
        if cur.rowcount == 0:
            raise sqlite3.IntegrityError(f"run {rec.id} is already stored as finished")

    def finish_run(self, run_id: str, status: str, valid: bool | None, reason: str | None,
                   exit_code: int | None, duration_s: float | None, metrics: Iterable[Metric],
                   artifacts: Iterable[Path] = (), facts: dict | None = None,
                   ended_at: str | None = None, nodes: str | None = None,
                   launcher: dict | None = None) -> None:
        """Status, metrics and raw outputs of a run, all in one transaction. `nodes` and
        `launcher` replace what was recorded at the start when only the end knows them (the
        nodes a batch scheduler chose, its job id and state)."""
        blobs = [_artifact(p) for p in artifacts if p.is_file()]
        with self.transaction() as c:
            if nodes is not None:
                c.execute("UPDATE runs SET nodes=? WHERE id=?", (nodes, run_id))
            if launcher is not None:
                c.execute("UPDATE runs SET launcher=? WHERE id=?", (json.dumps(launcher, default=str), run_id))
            c.execute(
                "UPDATE runs SET status=?, valid=?, reason=?, exit_code=?, duration_s=?, ended_at=?,"
                " facts=? WHERE id=?",
                (status, None if valid is None else int(valid), reason, exit_code, duration_s,
                 ended_at or now_iso(), json.dumps(facts or {}, default=str), run_id))
            c.execute("DELETE FROM metrics WHERE run_id=?", (run_id,))
            self._insert_metrics(c, run_id, metrics)
            c.executemany(
                "INSERT OR REPLACE INTO artifacts (run_id, name, path, sha256, size, content)"
                " VALUES (?,?,?,?,?,?)", [(run_id, *b) for b in blobs])

    def add_imported_run(self, rec: RunRecord, valid: bool, reason: str | None, metrics: Iterable[Metric],
                         facts: dict, artifact_name: str, artifact: bytes, started_at: str | None,
                         ended_at: str | None, duration_s: float | None) -> bool:
        """A result read from an old file, in one transaction; False if its content hash is stored."""
        with self.transaction() as c:
            if c.execute("SELECT 1 FROM runs WHERE content_hash=?", (rec.content_hash,)).fetchone():
                return False
            c.execute(
                "INSERT INTO runs (id, campaign, benchmark, params, repeat, status, valid, reason, started_at,"
                " ended_at, duration_s, workdir, env, launcher, tags, facts, source, content_hash)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,'{}',?,?,?,?,?)",
                (rec.id, rec.campaign, rec.benchmark, json.dumps(rec.params, sort_keys=True), rec.repeat,
                 "ok" if valid else "invalid", int(valid), reason, started_at or now_iso(), ended_at, duration_s,
                 rec.workdir, json.dumps({"name": "import"}), json.dumps(rec.tags),
                 json.dumps(facts, default=str), rec.source, rec.content_hash))
            self._insert_metrics(c, rec.id, metrics)
            digest = hashlib.sha256(artifact).hexdigest()
            c.execute("INSERT INTO artifacts (run_id, name, path, sha256, size, content) VALUES (?,?,?,?,?,?)",
                      (rec.id, artifact_name, facts.get("source_file"), digest, len(artifact),
                       artifact if len(artifact) <= MAX_BLOB_BYTES else None))
        return True

    @staticmethod
    def _insert_metrics(c: sqlite3.Connection, run_id: str, metrics: Iterable[Metric]) -> None:
        c.executemany(
            "INSERT INTO metrics (run_id, name, value, unit, higher_is_better, labels, valid)"
            " VALUES (?,?,?,?,?,?,?)",
            [(run_id, m.name, m.value, m.unit, int(m.higher_is_better),
              json.dumps(m.labels, sort_keys=True, default=str), int(m.valid)) for m in metrics])

    # ------------------------------------------------------------------ reads

    def run(self, run_id: str) -> sqlite3.Row | None:
        return self.conn.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()

    def runs(self, benchmark: str | None = None, campaign: str | None = None,
             status: str | None = None, limit: int | None = None) -> list[sqlite3.Row]:
        sql, args = "SELECT * FROM runs WHERE 1=1", []
        for col, val in (("benchmark", benchmark), ("campaign", campaign), ("status", status)):
            if val is not None:
                sql += f" AND {col}=?"
                args.append(val)
        sql += " ORDER BY started_at DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        return self.conn.execute(sql, args).fetchall()

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

    def artifact(self, run_id: str, name: str) -> sqlite3.Row | None:
        return self.conn.execute("SELECT * FROM artifacts WHERE run_id=? AND name=?",
                                 (run_id, name)).fetchone()

    def artifacts(self, run_id: str) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT run_id, name, path, sha256, size FROM artifacts WHERE run_id=?",
                                 (run_id,)).fetchall()

    def system(self, system_id: str) -> sqlite3.Row | None:
        return self.conn.execute("SELECT * FROM systems WHERE id=?", (system_id,)).fetchone()

    def metric_rows(self, name: str | None = None, benchmark: str | None = None,
                    system_id: str | None = None, valid_only: bool = False,
                    campaign: str | None = None) -> list[sqlite3.Row]:
        """Metrics joined with their runs: the shape analysis and the planner read."""
        sql = ("SELECT r.id AS run_id, r.benchmark, r.campaign, r.params, r.repeat, r.status,"
               " r.valid AS run_valid, r.system_id, r.started_at, r.duration_s, r.tags, r.facts,"
               " m.name, m.value, m.unit, m.higher_is_better, m.labels, m.valid"
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


    def all_runs(self) -> list[sqlite3.Row]:
        """Every run, oldest first: what selections (reports, comparisons) filter."""
        return self.conn.execute("SELECT * FROM runs ORDER BY started_at, id").fetchall()

    def campaign_names(self) -> set[str]:
        rows = self.conn.execute("SELECT name FROM campaigns UNION SELECT DISTINCT campaign FROM runs"
                                 " WHERE campaign IS NOT NULL").fetchall()
        return {row[0] for row in rows}

    def systems(self) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM systems ORDER BY created_at").fetchall()

    def metric_values(self, names: Iterable[str] | None = None) -> list[sqlite3.Row]:
        """Metric rows (run id, name, value, unit, labels, valid), only these names when given:
        a report reads a few dozen metric names, not every HPCC by-product."""
        sql, args = "SELECT run_id, name, value, unit, higher_is_better, labels, valid FROM metrics", []
        if names is not None:
            args = sorted(set(names))
            sql += f" WHERE name IN ({','.join('?' * len(args))})"
        return self.conn.execute(sql + " ORDER BY id", args).fetchall()


JSON_RUN_COLUMNS = ("params", "env", "launcher", "tags", "facts")


def decoded_run(row: sqlite3.Row) -> dict:
    """A run row as a dict with its JSON columns (params, env, launcher, tags, facts) decoded."""
    run = dict(row)
    for key in JSON_RUN_COLUMNS:
        run[key] = json.loads(run[key]) if run.get(key) else {}
    return run


def _artifact(path: Path) -> tuple[str, str, str, int, bytes | None]:
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    return path.name, str(path.resolve()), digest, len(data), data if len(data) <= MAX_BLOB_BYTES else None
