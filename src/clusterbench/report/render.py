"""Write a report: one self-contained HTML file, the same content as Markdown, and a CSV
file per figure and per table.

The HTML inlines its CSS and SVG figures and carries a Content-Security-Policy that forbids
every fetch, so it opens offline and cannot call home even if a value slipped through.
Every value is escaped by Jinja2's autoescaping (host names, tags and outputs are user
data); the SVGs are matplotlib's, whose text it escapes itself.

The HTML stays readable (and a few MB) over 100,000 runs: a table shows its first
MAX_HTML_ROWS rows and says where the rest are (its CSV, always complete), and the runs
appendix lists at most MAX_APPENDIX_RUNS runs, those the tables and figures point at first;
runs.csv lists every run. A link is only drawn to a run the appendix lists.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from clusterbench import __version__
from clusterbench.analysis.dataset import gc_paused
from clusterbench.analysis.shape import plain
from clusterbench.report import csvsafe
from clusterbench.report.figures import csv_cell, csv_text, svg_text
from clusterbench.report.looks import Palette, settle
from clusterbench.report.model import Report, Table

MAX_RUN_LINKS = 6  # a cell links this many runs, the CSV lists them all
MAX_HTML_ROWS = 200  # rows of a table shown in the HTML and Markdown; the CSV has them all
MAX_APPENDIX_RUNS = 500  # runs listed in the HTML appendix; runs.csv has them all


def write(report: Report, out: Path, on_step: Callable[[str], None] | None = None) -> dict[str, Path]:
    """All files of the report into `out`; returns {'html': ..., 'markdown': ...}."""
    with gc_paused():
        return _write(report, out, on_step)


def _write(report: Report, out: Path, on_step: Callable[[str], None] | None) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    settle(report.sections)  # a report built by hand too: build() settled its own already
    palette = Palette.of_sections(report.sections)  # a series value looks the same in every figure
    svgs: dict[str, str] = {}
    for section in report.sections:
        for fig in section.figures:
            if on_step:
                on_step(fig.title)
            svgs[fig.slug] = svg_text(fig, palette)
            (out / f"{fig.slug}.svg").write_text(svgs[fig.slug], encoding="utf-8")
            (out / f"{fig.slug}.csv").write_text(csv_text(fig), encoding="utf-8")
        for fig in section.data_only:  # not drawn (one point), its values written all the same
            (out / f"{fig.slug}.csv").write_text(csv_text(fig), encoding="utf-8")
        for picture in section.pictures:
            (out / f"{picture.slug}.svg").write_text(picture.svg, encoding="utf-8")
            if picture.csv:
                (out / f"{picture.slug}.csv").write_text(picture.csv, encoding="utf-8")
        for table in section.tables:
            (out / f"{table.slug}.csv").write_text(table_csv(table), encoding="utf-8")
    (out / "runs.csv").write_text(table_csv(report.runs), encoding="utf-8")
    html = out / "report.html"
    appendix = appendix_rows(report)
    listed = {row[0][0] for row in appendix}
    html.write_text(_environment().get_template("report.html.j2").render(
        report=report, svgs=svgs, cells=lambda row: html_cells(row, listed), shown=shown_rows, appendix=appendix,
        max_rows=MAX_HTML_ROWS, version=__version__), encoding="utf-8")
    markdown = out / "report.md"
    markdown.write_text(to_markdown(report), encoding="utf-8")
    return {"html": html, "markdown": markdown}


def _environment() -> Environment:
    return Environment(loader=PackageLoader("clusterbench.report", "templates"),
                       autoescape=select_autoescape(default=True, default_for_string=True),
                       trim_blocks=True, lstrip_blocks=True)


def shown_rows(table: Table) -> list[list]:
    """The rows a page shows: the first MAX_HTML_ROWS (the CSV beside it has all of them)."""
    return table.rows[:MAX_HTML_ROWS]


def linked_runs(report: Report) -> list[str]:
    """Run ids in the order the report points at them: table cells first, then figure points."""
    seen: dict[str, None] = {}
    for section in report.sections:
        for table in section.tables:
            for row in shown_rows(table):
                for value in row:
                    if isinstance(value, list):
                        seen.update(dict.fromkeys(value[:MAX_RUN_LINKS]))
        for fig in section.figures:
            for panel in fig.all_panels():
                for series in panel.series:
                    for point in [*series.points, *series.marked]:
                        seen.update(dict.fromkeys(point.runs[:MAX_RUN_LINKS]))
    return list(seen)


def appendix_rows(report: Report) -> list[list]:
    """At most MAX_APPENDIX_RUNS rows of the runs table: the runs linked to, then the others."""
    rows = report.runs.rows
    if len(rows) <= MAX_APPENDIX_RUNS:
        return rows
    by_id = {row[0][0]: row for row in rows}
    first = [by_id[i] for i in linked_runs(report) if i in by_id][:MAX_APPENDIX_RUNS]
    chosen = {row[0][0] for row in first}
    return first + [row for row in rows if row[0][0] not in chosen][:MAX_APPENDIX_RUNS - len(first)]


def text(value) -> str:
    """A cell as people read it: floats to 5 significant digits, nothing for missing."""
    value = plain(value)
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1e5 else f"{value:.5g}"
    return str(value)


def html_cells(row: list, listed: set[str] | None = None) -> list[dict]:
    """Cells for the template: text, or run ids for a list of them, linked when the appendix
    lists the run (`listed`; None: every run)."""
    cells = []
    for value in row:
        if isinstance(value, list):
            ids = value
            cells.append({"runs": [(i, listed is None or i in listed) for i in ids[:MAX_RUN_LINKS]],
                          "more": max(0, len(ids) - MAX_RUN_LINKS)})
        else:
            value = plain(value)
            numeric = isinstance(value, int | float) and not isinstance(value, bool)
            cells.append({"text": text(value), "numeric": numeric})
    return cells


def table_csv(table: Table) -> str:
    """Exact values (repr of floats), run ids joined by ';', text cells safe from formula injection."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(csvsafe.row(table.columns))
    safe, cell = csvsafe.cell, csv_cell
    w.writerows([safe(v) if type(v) is str else safe(";".join(v)) if type(v) is list else cell(v) for v in row]
                for row in table.rows)  # the common cells first: 100,000 runs make 1.2 million of them
    return buf.getvalue()


