"""`clusterbench report` and `clusterbench compare`: the studies' tables and figures from the store."""

from __future__ import annotations

import json
from dataclasses import asdict
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from clusterbench.cli.app import app, console, open_store
from clusterbench.errors import UserInputError

WHICH_RUNS_HELP = ("Runs to include: campaign names, key=value tags or run ids (or campaign:, tag:, run:, "
                  "source:, benchmark: terms). Default: every stored run.")


class Test(str, Enum):
    welch = "welch"
    mannwhitney = "mannwhitney"


@app.command()
def report(
    selection: Annotated[list[str] | None, typer.Argument(help=WHICH_RUNS_HELP, show_default=False)] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for report.html, report.md and the CSV/SVG files.")]
        = Path("clusterbench-report"),
    title: Annotated[str | None, typer.Option(help="Title of the report.")] = None,
    power_watts: Annotated[float | None, typer.Option(
        help="Power of the whole system during the best HPL run, in W (e.g. from a wall meter).")] = None,
    rmax: Annotated[float | None, typer.Option(
        help="Place this Rmax (Gflop/s) on the lists instead of the best stored HPL run.")] = None,
    top500: Annotated[str | None, typer.Option(
        "--list", help="TOP500 edition to place the system on, e.g. 2020-06 (default: the newest bundled).")] = None,
    rpeak_node: Annotated[float | None, typer.Option(
        help="Rpeak of one node in Gflop/s, for runs without a stored system (imports).")] = None,
    rpeak_fraction: Annotated[float, typer.Option(help="Draw this fraction of Rpeak as a target line.")] = 0.75,
    x: Annotated[str | None, typer.Option("--x", help="Key on the x axis of the figure(s) of --metric "
                                          "(nb, bytes, threads, nodes, ...); default: inferred.")] = None,
    series: Annotated[str | None, typer.Option(
        help="Keys whose values are the lines, comma-separated (blas,interconnect); default: inferred.")] = None,
    facet: Annotated[str | None, typer.Option(
        help="Keys whose values are the panels (small multiples), comma-separated; default: inferred.")] = None,
    best_over: Annotated[str | None, typer.Option(
        help="Keys the best value is taken over, comma-separated (grid,tv,n); default: HPL's.")] = None,
    mean: Annotated[bool, typer.Option("--mean", help="Mean with min-max bars instead of the best value.")]
        = False,
    metric: Annotated[str | None, typer.Option(
        "--metric", help="The metric --x/--series/--facet/--best-over/--mean apply to (default: the HPL Rmax "
                         "figures, else the first metric drawn); a metric no section draws gets its own figure.")]
        = None,
    spec: Annotated[Path | None, typer.Option(
        "--spec", help="A report.yaml with figures to draw beside the inferred ones (docs/report.md).")] = None,
) -> None:
    """Write an HTML report (self-contained, printable), the same as Markdown, and the CSV behind
    every figure and table. Sections appear when the selection has data for them: System, HPL,
    HPC Challenge, Network, Memory, Energy and lists. What each figure draws against what, one
    line per what, is inferred from what varies; --x, --series, --facet, --best-over, --mean and
    --spec say otherwise."""
    from clusterbench.analysis.lists import editions
    from clusterbench.analysis.select import parse_selection
    from clusterbench.analysis.shape import Choice, check_choice
    from clusterbench.report.build import build
    from clusterbench.report.model import Options
    from clusterbench.report.render import write
    from clusterbench.report.spec import load_spec

    for name, value in (("--power-watts", power_watts), ("--rmax", rmax), ("--rpeak-node", rpeak_node)):
        if value is not None and value <= 0:
            raise UserInputError(f"{name} must be positive, got {value:g}")
    if not 0 < rpeak_fraction <= 1:
        raise UserInputError(f"--rpeak-fraction must be in (0, 1], got {rpeak_fraction:g}")
    if top500 and top500 not in editions():  # checked even when no section will place the system
        raise UserInputError(f"no bundled TOP500 list {top500!r}", hint="choose from " + ", ".join(editions()))
    options = Options(power_watts, rpeak_node, rpeak_fraction, top500, rmax)
    if any((x, series, facet, best_over, mean, metric)):
        options.choice = Choice(metric=metric, x=x, series=_keys(series), facets=_keys(facet),
                                best_over=_keys(best_over), mean=mean)
        check_choice(options.choice)
    if spec is not None:
        options.figures = load_spec(spec)
    with open_store(read_only=True) as store:
        doc = build(store, parse_selection(selection, store), options, title)
    figures = sum(len(s.figures) for s in doc.sections)
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=console,
                  transient=True) as progress:
        task = progress.add_task("drawing", total=figures)
        paths = write(doc, out, on_step=lambda what: progress.update(
            task, advance=1, description=f"drawing {what}"))
    summary = Table(title=f"Report of {escape(doc.selection)} ({len(doc.runs.rows)} runs)", title_justify="left")
    for col in ("section", "figures", "tables"):
        summary.add_column(col)
    for section in doc.sections:
        summary.add_row(section.title, str(len(section.figures)), str(len(section.tables)))
    console.print(summary)
    console.print(f"HTML: {escape(str(paths['html']))}\nMarkdown: {escape(str(paths['markdown']))}")


