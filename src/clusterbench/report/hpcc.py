"""HPCC section: the summary table, mean +- standard deviation over valid repeats, one column
per node count x process layout, and the balance of network to compute.

Balance = random-ring bandwidth / HPL rate per process, in byte/flop: how many bytes each
process can exchange with the others for every flop it computes, the ratio that tells a
machine built for communication-bound codes from one built for the HPL list.
"""

from __future__ import annotations

from clusterbench.analysis.dataset import Dataset
from clusterbench.analysis.stats import describe as stats_of
from clusterbench.report.model import Section, Table

HPCC_SUMMARY = (  # (metric, label, unit, scale to the shown unit)
    ("HPL_Tflops", "HPL", "Gflop/s", 1000.0),
    ("StarDGEMM_Gflops", "DGEMM per process (star)", "Gflop/s", 1.0),
    ("SingleDGEMM_Gflops", "DGEMM single process", "Gflop/s", 1.0),
    ("PTRANS_GBs", "PTRANS", "GB/s", 1.0),
    ("MPIRandomAccess_GUPs", "RandomAccess (MPI)", "GUP/s", 1.0),
    ("StarRandomAccess_GUPs", "RandomAccess per process (star)", "GUP/s", 1.0),
    ("StarSTREAM_Triad", "STREAM Triad per process (star)", "GB/s", 1.0),
    ("SingleSTREAM_Triad", "STREAM Triad single process", "GB/s", 1.0),
    ("MPIFFT_Gflops", "FFT (MPI)", "Gflop/s", 1.0),
    ("StarFFT_Gflops", "FFT per process (star)", "Gflop/s", 1.0),
    ("MinPingPongLatency_usec", "Ping-pong latency, min", "us", 1.0),
    ("MaxPingPongBandwidth_GBytes", "Ping-pong bandwidth, max", "GB/s", 1.0),
    ("RandomlyOrderedRingLatency_usec", "Random-ring latency", "us", 1.0),
    ("RandomlyOrderedRingBandwidth_GBytes", "Random-ring bandwidth", "GB/s", 1.0),
)
METRICS = {m for m, *_ in HPCC_SUMMARY} | {"CommWorldProcs"}


def layout(run: dict) -> str:
    """'2 ranks x 1 thread, 1x2': how the processes were laid out."""
    p = run["params"]
    ranks = p.get("ranks", "?")
    threads = p.get("threads", 1)
    grid = f", {p['p']}x{p['q']}" if "p" in p and "q" in p else ""
    name = f" ({p['layout']})" if p.get("layout") else ""
    return f"{ranks} ranks x {threads} thread{'s' if threads != 1 else ''}{grid}{name}"


def section(data: Dataset, _options) -> Section | None:
    runs = [r for r in data.runs_of("hpcc") if r["valid"]]
    if not runs:
        return None
    groups: dict[tuple, list[str]] = {}
    for run in runs:
        groups.setdefault((run["node_count"], layout(run)), []).append(run["id"])
    keys = sorted(groups)
    values = _values(data)
    table = Table("hpcc-summary", "HPCC summary: mean +- standard deviation over valid repeats",
                  ["metric", "unit", *[f"{n} node{'s' if n != 1 else ''}, {lay}" for n, lay in keys]], [])
    for metric, label, unit, scale in HPCC_SUMMARY:
        cells = [_cell([values[i][metric] * scale for i in groups[k] if metric in values.get(i, {})])
                 for k in keys]
        if any(cells):
            table.rows.append([label, unit, *cells])
    balance = [_cell([b for i in groups[k] if (b := _balance(values.get(i, {}))) is not None]) for k in keys]
    if any(balance):
        table.rows.append(["Balance: random-ring bandwidth / HPL per process", "byte/flop", *balance])
    table.rows.append(["runs", "", *[groups[k] for k in keys]])
    return Section("hpcc", "HPC Challenge", [
        f"{len(runs)} valid HPCC runs in {len(keys)} configuration(s). Each cell is mean +- standard "
        "deviation (n = number of valid repeats); invalid runs are listed in the HPL section."], [table])


def _values(data: Dataset) -> dict[str, dict[str, float]]:
    rows = data.of(*(m for m, *_ in HPCC_SUMMARY), "CommWorldProcs")
    out: dict[str, dict[str, float]] = {}
    for rec in rows[rows["benchmark"] == "hpcc"].itertuples(index=False):
        out.setdefault(rec.run_id, {})[rec.name] = rec.value
    return out


def _balance(v: dict[str, float]) -> float | None:
    """GB/s per process / Gflop/s per process = byte/flop."""
    ring, hpl, procs = v.get("RandomlyOrderedRingBandwidth_GBytes"), v.get("HPL_Tflops"), v.get("CommWorldProcs")
    if not ring or not hpl or not procs:
        return None
    return ring / (hpl * 1000.0 / procs)


def _cell(values: list[float]) -> str | None:
    if not values:
        return None
    s = stats_of(values)
    std = f" +- {s['std']:.3g}" if s["std"] is not None else ""
    return f"{s['mean']:.4g}{std} (n={s['n']})"
