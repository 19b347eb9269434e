"""The tuner's figure: best-so-far Gflop/s against the budget spent, every trial a dot coloured by level.

It answers "was the budget enough?": a curve still climbing at the right edge says more budget would
have found better; a flat one says the search had converged. Trials at small N are slower in Gflop/s
than the same configuration at the top N, hence the colours: compare dots of one level only.
The style is report/figures.py's (Okabe-Ito colours, a marker per level, no metadata in the SVG).
"""

from __future__ import annotations

import math

from clusterbench.report.figures import _STYLE, svg_element
from clusterbench.report.looks import MARKERS, OKABE_ITO


def best_so_far_svg(history: list[tuple[float, float]], trials: list[tuple[float, float, int, bool]],
                    level_ns: list[int], title: str, slug: str = "tune-best-so-far") -> str:
    """history: (budget seconds, best-so-far median Gflop/s); trials: (seconds, Gflop/s, level, replayed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context(_STYLE | {"svg.hashsalt": slug}):
        figure, ax = plt.subplots(figsize=(7.5, 4.0), layout="constrained")
        for level, n in enumerate(level_ns):
            pts = [(x, y) for x, y, lev, _ in trials if lev == level and math.isfinite(y)]
            if pts:
                ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, alpha=0.75,
                           color=OKABE_ITO[(level + 1) % len(OKABE_ITO)], marker=MARKERS[(level + 1) % len(MARKERS)],
                           label=f"trial, level {level} (N={n})", zorder=2)
        steps = [(x, y) for x, y in history if math.isfinite(y)]
        if steps:
            xs = [x for x, _ in steps] + [max([steps[-1][0]] + [t[0] for t in trials])]
            ys = [y for _, y in steps] + [steps[-1][1]]
            ax.step(xs, ys, where="post", color=OKABE_ITO[0], linewidth=1.8, label="best so far (median)", zorder=3)
        ax.set_xlabel("budget spent (s)")
        ax.set_ylabel("HPL (Gflop/s)")
        ax.set_title(title, fontsize=9.5)
        ax.grid(True, color="#dddddd", linewidth=0.6)
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            figure.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 4), frameon=False,
                          fontsize=8)
        return svg_element(figure)
