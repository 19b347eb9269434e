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
from clusterbench.report import csvsafe


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
    group_by: Annotated[str | None, typer.Option(
        "--group-by", help="Statistics per configuration of these parameters/labels/tags, e.g. nb,blas.")] = None,
    stat: Annotated[str | None, typer.Option(
        help="Statistics over valid repeats: " + ",".join(("n", "mean", "std", "min", "max", "median", "ci95", "cv"))
             + " (default: all).")] = None,
    cv_warn: Annotated[float, typer.Option(help="Flag configurations whose CV exceeds this.")] = 0.05,
) -> None:
    """List stored runs with their key metric, export every metric, or summarise repeats.

    With --group-by or --stat: one row per metric and configuration, over valid repeats only
    (invalid ones are counted in n_invalid, never averaged in).
    """
    with open_store(read_only=True) as store:
        if run_id:
            _show_run(store, run_id, fmt)
            return
        if group_by is not None or stat is not None:
            _print_stats(store, campaign, benchmark, metric, group_by, stat, cv_warn, fmt)
            return
        rows = store.runs(benchmark=benchmark, campaign=campaign, status=status, limit=limit or None)
        if not rows and (campaign, benchmark, status) != (None, None, None) and store.run_count():
            raise no_match(store, campaign=campaign, benchmark=benchmark, status=status)
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
        if metric and rows and not records:
            names = store.metric_names(r["id"] for r in rows)
            newest = f"the {len(rows)} newest " if limit and len(rows) == limit else ""
            raise UserInputError(f"no metric {metric!r} in {newest}runs that match",
                                 hint=("--limit 0 looks at every run; " if newest else "")
                                 + _suggest(metric, names, "their metrics"))
        if fmt == Format.json:
            print(json.dumps(records, indent=2))
        elif fmt == Format.csv:
            _write_csv(records)
        else:
            _print_runs(store, rows)


def _print_stats(store, campaign, benchmark, metric, group_by, stat, cv_warn, fmt) -> None:
    from clusterbench.analysis.stats import STATS, metric_frame, summarise

    stats = [s.strip() for s in (stat or ",".join(STATS)).split(",") if s.strip()]
    unknown = [s for s in stats if s not in STATS]
    if unknown:
        raise UserInputError(f"unknown statistic {unknown[0]!r}", hint="choose from " + ", ".join(STATS))
    frame = metric_frame(store, campaign, benchmark, metric)
    if frame.empty:
        if not store.run_count():
            raise UserInputError(f"no runs stored yet in {store.path}", hint="store some with `clusterbench run`, "
                                 "`clusterbench campaign run` or `clusterbench import`")
        raise no_match(store, campaign=campaign, benchmark=benchmark, metric=metric)
    keys = [g.strip() for g in group_by.split(",") if g.strip()] if group_by else None
    table = summarise(frame, keys, cv_warn)
    shown = [c for c in table.columns if c not in (*STATS, "ci95_low", "ci95_high", "n_invalid", "warning")]
    extra = ["ci95_low", "ci95_high"] if "ci95" in stats else []
    table = table[shown + stats + extra + ["n_invalid", "warning"]]
    if fmt == Format.json:
        print(table.to_json(orient="records", indent=2))
        return
    if fmt == Format.csv:
        csvsafe.frame(table).to_csv(sys.stdout, index=False)
        return
    constant = [c for c in ("benchmark", "metric", "unit") if table[c].nunique() <= 1]
    note = ", ".join(f"{c} {table[c].iloc[0]}" for c in constant if table[c].iloc[0])
    shown = [c for c in shown if c not in constant]
    out = Table(title=f"Statistics over valid repeats{f' - campaign {campaign}' if campaign else ''}"
                      f"{f' ({note})' if note else ''}", title_justify="left")
    for col in shown + stats + ["n_invalid"]:
        out.add_column(col, justify="right" if col in STATS or col == "n_invalid" else "left")
    records = table.to_dict("records")
    for rec in records:  # pandas fills a missing warning with NaN (a float), not None
        rec["warning"] = rec["warning"] if isinstance(rec["warning"], str) else None
    for rec in records:
        cells = [escape(_cell(rec[c], c)) for c in shown + stats + ["n_invalid"]]
        out.add_row(*cells, style="yellow" if rec["warning"] else None)
    console.print(out)
    for rec in records:
        if rec["warning"]:
            label = " ".join(f"{c}={rec[c]}" for c in shown if c not in ("benchmark", "unit"))
            console.print(f"[yellow]warning[/]: {escape(label)}: {escape(rec['warning'])}")


def _cell(value, column: str) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if column == "cv":
        return f"{value:.1%}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _bool(v) -> bool | None:
    return None if v is None else bool(v)


def no_match(store, **filters: str | None) -> UserInputError:
    """Why a filtered listing is empty although runs are stored: the filter whose value is stored
    nowhere, with the values that are; else the combination."""
    given = {name: value for name, value in filters.items() if value is not None}
    for name, value in given.items():
        known = store.metric_names() if name == "metric" else store.distinct(name)
        if value not in known:
            plural = {"status": "statuses"}.get(name, name + "s")
            return UserInputError(f"no run matches {name} {value!r} ({store.run_count()} runs are stored)",
                                  hint=_suggest(value, known, f"stored {plural}") if known else f"no run has a {name}")
    if not given:
        return UserInputError(f"no metric values stored ({store.run_count()} runs are stored, none with metrics)",
                              hint="list the runs and their status with `clusterbench results`")
    terms = " and ".join(f"{name} {value!r}" for name, value in given.items())
    return UserInputError(f"no run matches {terms} together (each alone matches runs)",
                          hint="see what each holds: `clusterbench campaign list`, "
                               "`clusterbench results --campaign NAME`")


def _suggest(value: str, known: list[str], what: str, most: int = 20) -> str:
    """'did you mean ...' for close names, else the first `most` of them."""
    import difflib

    close = difflib.get_close_matches(value, known, n=5, cutoff=0.6)
    if close:
        return f"did you mean {' or '.join(repr(c) for c in close)}? ({len(known)} {what.split()[-1]} in all)"
    shown = ", ".join(known[:most])
    return f"{what}: {shown}" + (f" and {len(known) - most} more" if len(known) > most else "")


def _write_csv(records: list[dict]) -> None:
    cols = ["run_id", "benchmark", "campaign", "status", "run_valid", "started_at", "params", "metric",
            "value", "unit", "labels", "metric_valid"]
    w = csv.DictWriter(sys.stdout, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for rec in records:
        w.writerow({k: csvsafe.cell(json.dumps(v, sort_keys=True) if isinstance(v, dict) else v)
                    for k, v in rec.items()})


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
        console.print(f"no runs stored yet in {escape(str(store.path))}: try `clusterbench run`")


def _show_run(store, run_id: str, fmt: Format) -> None:
    from clusterbench.store.db import decoded_run

    r = store.run(run_id)
    if r is None:
        raise UserInputError(f"no run with id {run_id!r}", hint="list run ids with `clusterbench results`")
    metrics = store.metrics(run_id)
    data = decoded_run(r)
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
