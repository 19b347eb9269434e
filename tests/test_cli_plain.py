"""The command lines cli.main answers without typer (cli/plain.py, issue 32): they read exactly the options
the typer commands declare, leave every other command line to typer, and print what typer's path prints."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from clusterbench.bench.metrics import Metric
from clusterbench.cli import plain
from clusterbench.cli.results_view import Format
from clusterbench.store.db import Store
from clusterbench.store.records import RunRecord


def _params(command) -> dict[str, object]:
    return {opt: param for param in command.params for opt in param.opts + param.secondary_opts}


@pytest.mark.parametrize("name", sorted(plain.COMMANDS))
def test_the_options_read_without_typer_are_the_typer_command_s(name):
    import typer.main

    from clusterbench.cli import register_all

    group = typer.main.get_command(register_all())
    typed, command = group.commands[name], plain.COMMANDS[name]
    declared = _params(typed)
    arguments = [p for p in typed.params if p.param_type_name == "argument"]
    assert tuple(p.name for p in arguments) == command.arguments
    assert sum(p.required for p in arguments) == command.required
    for opt, key in command.options.items():
        assert declared[opt].name == key and not declared[opt].is_flag, opt
        assert declared[opt].multiple == (key in command.repeatable), opt
    for opt, key in command.flags.items():
        assert declared[opt].name == key and declared[opt].is_flag and not declared[opt].secondary_opts, opt
    named = {p.name for p in typed.params if p.param_type_name == "option"}
    assert set(command.numbers) | set(command.choices) <= named
    main = _params(group)
    for opt, key in plain.MAIN_OPTIONS.items():
        assert main[opt].name == key and main[opt].multiple == (key == "limit"), opt


@pytest.mark.parametrize("argv", [
    ["results", "--help"], ["results", "--group-by", "nb"], ["results", "--stat", "n"], ["results", "--limt", "3"],
    ["results", "--limit", "-1"], ["results", "--limit", "07"], ["results", "--limit", "x"], ["results", "--limit"],
    ["results", "--format", "JSON"], ["results", "--benchmark", "a", "--benchmark", "b"], ["results", "a", "b"],
    ["results", "--", "a"], ["results", "-"], ["--db", "a", "--db", "b", "results"], ["--version", "results"],
    ["results", "--campaign", "-x"], ["report"], [], ["bench"], ["bench", "stream", "--repeats", "0"],
    ["bench", "stream", "-pn=1"], ["bench", "stream", "-p=n=1"], ["bench", "stream", "--json", "--json"],
    ["bench", "stream", "--no-json"], ["bench", "stream", "--json=1"], ["bench", "stream", "other"],
    ["bench", "-p", "n=1"], ["bench", "stream", "--help"],
])
def test_anything_else_is_left_to_typer(argv):
    assert plain.parse(argv) is None


def test_what_is_read():
    _, main, given = plain.parse(["--db=x.db", "--limit", "max_runs=5", "results", "--select", "a=1", "r1",
                                  "--limit=20", "--format", "csv", "--select=b=2", "--benchmark", ""])
    assert main == {"db": "x.db", "limit": ["max_runs=5"]}
    assert given == {"select": ["a=1", "b=2"], "run_id": "r1", "limit": 20, "fmt": Format.csv, "benchmark": ""}
    assert type(given["fmt"]) is Format
    _, main, given = plain.parse(["bench", "-p", "n=1", "stream", "--param=ranks=2", "--json", "--repeats", "3",
                                  "--timeout", "10m", "--tag", "a=b"])
    assert main == {"db": None, "limit": []}
    assert given == {"param": ["n=1", "ranks=2"], "name": "stream", "as_json": True, "repeats": 3,
                     "timeout": "10m", "tag": ["a=b"]}


TYPER = ("import sys; sys.argv = ['clusterbench', *sys.argv[1:]]\n"  # cli.main with the typer path only
         "from clusterbench.cli import main, plain\n"
         "plain.parse = lambda argv: None\n"
         "main()\n")


def _both(argv: list[str]) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    env = dict(os.environ) | {"COLUMNS": "150"}
    fast = subprocess.run([sys.executable, "-m", "clusterbench", *argv], capture_output=True, text=True, env=env,
                          timeout=300)
    typer = subprocess.run([sys.executable, "-c", TYPER, *argv], capture_output=True, text=True, env=env, timeout=300)
    return fast, typer


@pytest.mark.parametrize("argv", [
    ["results"], ["results", "--limit", "2"], ["results", "--format", "json"], ["results", "--format=csv"],
    ["results", "--benchmark", "stream", "--status", "ok", "--metric", "stream_triad", "--limit", "0"],
    ["results", "r001"], ["results", "r001", "--format", "json"], ["results", "--select", "half=a"],
    ["results", "--campaign", "nowhere"], ["results", "nothere"], ["--limit", "max_runs", "results"],
])
def test_results_prints_the_same_as_typer(isolated_db, argv):
    with Store(isolated_db) as store:
        for i in range(3):
            run_id = f"r{i:03d}"
            store.begin_run(RunRecord(run_id, "stream", params={"threads": 1}, tags={"half": "a" if i % 2 else "b"}))
            store.conn.execute("UPDATE runs SET started_at=? WHERE id=?", (f"2026-11-01T00:00:0{i}.000+00:00", run_id))
            store.finish_run(run_id, "ok", True, None, 0, 1.0, [Metric("stream_triad", float(i), "MB/s")])
    assert plain.parse(argv) is not None
    fast, typer = _both(argv)
    assert (fast.returncode, fast.stdout, fast.stderr) == (typer.returncode, typer.stdout, typer.stderr)


@pytest.mark.parametrize("argv", [
    ["bench", "stream", "-p", "n=-5"], ["bench", "nosuch"], ["bench", "stream", "-p", "n"],
    ["bench", "stream", "--timeout", "soon"], ["bench", "stream", "-p", "n=1000", "-p", "ranks=1", "--tag", "x"],
])
def test_bench_refuses_bad_input_as_typer_does(isolated_db, argv):
    assert plain.parse(argv) is not None
    fast, typer = _both(argv)
    assert (fast.returncode, fast.stdout, fast.stderr) == (typer.returncode, typer.stdout, typer.stderr)
    assert fast.returncode == 2 and "error:" in fast.stderr
