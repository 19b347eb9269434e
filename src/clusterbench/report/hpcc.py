"""HPCC section: the summary table, mean +- standard deviation over valid repeats, one column
per node count x process layout, and the balance of network to compute.

Balance = random-ring bandwidth / HPL rate per process, in byte/flop: how many bytes each
process can exchange with the others for every flop it computes, the ratio that tells a
machine built for communication-bound codes from one built for the HPL list.

Which metrics are rows (in which order, named and shown how) and which enter the balance is
HPCC's declaration (bench/declare.py): the metrics with an `hpcc` use, in the role `summary`
(a row), `ring-bandwidth`, `hpl-rate` or `processes`.
"""

from __future__ import annotations

from collections.abc import Callable

from clusterbench.analysis.dataset import Dataset
from clusterbench.analysis.stats import describe as stats_of
from clusterbench.bench import registry
from clusterbench.report.model import Section, Table

BALANCE_ROLES = {"ring-bandwidth": "GB/s", "hpl-rate": "Gflop/s", "processes": ""}  # role -> unit it enters in


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


def layout(run: dict) -> str:
    """'2 ranks x 1 thread, 1x2': how the processes were laid out."""
    p = run["params"]
    ranks = p.get("ranks", "?")
    threads = p.get("threads", 1)
    grid = f", {p['p']}x{p['q']}" if "p" in p and "q" in p else ""
    name = f" ({p['layout']})" if p.get("layout") else ""
    return f"{ranks} ranks x {threads} thread{'s' if threads != 1 else ''}{grid}{name}"


def section(data: Dataset, _options) -> Section | None:
    runs = [r for r in data.runs_of(*benchmarks()) if r["valid"]]
    if not runs:
        return None
    groups: dict[tuple, list[str]] = {}
    for run in runs:
        groups.setdefault((run["node_count"], layout(run)), []).append(run["id"])
    keys = sorted(groups)
    values = _values(data)
    table = Table("hpcc-summary", "HPCC summary: mean +- standard deviation over valid repeats",
                  ["metric", "unit", *[f"{n} node{'s' if n != 1 else ''}, {lay}" for n, lay in keys]], [])
    for metric, label, unit, shown in summary_rows():
        cells = [_cell([shown(values[i][metric]) for i in groups[k] if metric in values.get(i, {})])
                 for k in keys]
        if any(cells):
            table.rows.append([label, unit, *cells])
    inputs = balance_metrics()
    balance = [_cell([b for i in groups[k] if (b := _balance(values.get(i, {}), inputs)) is not None])
               for k in keys]
    if any(balance):
        table.rows.append(["Balance: random-ring bandwidth / HPL per process", "byte/flop", *balance])
    table.rows.append(["runs", "", *[groups[k] for k in keys]])
    return Section("hpcc", "HPC Challenge", [
        f"{len(runs)} valid HPCC runs in {len(keys)} configuration(s). Each cell is mean +- standard "
        "deviation (n = number of valid repeats); invalid runs are listed in the HPL section."], [table])


def _values(data: Dataset) -> dict[str, dict[str, float]]:
    rows = data.of(*metrics())
    out: dict[str, dict[str, float]] = {}
    for rec in rows[rows["benchmark"].isin(benchmarks())].itertuples(index=False):
        out.setdefault(rec.run_id, {})[rec.name] = rec.value
    return out


def _balance(v: dict[str, float], inputs: dict[str, tuple[str, Callable[[float], float]]]) -> float | None:
    """GB/s per process / Gflop/s per process = byte/flop."""
    if set(inputs) != set(BALANCE_ROLES):
        return None
    ring, hpl, procs = (v.get(inputs[role][0]) for role in ("ring-bandwidth", "hpl-rate", "processes"))
    if not ring or not hpl or not procs:
        return None
    ring, hpl, procs = (inputs[role][1](x) for role, x in
                        (("ring-bandwidth", ring), ("hpl-rate", hpl), ("processes", procs)))
    return ring / (hpl / procs)


def _cell(values: list[float]) -> str | None:
    if not values:
        return None
    s = stats_of(values)
    std = f" +- {s['std']:.3g}" if s["std"] is not None else ""
    return f"{s['mean']:.4g}{std} (n={s['n']})"
