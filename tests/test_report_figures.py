"""Figures that show what they mean (issue 36): every figure of a real report keeps its text inside the
picture, holds at most 8 lines a panel, never is a single point, and gives a series value one colour in
every figure; placement pictures are never shrunk and open at full size inside the page; `pin --svg` is as
wide as its text.

The reports are built over real stores: two of the studies users brought (tests/test_report_studies.py's
module fixtures, reused), and two small stores written here through the Store API (the shape of
tests/test_report_shape.py's) holding what broke the figures: ten pinning strategies (ten lines), a tuning
whose name is a long command line (a long legend label), and HPL run on one node only (one point).

Text is measured the way a browser draws it: with matplotlib's metrics of the font the SVG names (DejaVu
Sans in the figures, DejaVu Sans Mono in the placement pictures), never with the estimate the code used to
size the picture, so a picture sized by a wrong estimate fails here.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import pytest
from tests.conftest import TOPOLOGY, cli
from tests.test_report_shape import _run
from tests.test_report_studies import Reported, jsc, pi  # noqa: F401  (module fixtures: the studies' reports)

from clusterbench.analysis.select import Selection
from clusterbench.bench.metrics import Metric
from clusterbench.pinning.model import Prediction, TaskPlacement
from clusterbench.pinning.openmp import with_threads
from clusterbench.pinning.render import picture_svg
from clusterbench.report import looks
from clusterbench.report.build import build
from clusterbench.report.figures import draw, svg_text
from clusterbench.report.looks import Palette
from clusterbench.report.model import Figure, Options, Panel, Picture, Point, Report, Section, Series, Table
from clusterbench.report.render import write
from clusterbench.store.db import Store
from clusterbench.system.sources import topology_from_file

SVG = "{http://www.w3.org/2000/svg}"
MAX_SERIES = 8
SLACK = 1.0  # pt: rounding of the coordinates matplotlib writes
STRATEGIES = 10
RPEAK_NODE = 48.0
LONG_TUNING = ("interrupt_coalescing=adaptive-rx on adaptive-tx on rx-usecs 0 tx-usecs 0 rx-frames 1 "
               "tx-frames 1 and ring buffers rx 4096 tx 4096")


# ---------------------------------------------------------------- stores with what broke the figures


def _hard_store(path: Path) -> None:
    """Ten pinning strategies of STREAM at 1, 2 and 4 threads; HPL on one node, two tunings (one named
    by a long command line) over three NBs."""
    with Store(path) as store, store.batch():
        for i in range(STRATEGIES):
            for threads in (1, 2, 4):
                params = {"pinning": f"strategy-{i:02d}", "threads": threads, "ranks": 1, "n": 2_000_000}
                triad = 1000.0 * threads * (1 + i / 20)  # MB/s, as STREAM stores it
                _run(store, f"pin-{i}-{threads}", "stream", params, [Metric("stream_triad", triad, "MB/s", True, {})])
        for tuning, gain in (("baseline", 1.0), (LONG_TUNING, 1.1)):
            for nb in (128, 192, 256):
                labels = {"tv": "WR00L2L2", "n": 8000, "nb": nb, "p": 1, "q": 2}
                params = {"nodes": 1, "blas": "openblas-serial", "tuning": tuning, "ranks": 2} | labels
                run_id = f"hpl-{'long' if tuning != 'baseline' else 'base'}-{nb}"
                _run(store, run_id, "hpl", params, [Metric("hpl_gflops", gain * (10 + nb / 100), "Gflop/s", True,
                                                           labels)])


def _single_store(path: Path) -> None:
    """HPL on one node, one configuration, an NB sweep: the node-count figure would be one point."""
    with Store(path) as store, store.batch():
        for nb in (128, 192, 256):
            labels = {"tv": "WR00L2L2", "n": 8000, "nb": nb, "p": 1, "q": 2}
            params = {"nodes": 1, "blas": "openblas-serial", "ranks": 2} | labels
            _run(store, f"hpl-{nb}", "hpl", params, [Metric("hpl_gflops", 10 + nb / 100, "Gflop/s", True, labels)])


def _report_over(root: Path, name: str, fill) -> Reported:
    db = root / f"{name}.db"
    fill(db)
    with Store(db, read_only=True) as store:
        doc = build(store, Selection(), Options(rpeak_node_gflops=RPEAK_NODE))
    out = root / f"{name}-report"
    write(doc, out)
    return Reported(None, doc, out, {})


@pytest.fixture(scope="module")
def hard(tmp_path_factory) -> Reported:
    return _report_over(tmp_path_factory.mktemp("hard"), "hard", _hard_store)


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> Reported:
    return _report_over(tmp_path_factory.mktemp("single"), "single", _single_store)


REPORTS = ["pi", "jsc", "hard", "single"]


def figures_of(report: Reported) -> list[Figure]:
    return [fig for section in report.doc.sections for fig in section.figures]


# ---------------------------------------------------------------- text measured as drawn


_MEASURE = {}


def text_width(text: str, size: float, family: str = "DejaVu Sans", bold: bool = False) -> float:
    """The advance of `text` at `size` (in the SVG's units) in this font, by matplotlib's font metrics."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    measure = _MEASURE.setdefault("t2p", TextToPath())
    prop = FontProperties(family=family, size=size, weight="bold" if bold else "normal")
    width, _height, _descent = measure.get_text_width_height_descent(text, prop, ismath=False)
    return width


def _style(element) -> dict[str, str]:
    return {k.strip(): v.strip() for k, v in (p.split(":", 1) for p in (element.get("style") or "").split(";")
                                              if ":" in p)}


def _box(root) -> tuple[float, float, float, float]:
    x, y, w, h = (float(v) for v in root.get("viewBox").split())
    return x, y, x + w, y + h


def figure_texts_outside(svg: str) -> list[str]:
    """The texts of a matplotlib SVG (text kept as text) that reach beyond its viewBox."""
    root = ET.fromstring(svg)
    left, top, right, bottom = _box(root)
    outside = []
    for element in root.iter(f"{SVG}text"):
        content = "".join(element.itertext())
        if not content.strip():
            continue
        style = _style(element)
        size = float(style.get("font-size", "10px").removesuffix("px"))
        weight = style.get("font-weight", "normal")
        width = text_width(content, size, bold=weight == "bold" or (weight.isdigit() and int(weight) >= 600))
        transform = element.get("transform") or ""
        if element.get("x") is not None:
            x, y = float(element.get("x")), float(element.get("y"))
        else:
            found = re.search(r"translate\(([-\d.e]+)[ ,]+([-\d.e]+)\)", transform)
            assert found, f"no position for {content!r}: {element.attrib}"
            x, y = float(found.group(1)), float(found.group(2))
        rotation = re.search(r"rotate\((-?[\d.e]+)", transform)
        vertical = rotation is not None and abs(abs(float(rotation.group(1))) - 90) < 1
        anchor = style.get("text-anchor", "start")
        start = {"start": 0.0, "middle": -width / 2, "end": -width}[anchor]
        if vertical:  # a y label: it runs up from y
            low, high = y - start - width, y - start
            inside = low >= top - SLACK and high <= bottom + SLACK and left - SLACK <= x <= right + SLACK
        else:
            low, high = x + start, x + start + width
            inside = low >= left - SLACK and high <= right + SLACK and top - SLACK <= y <= bottom + SLACK
        if not inside:
            outside.append(f"{content!r} ({low:.1f}-{high:.1f} in {left:.1f}-{right:.1f} x {top:.1f}-{bottom:.1f})")
    return outside


def pin_texts_outside(svg: str) -> list[str]:
    """The texts of a placement picture (DejaVu Sans Mono) that reach beyond its viewBox."""
    root = ET.fromstring(svg)
    left, _top, right, _bottom = _box(root)
    outside = []
    for element in root.iter(f"{SVG}text"):
        content = element.text or ""
        size = float(element.get("font-size"))
        width = text_width(content, size, "DejaVu Sans Mono", bold=element.get("font-weight") == "bold")
        x = float(element.get("x"))
        start = {"start": 0.0, "middle": -width / 2, "end": -width}[element.get("text-anchor") or "start"]
        if x + start < left or x + start + width > right:
            outside.append(f"{content!r} ({x + start:.1f}-{x + start + width:.1f} outside {left:.1f}-{right:.1f})")
    return outside


# ---------------------------------------------------------------- every figure of every report


@pytest.mark.parametrize("name", REPORTS)
def test_every_figure_keeps_its_legend_and_titles_inside(name, request):
    """Legends, titles, axis labels and ticks are all inside the SVG written beside the report, as drawn;
    and the legend of each figure (the matplotlib object) lies below its axes, never over the data."""
    report: Reported = request.getfixturevalue(name)
    figures = figures_of(report)
    assert figures, f"the {name} report draws no figure"
    palette = Palette.of_sections(report.doc.sections)
    for fig in figures:
        svg = (report.out / f"{fig.slug}.svg").read_text(encoding="utf-8")
        outside = figure_texts_outside(svg)
        assert not outside, f"{name} {fig.slug}: text beyond the picture: {outside[:4]}"
        drawn = draw(fig, palette)
        try:
            drawn.draw_without_rendering()  # the layout is made when drawn
            renderer = drawn.canvas.get_renderer()
            for legend in drawn.legends:
                box = legend.get_window_extent(renderer)
                lowest_axes = min(ax.get_window_extent(renderer).y0 for ax in drawn.axes if ax.get_visible())
                assert box.y1 <= lowest_axes + 1, f"{fig.slug}: the legend overlaps the axes"
        finally:
            import matplotlib.pyplot as plt

            plt.close(drawn)


@pytest.mark.parametrize("name", REPORTS)
def test_no_panel_has_more_than_8_lines_and_no_figure_is_one_point(name, request):
    report: Reported = request.getfixturevalue(name)
    palette = Palette.of_sections(report.doc.sections)
    for fig in figures_of(report):
        points = [p for panel in fig.all_panels() for s in panel.series if not s.reference
                  for p in [*s.points, *s.marked]]
        assert len(points) > 1, f"{fig.slug}: a figure of {len(points)} point"
        for panel in fig.all_panels():
            lines = [s.label for s in panel.series if not s.reference]
            assert len(lines) <= MAX_SERIES, f"{fig.slug} [{panel.title}]: {len(lines)} lines"
        drawn = draw(fig, palette)  # what is drawn, not only what the model says
        try:
            for ax in drawn.axes:
                assert len(ax.containers) <= MAX_SERIES, f"{fig.slug}: {len(ax.containers)} lines in one axes"
            y_label = drawn._supylabel.get_text() if drawn._supylabel else drawn.axes[0].get_ylabel()
            assert re.fullmatch(r"\w.* \([^()]+\)", y_label), f"{fig.slug}: y axis {y_label!r} has no quantity (unit)"
        finally:
            import matplotlib.pyplot as plt

            plt.close(drawn)


@pytest.mark.parametrize("name", REPORTS)
def test_a_series_value_has_one_colour_in_every_figure(name, request):
    """The SVGs written are the ones drawn with the report's palette; in them, a series value has one colour
    and marker in every figure, and two lines of one panel never look the same."""
    report: Reported = request.getfixturevalue(name)
    palette = Palette.of_sections(report.doc.sections)
    looks_of: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for fig in figures_of(report):
        assert (report.out / f"{fig.slug}.svg").read_text(encoding="utf-8") == svg_text(fig, palette), fig.slug
        drawn = draw(fig, palette)
        try:
            for ax in drawn.axes:
                here = {}
                for container in ax.containers:
                    line = container.lines[0]
                    here[container.get_label()] = (line.get_color(), line.get_marker())
                    looks_of[container.get_label()].add((line.get_color(), line.get_marker()))
                assert len(set(here.values())) == len(here), f"{fig.slug}: two lines look the same {here}"
        finally:
            import matplotlib.pyplot as plt

            plt.close(drawn)
    assert looks_of, f"the {name} report draws no line"
    changed = {label: found for label, found in looks_of.items() if len(found) > 1}
    assert not changed, f"series values drawn in several colours: {changed}"


# ---------------------------------------------------------------- what the small stores show


def test_ten_strategies_are_two_panels_of_five_with_one_look_each(hard):
    fig = next(f for f in figures_of(hard) if f.slug == "pinning-stream")
    panels = fig.all_panels()
    assert [len([s for s in p.series if not s.reference]) for p in panels] == [5, 5]
    assert [p.title for p in panels] == ["lines 1-5 of 10", "lines 6-10 of 10"]
    assert sorted(s.label for p in panels for s in p.series) == [f"strategy-{i:02d}" for i in range(STRATEGIES)]
    assert "cut into panels of at most 8" in fig.caption
    rows = (hard.out / "pinning-stream.csv").read_text().splitlines()
    assert len(rows) == 1 + STRATEGIES * 3  # every value is still in the CSV
    # ten values: eight colours, the two beyond with markers of their own
    palette = Palette.of_sections(hard.doc.sections)
    assert len({palette.look(f"strategy-{i:02d}") for i in range(STRATEGIES)}) == STRATEGIES


def test_a_long_tuning_name_wraps_in_the_legend_and_is_kept_whole(hard):
    fig = next(f for f in figures_of(hard) if f.slug == "hpl-rmax-vs-nb")
    (label,) = [s.label for p in fig.all_panels() for s in p.series if LONG_TUNING in s.label]
    svg = (hard.out / "hpl-rmax-vs-nb.svg").read_text(encoding="utf-8")
    texts = ["".join(t.itertext()) for t in ET.fromstring(svg).iter(f"{SVG}text")]
    lines = looks.label_text(label).split("\n")
    assert len(lines) > 1 and all(line in texts for line in lines)  # every word of it, in lines that fit
    assert " ".join(lines) == label
    assert all(len(t) <= looks.LABEL_CHARS for t in texts), [t for t in texts if len(t) > looks.LABEL_CHARS]
    assert not figure_texts_outside(svg)


def test_rpeak_of_one_node_count_is_a_level_the_reader_sees(hard):
    """Both tunings ran on one node only: two points at one x, so the figure stays, and Rpeak and its
    fraction, known at that x only, are drawn across the axes (a line of one point is invisible)."""
    fig = next(f for f in figures_of(hard) if f.slug == "hpl-rmax-vs-nodes")
    drawn = draw(fig, Palette([fig]))
    try:
        (ax,) = drawn.axes
        levels = {line.get_label(): line for line in ax.get_lines() if line.get_label() in ("Rpeak", "75% of Rpeak")}
        assert set(levels) == {"Rpeak", "75% of Rpeak"}
        for label, line in levels.items():
            assert list(line.get_xdata()) == [0, 1], label  # axes coordinates: from edge to edge
            y = RPEAK_NODE * (1 if label == "Rpeak" else 0.75)
            assert list(line.get_ydata()) == [y, y] and ax.get_ylim()[1] > y, label
        legend = [t.get_text() for t in drawn.legends[0].get_texts()]
        assert "Rpeak" in legend and "75% of Rpeak" in legend
    finally:
        import matplotlib.pyplot as plt

        plt.close(drawn)


def test_one_point_is_said_in_a_sentence_not_drawn(single):
    section = next(s for s in single.doc.sections if s.slug == "hpl")
    assert [f.slug for f in section.figures] == ["hpl-rmax-vs-nb"]
    (said,) = [p for p in section.paragraphs if "one value, so no figure" in p]
    assert said.startswith("HPL Rmax against node count: one value, so no figure: ")
    assert "Rmax (Gflop/s) 12.56 at nodes 1" in said
    assert "(run hpl-256)" in said and f"Rpeak {RPEAK_NODE:g}" in said and f"75% of Rpeak {0.75 * RPEAK_NODE:g}" in said
    html = (single.out / "report.html").read_text(encoding="utf-8")
    assert 'data-figure="hpl-rmax-vs-nodes"' not in html and "one value, so no figure" in html
    assert not (single.out / "hpl-rmax-vs-nodes.svg").exists()


# ---------------------------------------------------------------- figures made by hand: the worst text


def _points(*pairs) -> list[Point]:
    return [Point(x, y, runs=[f"r{x:g}-{y:g}"]) for x, y in pairs]


def test_long_titles_wrap_and_a_shortened_panel_title_is_in_the_caption(tmp_path):
    long_panel = "interrupt_coalescing=" + ", ".join(f"setting-{i} value-{i}" for i in range(30))
    panels = [Panel(long_panel if i == 0 else f"panel {i}", [Series(f"line {j} " + "x" * 60, _points((1, j + 1),
                                                                                                 (2, j + 2)))
                                                             for j in range(6)]) for i in range(3)]
    title = "A title that says everything the figure is about " * 4
    fig = Figure("long", title.strip(), "threads", "GB/s", [], panels=panels, caption="Means.")
    single = Figure("long-one", title.strip(), "threads", "us", [Series("only " * 30, _points((1, 2), (2, 3)))])
    report = Report("t", "all", "now", "db", [Section("s", "S", figures=[fig, single])],
                    Table("runs", "Runs", ["runs"], []))
    write(report, tmp_path)
    for slug in ("long", "long-one"):
        svg = (tmp_path / f"{slug}.svg").read_text(encoding="utf-8")
        assert not figure_texts_outside(svg), (slug, figure_texts_outside(svg)[:3])
    assert long_panel in fig.caption and fig.caption.startswith("Means. Panels in full:")
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert f"<b>{title.strip()}.</b>" in html  # the full title, under the figure
    texts = ["".join(t.itertext()) for t in ET.fromstring((tmp_path / "long.svg").read_text()).iter(f"{SVG}text")]
    assert "bandwidth (GB/s)" in texts and any(t.endswith(looks.ELLIPSIS) for t in texts)


def test_the_palette_gives_the_widest_figure_distinct_colours_and_keeps_them():
    narrow = Figure("a", "A", "x", "y", [Series("blis", _points((1, 1), (2, 2)))])
    wide = Figure("b", "B", "x", "y", [Series(f"s{i}", _points((1, i), (2, i))) for i in range(7)]
                  + [Series("blis", _points((1, 9), (2, 9)))])
    palette = Palette([narrow, wide])
    colours = [palette.look(label)[0] for label in [*[f"s{i}" for i in range(7)], "blis"]]
    assert len(set(colours)) == 8  # eight lines of one figure: eight colours
    again = Palette([wide, narrow])
    assert all(palette.look(label) == again.look(label) for label in ["blis", "s0", "s6"])


# ---------------------------------------------------------------- placement pictures


def test_placement_pictures_are_never_shrunk_and_open_at_full_size_in_the_page(tmp_path):
    topo = topology_from_file(TOPOLOGY / "epyc7742-synthetic.xml")
    tasks = [TaskPlacement(rank, 0, frozenset(domain.cpus)) for rank, domain in enumerate(topo.numa)]
    svg = picture_svg(with_threads(Prediction(topo, tasks, "srun", options={"--cpu-bind": "ldoms"}), 4, "cores",
                                   "close"))
    pictures = [Picture(f"pinning-picture-{i}", f"strategy {i}", svg, "caption") for i in range(3)]
    report = Report("t", "all", "now", "db", [Section("pinning", "Pinning", pictures=pictures)],
                    Table("runs", "Runs", ["runs"], []))
    write(report, tmp_path)
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    style = html[html.index("<style>"):html.index("</style>")]
    assert re.search(r"\.pictures figure svg \{[^}]*max-width: none", style)  # drawn at its own size
    assert re.search(r"\.pictures \.drawing \{[^}]*overflow-x: auto", style)  # a wide one scrolls
    assert re.search(r"\.pictures figure:target \{[^}]*position: fixed", style)  # full size over the page
    for picture in pictures:
        block = re.search(rf'<figure id="picture-{picture.slug}".*?</figure>', html, re.S).group(0)
        assert '<div class="drawing"><svg' in block
        assert f'href="#picture-{picture.slug}"' in block and 'href="#pictures-pinning"' in block
    assert "<img" not in html and "<script" not in html and "http://" not in html.replace("http://www.w3.org/", "")


# ---------------------------------------------------------------- pin --svg


@pytest.mark.parametrize("topology", ["epyc7742-synthetic.xml", "cts1-pascal.xml", "coral-lassen.xml"])
def test_placement_picture_is_as_wide_as_its_text(topology):
    topo = topology_from_file(TOPOLOGY / topology)
    tasks = [TaskPlacement(rank, 0, frozenset(domain.cpus)) for rank, domain in enumerate(topo.numa)]
    options = {"--cpu-bind": "map_cpu:" + ",".join(str(c) for c in range(0, 4 * len(tasks), 4)),
               "--distribution": "block:cyclic", "--hint": "nomultithread", "OMP_PLACES": "cores",
               "OMP_PROC_BIND": "close", "OMP_NUM_THREADS": 2, "SLURM_CPU_BIND": "verbose,map_cpu" * 8}
    svg = picture_svg(Prediction(topo, tasks, "srun", flavour="psslurm", options=options))
    assert not pin_texts_outside(svg), pin_texts_outside(svg)[:3]
    root = ET.fromstring(svg)
    assert int(root.get("width")) == math.ceil(float(root.get("viewBox").split()[2]))


def test_pin_svg_is_as_wide_as_its_text(tmp_path):
    out = tmp_path / "pin.svg"
    cpus = ",".join(str(c) for c in range(64))
    done = cli("pin", "--from", str(TOPOLOGY / "epyc7742-synthetic.xml"), "-n", "64", "--cpu-bind",
               f"map_cpu:{cpus}", "--omp-places", "cores", "--omp-proc-bind", "close", "--svg", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    svg = out.read_text()
    assert not pin_texts_outside(svg), pin_texts_outside(svg)[:3]
    root = ET.fromstring(svg)
    assert f"map_cpu:{cpus}" in root.find(f"{SVG}title").text  # the whole command line, as the picture's title
    # the title wraps at the grid's width (or 640 px), it does not widen the picture beyond it
    grid = max(float(r.get("x")) + float(r.get("width")) for r in root.iter(f"{SVG}rect") if r.get("class") == "cell")
    assert int(root.get("width")) <= max(grid, 640) + 16 + 4, (root.get("width"), grid)  # margins, a gap
    shown = [t.text for t in root.iter(f"{SVG}text") if t.get("font-size") == "16"]
    assert len(shown) > 1  # wrapped after a comma or a space: every number whole, the list complete
    assert f"map_cpu:{cpus}" in " ".join(line.strip() for line in shown).replace(", ", ",")