def _keys(text: str | None) -> tuple[str, ...] | None:
    """'blas, nodes' -> ('blas', 'nodes'); None when the option was not given."""
    if text is None:
        return None
    keys = tuple(k.strip() for k in text.split(",") if k.strip())
    if not keys:
        raise UserInputError(f"no key in {text!r}", hint="give keys separated by commas, e.g. --series blas,nodes")
    return keys


@app.command()
def compare(
    baseline: Annotated[str, typer.Argument(help="Baseline selection, e.g. campaign name or tag blas=openblas.")],
    candidate: Annotated[str, typer.Argument(help="Candidate selection, compared with the baseline.")],
    metric: Annotated[list[str] | None, typer.Option(
        "--metric", "-m", help="Only these metrics (repeatable), e.g. -m hpl_gflops.")] = None,
    test: Annotated[Test, typer.Option(help="welch (t-test, unequal variances) or mannwhitney (rank test).")]
        = Test.welch,
    alpha: Annotated[float, typer.Option(help="Significance level.")] = 0.05,
    all_metrics: Annotated[bool, typer.Option(
        "--all", help="Also unitless values (HPCC echoes its parameters as such).")] = False,
    match_on: Annotated[str | None, typer.Option(
        "--match-on", help="Match only these keys, comma-separated (nodes,bytes), and compare the best value of "
                           "each side per metric: best against best, no test. Default: every key but the ones "
                           "under study must match.")] = None,
    every_pair: Annotated[bool, typer.Option(
        "--every-pair", help="Print every pair, also those with too few repeats for a test.")] = False,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Also write the comparison as a report (HTML, Markdown, CSV) into this folder.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict and the rows as JSON.")] = False,
) -> None:
    """Baseline against candidate, pair by pair of the same configuration: first one verdict (the
    geometric mean of candidate/baseline with its 95% interval, significant changes either way),
    then per pair the means, the change in %, a p-value and n.

    The keys under study are the ones the selections name (blas=openblas against blas=mkl), else
    those in which the sides differ as wholes; every other key must match within a pair, or the
    comparison is refused with the nearest pairs. Flagged runs (failed, invalid, truncated,
    suspect, disturbed, excluded) are on neither side. No verdict is given below 3 valid repeats
    on a side. A significant change no larger than the noise floor of the pair's configurations
    (learned from repeats: `history --noise`) is "within the noise floor (X%)". Selections take
    the same terms as `report`; separate several terms of one side with commas
    (campaign:a,tag:blas=blis).
    """
    from clusterbench.analysis.compare import compare as run_compare
    from clusterbench.analysis.select import parse_selection
    from clusterbench.report.comparison import rows_shown, verdict_lines
    from clusterbench.report.comparison import section as comparison_section

    if not 0 < alpha < 1:
        raise UserInputError(f"--alpha must be in (0, 1), got {alpha:g}")
    with open_store(read_only=True) as store:
        a, b = parse_selection(baseline, store), parse_selection(candidate, store)
        result = run_compare(store, a, b, test.value, alpha, metric, all_metrics,
                             list(_keys(match_on)) if match_on is not None else None)
        rows = result.rows
        section = comparison_section(result, a.describe(), b.describe(), test.value, alpha)
        if as_json:
            print(json.dumps({"verdict": asdict(result.summary) | {"word": result.summary.word},
                              "under_study": result.under_study, "match_on": result.match_on,
                              "left_out": result.left_out, "noise_note": result.noise_note,
                              "rows": [asdict(r) for r in rows]}, indent=2))
        else:
            for line in verdict_lines(result) + _noise_lines(result):
                console.print(escape(line), soft_wrap=False)
            _print_sides(store, rows)
            shown, hidden = rows_shown(rows, every_pair)
            if shown:
                console.print(_compare_table(section.title, shown))
            if hidden:
                console.print(f"{hidden} pairs with too few values for a test not listed (--every-pair lists them)")
        if out:
            from clusterbench.report.build import comparison_report
            from clusterbench.report.render import write

            ids = {i for row in rows for i in row.a_runs + row.b_runs}
            label = f"{a.describe()} vs {b.describe()}"
            paths = write(comparison_report(store, section, ids, f"Comparison: {label}", label), out)
            console.print(f"HTML: {escape(str(paths['html']))}\nMarkdown: {escape(str(paths['markdown']))}")


