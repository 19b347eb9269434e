"""What every table of repeats in the report shares: which runs are repeats, their n and CV, and the
flags that keep a run out of the averages and the bests.

Runs are repeats only through analysis/identity.py (every key a run states, an unknown key a value of
its own, shown "not stated"); a flagged run (analysis/flags.py: truncated, suspect, disturbed,
excluded, ...) is never averaged nor a best: the tables list it apart, marked with its flags and
reasons. Every group of repeats shows n and the coefficient of variation (std / mean), and a CV above
CV_WARN (the threshold `results --stat` uses) is marked: a mean of samples that spread that much is
not one number.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from clusterbench.analysis import identity
from clusterbench.analysis.dataset import Dataset
from clusterbench.analysis.flags import counts, run_flags
from clusterbench.analysis.stats import DEFAULT_CV_WARN

CV_WARN = DEFAULT_CV_WARN
HIGH_CV = "high CV"  # the mark of a configuration whose repeats spread more than CV_WARN
REASON_CHARS = 120  # a flag's reason shown in a cell (the run table has it whole)
UNKNOWN = identity.UNKNOWN_TEXT


def identities(data: Dataset, run_ids: Iterable[str]) -> pd.DataFrame:
    """One row per run (index: run id), one column per identity key: the dataset's own when it has
    one (Dataset.identity), else analysis/identity.py over these runs."""
    ids = list(dict.fromkeys(run_ids))
    own = getattr(data, "identity", None)
    if callable(own):
        frame = own()
        if isinstance(frame, pd.DataFrame) and pd.Index(ids, dtype=object).isin(frame.index).all():
            return frame.reindex(ids)
    hostnames = {sid: (info or {}).get("hostname") for sid, info in data.systems.items()}
    return identity.identity_frame({i: data.runs[i] for i in ids if i in data.runs}, hostnames).reindex(ids)


def with_identity(values: pd.DataFrame, data: Dataset, keys: Iterable[str], run_column: str) -> pd.DataFrame:
    """`values` (one row per value, `run_column` its run) with these identity keys added where it lacks
    them (an imported job report's cluster and host group: two host groups are two machines)."""
    missing = [k for k in keys if k not in values.columns]
    if not missing or not len(values):
        return values
    frame = identities(data, values[run_column].unique())
    added = {k: frame[k].reindex(values[run_column].to_numpy()).to_numpy() for k in missing if k in frame}
    return values.assign(**added) if added else values


def counted(data: Dataset, run_id: str) -> bool:
    """May this run be averaged or be a best? (analysis/flags.py: no truncated, suspect, disturbed,
    excluded, failed or invalid run.)"""
    own = getattr(data, "counts", None)  # the dataset's: each run's flags decided once
    if callable(own):
        return bool(own(run_id))
    run = data.runs.get(run_id)
    return run is not None and counts(run)


def counted_mask(data: Dataset, run_ids: pd.Series) -> pd.Series:
    """Per row: is its run counted? Decided once per run."""
    codes, unique = pd.factorize(run_ids.to_numpy(dtype=object))
    own = getattr(data, "counts", None)  # the dataset's verdict, asked directly: 100,000 runs per table
    verdict = np.fromiter((own(rid) if callable(own) else counted(data, rid) for rid in unique.tolist()),
                          dtype=bool, count=len(unique))
    return pd.Series(verdict[codes] if len(codes) else np.zeros(0, dtype=bool), index=run_ids.index,
                     name=run_ids.name)


def values_at(xs: pd.Series, run_ids: pd.Series, values: pd.Series) -> dict[tuple, list[float]]:
    """(x, run) -> that run's values at that x, in row order: what `groupby([x, run])` iterated into lists
    gives (rows whose x or run is missing left out), without a Series per group (a network table over
    10,000 IMB runs has 520,000 of them: most of its time)."""
    out: dict[tuple, list[float]] = {}
    for x, run, value in zip(xs.to_numpy(dtype=float).tolist(), run_ids.to_numpy(dtype=object).tolist(),
                             values.tolist(), strict=True):
        if x == x and run is not None and run == run:  # NaN: no group, as groupby drops it
            out.setdefault((x, run), []).append(value)
    return out


def values_by_x(xs: pd.Series, run_ids: pd.Series, values: pd.Series) -> dict[float, dict[str, list[float]]]:
    """x -> run -> that run's values at that x, in row order: `values_at` keyed for reading a point's runs
    (a lookup per run of a point, without making an (x, run) pair for each of 520,000)."""
    out: dict[float, dict[str, list[float]]] = {}
    for x, run, value in zip(xs.to_numpy(dtype=float).tolist(), run_ids.to_numpy(dtype=object).tolist(),
                             values.tolist(), strict=True):
        if x == x and run is not None and run == run:  # NaN: no group, as groupby drops it
            out.setdefault(x, {}).setdefault(run, []).append(value)
    return out


def point_values(by_run: dict[str, list[float]], runs: Iterable[str]) -> list[float]:
    """The values of these runs (a point's) from one x of `values_by_x`, run after run."""
    return [v for r in runs for v in by_run.get(r, ())]


def flag_text(run: dict | None, found: list[str] | None = None) -> str:
    """'truncated; suspect: 221% of Rpeak; excluded: rerun after the fix', '' for a clean run: each flag
    with its reason where the run has one (run['suspect'], run['excluded'], facts.disturbed). `found`:
    the run's flags when known already (Dataset.flags)."""
    if run is None:
        return ""
    flags = run_flags(run) if found is None else found
    if not flags:
        return ""
    facts = run.get("facts") or {}
    reasons = {"suspect": run.get("suspect") or facts.get("suspect"), "excluded": run.get("excluded"),
               "disturbed": facts.get("disturbed")}
    out = []
    for flag in flags:
        reason = reasons.get(flag)
        out.append(f"{flag}: {_short(reason)}" if isinstance(reason, str) and reason.strip() else flag)
    return "; ".join(out)


def notes_text(run: dict | None) -> str:
    """A run's notes (clusterbench note), joined: shown wherever the run appears."""
    notes = (run or {}).get("notes") or []
    return " | ".join(_short(str(n)) for n in notes if str(n).strip()) if isinstance(notes, list) else _short(notes)


def runs_flags(data: Dataset, run_ids: Iterable[str]) -> str:
    """The flags of each flagged run among these, 'run: flags' joined, '' when all are clean."""
    parts = []
    own = getattr(data, "flags", None)
    for rid in dict.fromkeys(run_ids):
        run = data.runs.get(rid)
        if run is None:
            continue  # no flags, no notes
        found = own(rid) if callable(own) else None
        if found is not None and not found and not run.get("notes"):
            continue  # the usual run: clean and without notes (a table of 80,000 runs asks for each)
        text = flag_text(run, found)
        notes = notes_text(run)
        if text or notes:
            parts.append(f"{rid}: " + "; ".join(t for t in (text, f"note: {notes}" if notes else "") if t))
    return "; ".join(parts)


def _short(text) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 3] + "..."


