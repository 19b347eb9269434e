"""Statistics over repeats: n, mean, standard deviation, min, max, median, 95% CI, CV.

Every run is one sample (identical HPL runs on a noisy machine differ by up to 25%), so a
configuration is summarised over its *valid* repeats only; invalid ones are counted apart and
never averaged in. The 95% confidence interval of the mean uses Student's t with n-1 degrees
of freedom; a coefficient of variation above `cv_warn` is flagged, because a mean of samples
that spread that much says little about any one of them.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache

import pandas as pd

from clusterbench.analysis.applicable import drop_not_applicable
from clusterbench.analysis.flags import counts
from clusterbench.analysis.identity import UNKNOWN_TEXT, identity_frame
from clusterbench.analysis.listing import no_match
from clusterbench.errors import UserInputError
from clusterbench.store.db import Store

STATS = ("n", "mean", "std", "min", "max", "median", "ci95", "cv")
DEFAULT_CV_WARN = 0.05

TABLE_MAX_DF = 120  # the last finite row of the printed t tables


@lru_cache(maxsize=1024)
def t95(df: int) -> float:
    """t quantile for a 95% two-sided interval (t_{0.975, df}), from scipy.

    Rounded to 3 decimals up to df = 120, as the printed tables give it (12.706 for df = 1): a
    report's interval can then be checked against any textbook. Beyond, the tables have no rows
    (only the limit 1.960) and 3 decimals would make distinct sample sizes look alike, so the
    value is exact."""
    if df < 1:
        return math.nan
    # The inverse of Student's t CDF (what scipy.stats.t.ppf calls): scipy.special loads in a
    # fraction of a second where scipy.stats takes about two, which a report would pay every time.
    from scipy.special import stdtrit

    value = float(stdtrit(df, 0.975))
    return round(value, 3) if df <= TABLE_MAX_DF else value


def parse_stats(text: str | None) -> list[str]:
    """'mean,std,cv' -> the statistics named, in that order (None: all of them)."""
    stats = [s.strip() for s in (text or ",".join(STATS)).split(",") if s.strip()]
    unknown = [s for s in stats if s not in STATS]
    if unknown:
        raise UserInputError(f"unknown statistic {unknown[0]!r}", hint="choose from " + ", ".join(STATS))
    return stats


def stats_table(store: Store, stats: list[str], campaign: str | None = None, benchmark: str | None = None,
                metric: str | None = None, group_by: list[str] | None = None,
                cv_warn: float = DEFAULT_CV_WARN) -> pd.DataFrame:
    """`summarise` over the stored values that match, with only the `stats` asked for (ci95 with its
    bounds). An empty selection is refused with the reason: nothing stored, or which filter."""
    frame = metric_frame(store, campaign, benchmark, metric)
    if frame.empty:
        if not store.run_count():
            raise UserInputError(f"no runs stored yet in {store.path}", hint="store some with `clusterbench run`, "
                                 "`clusterbench campaign run` or `clusterbench import`")
        raise no_match(store, campaign=campaign, benchmark=benchmark, metric=metric)
    table = summarise(frame, group_by, cv_warn)
    extra = ["ci95_low", "ci95_high"] if "ci95" in stats else []
    return table[config_columns(table) + stats + extra + ["n_invalid", "n_flagged", "warning"]]


def config_columns(table: pd.DataFrame) -> list[str]:
    """The columns of a `summarise` table that name the configuration (benchmark, metric, unit,
    the grouped-by fields): all but the statistics, their bounds, n_invalid and the warning."""
    return [c for c in table.columns if c not in (*STATS, "ci95_low", "ci95_high", "n_invalid", "n_flagged",
                                                  "warning")]


def metric_frame(store: Store, campaign: str | None = None, benchmark: str | None = None,
                 metric: str | None = None) -> pd.DataFrame:
    """One row per stored metric value, with params, labels, tags and BLAS facts as columns, and the
    run's identity (identity.run_identity) as `id.KEY` columns (NaN: the run does not state it).
    Values that do not apply (HPCC's -1, NaN: applicable.py) are left out; `counted` says whether
    the run's flags let it count (flags.counts)."""
    records = []
    runs: dict[str, dict] = {}
    for row in store.metric_rows(metric, benchmark, campaign=campaign):
        rec = {k: row[k] for k in ("run_id", "benchmark", "campaign", "repeat", "status", "started_at",
                                   "value", "unit")}
        rec["metric"] = row["name"]
        rec["valid"] = bool(row["valid"]) and bool(row["run_valid"])
        rec["higher_is_better"] = bool(row["higher_is_better"])
        decoded = {}
        for prefix, blob in (("param", row["params"]), ("label", row["labels"]), ("tag", row["tags"])):
            decoded[prefix] = json.loads(blob or "{}")
            rec |= {f"{prefix}.{k}": _scalar(v) for k, v in decoded[prefix].items()}
        if row["run_id"] not in runs:
            facts = json.loads(row["facts"] or "{}")
            runs[row["run_id"]] = {"id": row["run_id"], "benchmark": row["benchmark"], "params": decoded["param"],
                                   "tags": decoded["tag"], "facts": facts, "system_id": row["system_id"],
                                   "status": row["status"], "valid": row["run_valid"],
                                   "excluded": row["excluded"] if "excluded" in row.keys() else None}
        facts = runs[row["run_id"]]["facts"]
        if facts.get("blas_loaded_variant"):
            rec["fact.blas_loaded"] = facts["blas_loaded_variant"]
        records.append(rec)
    frame = pd.DataFrame(records)
    if frame.empty:
        return frame
    frame = drop_not_applicable(frame, "metric").reset_index(drop=True)
    if frame.empty:
        return frame
    _add_run_columns(store, runs)
    ids = identity_frame(runs, store.hostnames()).drop(columns=["benchmark"], errors="ignore")
    ids.columns = [f"id.{c}" for c in ids.columns]
    frame = frame.join(ids, on="run_id")
    frame["counted"] = frame["run_id"].map({rid: counts(run) for rid, run in runs.items()}).astype(bool)
    return frame


def _add_run_columns(store: Store, runs: dict[str, dict]) -> None:
    """The run columns identity and flags read that metric rows lack: source, node list, reason."""
    for row in store.find_runs(("id", "source", "nodes", "reason")):
        if (run := runs.get(row["id"])) is not None:
            run.update(source=row["source"], nodes=row["nodes"], reason=row["reason"])


def _scalar(value):
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value


def resolve_columns(frame: pd.DataFrame, names: list[str]) -> list[str]:
    """`nb` -> 'param.nb' (or the identity's id.nb, label./tag./fact.): users write the field's own name."""
    out = []
    for name in names:
        for candidate in (name, f"id.{name}", f"param.{name}", f"label.{name}", f"tag.{name}", f"fact.{name}",
                          f"id.tag:{name}"):
            if candidate in frame.columns:
                out.append(candidate)
                break
        else:
            known = sorted({c.split(".", 1)[-1] for c in frame.columns if "." in c})
            raise UserInputError(f"cannot group by {name!r}: no such parameter, label or tag",
                                 hint="available: " + ", ".join(known))
    return out


def default_group_columns(frame: pd.DataFrame) -> list[str]:
    """What keeps repeats apart (identity.py): the identity keys (`id.*`) that vary among the runs
    of one metric, an unknown value counting as a value of its own, and the metric's identifying
    labels (its declaration's: message sizes, HPL's N and NB of each line) that vary; for a metric
    nobody declares, the labels that vary inside one run. A frame without identity columns (made
    by hand) falls back on the parameters that vary."""
    identity = [c for c in frame.columns if c.startswith("id.")]
    if not identity:
        identity = [c for c in frame.columns if c.startswith("param.") and frame[c].astype(str).nunique() > 1]
    labels = [c for c in frame.columns if c.startswith("label.")]
    declared = _declared_labels()
    cols: set[str] = set()
    groups = frame.groupby(["benchmark", "metric"], sort=False) if {"benchmark", "metric"} <= set(frame.columns) \
        else [(None, frame)]
    for key, group in groups:
        if key in declared:
            mine = [c for c in labels if c.split(".", 1)[1] in declared[key]]
        else:
            mine = [c for c in labels if group.groupby("run_id")[c].nunique().max() > 1]
        for c in identity + mine:
            if c not in cols and group[c].astype(object).map(_key_text).nunique(dropna=False) > 1:
                cols.add(c)
    return [c for c in identity + labels if c in cols]


@lru_cache(maxsize=1)
def _declared_labels() -> dict[tuple[str, str], tuple[str, ...]]:
    """(benchmark, metric) -> the labels its declaration says tell its values apart."""
    from clusterbench.bench import registry

    return {(cls.name, spec.name): spec.labels for cls in registry.registered() for spec in cls.metrics}


def _key_text(value) -> str | None:
    """A key's value as text for grouping; None (unknown) stays None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def summarise(frame: pd.DataFrame, group_by: list[str] | None = None,
              cv_warn: float = DEFAULT_CV_WARN) -> pd.DataFrame:
    """One row per (metric, configuration): statistics over its valid repeats that count.

    A configuration is identity.py's: the keys asked for (`group_by`) and every other identity key
    that varies among the runs of the metric, so runs are pooled only when every key they state
    is equal, and a run that does not state a key is never pooled with one that does (it shows as
    "not stated"). Invalid values are counted in n_invalid; the values of runs whose flags keep them
    from counting (truncated, suspect, excluded...: flags.NOT_COUNTED) in n_flagged; neither is averaged."""
    if frame.empty:
        return pd.DataFrame(columns=["metric", "unit", *STATS, "n_invalid", "n_flagged", "warning"])
    base = ["benchmark", "metric", "unit"]
    asked = resolve_columns(frame, group_by) if group_by else []
    cols = [c for c in dict.fromkeys(asked + default_group_columns(frame)) if c not in base]
    work = frame.copy()
    for c in cols:  # group on text so None / mixed types group predictably; unknown is a value of its own
        work[c] = work[c].astype(object).map(lambda v: UNSTATED if _key_text(v) is None else _key_text(v))
    cols = _without_repeated_labels(work, cols)
    keys = [*base, *cols]
    counted = work["counted"].astype(bool) if "counted" in work else pd.Series(True, index=work.index)
    rows = []
    for key, group in work.groupby(keys, sort=True, dropna=False):
        ok = group["valid"] & counted.loc[group.index]
        values = group.loc[ok, "value"].astype(float)
        flagged = int((group["valid"] & ~counted.loc[group.index]).sum())
        described = describe(values.tolist(), cv_warn)
        if flagged:
            note = f"{flagged} flagged value(s) left out"
            described["warning"] = f"{described['warning']}; {note}" if described["warning"] else note
        rows.append(dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
                    | described | {"n_invalid": int((~group["valid"]).sum()), "n_flagged": flagged})
    out = pd.DataFrame(rows)
    for c in cols:  # a key none of a metric's runs states is not part of its configuration: blank
        for _m, idx in out.groupby(["benchmark", "metric"], sort=False).groups.items():
            if (out.loc[idx, c] == UNSTATED).all():
                out.loc[idx, c] = ""
        out[c] = out[c].map(lambda v: _typed(v))
    names: dict[str, str] = {}
    for c in cols:  # 'id.nb' -> 'nb'; where a statistic has that name ('n'), 'param.n' as before
        short = c.split(".", 1)[1] if "." in c else c
        if short not in out.columns and short not in names.values():
            names[c] = short
        elif c.startswith("id.") and f"param.{short}" in frame.columns and f"param.{short}" not in out.columns:
            names[c] = f"param.{short}"
    return out.rename(columns=names)


def _without_repeated_labels(work: pd.DataFrame, cols: list[str]) -> list[str]:
    """Drop a column that says what another says on every row: a label twin of a parameter (an
    imported HPL line's N and NB are both), a tag that filled the key of its name (tag:blas, blas)."""
    kept: list[str] = []
    for c in sorted(cols, key=lambda c: (c.startswith("label.") or c.startswith("id.tag:"), cols.index(c))):
        if not any((work[c] == work[k]).all() for k in kept):
            kept.append(c)
    return [c for c in cols if c in kept]


UNSTATED = UNKNOWN_TEXT


def _typed(value):
    """A grouped key back to a number where it is one (nb 64, not '64'), else its text."""
    if isinstance(value, str) and value not in (UNSTATED, ""):
        try:
            number = float(value)
        except ValueError:
            return value
        return int(number) if number.is_integer() and "." not in value and "e" not in value.lower() else number
    return value


def describe(values: list[float], cv_warn: float = DEFAULT_CV_WARN) -> dict:
    n = len(values)
    if n == 0:
        return {s: (0 if s == "n" else None) for s in STATS} | {"ci95_low": None, "ci95_high": None,
                                                               "warning": "no valid repeat"}
    s = pd.Series(values, dtype=float)
    mean = float(s.mean())
    std = float(s.std(ddof=1)) if n > 1 else None
    half = t95(n - 1) * std / math.sqrt(n) if std is not None else None
    cv = std / mean if std is not None and mean else None
    warning = None
    if n < 2:
        warning = "one sample: no spread known"
    elif cv is not None and cv > cv_warn:
        warning = f"high variation: CV {cv:.1%} > {cv_warn:.0%}"
    return {"n": n, "mean": mean, "std": std, "min": float(s.min()), "max": float(s.max()),
            "median": float(s.median()), "ci95": half,
            "ci95_low": None if half is None else mean - half, "ci95_high": None if half is None else mean + half,
            "cv": cv, "warning": warning}
