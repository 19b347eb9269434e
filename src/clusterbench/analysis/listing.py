"""Stored runs as `clusterbench results` lists and exports them, and why a filter matched nothing.

An export has one record per metric value, with its run's identity, status, parameters,
flags (analysis.flags: truncated, name-conflict, excluded, ...), the reason it was excluded
and its notes, so that a spreadsheet or a script needs no join. The listing knows how many
runs matched in all (`total`), so a table that shows the newest 50 says what it leaves out.
A listing that comes back empty although runs are stored says which filter value is stored
nowhere (with the close names that are), since a typo in a campaign or metric name is the
usual cause.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterbench.analysis.flags import run_flags
from clusterbench.errors import UserInputError, suggest  # suggest: also for analysis.history
from clusterbench.store.curation import decode_notes
from clusterbench.store.db import Store
from clusterbench.store.queries import decoded_run

if TYPE_CHECKING:  # selection terms pull in analysis.identity (pandas): imported only when a listing selects
    from clusterbench.analysis.select import Selection


def as_bool(value) -> bool | None:
    """A stored 0/1 flag; None (not judged, e.g. a run still running) stays None."""
    return None if value is None else bool(value)


@dataclass
class Listing:
    runs: list[sqlite3.Row]  # newest first
    records: list[dict]  # one per metric value of those runs (only `metric`'s when given)
    total: int = 0  # runs that match in all: more than len(runs) when `limit` cut the list
    # no run matches although runs are stored, and that is the answer (analysis.select.empty_answer): saying so
    empty_note: str | None = None

    @property
    def shown_note(self) -> str | None:
        """'50 of 2,345 runs shown; --limit 0 for all' when the limit hid runs, else None."""
        if self.total <= len(self.runs):
            return None
        return f"{len(self.runs):,} of {self.total:,} runs shown; --limit 0 for all"


def list_runs(store: Store, benchmark: str | None = None, campaign: str | None = None, status: str | None = None,
              metric: str | None = None, limit: int | None = None, selection: Selection | None = None,
              with_records: bool = True) -> Listing:
    """The newest `limit` runs (None: all) that match the filters and the selection terms, and
    their metric values as export records (with `with_records=False` none, unless a `metric` is asked
    for: a table of runs needs none, and making them imports the benchmark registry)."""
    selecting = selection is not None and (selection.terms or selection.conditions)
    empty_note = None
    rows = store.runs(benchmark=benchmark, campaign=campaign, status=status, limit=None if selecting else limit)
    if not rows and (campaign, benchmark, status) != (None, None, None) and store.run_count():
        raise no_match(store, campaign=campaign, benchmark=benchmark, status=status)
    if selecting:
        from clusterbench.analysis.select import empty_answer, no_match_error, select_rows

        candidates, rows = rows, select_rows(store, selection, rows)
        if not rows and store.run_count() and not empty_answer(store, selection, candidates):
            raise no_match_error(store, selection)  # a typo, mostly; an empty answer (no mismatch) is no error
        if not rows and candidates:
            empty_note = f"no run matches {selection.describe()} (0 of {len(candidates):,} runs)"
        total = len(rows)
        rows = rows[:limit] if limit else rows
    elif limit and len(rows) == limit:
        total = store.count_runs(benchmark=benchmark, campaign=campaign, status=status)
    else:
        total = len(rows)
    if not with_records and not metric:
        return Listing(rows, [], total, empty_note)
    from clusterbench.analysis.applicable import applies

    records = []
    for r in rows:
        flags = row_flags(r)
        excluded, notes = curation(r)
        for m in store.metrics(r["id"]):
            if metric and m["name"] != metric:
                continue
            if not applies(r["benchmark"], m["name"], m["value"]):  # HPCC's -1: absent, as everywhere
                continue
            records.append({
                "run_id": r["id"], "benchmark": r["benchmark"], "campaign": r["campaign"],
                "status": r["status"], "run_valid": as_bool(r["valid"]), "started_at": r["started_at"],
                "params": json.loads(r["params"]), "metric": m["name"], "value": m["value"],
                "unit": m["unit"], "labels": json.loads(m["labels"]), "metric_valid": bool(m["valid"]),
                "flags": flags, "excluded": excluded, "notes": notes,
            })
    if metric and rows and not records:
        names = store.metric_names(r["id"] for r in rows)
        newest = f"the {len(rows)} newest " if limit and len(rows) == limit else ""
        raise UserInputError(f"no metric {metric!r} in {newest}runs that match",
                             hint=("--limit 0 looks at every run; " if newest else "")
                             + suggest(metric, names, "their metrics"))
    return Listing(rows, records, total, empty_note)


def row_flags(row: sqlite3.Row) -> list[str]:
    """analysis.flags.run_flags of a stored run row (its facts decoded, its exclusion read)."""
    return run_flags({"status": row["status"], "valid": row["valid"], "reason": row["reason"], "facts": _facts(row),
                      "excluded": curation(row)[0]})


def curation(row) -> tuple[str | None, list[str]]:
    """(the reason a run was excluded or None, its notes) of a run row or a decoded run; a row
    read without its curation (a column subset) has neither."""
    keys = row.keys() if hasattr(row, "keys") else ()
    excluded = row["excluded"] if "excluded" in keys else None
    return (str(excluded) if excluded is not None else None), decode_notes(row["notes"] if "notes" in keys else None)


def _facts(row: sqlite3.Row) -> dict:
    """A run row's facts, {} when the row has none or they do not decode to a mapping."""
    try:
        facts = json.loads(row["facts"] or "{}")
    except (ValueError, IndexError, KeyError, TypeError):
        return {}
    return facts if isinstance(facts, dict) else {}


