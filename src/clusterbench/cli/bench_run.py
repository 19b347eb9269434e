"""What `clusterbench bench NAME -p key=value` does: expand the point, run it (or its repeats), store
and print it. Typer-free, so that cli/plain.py can run it without importing typer; cli/bench_cmd.py
declares the command's options for typer and calls `run`. Rich is imported only to print (the
spinner, the tables): `bench --json`, what a tuner runs, never loads it.
"""


import json

from clusterbench.cli.shared import open_store, parse_assignments


def run(name: str, param: list[str] | None = None, repeats: int = 1, timeout: str | None = None,
        tag: list[str] | None = None, as_json: bool = False) -> None:
    """`clusterbench bench` with its options parsed (the defaults are the command's)."""
    from clusterbench.campaign.expand import expand
    from clusterbench.campaign.point import one_point  # the point without the campaign file's pydantic models
    from clusterbench.campaign.source import CampaignError
    from clusterbench.cli.ahead import discovered
    from clusterbench.errors import UserInputError
    from clusterbench.execution.executor import prefetch_state

    params = parse_assignments(param or [])
    campaign = one_point(name, params, timeout, repeats)  # a bad --timeout is refused before discovery is awaited
    info = discovered()  # started with the command (cli/ahead.py)
    try:
        runs = expand(campaign, None, info)
    except CampaignError as exc:  # "benchmarks[0].params.n: ..." -> "-p n: ..."
        text = exc.message.replace("benchmarks[0].params.", "-p ").replace("benchmarks[0].", "")
        raise UserInputError(text, hint=exc.hint) from None
    tags = parse_assignments(tag or [], "--tag", "system=pi4-cluster")
    # this machine's state, read while the store opens and the run is set up; only once the input is
    # known good, since the read may compile its clock kernel and bad input must build nothing
    prefetch_state()
    try:
        results = _run_points(name, runs, info, tags, as_json)
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
        return
    for r in results:
        print_metrics(r)


def _run_points(name: str, runs, info, tags: dict, as_json: bool) -> list:
    """Each run of the point, stored. A bench run needs no campaign lock: its id is
    `<UTC time>-<benchmark>-<6 hex>` (executor.new_run_id), which never has a campaign run's form
    `<campaign>-<benchmark>-<12 hex>-r<repeat>`, so it cannot take a campaign's run directory; and
    executor.start refuses to replace a directory whose run is finished or still running."""
    from clusterbench.cli.shared import modules_loaded
    from clusterbench.execution.loop import run_all  # here: the loop loads the store and benchmarks

    modules_loaded()

    from clusterbench.cli.progress import RunProgress

    with open_store() as store, RunProgress(as_json, label=lambda run: f"{name} r{run.repeat}") as progress:
        store.remember_system(info)
        return run_all(store, runs, progress, system_id=info.fingerprint(), one_off=True, tags=tags)
        # interrupted: the bar stops on the way out, and the CLI's one handler says what was stored


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
        table = Table("metric", "value", "unit", "labels")
        for m in plain:
            labels = " ".join(f"{k}={v}" for k, v in m.labels.items())
            table.add_row(m.name, f"{m.value:.6g}", m.unit, escape(labels), style=None if m.valid else "red")
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
