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

Which metrics are rows (in which order, named and shown how) and which enter the balance is
HPCC's declaration (bench/declare.py): the metrics with an `hpcc` use, in the role `summary`
(a row), `ring-bandwidth`, `hpl-rate` or `processes`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from clusterbench.analysis.dataset import Dataset
from clusterbench.bench import registry
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


def configurations(data: Dataset, run_ids: list[str]) -> pd.DataFrame:
    """Per run (index): nodes, processes, ppn (processes per node), threads, grid, layout and the
    configuration's label ('2 nodes x 2 per node, 1x4 (mpi)')."""
    keys = data.run_keys().reindex(run_ids)

    def column(name: str, default=None) -> pd.Series:
        return keys[name] if name in keys else pd.Series(default, index=keys.index, dtype=object)

    nodes = pd.to_numeric(column("nodes", 1), errors="coerce").fillna(1).astype(int)
    ranks = pd.to_numeric(column("ranks"), errors="coerce")
    threads = pd.to_numeric(column("threads"), errors="coerce").fillna(1).astype(int)
    p, q = pd.to_numeric(column("p"), errors="coerce"), pd.to_numeric(column("q"), errors="coerce")
    ppn = ranks / nodes
    out = pd.DataFrame({"nodes": nodes, "processes": ranks, "ppn": ppn, "threads": threads,
                        "grid": [f"{int(a)}x{int(b)}" if a == a and b == b else "" for a, b in zip(p, q, strict=True)],
                        "layout": column("layout").fillna("")}, index=keys.index)
    out["label"] = [_label(r) for r in out.itertuples()]
    return out


def _label(r) -> str:
    per = "? per node" if r.ppn != r.ppn else f"{r.ppn:g} per node"
    text = f"{r.nodes} node{'s' if r.nodes != 1 else ''} x {per}"
    if r.threads != 1:
        text += f" x {r.threads} threads"
    if r.grid:
        text += f", {r.grid}"
    return text + (f" ({r.layout})" if r.layout else "")


def section(data: Dataset, _options) -> Section | None:
    runs = [r for r in data.runs_of(*benchmarks()) if r["valid"]]
    if not runs:
        return None
    configs = configurations(data, [r["id"] for r in runs])
    order = configs.sort_values(["nodes", "ppn", "threads", "grid", "layout"]).drop_duplicates("label")
    labels = list(order["label"])
    values = _values(data, configs.index)
    table = Table("hpcc-summary", "HPCC summary: mean +- standard deviation over valid repeats",
                  ["metric", "unit", *labels], [])
    for metric, label, unit, shown in summary_rows():
        if metric not in values:
            continue
        cells = _cells(shown(values[metric]), configs["label"], labels)
        if any(cells):
            table.rows.append([label, unit, *cells])
    balance = _balance(values)
    if balance is not None:
        cells = _cells(balance, configs["label"], labels)
        if any(cells):
            table.rows.append(["Balance: random-ring bandwidth / HPL per process", "byte/flop", *cells])
    members = configs.groupby("label").groups
    table.rows.append(["runs", "", *[sorted(members[label]) for label in labels]])
    tables = [table]
    if (smp := _smp_efficiency(values, configs)) is not None:
        tables.append(smp)
    return Section("hpcc", "HPC Challenge", [
        f"{len(runs)} valid HPCC runs in {len(labels)} configuration(s) (node count x processes per node, "
        "with the threads, process grid and layout). Each cell is mean +- standard deviation (n = number of "
        "valid repeats); invalid runs are listed in the HPL section."], tables)


def _values(data: Dataset, run_ids: pd.Index) -> pd.DataFrame:
    """run id x metric: each run's value (valid values only), in one pivot."""
    rows = data.of(*metrics())
    rows = rows[rows["benchmark"].isin(benchmarks()) & rows["run_id"].isin(run_ids)]
    if rows.empty:
        return pd.DataFrame(index=run_ids)
    return rows.pivot_table(index="run_id", columns="name", values="value", aggfunc="first").reindex(run_ids)


def _cells(values: pd.Series, labels: pd.Series, order: list[str]) -> list[str | None]:
    stats = values.groupby(labels.reindex(values.index)).agg(["mean", "std", "count"])
    out = []
    for label in order:
        if label not in stats.index or not stats.loc[label, "count"]:
            out.append(None)
            continue
        s = stats.loc[label]
        std = f" +- {s['std']:.3g}" if s["count"] > 1 else ""
        out.append(f"{s['mean']:.4g}{std} (n={int(s['count'])})")
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


def _smp_efficiency(values: pd.DataFrame, configs: pd.DataFrame) -> Table | None:
    """Per metric: per-process value at k processes per node / at 1 per node, same node count and threads."""
    procs_metric = balance_metrics().get("processes", (None,))[0]
    processes = configs["processes"]
    if procs_metric in values:
        processes = values[procs_metric].fillna(processes)
    base = configs[configs["ppn"] == 1]
    shared = configs[configs["ppn"] > 1].sort_values(["nodes", "ppn", "threads", "grid", "layout"])
    pairs = [(label, base.index[(base["nodes"] == rec.nodes) & (base["threads"] == rec.threads)])
             for label, rec in shared.drop_duplicates("label").set_index("label").iterrows()]
    pairs = [(label, ids) for label, ids in pairs if len(ids)]
    if not pairs:
        return None
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
                  "count and threads, all its grids and layouts pooled). HPL, PTRANS, MPI RandomAccess and MPI "
                  "FFT are divided by the processes; Star/Single values are per process already; for latencies "
                  "the ratio is turned round (above 100% is better).")
    return table if len(table.rows) > 1 else None
