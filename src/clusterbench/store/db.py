"""The results store: one SQLite file (WAL mode) that owns all SQL of clusterbench.

A run is written in two steps: `begin_run` records it as 'running' before the process starts
(so a crash leaves a trace), and `finish_run` writes its status, metrics and raw outputs in
one transaction, so a finished result is either wholly stored or not at all.

Raw outputs are kept once per content (table `blobs`, keyed by SHA-256, zlib-compressed when
that saves space): an imported file with fifty results is stored once, not fifty times, and
an identical stdout of a thousand runs costs one copy. `artifacts` rows name each run's files
and refer to their blob by hash; a blob goes when the last artifact that refers to it goes. What
the results of one imported file share is stored once too (version 4, `import_files`: the output
they name, the facts text they have in common), and every read puts it back (`run_columns`,
`_artifact_rows`), so readers get the rows as written; the file's bytes are compressed against an
earlier file of the same import (its base) when there is one.
JSON columns are written without blanks (`{"n":1000}`): the same information, and a store of
a hundred thousand imported results is a fifth smaller.

Opening is careful: a path that is a folder, a device or a file that is not a clusterbench
database is refused before SQLite touches it (so such a file is never modified), a truncated,
corrupted, unreadable, read-only or too-new database is refused with what to do next, and a
store opened `read_only` (read commands) never writes: SQLite's `mode=ro`, plus `immutable=1`
when the folder is read-only (a read-only mount), where SQLite could not create its -shm file.
The schema carries a version (`PRAGMA user_version`), upgraded step by step by MIGRATIONS.

A user's judgement on runs is kept apart from what they measured (tables `curation`, `notes`:
`clusterbench exclude`, `note`), and every full run row carries it as two more columns,
`excluded` and `notes`, so the analysis sees it wherever it reads a run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import stat
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from clusterbench.bench.metrics import Metric
from clusterbench.errors import EnvironmentProblem, UserInputError
from clusterbench.system.discover import SystemInfo

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
#   a run's stored facts hold a marker in place of each (FACT_MARKERS, text Python's json never writes),
#   and every read puts the fragment back (FACTS_SQL), so readers get the very text that was written.
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
# The markers of the four shared fragments inside a run's stored facts: a member whose key is a newline and a
# digit, escaped as Python's json never escapes a newline (it writes \n, never \u000a), so no facts text
# holds one by itself, and the text stays JSON for a reader of the raw column.
FACT_MARKERS = tuple(f'"\\u000a{i}":0' for i in range(1, 5))


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


# A shared fragment is worth a marker from this length on (a marker is 11 characters).
MIN_FRAGMENT_CHARS = 24
NO_FRAGMENTS = ("", "", "", "")
# Members of an imported result's facts that are its own, never shared: the path stays in the stored text
# (one can still find a file's runs with LIKE), and the index differs by definition.
UNSHARED_FACTS = frozenset({"source_file", "result_index"})


def shared_fragments(facts: list[dict], texts: list[str]) -> tuple[str, str, str, str]:
    """The (at most four, longest) runs of consecutive members of the first result's facts whose text
    every other result's facts text holds too (`texts`: as stored, _json(facts, default=str)); "" for
    the slots not used. A file of one result shares nothing: its fragments would cost, not save."""
    if len(facts) < 2:
        return NO_FRAGMENTS
    groups: list[list[str]] = [[]]
    for key, value in facts[0].items():
        member = _json({key: value}, default=str)[1:-1]
        if key not in UNSHARED_FACTS and all(member in text for text in texts[1:]):
            groups[-1].append(member)
        elif groups[-1]:
            groups.append([])
    joined = [",".join(g) for g in groups if g]
    kept = set(sorted((f for f in joined if len(f) >= MIN_FRAGMENT_CHARS), key=len, reverse=True)[:4])
    chosen = [f for f in joined if f in kept]
    return tuple(chosen + [""] * (4 - len(chosen)))  # type: ignore[return-value]


def encode_facts(text: str, fragments: tuple[str, ...]) -> str:
    """A result's facts text as stored: each shared fragment replaced by its marker, when reading it
    back (decode_facts, FACTS_SQL) gives exactly `text`; else `text` itself. A text that holds a marker
    of its own could not be read back as written: refused (ValueError), never stored changed."""
    if decode_facts(text, fragments) != text:
        raise ValueError("the facts hold text that marks a shared fragment")
    out = text
    for marker, fragment in zip(FACT_MARKERS, fragments, strict=True):
        if fragment:
            out = out.replace(fragment, marker)
    return out if decode_facts(out, fragments) == text else text


def decode_facts(text: str, fragments: tuple[str, ...]) -> str:
    """The facts text as written, from the stored text and its file's fragments (what FACTS_SQL does)."""
    for marker, fragment in reversed(list(zip(FACT_MARKERS, fragments, strict=True))):
        text = text.replace(marker, fragment)
    return text


def _facts_dict(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def facts_sql(table: str) -> str:
    """The SQL of a run's facts as written (the shared fragments of an imported file put back), for a
    query on `table` (a name or an alias of runs). A run that is not imported costs one test."""
    decoded = f"{table}.facts"
    for i in range(4, 0, -1):
        decoded = f"replace({decoded}, '{FACT_MARKERS[i - 1]}', f.f{i})"
    return (f"CASE WHEN {table}.content_hash IS NULL THEN {table}.facts ELSE coalesce((SELECT {decoded}"
            f" FROM import_files f WHERE f.sha256 = substr({table}.content_hash, 1, 64)), {table}.facts) END")


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
SQLITE_MAGIC = b"SQLite format 3\x00"
REQUIRED_TABLES = frozenset({"runs", "metrics"})  # what makes an SQLite file a clusterbench database

# Raw outputs up to this size are kept inside the database as well as on disk.
MAX_BLOB_BYTES = 8 * 1024 * 1024
# A new database's page: with 16 KiB, compressed outputs of a few KiB and the index entries fill
# their pages better than with SQLite's 4 KiB default (an import takes a sixth less space).
NEW_PAGE_SIZE = 16384
ZLIB_LEVEL = 6  # level 9 saves under 2% more on benchmark outputs, at twice the time

# Tags set on stored runs (`clusterbench tag`, `import --tag`): bounded like names are elsewhere.
# A key is a word that a selection term can name (no blank, comma, colon or comparison sign).
MAX_TAG_KEY_CHARS = 100
MAX_TAG_VALUE_CHARS = 1000
MAX_TAGS_PER_RUN = 100
TAG_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/+@]*")

