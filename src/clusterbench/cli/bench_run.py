"""What `clusterbench bench NAME -p key=value` does: expand the point, run it (or its repeats), store
and print it. Typer-free, so that cli/plain.py can run it without importing typer; cli/bench_cmd.py
declares the command's options for typer and calls `run`. Rich is imported only to print (the
spinner, the tables): `bench --json`, what a tuner runs, never loads it.
"""


import json
import sys

from clusterbench.cli.shared import open_store, parse_assignments


def run(name: str, param: list[str] | None = None, repeats: int | str = 1, timeout: str | None = None,
        tag: list[str] | None = None, as_json: bool = False, precision: str | None = None,
        max_repeats: int | None = None) -> None:
    """`clusterbench bench` with its options parsed (the defaults are the command's). `repeats`: a
    count, or 'auto' (repeat until precise: campaign/precision.py, with `precision` and `max_repeats`)."""
    from clusterbench.campaign.expand import expand
    from clusterbench.campaign.point import one_point  # the point without the campaign file's pydantic models
    from clusterbench.campaign.precision import repeat_options
    from clusterbench.campaign.source import CampaignError
    from clusterbench.cli.ahead import discovered
    from clusterbench.errors import UserInputError
    from clusterbench.execution.executor import prefetch_state

    count, policy = repeat_options(repeats, precision, max_repeats)
    params = parse_assignments(param or [])
    campaign = one_point(name, params, timeout, count)  # a bad --timeout is refused before discovery is awaited
    info = discovered()  # started with the command (cli/ahead.py)
    try:
        runs = expand(campaign, None, info)
    except CampaignError as exc:  # "benchmarks[0].params.n: ..." -> "-p n: ..."
        text = exc.message.replace("benchmarks[0].params.", "-p ").replace("benchmarks[0].", "")
        raise UserInputError(text, hint=exc.hint) from None
    if policy is not None:
        from clusterbench.campaign.precision import headline_metric

        headline_metric(name)  # a benchmark without a headline cannot repeat until precise: refused now
    tags = parse_assignments(tag or [], "--tag", "system=pi4-cluster")
    # this machine's state, read while the store opens and the run is set up; only once the input is
    # known good, since the read may compile its clock kernel and bad input must build nothing
    prefetch_state()
    try:
        results, stopped = _run_points(name, runs, info, tags, as_json, policy)
    except Exception as exc:  # a full disk outside a run (opening or writing the store)
        from clusterbench.execution.executor import disk_full, disk_full_error
        from clusterbench.store.db import default_db_path

        if not disk_full(exc):
            raise
        raise disk_full_error(default_db_path(), exc, "while writing the store", None, None) from None
    if as_json:
        print(json.dumps([{"id": r.id, "status": r.status, "valid": r.valid, "reason": r.reason,
                           "duration_s": r.duration_s, "workdir": str(r.workdir), "facts": r.outcome.facts,
                           "metrics": [m.__dict__ for m in r.outcome.metrics]} for r in results],
                         indent=2, default=str))
        if stopped:
            print(stopped, file=sys.stderr)
        return
    for r in results:
        print_metrics(r)
    if stopped:
        from rich.markup import escape

        from clusterbench.cli.shared import console

        console.print(escape(stopped), highlight=False)


def _run_points(name: str, runs, info, tags: dict, as_json: bool, policy=None) -> tuple[list, str]:
    """Each run of the point, stored (with `policy`, repeated until precise), then the noise floors of
    the benchmark learned again from the store; returns the results and, with `policy`, the line
    that says why the repeats stopped. A bench run needs no campaign lock: its id is
    `<UTC time>-<benchmark>-<6 hex>` (executor.new_run_id), which never has a campaign run's form
    `<campaign>-<benchmark>-<12 hex>-r<repeat>`, so it cannot take a campaign's run directory; and
    executor.start refuses to replace a directory whose run is finished or still running."""
    from clusterbench.cli.shared import modules_loaded
    from clusterbench.execution.loop import run_all  # here: the loop loads the store and benchmarks

    modules_loaded()

    from clusterbench.cli.progress import RunProgress

    stopped = ""
    with open_store() as store, RunProgress(as_json, label=lambda run: f"{name} r{run.repeat}") as progress:
        store.remember_system(info)
        if policy is None:
            results = run_all(store, runs, progress, system_id=info.fingerprint(), one_off=True, tags=tags)
        else:
            results, decision = _until_precise(store, name, runs[0], info, tags, progress, policy)
            stopped = f"{name}: {decision.reason}"
        # interrupted: the bar stops on the way out, and the CLI's one handler says what was stored
        if len(results) > 1:
            _learn_noise(store, name)
    return results, stopped


def _until_precise(store, name: str, planned, info, tags: dict, progress, policy):
    """Repeat `planned` (repeat 0, 1, ...) until its headline is precise (campaign/precision.py); a run
    counts as analysis/flags.counts says."""
    from dataclasses import replace

    from clusterbench.analysis.flags import counts
    from clusterbench.campaign.precision import OneStart, sampler, until_precise
    from clusterbench.execution.loop import run_all

    reporter = OneStart(progress)

    def run_next(repeat: int):
        return run_all(store, [replace(planned, repeat=repeat)], reporter, system_id=info.fingerprint(),
                       one_off=True, tags=tags)[0]

    return until_precise(run_next, sampler(name, counts), policy)


def _learn_noise(store, name: str) -> None:
    """The noise floors of `name` (analysis/noise.py) again from every stored run of it: the repeats just
    made may give a configuration its first floor, or a better one."""
    from clusterbench.analysis.learn_noise import refresh

    refresh(store, [name])


def print_metrics(result) -> None:
    """Scalar metrics in one table; metrics per message size side by side in another."""
    from rich.markup import escape
    from rich.table import Table

    from clusterbench.cli.shared import console

    style = "green" if result.status == "ok" else "red"
    console.print(f"[bold]{escape(result.id)}[/] [{style}]{result.status}[/] in {result.duration_s:.1f} s"
                  + (f": {escape(result.reason)}" if result.reason else ""))
    sized = [m for m in result.outcome.metrics if "bytes" in m.labels and m.name not in ("latency_us",
                                                                                          "peak_bandwidth")]
    plain = [m for m in result.outcome.metrics if m not in sized]
    if plain:
        from clusterbench.analysis.listing import readable

        table = Table("metric", "value", "labels")
        for m in plain:
            labels = " ".join(f"{k}={v}" for k, v in m.labels.items())
            table.add_row(m.name, readable(m.value, m.unit), escape(labels), style=None if m.valid else "red")
        console.print(table)
    if sized:
        names = list(dict.fromkeys(m.name for m in sized))
        table = Table("bytes", *[f"{n} ({next(m.unit for m in sized if m.name == n)})" for n in names])
        by_size: dict[int, dict] = {}
        for m in sized:
            by_size.setdefault(m.labels["bytes"], {})[m.name] = m.value
        for size, values in sorted(by_size.items()):
            table.add_row(str(size), *[f"{values.get(n, float('nan')):.2f}" for n in names])
        console.print(table)
    console.print(f"stored; details: clusterbench results {escape(result.id)}")
