"""`clusterbench campaign run FILE`, `clusterbench plan FILE`, `clusterbench schema`."""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from clusterbench.cli.app import app, console, err_console, open_store
from clusterbench.cli.progress import RunProgress, fmt_duration, key_params

campaign_app = typer.Typer(help="Declarative sweeps: run a campaign file, resume it, list campaigns.",
                           no_args_is_help=True)
app.add_typer(campaign_app, name="campaign")

FileArg = Annotated[Path, typer.Argument(help="Campaign file (YAML, see docs/campaigns.md).")]


def _load(path: Path, preflight: bool = False, force: bool = False, quiet: bool = False,
          lock: ExitStack | None = None):
    """The campaign set up (campaign.load.load_runs: errors exit with code 2); with `preflight`,
    its nodes checked first, with progress: inconsistencies stop it (exit 1) unless `force`."""
    from clusterbench.campaign.load import load_runs, preflight_target

    loaded = load_runs(path, lock)
    target = preflight_target(loaded) if preflight else None
    if target:
        from clusterbench.cli.cluster_cmd import default_runs_dir, print_preflight, run_preflight

        result = run_preflight(target.inventory, target.binaries, quiet=quiet, mpis=target.mpis,
                               shared_dir=default_runs_dir())
        if not result.ok:
            print_preflight(result, target.inventory)
            if not force:
                err_console.print("[red]preflight failed[/]: the campaign did not start. Fix the nodes above, "
                                  "or run with --force to start anyway.")
                raise typer.Exit(1)
        if result.staged:  # a batch job may land on any node of the site, not only those checked
            from clusterbench.cluster.staging import extend_to

            extend_to([h.name for h in loaded.site.inventory.hosts])
    return loaded


def plan_campaign(path: Path, as_json: bool) -> None:
    """The dry run behind `clusterbench plan FILE`: every run, its state, the time it needs."""
    from clusterbench.campaign.dryrun import dry_run

    loaded = _load(path)
    with open_store() as store:
        plan = dry_run(store, loaded.campaign.name, loaded.runs)
    if as_json:
        print(json.dumps(plan.to_dict(), indent=2, default=str))
        return
    runs, done = plan.runs, plan.done
    table = Table(title=f"campaign {plan.campaign}: {len(runs)} runs, {len(done)} already stored",
                  title_justify="left")
    for col in ("#", "run id", "block", "rep", "parameters", "est.", "state"):
        table.add_column(col, overflow="fold")
    for i, r in enumerate(runs, 1):
        table.add_row(str(i), r.id, r.block, str(r.repeat), escape(key_params(r.recorded_params)),
                      fmt_duration(r.estimate_s), "[green]stored[/]" if r.id in done else "pending")
    console.print(table)
    unknown = plan.without_estimate
    tail = f" (+ {unknown} run(s) without an estimate)" if unknown else ""
    console.print(f"{len(plan.pending)} run(s) to do, estimated {fmt_duration(plan.pending_estimate_s)}{tail} before "
                  "learning from measured durations. Start with: clusterbench campaign run " + escape(str(path)))