# Curation (`exclude --reason`, `note`): bounded like tags, so a hostile or careless text cannot grow a
# listing or a report without bound.
MAX_REASON_CHARS = 500
MAX_NOTE_CHARS = 2000
MAX_NOTES_PER_RUN = 50
# Every full run row carries two columns that are not in `runs`: `excluded` (the reason, or None) and
# `notes` (a list of texts, oldest first; decoded by SQLite's column converter "cb_notes", so dict(row)
# holds a list). The analysis reads them as any other field of a run (analysis.flags: `excluded`).
_EXCLUDED_SQL = "(SELECT excluded FROM curation WHERE run_id = {t}.id) AS excluded"
_NOTES_SQL = ('(SELECT json_group_array(CAST(text AS TEXT)) FROM (SELECT text FROM notes WHERE run_id = {t}.id'
              ' ORDER BY at, id)) AS "notes [cb_notes]"')
_NO_CURATION_SQL = "NULL AS excluded, '[]' AS \"notes [cb_notes]\""
# Runs deleted at once from here on get a temporary index on artifacts(sha256): the trigger that
# releases a blob looks for other references, a scan per deleted artifact without it.
INDEXED_DELETE_RUNS = 50
NOTES_TYPES = sqlite3.PARSE_COLNAMES  # a column named "x [cb_notes]" is read as a list (see _notes_from_sql)

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

    def add_imported_run(self, rec: RunRecord, valid: bool, reason: str | None, metrics: Iterable[Metric],
                         facts: dict, artifact_name: str, artifact: bytes, started_at: str | None,
                         ended_at: str | None, duration_s: float | None) -> bool:
        """A result read from an old file, in one transaction; False if its content hash is stored.
        The file's bytes are stored once however many of its results are imported: each result's
        artifact row refers to the one blob."""
        run = ImportedRun(rec, valid, reason, list(metrics), facts, started_at, ended_at, duration_s)
        return bool(self.add_imported_runs([run], artifact_name, artifact))

    def add_imported_runs(self, runs: list[ImportedRun], artifact_name: str, artifact: bytes,
                          digest: str | None = None, stored: set[str] | None = None) -> list[ImportedRun]:
        """The results of one imported file, in one transaction (all or none); returns those stored
        (a result whose content hash is stored already is left out). The file's bytes (SHA-256 `digest`,
        computed here when not given) are stored once, and so is what its results share (import_files:
        the output they name, the facts text they have in common). Each table gets one statement for
        the whole file (executemany), not one per result. `stored`: the content hashes of the file's
        results stored already, when the caller read them (`imported`) inside its transaction."""
        digest = digest or self._digest(artifact)
        with self.transaction() as c:
            if stored is None or not self.in_batch():
                stored = {row[0] for row in c.execute(
                    "SELECT content_hash FROM runs WHERE content_hash >= ? AND content_hash < ?",
                    (f"{digest}:", f"{digest};"))}
            runs = [r for r in runs if r.rec.content_hash is None or r.rec.content_hash not in stored]
            if not runs:
                return []
            texts = [_json(r.facts, default=str) for r in runs]
            shared = self._import_file(c, runs, texts, artifact_name, len(artifact), digest, bool(stored))
            if shared is not None:  # the file's row names the output, and holds the fragments
                name, path, size, fragments = shared
                texts = [encode_facts(t, fragments) if self._shares(r, digest) else t
                         for t, r in zip(texts, runs, strict=True)]
            c.executemany(
                "INSERT INTO runs (id, campaign, benchmark, params, repeat, status, valid, reason, started_at,"
                " ended_at, duration_s, workdir, env, launcher, nodes, tags, facts, source, content_hash)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,'{}',?,?,?,?,?,?)",
                [(r.rec.id, r.rec.campaign, r.rec.benchmark, _json(r.rec.params, sort_keys=True), r.rec.repeat,
                  "ok" if r.valid else "invalid", int(r.valid), r.reason, r.started_at or now_iso(), r.ended_at,
                  r.duration_s, r.rec.workdir, IMPORT_LAUNCHER, r.rec.nodes, _json(r.rec.tags), text,
                  r.rec.source, r.rec.content_hash) for r, text in zip(runs, texts, strict=True)])
            self._insert_metrics_of(c, [(r.rec.id, r.metrics) for r in runs])
            self._store_file_bytes(c, runs[0].rec.benchmark, digest, artifact)
            c.executemany("INSERT INTO artifacts (run_id, name, path, sha256, size) VALUES (?,?,?,?,?)",
                          [(r.rec.id, artifact_name, r.facts.get("source_file"), digest, len(artifact))
                           for r in runs if shared is None or not self._shares(r, digest)
                           or (artifact_name, r.facts.get("source_file"), len(artifact)) != shared[:3]])
        return runs

    def _digest(self, data: bytes) -> str:
        """SHA-256 of an artifact; the N results of one imported file pass the same bytes object N
        times, hashed once (the reference held keeps the object, so identity cannot be reused)."""
        if self._last_digest is None or self._last_digest[0] is not data:
            self._last_digest = (data, hashlib.sha256(data).hexdigest())
        return self._last_digest[1]

    def _store_file_bytes(self, c: sqlite3.Connection, kind: str, digest: str, data: bytes) -> None:
        """An imported file's bytes, compressed against the first file of its kind this import stored
        (its base, still stored and compressed alone: a savepoint rolled back or another process may
        have removed it); the first, or one stored when the base has gone, becomes the base."""
        base = self._bases.get(kind) if self.has_import_files else None
        if base is not None and c.execute("SELECT 1 FROM blobs WHERE sha256=? AND base IS NULL AND codec IN"
                                          " ('zlib', 'raw')", (base[0],)).fetchone() is None:
            del self._bases[kind]
            base = None
        codec = _store_blob(c, digest, len(data), data, base=base)
        if base is None and codec in ("zlib", "raw") and self.has_import_files:
            self._bases[kind] = (digest, data[-BASE_DICT_BYTES:])

    def _import_file(self, c: sqlite3.Connection, runs: list[ImportedRun], texts: list[str], name: str, size: int,
                     digest: str, stored_before: bool) -> tuple[str, str | None, int, tuple[str, ...]] | None:
        """(name, path, size, fragments) of the file's import_files row, made now from these results when
        the file has none; None when its results cannot share one (a store before version 4 opened
        read-only, content hashes that are not the file's, results of it stored before without one)."""
        if not self.has_import_files or not any(self._shares(r, digest) for r in runs):
            return None
        if not stored_before:  # the row goes with the file's last run: there is none, as a rule
            mine = [(r.facts, t) for r, t in zip(runs, texts, strict=True) if self._shares(r, digest)]
            fragments = shared_fragments([f for f, _ in mine], [t for _, t in mine])
            path = mine[0][0].get("source_file")
            if c.execute("INSERT OR IGNORE INTO import_files (sha256, name, path, size, f1, f2, f3, f4)"
                         " VALUES (?,?,?,?,?,?,?,?)", (digest, name, path, size, *fragments)).rowcount:
                return name, path, size, fragments
        row = c.execute("SELECT name, path, size, f1, f2, f3, f4 FROM import_files WHERE sha256=?",
                        (digest,)).fetchone()
        return (row[0], row[1], row[2], tuple(row[3:7])) if row is not None else None

    @staticmethod
    def _shares(run: ImportedRun, digest: str) -> bool:
        """A result of the file with this SHA-256 (its content hash says so): it may share the file's row."""
        return bool(run.rec.content_hash) and run.rec.content_hash.startswith(f"{digest}:")

    def set_imported_facts(self, run_id: str, facts: dict) -> None:
        """Replace an imported run's facts (inside the caller's transaction), stored as add_imported_runs
        stores them: its file's shared fragments marked."""
        text = _json(facts, default=str)
        row = self.conn.execute(
            "SELECT f.f1, f.f2, f.f3, f.f4 FROM runs r JOIN import_files f ON f.sha256 = substr(r.content_hash, 1, 64)"
            " WHERE r.id=? AND r.content_hash IS NOT NULL", (run_id,)).fetchone() if self.has_import_files else None
        self.conn.execute("UPDATE runs SET facts=? WHERE id=?",
                          (encode_facts(text, tuple(row)) if row is not None else text, run_id))

    def imported(self, digest: str) -> dict[str, sqlite3.Row]:
        """Content hash -> the stored row (id, params, tags, facts, valid, reason, started_at, ended_at,
        duration_s) of every result stored from the file with this SHA-256: one range read of the
        content index for a whole file."""
        rows = self.conn.execute(f"SELECT id, params, tags, {self.facts_column()}, valid, reason, started_at, ended_at,"
                                 " duration_s, content_hash FROM runs WHERE content_hash >= ? AND content_hash < ?",
                                 (f"{digest}:", f"{digest};")).fetchall()
        return {row["content_hash"]: row for row in rows}

    def update_tags(self, run_ids: Iterable[str], add: dict, remove: Iterable[str] = ()) -> int:
        """Set the tags `add` (replacing a value a key had) and drop the keys `remove` on these
        stored runs, in one transaction. Returns how many runs changed: a run that already has
        exactly these tags is left as it is and not counted; an unknown run id is ignored.
        Keys and values are bounded (MAX_TAG_*): a bad one is refused before anything is written."""
        add = {check_tag_key(k): check_tag_value(k, v) for k, v in add.items()}
        remove = [check_tag_key(k) for k in remove]
        ids = list(dict.fromkeys(run_ids))
        changed = 0
        with self.transaction() as c:
            for start in range(0, len(ids), 500):  # SQLite limits the number of parameters
                chunk = ids[start:start + 500]
                rows = c.execute(f"SELECT id, tags FROM runs WHERE id IN ({','.join('?' * len(chunk))})",
                                 chunk).fetchall()
                updates = []
                for run_id, text in rows:
                    tags = _stored_tags(run_id, text, self.path)
                    new = {k: v for k, v in tags.items() if k not in remove} | add
                    if len(new) > MAX_TAGS_PER_RUN:
                        raise UserInputError(f"run {run_id} would have {len(new)} tags, more than the limit of "
                                             f"{MAX_TAGS_PER_RUN}", hint="remove some with `clusterbench untag`")
                    if _json(new, sort_keys=True) != _json(tags, sort_keys=True):  # True == 1 for dicts
                        updates.append((_json(new), run_id))
                c.executemany("UPDATE runs SET tags=? WHERE id=?", updates)
                changed += len(updates)
        return changed

    # ------------------------------------------------------------------ curation

    def exclude_runs(self, run_ids: Iterable[str], reason: str) -> tuple[int, int]:
        """Keep these runs stored but out of what counts (bests, baselines, history, the tuner),
        with `reason`, in one transaction. Returns (newly excluded, excluded before whose reason
        changed); a run excluded already with the same reason is not counted, an unknown id ignored."""
        reason = check_curation_text(reason, "reason", MAX_REASON_CHARS)
        ids, new, changed = list(dict.fromkeys(run_ids)), 0, 0
        with self.transaction() as c:
            for chunk in _chunks(ids):
                marks = ",".join("?" * len(chunk))
                before = dict(c.execute(f"SELECT run_id, excluded FROM curation WHERE run_id IN ({marks})", chunk))
                stored = [row[0] for row in c.execute(f"SELECT id FROM runs WHERE id IN ({marks})", chunk)]
                at = now_iso()
                rows = [(run_id, reason, at) for run_id in stored if before.get(run_id) != reason]
                c.executemany("INSERT INTO curation (run_id, excluded, excluded_at) VALUES (?,?,?) ON CONFLICT(run_id)"
                              " DO UPDATE SET excluded=excluded.excluded, excluded_at=excluded.excluded_at", rows)
                changed += sum(1 for run_id, _r, _a in rows if run_id in before)
                new += sum(1 for run_id, _r, _a in rows if run_id not in before)
        return new, changed

    def include_runs(self, run_ids: Iterable[str]) -> int:
        """Undo `exclude_runs` for these runs; returns how many were excluded."""
        ids, count = list(dict.fromkeys(run_ids)), 0
        with self.transaction() as c:
            for chunk in _chunks(ids):
                count += c.execute(f"DELETE FROM curation WHERE run_id IN ({','.join('?' * len(chunk))})",
                                   chunk).rowcount
        return count

    def add_note(self, run_id: str, text: str) -> int:
        """Add a note to a stored run (the report and `results RUN` show it); returns its count of
        notes. Refused for an unknown run and past MAX_NOTES_PER_RUN."""
        text = check_curation_text(text, "note", MAX_NOTE_CHARS)
        with self.transaction() as c:
            if c.execute("SELECT 1 FROM runs WHERE id=?", (run_id,)).fetchone() is None:
                raise UserInputError(f"no run with id {run_id!r}", where=str(self.path),
                                     hint="list run ids with `clusterbench results`")
            count = c.execute("SELECT COUNT(*) FROM notes WHERE run_id=?", (run_id,)).fetchone()[0]
            if count >= MAX_NOTES_PER_RUN:
                raise UserInputError(f"run {run_id} has {count} notes already, the limit",
                                     hint="keep longer remarks in a file and name it in one note")
            c.execute("INSERT INTO notes (run_id, at, text) VALUES (?,?,?)", (run_id, now_iso(), text))
        return count + 1

    def exclusion(self, run_id: str) -> sqlite3.Row | None:
        """(excluded, excluded_at) of an excluded run, else None."""
        if not self.has_curation:
            return None
        return self.conn.execute("SELECT excluded, excluded_at FROM curation WHERE run_id=?", (run_id,)).fetchone()

    def notes(self, run_id: str) -> list[sqlite3.Row]:
        """A run's notes (at, text), oldest first."""
        if not self.has_curation:
            return []
        return self.conn.execute("SELECT at, CAST(text AS TEXT) AS text FROM notes WHERE run_id=? ORDER BY at, id"
                                 f" LIMIT {MAX_NOTES_PER_RUN}", (run_id,)).fetchall()

    def delete_runs(self, run_ids: Iterable[str]) -> Deleted:
        """Remove these runs for good: their rows, metrics, outputs (a stored output goes with the
        last run that refers to it: the release trigger), notes and exclusion, in one transaction;
        then their run directories, but only those inside this store's runs dir (an imported run's
        folder is the user's: never removed, listed in kept_dirs)."""
        ids = list(dict.fromkeys(run_ids))
        done = Deleted()
        dirs: list[tuple[Path, Path]] = []
        counted = ("metrics", "artifacts") + (("notes", "curation") if self.has_curation else ())
        with self.transaction() as c:
            indexed = len(ids) > INDEXED_DELETE_RUNS
            if indexed:
                c.execute("CREATE INDEX IF NOT EXISTS artifacts_sha256_delete ON artifacts(sha256)")
            blobs_before = c.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] if self.has_blobs else 0
            for chunk in _chunks(ids):
                marks = ",".join("?" * len(chunk))
                for table in counted:
                    found = c.execute(f"SELECT COUNT(*) FROM {table} WHERE run_id IN ({marks})", chunk).fetchone()[0]
                    if table == "artifacts" and self.has_import_files:
                        found += c.execute(  # the outputs their imported files' rows name
                            f"SELECT COUNT(*) FROM runs r WHERE r.id IN ({marks}) AND r.content_hash IS NOT NULL"
                            " AND EXISTS (SELECT 1 FROM import_files f WHERE f.sha256 = substr(r.content_hash, 1, 64))"
                            " AND NOT EXISTS (SELECT 1 FROM artifacts o WHERE o.run_id = r.id)", chunk).fetchone()[0]
                    name = "excluded" if table == "curation" else table
                    setattr(done, name, getattr(done, name) + found)
                for run_id, workdir in c.execute(f"SELECT id, workdir FROM runs WHERE id IN ({marks})", chunk):
                    dirs += self._run_dirs(run_id, workdir, done)
                done.runs += c.execute(f"DELETE FROM runs WHERE id IN ({marks})", chunk).rowcount
            if self.has_blobs:
                done.blobs = blobs_before - c.execute("SELECT COUNT(*) FROM blobs").fetchone()[0]
            if indexed:
                c.execute("DROP INDEX IF EXISTS artifacts_sha256_delete")
            if dirs:
                dirs = self._unshared(c, dirs, done)
        for folder in dict.fromkeys(resolved for _named, resolved in dirs):
            size = _tree_size(folder)
            try:
                shutil.rmtree(folder)
            except OSError:
                done.kept_dirs.append(f"{folder} (could not be removed)")
                continue
            done.dirs.append(str(folder))
            done.dir_bytes += size
        return done

    @staticmethod
    def _unshared(c: sqlite3.Connection, dirs: list[tuple[Path, Path]], done: Deleted) -> list[tuple[Path, Path]]:
        """The directories no run still stored works in (its workdir is not one of them, inside one
        or around one): a campaign that shared a folder keeps it for the runs that stay."""
        sql = "SELECT DISTINCT workdir FROM runs WHERE workdir IS NOT NULL"
        kept = [os.path.normpath(row[0]) for row in c.execute(sql)]
        out = []
        for named, folder in dirs:  # the path as runs name it, and resolved (no link in between)
            texts = {os.path.normpath(named), str(folder)}
            if any(w == t or w.startswith(t + os.sep) or t.startswith(w + os.sep) for w in kept for t in texts):
                done.kept_dirs.append(f"{folder} (runs still stored use it)")
            else:
                out.append((named, folder))
        return out

    def _run_dirs(self, run_id: str, workdir: str | None, done: Deleted) -> list[tuple[Path, Path]]:
        """The run's directory when it lies inside the runs dir (not the runs dir itself, not a
        symbolic link); a workdir elsewhere is noted in done.kept_dirs."""
        root = self.runs_dir.resolve()
        candidates = [Path(workdir)] if workdir else []
        candidates.append(self.runs_dir / run_id)
        out = []
        for path in dict.fromkeys(candidates):
            if path.is_symlink() or not path.is_dir():
                continue
            resolved = path.resolve()
            if resolved != root and resolved.is_relative_to(root):
                out.append((path, resolved))
            elif path == Path(workdir or ""):
                done.kept_dirs.append(str(path))
        return out

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

    # ------------------------------------------------------------------ reads

    def facts_column(self, table: str = "runs") -> str:
        """The SQL of a run's facts as written, named facts (see run_columns)."""
        return f"{facts_sql(table)} AS facts" if self.has_import_files else f"{table}.facts"

    def curation_columns(self, table: str = "runs") -> str:
        """The SQL of the two columns every full run row carries, `excluded` and `notes`, for a
        query on `table` (a name or an alias of runs). Constant when nothing is curated, so a store
        without curation pays nothing per row."""
        if not self.has_curation or not self.conn.execute(
                "SELECT EXISTS (SELECT 1 FROM curation) OR EXISTS (SELECT 1 FROM notes)").fetchone()[0]:
            return _NO_CURATION_SQL
        return _EXCLUDED_SQL.format(t=table) + ", " + _NOTES_SQL.format(t=table)

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

    def hpcc_history(self, system_id: str, limit: int = 5) -> list[tuple[int, float, float, float]]:
        """(N, total s, HPL s, HPL Gflop/s) of the last `limit` ok HPCC runs on this system, newest
        first: what HpccTimeModel.learned fits a time budget with. Runs missing a figure are left out."""
        rows = self.conn.execute(
            "SELECT r.params, r.duration_s,"
            " (SELECT value FROM metrics WHERE run_id=r.id AND name='HPL_time') AS hpl_s,"
            " (SELECT value FROM metrics WHERE run_id=r.id AND name='hpl_gflops') AS gflops"
            " FROM runs r WHERE r.benchmark='hpcc' AND r.system_id=? AND r.status='ok'"
            " ORDER BY r.started_at DESC LIMIT ?", (system_id, int(limit))).fetchall()
        return [(int(json.loads(r["params"])["n"]), float(r["duration_s"]), float(r["hpl_s"]),
                 float(r["gflops"])) for r in rows if r["hpl_s"] and r["gflops"] and r["duration_s"]]

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
        sql, args = "SELECT run_id, name, value, unit, higher_is_better, labels, valid FROM metrics", []
        if names is not None:
            args = sorted(set(names))
            sql += f" WHERE name IN ({','.join('?' * len(args))})"
        return self.conn.execute(sql + " ORDER BY id", args).fetchall()