MAX_SIDE_DIFFERENCES = 40


def _noise_lines(result) -> list[str]:
    """What the noise floors (analysis/noise.py) changed in the verdicts, or that none is known: once."""
    lines = []
    within = result.summary.within_noise
    if within:
        lines.append(f"  {within} pair{'s' if within != 1 else ''} significant but within the noise floor: "
                     "not counted")
    if result.noise_note:
        lines.append(f"  {result.noise_note}")
    return lines


def _print_sides(store, rows) -> None:
    """What the runs of each side share and the other side does not: the settings, parameters and
    nodes the verdicts below are about."""
    from clusterbench.analysis.diff import sides_differ
    from clusterbench.cli.diff_cmd import differences_table

    a_runs = sorted({i for r in rows for i in r.a_runs})
    b_runs = sorted({i for r in rows for i in r.b_runs})
    found = sides_differ(store, a_runs, b_runs)
    if not found:  # the verdict's 'under study' line says what the sides differ in
        return
    shown = found[:MAX_SIDE_DIFFERENCES]
    title = "What differs between the sides (values every run of a side shares)"
    if len(found) > len(shown):
        title += f"; first {len(shown)} of {len(found)}"
    console.print(differences_table(title, shown, "baseline", "candidate"))


def _compare_table(title: str, rows) -> Table:
    """Fits a terminal: mean +- std (n) per side, change, p, verdict."""
    from clusterbench.report.render import text

    table = Table(title=escape(title), title_justify="left")
    for col, justify in (("metric", "left"), ("unit", "left"), ("baseline", "right"), ("candidate", "right"),
                         ("change", "right"), ("p", "right"), ("verdict", "left")):
        table.add_column(col, justify=justify)
    for r in rows:
        def side(d: dict) -> str:
            std = f" +- {d['std']:.3g}" if d["std"] is not None else ""
            return f"{text(d['mean'])}{std} (n={d['n']})"

        change = f"{r.change_pct:+.1f}%" if r.change_pct is not None else "-"
        p = f"{r.p_value:.3g}" if r.p_value is not None else "-"
        style = {"better": "green", "worse": "red"}.get(r.verdict)
        what = ", ".join(x for x in (r.labels, r.configuration) if x)
        table.add_row(escape(r.metric + (f" [{what}]" if what else "")), escape(r.unit), side(r.a),
                      side(r.b), change, p, escape(r.verdict), style=style)
    return table
