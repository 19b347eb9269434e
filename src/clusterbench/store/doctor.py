"""`clusterbench db check`: a database's header, integrity, foreign keys, schema version and the
SHA-256 of every stored raw output, read-only. Damage is reported, never repaired.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.errors import UserInputError
from clusterbench.store.blobs import DELTA_CODEC, BlobDamaged, _base_of, unpack
from clusterbench.store.opening import DAMAGE_HINT, _connect_ro, _not_ours, _writable, inspect_file, too_new
from clusterbench.store.schema import REQUIRED_TABLES, SCHEMA_VERSION


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