JSON_RUN_COLUMNS = ("params", "env", "launcher", "tags", "facts")
RUN_COLUMNS = ("id", "campaign", "benchmark", "params", "repeat", "status", "valid", "reason", "exit_code",
               "started_at", "ended_at", "duration_s", "command", "workdir", "env", "launcher", "system_id",
               "nodes", "tags", "facts", "source", "content_hash")
_COMPACT = (",", ":")


def _json(value, **kwargs) -> str:
    """JSON as the store writes it: without the blanks after ',' and ':' (same information, smaller).
    One encoder per set of options, made once (json.dumps with options makes one per call: an import
    encodes three texts per result)."""
    key = tuple(sorted(kwargs.items()))
    encode = _ENCODERS.get(key)
    if encode is None:
        encode = _ENCODERS[key] = json.JSONEncoder(separators=_COMPACT, **kwargs).encode
    return encode(value)


_ENCODERS: dict[tuple, Callable[[object], str]] = {}


IMPORT_LAUNCHER = _json({"name": "import"})
# Metric labels as _json(labels, sort_keys=True, default=str) writes them, with one encoder made once
# (json.dumps with options builds a new encoder per call: a tenth of an HPCC import's time).
_LABELS_JSON = json.JSONEncoder(separators=_COMPACT, sort_keys=True, default=str).encode