def placement(row: sqlite3.Row) -> tuple[str, list[str]]:
    """The run's placement verdict (match, mismatch, partial, unobserved; '-' for a run without a
    placement, such as one process started directly) and its problems."""
    pinning = _facts(row).get("pinning")
    if not isinstance(pinning, dict):
        return "-", []
    return str(pinning.get("verdict", "-")), [str(p) for p in pinning.get("problems") or []]


def migrations(row: sqlite3.Row) -> int | None:
    """How often the scheduler moved the run's ranks and threads between CPUs (the placement
    probe's se.nr_migrations, summed); None when the run was not probed."""
    pinning = _facts(row).get("pinning")
    count = pinning.get("migrations") if isinstance(pinning, dict) else None
    return count if isinstance(count, int) else None


_VIRTUAL_DRIVERS = ("bridge", "veth", "ifb", "tun", "dummy", "vxlan", "macvlan")


def state_lines(row: sqlite3.Row) -> list[str]:
    """Each node's settings in one line: what a tuning study changes (preemption, THP, the MTU of
    the interfaces the run's routes use, SACK, rto_min, the Open MPI TCP eager limit) and the
    measured core clock. `clusterbench diff` shows everything."""
    from clusterbench.system.state import flatten

    facts = _facts(row)
    lines = []
    for host, node in (facts.get("state") or {}).items():
        if not isinstance(node, dict) or "error" in node:
            lines.append(f"{host}: state not read ({node.get('error') if isinstance(node, dict) else node})")
            continue
        flat = flatten(node)
        devs = sorted({v for k, v in flat.items() if k.startswith("route.") and k.endswith(".dev") and v != "lo"})
        if not devs:  # a one-node run uses no route: its NICs, virtual ones (bridges, veths) only if nothing else
            nics = sorted({k.split(".")[1] for k in flat if k.startswith("nic.") and k.endswith(".mtu")})
            devs = [d for d in nics if flat.get(f"nic.{d}.driver") not in _VIRTUAL_DRIVERS] or nics
        parts = [f"kernel {flat.get('kernel.release', '?')} (preempt {flat.get('kernel.preempt', '?')})",
                 f"THP {flat.get('memory.thp_enabled', '?')}"]
        governor = flat.get("cpu.governor")
        if governor:
            parts.append(f"governor {governor}")
        parts += [f"{d} MTU {flat[f'nic.{d}.mtu']}" for d in devs if f"nic.{d}.mtu" in flat]
        rto = sorted({v for k, v in flat.items() if k.startswith("route.") and k.endswith(".rto_min")} - {"default"})
        parts.append(f"tcp_sack {flat.get('tcp.sack', '?')}, rto_min {', '.join(rto) or 'default'}")
        eager = flat.get("mpi.openmpi.btl_tcp_eager_limit")
        if eager:
            parts.append(f"btl_tcp_eager_limit {eager}")
        if "measured.clock.ghz" in flat:
            parts.append(f"clock {flat['measured.clock.ghz']} GHz measured")
        lines.append(f"{host}: " + "; ".join(parts))
    return lines


def activity_lines(row: sqlite3.Row) -> list[str]:
    """What each node did during the run (system/activity.py's one-line summaries) and why the run
    is flagged, if a node throttled; empty for a run that was not sampled."""
    from clusterbench.system.activity import summary_line

    facts = _facts(row)
    lines = []
    for host, summary in (facts.get("activity") or {}).items():
        if isinstance(summary, dict):
            lines.append(f"{host}: not sampled ({summary['error']})" if "error" in summary
                         else summary_line(host, summary))
    lines += [f"THROTTLED: {reason}" for reason in facts.get("throttled") or []]
    return lines


