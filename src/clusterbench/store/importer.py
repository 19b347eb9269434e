"""Import old benchmark output files: recognise them by content, store every result as a run.

Years of `HPL.out.8_node_52416_168_2_16.blis_serial` files are the only record of many
studies. Each file is recognised by what it contains (not its name), parsed with the same
parsers as live runs, and every result becomes one run: each HPL T/V line, each IMB benchmark
section, one HPCC/HPCG/OSU/STREAM report. Which benchmark recognises a file, and how it splits
it into results, is the benchmark's own declaration (its `OutputFormat`s, asked through the
registry), so a benchmark added to the registry is importable too. The parameters the output
itself states (N, NB, P, Q, variant, ranks, threads, message sizes) go into the run's
parameters; a batch job's wrapper around the output (an LSF job report, Platform MPI's `-prot`
lines, echoed Slurm/PBS variables: `jobreport`) adds the hosts and the network; a file-name
pattern (`filenames`) can add what only the name says (node count, BLAS), and `--tag` adds
the rest. BLAS and interconnect names are stored canonical, with the spelling as written kept.

Re-importing is harmless, and it is how a wrong reading is corrected: each result carries a hash of
the file's bytes and its position in the file, so a result already stored is never stored twice (its
run id stays the same), but what the import itself adds is brought up to date (`_update_stored`): the
fields read from the name when a `--name-pattern` is given (the output still wins over its name), the
`--tag`s (added or replaced, never removed), the validity that depends on them (the `--rpeak-node`
bound with the new node count), and the date when the file now dates it better. The report counts the
results that changed.

A result is dated by its file: the start its output states (HPL, IMB, HPCC's `Current time`), else a
date in its file name (HPCG's report `HPCG-Benchmark_3.1_2017-03-27_15-44-28.txt`), else the file's
modification time, never the import time; `facts.dated_by` says which ("file", "file name", "file time").
A file whose name does not fit `--name-pattern` is counted and named in the report (`name_mismatch`);
`refuse_name_mismatches` (the CLI's `--strict`) refuses such an import before storing anything.

Each file is all or nothing (a savepoint; files are committed FILES_PER_COMMIT at a time, at least
every COMMIT_SECONDS, and those done are kept when a later one fails). A file that cannot be used
(unreadable, not a regular file, empty, binary, too large, with more results than a file can sensibly
hold, a number its parser cannot read, a parse that runs past its time budget) is skipped with its reason and its
neighbours are stored; the report lists the skipped files. A figure that cannot be true (not
finite, an impossible HPL time or rate, above 10x a given Rpeak) is stored as an *invalid*
result with the reason, never as a valid one.
"""

from __future__ import annotations

import errno
import glob
import hashlib
import json
import os
import re
import signal
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

from clusterbench.bench import registry
from clusterbench.bench.canonical import canonical_blas, canonical_interconnect
from clusterbench.bench.declare import OutputFormat, Result
from clusterbench.bench.metrics import TooManyResults
from clusterbench.errors import EnvironmentProblem, UserInputError
from clusterbench.store.curation import check_tag_key, check_tag_value
from clusterbench.store.db import Store
from clusterbench.store.encoding import _json
from clusterbench.store.filenames import NameFields, NamePattern, compile_name_pattern, time_in_name
from clusterbench.store.jobreport import JobInfo, parse_job
from clusterbench.store.opening import explain
from clusterbench.store.records import ImportedRun, RunRecord

# Bounds on what one file may make the importer read, build and store (a file is input from anyone).
MAX_FILE_BYTES = 64 * 1024 * 1024  # larger files are skipped: no benchmark output is this big
MAX_RESULTS_PER_FILE = 10_000  # runs one file may become (an HPL sweep of 20 N x 20 NB x 20 grids is 8,000)
MAX_METRICS_PER_FILE = 200_000  # metric rows one file may add (an OSU table of 10^6 rows is not an output)
# The store keeps each distinct file once (content-addressed, compressed), whatever number of runs
# come from it: the raw bytes one file adds are its size, bounded here (MAX_FILE_BYTES is below it).
MAX_COPY_BYTES = 1024 * 1024 * 1024
MAX_PARSE_SECONDS = 30  # the time recognising and parsing one file may take
MAX_NAMES_LISTED = 10  # file names a refusal or a summary lists before "and N more"
# Files stored per commit (each file a savepoint: all of it or nothing), and at least one commit this often.
FILES_PER_COMMIT = 200
COMMIT_SECONDS = 1.0

