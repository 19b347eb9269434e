"""`clusterbench history`: one metric over time per system and configuration, its change points, and
a regression alarm for CI (`--fail-on-regression` exits 1 when a series' newest change is a loss)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from clusterbench.cli.app import app, console, open_store
from clusterbench.errors import UserInputError

MAX_PRINTED = 100  # series printed as tables; --json gives all

SELECTION_HELP = ("Runs to include: campaign names, key=value tags or run ids (or campaign:, tag:, run:, "
                  "source:, benchmark: terms). Default: every stored run.")


@app.command()
def history(
    selection: Annotated[list[str] | None, typer.Argument(help=SELECTION_HELP, show_default=False)] = None,
    metric: Annotated[str, typer.Option(
        "--metric", "-m", show_default=False,
        help="The metric, e.g. hpl_gflops; NAME\\[label=value,...] keeps one label combination, e.g. "
             "'imb_bandwidth\\[test=PingPong,bytes=4194304]' (without: one series per combination).")] = "",
    min_change: Annotated[float, typer.Option(
        help="Smallest change, in %, that counts as a regression.")] = 5.0,
    fail_on_regression: Annotated[bool, typer.Option(
        "--fail-on-regression", help="Exit with 1 when a series' newest change point is a regression (for CI).")]
        = False,
    by_tag: Annotated[list[str] | None, typer.Option(
        "--by-tag", help="Split series by this tag too (repeatable); tags do not split series otherwise.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the history as JSON.")] = False,
    noise: Annotated[bool, typer.Option(
        "--noise", help="Learn the noise floors again from the stored repeats and list them (of the selection "
                        "and -m when given) instead of a history.")] = False,
) -> None:
    """A metric over time, per configuration, with its change points (E-Divisive means, a permutation
    test at p <= 0.01) and one verdict per series: regression, improvement, no change beyond the
    noise, or too few values to judge (need at least 10: fewer can never reach p <= 0.01).

    A series is one configuration (every identifying key: system, cluster and host group, nodes,
    parameters, BLAS...; tags only with --by-tag) ordered by when each run ran. Runs that do not
    count (failed, invalid, truncated, suspect, disturbed, excluded) are listed as skipped.

    A change point must also be beyond the series' noise floor (the spread of one run of its
    configuration, learned from 3+ counted repeats); a smaller one is "within the noise floor
    (X%)". --noise learns the floors again from every stored run and lists them.
    """
    from clusterbench.analysis.history import history as run_history
    from clusterbench.analysis.select import parse_selection

    if not 0 <= min_change <= 1000:
        raise UserInputError(f"--min-change is a percentage from 0 to 1000, got {min_change:g}")
    if noise:
        from clusterbench.cli.noise_view import show_floors

        show_floors(selection, metric or None, as_json)
        return
    with open_store(read_only=True) as store:
        if not metric:
            names = store.metric_names()
            listed = ", ".join(names[:30]) + (f" and {len(names) - 30} more" if len(names) > 30 else "")
            raise UserInputError("which metric? give -m NAME, e.g. -m hpl_gflops",
                                 hint=f"stored metrics: {listed}" if names else "no metric values are stored yet")
        found = run_history(store, parse_selection(selection, store), metric, min_change / 100, by_tag=by_tag)
    judged = [g for g in found.groups if g.judged]
    if as_json:
        print(json.dumps(_as_dict(found), indent=2))
    else:
        _print(found, judged)
    if found.noise_note and not as_json:
        console.print(found.noise_note, highlight=False)
    if not judged and not as_json:
        console.print(f"[yellow]too few values to judge[/]: no series has the {found.needed} counted values the "
                      f"test needs to reach p <= {found.alpha:g}; nothing is judged", highlight=False)
    if fail_on_regression and found.regressions:
        raise typer.Exit(1)


def _as_dict(found) -> dict:
    out = asdict(found)
    for group, shown in zip(found.groups, out["groups"], strict=True):
        shown["regression"] = group.regression
        shown["verdict"] = group.verdict
    out["regressions"] = len(found.regressions)
    return out


def _print(found, judged: list) -> None:
    for group in found.groups[:MAX_PRINTED]:
        console.print(_group_table(group))
    if len(found.groups) > MAX_PRINTED:
        console.print(f"{len(found.groups) - MAX_PRINTED} more series not shown (--json lists them all; "
                      "narrow the selection or give -m NAME[label=value])")
    if found.dropped_groups:
        console.print(f"{found.dropped_groups} series with the fewest values were not analysed (the limit); "
                      "narrow the selection")
    tally: dict[str, int] = {}
    for group in found.groups:
        tally[group.verdict] = tally.get(group.verdict, 0) + 1
    console.print("verdicts: " + "; ".join(f"{n} {escape(v)}" for v, n in sorted(tally.items())), highlight=False)
    regressions = found.regressions
    if regressions:
        console.print(f"[bold red]{len(regressions)} of {len(judged)} judged series end in a regression[/] "
                      f"(newest change point worse by more than {found.min_change_pct:g}%, p <= {found.alpha:g})",
                      highlight=False)
    elif judged:
        console.print(f"no regression: no judged series ({len(judged)}) ends in a change point worse by more "
                      f"than {found.min_change_pct:g}%", highlight=False)


def _group_table(group) -> Table:
    from clusterbench.analysis.history import change_verdict
    from clusterbench.report.render import text

    values = group.values
    span = f"{_day(values[0].date)}..{_day(values[-1].date)}" if values else "no dated value"
    last = f"last {text(values[-1].value)} {group.unit}" if values else ""
    verdict = group.verdict.upper() if group.regression else group.verdict
    floor = f" | noise floor {noise_percent(group.noise_floor)}" if group.noise_floor is not None else ""
    title = f"{group.system} | {group.label} | n={len(values)} | {span} | {last}{floor} | {verdict}"
    table = Table(title=escape(title), title_justify="left", title_style="bold red" if group.regression else None)
    for column, justify in (("change point", "left"), ("run", "left"), ("before -> after", "right"),
                            ("change", "right"), ("p", "right"), ("verdict", "left")):
        table.add_column(column, justify=justify, no_wrap=column == "run",  # a run id is never cut
                         min_width=max((len(c.run_id) for c in group.changes), default=3) if column == "run" else None)
    for c in group.changes:
        change = f"{c.change_pct:+.1f}%" if c.change_pct is not None else "-"
        verdict = change_verdict(group, c)
        style = "red" if c.worse else ("green" if _better(group, c) else None)
        table.add_row(escape(_day(c.date, minutes=True)), escape(c.run_id),
                      f"{text(c.before)} -> {text(c.after)} {escape(group.unit)}", change, f"{c.p_value:.3g}",
                      verdict, style=style)
    if not group.changes:
        table.add_row("none" if group.judged else "not judged", "", "", "", "", escape(group.verdict))
    notes = [group.note] if group.note and group.judged else []
    if group.skipped:
        shown = ", ".join(f"{s.run_id} ({s.reason})" for s in group.skipped[:5])
        more = f" and {len(group.skipped) - 5} more" if len(group.skipped) > 5 else ""
        notes.append(f"skipped {len(group.skipped)}: {shown}{more}")
    if notes:
        table.caption = escape("; ".join(notes))
        table.caption_justify = "left"
    return table


def noise_percent(fraction: float) -> str:
    from clusterbench.analysis.noise import percent

    return percent(fraction)


def _better(group, change) -> bool:
    if change.change_pct is None:
        return False
    return change.change_pct > 0 if group.higher_is_better else change.change_pct < 0


def _day(iso: str, minutes: bool = False) -> str:
    """'2026-03-01T04:05:06+00:00' -> '2026-03-01' (or with ' 04:05')."""
    return iso[:16].replace("T", " ") if minutes else iso[:10]
