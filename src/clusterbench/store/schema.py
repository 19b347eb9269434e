"""The store's versioned schema: the tables of each version and the steps that upgrade a database.

The schema carries a version (`PRAGMA user_version`), upgraded step by step by MIGRATIONS, each
step in its own transaction. A step is appended, never edited: a database of any earlier version
reaches the current one by the same steps.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Iterator

from clusterbench.store.blobs import _store_blob
from clusterbench.store.shared_facts import _facts_dict, encode_facts, shared_fragments

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


def _statements(script: str) -> Iterator[str]:
    """The statements of an SQL script, one by one (executescript would commit a transaction)."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending.strip()
            pending = ""
    if pending.strip():
        yield pending.strip()


def _v1(conn: sqlite3.Connection) -> None:
    """The first versioned schema. Every statement is IF NOT EXISTS, so a database from before
    versions were written (the same tables, user_version 0) is adopted as version 1 unchanged."""
    for statement in _statements(SCHEMA):
        conn.execute(statement)


# Version 2: raw outputs stored once per content. `codec` says how `content` holds the bytes:
# 'zlib' (compressed), 'raw', or 'none' (larger than MAX_BLOB_BYTES: only the path on disk is kept).
# The trigger drops a blob with the last artifact that refers to it (an output replaced when an
# interrupted run is run again; a run deleted). It reads the artifacts to find other references:
# no index on artifacts(sha256), which would cost a tenth of an import's space for deletions that
# clusterbench itself never makes in bulk (a command that deletes many runs should add one first).
BLOBS_SCHEMA = """
CREATE TABLE IF NOT EXISTS blobs (
    sha256 TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    stored INTEGER NOT NULL,
    codec TEXT NOT NULL,
    content BLOB
);
"""
RELEASE_TRIGGER = """
CREATE TRIGGER IF NOT EXISTS artifacts_release_blob AFTER DELETE ON artifacts
WHEN NOT EXISTS (SELECT 1 FROM artifacts WHERE sha256 = OLD.sha256)
BEGIN
    DELETE FROM blobs WHERE sha256 = OLD.sha256;
END;
"""
# artifacts rebuilt as a WITHOUT ROWID table (rows stored in their primary key's order): the same
# columns, without the separate (run_id, name) index a rowid table needs, which an import of
# thousands of results paid a tenth of its artifact bytes for. `content` stays, NULL but for the
# damaged bytes the migration leaves where they were.
ARTIFACTS_V2 = """
CREATE TABLE artifacts_v2 (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    path TEXT,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    content BLOB,
    PRIMARY KEY (run_id, name)
) WITHOUT ROWID;
INSERT INTO artifacts_v2 (run_id, name, path, sha256, size, content)
    SELECT run_id, name, path, sha256, size, content FROM artifacts;
DROP TABLE artifacts;
ALTER TABLE artifacts_v2 RENAME TO artifacts;
"""


def _v2(conn: sqlite3.Connection) -> None:
    """Move every artifact's bytes into `blobs`, once per content. Row by row, the inline copy is
    cleared before its blob is written, so the pages it frees hold the blob: the file does not grow.
    Bytes that do not hash to their artifact's recorded sha256 (damage from before) stay inline,
    untouched, for `db check` to report: the migration neither loses nor re-labels them. Then
    the artifacts table is rebuilt without rowid (ARTIFACTS_V2) and gets the trigger that drops
    a blob with its last reference."""
    for statement in _statements(BLOBS_SCHEMA):
        conn.execute(statement)
    rows = conn.execute("SELECT run_id, name, sha256, size, content IS NULL FROM artifacts").fetchall()
    for run_id, name, digest, size, absent in rows:
        if absent:
            _store_blob(conn, str(digest), int(size or 0), None)
            continue
        content = conn.execute("SELECT content FROM artifacts WHERE run_id=? AND name=?",
                               (run_id, name)).fetchone()[0]
        data = content.encode() if isinstance(content, str) else bytes(content)
        if hashlib.sha256(data).hexdigest() != digest:
            continue
        conn.execute("UPDATE artifacts SET content=NULL WHERE run_id=? AND name=?", (run_id, name))
        _store_blob(conn, digest, len(data), data)
    table = conn.execute("SELECT sql FROM sqlite_master WHERE type='table' AND name='artifacts'").fetchone()[0]
    if "WITHOUT ROWID" not in table.upper():  # not when a version-2 file was stamped 0 by hand: done already
        for statement in _statements(ARTIFACTS_V2):  # (dropping the old table drops its triggers too)
            conn.execute(statement)
    for statement in _statements(RELEASE_TRIGGER):
        conn.execute(statement)


