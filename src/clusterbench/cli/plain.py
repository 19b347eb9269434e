"""The command lines typed most, answered without typer: `results` (a listing, an export, one run)
and `bench NAME -p key=value ...`.

Why: typer 0.29 coerces every option through a pydantic TypeAdapter, so any command it runs first
imports typer and pydantic and builds the adapters. For `results --limit 20` that was about 0.15 s
of 0.34 s, where issue 32 asks for 0.2 s; for a `bench` run it is part of the fixed cost every
trial of a tuner pays. Their options are a few words, numbers and flags.

`parse` accepts only what it reads exactly as typer does, and returns None for anything else, which
typer then answers with its own help and messages (--help, an option not in COMMANDS, a number out
of range, an option given twice, a value that starts with '-', a short option with its value
attached): the main options --db PATH and --limit NAME=VALUE, then the command, its arguments and
its options, each value as the next word or after '='. `run` then calls what the typer command
calls (results_view.show, bench_run.run) and ends as typer's standalone mode ends: exit code 130
on Ctrl-C, 1 on a closed pipe. tests/test_cli_plain.py checks that COMMANDS matches the typer
commands and that both print the same.
"""

from __future__ import annotations

import errno
import importlib
import sys
from typing import NamedTuple

from clusterbench.cli.shared import apply_main_options

MAIN_OPTIONS = {"--db": "db", "--limit": "limit"}  # before the command word (cli/app.py main_options)
MAX_DIGITS = 18  # a number longer than this is left to typer


class Command(NamedTuple):
    run: str  # "module:function" (in clusterbench.cli) called with the parameters
    arguments: tuple[str, ...]  # the parameters of the positional arguments, in order
    required: int  # how many of them must be given
    options: dict[str, str]  # option (each of its names) -> parameter, taking a value
    repeatable: tuple[str, ...] = ()  # parameters whose option may repeat: a list
    flags: dict[str, str] = {}  # option -> parameter, without a value: True when given
    numbers: dict[str, int] = {}  # parameter -> the least value typer accepts (an int)
    choices: dict[str, str] = {}  # parameter -> "module:Enum" whose values it takes (case-sensitive, as typer)


def _number(text: str, least: int) -> int | None:
    """A plain decimal at least `least` (no sign, space, underscore or leading zero), else None."""
    if not (text.isascii() and text.isdigit() and len(text) <= MAX_DIGITS and (text == "0" or text[0] != "0")):
        return None
    value = int(text)
    return value if value >= least else None


COMMANDS = {
    "results": Command("results_view:show", ("run_id",), 0,
                       {"--benchmark": "benchmark", "--campaign": "campaign", "--status": "status",
                        "--metric": "metric", "--select": "select", "--limit": "limit", "--format": "fmt"},
                       repeatable=("select",), flags={"--wide": "wide"}, numbers={"limit": 0},
                       choices={"fmt": "results_view:Format"}),
    "bench": Command("bench_run:run", ("name",), 1,
                     {"--param": "param", "-p": "param", "--repeats": "repeats", "--timeout": "timeout",
                      "--tag": "tag"},
                     repeatable=("param", "tag"), flags={"--json": "as_json"}, numbers={"repeats": 1}),
}


def parse(argv: list[str]) -> tuple[Command, dict, dict] | None:
    """(the command, apply_main_options' keyword arguments, the command's) for `argv` (sys.argv[1:]);
    None when typer must read it."""
    main: dict = {"db": None, "limit": []}
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        read = _option(argv, i, MAIN_OPTIONS)
        if read is None:
            return None
        key, value, i = read
        if key == "limit":
            main["limit"].append(value)
        elif main[key] is not None:
            return None
        else:
            main[key] = value
    command = COMMANDS.get(argv[i]) if i < len(argv) else None
    if command is None:
        return None
    given: dict = {}
    arguments = list(command.arguments)
    i += 1
    while i < len(argv):
        word = argv[i]
        if not word.startswith("-"):
            if not arguments:
                return None
            given[arguments.pop(0)], i = word, i + 1
            continue
        if word in command.flags:
            key = command.flags[word]
            if key in given:
                return None
            given[key], i = True, i + 1
            continue
        read = _option(argv, i, command.options)
        if read is None:
            return None
        key, value, i = read
        if key in command.repeatable:
            given.setdefault(key, []).append(value)
            continue
        if key in given:
            return None
        if key in command.numbers:
            value = _number(value, command.numbers[key])
            if value is None:
                return None
        elif key in command.choices:
            kind = _named(command.choices[key])
            if value not in {member.value for member in kind}:
                return None
            value = kind(value)
        given[key] = value
    if len(command.arguments) - len(arguments) < command.required:
        return None
    return command, main, given


def _option(argv: list[str], i: int, known: dict[str, str]) -> tuple[str, str, int] | None:
    """(parameter, value, index after it) of the option at argv[i], its value after '=' (long options)
    or in the next word; None for an option not in `known`, a missing value, or one starting with '-'."""
    name, eq, value = argv[i].partition("=")
    if name not in known or (eq and not name.startswith("--")):
        return None
    if not eq:
        if i + 1 >= len(argv):
            return None
        value, i = argv[i + 1], i + 1
    if value.startswith("-"):
        return None
    return known[name], value, i + 1


def _named(name: str):
    """The object a "module:attribute" of clusterbench.cli names."""
    module, _, attribute = name.partition(":")
    return getattr(importlib.import_module(f"clusterbench.cli.{module}"), attribute)


def run(parsed: tuple[Command, dict, dict]) -> None:
    """What typer would do with the same command line: the main options, then the command."""
    command, main, given = parsed
    target = _named(command.run)
    try:
        apply_main_options(main["db"], main["limit"])
        target(**given)
        _before_exit()
    except KeyboardInterrupt:
        sys.exit(130)  # typer's standalone mode: Ctrl-C is exit code 130, without a message
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        from typer._click.utils import PacifyFlushWrapper  # the output's reader is gone: as typer handles it

        sys.stdout = PacifyFlushWrapper(sys.stdout)
        sys.stderr = PacifyFlushWrapper(sys.stderr)
        sys.exit(1)


def _before_exit() -> None:
    """Collect what is garbage now, then exempt every object left from the collector (gc.freeze): the
    interpreter's shutdown otherwise runs full collections over all of them (pydantic's and rich's
    objects, 400 modules), which took 0.05-0.2 s of every `bench` here. The command has closed its
    store, files and processes; what is left is the modules', freed as their dictionaries are
    cleared at exit as before, and only reference cycles among them are left to the system to free."""
    import gc

    gc.collect()
    gc.freeze()
