"""`clusterbench results`: list, filter and export stored runs and their metrics.

The options, for typer; what runs and prints is cli/results_view.py, which cli/plain.py calls
directly for the plain command lines.
"""


from typing import Annotated

import typer

from clusterbench.cli.app import app
from clusterbench.cli.results_view import TABLE_LIMIT, Format, show


@app.command()
def results(
    run_id: Annotated[str | None, typer.Argument(help="Show one run in full (metrics, outputs).")] = None,
    benchmark: Annotated[str | None, typer.Option(help="Only this benchmark (hpcc, hpl, ...).")] = None,
    campaign: Annotated[str | None, typer.Option(help="Only this campaign.")] = None,
    status: Annotated[str | None, typer.Option(help="Only this status (ok, invalid, failed, timeout).")] = None,
    metric: Annotated[str | None, typer.Option(help="Only this metric name (e.g. hpl_gflops).")] = None,
    select: Annotated[list[str] | None, typer.Option(
        "--select", metavar="TERMS",
        help="Only runs matching these selection terms, comma-separated (repeatable): KEY=VALUE (also != >= <= "
             "> <) on a tag, parameter, nodes, system or status, tag:K=V, param:K=V, fact:PATH=V, campaign:NAME, "
             "e.g. --select blas=openblas-serial,nodes>=4.")] = None,
    limit: Annotated[int | None, typer.Option(
        help=f"At most this many runs, newest first (0: all). Default: {TABLE_LIMIT} in the table (it says how "
             "many it leaves out), all in a csv or json export.", show_default=False)] = None,
    fmt: Annotated[Format, typer.Option("--format", help="table, csv or json.")] = Format.table,
    group_by: Annotated[str | None, typer.Option(
        "--group-by", help="Statistics per configuration of these parameters/labels/tags, e.g. nb,blas.")] = None,
    stat: Annotated[str | None, typer.Option(
        help="Statistics over valid repeats: " + ",".join(("n", "mean", "std", "min", "max", "median", "ci95", "cv"))
             + " (default: all).")] = None,
    cv_warn: Annotated[float, typer.Option(help="Flag configurations whose CV exceeds this.")] = 0.05,
    wide: Annotated[bool, typer.Option(
        "--wide", help="Every column of the table, however wide the terminal (else the least useful columns that "
                       "do not fit are left out, and the table says which; a run id is never cut).")] = False,
) -> None:
    """List stored runs with their key metric, export every metric, or summarise repeats.

    With --group-by or --stat: one row per metric and configuration, over valid repeats only
    (invalid ones are counted in n_invalid, never averaged in).
    """
    show(run_id, benchmark, campaign, status, metric, select, limit, fmt, group_by, stat, cv_warn, wide)
