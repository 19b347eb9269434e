"""`run --repeats N|auto`: the main job's headline run (its standalone HPL, else HPCC) made again.

One HPL figure on a shared machine moves by up to 25% from run to run; `run` is the command most users
run, and its Rmax is the number they keep. With `--repeats N` the headline run is made N times; with
`--repeats auto` (campaign/precision.py) it is made again until the 95% interval of its Gflop/s is
within the precision, at least 3 runs, at most `--max-repeats` and at most what the budget still holds
(the suite is planned for a third of the budget then, so that three runs fit). Only runs that count
(analysis/flags.counts: not failed, invalid, truncated, suspect or disturbed) are samples. The summary
says why the repeats stopped and gives the median and the interval; Rmax stays the best counted run.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable

from clusterbench.analysis.flags import counts
from clusterbench.campaign.precision import (
    MIN_RUNS,
    AutoRepeats,
    OneStart,
    headline_metric,
    relative_half_width,
    sampler,
    until_precise,
)
from clusterbench.execution.executor import RunResult
from clusterbench.execution.loop import Reporter, run_all
from clusterbench.execution.request import PlannedRun
from clusterbench.store.db import Store

HEADLINE_ORDER = ("hpl", "hpcc")  # the run whose figure is the job's Rmax, first found


def headline_run(runs: list[PlannedRun]) -> PlannedRun | None:
    for name in HEADLINE_ORDER:
        found = [r for r in runs if r.benchmark == name]
        if found:
            return found[-1]
    return None


def repeat_headline(store: Store, runs: list[PlannedRun], results: list[RunResult], reporter: Reporter,
                    system_id: str | None, *, count: int = 1, auto: AutoRepeats | None = None,
                    deadline: float | None = None, say: Callable[[str], None] | None = None) -> dict | None:
    """Make the headline run again (count - 1 more times, or until precise); the new results are appended
    to `results`. Returns the summary's `repeats` entry, None when nothing was asked or nothing to repeat."""
    head = headline_run(runs)
    first = next((r for r in results if head is not None and r.benchmark == head.benchmark
                  and r.params == head.params), None) if head else None
    if head is None or first is None or (count <= 1 and auto is None):
        return None
    shown = OneStart(reporter, started=True)

    def again(repeat: int) -> RunResult:
        if repeat == 0:
            return first
        made = run_all(store, [dataclasses.replace(head, repeat=repeat)], shown, system_id=system_id,
                       one_off=True, tags={"suite": "run", "repeat_of": first.id})
        results.extend(made)
        return made[0]

    sample = sampler(head.benchmark, counts)
    if auto is None:
        made = [again(i) for i in range(count)]
        values = [v for v, _ in map(sample, made) if v is not None]
        reason = f"{count} runs asked (--repeats {count})"
    else:
        most = auto.max_runs
        if deadline is not None and first.duration_s > 0:
            fits = 1 + int(max(0.0, deadline - time.monotonic()) / first.duration_s)
            most = max(MIN_RUNS, min(most, fits))
        made, decision = until_precise(again, sample, dataclasses.replace(auto, max_runs=most))
        values = [v for v, _ in map(sample, made) if v is not None]
        reason = decision.reason + (" (the most the budget holds)" if most < auto.max_runs else "")
    metric, _ = headline_metric(head.benchmark)
    unit = next((m.unit for r in made for m in r.outcome.metrics if m.name == metric), None)
    entry = {"benchmark": head.benchmark, "metric": metric, "unit": unit, "runs": [r.id for r in made],
             "samples": len(values), "reason": reason,
             "median": statistics.median(values) if values else None,
             "half_width": relative_half_width(values) if len(values) >= 2 else None}
    if say:
        say(f"{head.benchmark}: {reason}")
    return entry