@campaign_app.command("run")
def campaign_run(
    file: FileArg,
    spread: Annotated[str | None, typer.Option(
        help="Space the repeat rounds over this duration (e.g. 6h): round k starts k x spread/repeats "
             "after the first.")] = None,
    retry_failed: Annotated[bool, typer.Option(
        "--retry-failed", help="Also run again the runs stored as failed or timed out.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary at the end.")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Start a multi-node campaign even when the preflight finds inconsistent nodes.")] = False,
    stage: Annotated[bool, typer.Option(
        "--stage", help="Copy what the nodes cannot see (the probe, kernels, binaries under a node-local path) to a "
                        "node-local folder on each node, and run those copies (also: CLUSTERBENCH_STAGE=1).")] = False,
) -> None:
    """Run a campaign; run it again to continue after an interruption (finished runs are kept).
    A campaign over several nodes checks them first (clusterbench cluster check). One runner at a
    time per campaign and database: a second one stops at once (exit code 1) naming the first."""
    from clusterbench.units import parse_duration

    spread_s = parse_duration(spread, "--spread") if spread else None
    if stage:
        from clusterbench.cluster.staging import request

        request()
    with ExitStack() as lock:
        loaded = _load(file, preflight=True, force=force, quiet=as_json, lock=lock)
        try:
            outcome = _run(loaded, spread_s, retry_failed, as_json)
        except Exception as exc:  # a full disk outside a run (opening or writing the store)
            from clusterbench.execution.executor import disk_full, disk_full_error
            from clusterbench.store.db import default_db_path

            if not disk_full(exc):
                raise
            raise disk_full_error(default_db_path(), exc, "while writing the store", None, None) from None
    campaign = loaded.campaign
    counts = {s: outcome.count(s) for s in ("ok", "invalid", "failed", "timeout")}
    if as_json:
        print(json.dumps({"campaign": campaign.name, "runs": outcome.total, "skipped": outcome.skipped,
                          "executed": len(outcome.results), **counts, "settled": outcome.settled,
                          "stopped": outcome.stopped}, indent=2))
        return
    console.print(f"campaign [bold]{escape(campaign.name)}[/]: {outcome.total} runs, {outcome.skipped} already "
                  f"stored, {len(outcome.results)} executed: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    console.print(f"statistics: clusterbench results --campaign {escape(campaign.name)} --stat mean,std,cv")


def _run(loaded, spread_s, retry_failed, as_json):
    from clusterbench.analysis.flags import counts
    from clusterbench.campaign.engine import run_campaign
    from clusterbench.campaign.load import record
    from clusterbench.campaign.spec import auto_policies

    with open_store() as store:
        record(store, loaded)
        auto = auto_policies(loaded.campaign)
        with RunProgress(as_json) as reporter:
            outcome = run_campaign(store, loaded.runs, loaded.system.fingerprint(), reporter, spread_s,
                                   retry_failed, loaded.site, auto=auto,
                                   counts=counts)  # interrupted: the CLI's one handler says what is kept
        if outcome.results:  # the repeats just made may set or move a noise floor (analysis/noise.py)
            from clusterbench.analysis.learn_noise import refresh

            refresh(store, {r.benchmark for r in loaded.runs})
        return outcome


@campaign_app.command("list")
def campaign_list(
    wide: Annotated[bool, typer.Option("--wide", help="Every column, however wide the terminal.")] = False,
) -> None:
    """Campaigns in the store with their run counts by status."""
    from clusterbench.cli.results_view import GAP, Column, cell_width, fitted_table, print_table

    with open_store() as store:
        rows = store.campaign_counts()
    names = [escape(str(r["campaign"])) for r in rows]
    longest = max(map(cell_width, names), default=0)
    # a campaign's name is what --campaign is given: whole on its line; folded only when longer than the line
    fold = max(10, console.width - GAP - 6) if longest + GAP + 6 > console.width else 0

    def counts(key: str) -> list[str]:
        return [str(r[key] if r[key] is not None else "") for r in rows]

    columns = [Column("campaign", names, wrap=fold)]
    columns += [Column(key, counts(key), rank=rank, justify="right") for rank, key in (
        (1, "runs"), (2, "ok"), (4, "failed"), (5, "invalid"), (6, "timeout"), (7, "unfinished"))]
    columns.append(Column("last run (UTC)", [str(r["last"] or "")[:16].replace("T", " ") for r in rows], rank=3))
    table, dropped, _ = fitted_table(columns, console.width, wide, title="campaigns")
    if dropped:
        table.caption = f"--wide shows what is left out here: {', '.join(dropped)}"
    print_table(table, wide)


@app.command()
def schema(
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file.")] = None,
) -> None:
    """Print the JSON Schema of campaign files (for editors and CI validation)."""
    from clusterbench.campaign.spec import json_schema

    text = json.dumps(json_schema(), indent=2)
    if output:
        output.write_text(text + "\n")
        console.print(f"wrote {output}")
    else:
        print(text)
