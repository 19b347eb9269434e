"""The stored runs a report or a comparison is about, read once: runs, the metrics the sections use, systems.

Only the metric names the caller asks for are read (a report: those its sections draw), so
a store of ten thousand HPCC runs is not decoded a hundred metrics at a time. A metric counts as valid only when
its run is valid too: an invalid run never contributes a value to a figure or a best.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field

import pandas as pd
from ClusterShell.NodeSet import NodeSet

from clusterbench.analysis.select import Selection, select_runs
from clusterbench.store.db import Store


@dataclass
class Dataset:
    runs: dict[str, dict]  # run id -> run (JSON columns decoded), selected only
    metrics: pd.DataFrame  # run_id, benchmark, name, value, unit, labels, valid, nodes, higher_is_better
    systems: dict[str, dict] = field(default_factory=dict)  # system id -> stored info

    def of(self, *names: str, valid: bool | None = True) -> pd.DataFrame:
        """Rows of these metrics (only valid ones unless valid=None)."""
        rows = self.metrics[self.metrics["name"].isin(names)]
        return rows if valid is None else rows[rows["valid"] == valid]

    def runs_of(self, *benchmarks: str) -> list[dict]:
        return [r for r in self.runs.values() if r["benchmark"] in benchmarks]


def load(store: Store, selection: Selection, names: set[str] | None) -> Dataset:
    """The selected runs and their metrics of these names (all metrics for None)."""
    runs = {r["id"]: r for r in select_runs(store, selection)}
    for run in runs.values():
        run["node_count"] = node_count(run)
    records = []
    for row in store.metric_values(names):
        run = runs.get(row["run_id"])
        if run is None:
            continue
        records.append({"run_id": row["run_id"], "benchmark": run["benchmark"], "name": row["name"],
                        "value": row["value"], "unit": row["unit"], "labels": json.loads(row["labels"]),
                        "valid": bool(row["valid"]) and bool(run["valid"]), "nodes": run["node_count"],
                        "higher_is_better": bool(row["higher_is_better"])})
    columns = ["run_id", "benchmark", "name", "value", "unit", "labels", "valid", "nodes", "higher_is_better"]
    systems = {}
    wanted = {r["system_id"] for r in runs.values() if r.get("system_id")}
    for row in store.systems():
        if row["id"] in wanted:
            systems[row["id"]] = {"hostname": row["hostname"], "info": json.loads(row["info"])}
    return Dataset(runs, pd.DataFrame(records, columns=columns), systems)


def node_count(run: dict) -> int:
    """Nodes a run used: its `nodes` parameter, an imported file's host count, else its node list."""
    params = run["params"]
    for key in ("nodes", "hosts"):
        if isinstance(params.get(key), int) and params[key] > 0:
            return params[key]
    if run.get("nodes"):
        try:
            return max(1, len(NodeSet(run["nodes"])))
        except Exception:  # a node list that is not a node set (an imported free-text field)
            return 1
    return 1


def blas_of(run: dict) -> str:
    """The BLAS asked for, else the one the processes were seen to load, else 'default'."""
    return str(run["params"].get("blas") or run["facts"].get("blas_loaded_variant") or "default")


def varying(runs: list[dict], keys: tuple[str, ...]) -> list[str]:
    """The keys, in order, that each split the runs further than the keys before them: enough
    to tell the series apart, without a tag that only repeats what the campaign already says."""
    chosen: list[str] = []
    groups = 1
    for key in keys:
        combos = {json.dumps([_field(r, k) for k in (*chosen, key)], sort_keys=True, default=str) for r in runs}
        if len(combos) > groups:
            chosen.append(key)
            groups = len(combos)
    return chosen


def describe(run: dict, keys: list[str]) -> str:
    """'2 nodes, interconnect=tcp, bind_to=core': a series label from the keys that vary
    (a key the run does not have is left out)."""
    parts = []
    for key in keys:
        value = _field(run, key)
        if key == "node_count":
            parts.append(f"{value} node{'s' if value != 1 else ''}")
        elif value is not None:
            parts.append(f"{key.removeprefix('tag:')}={value}")
    return ", ".join(parts)


def origin(run: dict) -> str | None:
    """The campaign of a run, or for an imported one the folder it was imported from: results
    that came together (one study's folder) stay together."""
    if run.get("campaign"):
        return run["campaign"]
    source = run["facts"].get("source_file")
    return source.rstrip("/").split("/")[-2] if source and "/" in source else None


def tag_keys(runs: list[dict]) -> tuple[str, ...]:
    return tuple(sorted({f"tag:{k}" for r in runs for k in r["tags"]}))


def _field(run: dict, key: str):
    if key == "node_count":
        return run["node_count"]
    if key == "origin":
        return origin(run)
    if key in ("campaign", "source"):
        return run.get(key)
    if key.startswith("tag:"):
        return run["tags"].get(key[4:])
    return run["params"].get(key)


def group_values(rows: pd.DataFrame, key) -> dict:
    """{group key: (values, run ids)} in first-seen order, for rows with a 'value' column."""
    out: dict = defaultdict(lambda: ([], []))
    for rec in rows.itertuples(index=False):
        values, ids = out[key(rec)]
        values.append(rec.value)
        ids.append(rec.run_id)
    return dict(out)
