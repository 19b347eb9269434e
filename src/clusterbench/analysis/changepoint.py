"""Change points in a series of measurements: E-Divisive means (Matteson & James 2014).

A machine that lost 15% of its STREAM bandwidth after an update is noticed only if someone looks,
and a fixed threshold on single values either cries wolf on every noisy run or misses a step that
hides in the noise. Change point detection asks instead whether the series is better described as
segments with different distributions, and where they meet. This module implements the E-Divisive
procedure of D. S. Matteson and N. A. James, "A Nonparametric Approach for Multiple Change Point
Analysis of Multivariate Data", JASA 109 (2014), arXiv:1306.4933, for one-dimensional series, the
way Apache Otava's `compute_change_points_orig` uses it (without Otava's later t-test merge step):

- The divergence between two adjacent pieces X = Z[s:tau] and Y = Z[tau:kappa] is the energy
  statistic with alpha = 1: Q(X, Y) = |X||Y| / (|X| + |Y|) * (2 mean|x - y| - mean|x - x'| - mean|y - y'|).
  It grows with any change of distribution (mean or spread), and needs no assumption of normality.
- Hierarchical: in every current segment the split (tau, kappa) that maximises Q is found (kappa,
  the end of Y, is searched too, so a later change does not dilute an earlier one); the best over
  all segments is the candidate.
- Its significance is a permutation test: the values are shuffled within each current segment
  (which keeps the change points already accepted), the best Q is recomputed, and
  p = (1 + #{permuted Q >= observed Q}) / (1 + permutations). The candidate is accepted when
  p <= alpha, and the search goes on in the new segments; it stops at the first candidate that
  is not significant. The generator is seeded, so the same series always gives the same answer.

Bounds (every call is bounded whatever the caller passes): the last MAX_POINTS values are analysed
(older ones are reported as not analysed), at most MAX_CHANGE_POINTS change points, PERMUTATIONS
shuffles per test (stopped early once the test can no longer be significant), segments of at least
MIN_SEGMENT values, and arrays built in chunks of at most CHUNK_ELEMENTS numbers.

What a short series can show: a permutation test cannot give a p below the share of arrangements
that are as extreme as the most extreme one. For a series cut in two at tau, the arrangement with
the tau smallest values first (and its mirror, the same divergence) is 2 of C(n, tau), best at
tau = n/2: `smallest_p(n)` = 2 / C(n, n//2). Six values (0.1) can never reach p <= 0.01; ten (0.008)
can. `min_points(alpha)` is the shortest series that can; a shorter one is "too few values to
judge", never "no change". `permutations_for(n)` raises the shuffles of a short series (cheap there)
so that a clear step is not kept above alpha by the resolution of the shuffles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MAX_POINTS = 500  # the newest values analysed: a test of 199 shuffles of 500 values takes about 1 s
MAX_CHANGE_POINTS = 5
PERMUTATIONS = 199  # p resolves to 1/200; alpha * (PERMUTATIONS + 1) must be at least 1
MAX_PERMUTATIONS = 9999
ALPHA = 0.01  # significance level of each permutation test
MIN_SEGMENT = 3  # values on each side of a change point: fewer cannot tell a step from two outliers
SEED = 20140101  # fixed: the same series gives the same change points on every call
SHORT_SERIES = 50  # series up to this length are tested with SHORT_PERMUTATIONS shuffles
SHORT_PERMUTATIONS = 1999  # p resolves to 1/2000: a 10-value series (floor 0.008) can reach 0.01
CHUNK_ELEMENTS = 400_000  # numbers in one (shuffles x n x n) array: 3 MB, so a batch stays in cache


@dataclass(frozen=True)
class ChangePoint:
    """Where a new segment starts, and how its mean differs from the one before."""

    index: int  # position (in the series given) of the first value of the new segment
    before: float  # mean of the segment that ends just before `index`
    after: float  # mean of the segment that starts at `index`
    change: float | None  # (after - before) / |before|, None when before is 0
    p_value: float  # of the permutation test that accepted it
    statistic: float  # its divergence Q, on the series scaled to a unit range


@dataclass(frozen=True)
class Detection:
    change_points: list[ChangePoint]
    analysed_from: int  # values before this index were not analysed (over MAX_POINTS)
    tests: int  # permutation tests run (the last one, if any, was not significant)


def detect(values, *, alpha: float = ALPHA, permutations: int = PERMUTATIONS,
           max_change_points: int = MAX_CHANGE_POINTS, min_segment: int = MIN_SEGMENT,
           max_points: int = MAX_POINTS, seed: int = SEED) -> Detection:
    """The change points of a series (oldest value first), found by E-Divisive means."""
    _check(alpha, permutations, max_change_points, min_segment, max_points)
    x = np.asarray(values, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"a series is one-dimensional, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("a series of measurements holds only finite numbers")
    start = max(0, len(x) - max_points)
    x = x[start:]
    z = _scaled(x)
    if z is None or len(z) < 2 * min_segment:
        return Detection([], start, 0)
    rng = np.random.default_rng(seed)
    grids = _Grids(min_segment)
    accepted: dict[int, tuple[float, float]] = {}  # index -> (p, Q)
    best: dict[tuple[int, int], tuple[float, int]] = {}  # segment -> (its best Q, where)
    tests = 0
    while len(accepted) < max_change_points:
        bounds = [0, *sorted(accepted), len(z)]
        segments = [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b - a >= 2 * min_segment]
        if not segments:
            break
        grids.keep({b - a for a, b in segments})
        for a, b in segments:
            if (a, b) not in best:
                q, tau, _ = _best_splits(z[None, a:b], grids)
                best[(a, b)] = (float(q[0]), a + int(tau[0]))
        observed, tau = max(best[s] for s in segments)
        if observed <= 0:
            break
        tests += 1
        p = _p_value(z, segments, observed, alpha, permutations, grids, rng)
        if p > alpha:
            break
        accepted[tau] = (p, observed)
    return Detection(_described(x, accepted, start), start, tests)


def smallest_p(n: int, min_segment: int = MIN_SEGMENT) -> float:
    """The smallest p a permutation test of one split can give on n values (segments of at least
    `min_segment`): 2 / C(n, n//2), the perfectly separated arrangement and its mirror. 1 when no
    split fits."""
    if n < 2 * min_segment:
        return 1.0
    return min(1.0, 2 / math.comb(n, n // 2))


def min_points(alpha: float = ALPHA, min_segment: int = MIN_SEGMENT) -> int:
    """The fewest values whose most extreme arrangement reaches p <= alpha: shorter series cannot
    show a change at this level whatever they hold (0.01: 10 values; 0.05: 8)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    n = 2 * min_segment
    while smallest_p(n, min_segment) > alpha:
        n += 1
    return n


def permutations_for(n: int, alpha: float = ALPHA) -> int:
    """Shuffles for a series of n values: SHORT_PERMUTATIONS up to SHORT_SERIES values (their floor
    is near alpha, and a shuffle of a short series costs little), else PERMUTATIONS; never fewer
    than alpha needs."""
    base = SHORT_PERMUTATIONS if n <= SHORT_SERIES else PERMUTATIONS
    return min(MAX_PERMUTATIONS, max(base, math.ceil(1 / alpha) - 1))


def _check(alpha: float, permutations: int, max_change_points: int, min_segment: int, max_points: int) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not 1 <= permutations <= MAX_PERMUTATIONS:
        raise ValueError(f"permutations must be in 1..{MAX_PERMUTATIONS}, got {permutations}")
    if alpha * (permutations + 1) < 1:
        raise ValueError(f"{permutations} permutations cannot reach p <= {alpha}: "
                         f"use at least {math.ceil(1 / alpha) - 1}")
    if not 0 <= max_change_points <= 50:
        raise ValueError(f"max_change_points must be in 0..50, got {max_change_points}")
    if not 2 <= min_segment <= 1000:
        raise ValueError(f"min_segment must be in 2..1000, got {min_segment}")
    if not 2 * min_segment <= max_points <= 100_000:
        raise ValueError(f"max_points must be in {2 * min_segment}..100000, got {max_points}")


def _scaled(x: np.ndarray) -> np.ndarray | None:
    """The series moved to its median and divided by its largest deviation: Q is equivariant in
    scale (the test is not affected), and huge values cannot overflow the distances (they are
    divided by the largest magnitude first). None when every value is the same (nothing to find)."""
    magnitude = float(np.max(np.abs(x))) if len(x) else 0.0
    if magnitude == 0:
        return None
    y = x / magnitude
    y = y - np.median(y)
    spread = float(np.max(np.abs(y)))
    return None if spread == 0 else y / spread


class _Grids:
    """The admissible splits of each segment length in use, built once per length: (tau, kappa) as
    flat indices into the n x n prefix-sum matrix, and the coefficients of Q (see _best_splits).
    Only the lengths of the current segments are kept, so memory stays near that of the longest."""

    def __init__(self, min_segment: int):
        self.min_segment = min_segment
        self.built: dict[int, tuple[np.ndarray, ...]] = {}

    def keep(self, lengths: set[int]) -> None:
        self.built = {n: g for n, g in self.built.items() if n in lengths}

    def __call__(self, n: int) -> tuple[np.ndarray, ...]:
        if n not in self.built:
            self.built[n] = self._build(n)
        return self.built[n]

    def _build(self, n: int) -> tuple[np.ndarray, ...]:
        m = self.min_segment
        tau_grid, kappa_grid = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
        ok = (tau_grid >= m) & (kappa_grid - tau_grid >= m)
        t, k = tau_grid[ok], kappa_grid[ok]
        left, right, total = t.astype(float), (k - t).astype(float), k.astype(float)
        weight = left * right / total  # |X||Y| / (|X| + |Y|)
        c_cross = 2.0 / total  # weight * 2 / (|X||Y|)
        c_left = weight / (left * (left - 1) / 2)  # weight / C(|X|, 2)
        c_right = weight / (right * (right - 1) / 2)  # weight / C(|Y|, 2)
        # Q = (c_cross + c_right) C - (c_left - c_right) W(tau) - c_right W(kappa), with C = P[tau, kappa] -
        # P[tau, tau] and W(t) = P[t, t] / 2, gathered as: a P[tau, kappa] - b P[tau, tau] - c P[kappa, kappa].
        a = c_cross + c_right
        b = a + (c_left - c_right) / 2
        c = c_right / 2
        return (t - 1) * n + (k - 1), t - 1, k - 1, t, k, a, b, c


def _best_splits(z: np.ndarray, grids: _Grids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each row of z (rows x n): the largest Q over all splits, and its tau and kappa.

    With D[i, j] = |z_i - z_j| and P its 2-D prefix sums (P[a, b] = sum of D[i, j], i < a, j < b):
    the within-sums are W(t) = P[t, t] / 2 (pairs i < j < t), the cross sum of X = [0, tau) and
    Y = [tau, kappa) is C = P[tau, kappa] - P[tau, tau], and the within-sum of Y is
    W(kappa) - W(tau) - C. Q = 2C/kappa - w W(tau)/C(tau, 2) - w (W(kappa) - W(tau) - C)/C(kappa - tau, 2),
    w = tau (kappa - tau) / kappa: every split in O(n^2) numbers, all rows at once. P[a, b] is stored
    at [a - 1, b - 1] (tau and kappa are never 0, so the zero row and column are not needed)."""
    rows, n = z.shape
    at_tk, at_t, at_k, t_of, k_of, a, b, c = grids(n)
    prefix = z[:, :, None] - z[:, None, :]
    np.abs(prefix, out=prefix)
    np.cumsum(prefix, axis=2, out=prefix)
    np.cumsum(prefix, axis=1, out=prefix)
    diagonal = prefix.reshape(rows, -1)[:, :: n + 1]  # P[t, t], t = 1..n
    q = a * prefix.reshape(rows, -1)[:, at_tk]
    q -= b * diagonal[:, at_t]
    q -= c * diagonal[:, at_k]
    where = np.argmax(q, axis=1)
    return q[np.arange(rows), where], t_of[where], k_of[where]


def _p_value(z: np.ndarray, segments: list[tuple[int, int]], observed: float, alpha: float, permutations: int,
             grids: _Grids, rng: np.random.Generator) -> float:
    """Permutation p-value of the best split: values shuffled within each current segment. Stops as
    soon as more permuted statistics reached the observed one than a significant result allows
    (the answer is then 'not significant' whatever the remaining shuffles would give)."""
    allowed = math.floor(alpha * (permutations + 1) + 1e-9) - 1  # most exceedances with p <= alpha
    tolerance = 1e-9 * max(1.0, abs(observed))
    longest = max(b - a for a, b in segments)
    chunk = max(1, CHUNK_ELEMENTS // ((longest + 1) ** 2))
    exceed = done = 0
    while done < permutations:
        size = min(chunk, permutations - done)
        stat = np.full(size, -np.inf)
        for a, b in segments:
            shuffled = rng.permuted(np.broadcast_to(z[a:b], (size, b - a)), axis=1)
            stat = np.maximum(stat, _best_splits(shuffled, grids)[0])
        exceed += int(np.count_nonzero(stat >= observed - tolerance))
        done += size
        if exceed > allowed:
            return (exceed + 1) / (done + 1)
    return (exceed + 1) / (permutations + 1)


def _described(x: np.ndarray, accepted: dict[int, tuple[float, float]], start: int) -> list[ChangePoint]:
    """Each accepted split with the means of the final segments on either side of it."""
    points = sorted(accepted)
    bounds = [0, *points, len(x)]
    out = []
    for i, index in enumerate(points):
        before = float(np.mean(x[bounds[i]:index]))
        after = float(np.mean(x[index:bounds[i + 2]]))
        change = (after - before) / abs(before) if before else None
        p, q = accepted[index]
        out.append(ChangePoint(start + index, before, after, change, p, q))
    return out
