"""Figures as a scientist would put them in a paper: SVG from matplotlib, plus their CSV.

Style: Okabe-Ito colours (distinguishable with the common colour-vision deficiencies) with
a distinct marker per series so print in grey still separates them, labelled axes with
units, log axes where the data spans decades, min-max bars over repeats, a legend outside
the data, and constrained layout so labels do not overlap. Small multiples share their axes
and one legend, a series keeping its colour and marker in every panel. Text stays text in the
SVG (searchable, escaped by matplotlib), and ids are salted per figure so several SVGs can
live inline in one page.

What every figure of a report shares is decided in report/looks.py: the look of each series
value (one Palette per report, so a colour never changes meaning between figures), at most 8
lines a panel, no figure of one point, wrapped titles and legend labels. Every figure, and every
picture drawn with matplotlib, is saved by `svg_element`, which crops to what is drawn
(bbox_inches="tight"): a legend or title wider than its figure grows the SVG, never is cut.

What a figure shows (x, series, panels, what is combined) is decided by analysis/shape.py;
`shaped_figure` turns its drawing into the model's Figure, and the panels beyond the bound
(or a figure with too many lines) into a Table of the same points.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable

import numpy as np

from clusterbench.analysis.shape import FLAGS, RUN, VALUE, Drawing, name, series_label, size_text, value_text
from clusterbench.report import csvsafe
from clusterbench.report.looks import (
    Palette,
    axis_text,
    fitting_chars,
    label_text,
    legend_columns,
    series_labels,
    wrapped,
)
from clusterbench.report.model import Figure, Panel, Point, Series, Table

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


def shaped_figure(slug: str, title: str, x_label: str, y_label: str, drawing: Drawing,
                  references: list[Series] = (), caption: str = "", **style) -> tuple[Figure | None, Table | None]:
    """The drawing as a Figure of its drawn panels (references in each), and a Table of the
    points it could not draw (panels beyond the bound, or all of them when too many lines).
    Flagged runs' values stay with their series (`marked`), values without an x too (`unplaced`,
    in the CSV only), and the caption says what was kept apart or marked (Drawing.caption)."""
    panels = [Panel(p.title, [Series(s.label, [_model_point(pt) for pt in s.points],
                                     marked=[_model_point(pt) for pt in s.marked]) for s in p.series])
              for p in drawing.panels]
    drawn, rest = panels[:drawing.drawn], panels[drawing.drawn:]
    text = " ".join(t for t in (drawing.caption(), caption) if t)
    figure = None
    if drawn and any(s.points or s.marked for p in drawn for s in p.series):
        _attach_unplaced(drawing, drawn)
        for panel in drawn:
            panel.series += [Series(r.label, list(r.points), reference=True) for r in references]
        single = len(drawn) == 1 and not drawn[0].title
        figure = Figure(slug, title, x_label, y_label, drawn[0].series if single else [], caption=text,
                        panels=[] if single else drawn, cv_warn=drawing.shape.cv_warn, **style)
    table = None
    if rest:
        note = drawing.why_table or f"panels beyond the first {drawing.drawn} drawn"
        table = points_table(f"{slug}-points", f"{title}: {'the values' if not drawn else 'further panels'}",
                             x_label, y_label, rest, f"{note}. {text}")
    return figure, table


def _model_point(pt) -> Point:
    return Point(pt.x, pt.y, pt.y_min, pt.y_max, pt.runs, pt.extra, n=pt.n, repeats=pt.repeats, cv=pt.cv,
                 bar=pt.bar, flags=pt.flags, tied_with=list(pt.tied_with), high_cv=pt.high_cv)


def _attach_unplaced(drawing: Drawing, panels: list[Panel]) -> None:
    """The values without an x, each with its series (by panel title and label) for the CSV."""
    if drawing.unplaced is None or not len(drawing.unplaced):
        return
    shape_ = drawing.shape
    by_title = {p.title: p for p in panels}
    for rec in drawing.unplaced.to_dict("records"):
        title = ", ".join(value_text(k, rec.get(k)) for k in shape_.facets)
        label = series_label(shape_.series, tuple(rec.get(k) for k in shape_.series))
        panel = by_title.get(title, panels[0])
        series = next((s for s in panel.series if s.label == label), None)
        if series is None:
            series = Series(label or "(x not stated)")
            panel.series.append(series)
        series.unplaced.append(Point(math.nan, float(rec[VALUE]), runs=[rec[RUN]], n=1,
                                     flags=str(rec.get(FLAGS) or "")))


AXIS_LABELS = {"nb": "block size NB", "n": "problem size N", "nodes": "nodes", "bytes": "message size",
               "workers": "threads x tasks", "threads": "threads", "ranks": "MPI ranks", "ppn": "processes per node"}


def axis_label(key: str | None) -> str:
    """How an x key is written under the axis."""
    return AXIS_LABELS.get(key or "", name(key or ""))


def points_table(slug: str, title: str, x_label: str, y_label: str, panels: list[Panel], note: str = "") -> Table:
    """The points of these panels, one row each (flagged runs' values too, with their flags), with the
    winner's values of best-over points, n, CV and the runs a best is tied with."""
    extra = list(dict.fromkeys(k for p in panels for s in p.series for pt in s.points for k in pt.extra))
    rows = [[p.title, s.label, pt.x, pt.y, pt.y_min, pt.y_max, *[pt.extra.get(k) for k in extra], pt.n,
             None if pt.cv is None else round(100 * pt.cv, 2), pt.flags, ";".join(pt.tied_with), pt.runs]
            for p in panels for s in p.series if not s.reference for pt in [*s.points, *s.marked]]
    return Table(slug, title, ["panel", "series", x_label, y_label, "min", "max", *extra, "n", "CV (%)", "flags",
                               "tied with", "runs"], rows, note=note)


def csv_number(value) -> str:
    """A number as its exact Python repr ('53.859375'), never numpy's 'np.float64(53.859375)'."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(float(value)) if isinstance(value, float) else str(value)


POINT_COLUMNS = ["n_values", "repeats", "cv", "bar", "flags", "tied_with", "high_cv"]


def csv_text(fig: Figure) -> str:
    """The exact plotted values (repr of floats): one row per point, with its panel, the runs
    behind it, n (values behind it), the repeats and CV of the configuration drawn, what its bar is
    (ci95: the 95% interval of a mean of 3+ repeats, range: min-max), the flags of a flagged run's
    value (kind 'flagged', never a best), the runs a best is tied with, and what a best-over point
    won with; values without an x are rows of kind 'x not stated'. Text cells are safe from formula
    injection, numbers are written as they are."""
    panels = fig.all_panels()
    extra = list(dict.fromkeys(k for p in panels for s in p.series for pt in s.points for k in pt.extra))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(csvsafe.row(["panel", "series", "kind", fig.x_label, fig.y_label, "y_min", "y_max", "n_runs",
                            "run_ids", *POINT_COLUMNS, *extra]))
    for panel in panels:
        for s in panel.series:
            kinds = (("reference" if s.reference else "measured", s.points), ("flagged", s.marked),
                     ("x not stated", s.unplaced))
            for kind, points in kinds:
                for p in points:
                    x = "" if isinstance(p.x, float) and math.isnan(p.x) else csv_number(p.x)
                    w.writerow([csvsafe.cell(panel.title), csvsafe.cell(s.label), kind, x,
                                csv_number(p.y), "" if p.y_min is None else csv_number(p.y_min),
                                "" if p.y_max is None else csv_number(p.y_max), len(p.runs),
                                csvsafe.cell(";".join(p.runs)), csv_cell(p.n), csv_cell(p.repeats), csv_cell(p.cv),
                                csv_cell(p.bar), csv_cell(p.flags), csvsafe.cell(";".join(p.tied_with)),
                                "yes" if p.high_cv else "", *[csv_cell(p.extra.get(k)) for k in extra]])
    return buf.getvalue()


def csv_cell(value):
    """Any cell: nothing for missing, plain numbers, text safe from formula injection."""
    kind = type(value)
    if kind is str:
        return csvsafe.cell(value)
    if kind is int:
        return value
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int | float):
        return csv_number(value)
    return csvsafe.cell(str(value))


MAX_SHARED_LEGEND = 16  # distinct series over all panels; beyond, each panel has its own legend
PANEL_INCHES = (3.7, 2.4)  # one small multiple
SINGLE_INCHES = (7.5, 4.6)  # a figure of one panel


def svg_text(fig: Figure, palette: Palette | None = None) -> str:
    """The figure as an inline-able <svg> element (no XML prologue): one axes, or a grid of
    small multiples sharing both axes and one legend below them. `palette`: the report's (a
    series value looks the same in every figure); without it, the figure's own."""
    with figure_style(fig.slug):
        return svg_element(draw(fig, palette))