@dataclass
class ImportedRun:
    """One result of an imported file, as `Store.add_imported_runs` stores it."""

    rec: RunRecord
    valid: bool
    reason: str | None
    metrics: list[Metric]
    facts: dict
    started_at: str | None
    ended_at: str | None
    duration_s: float | None


def decoded_run(row: sqlite3.Row) -> dict:
    """A run row as a dict with its JSON columns (params, env, launcher, tags, facts) decoded, and
    its curation: `excluded` (the reason, or None) and `notes` (a list of texts, oldest first)."""
    run = dict(row)
    for key in JSON_RUN_COLUMNS:
        run[key] = json.loads(run[key]) if run.get(key) else {}
    run.setdefault("excluded", None)
    run["notes"] = decode_notes(run.get("notes"))
    return run


def decode_notes(value) -> list[str]:
    """A run's notes as a list of texts, whatever form a row holds them in: the list the "cb_notes"
    converter made, a JSON text, or nothing (a row read without its curation)."""
    if isinstance(value, list):
        return [str(v) for v in value[:MAX_NOTES_PER_RUN]]
    if isinstance(value, bytes | str) and value:
        return _notes_from_sql(value.encode() if isinstance(value, str) else value)
    return []


def _notes_from_sql(data: bytes) -> list[str]:
    """The "cb_notes" column converter: SQLite's JSON array of a run's notes as a list of texts,
    bounded; a damaged text reads as no notes rather than failing the read of the run."""
    if data == b"[]":
        return []
    try:
        value = json.loads(data.decode("utf-8", "replace"))
    except ValueError:
        return []
    if not isinstance(value, list):
        return []
    return [str(v)[:MAX_NOTE_CHARS] for v in value[:MAX_NOTES_PER_RUN] if v is not None]


