"""`clusterbench results`: list, filter and export stored runs and their metrics."""

from __future__ import annotations

import csv
import json
import sys
from enum import Enum
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from clusterbench.cli.app import app, console, open_store
from clusterbench.errors import UserInputError


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


@app.command()
def results(
    run_id: Annotated[str | None, typer.Argument(help="Show one run in full (metrics, outputs).")] = None,
    benchmark: Annotated[str | None, typer.Option(help="Only this benchmark (hpcc, hpl, ...).")] = None,
    campaign: Annotated[str | None, typer.Option(help="Only this campaign.")] = None,
    status: Annotated[str | None, typer.Option(help="Only this status (ok, invalid, failed, timeout).")] = None,
    metric: Annotated[str | None, typer.Option(help="Only this metric name (e.g. hpl_gflops).")] = None,
    limit: Annotated[int, typer.Option(help="At most this many runs (0: all).")] = 50,
    fmt: Annotated[Format, typer.Option("--format", help="table, csv or json.")] = Format.table,
) -> None:
    """List stored runs with their key metric, or export every metric as CSV/JSON."""
    with open_store() as store:
        if run_id:
            _show_run(store, run_id, fmt)
            return
        rows = store.runs(benchmark=benchmark, campaign=campaign, status=status, limit=limit or None)
        records = []
        for r in rows:
            for m in store.metrics(r["id"]):
                if metric and m["name"] != metric:
                    continue
                records.append({
                    "run_id": r["id"], "benchmark": r["benchmark"], "campaign": r["campaign"],
                    "status": r["status"], "run_valid": _bool(r["valid"]), "started_at": r["started_at"],
                    "params": json.loads(r["params"]), "metric": m["name"], "value": m["value"],
                    "unit": m["unit"], "labels": json.loads(m["labels"]), "metric_valid": bool(m["valid"]),
                })
        if fmt == Format.json:
            print(json.dumps(records, indent=2))
        elif fmt == Format.csv:
            _write_csv(records)
        else:
            _print_runs(store, rows)


def _bool(v) -> bool | None:
    return None if v is None else bool(v)


def _write_csv(records: list[dict]) -> None:
    cols = ["run_id", "benchmark", "campaign", "status", "run_valid", "started_at", "params", "metric",
            "value", "unit", "labels", "metric_valid"]
    w = csv.DictWriter(sys.stdout, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for rec in records:
        w.writerow({k: json.dumps(v, sort_keys=True) if isinstance(v, dict) else v for k, v in rec.items()})


def _headline(store, run_id: str) -> str:
    """The figure a reader wants first: the best valid HPL Gflop/s, else the first metric."""
    ms = store.metrics(run_id)
    hpl = [m for m in ms if m["name"] == "hpl_gflops" and m["valid"]]
    if hpl:
        return f"HPL {max(m['value'] for m in hpl):.2f} Gflop/s"
    if ms:
        return f"{ms[0]['name']} {ms[0]['value']:.4g} {ms[0]['unit']}"
    return "-"


def _print_runs(store, rows) -> None:
    table = Table(title=f"Runs in {escape(str(store.path))}", title_justify="left")
    for col in ("run id", "benchmark", "status", "params", "headline", "duration", "started (UTC)"):
        table.add_column(col)
    for r in rows:
        params = json.loads(r["params"])
        short = " ".join(f"{k}={v}" for k, v in params.items() if k in ("n", "nb", "p", "q", "ranks", "threads"))
        style = "green" if r["status"] == "ok" else "red"
        table.add_row(r["id"], r["benchmark"], f"[{style}]{r['status']}[/]", escape(short),
                      escape(_headline(store, r["id"])),
                      f"{r['duration_s']:.1f} s" if r["duration_s"] is not None else "-",
                      (r["started_at"] or "")[:19])
    console.print(table)
    if not rows:
        console.print("no runs stored yet: try `clusterbench run`")


def _show_run(store, run_id: str, fmt: Format) -> None:
    r = store.run(run_id)
    if r is None:
        raise UserInputError(f"no run with id {run_id!r}", hint="list run ids with `clusterbench results`")
    metrics = store.metrics(run_id)
    data = dict(r) | {k: json.loads(r[k]) for k in ("params", "env", "launcher", "tags", "facts")}
    data["metrics"] = [dict(m) | {"labels": json.loads(m["labels"])} for m in metrics]
    data["artifacts"] = [dict(a) for a in store.artifacts(run_id)]
    if fmt != Format.table:
        print(json.dumps(data, indent=2, default=str))
        return
    console.print(f"[bold]{escape(run_id)}[/] {r['benchmark']} [{r['status']}] valid={_bool(r['valid'])}")
    if r["reason"]:
        console.print(f"reason: {escape(r['reason'])}")
    console.print(f"command: {escape(r['command'] or '')}")
    console.print(f"workdir: {escape(r['workdir'] or '')}")
    table = Table("metric", "value", "unit", "labels", "valid")
    for m in metrics:
        table.add_row(m["name"], f"{m['value']:.6g}", m["unit"], escape(m["labels"]), str(bool(m["valid"])))
    console.print(table)
    for a in data["artifacts"]:
        console.print(f"output: {escape(a['name'])} ({a['size']} bytes, sha256 {a['sha256'][:12]}) {escape(a['path'])}")