def figure_style(slug: str):
    """The report's matplotlib settings, ids salted by the figure's slug (drawing and saving need them)."""
    import matplotlib

    matplotlib.use("Agg")
    return matplotlib.rc_context(_STYLE | {"svg.hashsalt": slug})


def draw(fig: Figure, palette: Palette | None = None):
    """The figure as a matplotlib Figure, not yet saved (svg_element saves and closes it)."""
    palette = palette or Palette([fig])
    panels = fig.all_panels()
    with figure_style(fig.slug):  # selects the Agg backend before pyplot is imported
        import matplotlib.pyplot as plt

        if len(panels) > 1:
            return _small_multiples(plt, fig, panels, palette, len(series_labels(fig)) <= MAX_SHARED_LEGEND)
        figure, ax = plt.subplots(figsize=SINGLE_INCHES, layout="constrained")
        _draw_panel(ax, fig, panels[0], palette, minor=True)
        if not fig.y_log:
            ax.set_ylim(bottom=0, top=_linear_top(ax, panels))
        ax.set_xlabel(axis_text(fig.x_label))
        ax.set_ylabel(axis_text(fig.y_label))
        title = f"{fig.title}: {panels[0].title}" if panels[0].title else fig.title
        shown, cut = wrapped(title, fitting_chars(SINGLE_INCHES[0] - 0.3, _STYLE["axes.titlesize"]))
        ax.set_title(shown)
        if cut and panels[0].title:  # the figure's own title is the caption's first words anyway
            fig.caption = _with_full_titles(fig.caption, [panels[0].title])
        handles = _handles([ax]) | _mark_handles(fig)
        if len(handles) > 1 or any(handles):  # below the axes, never over data
            labels = [label_text(label) for label in handles]
            figure.legend(list(handles.values()), labels, loc="outside lower center", frameon=False, fontsize=8,
                          ncol=legend_columns(labels, SINGLE_INCHES[0] - 0.3, 3))
        return figure


