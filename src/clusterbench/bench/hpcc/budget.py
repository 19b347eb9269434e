"""How long an HPCC run takes for a given N, so `clusterbench run` can fit a time budget.

HPCC sizes all its tests from the HPL matrix, so its duration is an HPL run (HPL's time model,
bench/hpl/timing.py, in its planning use: the start-up margin and 2/3 N^3 flops at some efficiency of Rpeak) plus
everything else, which grows with the memory touched. Measured here on a 2-core Zen 3 VM: 7.8 s
at N=4000, 39 s at N=8000, 149 s at N=13440, of which HPL took 0.6, 4.4 and 19 s. The rest grows
about as c x N^2.4 seconds with c between 1.5e-8 and 2.2e-8 (RandomAccess tables grow in powers of two, so it steps);
the default takes the upper value. That coefficient is only a default: after a stored run on the same system, the
observed one is used instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.bench.hpl.timing import (  # HPL's one time model, its planning use, and assumed efficiency
    DEFAULT_EFFICIENCY,
    PLANNING_STARTUP_S,
    PLANNING_TIME,
)

DEFAULT_OTHER_COEFF = 2.2e-8
OTHER_EXPONENT = 2.4


@dataclass
class HpccTimeModel:
    """An HPCC run's time: HPL's (planning use) at `efficiency` x Rpeak, plus the other tests' c x N^2.4.
    The Hpcc class declares it (`Hpcc.run_time`) for `clusterbench run`, which fits HPCC to its budget."""

    rpeak_gflops: float
    efficiency: float = DEFAULT_EFFICIENCY
    other_coeff: float = DEFAULT_OTHER_COEFF
    source: str = "built-in default"

    def hpl_seconds(self, n: int) -> float:
        return PLANNING_TIME.solve_seconds(n, self.rpeak_gflops * self.efficiency)

    def seconds(self, n: int) -> float:
        return PLANNING_TIME.seconds(n, self.rpeak_gflops * self.efficiency) + self.other_coeff * n**OTHER_EXPONENT

    def largest_n(self, budget_s: float, nb: int, n_max: int) -> int:
        """The largest multiple of NB (at most n_max) whose run fits the budget; at least NB."""
        best = nb
        n = nb
        while n <= n_max and self.seconds(n) <= budget_s:
            best = n
            n += nb
        return best

    # What `learned` reads of each stored HPCC run besides its N and total time (store.recent_figures).
    HISTORY_METRICS = ("HPL_time", "hpl_gflops")

    @classmethod
    def learned_from(cls, rpeak_gflops: float, figures: list[tuple[dict, float, list[float]]]) -> HpccTimeModel:
        """`learned` from the store's recent_figures(HISTORY_METRICS) of this system's HPCC runs."""
        return cls.learned(rpeak_gflops, [(int(params["n"]), total, hpl_s, gflops)
                                          for params, total, (hpl_s, gflops) in figures if "n" in params])

    @classmethod
    def learned(cls, rpeak_gflops: float, history: list[tuple[int, float, float, float]]) -> HpccTimeModel:
        """From stored HPCC runs of this system: (N, total seconds, HPL seconds, HPL Gflops)."""
        if not history or rpeak_gflops <= 0:
            return cls(rpeak_gflops)
        effs = [g / rpeak_gflops for _, _, _, g in history if g > 0]
        coeffs = [max(total - hpl - PLANNING_STARTUP_S, 0.1) / n**OTHER_EXPONENT
                  for n, total, hpl, _ in history if n > 0]
        eff = sorted(effs)[len(effs) // 2] if effs else DEFAULT_EFFICIENCY
        coeff = sorted(coeffs)[len(coeffs) // 2] if coeffs else DEFAULT_OTHER_COEFF
        return cls(rpeak_gflops, min(max(eff, 0.05), 1.5), coeff,
                   f"learned from {len(history)} stored hpcc run(s) of this system")
