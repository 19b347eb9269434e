"""`clusterbench tune hpl`: the budgeted tuner of a benchmark that declares its tuning (the library is
clusterbench.tune, the declaration the benchmark class's `tuning`; docs/tune.md)."""


import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from clusterbench.bench.registry import benchmark_class
from clusterbench.cli.app import app, console, err_console, open_store

tune_app = typer.Typer(help="Find the best configuration of a benchmark within a time budget (HPL).",
                       no_args_is_help=True)
app.add_typer(tune_app, name="tune")
HPL = "hpl"  # the benchmark `tune hpl` tunes
EXAMPLE = benchmark_class(HPL).tuning.space_example  # --space's first example, e.g. nb=64..384:32


def _space_items(items: list[str], example: str = EXAMPLE) -> dict:
    from clusterbench.errors import UserInputError

    out: dict = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip() or not raw.strip():
            raise UserInputError(f"invalid --space {item!r}",
                                 hint=f"write --space KEY=VALUES, e.g. --space {example} or "
                                      "--space bcast=1rm,2rm or --space depth=1")
        key = key.strip()
        if key in out:
            raise UserInputError(f"--space {key} given twice", hint="give all its values in one --space")
        out[key] = raw.strip()
    return out


@tune_app.command(HPL)
def tune_hpl(
    budget: Annotated[str, typer.Option(help="Time budget of the search, e.g. 30m, 2h (too small: the minimum "
                                        "is said; --dry-run prints it).")] = "10m",
    n: Annotated[int | None, typer.Option("--n", help="Top level's N (default: sized from the budget and "
                                          "memory).")] = None,
    nodes: Annotated[int, typer.Option(help="Nodes per trial.")] = 1,
    space: Annotated[list[str] | None, typer.Option("--space", metavar="KEY=VALUES", help=(
        f"Search dimension (repeatable): {EXAMPLE} (the default), bcast=1rm,2rm, depth=1 (fixes it), "
        "'grid=mpi 1x2,hybrid-node 1x1', layout=mpi, blas=openblas-pthread, pfact/rfact/nbmin/ndiv/swap/..."))] = None,
    levels: Annotated[int, typer.Option(help="Fidelity levels (problem sizes).")] = 3,
    eta: Annotated[int, typer.Option(help="Successive halving's ratio: 1/eta of a level is promoted.")] = 3,
    seed: Annotated[int, typer.Option(help="Random seed of the search.")] = 0,
    repeats: Annotated[int, typer.Option(help="Samples of each finalist at the top level.")] = 3,
    name: Annotated[str | None, typer.Option(help="Session name (default: a hash of what decides the trials).")]
    = None,
    campaign: Annotated[Path | None, typer.Option(help="A campaign file: its cluster: and hpl block's "
                                                  "space:/params:.")] = None,
    block: Annotated[str | None, typer.Option(help="The campaign's hpl block to tune (default: the first).")]
    = None,
    final_n: Annotated[int | None, typer.Option("--final-n", help="N of the written HPL.dat (default: the top "
                                                "level's).")] = None,
    out: Annotated[Path | None, typer.Option(help="Output folder (default ./<session>, e.g. "
                                             "./tune-hpl-1a2b3c4d5e).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the space, levels and costs; run nothing.")]
    = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Search HPL's configurations (NB, grid and layout, BLAS, algorithm knobs) within a time budget:
    small N prunes (the best of each layout promoted), large N decides, finalists repeated; a serial BLAS
    is never paired with threads. Every trial is a stored run and the levels' N are kept with the session,
    so the same command made again resumes it ("resuming session S (k trials stored)") and replays its
    trials; a different space, system or budget starts a new session and says why."""
    _tune(HPL, budget, n, nodes, space, levels, eta, seed, repeats, name, campaign, block, final_n, out, dry_run,
          as_json)


def _tune(benchmark: str, budget: str, n: int | None, nodes: int, space: list[str] | None, levels: int, eta: int,
          seed: int, repeats: int, name: str | None, campaign: Path | None, block: str | None, final_n: int | None,
          out: Path | None, dry_run: bool, as_json: bool) -> None:
    """`tune BENCHMARK` with its options: the session prepared (every refusal made), then run or described."""
    from clusterbench.errors import UserInputError
    from clusterbench.system.discover import discover
    from clusterbench.tune.session import TuneOptions, prepare
    from clusterbench.units import parse_duration

    tuning = benchmark_class(benchmark).tuning

    try:
        budget_s = parse_duration(budget, "--budget")
    except UserInputError as exc:
        raise UserInputError(f"--budget {budget}: {exc.message}", hint="e.g. --budget 30m") from None
    options = TuneOptions(budget_s=budget_s, n=n, nodes=nodes, space=_space_items(space or [], tuning.space_example),
                          levels=levels, eta=eta, seed=seed, repeats=repeats, name=name, final_n=final_n,
                          tuning=tuning)
    written = dict(options.space)
    options.option = lambda key: f"--space {key}={written[key]}" if key in written else "--space"
    site_key = ""
    if campaign is not None:
        from clusterbench.tune.campaign_block import options_from_campaign

        options, site, site_key, system = options_from_campaign(campaign, block, options, benchmark)
    else:
        from clusterbench.launch.site import LOCAL

        site, system = LOCAL, discover()
    with open_store() as store:
        store.remember_system(system)
        session = prepare(store, options, system, site=site, site_key=site_key, system_id=system.fingerprint())
        err_console.print(escape(session.note()))  # resuming a stored session, or a new one and why (stderr)
        if dry_run:
            _print_dry_run(session, as_json)
            return
        _run(store, session, out or Path(session.name), as_json)


def _print_dry_run(session, as_json: bool) -> None:
    cost, _ = session.cheapest()
    tspace = session.tspace
    info = {"session": session.name, "space": tspace.space.dims, "space_size": tspace.space.size,
            "fixed": tspace.fixed, "levels_n": tspace.fidelities, "rates": session.rates_source,
            "cheapest_trial_s": cost, "budget_s": session.options.budget_s,
            "minimum_budget_s": session.first_round_s()[0], "space_dropped": tspace.space.dropped,
            "session_note": session.note(), "sweep_estimate_s": session.sweep_estimate_s()}
    if as_json:
        print(json.dumps(info, indent=2, default=str))
        return
    table = Table("dimension", "values", title=f"tune {session.tuning.benchmark} {session.name}: "
                  f"{tspace.space.size:,} points", title_justify="left")
    for key, values in tspace.describe():
        table.add_row(key, escape(values))
    console.print(table)
    console.print(f"levels: {session.tuning.fidelity.upper()} = {', '.join(str(x) for x in tspace.fidelities)}; "
                  f"fixed: {escape(json.dumps(tspace.fixed, default=str))}")
    for note in tspace.space.dropped:
        console.print(f"space: {escape(note)}")
    console.print(f"model rates: {escape(session.rates_source)}")
    console.print(f"cheapest trial about {cost:.1f} s; minimum budget about {_duration(session.first_round_s()[0])}; "
                  f"budget {session.options.budget_s:.0f} s; an exhaustive sweep "
                  f"(every point once at {session.fidelity_text(-1)}) would take about "
                  f"{_duration(session.sweep_estimate_s())}")


def _duration(seconds: float) -> str:
    from clusterbench.cli.progress import fmt_duration

    return fmt_duration(seconds if math.isfinite(seconds) else None)


class TrialBar:
    """The tuner's progress line: its name, the bar of the budget spent, 'spent/budget s budget', the time
    elapsed, and the last trial (level, value, configuration). The bar keeps its width and the trial's note
    gives way (cli/progress.py bar_column, room): the note, a whole configuration, once made Rich shrink
    the bar and the elapsed time to nothing after the first trial."""

    def __init__(self, label: str, budget_s: float, console, disable: bool = False) -> None:
        from rich.progress import Progress, TimeElapsedColumn

        from clusterbench.cli.progress import bar_column, text_column

        self.label, self.budget_s, self.console = label, budget_s, console
        self.bar = bar_column(console.width)
        self.progress = Progress(text_column(f"[bold]{escape(label)}[/]"), self.bar,
                                 text_column("{task.fields[spent]}"), TimeElapsedColumn(),
                                 text_column("{task.fields[note]}", shrinks=True), console=console, transient=True,
                                 disable=disable)
        self.task = self.progress.add_task("tune", total=budget_s, spent=self._spent(0.0), note="")

    def _spent(self, spent_s: float) -> str:
        return f"{spent_s:.0f}/{self.budget_s:.0f} s budget"

    def show(self, spent_s: float, note: str) -> None:
        """The budget spent so far and the last trial's note, shortened to what the line leaves it."""
        from clusterbench.cli.progress import elapsed_text, room, shortened

        spent = self._spent(spent_s)
        elapsed = elapsed_text(next(t for t in self.progress.tasks if t.id == self.task).elapsed)
        most = room(self.console.width, self.bar.bar_width, self.label, spent, elapsed)
        self.progress.update(self.task, completed=min(spent_s, self.budget_s), spent=spent,
                             note=escape(shortened(note, most)))


def _run(store, session, out: Path, as_json: bool) -> None:
    from clusterbench.campaign.engine import campaign_lock
    from clusterbench.report.tune import best_so_far_svg
    from clusterbench.tune.session import summary, tag_best, trial_points, write_outputs

    bar = TrialBar(f"tune {session.tuning.benchmark}", session.options.budget_s, err_console, disable=as_json)
    spent = [0.0]

    def on_trial(sample, partial) -> None:
        if not sample.replayed:
            spent[0] += sample.seconds
        value = f"{sample.value:.2f} {session.tuning.merit_unit}" if math.isfinite(sample.value) else "invalid"
        # the level and the value first: what a narrow terminal cuts is the end of the configuration
        bar.show(spent[0], f"L{sample.level} {value}{' (stored)' if sample.replayed else ''} {sample.config.key()}")

    with campaign_lock(store.path, session.name), bar.progress:
        result = session.run(on_trial)  # interrupted: the CLI's one handler says how to continue
    tag_best(store, session, result)
    paths = write_outputs(session, result, out)
    svg = out / "best-so-far.svg"
    svg.write_text(best_so_far_svg(result.history, trial_points(result), session.tspace.fidelities,
                                   f"tune {session.tuning.benchmark} {session.name}: best so far"))
    paths["svg"] = svg
    info = summary(session, result)
    if as_json:
        print(json.dumps(info | {"outputs": {k: str(v) for k, v in paths.items()}}, indent=2, default=str))
        return
    _print_result(session, result, info, paths)


def _print_result(session, result, info: dict, paths: dict) -> None:
    best = result.best
    if best is None:
        console.print("[red]no valid configuration found[/]: every trial failed or the budget ran out first")
    else:
        ci = "" if not math.isfinite(best.ci_low) else \
            f" (interval {best.ci_low:.2f}-{best.ci_high:.2f}, covers the median with {best.ci_level:.0%})"
        console.print(f"[bold]best[/]: {escape(best.config.key())}")
        console.print(f"  {best.median:.2f} {session.tuning.merit_unit} median{ci}, {len(best.samples)} samples at "
                      f"{session.fidelity_text(best.level)}")
    if info["finalists"]:
        shown = info["finalists"][:10]
        # only what differs between finalists: the full keys do not fit a terminal and hide the difference
        varying = [k for k in shown[0]["config"] if len({str(f["config"].get(k)) for f in shown}) > 1]
        common = ", ".join(f"{k}={v}" for k, v in shown[0]["config"].items() if k not in varying)
        table = Table("configuration", f"median {session.tuning.merit_unit}", "interval (coverage)", "n",
                      "same as best?",
                      title="finalists" + (f" (all with {common})" if common else ""), title_justify="left")
        for f in shown:
            lo, hi = f["ci95"]
            table.add_row(escape(", ".join(f"{k}={f['config'][k]}" for k in varying) or "(the best)"),
                          f"{f['median_gflops']:.2f}",
                          "-" if not math.isfinite(lo) else f"{lo:.2f}-{hi:.2f} ({f['ci_coverage']:.0%})",
                          str(f["samples"]),
                          "yes" if f["indistinguishable_from_best"] else "no")
        console.print(table)
    t = info["trials"]
    uncounted = f", {t['uncounted']} not counted (disturbed or flagged: measured again)" if t.get("uncounted") else ""
    console.print(f"trials: {t['ran']} run, {t['replayed']} replayed from the store, {t['invalid']} invalid"
                  f"{uncounted}; "
                  f"budget {result.spent_s:.0f} of {session.options.budget_s:.0f} s spent ({escape(result.stopped)})")
    console.print(f"an exhaustive sweep of the {session.tspace.space.size:,} points at {session.fidelity_text(-1)} "
                  f"would take about {_duration(info['sweep_estimate_s'])}")
    for label, path in paths.items():
        console.print(f"{label}: {escape(str(path))}")
