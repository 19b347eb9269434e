"""How often the history's change point search cries wolf, and how often it finds a real step.

Synthetic series of a higher-is-better metric (e.g. STREAM Triad): independent normal noise with a
coefficient of variation of 5% (what repeated runs on a quiet machine show), several lengths.

- Without a step: the false-alarm rates, as the share of series where E-Divisive finds any change
  point, and where `clusterbench history --fail-on-regression` would fail (the newest change
  point worse by more than 5%).
- With a 10% drop at a random position in the middle half of the series: the share where a
  regression is flagged, the share with a change point within 2 values of the true step, and the
  distance from the true step to the nearest change point found.

Every series is seeded (series i of a run uses seed + i), so the figures are reproducible.
Prints the figures; not part of `make test`.

    .venv/bin/python benchmarks/changepoint_false_alarms.py [--series 1000] [--lengths 10,20,40,80,160]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from clusterbench.analysis.changepoint import detect
from clusterbench.analysis.history import DEFAULT_MIN_CHANGE, is_worse


def series(rng: np.random.Generator, n: int, cv: float, step: float) -> tuple[np.ndarray, int | None]:
    values = 100.0 * (1 + cv * rng.standard_normal(n))
    if not step:
        return values, None
    at = int(rng.integers(n // 4, 3 * n // 4 + 1))
    values[at:] *= 1 - step
    return values, at


def run(count: int, lengths: list[int], cv: float, step: float, seed: int) -> dict[int, dict]:
    """Per length: counts of series with a change point, flagged as regression, and step errors."""
    out: dict[int, dict] = {}
    per_length = max(1, count // len(lengths))
    for k, n in enumerate(lengths):
        found = flagged = near = 0
        errors: list[int] = []
        started = time.perf_counter()
        for i in range(per_length):
            rng = np.random.default_rng(seed + 100_003 * k + i)
            values, at = series(rng, n, cv, step)
            points = detect(values).change_points
            found += bool(points)
            flagged += bool(points) and is_worse(points[-1], True, DEFAULT_MIN_CHANGE)
            if at is not None and points:
                error = min(abs(p.index - at) for p in points)
                errors.append(error)
                near += error <= 2
        out[n] = {"series": per_length, "found": found, "flagged": flagged, "near": near, "errors": errors,
                  "seconds": time.perf_counter() - started}
    return out


def show(title: str, results: dict[int, dict], with_step: bool) -> None:
    print(title)
    if with_step:
        print(f"{'length':>6} {'series':>6} {'flagged':>9} {'cp within 2':>12} {'median |err|':>13} "
              f"{'p90 |err|':>10} {'ms/series':>10}")
    else:
        print(f"{'length':>6} {'series':>6} {'any change point':>17} {'flagged regression':>19} {'ms/series':>10}")
    total = {"series": 0, "found": 0, "flagged": 0, "near": 0, "errors": []}
    for n, r in results.items():
        for key in ("series", "found", "flagged", "near"):
            total[key] += r[key]
        total["errors"] += r["errors"]
        ms = 1000 * r["seconds"] / r["series"]
        if with_step:
            print(f"{n:>6} {r['series']:>6} {_rate(r['flagged'], r['series']):>9} {_rate(r['near'], r['series']):>12} "
                  f"{_median(r['errors']):>13} {_p90(r['errors']):>10} {ms:>10.1f}")
        else:
            print(f"{n:>6} {r['series']:>6} {_rate(r['found'], r['series']):>17} "
                  f"{_rate(r['flagged'], r['series']):>19} {ms:>10.1f}")
    if with_step:
        print(f"{'all':>6} {total['series']:>6} {_rate(total['flagged'], total['series']):>9} "
              f"{_rate(total['near'], total['series']):>12} {_median(total['errors']):>13} {_p90(total['errors']):>10}")
    else:
        print(f"{'all':>6} {total['series']:>6} {_rate(total['found'], total['series']):>17} "
              f"{_rate(total['flagged'], total['series']):>19}")
    print()


def _rate(k: int, n: int) -> str:
    return f"{100 * k / n:.1f}%"


def _median(errors: list[int]) -> str:
    return f"{statistics.median(errors):g}" if errors else "-"


def _p90(errors: list[int]) -> str:
    return f"{sorted(errors)[int(0.9 * (len(errors) - 1))]}" if errors else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=1000, help="series of each kind (split over the lengths)")
    parser.add_argument("--lengths", default="10,20,40,80,160")
    parser.add_argument("--cv", type=float, default=0.05, help="coefficient of variation of the noise")
    parser.add_argument("--step", type=float, default=0.10, help="relative drop of the stepped series")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    print(f"E-Divisive means, 199 permutations, alpha 0.01, segments of >= 3; noise CV {args.cv:.0%}; "
          f"regression = newest change point worse by more than {DEFAULT_MIN_CHANGE:.0%}\n")
    show(f"Without a step ({args.series} series): false alarms",
         run(args.series, lengths, args.cv, 0.0, args.seed), with_step=False)
    show(f"With a {args.step:.0%} drop in the middle half ({args.series} series): detection; |err| = distance in "
         "values from the true step to the nearest change point found",
         run(args.series, lengths, args.cv, args.step, args.seed + 7_000_000), with_step=True)


if __name__ == "__main__":
    main()
