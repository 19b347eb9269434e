"""The stored runs a report or a comparison is about, read once: runs, the metrics the sections use, systems.

Only the metric names the caller asks for are read (a report: those its sections draw), so
a store of ten thousand HPCC runs is not decoded a hundred metrics at a time; a report's dataset
reads each name when a section first asks for it (`lazy`), so a metric only one section needs for
a few runs (HPL's time, for pinning studies) is never read for 80,000 others. Rows are built as
columns, and each distinct labels text is decoded once (an IMB sweep repeats the same 26). A
metric counts as valid only when its run is valid too: an invalid run never contributes a value
to a figure or a best.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from clusterbench.analysis import flags as run_flags_module
from clusterbench.analysis.applicable import drop_not_applicable
from clusterbench.analysis.identity import JOB_KEYS, IdentityTable, effective_placement
from clusterbench.analysis.peak import Peak, measured_peaks, run_peak
from clusterbench.analysis.plausibility import rmax_metrics, suspect_runs
from clusterbench.analysis.select import Selection, node_count, select_runs  # noqa: F401  (node_count: its home)
from clusterbench.store import report_reads
from clusterbench.store.db import Store


@dataclass
class Dataset:
    runs: dict[str, dict]  # run id -> run (JSON columns decoded), selected only
    metrics: pd.DataFrame  # run_id, benchmark, name, value, unit, labels, valid, nodes, higher_is_better
    systems: dict[str, dict] = field(default_factory=dict)  # system id -> stored info
    _keys: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    _reader: Callable[[set[str]], pd.DataFrame] | None = field(default=None, repr=False, compare=False)
    _read: set[str] = field(default_factory=set, repr=False, compare=False)

    _parts: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False, compare=False)
    _parts_of: pd.DataFrame | None = field(default=None, repr=False, compare=False)  # the frame they split
    rpeak_node_gflops: float | None = None  # given with --rpeak-node
    measured: dict[str, Peak] = field(default_factory=dict)  # system id -> node peak its clock runs measured
    _identity: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    _identities: IdentityTable | None = field(default=None, repr=False, compare=False)
    _flags: dict[str, tuple[dict, tuple[str, ...]]] = field(default_factory=dict, repr=False, compare=False)
    _counted: dict[str, tuple[dict, bool]] = field(default_factory=dict, repr=False, compare=False)

    def identity(self) -> pd.DataFrame:
        """`identity.identity_frame` of the selected runs (index: run id; NaN where a run does not
        state a key): THE keys that decide which runs are repeats. Built once, and kept as an
        `IdentityTable` while the dataset lives: `identity_frame` of any of its runs (a section's
        baselines, a figure's configurations) is then taken from it, not worked out again."""
        if self._identity is None:
            hostnames = {sid: system.get("hostname") for sid, system in self.systems.items()}
            self._identities = IdentityTable(self.runs, hostnames)
            self._identity = self._identities.frame()
        return self._identity

    def known_identity(self, run_id: str) -> dict[str, object] | None:
        """`identity.run_identity` of a selected run when the dataset has worked out its identities
        already (a report has: its figures group by them), else None: the caller works it out for the
        runs it needs rather than for all of them."""
        if self._identities is None:
            return None
        return self._identities.identity(run_id, self.runs.get(run_id))

    def identity_signature(self, run_id: str) -> tuple | None:
        """`IdentityTable.signature` of a selected run when the dataset has worked out its identities
        already, else None. Comparable only between runs of this dataset."""
        if self._identities is None:
            return None
        return self._identities.signature(run_id, self.runs.get(run_id))

    def flags(self, run_id: str) -> list[str]:
        """`flags.run_flags` of one selected run (suspect included: `load` marks impossible runs).
        Decided once per run (tables and figures ask for the same run's flags again and again); a run
        replaced in `runs` is decided again."""
        run = self.runs[run_id]
        known = self._flags.get(run_id)
        if known is None or known[0] is not run:
            known = self._flags[run_id] = (run, tuple(run_flags_module.run_flags(run)))
        return list(known[1])

    def counts(self, run_id: str) -> bool:
        """`flags.counts` of one selected run (False for a run not selected), through `flags`."""
        run = self.runs.get(run_id)
        if run is None:
            return False
        known = self._counted.get(run_id)
        if known is None or known[0] is not run:
            known = self._counted[run_id] = (run, not run_flags_module.NOT_COUNTED.intersection(self.flags(run_id)))
        return known[1]

    def counted_ids(self) -> set[str]:
        """The selected runs whose flags let them be a best, a baseline, a history point (flags.counts)."""
        return {rid for rid in self.runs if self.counts(rid)}

    def peak_of(self, run: dict) -> Peak | None:
        """The node peak this run is held against: measured where stored, else Rpeak (peak.run_peak)."""
        return run_peak(run, self.systems, self.rpeak_node_gflops, self.measured)

    def of(self, *names: str, valid: bool | None = True) -> pd.DataFrame:
        """Rows of these metrics (only valid ones unless valid=None), read now if not yet read.
        Served from one frame per name: not a scan of every value read so far per call."""
        missing = set(names) - self._read
        if self._reader is not None and missing:
            self._read |= missing
            more = self._reader(missing)
            if len(more):
                self._split()
                self.metrics = more if self.metrics.empty else pd.concat([self.metrics, more], ignore_index=True)
                self._parts.update(dict(tuple(more.groupby("name", sort=False))))
                self._parts_of = self.metrics
        self._split()
        found = [self._parts[n] for n in dict.fromkeys(names) if n in self._parts]
        if not found:
            rows = self.metrics.iloc[0:0]
        else:
            rows = found[0] if len(found) == 1 else pd.concat(found, ignore_index=True)
        return rows if valid is None else rows[rows["valid"] == valid]

    def _split(self) -> None:
        """One frame per metric name, made again when `metrics` was replaced from outside."""
        if self._parts_of is not self.metrics:
            self._parts = dict(tuple(self.metrics.groupby("name", sort=False))) if len(self.metrics) else {}
            self._parts_of = self.metrics

    def runs_of(self, *benchmarks: str) -> list[dict]:
        return [r for r in self.runs.values() if r["benchmark"] in benchmarks]

    def run_keys(self) -> pd.DataFrame:
        """One row per selected run (index: run id), one column per key a figure can be drawn by:
        every parameter with a plain value (a list such as `grids` as '1x4,2x2'), every tag as
        `tag:K`, and the derived `nodes` (node count: `identity.known_node_count`, a `nodes` tag
        given at import included; NaN when unknown, never 1), `system` (the stored system's host
        name, else a `system` tag), `cluster` and `host_group` (an imported job report's, else a
        tag's), `blas_loaded` (the BLAS the run loaded, when recorded), `origin` and `benchmark`.
        A tag fills the parameter the file does not state (`--tag threads=4` -> `threads`).
        Built once: every figure reads it."""
        if self._keys is None:
            ids = list(self.runs)
            runs = list(self.runs.values())
            params = _key_columns([run["params"] for run in runs], "", ids)
            params = params[[c for c in params.columns if not c.startswith(("tag:", "@"))]]  # never a tag's name
            tags = _key_columns([run["tags"] for run in runs], "tag:", ids)
            keys = pd.concat([params, tags], axis=1) if len(tags.columns) else params
            found = _derived_columns(runs, self.systems)  # one pass over the runs for every derived key
            derived = pd.DataFrame({"nodes": _counts(found["nodes"]), "benchmark": found["benchmark"],
                                    "origin": found["origin"], "system": found["system"]}, index=ids)
            for key in JOB_KEYS:  # an imported job report's cluster and host group (always columns: None unknown)
                derived[key] = pd.Series(found[key], index=ids, dtype=object)
            loaded = found["blas_loaded"]
            if any(loaded):
                derived["blas_loaded"] = loaded
            effective = found["effective"]
            for key in sorted({k for e in effective for k in e}):  # what the launcher did where nothing was asked
                column = pd.Series([e.get(key) for e in effective], index=ids, dtype=object)
                derived[key] = column.where(column.notna(), keys[key]) if key in keys else column
            for key in ("system", *JOB_KEYS):  # a tag fills what neither the store nor the file says
                if f"tag:{key}" in keys:
                    derived[key] = derived[key].where(derived[key].notna(), keys[f"tag:{key}"])
            keys = _filled_by_tags(keys)
            self._keys = pd.concat([keys.drop(columns=[c for c in derived if c in keys]), derived], axis=1)
        return self._keys


def _derived_columns(runs: list[dict], systems: dict[str, dict]) -> dict[str, list]:
    """Per run, in order: what `run_keys` derives (node count, benchmark, origin, stored host name, the
    job report's cluster and host group as text or None, the BLAS loaded, the effective placement),
    in one pass: a list comprehension per key over 100,000 runs cost more than the keys themselves."""
    out: dict[str, list] = {k: [] for k in ("nodes", "benchmark", "origin", "system", *JOB_KEYS, "blas_loaded",
                                              "effective")}
    nodes, benchmark, origins, system = out["nodes"], out["benchmark"], out["origin"], out["system"]
    jobs = [out[key] for key in JOB_KEYS]
    loaded, effective = out["blas_loaded"], out["effective"]
    for run in runs:
        nodes.append(run.get("node_count"))
        benchmark.append(run["benchmark"])
        origins.append(origin(run))
        system.append((systems.get(run.get("system_id") or "") or {}).get("hostname"))
        facts = run.get("facts") or {}
        job = facts.get("job") or {}
        for column, key in zip(jobs, JOB_KEYS, strict=True):
            value = job.get(key)
            column.append(str(value) if value else None)
        loaded.append(facts.get("blas_loaded_variant"))
        effective.append(effective_placement(run))
    return out


def _counts(values: list) -> pd.Series | list:
    """Node counts as a column: integers when all are known, else floats with NaN for the unknown."""
    if all(v is not None for v in values):
        return values
    return pd.Series([float("nan") if v is None else float(v) for v in values], dtype="float64").to_numpy()


FILLED_PARAMS = ("ranks", "threads", "blas", "mpi", "interconnect")  # a tag given at import fills these


def _filled_by_tags(keys: pd.DataFrame) -> pd.DataFrame:
    """A `tag:K` given at import fills parameter K where the file does not state it (as identity does)."""
    for key in FILLED_PARAMS:
        tag = f"tag:{key}"
        if tag not in keys:
            continue
        given = keys[tag]
        if key in ("ranks", "threads"):
            given = pd.to_numeric(given, errors="coerce").where(lambda v: v > 0)
        keys[key] = keys[key].where(keys[key].notna(), given) if key in keys else given
    return keys


COLUMNS = ["run_id", "benchmark", "name", "value", "unit", "labels", "valid", "nodes", "higher_is_better"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a report reads and shapes its data: it makes
    millions of small objects and keeps most of them (100,000 decoded runs), and each collection
    would walk them all again: measured, 70% of reading 520,000 metric values. Nothing here makes
    reference cycles worth collecting early; the collector is back on (and runs) afterwards."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load(store: Store, selection: Selection, names: set[str] | None, lazy: bool = False,
         rpeak_node_gflops: float | None = None) -> Dataset:
    """The selected runs and their metrics of these names (all metrics for None); with `lazy`, each
    name is read when `Dataset.of` first asks for it (the store must stay open until then).

    Each run's `node_count` is known or None (never a default 1), and a run whose Rmax is above
    what its known nodes can do (plausibility.py, against the measured peak or Rpeak, the
    user's `rpeak_node_gflops` included) carries `run["suspect"]` = the reason, which
    flags.run_flags reads wherever the run goes."""
    runs = {r["id"]: r for r in select_runs(store, selection)}
    for run in runs.values():
        run["node_count"] = node_count(run)
    systems = {}
    wanted = {r["system_id"] for r in runs.values() if r.get("system_id")}
    for row in store.systems():
        if row["id"] in wanted:
            systems[row["id"]] = {"hostname": row["hostname"], "info": json.loads(row["info"])}
    empty = pd.DataFrame(columns=COLUMNS)
    if lazy and names is not None:
        data = Dataset(runs, empty, systems, _reader=lambda more: metric_frame(store, more, runs))
    else:
        data = Dataset(runs, metric_frame(store, names, runs) if runs else empty, systems)
    data.rpeak_node_gflops = rpeak_node_gflops
    data.measured = measured_peaks(store, systems) if systems else {}
    _mark_suspect(store, data)
    return data


def _mark_suspect(store: Store, data: Dataset) -> None:
    """Set run["suspect"] on the runs whose Rmax is impossible; reads the Rmax values only of the
    runs that have both a known node count and a peak (none for a store of imported files without
    --rpeak-node)."""
    rmax = rmax_metrics()
    benchmarks = {b for b, _ in rmax}
    judged = {rid: run for rid, run in data.runs.items() if run["benchmark"] in benchmarks
              and run.get("node_count") is not None and data.peak_of(run) is not None}
    if not judged:
        return
    names = {name for _, name in rmax}
    if data._reader is not None and data.metrics.empty:  # lazy: read once for the judgement and the sections
        data.of(*names, valid=None)
        rows = data.metrics  # this one read, in the store's order: the rows metric_frame gives, of all runs
        values = rows[rows["name"].isin(names) & rows["run_id"].isin(list(judged))] if len(rows) else rows
    else:
        values = metric_frame(store, names, judged)
    values = values[values["valid"]] if len(values) else values
    for run_id, reason in suspect_runs(judged, values, data.peak_of).items():
        data.runs[run_id]["suspect"] = reason


def metric_frame(store: Store, names: set[str] | None, runs: dict[str, dict]) -> pd.DataFrame:
    """The metric rows of these names that belong to these runs, one column at a time."""
    rows = report_reads.metric_values(store, names)  # the same rows, in one walk when most are wanted
    if not rows:
        return pd.DataFrame(columns=COLUMNS)
    run_id, name, value, unit, higher, labels, valid = (np.array(c, dtype=object) for c in zip(*rows, strict=True))
    run_codes, run_ids = pd.factorize(run_id)  # per run, not per row: a run has dozens of values
    selected = [runs.get(rid) for rid in run_ids]
    keep = np.array([run is not None for run in selected], dtype=bool)[run_codes]
    if not keep.all():
        run_id, name, value, unit, higher, labels, valid, run_codes = (
            c[keep] for c in (run_id, name, value, unit, higher, labels, valid, run_codes))

    def per_run(what: Callable[[dict], object], dtype=object) -> np.ndarray:
        return np.array([what(run) if run is not None else None for run in selected], dtype=dtype)[run_codes]

    label_codes, texts = pd.factorize(labels)
    decoded = [json.loads(text) for text in texts]  # each distinct labels text once; the dicts are shared
    frame = pd.DataFrame({
        "run_id": pd.Series(run_id, dtype=object), "benchmark": pd.Series(per_run(lambda r: r["benchmark"]),
                                                                           dtype=object),
        "name": pd.Series(name, dtype=object), "value": pd.to_numeric(value, errors="coerce"),  # text: NaN
        "unit": pd.Series(unit, dtype=object),
        "labels": pd.Series(np.array(decoded + [None], dtype=object)[label_codes], dtype=object),
        "valid": valid.astype(bool) & per_run(lambda r: bool(r["valid"]), bool),
        "nodes": pd.to_numeric(per_run(lambda r: r.get("node_count")), errors="coerce"),  # NaN: not stated
        "higher_is_better": higher.astype(bool)})
    return drop_not_applicable(frame[COLUMNS]).reset_index(drop=True)


MAX_KEY_VALUE_CHARS = 200  # a longer parameter (a command line, a script) names no configuration
MAX_KEYS_PER_KIND = 200  # parameter (or tag) names over all runs: more are not figure keys


def _key_columns(mappings: list[dict], prefix: str, index: list[str]) -> pd.DataFrame:
    """The mappings (params or tags) as one column per key, each value made a plain key (`_plain`)
    where it is not already a number or a short text; at most MAX_KEYS_PER_KIND keys."""
    table = pd.DataFrame.from_records(mappings, index=index) if mappings else pd.DataFrame(index=index)
    table = table.iloc[:, :MAX_KEYS_PER_KIND]
    table = table.loc[:, [isinstance(c, str) and 0 < len(c) <= MAX_KEY_VALUE_CHARS for c in table.columns]]
    for column in table.columns:
        values = table[column]
        if pd.api.types.is_bool_dtype(values):
            table[column] = values.map(_plain)
        elif pd.api.types.is_numeric_dtype(values):
            continue
        elif (kind := pd.api.types.infer_dtype(values, skipna=True)) == "string":  # checked at once
            too_long = values.str.len() > MAX_KEY_VALUE_CHARS
            if too_long.any():
                table[column] = values.where(~too_long)
        elif kind != "empty":  # lists, mappings, mixed values: one by one
            table[column] = values.map(lambda v: None if v is None or v != v else _plain(v))
    table.columns = [f"{prefix}{c}" for c in table.columns]
    return table.dropna(axis=1, how="all")


def _plain(value):
    """A parameter's value as a figure key: numbers and short text as they are, a list of plain
    values joined by ',' (`grids`), anything else (a mapping, a long text) None: not a key."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        return value if len(value) <= MAX_KEY_VALUE_CHARS else None
    if isinstance(value, list):
        try:
            joined = ",".join(value)  # the usual list: names ('1x4', '2x2')
        except TypeError:
            if not all(isinstance(v, str | int | float) for v in value):
                return None
            joined = ",".join([str(v) for v in value])
        return joined if len(joined) <= MAX_KEY_VALUE_CHARS else None
    return None


def origin(run: dict) -> str | None:
    """The campaign of a run, or for an imported one the folder it was imported from: results
    that came together (one study's folder) stay together."""
    if run.get("campaign"):
        return run["campaign"]
    source = run["facts"].get("source_file")
    return source.rstrip("/").split("/")[-2] if source and "/" in source else None
