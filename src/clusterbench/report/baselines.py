"""HPL's 'baseline against optimisation' tables: for a key whose values include a baseline, the
best Rmax of each other value against the baseline's, per node count and configuration."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from clusterbench.analysis import shape
from clusterbench.report.model import Table

BASELINE_WORDS = ("baseline", "default")  # a value that names the unchanged configuration
MAX_BASELINE_TABLES = 4


def _label(rec: dict, keys: list[str]) -> str:
    return shape.series_label(keys, tuple(rec.get(k) for k in keys)) if keys else ""


def tables(values: pd.DataFrame, best: shape.Shape) -> list[Table]:
    """'Baseline against optimisation', the studies' table, for each text key that has a baseline
    (the value absent, or named baseline/default) beside other values: the Pi study's
    `tuning: mtu_9000`, or a tag. Per node count and the other line keys (BLAS): the best Rmax
    of each value against the baseline's, and the change in %."""
    tables = []
    for key in [k for k in shape.keys_of(values) if has_baseline(values, k)][:MAX_BASELINE_TABLES]:
        column = values[key]
        is_base = column.isna() | column.astype(str).str.lower().isin(BASELINE_WORDS)
        setting = pd.Series(np.where(is_base, "baseline", column.astype(str)), index=values.index)
        rest = [k for k in best.series if k != key]
        pairs = replace(best, series=[*rest, "@setting"])
        winners = shape.aggregate(values.assign(**{"@setting": setting}), pairs).to_dict("records")
        by_group: dict[tuple, dict[str, dict]] = {}
        for rec in winners:
            group = (int(rec["nodes"]), _label(rec, rest))
            by_group.setdefault(group, {})[rec["@setting"]] = rec
        rows = []
        for (nodes, label), settings in sorted(by_group.items()):
            base = settings.get("baseline")
            for value in sorted(v for v in settings if v != "baseline"):
                rec = settings[value]
                change = 100 * (rec[shape.VALUE] - base[shape.VALUE]) / base[shape.VALUE] if base else None
                runs = [rec[shape.RUN]] + ([base[shape.RUN]] if base else [])
                rows.append([nodes, label, value, float(rec[shape.VALUE]),
                             float(base[shape.VALUE]) if base else None, change, runs])
        if any(row[4] is not None for row in rows):
            shown = shape.name(key)
            tables.append(Table(f"hpl-baseline-{len(tables)}", f"Baseline against optimisation: {shown}",
                                ["nodes", "configuration", shown, "best Rmax (Gflop/s)", "baseline Rmax (Gflop/s)",
                                 "change (%)", "runs"], rows,
                                note=f"baseline: runs without {shown} or with {shown} named baseline or default. "
                                     "Each Rmax is the best valid value of its node count and configuration."))
    return tables


def has_baseline(values: pd.DataFrame, key: str) -> bool:
    """A text key whose values include a baseline (absent: only for a tuning or a tag; or a value
    named baseline/default) and something else."""
    column = values[key]
    if shape.is_number_key(column):
        return False
    distinct = [v for v in column.dropna().unique() if str(v).lower() not in BASELINE_WORDS]
    named = len(distinct) < column.nunique()
    absent = bool(column.isna().any()) and (key == "tuning" or key.startswith("tag:"))
    return (named or absent) and bool(distinct)
