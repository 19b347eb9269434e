"""Figures as a scientist would put them in a paper: SVG from matplotlib, plus their CSV.

Style: Okabe-Ito colours (distinguishable with the common colour-vision deficiencies) with
a distinct marker per series so print in grey still separates them, labelled axes with
units, log axes where the data spans decades, min-max bars over repeats, a legend outside
the data, and constrained layout so labels do not overlap. Text stays text in the SVG
(searchable, escaped by matplotlib), and ids are salted per figure so several SVGs can
live inline in one page.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable

from clusterbench.report import csvsafe
from clusterbench.report.model import Figure, Point, Series

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
REFERENCE_STYLES = ("--", ":", "-.")


def aggregate(samples: Iterable[tuple[str, float, float, str]]) -> list[Series]:
    """(series, x, y, run id) samples -> series of mean points with min-max over repeats."""
    grouped: dict[str, dict[float, tuple[list[float], list[str]]]] = {}
    for label, x, y, run_id in samples:
        values, ids = grouped.setdefault(label, {}).setdefault(x, ([], []))
        values.append(y)
        ids.append(run_id)
    out = []
    for label, by_x in grouped.items():
        points = []
        for x in sorted(by_x):
            values, ids = by_x[x]
            mean = sum(values) / len(values)
            spread = len(values) > 1
            points.append(Point(x, mean, min(values) if spread else None, max(values) if spread else None,
                                sorted(set(ids))))
        out.append(Series(label, points))
    return out


def csv_text(fig: Figure) -> str:
    """The exact plotted values (repr of floats): one row per point, with the runs behind it; text
    cells (series labels, run ids) are safe from formula injection, numbers are written as they are."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(csvsafe.row(["series", "kind", fig.x_label, fig.y_label, "y_min", "y_max", "n_runs", "run_ids"]))
    for s in fig.series:
        for p in s.points:
            w.writerow([csvsafe.cell(s.label), "reference" if s.reference else "measured", repr(p.x), repr(p.y),
                        "" if p.y_min is None else repr(p.y_min), "" if p.y_max is None else repr(p.y_max),
                        len(p.runs), csvsafe.cell(";".join(p.runs))])
    return buf.getvalue()


def svg_text(fig: Figure) -> str:
    """The figure as an inline-able <svg> element (no XML prologue)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    with matplotlib.rc_context(_STYLE | {"svg.hashsalt": fig.slug}):
        figure, ax = plt.subplots(figsize=(7.5, 4.6), layout="constrained")
        measured = [s for s in fig.series if not s.reference]
        for i, s in enumerate(measured):
            colour, marker = OKABE_ITO[i % len(OKABE_ITO)], MARKERS[i % len(MARKERS)]
            xs, ys = [p.x for p in s.points], [p.y for p in s.points]
            lower = [p.y - p.y_min if p.y_min is not None else 0.0 for p in s.points]
            upper = [p.y_max - p.y if p.y_max is not None else 0.0 for p in s.points]
            ax.errorbar(xs, ys, yerr=[lower, upper] if any(lower) or any(upper) else None, color=colour,
                        marker=marker, markersize=5, linewidth=1.4, capsize=3, label=s.label)
        for i, s in enumerate(r for r in fig.series if r.reference):
            ax.plot([p.x for p in s.points], [p.y for p in s.points], color="#555555",
                    linestyle=REFERENCE_STYLES[i % len(REFERENCE_STYLES)], linewidth=1.2, label=s.label)
        if fig.x_log:
            ax.set_xscale("log", base=fig.x_log)
        if fig.y_log:
            ax.set_yscale("log", base=fig.y_log)
        if fig.x_bytes:  # a labelled tick every 16x, unlabelled ones every 2x: no crowding
            ax.xaxis.set_major_locator(LogLocator(base=16))
            ax.xaxis.set_minor_locator(LogLocator(base=2, subs=(1.0,), numticks=64))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: size_label(v)))
        if fig.x_integer:
            _integer_ticks(ax, sorted({p.x for s in measured for p in s.points}))
        ax.set_xlabel(fig.x_label)
        ax.set_ylabel(fig.y_label)
        ax.set_title(fig.title)
        if not fig.y_log:
            ax.set_ylim(bottom=0)
        ax.grid(True, which="major", color="#dddddd", linewidth=0.6)
        if len(fig.series) > 1 or measured and measured[0].label:  # below the axes, never over data
            figure.legend(loc="outside lower center", ncol=2 if len(fig.series) > 1 else 1, frameon=False,
                          fontsize=8)
        return svg_element(figure)


def svg_element(figure) -> str:
    """A drawn matplotlib figure as an inline <svg> element (no XML prologue, no date or tool
    metadata, so the same data gives the same bytes), closed afterwards."""
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    figure.savefig(buf, format="svg", metadata=_NO_METADATA)
    plt.close(figure)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _integer_ticks(ax, ticks: list[float]) -> None:
    """Ticks at the measured x values (NB 64, 96, 128...), unless they would crowd each other."""
    if not ticks or len(ticks) > 12:
        return
    span = (ticks[-1] - ticks[0]) or 1.0
    if len(ticks) > 1 and min(b - a for a, b in zip(ticks, ticks[1:], strict=False)) < span / 14:
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        return
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}" for t in ticks])


def range_text(point: Point | None) -> str | None:
    """'12.3 (11.9-12.8)': a point's mean and its range over repeats, for tables."""
    if point is None:
        return None
    if point.y_min is None:
        return f"{point.y:.4g}"
    return f"{point.y:.4g} ({point.y_min:.4g}-{point.y_max:.4g})"


def size_label(nbytes: float) -> str:
    """4096 -> '4 KiB': message sizes as people say them."""
    if nbytes <= 0 or not math.isfinite(nbytes):
        return "0 B"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes:g} B"


# No RDF block: its date would make every report differ and its namespaces look like URLs.
_NO_METADATA = {"Creator": None, "Date": None, "Format": None, "Type": None}

_STYLE = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.fonttype": "none",
    "figure.dpi": 100,
}