# How a result's date was obtained, best first: stated in the output, in its file name, the file's time.
DATED_BY_RANK = {"file": 3, "file name": 2, "file time": 1}
# The facts that come from the file name (rewritten when a re-import gives a --name-pattern).
NAME_FACTS = ("from_file_name", "file_name_conflicts", "file_name_problems", "as_written")

_COMPRESSED = ((b"\x1f\x8b", "gzip"), (b"\xfd7zXZ\x00", "xz"), (b"BZh", "bzip2"), (b"PK\x03\x04", "zip"),
               (b"\x28\xb5\x2f\xfd", "zstd"))


@dataclass
class FileReport:
    path: str  # as found, printable (bytes that are not UTF-8 shown as \\xNN)
    kind: str | None
    stored: int = 0
    duplicates: int = 0
    retagged: int = 0  # runs already stored that this import's --tag changed
    updated: int = 0  # runs already stored that this import changed (name fields, tags, validity, date)
    changed: dict[str, int] = field(default_factory=dict)  # what changed in them: field -> runs
    name_mismatch: bool = False  # an output whose name does not fit --name-pattern: nothing read from it
    invalid: int = 0
    note: str | None = None  # why nothing was stored from a file that is fine (not an output, a log)
    skipped: str | None = None  # why a bad file was skipped: nothing of it is stored
    invalid_reasons: list[str] = field(default_factory=list)  # why its results stored as invalid are (distinct)

    def as_dict(self) -> dict:
        return {"file": self.path, "kind": self.kind, "stored": self.stored, "already_stored": self.duplicates,
                "retagged": self.retagged, "updated": self.updated, "unchanged": self.duplicates - self.updated,
                "changed": self.changed, "name_mismatch": self.name_mismatch,
                "invalid": self.invalid, "invalid_reasons": self.invalid_reasons,
                "note": self.note, "skipped": self.skipped}


@dataclass
class ImportReport:
    files: list[FileReport] = field(default_factory=list)

    def total(self, attr: str) -> int:
        return sum(getattr(f, attr) for f in self.files)

    @property
    def skipped(self) -> list[FileReport]:
        """The bad files, each with its reason."""
        return [f for f in self.files if f.skipped]

    @property
    def name_mismatches(self) -> list[str]:
        """The outputs whose file name does not fit --name-pattern (their results hold nothing from it)."""
        return [f.path for f in self.files if f.name_mismatch]

    def changed(self) -> dict[str, int]:
        """What this import changed in results stored before: field -> how many results."""
        out: dict[str, int] = {}
        for f in self.files:
            for key, count in f.changed.items():
                out[key] = out.get(key, 0) + count
        return out

    @property
    def imported(self) -> int:
        """Files whose results are in the store now (stored by this import or an earlier one)."""
        return sum(1 for f in self.files if f.stored or f.duplicates)


class Skipped(Exception):
    """This file cannot be imported: the reason is the message."""


class _ParseTimeout(Exception):
    pass


# ---------------------------------------------------------------- recognising and splitting

def parse_file(text: str, formats: list[OutputFormat] | None = None) -> tuple[OutputFormat | None, list[Result]]:
    """The format a benchmark recognises this text as (None: none does), and the results it splits it into.
    `formats`: the registry's, asked once by an import of many files (the registry sorts them on every call)."""
    if formats is None:
        formats = registry.output_formats()
    fmt = next((f for f in formats if f.recognise(text)), None)
    if fmt is None or fmt.split is None:
        return fmt, []
    return fmt, fmt.split(text, MAX_RESULTS_PER_FILE)


# ---------------------------------------------------------------- file names and paths

