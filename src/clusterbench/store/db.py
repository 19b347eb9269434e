"""The results store: one SQLite file (WAL mode) that owns all SQL of clusterbench.

A run is written in two steps: `begin_run` records it as 'running' before the process starts
(so a crash leaves a trace), and `finish_run` writes its status, metrics and raw outputs in
one transaction, so a finished result is either wholly stored or not at all.

This module holds the Store itself: opening (through `opening`'s checks, upgrading through `schema`'s
migrations), transactions and batches, backups and the writes of a run. Its other jobs are modules
of their own, whose methods the Store inherits or whose functions it calls:
- `schema`: the versioned tables and the migrations between versions;
- `blobs`: raw outputs stored once per content, compressed, checked when read back;
- `shared_facts`: what the results of one imported file share, stored once with the file;
- `imports` (class Imports): the results of imported files, stored;
- `queries` (class Reads): every read, with what is kept once put back;
- `curation` (class Curation): tags, exclusion, notes and deletion of stored runs;
- `opening`: what is refused before SQLite touches a file, and what an SQLite error means;
- `doctor`: `clusterbench db check`;
- `records`: RunRecord and ImportedRun, what a run is written from;
- `encoding`: JSON and timestamps as the store writes them.

A store opened `read_only` (read commands) never writes: SQLite's `mode=ro`, plus `immutable=1`
when the folder is read-only (a read-only mount), where SQLite could not create its -shm file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from clusterbench.bench.metrics import Metric
from clusterbench.errors import EnvironmentProblem, UserInputError
from clusterbench.store.blobs import _read_artifact, _store_blob
from clusterbench.store.curation import NOTES_TYPES, Curation
from clusterbench.store.encoding import _LABELS_JSON, _json, now_iso
from clusterbench.store.imports import Imports
from clusterbench.store.opening import (
    READ_ONLY_HINT,
    FileFacts,
    _connect_ro,
    _make_folder,
    _not_ours,
    _writable,
    explain,
    inspect_file,
    too_new,
)
from clusterbench.store.queries import Reads
from clusterbench.store.records import RunRecord
from clusterbench.store.schema import (
    OLDEST_READABLE,
    REQUIRED_TABLES,
    SCHEMA_VERSION,
    _give_back_space,
    _migrate,
    _schema_tables,
)
from clusterbench.system.discover import SystemInfo

# A new database's page: with 16 KiB, compressed outputs of a few KiB and the index entries fill
# their pages better than with SQLite's 4 KiB default (an import takes a sixth less space).
NEW_PAGE_SIZE = 16384


def default_db_path() -> Path:
    """$CLUSTERBENCH_DB, else $XDG_DATA_HOME/clusterbench/results.db."""
    if os.environ.get("CLUSTERBENCH_DB"):
        return Path(os.environ["CLUSTERBENCH_DB"])
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "clusterbench" / "results.db"


class Store(Reads, Curation, Imports):
    """The results database. `read_only=True` (read commands) never writes and never creates: a
    database that does not exist yet reads as an empty one (`exists` is then False)."""

    def __init__(self, path: str | Path | None = None, read_only: bool = False):
        self.path = Path(path) if path else default_db_path()
        self.read_only = read_only
        self.exists = True
        self.migrated_from: int | None = None  # the version before this open migrated it
        self._batch: list | None = None  # [writes since commit, commit every, seconds, since] inside batch()
        self._depth = 0  # transactions open inside a batch (savepoints): only the outermost is a write
        self._last_digest: tuple[bytes, str] | None = None  # an import's N results share one file
        self._bases: dict[str, tuple[str, bytes]] = {}  # benchmark -> a blob its next imported files compress against
        facts = inspect_file(self.path)
        if facts is not None and not facts.sidecar:
            facts.check_header(self.path)
        self.conn = self._open_read(facts) if read_only else self._open_write(facts)
        self.conn.row_factory = sqlite3.Row
        self.has_blobs = self.conn.execute(  # False only for a version-1 file opened read-only
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='blobs'").fetchone() is not None
        self.has_curation = self.conn.execute(  # False only for a version-1 or -2 file opened read-only
            "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name IN ('curation', 'notes')"
        ).fetchone()[0] == 2
        self.has_import_files = self.conn.execute(  # False only for a file before version 4 opened read-only
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='import_files'").fetchone() is not None

    def _open_write(self, facts: FileFacts | None) -> sqlite3.Connection:
        folder = self.path.parent
        if facts is None:
            _make_folder(folder, self.path)
            if not _writable(folder):
                raise EnvironmentProblem(f"cannot create the database: its folder {folder} is read-only",
                                         where=str(self.path), hint=READ_ONLY_HINT)
        elif not _writable(self.path):
            raise EnvironmentProblem("the database file is read-only: cannot store results", where=str(self.path),
                                     hint=READ_ONLY_HINT)
        elif not _writable(folder):
            raise EnvironmentProblem(f"the database's folder {folder} is read-only: SQLite must create "
                                     f"{self.path.name}-wal and {self.path.name}-shm beside it to write",
                                     where=str(self.path), hint=READ_ONLY_HINT)
        connection = sqlite3.connect(self.path, timeout=30, isolation_level=None, detect_types=NOTES_TYPES)
        with self._closing_on_error(connection) as conn:
            tables, version = self._probe(conn)
            if not tables:  # only a new file takes a page size (WAL fixes it once written)
                conn.execute(f"PRAGMA page_size={NEW_PAGE_SIZE}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            if version < SCHEMA_VERSION:
                self.migrated_from = version if tables else None
                _migrate(conn)
                if self.migrated_from is not None and self.migrated_from < 4:
                    _give_back_space(conn)
        return conn

    def _open_read(self, facts: FileFacts | None) -> sqlite3.Connection:
        if facts is None or (facts.size == 0 and not facts.sidecar):
            return self._empty()
        immutable = not _writable(self.path.parent) and not facts.sidecar
        with self._closing_on_error(_connect_ro(self.path, immutable)) as conn:
            tables, version = self._probe(conn)
            if not tables:  # an empty SQLite file: nothing stored yet
                conn.close()
                return self._empty()
            missing = [name for name in _schema_tables() if name not in tables]
            if version < OLDEST_READABLE and (version != 0 or missing):  # 0 with every table: from before
                raise EnvironmentProblem(                                  # versions, read as 1
                    f"the database has the older schema version {version} (this clusterbench uses "
                    f"{SCHEMA_VERSION}) and cannot be read before it is upgraded", where=str(self.path),
                    hint=f"upgrade it (a backup first is wise): clusterbench --db {self.path} db migrate")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA query_only=ON")
        return conn

    @contextmanager
    def _closing_on_error(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        """Closes the connection if opening fails, and says what an SQLite error means."""
        try:
            yield conn
        except sqlite3.Error as exc:
            conn.close()
            problem = explain(exc, self.path)
            if problem is None:
                raise
            raise problem from exc
        except BaseException:
            conn.close()
            raise

    def _empty(self) -> sqlite3.Connection:
        """A database not created yet reads as an empty one, without creating a file."""
        self.exists = False
        conn = sqlite3.connect(":memory:", isolation_level=None, detect_types=NOTES_TYPES)
        _migrate(conn)
        conn.execute("PRAGMA query_only=ON")
        return conn

    def _probe(self, conn: sqlite3.Connection) -> tuple[set[str], int]:
        """The tables and schema version of a database, refused when newer than this clusterbench."""
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if (tables and not REQUIRED_TABLES <= tables) or (version and not tables):
            raise _not_ours(self.path, tables, version)
        if version > SCHEMA_VERSION:
            raise too_new(self.path, version)
        return tables, version

    def sibling(self) -> Store:
        """Another connection to this open store, for another thread (an sqlite3 connection belongs to
        the thread that made it). Made without reading the file outside SQLite, as the constructor
        does: closing any descriptor of the database file drops every POSIX lock this process holds
        on it, its other connections' included, and another process (a reader, a second clusterbench)
        may then reset the WAL under them, which they see as a disk I/O error."""
        other = object.__new__(Store)
        other.path, other.read_only, other.exists, other.migrated_from = self.path, self.read_only, self.exists, None
        other._batch, other._depth, other._last_digest, other.has_blobs = None, 0, None, self.has_blobs
        other._bases = {}
        other.has_curation, other.has_import_files = self.has_curation, self.has_import_files
        other.conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, detect_types=NOTES_TYPES)
        other.conn.execute("PRAGMA synchronous=NORMAL")
        other.conn.execute("PRAGMA foreign_keys=ON")
        if self.read_only:
            other.conn.execute("PRAGMA query_only=ON")
        other.conn.row_factory = sqlite3.Row
        return other

    @property
    def runs_dir(self) -> Path:
        """Run directories live beside the database, so moving one moves both."""
        return self.path.parent / "runs"

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self.close()
        if isinstance(exc, sqlite3.Error):  # the machine's fault (corrupted, full, read-only): say so, located
            problem = explain(exc, self.path)
            if problem is not None:
                raise problem from exc

    def backup(self, dest: str | Path, force: bool = False) -> int:
        """A consistent copy of the database into the new file `dest` (SQLite's online backup: other
        processes may write meanwhile). Written beside `dest` first and checked, then moved in
        place, so `dest` is never half-written. Returns the size of the copy in bytes."""
        dest = Path(dest)
        if not self.exists:
            raise UserInputError("no database here: nothing to back up", where=str(self.path))
        if dest.exists() and dest.resolve() == self.path.resolve():
            raise UserInputError("is the database itself", where=str(dest), hint="back up into another file")
        if dest.is_dir():
            raise UserInputError("is a directory", where=str(dest),
                                 hint=f"name the backup file, e.g. {dest / 'results-backup.db'}")
        if dest.exists() or dest.is_symlink():
            if not force:
                raise UserInputError("exists already: not overwritten", where=str(dest),
                                     hint="choose a new file name, or add --force to replace it")
            if dest.is_symlink() or not dest.is_file():
                raise UserInputError("is not a regular file: not replaced, even with --force", where=str(dest))
        if not dest.parent.is_dir():
            raise UserInputError(f"the folder {dest.parent} does not exist", where=str(dest))
        if not _writable(dest.parent):
            raise EnvironmentProblem(f"cannot write the backup: the folder {dest.parent} is read-only",
                                     where=str(dest), hint="back up into a writable folder")
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.partial")
        try:
            target = sqlite3.connect(tmp, isolation_level=None)
            try:
                self.conn.backup(target)
                check = target.execute("PRAGMA quick_check").fetchone()[0]
            finally:
                target.close()
            if check != "ok":
                raise EnvironmentProblem(f"the copy failed its check ({check})", where=str(dest),
                                         hint=f"check the source: clusterbench --db {self.path} db check")
            if force:
                os.replace(tmp, dest)
            else:
                try:
                    os.link(tmp, dest)  # fails if dest appeared meanwhile: never overwrites
                except FileExistsError:
                    raise UserInputError("exists already: not overwritten", where=str(dest),
                                         hint="choose a new file name, or add --force to replace it") from None
                except OSError:  # a file system without hard links
                    if dest.exists():
                        raise
                    os.replace(tmp, dest)
            return dest.stat().st_size
        except sqlite3.Error as exc:
            raise EnvironmentProblem(f"cannot write the backup: {exc}", where=str(dest)) from exc
        except OSError as exc:
            raise EnvironmentProblem(f"cannot write the backup: {exc.strerror or exc}", where=str(dest)) from exc
        finally:
            for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
                try:
                    leftover.unlink(missing_ok=True)
                except OSError:
                    pass

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """All or nothing. Inside `batch()` it is a savepoint of the batch's transaction."""
        if self._batch is not None:
            self.conn.execute("SAVEPOINT one")
            self._depth += 1
            try:
                yield self.conn
            except BaseException:
                self._depth -= 1
                self.conn.execute("ROLLBACK TO one")
                self.conn.execute("RELEASE one")
                raise
            self._depth -= 1
            self.conn.execute("RELEASE one")
            if self._depth:  # a transaction inside another (a file's results): its writes are the outer one's
                return
            self._batch[0] += 1
            count, every, seconds, since = self._batch
            if count >= every or (seconds is not None and time.monotonic() - since >= seconds):
                self.conn.execute("COMMIT")
                self.conn.execute("BEGIN IMMEDIATE")
                self._batch[0], self._batch[3] = 0, time.monotonic()
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def in_batch(self) -> bool:
        """Inside `batch()`: a `transaction` is then a savepoint of the batch's transaction."""
        return self._batch is not None

    @contextmanager
    def batch(self, every: int = 500, seconds: float | None = None, keep: bool = False) -> Iterator[None]:
        """Commit many small writes together (bulk import): one commit per `every` writes (a write:
        an outermost `transaction`), and with `seconds` at least that often (other writers wait no longer).

        Each write stays atomic (a savepoint); an interruption loses only the uncommitted
        tail, which an idempotent import simply redoes next time. With `keep`, an error keeps the
        writes completed before it (committed; each failed write was rolled back to its savepoint),
        as separate transactions would have.
        """
        self.conn.execute("BEGIN IMMEDIATE")
        self._batch, self._depth = [0, every, seconds, time.monotonic()], 0
        try:
            yield
        except BaseException:
            if keep:
                try:
                    self.conn.execute("COMMIT")
                except sqlite3.Error:
                    self.conn.execute("ROLLBACK")
            else:
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
            (system_id, hostname, _json(facts, sort_keys=True), _json(info), now_iso()))

    def remember_system(self, system: SystemInfo) -> str:
        """Store a discovered system (once per fingerprint) and return its id, for the runs made on it."""
        system_id = system.fingerprint()
        self.save_system(system_id, system.topology.hostname, system.fingerprint_facts(), system.to_dict())
        return system_id

    def keep_first(self, key: str, value: dict) -> dict:
        """`value` under `key` in the meta table unless something is there already; what is kept is returned.

        For inputs that must not change once work has begun on them: a tuning session's model rates, fitted
        from the store, would otherwise be refitted on resume from the session's own trials and steer the
        search elsewhere (tune/session.py)."""
        self.conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (key, _json(value, sort_keys=True)))
        return self.first_kept(key) or value

    def first_kept(self, key: str) -> dict | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        try:
            return json.loads(row[0]) if row and row[0] else None
        except ValueError:
            return None

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
            (rec.id, rec.campaign, rec.benchmark, _json(rec.params, sort_keys=True), rec.repeat,
             now_iso(), rec.command, rec.workdir, _json(rec.env), _json(rec.launcher),
             rec.system_id, rec.nodes, _json(rec.tags), rec.source, rec.content_hash))
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
        files = [_read_artifact(p) for p in artifacts if p.is_file()]  # read and packed before the lock
        with self.transaction() as c:
            if nodes is not None:
                c.execute("UPDATE runs SET nodes=? WHERE id=?", (nodes, run_id))
            if launcher is not None:
                c.execute("UPDATE runs SET launcher=? WHERE id=?", (_json(launcher, default=str), run_id))
            c.execute(
                "UPDATE runs SET status=?, valid=?, reason=?, exit_code=?, duration_s=?, ended_at=?,"
                " facts=? WHERE id=?",
                (status, None if valid is None else int(valid), reason, exit_code, duration_s,
                 ended_at or now_iso(), _json(facts or {}, default=str), run_id))
            c.execute("DELETE FROM metrics WHERE run_id=?", (run_id,))
            self._insert_metrics(c, run_id, metrics)
            # an earlier attempt's file of the same name is replaced: deleted first, so the trigger
            # releases its blob when nothing else refers to it (REPLACE would not fire the trigger)
            c.executemany("DELETE FROM artifacts WHERE run_id=? AND name=?", [(run_id, f.name) for f in files])
            for f in files:
                _store_blob(c, f.sha256, f.size, f.data, f.packed)
            c.executemany("INSERT INTO artifacts (run_id, name, path, sha256, size) VALUES (?,?,?,?,?)",
                          [(run_id, f.name, f.path, f.sha256, f.size) for f in files])

    @staticmethod
    def _insert_metrics(c: sqlite3.Connection, run_id: str, metrics: Iterable[Metric]) -> None:
        Store._insert_metrics_of(c, [(run_id, metrics)])

    @staticmethod
    def _insert_metrics_of(c: sqlite3.Connection, runs: Iterable[tuple[str, Iterable[Metric]]]) -> None:
        """The metrics of these runs in one statement. Labels are encoded by one encoder, "{}" without
        one, and once for metrics that share their labels (an HPL line's Gflop/s and time): an HPCC
        import encodes a hundred labels per result, most of them empty."""
        rows, last, text = [], None, "{}"
        for run_id, metrics in runs:
            for m in metrics:
                if m.labels is not last:
                    last, text = m.labels, _LABELS_JSON(m.labels) if m.labels else "{}"
                rows.append((run_id, m.name, m.value, m.unit, int(m.higher_is_better), text, int(m.valid)))
        c.executemany("INSERT INTO metrics (run_id, name, value, unit, higher_is_better, labels, valid)"
                      " VALUES (?,?,?,?,?,?,?)", rows)