# Version 3: curating what counts (`clusterbench exclude`, `include`, `note`). A run is excluded while it
# has a `curation` row (its reason and when); `include` deletes the row. Notes are kept in the order they
# were added. Both go with their run (ON DELETE CASCADE): `db delete` leaves nothing behind.
CURATION_SCHEMA = """
CREATE TABLE IF NOT EXISTS curation (
    run_id TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    excluded TEXT NOT NULL,
    excluded_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS notes (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    at TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS notes_run ON notes(run_id);
"""


def _v3(conn: sqlite3.Connection) -> None:
    """Add the tables of curation: which runs a user excluded (and why) and the notes on runs."""
    for statement in _statements(CURATION_SCHEMA):
        conn.execute(statement)


# Version 4: what the results of one imported file share is stored once, with the file (issue 32: a study of
# 16,000 results from 2,000 files grew the store by twice their bytes). A row of `import_files` per file
# (keyed by the SHA-256 of its bytes, which begins each of its results' content hashes) holds
# - the output its results name (name, path, size): their `artifacts` row is implied, not written; a run
#   with an artifacts row of its own (an older import, a name that differs) has exactly that one instead;
# - up to four fragments of facts text its results share (`"from_file_name":[...],"file_mtime":"..."`):
#   a run's stored facts hold a marker in place of each (shared_facts.FACT_MARKERS, text Python's json never
#   writes), and every read puts the fragment back (facts_sql), so readers get the very text that was written.
# A file's row goes with its last run (trigger), and its blob with the last row that refers to it.
# - and the bytes of a file like one stored before in the same import (a study's 2,000 HPL outputs differ in
#   their numbers) are compressed against that one's (codec 'zlib+base', `base` its SHA-256: zlib with the
#   last BASE_DICT_BYTES of the base's bytes as preset dictionary), a third of their size alone. A base is
#   a blob compressed alone; it stays while a blob needs it (triggers), and goes with the last one.
IMPORT_FILES_SCHEMA = """
CREATE TABLE IF NOT EXISTS import_files (
    sha256 TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    path TEXT,
    size INTEGER NOT NULL,
    f1 TEXT NOT NULL DEFAULT '',
    f2 TEXT NOT NULL DEFAULT '',
    f3 TEXT NOT NULL DEFAULT '',
    f4 TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
DROP TRIGGER IF EXISTS artifacts_release_blob;
CREATE TRIGGER IF NOT EXISTS artifacts_release_blob AFTER DELETE ON artifacts
WHEN NOT EXISTS (SELECT 1 FROM artifacts WHERE sha256 = OLD.sha256)
    AND NOT EXISTS (SELECT 1 FROM import_files WHERE sha256 = OLD.sha256)
BEGIN
    DELETE FROM blobs WHERE sha256 = OLD.sha256
        AND NOT EXISTS (SELECT 1 FROM blobs d WHERE d.base = OLD.sha256);
END;
CREATE TRIGGER IF NOT EXISTS import_files_release_blob AFTER DELETE ON import_files
WHEN NOT EXISTS (SELECT 1 FROM artifacts WHERE sha256 = OLD.sha256)
BEGIN
    DELETE FROM blobs WHERE sha256 = OLD.sha256
        AND NOT EXISTS (SELECT 1 FROM blobs d WHERE d.base = OLD.sha256);
END;
CREATE TRIGGER IF NOT EXISTS blobs_release_base AFTER DELETE ON blobs
WHEN OLD.base IS NOT NULL AND NOT EXISTS (SELECT 1 FROM blobs WHERE base = OLD.base)
    AND NOT EXISTS (SELECT 1 FROM artifacts WHERE sha256 = OLD.base)
    AND NOT EXISTS (SELECT 1 FROM import_files WHERE sha256 = OLD.base)
BEGIN
    DELETE FROM blobs WHERE sha256 = OLD.base;
END;
CREATE TRIGGER IF NOT EXISTS runs_release_import_file AFTER DELETE ON runs
WHEN OLD.content_hash IS NOT NULL AND NOT EXISTS (SELECT 1 FROM runs
    WHERE content_hash >= substr(OLD.content_hash, 1, 64) || ':'
        AND content_hash < substr(OLD.content_hash, 1, 64) || ';')
BEGIN
    DELETE FROM import_files WHERE sha256 = substr(OLD.content_hash, 1, 64);
END;
"""


