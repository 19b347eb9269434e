"""A small Python API over the results store, returning pandas DataFrames.

    >>> from clusterbench import api
    >>> api.metrics(name="hpl_gflops", valid_only=True)   # one row per stored value

Every row carries its run id, so any figure can be traced back to its run directory. The
database is opened read-only (it may sit on a read-only mount); a path where none exists yet reads
as empty and creates nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from clusterbench.store.db import Store
from clusterbench.store.queries import decoded_run


def runs(db: str | Path | None = None, benchmark: str | None = None,
         campaign: str | None = None, status: str | None = None,
         select: str | list[str] | None = None) -> pd.DataFrame:
    """One row per run, newest first; params/env/tags/facts decoded into dicts, `excluded` (the
    reason given to `clusterbench exclude`, or None), `notes` (a list of texts) and a `flags` list
    (analysis.flags: an excluded run has the flag `excluded`). `select`: selection terms as
    `results --select` takes them, e.g. "blas=openblas-serial,nodes>=4" (a bad term raises
    UserInputError)."""
    from clusterbench.analysis.flags import run_flags
    from clusterbench.analysis.select import parse_selection, select_rows

    with Store(db, read_only=True) as store:
        found = store.runs(benchmark=benchmark, campaign=campaign, status=status)
        if select:
            found = select_rows(store, parse_selection(select, store), found)
        rows = [decoded_run(r) for r in found]
    for run in rows:
        run["flags"] = run_flags(run)
    return pd.DataFrame(rows)


def metrics(db: str | Path | None = None, name: str | None = None, benchmark: str | None = None,
            valid_only: bool = False) -> pd.DataFrame:
    """One row per metric value, joined with its run (with its `excluded` reason and `notes`);
    parameters spread into columns."""
    with Store(db, read_only=True) as store:
        rows = [dict(r) for r in store.metric_rows(name=name, benchmark=benchmark, valid_only=valid_only)]
    records = []
    for r in rows:
        params = json.loads(r.pop("params"))
        labels = json.loads(r.pop("labels"))
        r["tags"] = json.loads(r["tags"])
        r["facts"] = json.loads(r["facts"] or "{}")
        records.append(r | {f"param.{k}": v for k, v in params.items()} | {f"label.{k}": v for k, v in labels.items()})
    return pd.DataFrame(records)


def stats(db: str | Path | None = None, campaign: str | None = None, metric: str | None = None,
          benchmark: str | None = None, group_by: list[str] | None = None) -> pd.DataFrame:
    """Statistics over valid repeats, one row per metric and configuration (see analysis.stats)."""
    from clusterbench.analysis.stats import metric_frame, summarise

    with Store(db, read_only=True) as store:
        return summarise(metric_frame(store, campaign, benchmark, metric), group_by)
