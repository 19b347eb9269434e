"""Command-line interface. Commands stay thin: parse, call the library, print."""

from __future__ import annotations

import sys

from rich.markup import escape

from clusterbench import limits
from clusterbench.cli import (  # noqa: F401  (registers)
    bench_cmd,
    build_cmd,
    campaign_cmd,
    cluster_cmd,
    db_cmd,
    diff_cmd,
    history_cmd,
    import_cmd,
    pin_cmd,
    plan_cmd,
    report_cmd,
    results_cmd,
    run_cmd,
    system_cmd,
    tag_cmd,
    tune_cmd,
)
from clusterbench.cli.app import app, err_console
from clusterbench.errors import UserInputError


def main() -> None:
    try:
        limits.check_environment()
        app()
    except UserInputError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/]: finished results are stored; unfinished runs are marked.")
        sys.exit(130)