def _v4(conn: sqlite3.Connection) -> None:
    """Add `import_files`, `blobs.base` and their triggers, then move each imported file's repeated
    artifact rows and shared facts into it: a file whose results each have exactly the one artifact
    that names it (the same name, path and size, its bytes not inline) gets a row; any other keeps its
    rows as they are."""
    if "base" not in {row[1] for row in conn.execute("PRAGMA table_info(blobs)")}:
        conn.execute("ALTER TABLE blobs ADD COLUMN base TEXT")
    conn.execute("CREATE INDEX IF NOT EXISTS blobs_base ON blobs(base) WHERE base IS NOT NULL")
    for statement in _statements(IMPORT_FILES_SCHEMA):
        conn.execute(statement)
    rows = conn.execute(
        "SELECT r.id, r.content_hash, r.facts, a.name, a.path, a.sha256, a.size, a.content IS NULL,"
        " (SELECT COUNT(*) FROM artifacts b WHERE b.run_id = r.id)"
        " FROM runs r LEFT JOIN artifacts a ON a.run_id = r.id"
        " WHERE r.content_hash IS NOT NULL ORDER BY r.content_hash").fetchall()
    files: dict[str, list] = {}
    for row in rows:
        files.setdefault(str(row[1])[:64], []).append(row)
    done = {row[0] for row in conn.execute("SELECT sha256 FROM import_files")}  # a version-4 file stamped lower
    for digest, runs in files.items():
        first = runs[0]
        if digest in done or any(r[8] != 1 or not r[7] or r[5] != digest
                                 or (r[3], r[4], r[6]) != (first[3], first[4], first[6]) for r in runs):
            continue
        texts = [str(r[2]) for r in runs]
        fragments = shared_fragments([_facts_dict(t) for t in texts], texts)
        conn.execute("INSERT INTO import_files (sha256, name, path, size, f1, f2, f3, f4) VALUES (?,?,?,?,?,?,?,?)",
                     (digest, first[3], first[4], first[6], *fragments))
        conn.executemany("DELETE FROM artifacts WHERE run_id=?", [(r[0],) for r in runs])
        conn.executemany("UPDATE runs SET facts=? WHERE id=?",
                         [(encode_facts(t, fragments), r[0]) for t, r in zip(texts, runs, strict=True)
                          if any(fragments)])


# The noise floors learned from repeats (analysis/noise.py): derived data, recomputed from the runs
# whenever asked (store/noise.py), so the table is created where it is first written (`ensure_noise`)
# rather than by a versioned step: a database without it reads as one with no floor known, and an
# older clusterbench ignores it. One row per (benchmark, configuration, metric, unit).
NOISE_SCHEMA = """
CREATE TABLE IF NOT EXISTS noise_floors (
    benchmark TEXT NOT NULL,
    configuration TEXT NOT NULL,
    metric TEXT NOT NULL,
    unit TEXT NOT NULL DEFAULT '',
    system TEXT,
    floor REAL NOT NULL,
    n INTEGER NOT NULL,
    groups INTEGER NOT NULL,
    runs TEXT NOT NULL DEFAULT '[]',
    computed_at TEXT NOT NULL,
    PRIMARY KEY (benchmark, configuration, metric, unit)
) WITHOUT ROWID;
"""


def ensure_noise(conn: sqlite3.Connection) -> None:
    """The noise floors' table, created when missing (inside the caller's transaction)."""
    for statement in _statements(NOISE_SCHEMA):
        conn.execute(statement)


# Ordered (version, what it does, step): a database at version v < N gets each later step, each in
# its own transaction that also sets user_version. Append a step (never edit one) to change the schema.
MIGRATIONS: tuple[tuple[int, str, Callable[[sqlite3.Connection], None]], ...] = (
    (1, "tables systems, runs, metrics, campaigns, artifacts, meta", _v1),
    (2, "raw outputs stored once per content, compressed: table blobs", _v2),
    (3, "runs excluded by a user and notes on runs: tables curation, notes", _v3),
    (4, "what the results of an imported file share, stored once: table import_files", _v4),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]
# The oldest version a read command reads as it is (it may not upgrade: it never writes). Version 2
# only moved raw outputs into `blobs`; reads of a version-1 file find them inline, where v1 kept them.
OLDEST_READABLE = 1
REQUIRED_TABLES = frozenset({"runs", "metrics"})  # what makes an SQLite file a clusterbench database


def _schema_tables() -> list[str]:
    return [statement.split()[5] for statement in _statements(SCHEMA) if statement.startswith("CREATE TABLE")]


def _give_back_space(conn: sqlite3.Connection) -> None:
    """After the move to blobs, the copies an import repeated per result are free pages inside the
    file: VACUUM once returns them to the file system (SQLite would otherwise only reuse them).
    A VACUUM that cannot run now (another process busy, a full disk) leaves them free inside, harmless."""
    if not conn.execute("PRAGMA freelist_count").fetchone()[0]:
        return
    try:
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.OperationalError:
        pass


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring a database to SCHEMA_VERSION, one step per transaction (safe against a concurrent open:
    each step re-reads the version under the write lock)."""
    for version, _what, step in MIGRATIONS:
        if conn.execute("PRAGMA user_version").fetchone()[0] >= version:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] < version:
                step(conn)
                conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                             (str(version),))
                conn.execute(f"PRAGMA user_version = {int(version)}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
