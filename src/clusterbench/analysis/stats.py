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

import pandas as pd

from clusterbench.errors import UserInputError
from clusterbench.store.db import Store

STATS = ("n", "mean", "std", "min", "max", "median", "ci95", "cv")
DEFAULT_CV_WARN = 0.05

# Two-sided 95% quantiles of Student's t (t_{0.975, df}), df = 1..30, then 40, 60, 120, infinity.
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042]
_T95_TAIL = [(40, 2.021), (60, 2.000), (120, 1.980), (math.inf, 1.960)]


def t95(df: int) -> float:
    """t quantile for a 95% two-sided interval; linear in 1/df between tabulated points."""
    if df < 1:
        return math.nan
    if df <= len(_T95):
        return _T95[df - 1]
    lo_df, lo_t = 30, _T95[-1]
    for hi_df, hi_t in _T95_TAIL:
        if df <= hi_df:
            x = (1 / lo_df - 1 / df) / (1 / lo_df - (0 if math.isinf(hi_df) else 1 / hi_df))
            return lo_t + x * (hi_t - lo_t)
        lo_df, lo_t = hi_df, hi_t
    return 1.960  # pragma: no cover


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
