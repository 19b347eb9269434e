"""What every figure of a report shares, decided in one place so that no figure decides it alone.

- A colour means one thing: the Palette gives each series value (its label: "openblas", "cores,
  thread scaling") one look, a colour and a marker, for the whole report. Figures are visited widest
  first, and a value takes a colour no other line of its figures has and, while there are any, a look
  no other value of the report has: with up to 8 values in a report each has a colour of its own,
  beyond that a colour repeats only with another marker.
- A panel holds at most MAX_SERIES lines (Okabe-Ito has 8 colours; a longer legend is not read):
  the shaped figures (analysis/shape.py) never hold more, and `settle` cuts a panel of any other
  producer into panels of at most that many, each keeping its reference lines.
- A figure of one point shows nothing a sentence cannot say: `settle` replaces it by a paragraph
  of its section giving the value, its run and the reference values at its x.
- Text fits where it is drawn: titles and legend labels are wrapped to the width they get (DejaVu
  Sans at EM font sizes a character, wide enough for digits and capitals), a title longer than
  TITLE_LINES lines is shortened (the HTML caption and the model keep the full text), a legend has
  as many columns as fit, and an axis label that is a bare unit gets its quantity ("rate (Gflop/s)").
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable

from clusterbench.analysis.shape import MAX_SERIES, size_text
from clusterbench.report.model import Figure, Panel, Point, Section, Series

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LOOKS = len(OKABE_ITO) * len(MARKERS)  # distinct (colour, marker) pairs
MAX_SPLIT_PANELS = 24  # panels a figure cut by `settle` may have; lines beyond are left to the section's table
EM = 0.6  # width of a character of DejaVu Sans, in font sizes (its digits are 0.64, lower case about 0.55)
TITLE_LINES = 3  # a longer title is shortened with an ellipsis
LABEL_CHARS = 48  # a legend label wraps beyond this many characters
ELLIPSIS = "\u2026"
UNIT_QUANTITY = {"Gflop/s": "rate", "Tflop/s": "rate", "GB/s": "bandwidth", "MB/s": "bandwidth",
                 "us": "time", "ms": "time", "s": "time", "W": "power", "J": "energy"}


def look_of(index: int) -> tuple[str, str]:
    """The index-th look: the 8 colours with their own markers first, then each colour with the others."""
    return OKABE_ITO[index % len(OKABE_ITO)], MARKERS[(index + index // len(OKABE_ITO)) % len(MARKERS)]


def series_labels(fig: Figure) -> list[str]:
    """The measured lines of a figure, each once, in the order they are drawn."""
    return list(dict.fromkeys(s.label for p in fig.all_panels() for s in p.series if not s.reference))


class Palette:
    """One look per series value over every figure given (see the module doc)."""

    def __init__(self, figures: Iterable[Figure] = ()):
        self._index: dict[str, int] = {}
        groups = [series_labels(fig) for fig in figures]
        for labels in sorted(groups, key=len, reverse=True):  # widest first: its lines get distinct colours
            self._add(labels)

    @classmethod
    def of_sections(cls, sections: Iterable[Section]) -> Palette:
        return cls(fig for section in sections for fig in section.figures)

    def _add(self, labels: list[str]) -> None:
        given = {self._index[label] for label in labels if label in self._index}
        for label in labels:
            if label not in self._index:
                self._index[label] = self._choose(given)
                given.add(self._index[label])

    def _choose(self, given: set[int]) -> int:
        """A look for a new value among lines holding `given`: a free colour and a look new to the report,
        else a look new to the report, else one new to these lines."""
        colours = {k % len(OKABE_ITO) for k in given}
        taken = set(self._index.values())
        for wanted in (lambda k: k % len(OKABE_ITO) not in colours and k not in taken,
                       lambda k: k not in taken and k not in given, lambda k: k not in given):
            for k in range(LOOKS):
                if wanted(k):
                    return k
        return len(given) % LOOKS

    def look(self, label: str) -> tuple[str, str]:
        """(colour, marker) of a series value; a value no figure given holds gets the next free look."""
        if label not in self._index:
            self._add([label])
        return look_of(self._index[label])


# ---------------------------------------------------------------------------------------------- text


def fitting_chars(inches: float, points: float) -> int:
    """Characters of DejaVu Sans at `points` that fit in `inches`."""
    return max(12, int(inches * 72 / (points * EM)))


def wrapped(text: str, chars: int, lines: int = TITLE_LINES) -> tuple[str, bool]:
    """The text in lines of at most `chars` characters, at most `lines` of them (the last ending in an
    ellipsis when it was cut), and whether it was cut."""
    parts = textwrap.wrap(text, chars, break_on_hyphens=False) or [""]
    if len(parts) <= lines:
        return "\n".join(parts), False
    parts = parts[:lines]
    parts[-1] = parts[-1][:chars - 1].rstrip() + ELLIPSIS
    return "\n".join(parts), True


def label_text(label: str) -> str:
    """A legend label, wrapped beyond LABEL_CHARS characters (never shortened: it names a line)."""
    return "\n".join(textwrap.wrap(label, LABEL_CHARS, break_on_hyphens=False)) if len(label) > LABEL_CHARS else label


def legend_columns(labels: list[str], inches: float, most: int, points: float = 8) -> int:
    """As many legend columns as fit in `inches` (a column: the handle, the widest label and the spacing)."""
    widest = max((len(line) for label in labels for line in label.split("\n")), default=1)
    column = (widest * EM + 2.0 + 0.8 + 2.0) * points / 72
    return max(1, min(most, len(labels), int(inches / column)))


def axis_text(label: str) -> str:
    """An axis label with its quantity: a bare unit ('Gflop/s') becomes 'rate (Gflop/s)'."""
    quantity = UNIT_QUANTITY.get(label.strip())
    return f"{quantity} ({label.strip()})" if quantity else label


# ---------------------------------------------------------------------------------------------- settle


def settle(sections: Iterable[Section]) -> None:
    """Every figure of these sections as it can be read: a figure of one point becomes a sentence of
    its section, a panel of more than MAX_SERIES lines is cut into panels. Changes the sections in place;
    a settled section is left as it is."""
    for section in sections:
        kept = []
        for fig in section.figures:
            points = _measured(fig)
            if len(points) == 1:
                section.paragraphs.append(one_point_text(fig, *points[0]) + f" Data: {fig.slug}.csv.")
                section.data_only.append(fig)
                continue
            split_wide_panels(fig)
            kept.append(fig)
        section.figures = kept


def _measured(fig: Figure) -> list[tuple[Panel, Series, Point, bool]]:
    """(panel, series, point, flagged) of every measured point, flagged runs' values too."""
    return [(panel, s, p, flagged) for panel in fig.all_panels() for s in panel.series if not s.reference
            for points, flagged in ((s.points, False), (s.marked, True)) for p in points]