def to_markdown(report: Report) -> str:
    lines = [f"# {_md(report.title)}", "",
             f"Selection: {_md(report.selection)} · generated {report.generated_at} by clusterbench "
             f"{__version__} · database `{_md(report.database)}`", ""]
    for section in report.sections:
        lines += [f"## {_md(section.title)}", ""]
        for paragraph in section.paragraphs:
            lines += [_md(paragraph), ""]
        for fig in section.figures:
            lines += [f"![{_md(fig.title)}]({fig.slug}.svg)", "",
                      f"*{_md(fig.title)}.* {_md(fig.caption)} Data: [{fig.slug}.csv]({fig.slug}.csv)", ""]
        for picture in section.pictures:
            lines += [f"![{_md(picture.title)}]({picture.slug}.svg)", "", f"*{_md(picture.title)}.* "
                      f"{_md(picture.caption)}", ""]
        for table in section.tables:
            lines += _md_table(table)
    lines += ["## Runs", "", f"Every run of this report: [runs.csv](runs.csv) ({len(report.runs.rows)} runs).", ""]
    return "\n".join(lines)


def _md_table(table: Table) -> list[str]:
    lines = [f"**{_md(table.title)}** ([{table.slug}.csv]({table.slug}.csv))", "",
             "| " + " | ".join(_md(c) for c in table.columns) + " |",
             "|" + "|".join("---" for _ in table.columns) + "|"]
    for row in shown_rows(table):
        cells = []
        for value in row:
            if isinstance(value, list):
                more = len(value) - MAX_RUN_LINKS
                cells.append(_md(", ".join(value[:MAX_RUN_LINKS]) + (f" and {more} more" if more > 0 else "")))
            else:
                cells.append(_md(text(value)))
        lines.append("| " + " | ".join(cells) + " |")
    if len(table.rows) > MAX_HTML_ROWS:
        lines += ["", f"First {MAX_HTML_ROWS} of {len(table.rows)} rows; all of them in {table.slug}.csv."]
    if table.note:
        lines += ["", _md(table.note)]
    return lines + [""]


def _md(value: str) -> str:
    """Markdown-safe: no table breaks, no raw HTML."""
    return (str(value).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\n", " "))