def disturbance_lines(row: sqlite3.Row) -> list[str]:
    """Whether other work took the run's CPUs (system/disturbance.py): the evidence of a disturbed run,
    else each node's measure in one line ("quiet"), or why it was not judged."""
    facts = _facts(row)
    flagged = (facts.get("disturbed") or {}).get("evidence") if isinstance(facts.get("disturbed"), dict) else None
    if flagged:
        return [f"DISTURBED: {e}" for e in flagged]
    found = facts.get("disturbance") if isinstance(facts.get("disturbance"), dict) else {}
    lines = [f"measured, not flagged ({found.get('mode')}): {e}" for e in found.get("evidence") or []]
    for host, node in (found.get("nodes") or {}).items():
        if not isinstance(node, dict) or node.get("evidence"):
            continue
        if not node.get("judged"):
            lines.append(f"{host}: not judged ({node.get('why_not')})")
            continue
        steal = f", steal {node['steal_percent']:g}%" if node.get("steal_percent") is not None else ""
        lines.append(f"{host}: quiet (other processes {node.get('others_percent', 0):g}% of CPUs "
                     f"{node.get('run_cpus', '?')}{steal})")
    return lines


def blas_lines(row: sqlite3.Row) -> list[str]:
    """The kernels the run's OpenBLAS chose (system/blas_kernel.py), and the remedy when it fell back."""
    found = _facts(row).get("blas_kernel")
    lines = []
    for k in found if isinstance(found, list) else [found] if isinstance(found, dict) else []:
        asked = f", OPENBLAS_CORETYPE={k['openblas_coretype']}" if k.get("openblas_coretype") else ""
        line = f"OpenBLAS {k.get('core')} kernels ({k.get('verdict')}{asked})"
        if k.get("verdict") == "fallback":
            line = f"FALLBACK: {k.get('why')}; remedy: {k.get('remedy')}"
        lines.append(line)
    return lines


def headline(store: Store, run_id: str, benchmark: str | None = None) -> str:
    """The figure a reader wants first: the best valid value of a metric declared as a listing's
    headline (HPL's Gflop/s, also stored by HPCC), else of the benchmark's figure of merit (STREAM's
    Triad), else the first metric; in a readable unit (`readable`). With the run's `benchmark` only its
    own declarations are read (a listing of runs imports the benchmarks it shows, not all)."""
    ms = store.metrics(run_id)
    for d in [*_headline_uses(benchmark), *_merit_uses(benchmark)]:
        values = [m["value"] for m in ms if m["name"] == d.spec.name and m["valid"] and d.spec.applies(m["value"])]
        if values:
            best = max(values) if d.spec.higher_is_better else min(values)
            return f"{d.use.title or d.spec.name} {readable(d.spec.shown(d.use)(best), d.use.unit or d.spec.unit)}"
    if ms:
        return f"{ms[0]['name']} {readable(ms[0]['value'], ms[0]['unit'])}"
    return "-"


def _headline_uses(benchmark: str | None) -> list:
    """The listing-headline uses of `benchmark`'s metrics (every benchmark's when it is not given, or
    not registered here: a run imported under a plugin's name)."""
    from clusterbench.bench import registry
    from clusterbench.errors import UserInputError

    if benchmark is not None:
        try:
            return registry.drawn("listing", "headline", benchmark)
        except UserInputError:
            pass
    return registry.drawn("listing", "headline")


def _merit_uses(benchmark: str | None) -> list:
    """The figure-of-merit use of `benchmark`'s metrics (none when it is not given or not registered)."""
    from clusterbench.bench import registry
    from clusterbench.errors import UserInputError

    if benchmark is None:
        return []
    try:
        return registry.drawn("history", "merit", benchmark)
    except UserInputError:
        return []


# Units a listing moves a large value up to, 1000 (or 1024) of them at a time: MB/s above 1000 is GB/s,
# a latency of 1500 us is 1.50 ms. Flop rates stay in Gflop/s (how HPL and the reports say them).
_LADDERS = (
    (1000.0, ("B/s", "KB/s", "MB/s", "GB/s", "TB/s")),
    (1024.0, ("B/s", "KiB/s", "MiB/s", "GiB/s", "TiB/s")),
    (1000.0, ("Mflop/s", "Gflop/s")),
    (1000.0, ("ns", "us", "ms", "s")),
    (1000.0, ("bit/s", "Kbit/s", "Mbit/s", "Gbit/s", "Tbit/s")),
)
_HUGE = 1e15  # at and above this a number is written with an exponent (a hostile or broken value, not a rate)


