"""Impossible results are flagged, not drawn: an Rmax above what the nodes can do is `suspect`.

% of Rpeak needs two things a run may not state: its node count and a peak. A truncated 8-rank
HPL file with no node count used to be put at 1 node and shown at 221% of Rpeak. Now:

- the node count is `identity.known_node_count` (a parameter, a `--tag nodes=K` given at import,
  the node list; 1 only for a run clusterbench ran itself). Unknown: no % is computed and the
  table says "node count not stated" where the % would go; the run is not suspect either (nothing
  says it is impossible);
- the peak is the measured one where the `clock` benchmark measured the system, else Rpeak
  (`analysis/peak.run_peak`);
- a value of an Rmax metric (those the benchmarks declare as held against the peak: a `peak` use in
  its `rmax` role, bench/declare.py) above 100% of that
  peak x the known node count cannot be true: the run is marked `suspect` (flags.py) with the
  comparison as its reason, so it is shown marked and never a best.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import pandas as pd

from clusterbench.analysis.identity import known_node_count, node_count_source
from clusterbench.analysis.peak import Peak
from clusterbench.bench import registry

NODE_COUNT_UNKNOWN = "node count not stated"
NO_PEAK = "no Rpeak known (give --rpeak-node, or describe the system)"
LIMIT_PERCENT = 100.0
RMAX = ("peak", "rmax")  # the (section, role) of a metric held against the peak of the nodes it ran on


@lru_cache(maxsize=1)
def rmax_metrics() -> dict[tuple[str, str], Callable[[float], float]]:
    """(benchmark, metric) -> its value in Gflop/s, for every metric declared as an Rmax held against the peak."""
    out: dict[tuple[str, str], Callable[[float], float]] = {}
    for drawn in registry.drawn(*RMAX):
        out.setdefault((drawn.benchmark, drawn.spec.name), drawn.spec.shown(drawn.use, "Gflop/s"))
    return out


def percent_of_peak(run: dict, value: float, peak: float | Peak | None) -> tuple[float | None, str]:
    """(% of the peak of the run's nodes, what was compared), or (None, why no % can be given):
    "node count not stated" when the run does not say on how many nodes it ran, the missing peak
    when none is known. `value` in Gflop/s, `peak` per node (Gflop/s or a Peak)."""
    nodes = known_node_count(run)
    if nodes is None:
        return None, NODE_COUNT_UNKNOWN
    node_gflops = peak.node_gflops if isinstance(peak, Peak) else peak
    if not node_gflops or node_gflops <= 0:
        return None, NO_PEAK
    what = "measured peak" if isinstance(peak, Peak) and peak.measured else "Rpeak"
    pct = 100.0 * value / (node_gflops * nodes)
    return pct, (f"{pct:.0f}% of {what}: {value:.4g} Gflop/s against {nodes} node{'s' if nodes != 1 else ''} "
                 f"({node_count_source(run)}) x {node_gflops:.4g} Gflop/s")


def impossible(run: dict, value: float, peak: Peak | None) -> str | None:
    """Why this Rmax cannot be true (above 100% of the peak of the run's known nodes), else None."""
    pct, why = percent_of_peak(run, value, peak)
    if pct is None or pct <= LIMIT_PERCENT:
        return None
    ranks = (run.get("params") or {}).get("ranks")
    ran = f"; {ranks} ranks" if isinstance(ranks, int) and not isinstance(ranks, bool) else ""
    source = f" ({peak.derivation})" if peak is not None and peak.derivation else ""
    return f"{why}{source}{ran}: more than the nodes can do (wrong node count or peak?)"


def suspect_runs(runs: dict[str, dict], values: pd.DataFrame,
                 peak_of: Callable[[dict], Peak | None]) -> dict[str, str]:
    """Run id -> reason for the runs whose best Rmax value (rows: run_id, benchmark, name, value)
    is impossible against `peak_of(run)`."""
    converters = rmax_metrics()
    out: dict[str, str] = {}
    if values.empty:
        return out
    for (benchmark, name), rows in values.groupby(["benchmark", "name"], sort=False):
        convert = converters.get((benchmark, name))
        if convert is None:
            continue
        best = rows.groupby("run_id", sort=False)["value"].max()
        for run_id, value in zip(best.index.to_numpy(dtype=object).tolist(), best.tolist(), strict=True):
            run = runs.get(run_id)
            if run is None or run_id in out:
                continue
            reason = impossible(run, convert(float(value)), peak_of(run))
            if reason:
                out[run_id] = reason
    return out