def _linear_top(ax, panels: list[Panel]) -> float:
    """The top of a linear y axis that starts at 0: matplotlib's margin was worked out for the data's
    own range, so once the bottom moves to 0 the highest point (and a tie's ring) sat on the edge, half
    cut. At least 6% above the highest value, bar or marked point drawn."""
    highest = 0.0
    for panel in panels:
        for series in panel.series:
            for point in [*series.points, *getattr(series, "marked", [])]:
                for y in (point.y, point.y_max):
                    if y is not None and math.isfinite(y):
                        highest = max(highest, y)
    return max(ax.get_ylim()[1], highest * 1.06) if highest > 0 else ax.get_ylim()[1]


def _small_multiples(plt, fig: Figure, panels: list[Panel], palette: Palette, shared_legend: bool):
    """A grid of panels laid out by hand (a constrained layout of a dozen axes costs seconds): drawn
    first, then sized to its text (wrapped titles, the legend's rows) before it is saved."""
    columns = 2 if len(panels) <= 4 else 3
    rows = math.ceil(len(panels) / columns)
    left, right = 0.75, 0.15
    width = PANEL_INCHES[0] * columns + left + right
    figure, axes = plt.subplots(rows, columns, figsize=(width, PANEL_INCHES[1] * rows + 1.2), sharex=True,
                                sharey=True, squeeze=False)
    flat = list(axes.flat)
    titles = [wrapped(p.title, fitting_chars(PANEL_INCHES[0] - 0.1, 8)) for p in panels]
    for i, (ax, panel, (title, _cut)) in enumerate(zip(flat, panels, titles, strict=False)):
        _draw_panel(ax, fig, panel, palette, minor=False)
        ax.set_title(title, fontsize=8)
        if i + columns >= len(panels):  # nothing drawn below it: it carries the x tick labels
            ax.xaxis.set_tick_params(labelbottom=True)
        if not shared_legend and panel.series:
            own = _handles([ax]) | _mark_handles(fig)
            ax.legend(list(own.values()), [label_text(label) for label in own], fontsize=6, frameon=False)
    for ax in flat[len(panels):]:
        ax.set_visible(False)
    if not fig.y_log:  # once all panels are drawn: the shared axis then spans every panel's data
        flat[0].set_ylim(bottom=0, top=_linear_top(flat[0], panels))
    cut = [p.title for p, (_title, was_cut) in zip(panels, titles, strict=True) if was_cut]
    if cut:  # the SVG shows the start of a long panel title; its alt text (the caption) the whole
        fig.caption = _with_full_titles(fig.caption, cut)
    handles = _handles(flat) | _mark_handles(fig) if shared_legend else {}
    if not (len(handles) > 1 or any(handles)):
        handles = {}
    labels = [label_text(label) for label in handles]
    legend_columns_ = legend_columns(labels, width - 0.3, columns) if labels else 1
    legend_rows = math.ceil(len(labels) / legend_columns_) if labels else 0
    lines = max((label.count("\n") + 1 for label in labels), default=1)
    suptitle, _ = wrapped(fig.title, fitting_chars(width - 0.3, 10))
    title_lines = max(t.count("\n") + 1 for t, _cut in titles)
    top = 0.3 + 0.17 * (suptitle.count("\n") + 1) + 0.14 * title_lines
    bottom = 0.55 + legend_rows * (0.08 + 0.135 * lines)
    height = PANEL_INCHES[1] * rows + top + bottom
    figure.set_size_inches(width, height)
    figure.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height,
                           bottom=bottom / height, hspace=0.45 + 0.12 * (title_lines - 1), wspace=0.12)
    figure.suptitle(suptitle, fontsize=10, y=1 - 0.12 / height, va="top")
    figure.supxlabel(axis_text(fig.x_label), fontsize=9, y=(bottom - 0.42) / height, va="bottom")
    figure.supylabel(axis_text(fig.y_label), fontsize=9, x=0.12 / width, ha="left")
    if handles:
        figure.legend(list(handles.values()), labels, loc="lower center", bbox_to_anchor=(0.5, 0.0),
                      ncol=legend_columns_, frameon=False, fontsize=8)
    return figure


