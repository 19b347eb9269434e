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

Re-importing is harmless: each result carries a hash of the file's bytes and its position in
the file, and a result already stored is skipped; with `--tag`, the stored runs get the tags.

Each file is its own transaction. A file that cannot be used (unreadable, not a regular file,
empty, binary, too large, with more results than a file can sensibly hold, a number its parser
cannot read, a parse that runs past its time budget) is skipped with its reason and its
neighbours are stored; the report lists the skipped files. A figure that cannot be true (not
finite, an impossible HPL time or rate, above 10x a given Rpeak) is stored as an *invalid*
result with the reason, never as a valid one.
"""

from __future__ import annotations

import errno
import glob
import hashlib
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
from pathlib import Path

from clusterbench.bench import registry
from clusterbench.bench.canonical import canonical_blas, canonical_interconnect
from clusterbench.bench.declare import OutputFormat, Result
from clusterbench.bench.metrics import TooManyResults
from clusterbench.errors import EnvironmentProblem, UserInputError
from clusterbench.store.db import RunRecord, Store, check_tag_key, check_tag_value, explain
from clusterbench.store.filenames import NameFields, NamePattern, compile_name_pattern
from clusterbench.store.jobreport import JobInfo, parse_job

# Bounds on what one file may make the importer read, build and store (a file is input from anyone).
MAX_FILE_BYTES = 64 * 1024 * 1024  # larger files are skipped: no benchmark output is this big
MAX_RESULTS_PER_FILE = 10_000  # runs one file may become (an HPL sweep of 20 N x 20 NB x 20 grids is 8,000)
MAX_METRICS_PER_FILE = 200_000  # metric rows one file may add (an OSU table of 10^6 rows is not an output)
# The store keeps each distinct file once (content-addressed, compressed), whatever number of runs
# come from it: the raw bytes one file adds are its size, bounded here (MAX_FILE_BYTES is below it).
MAX_COPY_BYTES = 1024 * 1024 * 1024
MAX_PARSE_SECONDS = 30  # the time recognising and parsing one file may take

_COMPRESSED = ((b"\x1f\x8b", "gzip"), (b"\xfd7zXZ\x00", "xz"), (b"BZh", "bzip2"), (b"PK\x03\x04", "zip"),
               (b"\x28\xb5\x2f\xfd", "zstd"))


@dataclass
class FileReport:
    path: str  # as found, printable (bytes that are not UTF-8 shown as \\xNN)
    kind: str | None
    stored: int = 0
    duplicates: int = 0
    retagged: int = 0  # runs already stored that this import's --tag changed
    invalid: int = 0
    note: str | None = None  # why nothing was stored from a file that is fine (not an output, a log)
    skipped: str | None = None  # why a bad file was skipped: nothing of it is stored
    invalid_reasons: list[str] = field(default_factory=list)  # why its results stored as invalid are (distinct)

    def as_dict(self) -> dict:
        return {"file": self.path, "kind": self.kind, "stored": self.stored, "already_stored": self.duplicates,
                "retagged": self.retagged, "invalid": self.invalid, "invalid_reasons": self.invalid_reasons,
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
    def imported(self) -> int:
        """Files whose results are in the store now (stored by this import or an earlier one)."""
        return sum(1 for f in self.files if f.stored or f.duplicates)


class Skipped(Exception):
    """This file cannot be imported: the reason is the message."""


class _ParseTimeout(Exception):
    pass


# ---------------------------------------------------------------- recognising and splitting

def parse_file(text: str) -> tuple[OutputFormat | None, list[Result]]:
    """The format a benchmark recognises this text as (None: none does), and the results it splits it into."""
    fmt = registry.recognise(text)
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
    for raw in paths:
        matches = glob.glob(raw, recursive=True) if glob.has_magic(raw) else [raw]
        if not matches:
            raise UserInputError(f"nothing matches {printable(raw)!r}")
        for m in matches:
            p = Path(m)
            if p.is_dir():
                for sub in sorted(p.rglob("*")):
                    if not sub.name.startswith(".") and not sub.is_dir():
                        found.setdefault(os.path.realpath(sub), sub)
            elif os.path.lexists(p):
                found.setdefault(os.path.realpath(p), p)
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
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
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


@contextmanager
def _time_budget(seconds: float) -> Iterator[None]:
    """Raise _ParseTimeout in the main thread after `seconds` (regex matching is interruptible)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expired(signum, frame):
        raise _ParseTimeout

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def parse_bounded(text: str) -> tuple[OutputFormat | None, list[Result], JobInfo | None]:
    """`parse_file` and `parse_job` within MAX_PARSE_SECONDS; any failure becomes `Skipped` with
    where and why."""
    try:
        with _time_budget(MAX_PARSE_SECONDS):
            fmt, results = parse_file(text)
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
                 rpeak_node_gflops: float | None = None) -> ImportReport:
    return import_files(store, expand_paths(paths), tags, name_pattern, campaign, on_file, rpeak_node_gflops)