def describe(values: Iterable[float]) -> dict:
    """n, mean, std, CV, min, max of finite values (std and CV None for one value), and `high` when
    the CV exceeds CV_WARN."""
    array = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    n = len(array)
    if not n:
        return {"n": 0, "mean": None, "std": None, "cv": None, "min": None, "max": None, "high": False}
    mean = float(array.mean())
    std = float(array.std(ddof=1)) if n > 1 else None
    cv = std / abs(mean) if std is not None and mean else None
    return {"n": n, "mean": mean, "std": std, "cv": cv, "min": float(array.min()), "max": float(array.max()),
            "high": cv is not None and cv > CV_WARN}


EXACT_GROUP = 7  # numpy sums up to 7 values one after the other, as bincount does: the same floats


def describe_groups(values: np.ndarray, groups: list[list[int]]) -> list[dict]:
    """`describe` of each group of `values` (a float array; a group: its positions), all groups of at
    most EXACT_GROUP finite values at once (a table of 14,000 configurations called numpy 14,000
    times): numpy sums so few values in order, so means and deviations are the very same floats; a
    larger group, or one with a value that is not finite, is described on its own."""
    sizes = np.fromiter((len(g) for g in groups), dtype=np.int64, count=len(groups))
    flat = np.fromiter((i for g in groups for i in g), dtype=np.int64, count=int(sizes.sum()))
    owner = np.repeat(np.arange(len(groups)), sizes)
    taken = values[flat]
    finite = np.bincount(owner, weights=~np.isfinite(taken), minlength=len(groups)) == 0
    together = finite & (sizes > 0) & (sizes <= EXACT_GROUP)
    n = np.maximum(sizes, 1)
    with np.errstate(invalid="ignore", over="ignore"):  # a group with an infinity: described on its own
        mean = np.bincount(owner, weights=taken, minlength=len(groups)) / n
        deviation = taken - mean[owner]
        std = np.sqrt(np.bincount(owner, weights=deviation * deviation, minlength=len(groups))
                      / np.maximum(sizes - 1, 1))
    low = np.full(len(groups), np.inf)
    high = np.full(len(groups), -np.inf)
    usable = np.isfinite(taken)  # groups holding another value are described on their own
    np.minimum.at(low, owner[usable], taken[usable])
    np.maximum.at(high, owner[usable], taken[usable])
    out = []
    for i, group in enumerate(groups):
        if not together[i]:
            out.append(describe(values[group]))
            continue
        m, s = float(mean[i]), float(std[i]) if sizes[i] > 1 else None
        cv = s / abs(m) if s is not None and m else None
        out.append({"n": int(sizes[i]), "mean": m, "std": s, "cv": cv, "min": float(low[i]), "max": float(high[i]),
                    "high": cv is not None and cv > CV_WARN})
    return out


def cv_percent(stats: dict) -> float | None:
    """The CV in % (a table cell), None with one value."""
    return None if stats["cv"] is None else round(100 * stats["cv"], 2)


def mark(stats: dict) -> str:
    """The spread's mark: 'high CV' above CV_WARN, 'one value' for n=1, '' otherwise."""
    return HIGH_CV if stats["high"] else "one value: no spread known" if stats["n"] == 1 else ""


def cell_text(stats: dict, digits: int = 4) -> str | None:
    """'12.3 (11.9-12.8), n=3, CV 2.1%' (and ', high CV'), for tables whose cells hold a whole group."""
    if not stats["n"]:
        return None
    text = f"{stats['mean']:.{digits}g}"
    if stats["n"] > 1:
        text += f" ({stats['min']:.{digits}g}-{stats['max']:.{digits}g}), n={stats['n']}"
        text += f", CV {100 * stats['cv']:.1f}%" if stats["cv"] is not None else ""
        text += f", {HIGH_CV}" if stats["high"] else ""
    else:
        text += ", n=1"
    return text


def note(extra: str = "") -> str:
    """The note under a table of repeats: what n, CV and the marks mean."""
    text = (f"n: repeats averaged (runs whose every known key is equal; a key a run does not state is "
            f"'{UNKNOWN}' and kept apart); CV = standard deviation / mean; '{HIGH_CV}': CV above {CV_WARN:.0%}. "
            "Flagged runs (truncated, suspect, disturbed, excluded, ...) are never averaged nor a best: they "
            "are listed apart with their flags and reasons.")
    return f"{text} {extra}".strip()
