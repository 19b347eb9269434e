"""HPCC section: the summary table, mean +- standard deviation over valid repeats, one column per
configuration (node count x processes per node x layout), the SMP efficiency, and the balance of
network to compute.

SMP efficiency (the HPCC studies' question: what does sharing a node cost each process?): for
each metric, the value per process with k processes per node against the value per process
with 1 process per node on the same node count, in %. 100% means sharing the node costs
nothing; 60% that each process gets 60% of what it had alone. HPCC's Star and Single values
are already per process (every process runs its own copy); HPL, PTRANS, MPI RandomAccess and
MPI FFT are whole-job rates, divided by the processes; latencies and ring bandwidths are per
process pair as they are. For a lower-is-better value (a latency) the ratio is turned round,
so above 100% is better there too.

Balance = random-ring bandwidth / HPL rate per process, in byte/flop: how many bytes each
process can exchange with the others for every flop it computes, the ratio that tells a
machine built for communication-bound codes from one built for the HPL list.

Runs are averaged only when they are the same configuration (analysis/identity.py): two BLAS, two NB,
a thread count stated and one not are separate columns. A value HPCC prints as -1 (a figure that does
not apply: one process has no pair to time) is absent, never averaged. The SMP efficiency compares a
configuration only with 1-per-node runs of the same threads and every other key; where the thread
count is not stated it says it cannot be computed rather than compare 1-thread with 4-thread ranks.

Which metrics are rows (in which order, named and shown how) and which enter the balance is
HPCC's declaration (bench/declare.py): the metrics with an `hpcc` use, in the role `summary`
(a row), `ring-bandwidth`, `hpl-rate` or `processes`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from clusterbench.analysis import identity, shape
from clusterbench.analysis.dataset import Dataset
from clusterbench.bench import registry
from clusterbench.report import repeats
from clusterbench.report.model import Section, Table

BALANCE_ROLES = {"ring-bandwidth": "GB/s", "hpl-rate": "Gflop/s", "processes": ""}  # role -> unit it enters in
WHOLE_JOB = ("HPL_", "PTRANS", "MPIRandomAccess", "MPIFFT")  # rates of all processes together (HPCC's names)


def summary_rows() -> list[tuple[str, str, str, Callable[[float], float]]]:
    """(metric, row label, unit shown, conversion to it) per summary row, in the declared order."""
    return [(d.spec.name, d.use.title, d.use.unit or d.spec.unit, d.spec.shown(d.use))
            for d in registry.drawn("hpcc", "summary")]


def balance_metrics() -> dict[str, tuple[str, Callable[[float], float]]]:
    """role -> (metric, conversion to the role's unit) for the balance."""
    return {d.use.role: (d.spec.name, d.spec.shown(d.use, BALANCE_ROLES[d.use.role] or d.spec.unit))
            for d in registry.drawn("hpcc") if d.use.role in BALANCE_ROLES}


def benchmarks() -> list[str]:
    return list(dict.fromkeys(d.benchmark for d in registry.drawn("hpcc")))


def metrics() -> set[str]:
    return {d.spec.name for d in registry.drawn("hpcc")}


LABEL_KEYS = ("nodes", "ranks", "threads", "p", "q", "layout")  # what the label says in words
# What may differ between a configuration and its 1-per-node reference in the SMP efficiency: how many
# processes ran and how they were laid out (and the N sized to them); everything else must be equal.
SMP_FREE = ("ranks", "p", "q", "layout", "n", "grids")
NOT_APPLICABLE = -1.0  # what HPCC prints where a figure does not apply (no pair to time): never a value


def configurations(data: Dataset, run_ids: list[str]) -> pd.DataFrame:
    """Per run (index): nodes, processes, ppn (processes per node), threads (NaN where no file or tag
    states them: never 1 by default), grid, layout, the configuration's label ('2 nodes x 2 per node,
    1x4 (mpi)', with 'blas=..., nb=...' when those split it further) and `config`, its group number: runs
    share one exactly when every identity key is equal (analysis/identity.py), so two BLAS or two NB
    are never averaged as repeats."""
    keys = repeats.identities(data, run_ids)

    def column(name: str) -> pd.Series:
        return pd.to_numeric(keys[name], errors="coerce") if name in keys else pd.Series(float("nan"), index=keys.index)

    nodes, ranks, threads = column("nodes"), column("ranks"), column("threads")
    p, q = column("p"), column("q")
    layout = keys["layout"].fillna("").astype(str) if "layout" in keys else pd.Series("", index=keys.index)
    out = pd.DataFrame({"nodes": nodes, "processes": ranks, "ppn": ranks / nodes, "threads": threads,
                        "grid": [f"{int(a)}x{int(b)}" if a == a and b == b else "" for a, b in zip(p, q, strict=True)],
                        "layout": layout}, index=keys.index)
    varying = identity.varying_keys(keys)
    out["config"] = identity.configuration_ids(keys, varying)
    some_threads = bool(threads.notna().any())
    base = [_label(r, some_threads) for r in out.itertuples()]
    extra = [k for k in varying if k not in LABEL_KEYS and k != "benchmark"
             and keys[k].astype(object).map(identity.shown).groupby(base).nunique().gt(1).any()]
    extra = [k for k in extra if not (k.startswith("tag:") and (k[4:] in extra or k[4:] in LABEL_KEYS))]  # filled
    out["label"] = [", ".join([b, *(f"{shape.name(k)}={identity.shown(keys.at[i, k])}" for k in extra)])
                    for b, i in zip(base, keys.index, strict=True)]
    return out


def _label(r, some_threads: bool) -> str:
    nodes = "nodes not stated" if r.nodes != r.nodes else f"{r.nodes:g} node{'s' if r.nodes != 1 else ''}"
    per = "? per node" if r.ppn != r.ppn else f"{r.ppn:g} per node"
    text = f"{nodes} x {per}"
    if r.threads != r.threads:
        text += " x threads not stated" if some_threads else ""
    elif r.threads != 1:
        text += f" x {r.threads:g} threads"
    if r.grid:
        text += f", {r.grid}"
    return text + (f" ({r.layout})" if r.layout else "")


def section(data: Dataset, _options) -> Section | None:
    runs = [r for r in data.runs_of(*benchmarks()) if r["valid"]]
    if not runs:
        return None
    flagged = [r["id"] for r in runs if not repeats.counted(data, r["id"])]
    runs = [r for r in runs if r["id"] not in set(flagged)]
    paragraphs = []
    if flagged:
        paragraphs.append(f"{len(flagged)} flagged HPCC run(s) are not averaged: "
                          + repeats.runs_flags(data, flagged[:20]) + (" ..." if len(flagged) > 20 else ""))
    if not runs:
        return Section("hpcc", "HPC Challenge", paragraphs, [])
    configs = configurations(data, [r["id"] for r in runs])
    order = configs.sort_values(["nodes", "ppn", "threads", "grid", "layout", "label"],
                                na_position="last").drop_duplicates("config")
    labels = list(order["label"])
    by_config = dict(zip(order["config"], order["label"], strict=True))
    label_of = configs["config"].map(by_config)
    values = _values(data, configs.index)
    table = Table("hpcc-summary", "HPCC summary: mean +- standard deviation over valid repeats (n, CV)",
                  ["metric", "unit", *labels], [], note=repeats.note(
                      "A value HPCC prints as -1 (not applicable: no pair of processes to time) is absent."))
    for metric, label, unit, shown in summary_rows():
        if metric not in values:
            continue
        cells = _cells(shown(values[metric]), label_of, labels)
        if any(cells):
            table.rows.append([label, unit, *cells])
    balance = _balance(values)
    if balance is not None:
        cells = _cells(balance, label_of, labels)
        if any(cells):
            table.rows.append(["Balance: random-ring bandwidth / HPL per process", "byte/flop", *cells])
    members = label_of.groupby(label_of).groups
    table.rows.append(["runs", "", *[sorted(members[label]) for label in labels]])
    tables = [table]
    smp, refused = _smp_efficiency(values, configs.assign(label=label_of), data)
    if smp is not None:
        tables.append(smp)
    if refused:
        paragraphs.append(refused)
    return Section("hpcc", "HPC Challenge", [
        f"{len(runs)} valid HPCC runs in {len(labels)} configuration(s) (node count x processes per node, "
        "with the threads, process grid and layout, and any other key that tells runs apart: two BLAS or two "
        "NB are two configurations). Each cell is mean +- standard deviation (n = number of valid repeats, CV = "
        "standard deviation / mean); invalid runs are listed in the HPL section.", *paragraphs], tables)


def _values(data: Dataset, run_ids: pd.Index) -> pd.DataFrame:
    """run id x metric: each run's value (valid values only), in one pivot. HPCC's -1 (and any negative
    value: no HPCC figure is below zero) means "does not apply" and is absent, never averaged."""
    rows = data.of(*metrics())
    rows = rows[rows["benchmark"].isin(benchmarks()) & rows["run_id"].isin(run_ids)]
    rows = rows[~(rows["value"].astype(float) < 0)]
    if rows.empty:
        return pd.DataFrame(index=run_ids)
    return rows.pivot_table(index="run_id", columns="name", values="value", aggfunc="first").reindex(run_ids)


def _cells(values: pd.Series, labels: pd.Series, order: list[str]) -> list[str | None]:
    """'mean +- std (n=3, CV 1.2%)' per configuration (', high CV' above the threshold)."""
    values = values[values.notna() & (values >= 0)]
    groups = {label: list(v) for label, v in values.groupby(labels.reindex(values.index))}
    out = []
    for label in order:
        stats = repeats.describe(groups.get(label, []))
        if not stats["n"]:
            out.append(None)
            continue
        std = f" +- {stats['std']:.3g}" if stats["std"] is not None else ""
        cv = f", CV {100 * stats['cv']:.1f}%" if stats["cv"] is not None else ""
        high = f", {repeats.HIGH_CV}" if stats["high"] else ""
        out.append(f"{stats['mean']:.4g}{std} (n={stats['n']}{cv}{high})")
    return out


def _balance(values: pd.DataFrame) -> pd.Series | None:
    """GB/s per process / Gflop/s per process = byte/flop, per run."""
    inputs = balance_metrics()
    if set(inputs) != set(BALANCE_ROLES) or any(inputs[r][0] not in values for r in BALANCE_ROLES):
        return None
    (ring_name, ring), (hpl_name, hpl), (procs_name, procs) = (inputs[r] for r in
                                                               ("ring-bandwidth", "hpl-rate", "processes"))
    ring_v, hpl_v, procs_v = ring(values[ring_name]), hpl(values[hpl_name]), procs(values[procs_name])
    usable = (ring_v > 0) & (hpl_v > 0) & (procs_v > 0)
    return (ring_v / (hpl_v / procs_v))[usable]


def per_process(metric: str, values: pd.Series, processes: pd.Series) -> pd.Series:
    """A metric's value per process: whole-job rates divided by the processes, the others as they are."""
    return values / processes if metric.startswith(WHOLE_JOB) else values


def _smp_efficiency(values: pd.DataFrame, configs: pd.DataFrame, data: Dataset) -> tuple[Table | None, str]:
    """Per metric: per-process value at k processes per node / at 1 per node, on the same node count and
    threads and every other identity key equal (but the processes, grid, layout and N). A configuration
    whose threads (or node count) no file or tag states has no reference it can be compared with: the
    table says so instead of comparing single-thread ranks with 4-thread ranks."""
    procs_metric = balance_metrics().get("processes", (None,))[0]
    processes = configs["processes"]
    if procs_metric in values:
        processes = values[procs_metric].fillna(processes)
    keys = repeats.identities(data, configs.index)
    match = [k for k in identity.varying_keys(keys) if k not in SMP_FREE]
    same = identity.configuration_ids(keys, match) if match else pd.Series(0, index=keys.index)
    known = configs["threads"].notna() & configs["nodes"].notna()
    base = configs[(configs["ppn"] == 1) & known]
    shared = configs[configs["ppn"] > 1].sort_values(["nodes", "ppn", "threads", "grid", "layout"])
    pairs, unknown = [], []
    for label, rec in shared.drop_duplicates("label").set_index("label").iterrows():
        if rec.threads != rec.threads or rec.nodes != rec.nodes:
            unknown.append(label)
            continue
        first = configs.index[configs["label"] == label][0]
        ids = base.index[(base["nodes"] == rec.nodes) & (base["threads"] == rec.threads)
                         & (same.reindex(base.index) == same[first])]
        if len(ids):
            pairs.append((label, ids))
        elif ((configs["ppn"] == 1) & configs["threads"].isna()).any():
            unknown.append(label)
    refused = ""
    if unknown:
        refused = ("SMP efficiency cannot be computed for " + "; ".join(unknown[:10])
                   + (" ..." if len(unknown) > 10 else "") + ": the thread count (or node count) of these runs or "
                   "of their 1-per-node reference is not stated, and single-thread ranks are never compared with "
                   "multi-thread ones. Import with --tag threads=K (and nodes=K) to state it.")
    if not pairs:
        return None, refused
    table = Table("hpcc-smp-efficiency", "SMP efficiency: value per process with k processes per node "
                  "against 1 per node on the same node count (%)", ["metric", *[label for label, _ in pairs]], [])
    directions = {metric: not metric.endswith("Latency_usec") for metric, *_ in summary_rows()}
    for metric, label, _unit, shown in summary_rows():
        if metric not in values:
            continue
        each = per_process(metric, shown(values[metric]), processes)
        cells = []
        for config, base_ids in pairs:
            mine = each[configs.index[configs["label"] == config]].mean()
            alone = each[base_ids].mean()
            if not (mine == mine and alone == alone) or mine <= 0 or alone <= 0:
                cells.append(None)
                continue
            ratio = mine / alone if directions[metric] else alone / mine
            cells.append(round(100 * ratio, 1) if math.isfinite(ratio) else None)
        if any(c is not None for c in cells):
            table.rows.append([label, *cells])
    runs = [sorted({*configs.index[configs["label"] == config], *base_ids}) for config, base_ids in pairs]
    table.rows.append(["runs", *runs])
    table.note = ("100% = each process does as well as with its node to itself (1 process per node, same node "
                  "count, threads and every other key, all its grids and layouts pooled). HPL, PTRANS, MPI "
                  "RandomAccess and MPI FFT are divided by the processes; Star/Single values are per process "
                  "already; for latencies the ratio is turned round (above 100% is better). Means over repeats.")
    return (table if len(table.rows) > 1 else None), refused
