"""A user's judgement on stored runs, kept apart from what they measured: tags (`clusterbench tag`),
exclusion and notes (`exclude`, `include`, `note`: tables `curation`, `notes`) and deletion
(`db delete`), with the limits that bound what a user may write.

Every full run row carries the curation as two more columns, `excluded` and `notes`
(`curation_columns`), so the analysis sees it wherever it reads a run.
The Store inherits these methods (class Curation); they use its connection and transactions.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.errors import EnvironmentProblem, UserInputError
from clusterbench.store.encoding import _json, now_iso

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


class Curation:
    """The Store's methods on tags, exclusion, notes and deletion (see the module's docstring)."""

    conn: sqlite3.Connection
    path: Path
    runs_dir: Path
    has_blobs: bool
    has_curation: bool
    has_import_files: bool

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
        import shutil  # here: with bz2 and lzma, ~5 ms of every command that opens the store

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

    def curation_columns(self, table: str = "runs") -> str:
        """The SQL of the two columns every full run row carries, `excluded` and `notes`, for a
        query on `table` (a name or an alias of runs). Constant when nothing is curated, so a store
        without curation pays nothing per row."""
        if not self.has_curation or not self.conn.execute(
                "SELECT EXISTS (SELECT 1 FROM curation) OR EXISTS (SELECT 1 FROM notes)").fetchone()[0]:
            return _NO_CURATION_SQL
        return _EXCLUDED_SQL.format(t=table) + ", " + _NOTES_SQL.format(t=table)


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
