"""Which node or link holds a cluster back: a robust outlier rule over like measurements.

The HPC Challenge studies of small clusters looked first for the node or cable that silently ran
slower than its peers. A mean and a standard deviation are the wrong tools for that: one very slow
node drags the mean toward itself and inflates the deviation until it no longer looks odd. The
median and the median absolute deviation (MAD) do not move with one or two bad values, so each
value is placed by its robust z-score, (value - median) / (1.4826 x MAD), where 1.4826 makes the
MAD estimate a standard deviation for normal noise.

Two floors keep a quiet cluster quiet:
- the MAD is taken as at least `min_spread` of the median: identical nodes can agree to 0.1%,
  and a MAD of nearly nothing would make any wobble look infinitely far out;
- a value is flagged only when it is also `min_deviation` away from the median: these machines
  vary by up to 25% from one identical run to the next, so a smaller gap is not evidence.
Only the bad side is flagged (slower, less bandwidth, more latency): a node faster than its peers
is not holding anyone back.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

MAD_TO_SIGMA = 1.4826
DEFAULT_Z = 3.5  # Iglewicz and Hoaglin's cut for the modified z-score
DEFAULT_MIN_SPREAD = 0.05
DEFAULT_MIN_DEVIATION = 0.25
MIN_PEERS = 3  # with fewer values there is no majority to be an outlier from


@dataclass(frozen=True)
class Rule:
    """The thresholds of the rule; the defaults suit noisy shared machines (see the module)."""

    z: float = DEFAULT_Z
    min_spread: float = DEFAULT_MIN_SPREAD
    min_deviation: float = DEFAULT_MIN_DEVIATION

    def describe(self) -> str:
        return (f"|robust z| > {self.z:g} on the bad side and more than {100 * self.min_deviation:.0f}% from the "
                f"median (MAD at least {100 * self.min_spread:.0f}% of the median)")


@dataclass(frozen=True)
class Placement:
    """Where one value stands among its peers."""

    subject: str
    value: float
    median: float
    z: float  # robust z-score, signed: negative is below the median
    deviation: float  # value / median - 1
    flagged: bool

    def how_far(self, unit: str = "") -> str:
        """'52% below the median of 3.10 GB/s (robust z -9.1)'."""
        side = "below" if self.deviation < 0 else "above"
        return (f"{100 * abs(self.deviation):.0f}% {side} the median of {self.median:.3g}{' ' + unit if unit else ''} "
                f"(robust z {self.z:+.1f})")


def place(values: dict[str, float], higher_is_better: bool, rule: Rule = Rule()) -> dict[str, Placement]:
    """Each subject's place among `values`; flagged when it is an outlier on the bad side.

    Non-finite values are left out (a failed run has no figure to compare). With fewer than
    MIN_PEERS finite values nothing is flagged: one of two differing nodes is not an outlier."""
    finite = {k: v for k, v in values.items() if isinstance(v, (int, float)) and math.isfinite(v)}
    if not finite:
        return {}
    median = statistics.median(finite.values())
    mad = statistics.median(abs(v - median) for v in finite.values())
    scale = MAD_TO_SIGMA * max(mad, rule.min_spread * abs(median))
    out: dict[str, Placement] = {}
    for subject, value in finite.items():
        z = (value - median) / scale if scale > 0 else 0.0
        deviation = value / median - 1 if median else 0.0
        bad_side = z < 0 if higher_is_better else z > 0
        flagged = (len(finite) >= MIN_PEERS and bad_side and abs(z) > rule.z
                   and abs(deviation) > rule.min_deviation)
        out[subject] = Placement(subject, value, median, z, deviation, flagged)
    return out
