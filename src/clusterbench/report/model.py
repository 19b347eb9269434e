"""What a report is made of, independent of how it is written (HTML, Markdown, CSV).

Sections hold tables and figures. A figure is data, not pixels: each series is a list of
points with the run ids behind them, so the SVG, the CSV beside it and the tables are all
drawn from the same numbers, and every number can be traced to its runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clusterbench.analysis.shape import Choice


@dataclass
class Point:
    x: float
    y: float
    y_min: float | None = None  # range over repeats (error bar), None for a single value
    y_max: float | None = None
    runs: list[str] = field(default_factory=list)
    # What else a point stands for, written as CSV columns: for a best-over point the winner's
    # values of the keys it was best over (grid, T/V variant, N) and how many values it beat.
    extra: dict = field(default_factory=dict)
    n: int | None = None  # values behind the point (None: not known to the section that made it)
    repeats: int | None = None  # repeats of the configuration drawn
    cv: float | None = None  # std / mean of those repeats
    bar: str = ""  # what the bar is: 'ci95' (95% t-interval of a mean), 'range' (min-max), '' (none or unsaid)
    flags: str = ""  # a flagged run's value ('truncated'): drawn with its own marker, never a best
    tied_with: list[str] = field(default_factory=list)  # other runs equal to this best as printed
    high_cv: bool = False  # its repeats spread more than the threshold: marked


@dataclass
class Series:
    label: str
    points: list[Point] = field(default_factory=list)
    reference: bool = False  # a drawn line that is not a measurement (Rpeak, a fraction of it)
    marked: list[Point] = field(default_factory=list)  # flagged runs' values: own marker, not joined by the line
    unplaced: list[Point] = field(default_factory=list)  # values whose x is not stated: in the CSV, not drawn


@dataclass
class Panel:
    """One of a figure's small multiples: the series of one facet value (a node count, ...)."""

    title: str
    series: list[Series]


@dataclass
class Figure:
    slug: str  # file names: <slug>.svg, <slug>.csv
    title: str
    x_label: str
    y_label: str
    series: list[Series]
    x_log: int | None = None  # log base of the x axis, None for linear
    y_log: int | None = None
    x_bytes: bool = False  # x ticks as 1 KiB, 1 MiB, ...
    x_integer: bool = False  # ticks at the data's x values (NB, node counts, threads)
    caption: str = ""
    # Small multiples sharing the axes and one legend; empty: one panel drawn from `series`.
    panels: list[Panel] = field(default_factory=list)
    cv_warn: float | None = None  # the CV above which a point is marked (its legend line says it)

    def all_panels(self) -> list[Panel]:
        """The panels drawn: `panels`, or the figure's own series as one untitled panel."""
        return self.panels or [Panel("", self.series)]

    def has_data(self) -> bool:
        return any(s.points for panel in self.all_panels() for s in panel.series if not s.reference)


@dataclass
class Table:
    slug: str
    title: str
    columns: list[str]
    rows: list[list]  # cells: str, int, float, None; a list of str in the "runs" column
    note: str = ""


@dataclass
class Picture:
    """A drawing made elsewhere (an SVG document), shown beside the figures: a placement picture."""

    slug: str
    title: str
    svg: str
    caption: str = ""
    csv: str = ""  # the values it was drawn from, written beside it when there are any


@dataclass
class Section:
    slug: str
    title: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    pictures: list[Picture] = field(default_factory=list)
    # Figures not drawn (one point: said in a sentence, report/looks.settle) whose values are still written
    # as their CSV, so the data behind the sentence is where a drawn figure's would be.
    data_only: list[Figure] = field(default_factory=list)


@dataclass
class Report:
    title: str
    selection: str
    generated_at: str
    database: str
    sections: list[Section]
    runs: Table  # the appendix every "runs" cell links into


@dataclass
class Options:
    """What the user adds to the stored data: power, a peak, the list edition to place on."""

    power_watts: float | None = None  # whole system during HPL, overrides a measured figure
    rpeak_node_gflops: float | None = None  # overrides the derived peak (for imported runs)
    rpeak_fraction: float = 0.75  # the dashed "target" line under Rpeak
    top500_edition: str | None = None  # e.g. 2020-06; default: the newest bundled list
    rmax_gflops: float | None = None  # place a result measured elsewhere instead of the best stored one
    # --x/--series/--facet/--best-over/--mean for the figures of choice.metric (None: resolved by build:
    # the HPL Rmax figures, else the first metric drawn); and the figures of --spec report.yaml
    choice: Choice | None = None
    figures: list[Choice] = field(default_factory=list)

    def choice_for(self, names) -> Choice | None:
        """The user's choice when it is about one of these metrics."""
        return self.choice if self.choice is not None and self.choice.metric in set(names) else None
