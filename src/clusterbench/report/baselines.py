"""HPL's 'baseline against optimisation' tables: for a key whose values include a baseline, the
best Rmax of each other value against the baseline's, per node count and configuration.

A baseline is declared (`declared`: KEY -> the value that is the baseline), or a value named
baseline/default, or (for a tuning or a tag) the key absent. A baseline run is compared with a
candidate only when the two are the same configuration apart from the key (analysis/baseline.py,
analysis/identity.py: benchmark, N, NB, grid, nodes, BLAS... all equal): an HPCC run is never HPL's
baseline, N=13440 is never the baseline of N=44640. Each side's best is taken over the
configurations both ran; a candidate with none says "no comparable baseline (differs in: ...)",
naming the keys of its nearest baseline. Flagged runs (truncated, suspect, excluded...) are on
neither side.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from clusterbench.analysis import baseline, flags, identity, shape
from clusterbench.analysis.dataset import Dataset
from clusterbench.report.model import Table

BASELINE_WORDS = ("baseline", "default")  # a value that names the unchanged configuration
MAX_BASELINE_TABLES = 4
LABELS = ("tv", "n", "nb", "p", "q")  # what an HPL value solved: per line, not per run
NOT_IDENTITY = ("origin", "ppn", "workers", "grid")  # derived from other keys, or where a run came from
BASE = "@baseline"


def _label(rec: dict, keys: list[str]) -> str:
    return shape.series_label(keys, tuple(rec.get(k) for k in keys)) if keys else ""


def tables(values: pd.DataFrame, best: shape.Shape, data: Dataset | None = None,
           declared: dict[str, str] | None = None) -> list[Table]:
    """'Baseline against optimisation', the studies' table, for each text key that has a baseline
    beside other values: the Pi study's `tuning: mtu_9000`, or a tag. Per node count and the other
    line keys (BLAS): the best Rmax of each value against the baseline's, over the configurations
    both ran, and the change in %. `data` (the report's dataset) gives each run's identity and
    flags; without it the frame's own key columns are the identity."""
    declared = declared or {}
    if data is not None and len(values):
        own = getattr(data, "counts", None)  # the dataset's: each run's flags decided once for the report
        counted = {rid for rid in run_ids(values)
                   if (own(rid) if callable(own) else rid in data.runs and flags.counts(data.runs[rid]))}
        values = values[values[shape.RUN].isin(counted)]
    if values.empty:
        return []
    keys = [k for k in shape.keys_of(values) if k in declared or has_baseline(values, k)]
    if not keys:
        return []
    values = values.reset_index(drop=True)
    idents = _identities(values, data)
    out = []
    for key in keys[:MAX_BASELINE_TABLES]:
        table = _table(values, best, key, declared.get(key), idents, len(out))
        if table is not None:
            out.append(table)
    return out


def run_ids(values: pd.DataFrame) -> list[str]:
    """The distinct runs of `values`, in order of appearance, as a list (iterating the text column
    itself costs a lookup per element: 80,000 runs, twice per report)."""
    return pd.unique(values[shape.RUN].to_numpy(dtype=object)).tolist()


def _identities(values: pd.DataFrame, data: Dataset | None) -> pd.DataFrame:
    """Per row of `values` (same index): the identity of its run (identity.identity_frame) with the
    value's labels (N, NB, P, Q, T/V) over it; NaN where a run does not state a key."""
    labels = [c for c in LABELS if c in values.columns]
    if data is not None:
        hosts = {sid: s.get("hostname") for sid, s in data.systems.items()}
        runs = {rid: data.runs[rid] for rid in run_ids(values)}
        frame = identity.identity_frame(runs, hosts).reindex(values[shape.RUN].to_numpy()).reset_index(drop=True)
        for column in labels:
            known = values[column].notna().to_numpy()
            if column in frame:
                frame[column] = frame[column].astype(object).where(~known, values[column].astype(object))
            else:
                frame[column] = values[column]
        return frame
    columns = [c for c in values.columns if not str(c).startswith("@") and c not in NOT_IDENTITY]
    return values[columns].copy()


def _conf(idents: pd.DataFrame, pos: int, keys: list[str]) -> dict:
    """One row's configuration as a dict of its known keys (for naming what differs)."""
    row = idents.iloc[pos]
    return {k: row[k] for k in keys if identity.shown(row[k]) != identity.UNKNOWN_TEXT}


def _table(values: pd.DataFrame, best: shape.Shape, key: str, declared: str | None, idents: pd.DataFrame,
           number: int) -> Table | None:
    column = values[key]
    if declared is not None:
        is_base = (column.astype(str) == declared).to_numpy()
    else:
        is_base = (column.isna() | column.astype(str).str.lower().isin(BASELINE_WORDS)).to_numpy()
    if not is_base.any() or is_base.all():
        return None
    hidden = baseline.study_keys([key])
    keys = [c for c in idents.columns if c not in hidden]
    codes = identity.configuration_ids(idents, keys).to_numpy()
    base_pos = np.flatnonzero(is_base)
    base_codes = set(codes[base_pos].tolist())
    rest = [k for k in best.series if k != key and k in values.columns]
    by = [values[key].astype(str), values["nodes"].astype(object) if "nodes" in values else None,
          *[values[k].astype(object) for k in rest]]
    frame = pd.DataFrame({"@setting": by[0], "@nodes": by[1] if by[1] is not None else None,
                          **{f"@k{i}": col for i, col in enumerate(by[2:])}})
    frame["@code"], frame["@base"] = codes, is_base
    frame[shape.VALUE], frame[shape.RUN] = values[shape.VALUE].to_numpy(), values[shape.RUN].to_numpy()
    candidates = frame[~frame["@base"]]
    group_cols = ["@setting", "@nodes", *[f"@k{i}" for i in range(len(rest))]]
    groups = []
    for group, part in candidates.groupby(group_cols, dropna=False, sort=False):
        first = values.iloc[part.index[0]].to_dict()
        groups.append((_order((_nodes(first.get("nodes")), _label(first, rest))), group[0], part, first))
    rows = []
    base_frame = frame[frame["@base"]]
    base_of: dict | None = None
    for (_, nodes, label), setting, part, _first in sorted(groups, key=lambda g: (g[0], g[1])):
        comparable = part[part["@code"].isin(base_codes)]
        if len(comparable):
            cand = comparable.loc[comparable[shape.VALUE].idxmax()]
            shared = set(comparable["@code"].tolist())
            bases = base_frame[base_frame["@code"].isin(shared)]
            base = bases.loc[bases[shape.VALUE].idxmax()]
            change = 100 * (cand[shape.VALUE] - base[shape.VALUE]) / base[shape.VALUE]
            if len(shared) > 1:
                over = _differ_within(idents, comparable.index, keys)
                how = f"best of {len(shared)} configurations both ran ({', '.join(over)})"
            else:
                how = "the same configuration"
            rows.append([nodes, label, setting, float(cand[shape.VALUE]), float(base[shape.VALUE]), float(change), how,
                         [cand[shape.RUN], base[shape.RUN]]])
        else:
            cand = part.loc[part[shape.VALUE].idxmax()]
            if base_of is None:  # one baseline per configuration, the first MAX_SEARCHED searched
                first_of = base_frame.drop_duplicates("@code")
                base_of = {int(c): (_conf(idents, int(pos), keys), [r])
                           for c, pos, r in zip(first_of["@code"], first_of.index, first_of[shape.RUN], strict=True)}
            near = baseline.nearest_pairs({0: (_conf(idents, int(cand.name), keys), [cand[shape.RUN]])}, base_of, 1)
            why = baseline.refusal(near[0].differ) if near else "no comparable baseline"
            rows.append([nodes, label, setting, float(cand[shape.VALUE]), None, None, why, [cand[shape.RUN]]])
    if not rows:
        return None
    shown = shape.name(key)
    what = (f"runs with {shown} = {declared} (declared)" if declared is not None else
            f"runs without {shown} or with {shown} named baseline or default")
    return Table(f"hpl-baseline-{number}", f"Baseline against optimisation: {shown}",
                 ["nodes", "configuration", shown, "best Rmax (Gflop/s)", "baseline Rmax (Gflop/s)", "change (%)",
                  "compared on", "runs"], rows,
                 note=f"baseline: {what}, only where it is the same configuration (benchmark, N, NB, grid, nodes, "
                      f"BLAS...) as the candidate apart from {shown}. Each Rmax is the best valid value over the "
                      "configurations both ran; flagged runs are on neither side.")


def _nodes(value):
    return int(value) if isinstance(value, int | float) and not math.isnan(value) else identity.UNKNOWN_TEXT


def _order(group: tuple) -> tuple:
    """Known node counts first, in order, then 'not stated'; then the label."""
    nodes, label = group
    return (isinstance(nodes, str), nodes if isinstance(nodes, int) else 0, label), nodes, label


def _differ_within(idents: pd.DataFrame, index, keys: list[str]) -> list[str]:
    """The keys the configurations both ran differ in (NB, N...): what each best was taken over.
    Each column's distinct values are put in words once (13440.0 is 13440), not each cell."""
    out = []
    for key in keys:
        distinct = idents.loc[index, key].astype(object).drop_duplicates()
        if len({identity.shown(v) for v in distinct}) > 1:
            out.append(key)
    return out


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