def _with_full_titles(caption: str, titles: list[str]) -> str:
    """The caption with the panel titles the figure shortened, in full (once, however often it is drawn)."""
    note = "Panels in full: " + "; ".join(titles) + "."
    return caption if note in caption else f"{caption} {note}".strip()


def _handles(axes) -> dict[str, object]:
    """label -> one artist of it, over all axes (a series drawn in several panels is listed once)."""
    handles: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    return handles


def _draw_panel(ax, fig: Figure, panel: Panel, palette: Palette, minor: bool) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

    measured = [s for s in panel.series if not s.reference]
    for s in measured:
        colour, marker = palette.look(s.label)
        if s.points:
            xs, ys = [p.x for p in s.points], [p.y for p in s.points]
            # max(0, ...): the mean of equal values can differ from them in the last bit
            lower = [max(0.0, p.y - p.y_min) if p.y_min is not None else 0.0 for p in s.points]
            upper = [max(0.0, p.y_max - p.y) if p.y_max is not None else 0.0 for p in s.points]
            ax.errorbar(xs, ys, yerr=[lower, upper] if any(lower) or any(upper) else None, color=colour,
                        marker=marker, markersize=5 if minor else 3.5, linewidth=1.4 if minor else 1.1, capsize=3,
                        label=s.label or None)
        _draw_marks(ax, s, colour, minor)
    _draw_references(ax, [r for r in panel.series if r.reference and r.points])
    if fig.x_log:
        ax.set_xscale("log", base=fig.x_log)
    if fig.y_log:
        ax.set_yscale("log", base=fig.y_log)
        if not minor:  # small multiples: no minor ticks (each costs a text layout, in every panel)
            ax.yaxis.set_minor_locator(NullLocator())
    if fig.x_bytes:  # a labelled tick every 16x, unlabelled ones every 2x: no crowding
        ax.xaxis.set_major_locator(LogLocator(base=16))
        ax.xaxis.set_minor_locator(LogLocator(base=2, subs=(1.0,), numticks=64) if minor else NullLocator())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: size_label(v)))
    if fig.x_integer:
        _integer_ticks(ax, sorted({p.x for q in fig.all_panels() for s in q.series if not s.reference
                                   for p in [*s.points, *s.marked]}))
    ax.grid(True, which="major", color="#dddddd", linewidth=0.6)


REFERENCE_COLOUR = "#555555"


