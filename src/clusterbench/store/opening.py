"""Opening a database safely: what is refused before SQLite touches a file, and what an SQLite error means.

A path that is a folder, a device or a file that is not a clusterbench database is refused before
SQLite touches it (so such a file is never modified); a truncated, corrupted, unreadable, read-only
or too-new database is refused with what to do next. `Store` opens through these checks and
`db check` (doctor) reads through them.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from clusterbench.errors import EnvironmentProblem, UserInputError
from clusterbench.store.curation import NOTES_TYPES
from clusterbench.store.schema import REQUIRED_TABLES, SCHEMA_VERSION

SQLITE_MAGIC = b"SQLite format 3\x00"
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
