"""Command-line interface. Commands stay thin: parse, call the library, print.

`main` registers only the module of the command being run (COMMANDS): importing the other
fifteen command modules, and typer building their options, cost about 0.15 s at every start,
which a tuner that runs many short trials pays each time. `--version` and `--help` alone are answered
before typer and rich are imported (`--help` from cli/fast_help.py), and the usual `results` and
`bench` command lines without typer (cli/plain.py: typer would import pydantic). Any other command line (no
command, an unknown one) registers them all, so help and "No such command" are as before;
`register_all()` returns the app with every command, for whoever drives it in-process.
"""

from __future__ import annotations

import importlib
import sys

# Each top-level command or group, and the module (cli/<module>.py) that registers it.
# tests/test_cli_startup.py checks that this is exactly what the modules register.
COMMANDS = {
    "benchmarks": "bench_cmd", "bench": "bench_cmd", "build": "build_cmd", "campaign": "campaign_cmd",
    "schema": "campaign_cmd", "cluster": "cluster_cmd", "db": "db_cmd", "diff": "diff_cmd",
    "history": "history_cmd", "import": "import_cmd", "pin": "pin_cmd", "plan": "plan_cmd",
    "report": "report_cmd", "compare": "report_cmd", "results": "results_cmd", "run": "run_cmd",
    "system": "system_cmd", "tag": "tag_cmd", "untag": "tag_cmd", "tune": "tune_cmd",
    "exclude": "curate_cmd", "include": "curate_cmd", "note": "curate_cmd", "noise": "noise_cmd",
    "ceilings": "ceilings_cmd", "explain": "ceilings_cmd",
}
MODULES = tuple(dict.fromkeys(COMMANDS.values()))
_VALUED_OPTIONS = ("--db", "--limit", "--quiet-check")  # the main options that take a value (cli/app.py main_options)


def register(module: str) -> None:
    importlib.import_module(f"clusterbench.cli.{module}")


def register_all():
    """Every command registered (in the order of `clusterbench --help`); returns the app."""
    for module in MODULES:
        register(module)
    from clusterbench.cli.app import app

    return app


def command_word(argv: list[str]) -> str | None:
    """The command named on a command line (None when there is none before an option it cannot skip):
    `clusterbench --db x.db bench hpl` -> 'bench'."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _VALUED_OPTIONS:
            skip = True
        elif arg.startswith("--") and arg.partition("=")[0] in _VALUED_OPTIONS:
            continue
        elif arg.startswith("-"):
            return None  # --help and anything else: the whole app answers
        else:
            return arg
    return None


def version() -> str:
    """The installed clusterbench's version (its package metadata; the source's when not installed).

    The metadata is read from the first `clusterbench-*.dist-info` on sys.path, the one
    importlib.metadata would find: importing importlib.metadata alone costs 0.05-0.2 s here, which is
    most of what `--version` would take."""
    import os

    for folder in sys.path:
        try:
            names = sorted(n for n in os.listdir(folder or ".") if n.startswith("clusterbench-")
                           and n.endswith(".dist-info"))
        except OSError:
            continue
        for name in names:
            try:
                with open(os.path.join(folder or ".", name, "METADATA"), encoding="utf-8") as fh:
                    for line in fh:
                        if line.startswith("Version:"):
                            return line.partition(":")[2].strip()
                        if not line.strip():
                            break  # the end of the headers
            except OSError:
                continue
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("clusterbench")
    except PackageNotFoundError:
        from clusterbench import __version__

        return __version__


def main() -> None:
    if sys.argv[1:2] in (["--version"], ["-V"]):  # answered before typer and rich are imported: fast
        print(f"clusterbench {version()}")
        return
    if sys.argv[1:] == ["--help"]:  # the list of commands, plain: neither typer nor rich (cli/fast_help.py)
        from clusterbench.cli import fast_help

        print(fast_help.text())
        return
    import gc

    gc.disable()  # during the imports: back on, over what the command makes, once they are done (modules_loaded)
    from clusterbench import limits
    from clusterbench.errors import Interrupted, UserInputError

    word = command_word(sys.argv[1:])
    if word == "bench" and not {"--help", "-h"} & set(sys.argv):
        from clusterbench.cli import ahead

        ahead.start()  # the state read and discovery, while the run's modules load
    from clusterbench.cli import plain

    # the usual `results` and `bench` command lines without typer (cli/plain.py); None: typer reads it
    parsed = plain.parse(sys.argv[1:]) if word in plain.COMMANDS else None
    if parsed is None:
        gc.enable()  # typer's path as before
        module = COMMANDS.get(word or "")
        if module:
            register(module)
        else:
            register_all()
    try:
        limits.check_environment()
        if parsed is None:
            from clusterbench.cli.app import app

            app()
        else:
            plain.run(parsed)
    except UserInputError as exc:
        from rich.markup import escape  # rich only to print: `bench --json` does not load it otherwise

        from clusterbench.cli.shared import err_console

        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        sys.exit(exc.exit_code)
    except (Interrupted, KeyboardInterrupt) as exc:  # the one place an interrupted command is reported
        from rich.markup import escape

        from clusterbench.cli.shared import err_console

        stored = (exc.stored if isinstance(exc, Interrupted)
                  else "finished results are stored; unfinished runs are marked.")
        err_console.print(f"[yellow]interrupted[/]: {escape(stored)}", highlight=False)
        sys.exit(130)
