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
    return table[config_columns(table) + stats + extra + ["n_invalid", "warning"]]


def config_columns(table: pd.DataFrame) -> list[str]:
    """The columns of a `summarise` table that name the configuration (benchmark, metric, unit,
    the grouped-by fields): all but the statistics, their bounds, n_invalid and the warning."""
    return [c for c in table.columns if c not in (*STATS, "ci95_low", "ci95_high", "n_invalid", "warning")]


def metric_frame(store: Store, campaign: str | None = None, benchmark: str | None = None,
                 metric: str | None = None) -> pd.DataFrame:
    """One row per stored metric value, with params, labels, tags and BLAS facts as columns."""
    records = []
    for row in store.metric_rows(metric, benchmark, campaign=campaign):
        rec = {k: row[k] for k in ("run_id", "benchmark", "campaign", "repeat", "status", "started_at",
                                   "value", "unit")}
        rec["metric"] = row["name"]
        rec["valid"] = bool(row["valid"]) and bool(row["run_valid"])
        rec["higher_is_better"] = bool(row["higher_is_better"])
        for prefix, blob in (("param", row["params"]), ("label", row["labels"]), ("tag", row["tags"])):
            rec |= {f"{prefix}.{k}": _scalar(v) for k, v in json.loads(blob or "{}").items()}
        facts = json.loads(row["facts"] or "{}")
        if facts.get("blas_loaded_variant"):
            rec["fact.blas_loaded"] = facts["blas_loaded_variant"]
        records.append(rec)
    return pd.DataFrame(records)


def _scalar(value):
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value


def resolve_columns(frame: pd.DataFrame, names: list[str]) -> list[str]:
    """`nb` -> 'param.nb' (or label./tag./fact.): users write the field's own name."""
    out = []
    for name in names:
        for candidate in (name, f"param.{name}", f"label.{name}", f"tag.{name}", f"fact.{name}"):
            if candidate in frame.columns:
                out.append(candidate)
                break
        else:
            known = sorted({c.split(".", 1)[-1] for c in frame.columns if "." in c})
            raise UserInputError(f"cannot group by {name!r}: no such parameter, label or tag",
                                 hint="available: " + ", ".join(known))
    return out


def default_group_columns(frame: pd.DataFrame) -> list[str]:
    """Parameters that vary across runs, and labels that vary inside one run (message sizes)."""
    cols = [c for c in frame.columns if c.startswith("param.") and frame[c].astype(str).nunique() > 1]
    for c in (c for c in frame.columns if c.startswith("label.")):
        if frame.groupby("run_id")[c].nunique().max() > 1:
            cols.append(c)
    return cols


def summarise(frame: pd.DataFrame, group_by: list[str] | None = None,
              cv_warn: float = DEFAULT_CV_WARN) -> pd.DataFrame:
    """One row per (metric, configuration): statistics over its valid repeats."""
    if frame.empty:
        return pd.DataFrame(columns=["metric", "unit", *STATS, "n_invalid", "warning"])
    base = ["benchmark", "metric", "unit"]
    cols = [c for c in (resolve_columns(frame, group_by) if group_by else default_group_columns(frame))
            if c not in base]  # grouping by `benchmark` is already done
    keys = [*base, *cols]
    work = frame.copy()
    for c in cols:  # group on text so None / mixed types group predictably
        work[c] = work[c].map(lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else v)
    rows = []
    for key, group in work.groupby(keys, sort=True, dropna=False):
        values = group.loc[group["valid"], "value"].astype(float)
        rows.append(dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
                    | describe(values.tolist(), cv_warn) | {"n_invalid": int((~group["valid"]).sum())})
    out = pd.DataFrame(rows)
    return out.rename(columns={c: c.split(".", 1)[1] for c in cols
                               if "." in c and c.split(".", 1)[1] not in out.columns})


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
