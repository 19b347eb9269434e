"""What `clusterbench history` can tell with this machine's noise: its false-alarm rate on series
without a change, and how often it reports a 5%, 10% and 20% drop as a regression, at 6, 10, 20 and
50 values (issue 31, point 5).

The noise is measured, not assumed: the relative deviations (value / mean - 1) of real repeated runs
of one configuration read from a clusterbench store (by default the STREAM Triad of
`clusterbench bench stream --repeats 24` run on this machine into a scratch store, see
benchmarks/README.md). Series are built by resampling those deviations with replacement
(bootstrap) around 100: a null series is n resampled values; a step series multiplies the values
from the middle on by 1 - step. Each series goes through the history's own verdict
(analysis/history.judge: E-Divisive means, permutation test at p <= 0.01, 5% threshold), so the
table is what a user would read: "regression", "improvement", "no change beyond the noise" or "too
few values to judge (need at least K)".

    .venv/bin/python benchmarks/history_detection.py --db /tmp/noise.db [--metric stream_triad] [--series 60]

Seeded: the same store gives the same table. About 1-2 minutes with 60 series per cell on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from pathlib import Path

import numpy as np

from clusterbench.analysis import changepoint
from clusterbench.analysis.history import Group, Value, judge

LENGTHS = (6, 10, 20, 50)
STEPS = (0.05, 0.10, 0.20)
MAX_SERIES = 1000


def measured_deviations(db: Path, metric: str) -> tuple[np.ndarray, dict]:
    """The relative deviations of the valid values of `metric` of the largest group of runs that share
    benchmark and parameters (repeats), and a description of where they came from."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT r.benchmark, r.params, m.value FROM metrics m JOIN runs r ON r.id = m.run_id "
                           "WHERE m.name = ? AND m.valid = 1 AND r.valid = 1", (metric,)).fetchall()
    finally:
        con.close()
    groups: dict[str, list[float]] = {}
    for benchmark, params, value in rows:  # labels hold timings of each run (STREAM's avg/min/max), not settings
        settings = {k: v for k, v in json.loads(params or "{}").items() if k not in ("repeat", "run", "run_id")}
        key = json.dumps([benchmark, settings], sort_keys=True)
        if isinstance(value, int | float) and np.isfinite(value):
            groups.setdefault(key, []).append(float(value))
    if not groups:
        raise SystemExit(f"no valid value of {metric!r} in {db}: run `clusterbench bench stream --repeats 24` "
                         "into it first (see benchmarks/README.md)")
    values = np.asarray(max(groups.values(), key=len))
    if len(values) < 10:
        raise SystemExit(f"only {len(values)} repeats of one configuration of {metric!r} in {db}: need 10 or more")
    mean = float(values.mean())
    about = {"repeats": len(values), "mean": mean, "cv_pct": 100 * float(values.std(ddof=1)) / mean,
             "min_pct": 100 * (values.min() / mean - 1), "max_pct": 100 * (values.max() / mean - 1)}
    return values / mean - 1, about


def verdict(values: np.ndarray) -> str:
    """The history's verdict on one series of a higher-is-better metric, one value a day."""
    group = Group("bench", "stream", {}, "stream", "MB/s", True,
                  [Value(f"r{i}", f"2026-01-{1 + i % 28:02d}T{i // 28:02d}:00:00+00:00", float(v))
                   for i, v in enumerate(values)])
    judge(group)
    return group.verdict


def table(deviations: np.ndarray, count: int, seed: int) -> dict[tuple[int, float], dict[str, float]]:
    """(length, step) -> share of series per verdict kind; step 0 is the null series."""
    out = {}
    for n in LENGTHS:
        for step in (0.0, *STEPS):
            rng = np.random.default_rng([seed, n, int(1000 * step)])
            tally = {"regression": 0, "improvement": 0, "no change": 0, "too few": 0}
            for _ in range(count):
                values = 100.0 * (1 + rng.choice(deviations, size=n, replace=True))
                values[n // 2:] *= 1 - step
                word = verdict(values)
                kind = ("too few" if word.startswith("too few") else "no change" if word.startswith("no change")
                        else word)
                tally[kind] += 1
            out[(n, step)] = {k: v / count for k, v in tally.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="store holding repeated runs of this machine")
    parser.add_argument("--metric", default="stream_triad")
    parser.add_argument("--series", type=int, default=60, help=f"series per cell (1..{MAX_SERIES})")
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--target-cv", type=float, default=None,
                        help="scale the measured deviations to this CV in %% (their shape stays the measured one): "
                             "what the test does on a quieter machine; the table says so")
    args = parser.parse_args()
    if not 1 <= args.series <= MAX_SERIES:
        raise SystemExit(f"--series must be 1..{MAX_SERIES}")
    deviations, about = measured_deviations(args.db, args.metric)
    print(f"noise: {about['repeats']} repeats of {args.metric}, mean {about['mean']:.5g}, CV {about['cv_pct']:.2f}%, "
          f"range {about['min_pct']:+.1f}%..{about['max_pct']:+.1f}% (bootstrap of these deviations)")
    if args.target_cv is not None:
        if not 0 < args.target_cv <= 100:
            raise SystemExit("--target-cv must be in (0, 100]")
        deviations = deviations * (args.target_cv / about["cv_pct"])
        print(f"SCALED: the measured deviations multiplied by {args.target_cv / about['cv_pct']:.4f} to a CV of "
              f"{args.target_cv:g}% (not this machine's noise; its shape only)")
    k = changepoint.min_points(changepoint.ALPHA)
    print(f"test: E-Divisive means, permutation p <= {changepoint.ALPHA:g}, threshold 5%; "
          f"K = {k} (smallest p of 6 values: {changepoint.smallest_p(6):.3g}); {args.series} series per cell, "
          "step at the middle")
    started = time.perf_counter()
    found = table(deviations, args.series, args.seed)
    print()
    print("| values | false alarms (no step) | 5% drop found | 10% drop found | 20% drop found | verdict when short |")
    print("|---:|---:|---:|---:|---:|---|")
    for n in LENGTHS:
        null = found[(n, 0.0)]
        alarms = null["regression"] + null["improvement"]
        cells = [f"{100 * found[(n, s)]['regression']:.0f}%" for s in STEPS]
        short = f"too few values to judge (need at least {k})" if null["too few"] == 1 else ""
        print(f"| {n} | {100 * alarms:.1f}% | " + " | ".join(cells) + f" | {short} |")
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