sqlite3.register_converter("cb_notes", _notes_from_sql)


def _chunks(ids: list[str], size: int = 500) -> Iterator[list[str]]:
    """Run ids in slices SQLite takes as parameters of one statement."""
    for start in range(0, len(ids), size):
        yield ids[start:start + size]


def _tree_size(folder: Path) -> int:
    """Bytes of the files under a folder (not following links), for what a deletion freed."""
    total = 0
    for path in folder.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_size
        except OSError:
            pass
    return total


def check_curation_text(text, what: str, most: int) -> str:
    """A reason or a note: printable text (no control characters), not empty, at most `most`
    characters; refused with UserInputError saying which limit it broke."""
    if not isinstance(text, str) or not text.strip():
        raise UserInputError(f"the {what} is empty", hint=f"write the {what} as a short text in quotes")
    text = text.strip()
    if len(text) > most:
        raise UserInputError(f"the {what} has {len(text):,} characters, more than {most}",
                             hint=f"shorten the {what}; keep details in a file and name it")
    if not text.isprintable():
        raise UserInputError(f"the {what} holds a control character (a newline, tab or escape)",
                             hint=f"write the {what} on one line of plain text")
    return text


@dataclass
class Deleted:
    """What `Store.delete_runs` removed: rows of each table, and run directories on disk."""

    runs: int = 0
    metrics: int = 0
    artifacts: int = 0
    blobs: int = 0
    notes: int = 0
    excluded: int = 0
    dirs: list[str] = field(default_factory=list)
    dir_bytes: int = 0
    kept_dirs: list[str] = field(default_factory=list)  # named by a run but outside the runs dir: left


@dataclass
class ArtifactFile:
    """A run's output file as read for storing: its bytes, hash and packed form."""

    name: str
    path: str
    sha256: str
    size: int
    data: bytes | None  # None when larger than MAX_BLOB_BYTES (only the path is kept)
    packed: tuple[str, bytes | None]


def _read_artifact(path: Path) -> ArtifactFile:
    data = path.read_bytes()
    kept = data if len(data) <= MAX_BLOB_BYTES else None
    return ArtifactFile(path.name, str(path.resolve()), hashlib.sha256(data).hexdigest(), len(data), kept,
                        pack(kept))


def pack(data: bytes | None) -> tuple[str, bytes | None]:
    """(codec, content) for a blob: zlib when it saves space, else the bytes as they are; 'none'
    for bytes not kept."""
    if data is None:
        return "none", None
    packed = zlib.compress(data, ZLIB_LEVEL)
    return ("zlib", packed) if len(packed) < len(data) else ("raw", data)


BASE_DICT_BYTES = 32768  # of a base's bytes, the last this many are the dictionary (zlib's window: no use for more)
DELTA_CODEC = "zlib+base"


def pack_against(data: bytes, base: bytes) -> bytes:
    """`data` compressed with the end of `base` (an earlier file's bytes) as zlib's preset dictionary."""
    packer = zlib.compressobj(ZLIB_LEVEL, zdict=base[-BASE_DICT_BYTES:])
    return packer.compress(data) + packer.flush()


class BlobDamaged(ValueError):
    """Stored bytes that do not decode to their recorded size and hash."""