def significant(value: float, digits: int = 3) -> str:
    """`value` with `digits` significant digits and no exponent: 26450.3 -> '26450' (the whole digits
    are kept), 23.56 -> '23.6', 0.3851 -> '0.385'. NaN and infinities as Python writes them; values at
    or above 1e15 (no measurement) with an exponent, so a hostile value cannot make a cell 300 wide."""
    value = float(value)
    if not math.isfinite(value) or abs(value) >= _HUGE:
        return f"{value:.{digits}g}"
    if value == 0:
        return "0"
    rounded = float(f"{value:.{digits}g}")
    size = abs(rounded)
    if size >= 10 ** (digits - 1):
        return f"{value:.0f}"
    decimals = digits - 1 - math.floor(math.log10(size))
    return f"{rounded:.{min(decimals, 20)}f}"


def scaled(value: float, unit: str) -> tuple[float, str]:
    """(value, unit) moved up its unit's ladder while it is 1000 (1024) or more: (26450, 'MB/s') ->
    (26.45, 'GB/s'). A unit on no ladder, or a value that is not finite, is left as it is."""
    for step, names in _LADDERS:
        if unit in names and math.isfinite(value):
            at = names.index(unit)
            while abs(value) >= step and at + 1 < len(names):
                value, at = value / step, at + 1
            return value, names[at]
    return value, unit


def readable(value: float, unit: str | None) -> str:
    """A value as a listing shows it: in a unit it reads well in (`scaled`), 3 significant digits, no
    exponent ('26.5 GB/s', '23.6 Gflop/s', '0.385 us'). A stored value that is no number (a hostile
    database) is shown as its text, cut to 40 characters."""
    try:
        value, unit = scaled(float(value), unit or "")
    except (TypeError, ValueError):
        return f"{str(value)[:40]} {unit or ''}".rstrip()
    return f"{significant(value)} {unit}".rstrip()


@dataclass
class RunDetails:
    """One run in full: its row, its metric values and its stored outputs."""

    row: sqlite3.Row
    metrics: list[sqlite3.Row]
    artifacts: list[dict]
    excluded_at: str | None = None  # when it was excluded (its reason is row["excluded"])
    notes: list[sqlite3.Row] = ()  # (at, text), oldest first

    def to_dict(self) -> dict:
        """The run as `results RUN_ID --format json` prints it: JSON columns and labels decoded."""
        data = decoded_run(self.row)
        data["flags"] = row_flags(self.row)
        data["excluded_at"] = self.excluded_at
        if self.notes:
            data["notes"] = [str(note["text"]) for note in self.notes]
            data["notes_at"] = [note["at"] for note in self.notes]
        data["metrics"] = [dict(m) | {"labels": json.loads(m["labels"])} for m in self.metrics]
        data["artifacts"] = self.artifacts
        return data


def run_details(store: Store, run_id: str) -> RunDetails:
    row = store.run(run_id)
    if row is None:
        raise UserInputError(f"no run with id {run_id!r}", hint="list run ids with `clusterbench results`")
    exclusion = store.exclusion(run_id)
    return RunDetails(row, store.metrics(run_id), [dict(a) for a in store.artifacts(run_id)],
                      exclusion["excluded_at"] if exclusion else None, store.notes(run_id))


def no_match(store: Store, **filters: str | None) -> UserInputError:
    """Why a filtered listing is empty although runs are stored: the filter whose value is stored
    nowhere, with the values that are; else the combination."""
    given = {name: value for name, value in filters.items() if value is not None}
    for name, value in given.items():
        known = store.metric_names() if name == "metric" else store.distinct(name)
        if value not in known:
            plural = {"status": "statuses"}.get(name, name + "s")
            return UserInputError(f"no run matches {name} {value!r} ({store.run_count()} runs are stored)",
                                  hint=suggest(value, known, f"stored {plural}") if known else f"no run has a {name}")
    if not given:
        return UserInputError(f"no metric values stored ({store.run_count()} runs are stored, none with metrics)",
                              hint="list the runs and their status with `clusterbench results`")
    terms = " and ".join(f"{name} {value!r}" for name, value in given.items())
    return UserInputError(f"no run matches {terms} together (each alone matches runs)",
                          hint="see what each holds: `clusterbench campaign list`, "
                               "`clusterbench results --campaign NAME`")