def _x_text(fig: Figure, x: float) -> str:
    return size_text(x) if fig.x_bytes else f"{x:g}"


def one_point_text(fig: Figure, panel: Panel, series: Series, point: Point, flagged: bool = False) -> str:
    """The sentence that says what a figure of one point would have drawn."""
    what = ", ".join(t for t in (panel.title, series.label) if t)
    runs = ", ".join(point.runs[:3]) + (f" and {len(point.runs) - 3} more" if len(point.runs) > 3 else "")
    text = (f"{fig.title}: one value, so no figure: {what + ': ' if what else ''}{axis_text(fig.y_label)} "
            f"{point.y:.4g} at {fig.x_label} {_x_text(fig, point.x)}")
    text += f" (run {runs})" if runs else ""
    if flagged:
        text += f", flagged {point.flags or 'run'}: not counted"
    levels = [f"{r.label} {p.y:.4g}" for r in panel.series if r.reference for p in r.points if p.x == point.x]
    return text + (f"; for comparison {', '.join(levels)}" if levels else "") + "."


def split_wide_panels(fig: Figure) -> None:
    """Cut every panel of more than MAX_SERIES lines into panels of at most that many (as even as can
    be: 10 lines are 5 and 5), the reference lines in each; the caption says so."""
    panels = fig.all_panels()
    widest = max((sum(not s.reference for s in p.series) for p in panels), default=0)
    if widest <= MAX_SERIES:
        return
    out: list[Panel] = []
    for panel in panels:
        lines = [s for s in panel.series if not s.reference]
        references = [s for s in panel.series if s.reference]
        if len(lines) <= MAX_SERIES:
            out.append(panel)
            continue
        parts = math.ceil(len(lines) / MAX_SERIES)
        size = math.ceil(len(lines) / parts)
        for start in range(0, len(lines), size):
            chunk = lines[start:start + size]
            which = f"lines {start + 1}-{start + len(chunk)} of {len(lines)}"
            copies = [Series(r.label, list(r.points), reference=True) for r in references]
            out.append(Panel(f"{panel.title}, {which}" if panel.title else which, chunk + copies))
    left = out[MAX_SPLIT_PANELS:]
    fig.panels, fig.series = out[:MAX_SPLIT_PANELS], []
    note = f"More than {MAX_SERIES} lines in one panel: cut into panels of at most {MAX_SERIES}."
    if left:
        lost = sum(not s.reference for p in left for s in p.series)
        note += f" {lost} further line(s) are not drawn (the section's table lists them)."
    fig.caption = f"{fig.caption} {note}".strip()