def unpack(codec: str | None, content, size: int, sha256: str, base: bytes | None = None) -> bytes | None:
    """The original bytes of a blob, checked against its size and hash; None when they were not
    kept (codec 'none', or no blob). Decompression stops one byte past `size`: a damaged or
    hostile blob cannot make it allocate more than the output it claims to be. `base`: the
    original bytes of the blob a 'zlib+base' blob was compressed against."""
    if codec in (None, "none") or content is None:
        return None
    data = content.encode() if isinstance(content, str) else bytes(content)
    if codec in ("zlib", DELTA_CODEC):
        if not isinstance(size, int) or not 0 <= size <= MAX_BLOB_BYTES:
            raise BlobDamaged(f"its recorded size {size!r} is not a size it could have been kept at")
        if codec == DELTA_CODEC and base is None:
            raise BlobDamaged("the blob it was compressed against is missing or damaged")
        inflater = zlib.decompressobj(zdict=base[-BASE_DICT_BYTES:]) if base is not None else zlib.decompressobj()
        try:
            data = inflater.decompress(data, size + 1)
        except zlib.error as exc:
            raise BlobDamaged(f"it does not decompress ({exc})") from None
    elif codec != "raw":
        raise BlobDamaged(f"unknown codec {codec!r}")
    if len(data) != size:
        raise BlobDamaged(f"{len(data)} bytes where {size} were stored")
    if hashlib.sha256(data).hexdigest() != sha256:
        raise BlobDamaged("its SHA-256 differs from the one recorded when it was stored")
    return data


def _store_blob(conn: sqlite3.Connection, digest: str, size: int, data: bytes | None,
                packed: tuple[str, bytes | None] | None = None, base: tuple[str, bytes] | None = None) -> str | None:
    """Keep these bytes under their hash unless they are kept already (then nothing is compressed
    or written). A blob recorded as not kept ('none') gets the bytes when a later writer has them.
    With `base` (the SHA-256 and bytes of a blob compressed alone: the caller checked it is stored),
    compressed against it (raw when that is no smaller). Returns the codec written (None: nothing written)."""
    row = conn.execute("SELECT codec FROM blobs WHERE sha256=?", (digest,)).fetchone()
    if row is not None and (row[0] != "none" or data is None):
        return None
    kept = data if data is not None and len(data) <= MAX_BLOB_BYTES else None
    against = None
    if base is not None and kept is not None and packed is None and base[0] != digest:
        delta = pack_against(kept, base[1])  # alone it would hardly be smaller: not compressed twice
        codec, content, against = (DELTA_CODEC, delta, base[0]) if len(delta) < len(kept) else ("raw", kept, None)
    else:
        codec, content = packed if packed is not None else pack(kept)
    values = (digest, size, 0 if content is None else len(content), codec, content)
    if against is None:
        conn.execute("INSERT INTO blobs (sha256, size, stored, codec, content) VALUES (?,?,?,?,?)"
                     " ON CONFLICT(sha256) DO UPDATE SET stored=excluded.stored, codec=excluded.codec,"
                     " content=excluded.content", values)
    else:
        conn.execute("INSERT INTO blobs (sha256, size, stored, codec, content, base) VALUES (?,?,?,?,?,?)"
                     " ON CONFLICT(sha256) DO UPDATE SET stored=excluded.stored, codec=excluded.codec,"
                     " content=excluded.content, base=excluded.base", (*values, against))
    return codec


def check_tag_key(key) -> str:
    """A tag key as a selection term can name it, else UserInputError saying what a key may be."""
    if not isinstance(key, str) or len(key) > MAX_TAG_KEY_CHARS or not TAG_KEY.fullmatch(key):
        shown = repr(key)[:60]
        raise UserInputError(f"invalid tag key {shown}",
                             hint=f"a key is 1 to {MAX_TAG_KEY_CHARS} letters, digits and _ . - / + @ "
                                  "(starting with a letter, digit or _), e.g. blas or system")
    return key


def check_tag_value(key: str, value):
    """A tag value: a text of at most MAX_TAG_VALUE_CHARS printable characters, a number or a
    boolean (what --tag KEY=VALUE reads); anything else is refused."""
    if isinstance(value, bool) or (isinstance(value, int) and abs(value) < 2**63):
        return value
    if isinstance(value, float) and value == value and abs(value) != float("inf"):
        return value
    if isinstance(value, str) and len(value) <= MAX_TAG_VALUE_CHARS and value.isprintable():
        return value
    if isinstance(value, str):
        problem = (f"{len(value)} characters, more than {MAX_TAG_VALUE_CHARS}" if len(value) > MAX_TAG_VALUE_CHARS
                   else "a control character")
    else:
        problem = f"a {type(value).__name__}, not a text, number or boolean"
    raise UserInputError(f"invalid value for tag {key!r}: {problem}",
                         hint=f"write {key}=VALUE with a short text or a number, e.g. {key}=openblas-serial")


def _stored_tags(run_id: str, text: str | None, path: Path) -> dict:
    try:
        tags = json.loads(text or "{}")
    except ValueError:
        tags = None
    if not isinstance(tags, dict):
        raise EnvironmentProblem(f"the stored tags of run {run_id} are not a JSON object: not changed",
                                 where=str(path), hint=f"see the damage with `clusterbench --db {path} db check`")
    return tags


# ---------------------------------------------------------------- opening safely

READ_ONLY_HINT = ("read commands (results, report, compare, db check, db backup) still work on it; to store "
                  "results, use a writable database: make a copy with `clusterbench db backup NEW.db` and "
                  "pass --db NEW.db (or set $CLUSTERBENCH_DB)")
DAMAGE_HINT = ("nothing was changed or repaired: restore a backup (`clusterbench db backup` makes one) or salvage "
               "what is left with `sqlite3 {path} .recover | sqlite3 salvaged.db`")
