"""Imported results as stored: the results of one file in one transaction, the file's bytes once
(compressed against an earlier file of the same import), and what its results share stored once with
the file (`import_files`: the output they name, the facts text they have in common; see shared_facts).
The Store inherits these methods (class Imports); `store.importer` reads the files and calls them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from clusterbench.bench.metrics import Metric
from clusterbench.store.blobs import BASE_DICT_BYTES, _store_blob
from clusterbench.store.encoding import _json, now_iso
from clusterbench.store.records import ImportedRun, RunRecord
from clusterbench.store.shared_facts import encode_facts, shared_fragments

IMPORT_LAUNCHER = _json({"name": "import"})


class Imports:
    """The Store's methods that store imported results (see the module's docstring)."""

    conn: sqlite3.Connection
    has_import_files: bool
    _last_digest: tuple[bytes, str] | None
    _bases: dict[str, tuple[str, bytes]]

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
            artifacts = [(r.rec.id, artifact_name, r.facts.get("source_file"), digest, len(artifact))
                         for r in runs if shared is None or not self._shares(r, digest)
                         or (artifact_name, r.facts.get("source_file"), len(artifact)) != shared[:3]]
            if artifacts:  # as a rule none: the file's import_files row names it for all its results
                c.executemany("INSERT INTO artifacts (run_id, name, path, sha256, size) VALUES (?,?,?,?,?)",
                              artifacts)
        return runs

    def _digest(self, data: bytes) -> str:
        """SHA-256 of an artifact; the N results of one imported file pass the same bytes object N
        times, hashed once (the reference held keeps the object, so identity cannot be reused)."""
        if self._last_digest is None or self._last_digest[0] is not data:
            import hashlib  # here: OpenSSL's start costs ~5 ms of every command that only reads the store

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