def import_files(store: Store, files: Iterable[Path], tags: dict | None = None, name_pattern: str | None = None,
                 campaign: str | None = None, on_file: Callable[[FileReport], None] | None = None,
                 rpeak_node_gflops: float | None = None) -> ImportReport:
    """Import each file in its own transaction: a bad file is skipped (with its reason in the
    report), the others are stored. A database that fails (locked, full, corrupted) stops the
    import with `EnvironmentProblem`; the files before it stay stored."""
    pattern = compile_name_pattern(printable(name_pattern)) if name_pattern else None
    tags = {printable(str(k)): printable(v) if isinstance(v, str) else v for k, v in (tags or {}).items()}
    tags = {check_tag_key(k): check_tag_value(k, v) for k, v in tags.items()}  # bad ones before any file
    campaign = printable(campaign) if campaign else None
    report = ImportReport()
    registry.registered()  # benchmark plugins load here, not within the first file's parse time budget
    for path in files:
        rep = import_file(store, path, tags, pattern, campaign, rpeak_node_gflops)
        report.files.append(rep)
        if on_file:
            on_file(rep)
    return report


def import_file(store: Store, path: Path, tags: dict, pattern: NamePattern | None, campaign: str | None,
                rpeak_node_gflops: float | None = None) -> FileReport:
    shown = printable(str(path))
    try:
        data, st = read_output(path)
        fmt, results, job = parse_bounded(data.decode("utf-8", errors="replace"))
    except Skipped as exc:
        return FileReport(shown, None, skipped=str(exc))
    if fmt is None:
        return FileReport(shown, None, note=("not a recognised benchmark output ("
                                             + ", ".join(registry.recognised_titles()) + ")"))
    kind = fmt.kind
    rep = FileReport(shown, kind)
    if not results:
        rep.note = fmt.note or "no results found in the file"
        return rep
    if problem := _too_much(results, len(data)):
        rep.skipped = problem
        return rep
    digest = hashlib.sha256(data).hexdigest()
    name = printable(path.name)
    source = printable(os.path.realpath(path))
    from_name = pattern.read(name) if pattern else NameFields()
    mtime = datetime.fromtimestamp(st.st_mtime, UTC).isoformat()
    already: list[str] = []  # the run ids of results stored before
    try:
        with store.batch(every=len(results) + 1):  # one transaction per file: all of it or nothing
            for index, result in enumerate(results):
                run_id, stored = _store_result(store, fmt, result, index, digest, from_name, job, tags, campaign,
                                               source, name, mtime, data, rpeak_node_gflops)
                rep.stored += 1 if stored else 0
                rep.duplicates += 0 if stored else 1
                if not stored:
                    already.append(run_id)
                if stored and not result.outcome.valid:
                    rep.invalid += 1
                    for reason in result.outcome.reasons:
                        if reason not in rep.invalid_reasons and len(rep.invalid_reasons) < 10:
                            rep.invalid_reasons.append(reason)
            if already and tags:
                rep.retagged = _retag(store, already, tags, rep)
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


def _retag(store: Store, run_ids: list[str], tags: dict, rep: FileReport) -> int:
    """Add --tag to the runs of a file imported before; how many runs changed."""
    update = getattr(store, "update_tags", None)
    if update is None:  # a store without it cannot retag: say so rather than do nothing silently
        rep.note = "already stored: this store cannot add --tag to stored runs"
        return 0
    return update(run_ids, add=tags)