CORRUPT_HINT = "see the damage with `clusterbench --db {path} db check`; " + DAMAGE_HINT
FILE_KINDS = ((stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"), (stat.S_ISFIFO, "named pipe"),
              (stat.S_ISSOCK, "socket"))


@dataclass
class FileFacts:
    """What the first 100 bytes of an SQLite file say, read without SQLite."""

    size: int
    header: bytes
    sidecar: bool  # a non-empty -wal or -journal beside it: the header may be older than the database

    @property
    def page_size(self) -> int:
        size = int.from_bytes(self.header[16:18], "big")
        return 65536 if size == 1 else size

    @property
    def user_version(self) -> int:
        return int.from_bytes(self.header[60:64], "big", signed=True)

    @property
    def header_pages(self) -> int | None:
        """The page count the header states, when it is valid (SQLite >= 3.7.0 wrote it)."""
        pages = int.from_bytes(self.header[28:32], "big")
        valid = self.header[24:28] == self.header[92:96] and pages > 0
        return pages if valid else None

    def truncation(self) -> str | None:
        pages = self.header_pages
        if pages is not None and self.size < pages * self.page_size:
            return (f"the file is truncated: {self.size} bytes where its header says {pages} pages of "
                    f"{self.page_size} bytes ({pages * self.page_size} bytes)")
        return None

    def check_header(self, path: Path) -> None:
        """Refuse a truncated or too-new database before SQLite opens it (it would create files)."""
        if self.size == 0:
            return
        truncated = self.truncation()
        if truncated:
            raise EnvironmentProblem(f"the database is corrupted: {truncated}", where=str(path),
                                     hint=CORRUPT_HINT.format(path=path))
        if self.user_version > SCHEMA_VERSION:  # ours from a newer clusterbench, or another program's
            tables = _tables_without_side_files(path)
            if tables is not None and (not tables or not REQUIRED_TABLES <= tables):
                raise _not_ours(path, tables, self.user_version)
            raise too_new(path, self.user_version)


def inspect_file(path: Path) -> FileFacts | None:
    """None when nothing is at `path`; refuses (without opening it with SQLite, so without changing
    it) a folder, a device, an unreadable file or one that is not an SQLite database."""
    where = str(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise UserInputError("a part of this path is a file, not a folder", where=where,
                             hint="give a database path in an existing or new folder") from None
    except PermissionError:
        raise EnvironmentProblem("cannot reach the database: permission denied on a folder of its path",
                                 where=where, hint="ask for access to the folder, or use another --db") from None
    except OSError as exc:
        raise EnvironmentProblem(f"cannot reach the database: {exc.strerror or exc}", where=where) from None
    if stat.S_ISDIR(info.st_mode):
        raise UserInputError("is a directory, not a clusterbench database", where=where,
                             hint=f"name the database file, e.g. --db {path / 'results.db'}")
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in FILE_KINDS if test(info.st_mode)), "special file")
        raise UserInputError(f"is a {kind}, not a clusterbench database", where=where,
                             hint="name a database file with --db (a new path creates one); nothing was written")
    try:
        with open(path, "rb") as fh:
            header = fh.read(100)
    except PermissionError:
        raise EnvironmentProblem("cannot read the database: permission denied", where=where,
                                 hint="ask its owner for read access (chmod), or work on a copy the owner "
                                      "makes with `clusterbench db backup`") from None
    except OSError as exc:
        raise EnvironmentProblem(f"cannot read the database: {exc.strerror or exc}", where=where) from None
    if header and not header.startswith(SQLITE_MAGIC):
        raise UserInputError("is not an SQLite database (it does not begin with 'SQLite format 3'), so not a "
                             "clusterbench database", where=where,
                             hint="name a clusterbench results database or a new file with --db; this file "
                                  "was left untouched")
    if header and len(header) < 100:
        raise EnvironmentProblem(f"the database is corrupted: the file is truncated ({len(header)} bytes, "
                                 "shorter than an SQLite header)", where=where, hint=CORRUPT_HINT.format(path=path))
    sidecar = any(_size(path.with_name(path.name + suffix)) > 0 for suffix in ("-wal", "-journal"))
    return FileFacts(info.st_size, header, sidecar)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _writable(path: Path) -> bool:
    """Writable by this process: os.access also says False on a read-only mount, even for root."""
    return os.access(path, os.W_OK | (os.X_OK if path.is_dir() else 0))


def _make_folder(folder: Path, path: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise UserInputError("a part of this path is a file, not a folder", where=str(path),
                             hint="give a database path in an existing or new folder") from None
    except OSError as exc:
        raise EnvironmentProblem(f"cannot create the database's folder {folder}: {exc.strerror or exc}",
                                 where=str(path),
                                 hint="choose a writable place with --db or $CLUSTERBENCH_DB") from None
    if not folder.is_dir():
        raise UserInputError(f"{folder} is not a folder", where=str(path))


def _schema_tables() -> list[str]:
    return [statement.split()[5] for statement in _statements(SCHEMA) if statement.startswith("CREATE TABLE")]


def _connect_ro(path: Path, immutable: bool) -> sqlite3.Connection:
    """SQLite's read-only mode; `immutable` also skips locks and the -shm file (a read-only folder)."""
    uri = f"file:{quote(str(path.absolute()))}?mode=ro" + ("&immutable=1" if immutable else "")
    try:
        return sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None, detect_types=NOTES_TYPES)
    except sqlite3.Error as exc:
        problem = explain(exc, path)
        if problem is None:
            raise
        raise problem from exc


def _tables_without_side_files(path: Path) -> set[str] | None:
    """The tables of a database with no -wal beside it, read without creating any file (immutable)."""
    try:
        conn = _connect_ro(path, immutable=True)
    except UserInputError:
        return None
    try:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def _not_ours(path: Path, tables: set[str], version: int = 0) -> UserInputError:
    shown = ", ".join(sorted(tables)[:6]) + (", ..." if len(tables) > 6 else "")
    what = f"its tables: {shown}" if tables else f"no tables, application version {version}"
    return UserInputError(f"is an SQLite database but not a clusterbench one ({what})", where=str(path),
                          hint="name a clusterbench results database or a new file with --db; this file was "
                               "left untouched")


def too_new(path: Path, version: int) -> EnvironmentProblem:
    from clusterbench import __version__

    return EnvironmentProblem(
        f"the database has schema version {version}, written by a newer clusterbench; this clusterbench "
        f"({__version__}) knows versions up to {SCHEMA_VERSION}", where=str(path),
        hint="upgrade clusterbench (e.g. pip install -U clusterbench) to read or write it; it was left untouched")


def explain(exc: BaseException, path: Path) -> UserInputError | None:
    """An SQLite error as a located message with the next step, or None for one that is a bug."""
    if not isinstance(exc, sqlite3.Error) or isinstance(exc, sqlite3.IntegrityError | sqlite3.ProgrammingError):
        return None
    text = str(exc)
    where = str(path)
    if "malformed" in text or "not a database" in text or "corrupt" in text:
        return EnvironmentProblem(f"the database is corrupted ({text})", where=where,
                                  hint=CORRUPT_HINT.format(path=path))
    if "readonly" in text or "read-only" in text:
        return EnvironmentProblem(f"the database cannot be written ({text})", where=where, hint=READ_ONLY_HINT)
    if "full" in text:
        return EnvironmentProblem(f"the disk is full ({text})", where=where,
                                  hint="free space on its file system; results finished before are stored")
    if "locked" in text or "busy" in text:
        return EnvironmentProblem(f"the database is locked by another process ({text})", where=where,
                                  hint="wait for the other clusterbench to finish, then run this again")
    if "unable to open" in text or "disk I/O" in text:
        return EnvironmentProblem(f"cannot open or read the database ({text})", where=where,
                                  hint="check the file, its folder and their permissions")
    return None


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


@dataclass
class CheckReport:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    hint: str | None = None  # the next step for the problems found


def check(path: Path) -> CheckReport:
    """`clusterbench db check`: header, integrity, foreign keys, schema version and the SHA-256 of
    every stored raw output, read-only.
    Refuses (raises) only what is not a database at all; damage is reported, never repaired."""
    facts = inspect_file(path)
    if facts is None:
        raise UserInputError("no database here", where=str(path), hint="check --db or $CLUSTERBENCH_DB")
    if facts.size == 0:
        raise UserInputError("is an empty file, not a clusterbench database yet", where=str(path))
    report = CheckReport()
    if not facts.sidecar:
        truncated = facts.truncation()
        if truncated:
            report.problems.append(truncated)
            report.hint = DAMAGE_HINT.format(path=path)
    conn = _connect_ro(path, immutable=not _writable(path.parent) and not facts.sidecar)
    try:
        _check_contents(conn, path, report)
    finally:
        conn.close()
    return report


