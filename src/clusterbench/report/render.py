"""Write a report: one self-contained HTML file, the same content as Markdown, and a CSV
file per figure and per table.

The HTML inlines its CSS and SVG figures and carries a Content-Security-Policy that forbids
every fetch, so it opens offline and cannot call home even if a value slipped through.
Every value is escaped by Jinja2's autoescaping (host names, tags and outputs are user
data); the SVGs are matplotlib's, whose text it escapes itself.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from clusterbench import __version__
from clusterbench.report import csvsafe
from clusterbench.report.figures import csv_text, svg_text
from clusterbench.report.model import Report, Table

MAX_RUN_LINKS = 6  # a cell links this many runs, the CSV lists them all


def write(report: Report, out: Path, on_step: Callable[[str], None] | None = None) -> dict[str, Path]:
    """All files of the report into `out`; returns {'html': ..., 'markdown': ...}."""
    out.mkdir(parents=True, exist_ok=True)
    svgs: dict[str, str] = {}
    for section in report.sections:
        for fig in section.figures:
            if on_step:
                on_step(fig.title)
            svgs[fig.slug] = svg_text(fig)
            (out / f"{fig.slug}.svg").write_text(svgs[fig.slug], encoding="utf-8")
            (out / f"{fig.slug}.csv").write_text(csv_text(fig), encoding="utf-8")
        for picture in section.pictures:
            (out / f"{picture.slug}.svg").write_text(picture.svg, encoding="utf-8")
            if picture.csv:
                (out / f"{picture.slug}.csv").write_text(picture.csv, encoding="utf-8")
        for table in section.tables:
            (out / f"{table.slug}.csv").write_text(table_csv(table), encoding="utf-8")
    (out / "runs.csv").write_text(table_csv(report.runs), encoding="utf-8")
    html = out / "report.html"
    html.write_text(_environment().get_template("report.html.j2").render(
        report=report, svgs=svgs, cells=html_cells, version=__version__), encoding="utf-8")
    markdown = out / "report.md"
    markdown.write_text(to_markdown(report), encoding="utf-8")
    return {"html": html, "markdown": markdown}


def _environment() -> Environment:
    return Environment(loader=PackageLoader("clusterbench.report", "templates"),
                       autoescape=select_autoescape(default=True, default_for_string=True),
                       trim_blocks=True, lstrip_blocks=True)


def text(value) -> str:
    """A cell as people read it: floats to 5 significant digits, nothing for missing."""
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1e5 else f"{value:.5g}"
    return str(value)


def html_cells(row: list) -> list[dict]:
    """Cells for the template: text, or run links for a list of run ids."""
    cells = []
    for value in row:
        if isinstance(value, list):
            ids = value
            cells.append({"runs": ids[:MAX_RUN_LINKS], "more": max(0, len(ids) - MAX_RUN_LINKS)})
        else:
            cells.append({"text": text(value), "numeric": isinstance(value, int | float) and value is not None})
    return cells


def table_csv(table: Table) -> str:
    """Exact values (repr of floats), run ids joined by ';', text cells safe from formula injection."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(csvsafe.row(table.columns))
    for row in table.rows:
        w.writerow([csvsafe.cell(";".join(v)) if isinstance(v, list) else "" if v is None
                    else repr(v) if isinstance(v, float) else csvsafe.cell(v) for v in row])
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
    for row in table.rows:
        cells = []
        for value in row:
            if isinstance(value, list):
                more = len(value) - MAX_RUN_LINKS
                cells.append(_md(", ".join(value[:MAX_RUN_LINKS]) + (f" and {more} more" if more > 0 else "")))
            else:
                cells.append(_md(text(value)))
        lines.append("| " + " | ".join(cells) + " |")
    if table.note:
        lines += ["", _md(table.note)]
    return lines + [""]


def _md(value: str) -> str:
    """Markdown-safe: no table breaks, no raw HTML."""
    return (str(value).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\n", " "))