def _too_much(results: list[Result], size: int) -> str | None:
    if len(results) > MAX_RESULTS_PER_FILE:
        return f"{len(results):,} results in one file, more than the limit of {MAX_RESULTS_PER_FILE:,}"
    metrics = sum(len(r.outcome.metrics) for r in results)
    if metrics > MAX_METRICS_PER_FILE:
        return f"{metrics:,} metric values in one file, more than the limit of {MAX_METRICS_PER_FILE:,}"
    if size > MAX_COPY_BYTES:  # stored once, however many results it holds
        return f"{size / 2**20:,.0f} MiB to keep, more than the limit of {MAX_COPY_BYTES >> 20} MiB per file"
    return None


def _store_result(store: Store, fmt: OutputFormat, result: Result, index: int, digest: str, from_name: NameFields,
                  job: JobInfo | None, tags: dict, campaign: str | None, source: str, name: str, mtime: str,
                  data: bytes, rpeak_node_gflops: float | None) -> tuple[str, bool]:
    """Store one result; (its run id, False when its content hash was stored before)."""
    content_hash = f"{digest}:{index}"
    run_id = f"import-{result.benchmark}-{hashlib.sha256(content_hash.encode()).hexdigest()[:12]}"
    stated, as_written = _canonical(result.params)
    stated |= _job_params(job)
    params = from_name.values | stated  # what the file states wins over its name
    conflicts = {k: v for k, v in from_name.values.items() if k in stated and str(stated[k]) != str(v)}
    if isinstance(grids := from_name.values.get("grids"), list) and "p" in stated and "q" in stated \
            and f"{stated['p']}x{stated['q']}" not in grids:
        conflicts["grids"] = grids  # the grid this result ran is not among those the name lists
    if rpeak_node_gflops and fmt.rpeak_check:
        nodes, counted = _node_count(params, tags, "hosts in the job report" if job and job.hosts
                                     else "from the file name")
        fmt.rpeak_check(result.outcome, rpeak_node_gflops * nodes,
                        f"{nodes} node(s) ({counted}) x {rpeak_node_gflops:g} Gflop/s given with --rpeak-node")
    if job and (failure := job.failure()) and failure not in result.outcome.reasons:
        result.outcome.reasons.append(failure)  # a remark: the benchmark's own checks decide validity
    # Facts repeat nothing the row holds already (17k results of one study): the name's values are in
    # params (or in the conflicts), its keys are enough; the stated start is the row's started_at when readable.
    facts = result.outcome.facts | {"source_file": source, "result_index": index,
                                    "from_file_name": sorted(from_name.values), "file_mtime": mtime}
    if not output_time_iso(result.started_at):  # none stated, or unreadable: the row holds the import time
        facts["stated_start"] = result.started_at
    if conflicts:
        facts["file_name_conflicts"] = conflicts
    if from_name.problems:
        facts["file_name_problems"] = from_name.problems
    if as_written := from_name.as_written | as_written:
        facts["as_written"] = as_written
    nodes = None
    if job:
        facts["job"] = job.as_facts()
        nodes = job.node_list()
        if job.hosts and nodes is None:
            facts["job"]["node_list_problem"] = "the host names cannot be folded as a node set: see hosts"
    record = RunRecord(id=run_id, benchmark=result.benchmark, params=params, campaign=campaign,
                       tags=dict(tags), source="import", content_hash=content_hash,
                       workdir=printable(os.path.dirname(source)), nodes=nodes)
    stored = store.add_imported_run(
        record, result.outcome.valid, "; ".join(result.outcome.reasons) or None, result.outcome.metrics,
        facts, name, data, output_time_iso(result.started_at), output_time_iso(result.ended_at), result.duration_s)
    return run_id, stored


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


def _node_count(params: dict, tags: dict, nodes_from: str = "from the file name") -> tuple[int, str]:
    """Nodes a result ran on, for the Rpeak bound: stated, else an upper bound (one rank per node)."""
    for source, key, what in ((params, "nodes", nodes_from), (tags, "nodes", "from --tag"),
                              (params, "hosts", "hosts stated"), (params, "ranks", "at most one per rank")):
        value = source.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, what
    return 1, "unknown, 1 assumed"


def output_time_iso(stamp: str | None) -> str | None:
    """'Mon Mar 27 03:50:21 2017' (HPL, IMB) -> ISO 8601, so imported runs sort with live ones."""
    if not stamp:
        return None
    try:
        return datetime.strptime(" ".join(stamp.split()), "%a %b %d %H:%M:%S %Y").isoformat()
    except ValueError:
        return None
