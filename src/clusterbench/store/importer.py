"""Import old benchmark output files: recognise them by content, store every result as a run.

Years of `HPL.out.8_node_52416_168_2_16.blis_serial` files are the only record of many
studies. Each file is recognised by what it contains (not its name), parsed with the same
parsers as live runs, and every result becomes one run: each HPL T/V line, each IMB benchmark
section, one HPCC/HPCG/OSU/STREAM report. The parameters the output itself states (N, NB,
P, Q, variant, ranks, threads, message sizes) go into the run's parameters; a file-name
pattern can add what only the name says (node count, BLAS), and `--tag` adds the rest.

Re-importing is harmless: each result carries a hash of the file's bytes and its position in
the file, and a result already stored is skipped.
"""

from __future__ import annotations

import glob
import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from clusterbench.bench.hpcc_output import hpcc_outcome, parse_summary
from clusterbench.bench.hpcg_output import hpcg_outcome, hpcg_params, parse_hpcg
from clusterbench.bench.hpl_output import parse_hpl, result_metrics
from clusterbench.bench.imb_output import parse_imb, section_outcome
from clusterbench.bench.metrics import Outcome
from clusterbench.bench.osu_output import osu_outcome, parse_osu
from clusterbench.bench.stream_output import stream_outcome
from clusterbench.errors import UserInputError
from clusterbench.store.db import RunRecord, Store

MAX_FILE_BYTES = 64 * 1024 * 1024


@dataclass
class Result:
    """One result found in a file: what ran, with which stated parameters, and its outcome."""

    benchmark: str
    params: dict
    outcome: Outcome
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float | None = None


@dataclass
class FileReport:
    path: str
    kind: str | None
    stored: int = 0
    duplicates: int = 0
    invalid: int = 0
    note: str | None = None


@dataclass
class ImportReport:
    files: list[FileReport] = field(default_factory=list)

    def total(self, attr: str) -> int:
        return sum(getattr(f, attr) for f in self.files)


# ---------------------------------------------------------------- recognisers and splitters

def _hpl_results(text: str) -> list[Result]:
    parsed = parse_hpl(text)
    truncated = parsed.truncated
    out = []
    for r in parsed.results:
        outcome = Outcome(facts={"hpl_version": parsed.version, "threshold": parsed.threshold})
        outcome.metrics += result_metrics(r)
        if r.passed is False:
            outcome.invalidate(f"residual check FAILED ({r.residual})")
        elif r.passed is None:
            outcome.invalidate("no residual check printed for this result (truncated output?)")
        if truncated:
            outcome.reasons.append("file ends before HPL's 'Finished N tests' summary")
        params = {"n": r.n, "nb": r.nb, "p": r.p, "q": r.q, "ranks": r.p * r.q, "tv": r.tv}
        out.append(Result("hpl", params, outcome, r.start, r.end, r.time_s))
    return out


def _hpcc_results(text: str) -> list[Result]:
    outcome = hpcc_outcome(text)
    summary = parse_summary(text)
    params = {}
    for name, key in (("n", "HPL_N"), ("nb", "HPL_NB"), ("p", "HPL_nprow"), ("q", "HPL_npcol"),
                      ("ranks", "CommWorldProcs")):
        try:
            params[name] = int(float(summary[key]))
        except (KeyError, ValueError):
            pass
    return [Result("hpcc", params, outcome)]


def _imb_results(text: str) -> list[Result]:
    parsed = parse_imb(text)
    out = []
    for section in parsed.sections:
        params = {"test": section.name, "ranks": section.processes}
        if parsed.hosts is not None:
            params["hosts"] = parsed.hosts
        sizes = section.column("bytes")
        if sizes:
            params |= {"min_bytes": int(min(sizes)), "max_bytes": int(max(sizes))}
        out.append(Result("imb", params, section_outcome(parsed, section), parsed.date))
    return out


def _osu_results(text: str) -> list[Result]:
    parsed = parse_osu(text)
    sizes = [s for s, _ in parsed.rows]
    params = {"test": (parsed.test or "").lower()} | (
        {"min_bytes": min(sizes), "max_bytes": max(sizes)} if sizes else {})
    return [Result("osu", params, osu_outcome(parsed))]


def _stream_results(text: str) -> list[Result]:
    outcome = stream_outcome(text)
    params = {k: outcome.facts[k] for k in ("threads", "array_size") if outcome.facts.get(k) is not None}
    return [Result("stream", params, outcome)]


def _hpcg_results(text: str) -> list[Result]:
    outcome = hpcg_outcome(text)
    return [Result("hpcg", hpcg_params(parse_hpcg(text)), outcome)]


# (kind, recogniser, splitter), most specific first: HPCC output contains an HPL section.
KINDS: list[tuple[str, Callable[[str], bool], Callable[[str], list[Result]] | None]] = [
    ("hpcc", lambda t: "Begin of Summary section" in t or "HPC Challenge Benchmark" in t, _hpcc_results),
    ("hpcg", lambda t: "HPCG result is" in t or t.lstrip().startswith("HPCG-Benchmark"), _hpcg_results),
    ("hpcg-log", lambda t: bool(re.search(r"^Call \[\d+\] Number of Iterations", t, re.M)), None),
    ("hpl", lambda t: "HPLinpack" in t and "T/V" in t, _hpl_results),
    ("imb", lambda t: bool(re.search(r"Intel\s*\(R\)\s*MPI Benchmarks", t)), _imb_results),
    ("osu", lambda t: bool(re.search(r"^#\s*OSU MPI", t, re.M)), _osu_results),
    ("stream", lambda t: "STREAM version" in t and "Triad" in t, _stream_results),
]
SKIP_NOTES = {"hpcg-log": "HPCG log file: the results are in the HPCG-Benchmark report file"}