def _draw_references(ax, references: list[Series]) -> None:
    """Reference lines (Rpeak, a fraction of it) in grey, one dash pattern each. A reference known at
    one x only (every run on one node) is a level: drawn across the axes, so its legend line is seen."""
    for i, s in enumerate(references):
        style = {"color": REFERENCE_COLOUR, "linestyle": REFERENCE_STYLES[i % len(REFERENCE_STYLES)],
                 "linewidth": 1.2, "label": s.label}
        if len({p.x for p in s.points}) > 1:
            ax.plot([p.x for p in s.points], [p.y for p in s.points], **style)
        else:
            ax.axhline(s.points[0].y, **style)


FLAG_MARKERS = {"truncated": "x", "suspect": "1", "disturbed": "4", "excluded": "+", "failed": "x", "invalid": "x"}
FLAG_LEGEND = {"truncated": "truncated (cut short): not counted", "suspect": "suspect (beyond the peak): not counted",
               "disturbed": "disturbed (CPUs taken): not counted", "excluded": "excluded by a user: not counted",
               "failed": "failed: not counted", "invalid": "invalid: not counted"}
TIE_LEGEND = "tied best: other runs equal as printed"
CI_LEGEND = "bar: 95% interval of a mean of 3+ repeats"
MARK_COLOUR = "#333333"


def _flag_kind(flags: str) -> str:
    """The flag a marked point is drawn by: the first of its flags."""
    return flags.split(", ")[0] if flags else ""


def _draw_marks(ax, s: Series, colour: str, minor: bool) -> None:
    """A series' marks: flagged runs' values (a marker per flag kind, in the series' colour, not joined),
    a ring around a tied best, a square around a point whose repeats spread (high CV)."""
    size = 46 if minor else 26
    for kind in dict.fromkeys(_flag_kind(p.flags) for p in s.marked):
        pts = [p for p in s.marked if _flag_kind(p.flags) == kind]
        ax.scatter([p.x for p in pts], [p.y for p in pts], marker=FLAG_MARKERS.get(kind, "x"), s=size * 1.4,
                   color=colour, linewidths=1.8, zorder=4, label="_nolegend_")
    tied = [p for p in s.points if p.tied_with]
    if tied:
        ax.scatter([p.x for p in tied], [p.y for p in tied], marker="o", s=size * 4, facecolors="none",
                   edgecolors=MARK_COLOUR, linewidths=1.1, zorder=5, label="_nolegend_")
    spread = [p for p in s.points if p.high_cv]
    if spread:
        ax.scatter([p.x for p in spread], [p.y for p in spread], marker="s", s=size * 3, facecolors="none",
                   edgecolors=MARK_COLOUR, linewidths=1.1, zorder=5, label="_nolegend_")


def _mark_handles(fig: Figure) -> dict[str, object]:
    """One legend line per kind of mark the figure draws (flags, ties, high CV, interval bars)."""
    from matplotlib.lines import Line2D

    points = [p for panel in fig.all_panels() for s in panel.series if not s.reference for p in s.points]
    flagged = [p for panel in fig.all_panels() for s in panel.series for p in s.marked]
    handles: dict[str, object] = {}
    if any(p.bar == "ci95" for p in points):
        handles[CI_LEGEND] = Line2D([], [], color=MARK_COLOUR, marker="|", markersize=10, linestyle="none")
    for kind in dict.fromkeys(_flag_kind(p.flags) for p in flagged):
        label = FLAG_LEGEND.get(kind, f"{kind}: not counted")
        handles[label] = Line2D([], [], color=MARK_COLOUR, marker=FLAG_MARKERS.get(kind, "x"), markersize=8,
                                markeredgewidth=1.8, linestyle="none")
    if any(p.tied_with for p in points):
        handles[TIE_LEGEND] = Line2D([], [], marker="o", markersize=11, markerfacecolor="none",
                                     markeredgecolor=MARK_COLOUR, linestyle="none")
    if any(p.high_cv for p in points):
        threshold = f"{fig.cv_warn:.0%}" if fig.cv_warn is not None else "the threshold"
        handles[f"repeats spread: CV above {threshold}"] = Line2D(
            [], [], marker="s", markersize=10, markerfacecolor="none", markeredgecolor=MARK_COLOUR, linestyle="none")
    return handles


def svg_element(figure) -> str:
    """A drawn matplotlib figure as an inline <svg> element (no XML prologue, no date or tool
    metadata, so the same data gives the same bytes), closed afterwards."""
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    figure.savefig(buf, format="svg", metadata=_NO_METADATA, bbox_inches="tight", pad_inches=0.08)
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
    return size_text(nbytes)


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