def printable(text: str) -> str:
    """A file name as text the store and the terminal accept: bytes that are not UTF-8 (which
    Python keeps as lone surrogates) become \\xNN escapes, so such a name neither crashes nor lies."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def expand_paths(paths: Iterable[str]) -> list[Path]:
    """Files, folders (recursively) and globs; each file once, in a stable order.

    Everything in a folder that is not a folder is listed, a dangling symbolic link or a FIFO
    too, so that the import names it as skipped instead of silently passing it over (hidden
    names are left out). A path that does not exist at all is bad input.
    """
    found: dict[str, Path] = {}
    real = RealPaths()
    for raw in paths:
        matches = glob.glob(raw, recursive=True) if glob.has_magic(raw) else [raw]
        if not matches:
            raise UserInputError(f"nothing matches {printable(raw)!r}")
        for m in matches:
            p = Path(m)
            if p.is_dir():
                for sub in sorted(p.rglob("*")):
                    if not sub.name.startswith(".") and not sub.is_dir():
                        found.setdefault(real(sub), sub)
            elif os.path.lexists(p):
                found.setdefault(real(p), p)
            else:
                raise UserInputError(f"no such file or folder: {printable(raw)}")
    return list(found.values())


# ---------------------------------------------------------------- reading

def read_output(path: Path) -> tuple[bytes, os.stat_result]:
    """The bytes of one regular file, at most MAX_FILE_BYTES; `Skipped` with the reason otherwise.

    Opened non-blocking, so a FIFO that slipped in cannot hang the import, and checked again
    on the open descriptor.
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        raise Skipped(_unreadable(path, exc)) from None
    if not stat.S_ISREG(st.st_mode):
        raise Skipped(f"not a regular file ({_file_type(st.st_mode)})")
    if st.st_size > MAX_FILE_BYTES:
        raise Skipped(f"larger than {MAX_FILE_BYTES >> 20} MiB ({st.st_size:,} bytes): not a benchmark output")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise Skipped(_unreadable(path, exc)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Skipped(f"not a regular file ({_file_type(st.st_mode)})")
        data = _read_all(fd, st.st_size)
    except OSError as exc:
        raise Skipped(_unreadable(path, exc)) from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise Skipped(f"larger than {MAX_FILE_BYTES >> 20} MiB (it grew while being read)")
    if not data.strip():
        raise Skipped(f"empty file ({len(data)} bytes{' of white space' if data else ''})")
    for magic, name in _COMPRESSED:
        if data.startswith(magic):
            raise Skipped(f"compressed ({name}): decompress it first")
    nul = data.rstrip(b"\0").find(b"\0", 0, 65536)  # trailing NULs: a crash left a hole; text before it is fine
    if nul != -1:
        raise Skipped(f"binary data (a NUL byte at offset {nul}), not a text benchmark output")
    return data, st


def _read_all(fd: int, size: int) -> bytes:
    """The bytes of an open file up to MAX_FILE_BYTES + 1 (one more: it is too large). Asks for the size
    it has, plus one byte to see it end: a read of MAX_FILE_BYTES + 1 at once allocates 64 MiB for every
    file (a tenth of an import's time); a file that grows meanwhile is read on, in bounded pieces."""
    parts, total, ask = [], 0, min(size, MAX_FILE_BYTES) + 1
    while total <= MAX_FILE_BYTES:
        chunk = os.read(fd, ask)
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
        ask = min(MAX_FILE_BYTES + 1 - total, 1 << 20)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _unreadable(path: Path, exc: OSError) -> str:
    what = exc.strerror or str(exc)
    if exc.errno == errno.ELOOP:
        return f"unreadable: a symbolic link loop ({what})"
    if os.path.islink(path) and not os.path.exists(path):
        try:
            target = printable(os.readlink(path))
        except OSError:
            target = "?"
        return f"unreadable: a symbolic link to {target!r}, which does not resolve ({what})"
    return f"unreadable: {what}"


def _file_type(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a plain file"


def _expired(signum, frame):
    raise _ParseTimeout


@contextmanager
def _time_budget(seconds: float) -> Iterator[None]:
    """Raise _ParseTimeout in the main thread after `seconds` (regex matching is interruptible).
    Inside `_alarm_handled` (an import of many files) the handler is in place: only the timer is set."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return
    with _alarm_handled():
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)


@contextmanager
def _alarm_handled() -> Iterator[None]:
    """SIGALRM raises _ParseTimeout meanwhile (in the main thread; elsewhere nothing changes), the
    handler before restored after."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer") \
            or signal.getsignal(signal.SIGALRM) is _expired:
        yield
        return
    previous = signal.signal(signal.SIGALRM, _expired)
    try:
        yield
    finally:
        signal.signal(signal.SIGALRM, previous)


def parse_bounded(text: str, formats: list[OutputFormat] | None = None
                  ) -> tuple[OutputFormat | None, list[Result], JobInfo | None]:
    """`parse_file` and `parse_job` within MAX_PARSE_SECONDS; any failure becomes `Skipped` with
    where and why."""
    try:
        with _time_budget(MAX_PARSE_SECONDS):
            fmt, results = parse_file(text, formats)
            return fmt, results, _job_around(text) if results else None
    except _ParseTimeout:
        raise Skipped(f"parsing took longer than {MAX_PARSE_SECONDS} s (pathological content?)") from None
    except TooManyResults as exc:
        raise Skipped(str(exc)) from None
    except (ValueError, ArithmeticError) as exc:  # a number the parser cannot read: '1.2.3', 10^5000 digits
        raise Skipped(f"unparsable number{_line_of(text, exc)}: {_short_message(exc)}") from None
    except RecursionError:
        raise Skipped("the parser gave up: nesting too deep") from None
    except MemoryError:
        raise Skipped("the parser ran out of memory on this file") from None
    except Exception as exc:  # a parser bug must not lose the neighbours: name it, skip the file
        raise Skipped(f"the parser failed ({type(exc).__name__}: {_short_message(exc)})") from None


def _job_around(text: str) -> JobInfo | None:
    """The batch job around an output; a fault in reading it is recorded, and the results, which
    do not depend on it, are kept."""
    try:
        return parse_job(text)
    except _ParseTimeout:
        raise
    except (ValueError, ArithmeticError, RecursionError, MemoryError, LookupError, TypeError) as exc:
        return JobInfo(problems=[f"the job around the output could not be read ({type(exc).__name__}: "
                                 f"{_short_message(exc)})"])


def _short_message(exc: BaseException) -> str:
    text = printable(str(exc))
    return text if len(text) <= 200 else text[:200] + "..."


def _line_of(text: str, exc: BaseException) -> str:
    """' (line 47)' for the first line holding the value a ValueError quotes, else ''."""
    m = re.search(r"'([^']{1,200})'\s*$", str(exc))
    if not m:
        return ""
    at = text.find(m.group(1))
    return f" (line {text.count(chr(10), 0, at) + 1})" if at != -1 else ""


# ---------------------------------------------------------------- storing

def import_paths(store: Store, paths: Iterable[str], tags: dict | None = None, name_pattern: str | None = None,
                 campaign: str | None = None, on_file: Callable[[FileReport], None] | None = None,
                 rpeak_node_gflops: float | None = None, refuse_name_mismatches: bool = False) -> ImportReport:
    return import_files(store, expand_paths(paths), tags, name_pattern, campaign, on_file, rpeak_node_gflops,
                        refuse_name_mismatches)


def import_files(store: Store, files: Iterable[Path], tags: dict | None = None, name_pattern: str | None = None,
                 campaign: str | None = None, on_file: Callable[[FileReport], None] | None = None,
                 rpeak_node_gflops: float | None = None, refuse_name_mismatches: bool = False) -> ImportReport:
    """Import each file in its own transaction: a bad file is skipped (with its reason in the
    report), the others are stored. A database that fails (locked, full, corrupted) stops the
    import with `EnvironmentProblem`; the files before it stay stored.

    With `refuse_name_mismatches` and a pattern, an output file whose name does not fit the pattern
    is a `UserInputError` raised before anything is stored (the names are listed, bounded)."""
    pattern = compile_name_pattern(printable(name_pattern)) if name_pattern else None
    tags = {printable(str(k)): printable(v) if isinstance(v, str) else v for k, v in (tags or {}).items()}
    tags = {check_tag_key(k): check_tag_value(k, v) for k, v in tags.items()}  # bad ones before any file
    campaign = printable(campaign) if campaign else None
    report = ImportReport()
    registry.registered()  # benchmark plugins load here, not within the first file's parse time budget
    files = list(files)
    if pattern and refuse_name_mismatches:
        refuse_mismatching_names(files, pattern)
    if not files:
        return report
    try:
        # files committed together (each file still all or nothing: a savepoint), not one commit each: a
        # commit writes every page the file touched (rows, five indexes), most of an import's time
        real_path = RealPaths()
        formats = registry.output_formats()
        with _alarm_handled(), store.batch(every=FILES_PER_COMMIT, seconds=COMMIT_SECONDS, keep=True):
            for path in files:
                rep = import_file(store, path, tags, pattern, campaign, rpeak_node_gflops, real_path, formats)
                report.files.append(rep)
                if on_file:
                    on_file(rep)
    except sqlite3.DatabaseError as exc:  # the batch could not begin or end: locked, read-only, full
        problem = explain(exc, store.path) or EnvironmentProblem(f"the database failed: {exc}", where=str(store.path))
        raise problem from exc
    return report


def mismatching_outputs(files: Iterable[Path], pattern: NamePattern) -> list[str]:
    """The benchmark outputs among `files` whose name does not fit `pattern`. Only those names are
    read: a file that is not an output (a README, a log), or that cannot be read, is no mismatch."""
    found = []
    for path in files:
        if pattern.split(printable(path.name)) is not None:
            continue
        try:
            data, _ = read_output(path)
            fmt, results, _ = parse_bounded(data.decode("utf-8", errors="replace"))
        except Skipped:
            continue
        if fmt is not None and results:
            found.append(printable(str(path)))
    return found


def refuse_mismatching_names(files: Iterable[Path], pattern: NamePattern) -> None:
    """`UserInputError` naming the outputs whose name does not fit `pattern` (nothing is stored yet)."""
    if bad := mismatching_outputs(files, pattern):
        raise UserInputError(f"--strict: {len(bad)} output file(s) do not match --name-pattern {pattern.text!r}, "
                             f"so nothing was imported: {bounded_list(bad)}",
                             hint="correct --name-pattern (or rename the files), or import without --strict: the "
                                  "files are then stored with what their content states and listed as not matching")


def bounded_list(items: list[str], most: int = MAX_NAMES_LISTED) -> str:
    """'a, b, c' or 'a, b, c and 7 more'."""
    shown = ", ".join(items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")


@dataclass
class _Read:
    """A file read and parsed, before it is stored."""

    data: bytes
    mtime: float
    fmt: int | None  # its format's index in the import's formats
    results: list[Result]
    job: JobInfo | None
    digest: str | None  # the SHA-256 of `data` when it holds results


def _read_file(path: Path, formats: list[OutputFormat]) -> _Read | str:
    """The file read and parsed, or why it is skipped."""
    try:
        data, st = read_output(path)
        fmt, results, job = parse_bounded(data.decode("utf-8", errors="replace"), formats)
    except Skipped as exc:
        return str(exc)
    index = None if fmt is None else next(i for i, f in enumerate(formats) if f is fmt)
    if not results:  # nothing of it is stored: its bytes are not kept
        return _Read(b"", st.st_mtime, index, results, job, None)
    return _Read(data, st.st_mtime, index, results, job, hashlib.sha256(data).hexdigest())


def import_file(store: Store, path: Path, tags: dict, pattern: NamePattern | None, campaign: str | None,
                rpeak_node_gflops: float | None = None, real_path: Callable[[Path], str] = os.path.realpath,
                formats: list[OutputFormat] | None = None) -> FileReport:
    """Store the results of one file (`formats`: the registry's, asked once by the import)."""
    shown = printable(str(path))
    formats = formats if formats is not None else registry.output_formats()
    read = _read_file(path, formats)
    if isinstance(read, str):
        return FileReport(shown, None, skipped=read)
    if read.fmt is None:
        return FileReport(shown, None, note=("not a recognised benchmark output ("
                                             + ", ".join(registry.recognised_titles()) + ")"))
    fmt, results, data, digest = formats[read.fmt], read.results, read.data, read.digest
    kind = fmt.kind
    rep = FileReport(shown, kind)
    if not results:
        rep.note = fmt.note or "no results found in the file"
        return rep
    if problem := _too_much(results, len(data)):
        rep.skipped = problem
        return rep
    name = printable(path.name)
    source = printable(real_path(path))
    from_name = pattern.read(name) if pattern else NameFields()
    rep.name_mismatch = pattern is not None and pattern.split(name) is None
    mtime = datetime.fromtimestamp(read.mtime, UTC).isoformat()
    reading = _Reading(from_name, pattern is not None, read.job, tags, campaign, source, name, mtime,
                       rpeak_node_gflops)
    try:
        with _all_or_nothing(store):
            priors = store.imported(digest)
            new: list[tuple[ImportedRun, Result]] = []
            for index, result in enumerate(results):
                run, changed = _store_result(store, fmt, result, index, digest, reading, priors)
                if run is not None:
                    new.append((run, result))
                    continue
                rep.duplicates += 1
                if changed:
                    rep.updated += 1
                    rep.retagged += 1 if "tags" in changed else 0
                    for key in changed:
                        rep.changed[key] = rep.changed.get(key, 0) + 1
            stored = store.add_imported_runs([run for run, _ in new], name, data, digest,
                                             set(priors)) if new else []
            rep.stored += len(stored)
            rep.duplicates += len(new) - len(stored)
            kept = {id(run) for run in stored}
            for run, result in new:
                if id(run) in kept and not result.outcome.valid:
                    rep.invalid += 1
                    for reason in result.outcome.reasons:
                        if reason not in rep.invalid_reasons and len(rep.invalid_reasons) < 10:
                            rep.invalid_reasons.append(reason)
    except (sqlite3.IntegrityError, sqlite3.DataError, sqlite3.ProgrammingError, sqlite3.InterfaceError,
            ValueError, OverflowError, TypeError) as exc:  # this file's values, not the database, are at fault
        return FileReport(shown, kind, skipped=f"the database refused a value of it ({_short_message(exc)})")
    except sqlite3.DatabaseError as exc:  # locked, full, read-only, corrupted: every next file would fail too
        problem = explain(exc, store.path) or EnvironmentProblem(f"the database failed: {exc}", where=str(store.path))
        problem.hint = (f"{problem.hint}; " if problem.hint else "") + (
            f"the files before {shown} are stored: once fixed, run the same import again (it stores only what "
            "is missing)")
        raise problem from exc
    return rep


@contextmanager
def _all_or_nothing(store: Store) -> Iterator[None]:
    """One file's writes as one unit: a savepoint of the import's batch, or a transaction of its own
    (the updates and inserts inside are savepoints of it, so none commits alone)."""
    if store.in_batch():
        with store.transaction():
            yield
        return
    with store.batch(), store.transaction():
        yield


class RealPaths:
    """os.path.realpath of many files in few folders: a folder is resolved once (realpath asks the
    file system about every component of every path: a tenth of an import's time), and a file that
    is a symbolic link itself is resolved whole. Lives for one import (a folder may change later)."""

    def __init__(self) -> None:
        self.folders: dict[str, str] = {}

    def __call__(self, path: Path | str) -> str:
        path = os.fspath(path)
        if os.path.islink(path):
            return os.path.realpath(path)
        folder, name = os.path.split(path)
        if name in ("", ".", ".."):
            return os.path.realpath(path)
        real = self.folders.get(folder)
        if real is None:
            real = self.folders[folder] = os.path.realpath(folder)
        return os.path.join(real, name)


def _too_much(results: list[Result], size: int) -> str | None:
    if len(results) > MAX_RESULTS_PER_FILE:
        return f"{len(results):,} results in one file, more than the limit of {MAX_RESULTS_PER_FILE:,}"
    metrics = sum(len(r.outcome.metrics) for r in results)
    if metrics > MAX_METRICS_PER_FILE:
        return f"{metrics:,} metric values in one file, more than the limit of {MAX_METRICS_PER_FILE:,}"
    if size > MAX_COPY_BYTES:  # stored once, however many results it holds
        return f"{size / 2**20:,.0f} MiB to keep, more than the limit of {MAX_COPY_BYTES >> 20} MiB per file"
    return None


@dataclass
class _Reading:
    """What one import adds to every result of a file, beside the result itself."""

    from_name: NameFields
    name_given: bool  # a --name-pattern was given: the name's fields are (re)read
    job: JobInfo | None
    tags: dict
    campaign: str | None
    source: str
    name: str
    mtime: str
    rpeak_node_gflops: float | None

    @cached_property
    def workdir(self) -> str:
        """The folder of the file (its real path): an imported run's working directory."""
        return printable(os.path.dirname(self.source))

    @cached_property
    def nodes(self) -> str | None:
        """The job's hosts folded as a node set (once per file: folding costs ~0.5 ms a job)."""
        return self.job.node_list() if self.job else None

    @cached_property
    def name_time(self) -> str | None:
        """The date and time the file name holds (`time_in_name`), read once per file."""
        return time_in_name(self.name)


def _store_result(store: Store, fmt: OutputFormat, result: Result, index: int, digest: str, read: _Reading,
                  priors: dict[str, sqlite3.Row]) -> tuple[ImportedRun | None, set[str]]:
    """One result of a file: (the run to store, {}) when new; (None, what changed) when its content
    hash was stored before (`priors`: the file's stored results), in which case the stored run is
    brought up to date (`_update_stored`)."""
    content_hash = f"{digest}:{index}"
    run_id = f"import-{result.benchmark}-{hashlib.sha256(content_hash.encode()).hexdigest()[:12]}"
    prior = priors.get(content_hash)
    prior_facts = _decoded(prior["facts"]) if prior else {}
    stated, as_written = _canonical(result.params)
    stated |= _job_params(read.job)
    from_name = read.from_name
    if prior and not read.name_given:  # no pattern now: what an earlier pattern read stays as it was
        params = _decoded(prior["params"])
    else:
        params = from_name.values | stated  # what the file states wins over its name
    tags = (_decoded(prior["tags"]) | read.tags) if prior else dict(read.tags)
    rpeak = read.rpeak_node_gflops or prior_facts.get("rpeak_node_gflops")
    facts = result.outcome.facts | {"source_file": read.source, "result_index": index,
                                    "from_file_name": sorted(from_name.values), "file_mtime": read.mtime}
    if rpeak and fmt.rpeak_check:
        facts["rpeak_node_gflops"] = rpeak
        nodes, counted = _node_count(params, tags, "hosts in the job report" if read.job and read.job.hosts
                                     else "from the file name")
        if nodes is None:
            facts["rpeak_check"] = ("not made: the node count is not stated (give it with --name-pattern or "
                                    "--tag nodes=N)")
        else:
            fmt.rpeak_check(result.outcome, rpeak * nodes,
                            f"{nodes} node(s) ({counted}) x {rpeak:g} Gflop/s given with --rpeak-node")
    if read.job and (failure := read.job.failure()) and failure not in result.outcome.reasons:
        result.outcome.reasons.append(failure)  # a remark: the benchmark's own checks decide validity
    facts |= _name_facts(from_name, stated, as_written)
    started, ended, dating = _dates(result, read)
    facts |= dating
    if prior:
        return None, _update_stored(store, prior, prior_facts, params, read.tags, facts, read.name_given, result,
                                    started, ended)
    nodes = None
    if read.job:
        facts["job"] = read.job.as_facts()
        nodes = read.nodes
        if read.job.hosts and nodes is None:
            facts["job"]["node_list_problem"] = "the host names cannot be folded as a node set: see hosts"
    record = RunRecord(id=run_id, benchmark=result.benchmark, params=params, campaign=read.campaign,
                       tags=tags, source="import", content_hash=content_hash, workdir=read.workdir, nodes=nodes)
    return ImportedRun(record, result.outcome.valid, "; ".join(result.outcome.reasons) or None,
                       result.outcome.metrics, facts, started, ended, result.duration_s), set()


def _name_facts(from_name: NameFields, stated: dict, as_written: dict) -> dict:
    """The facts read from the file name: conflicts with what the output states, problems, spellings.
    Facts repeat nothing the row holds already (17k results of one study): the name's values are in
    params (or in the conflicts), its keys are enough."""
    out: dict = {}
    conflicts = {k: v for k, v in from_name.values.items() if k in stated and str(stated[k]) != str(v)}
    if isinstance(grids := from_name.values.get("grids"), list) and "p" in stated and "q" in stated \
            and f"{stated['p']}x{stated['q']}" not in grids:
        conflicts["grids"] = grids  # the grid this result ran is not among those the name lists
    if conflicts:
        out["file_name_conflicts"] = conflicts
    if from_name.problems:
        out["file_name_problems"] = from_name.problems
    if as_written := from_name.as_written | as_written:
        out["as_written"] = as_written
    return out


def _dates(result: Result, read: _Reading) -> tuple[str, str | None, dict]:
    """(started_at, ended_at, facts saying how): the start the output states, else a date in the file
    name (HPCG's report is named at the end of the run: that date is its end too), else the file's
    modification time; never the import time, which dates nothing."""
    started, ended = output_time_iso(result.started_at), output_time_iso(result.ended_at)
    if started:
        return started, ended, {"dated_by": "file"}
    facts: dict = {"stated_start": result.started_at}  # none stated, or unreadable (history reads this)
    if named := read.name_time:
        if result.outcome.facts.get("file_name_time_is") == "end":
            ended = ended or named
        return named, ended, {"dated_by": "file name", "name_time": named}
    return read.mtime, ended, facts | {"dated_by": "file time"}


def _update_stored(store: Store, prior: sqlite3.Row, prior_facts: dict, params: dict, tags: dict, facts: dict,
                   name_given: bool, result: Result, started: str, ended: str | None) -> set[str]:
    """Bring a stored result up to date with this import (`tags`: those given now, added); what changed
    ('params', 'tags', 'validity', 'date', 'facts'). Its run id, metric values and everything else this
    import does not read stay as they were."""
    run_id, changed = prior["id"], set()
    new_facts = dict(prior_facts)
    if name_given:
        for key in NAME_FACTS:
            new_facts.pop(key, None)
        new_facts |= {k: facts[k] for k in NAME_FACTS if k in facts}
        if params != _decoded(prior["params"]):
            changed.add("params")
    for key in ("rpeak_node_gflops", "rpeak_check"):
        new_facts.pop(key, None)
        if key in facts:
            new_facts[key] = facts[key]
    dates = None
    if DATED_BY_RANK.get(facts.get("dated_by"), 0) > DATED_BY_RANK.get(prior_facts.get("dated_by"), 0):
        for key in ("dated_by", "stated_start", "name_time", "file_mtime"):
            new_facts.pop(key, None)
            if key in facts:
                new_facts[key] = facts[key]
        if (started, ended or prior["ended_at"]) != (prior["started_at"], prior["ended_at"]):
            dates = (started, ended or prior["ended_at"], prior["duration_s"] or result.duration_s)
            changed.add("date")
    if tags and store.update_tags([run_id], add=tags):
        changed.add("tags")
    valid, reason = result.outcome.valid, "; ".join(result.outcome.reasons) or None
    if (int(valid), reason) != (prior["valid"], prior["reason"]):
        changed.add("validity")
    if not changed - {"tags"} and _json(new_facts, sort_keys=True, default=str) != _json(prior_facts, sort_keys=True,
                                                                                     default=str):
        changed.add("facts")
    if not changed - {"tags"}:
        return changed
    with store.transaction() as c:
        store.set_imported_facts(run_id, new_facts)
        if "params" in changed:
            c.execute("UPDATE runs SET params=? WHERE id=?",
                      (_json(params, sort_keys=True), run_id))
        if dates:
            c.execute("UPDATE runs SET started_at=?, ended_at=?, duration_s=? WHERE id=?", (*dates, run_id))
        if "validity" in changed:
            c.execute("UPDATE runs SET valid=?, reason=?, status=? WHERE id=?",
                      (int(valid), reason, "ok" if valid else "invalid", run_id))
            rows = c.execute("SELECT id, name FROM metrics WHERE run_id=? ORDER BY id", (run_id,)).fetchall()
            if [r["name"] for r in rows] == [m.name for m in result.outcome.metrics]:  # the same values, in order
                c.executemany("UPDATE metrics SET valid=? WHERE id=?",
                              [(int(m.valid), r["id"]) for r, m in zip(rows, result.outcome.metrics, strict=True)])
    return changed


def _decoded(text: str | None) -> dict:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _canonical(params: dict) -> tuple[dict, dict]:
    """The output's own parameters with BLAS and interconnect names canonical, and the spellings
    that changed. A BLAS name's leftover ('mtu_9000' of 'blis.mtu_9000') becomes 'tuning'."""
    out, written = dict(params), {}
    if isinstance(blas := params.get("blas"), str):
        out["blas"], rest = canonical_blas(blas)
        if rest and "tuning" not in out:
            out["tuning"] = rest
    if isinstance(net := params.get("interconnect"), str):
        out["interconnect"] = canonical_interconnect(net)
    for key in ("blas", "interconnect"):
        if key in params and out[key] != params[key]:
            written[key] = params[key]
    return out, written


def _job_params(job: JobInfo | None) -> dict:
    """The parameters a batch job's wrapper states: the node count and the interconnect used."""
    if job is None:
        return {}
    out: dict = {}
    if job.hosts:
        out["nodes"] = len(job.host_names)
    if job.interconnect:
        out["interconnect"] = job.interconnect
    return out


def _node_count(params: dict, tags: dict, nodes_from: str = "from the file name") -> tuple[int | None, str]:
    """Nodes a result ran on, for the Rpeak bound: stated, else an upper bound (one rank per node);
    (None, why) when nothing says it: 1 node is never assumed (the bound would be too tight)."""
    for source, key, what in ((params, "nodes", nodes_from), (tags, "nodes", "from --tag"),
                              (params, "hosts", "hosts stated"), (params, "ranks", "at most one per rank")):
        value = source.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, what
    return None, "not stated"


def output_time_iso(stamp: str | None) -> str | None:
    """'Mon Mar 27 03:50:21 2017' (HPL, IMB) -> ISO 8601, so imported runs sort with live ones.
    The usual English form is read directly (strptime costs ~50 us, paid per result on import and
    per run by `history`); anything else goes through strptime as before."""
    if not stamp:
        return None
    text = " ".join(stamp.split())
    if (m := _CTIME.fullmatch(text)) is not None:
        try:
            return datetime(int(m[6]), _MONTHS[m[1]], int(m[2]), int(m[3]), int(m[4]), int(m[5])).isoformat()
        except ValueError:
            pass  # strptime decides
    try:
        return datetime.strptime(text, "%a %b %d %H:%M:%S %Y").isoformat()
    except ValueError:
        return None


_MONTHS = {m: i + 1 for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
                                           "Nov", "Dec"))}
_CTIME = re.compile(r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
                    r"([1-9]|[0-2][0-9]|3[01]) ([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9]) ([0-9]{4})")