def _check_contents(conn: sqlite3.Connection, path: Path, report: CheckReport) -> None:
    errors: set[str] = set()

    def ask(what: str, sql: str) -> list | None:
        try:
            return conn.execute(sql).fetchall()
        except sqlite3.DatabaseError as exc:
            if str(exc) not in errors:  # a damaged header fails every query the same way: say it once
                errors.add(str(exc))
                report.problems.append(f"{what} failed: {exc}")
            report.hint = DAMAGE_HINT.format(path=path)
            return None

    version_row = ask("reading the schema version", "PRAGMA user_version")
    tables_rows = ask("listing the tables", "SELECT name FROM sqlite_master WHERE type='table'")
    integrity = ask("the integrity check", "PRAGMA integrity_check(100)")
    if integrity is not None and [row[0] for row in integrity] != ["ok"]:
        report.problems += [f"integrity: {row[0]}" for row in integrity]
        report.hint = DAMAGE_HINT.format(path=path)
    elif integrity is not None:
        report.notes.append("integrity ok")
    foreign = ask("the foreign key check", "PRAGMA foreign_key_check")
    if foreign:
        report.problems += [f"foreign key: {row[0]} row {row[1]} refers to a missing {row[2]} row"
                            for row in foreign[:100]]
        report.hint = report.hint or DAMAGE_HINT.format(path=path)
    elif foreign is not None:
        report.notes.append("foreign keys ok")
    if version_row is None or tables_rows is None:
        return
    version, tables = version_row[0][0], {row[0] for row in tables_rows}
    if (tables and not REQUIRED_TABLES <= tables) or (version and not tables):
        problem = _not_ours(path, tables, version)
        report.problems.append(problem.message)
        report.hint = report.hint or problem.hint
        return
    if version > SCHEMA_VERSION:
        problem = too_new(path, version)
        report.problems.append(problem.message)
        report.hint = report.hint or problem.hint
    elif version == 0:
        report.notes.append(f"no schema version stored (from before versions): read as version {SCHEMA_VERSION}"
                            ", stamped at the next write")
    elif version < SCHEMA_VERSION:
        report.problems.append(f"schema version {version} is older than this clusterbench's {SCHEMA_VERSION}")
        report.hint = report.hint or f"upgrade it (a backup first is wise): clusterbench --db {path} db migrate"
    else:
        report.notes.append(f"schema version {version} (this clusterbench: {SCHEMA_VERSION})")
    counts = ask("counting runs", "SELECT (SELECT COUNT(*) FROM runs), (SELECT COUNT(*) FROM metrics)")
    if counts:
        report.notes.append(f"{counts[0][0]} runs, {counts[0][1]} metric values")
    if "artifacts" in tables:
        _check_outputs(conn, ask, report, path, "blobs" in tables, "import_files" in tables)


MAX_REPORTED = 100  # problems of one kind listed; the rest counted


def _base_of(conn: sqlite3.Connection, sha256: str | None) -> bytes | None:
    """The original bytes of the base blob a 'zlib+base' blob needs, None when missing or damaged."""
    row = conn.execute("SELECT codec, content, size FROM blobs WHERE sha256=?", (sha256,)).fetchone() \
        if sha256 else None
    try:
        return unpack(row[0], row[1], row[2], str(sha256)) if row is not None else None
    except BlobDamaged:
        return None


def _check_outputs(conn: sqlite3.Connection, ask: Callable, report: CheckReport, path: Path, blobs: bool,
                   files: bool = False) -> None:
    """Every stored raw output decodes to the size and SHA-256 recorded when it was stored; every
    artifact has its bytes (or was too large to keep); blobs nothing refers to are counted."""
    damaged: list[str] = []
    checked = 0
    inline = "SELECT run_id, name, sha256, size, content FROM artifacts WHERE content IS NOT NULL"
    queries = [("reading the inline outputs", inline)]
    if blobs:
        queries.append(("reading the stored outputs", "SELECT sha256, size, codec, content, "
                        + ("base" if files else "NULL") + " FROM blobs"))
    for what, sql in queries:
        try:
            cursor = conn.execute(sql)
            for row in cursor:
                checked += 1
                if what == "reading the inline outputs":
                    label, codec, content, size, digest = (f"output {row[1]!r} of run {row[0]}", "raw", row[4],
                                                           row[3], row[2])
                else:
                    label, codec, content, size, digest = f"blob {str(row[0])[:12]}", row[2], row[3], row[1], row[0]
                try:
                    unpack(codec, content, size, digest, _base_of(conn, row[4]) if codec == DELTA_CODEC else None)
                except BlobDamaged as exc:
                    damaged.append(f"{label}: {exc}")
        except sqlite3.DatabaseError as exc:
            report.problems.append(f"{what} failed: {exc}")
            report.hint = DAMAGE_HINT.format(path=path)
            return
    report.problems += [f"raw output damaged: {d}" for d in damaged[:MAX_REPORTED]]
    if len(damaged) > MAX_REPORTED:
        report.problems.append(f"... and {len(damaged) - MAX_REPORTED} more damaged raw outputs")
    if blobs:
        missing = ask("looking for outputs without their bytes",
                      "SELECT a.run_id, a.name FROM artifacts a LEFT JOIN blobs b ON b.sha256 = a.sha256"
                      f" WHERE b.sha256 IS NULL AND a.content IS NULL LIMIT {MAX_REPORTED}") or []
        if files:  # an imported file's output, named by its row for all of its results
            missing += ask("looking for imported files without their bytes",
                           "SELECT 'the runs of ' || f.sha256, f.name FROM import_files f LEFT JOIN blobs b"
                           f" ON b.sha256 = f.sha256 WHERE b.sha256 IS NULL LIMIT {MAX_REPORTED}") or []
        report.problems += [f"raw output {row[1]!r} of run {row[0]}: its blob is missing" for row in missing]
        referenced = " AND NOT EXISTS (SELECT 1 FROM import_files f WHERE f.sha256 = b.sha256)" if files else ""
        unused = ask("counting unreferenced blobs", "SELECT COUNT(*) FROM blobs b WHERE NOT EXISTS"
                     f" (SELECT 1 FROM artifacts a WHERE a.sha256 = b.sha256){referenced}")
        if unused and unused[0][0]:
            report.notes.append(f"{unused[0][0]} stored outputs no run refers to (space only, harmless)")
        damaged += [str(row) for row in missing]
    if damaged:
        report.hint = report.hint or DAMAGE_HINT.format(path=path)
    else:
        report.notes.append(f"{checked} stored raw outputs match their SHA-256")