def parse_file(text: str) -> tuple[str | None, list[Result]]:
    for kind, test, split in KINDS:
        if test(text):
            return kind, (split(text) if split else [])
    return None, []


# ---------------------------------------------------------------- file names and paths

def name_pattern_regex(pattern: str) -> re.Pattern:
    """'HPL.out.{nodes}_node_{n}_{nb}' -> a regex with one named group per {field}."""
    parts = re.split(r"\{(\w+)\}", pattern)
    regex = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts))
    try:
        return re.compile(f"^{regex}$")
    except re.error as exc:
        raise UserInputError(f"invalid --name-pattern {pattern!r}: {exc}",
                             hint="each {field} may appear once, e.g. 'HPL.out.{nodes}_node_{n}'") from None


def fields_from_name(name: str, rx: re.Pattern | None) -> dict:
    if rx is None:
        return {}
    m = rx.match(name)
    return {k: _typed(v) for k, v in m.groupdict().items()} if m else {}


def _typed(value: str):
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def expand_paths(paths: Iterable[str]) -> list[Path]:
    """Files, folders (recursively) and globs; each file once, in a stable order."""
    found: dict[str, Path] = {}
    for raw in paths:
        matches = glob.glob(raw, recursive=True) if glob.has_magic(raw) else [raw]
        if not matches:
            raise UserInputError(f"nothing matches {raw!r}")
        for m in matches:
            p = Path(m)
            if p.is_dir():
                for sub in sorted(p.rglob("*")):
                    if sub.is_file() and not sub.name.startswith("."):
                        found.setdefault(str(sub.resolve()), sub)
            elif p.is_file():
                found.setdefault(str(p.resolve()), p)
            else:
                raise UserInputError(f"no such file or folder: {raw}")
    return list(found.values())


# ---------------------------------------------------------------- storing

def import_paths(store: Store, paths: Iterable[str], tags: dict | None = None, name_pattern: str | None = None,
                 campaign: str | None = None, on_file: Callable[[FileReport], None] | None = None) -> ImportReport:
    rx = name_pattern_regex(name_pattern) if name_pattern else None
    report = ImportReport()
    with store.batch():
        for path in expand_paths(paths):
            rep = import_file(store, path, tags or {}, rx, campaign)
            report.files.append(rep)
            if on_file:
                on_file(rep)
    return report


def import_file(store: Store, path: Path, tags: dict, rx: re.Pattern | None, campaign: str | None) -> FileReport:
    if path.stat().st_size > MAX_FILE_BYTES:
        return FileReport(str(path), None, note=f"skipped: larger than {MAX_FILE_BYTES >> 20} MiB")
    data = path.read_bytes()
    text = data.decode(errors="replace")
    kind, results = parse_file(text)
    rep = FileReport(str(path), kind)
    if kind is None:
        rep.note = "not a recognised benchmark output (HPL, HPCC, HPCG, IMB, OSU, STREAM)"
        return rep
    if not results:
        rep.note = SKIP_NOTES.get(kind, "no results found in the file")
        return rep
    digest = hashlib.sha256(data).hexdigest()
    from_name = fields_from_name(path.name, rx)
    for index, result in enumerate(results):
        content_hash = f"{digest}:{index}"
        run_id = f"import-{result.benchmark}-{hashlib.sha256(content_hash.encode()).hexdigest()[:12]}"
        stated = result.params
        params = from_name | stated  # what the output states wins over the file name
        conflicts = {k: v for k, v in from_name.items() if k in stated and str(stated[k]) != str(v)}
        facts = result.outcome.facts | {"source_file": str(path.resolve()), "result_index": index,
                                        "from_file_name": from_name, "stated_start": result.started_at,
                                        "file_mtime": datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat()}
        if conflicts:
            facts["file_name_conflicts"] = conflicts
        record = RunRecord(id=run_id, benchmark=result.benchmark, params=params, campaign=campaign,
                           tags=dict(tags), source="import", content_hash=content_hash,
                           workdir=str(path.parent.resolve()))
        stored = store.add_imported_run(
            record, result.outcome.valid, "; ".join(result.outcome.reasons) or None, result.outcome.metrics,
            facts, path.name, data, _iso(result.started_at), _iso(result.ended_at), result.duration_s)
        if stored:
            rep.stored += 1
            rep.invalid += 0 if result.outcome.valid else 1
        else:
            rep.duplicates += 1
    return rep


def _iso(stamp: str | None) -> str | None:
    """'Mon Mar 27 03:50:21 2017' (HPL, IMB) -> ISO 8601, so imported runs sort with live ones."""
    if not stamp:
        return None
    try:
        return datetime.strptime(" ".join(stamp.split()), "%a %b %d %H:%M:%S %Y").isoformat()
    except ValueError:
        return None
