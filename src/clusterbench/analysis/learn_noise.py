"""Learning the noise floors (analysis/noise.py says what a floor is) from the stored runs, and storing them.

Apart from analysis/noise.py because it reads the metrics as `stats.metric_frame` does and the
identifying labels as `history` declares them, while `history` and `compare` read the floors
through analysis/noise.py: one module for both would import them in a circle.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd

from clusterbench.analysis.history import identity_labels
from clusterbench.analysis.noise import HARDWARE_KEYS, Floor, configuration_text, pooled, robust_cv, word
from clusterbench.analysis.stats import metric_frame
from clusterbench.store import noise as stored
from clusterbench.store.db import Store


def floors_of(frame: pd.DataFrame) -> list[Floor]:
    """The floors of a `stats.metric_frame` (one row per value, `id.*` identity columns, `counted`):
    pure, from the valid values of counted runs only, and only of runs whose machine and node count
    are known (noise.HARDWARE_KEYS): two imported files that name neither may come from two machines,
    and their spread would be the machines' difference, not noise."""
    if frame.empty:
        return []
    rows = frame[frame["valid"].astype(bool) & frame["counted"].astype(bool)]
    if rows.empty:
        return []
    id_columns = [c for c in rows.columns if c.startswith("id.")]
    config_of: dict[str, tuple[str | None, str]] = {}
    for rid, first in rows.groupby("run_id", sort=False).head(1).set_index("run_id")[id_columns].iterrows():
        ident = {c[3:]: first[c] for c in id_columns}
        if all(word(ident.get(key)) is not None for key in HARDWARE_KEYS):
            config_of[rid] = (word(ident.get("system")), configuration_text(ident))
    label_columns = [c for c in rows.columns if c.startswith("label.")]
    groups: dict[tuple, dict[tuple, dict[str, list[float]]]] = {}
    for record in rows[["run_id", "benchmark", "metric", "unit", "value", *label_columns]].to_dict("records"):
        value = _finite(record["value"])
        if value is None or record["run_id"] not in config_of:
            continue
        system, config = config_of[record["run_id"]]
        wanted = identity_labels(record["benchmark"], record["metric"])
        labels = tuple(sorted((c[6:], word(record[c])) for c in label_columns
                              if c[6:] in wanted and word(record[c]) is not None))
        key = (system, record["benchmark"], config, record["metric"], record["unit"] or "")
        groups.setdefault(key, {}).setdefault(labels, {}).setdefault(record["run_id"], []).append(value)
    out = []
    for (system, benchmark, config, metric, unit), by_labels in groups.items():
        cvs, runs, n = [], set(), 0
        for per_run in by_labels.values():
            values = [float(pd.Series(v).median()) for v in per_run.values()]
            cv = robust_cv(values)
            if cv is not None:
                cvs.append((cv, len(values)))
                runs.update(per_run)
                n += len(values)
        floor = pooled(cvs)
        if floor is not None:
            out.append(Floor(system, benchmark, config, metric, unit, floor, n, len(cvs), sorted(runs)))
    return sorted(out, key=lambda f: (f.benchmark, f.metric, f.system or "", f.configuration))


def _finite(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def refresh(store: Store, benchmarks: Iterable[str] | None = None) -> list[Floor]:
    """Recompute the floors of these benchmarks (every stored one when None) from the store's counted
    repeats and store them, replacing their old floors. Returns them."""
    names = None if benchmarks is None else sorted(set(benchmarks))
    found: list[Floor] = []
    for benchmark in names if names is not None else [None]:
        frame = metric_frame(store, benchmark=benchmark)
        found += floors_of(frame)
    stored.replace_floors(store, [f.as_row() for f in found], names)
    return found
