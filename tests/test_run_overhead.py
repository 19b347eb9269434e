"""The fixed cost of a run (issue 20): the CLI registers only the command it runs, the registry
imports only the benchmark it is asked for, and the node state read ahead is used only when it
is the very read the run would make; and (issue 32) `--version`, `--help` and a plain `results` listing load
no analysis library (pandas, numpy, scipy, matplotlib)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
from tests.conftest import main_in_new_python

from clusterbench.cli import COMMANDS, command_word, register_all
from clusterbench.execution import observe


def test_the_command_map_is_what_the_modules_register():
    app = register_all()
    names = {c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands}
    names |= {g.name for g in app.registered_groups}
    assert names == set(COMMANDS)


@pytest.mark.parametrize(("argv", "word"), [
    (["bench", "hpl", "-p", "n=1000"], "bench"), (["--db", "x.db", "bench", "hpl"], "bench"),
    (["--db=x.db", "--limit", "max_runs=5", "run"], "run"), (["--help"], None), ([], None),
    (["--db"], None), (["tune", "hpl"], "tune"),
])
def test_command_word(argv, word):
    assert command_word(argv) == word


def test_one_command_loads_alone_and_help_lists_all(tmp_path):
    env = dict(os.environ) | {"CLUSTERBENCH_DB": str(tmp_path / "r.db")}
    out = main_in_new_python(["benchmarks", "--help"], env, timeout=60, after=(
        "print('LOADED', sorted(m for m in sys.modules if m.startswith('clusterbench.cli.')))")).stdout
    loaded = out.split("LOADED", 1)[1]
    assert "bench_cmd" in loaded and "report_cmd" not in loaded and "campaign_cmd" not in loaded
    full = subprocess.run([sys.executable, "-m", "clusterbench", "--help"], capture_output=True, text=True,
                          env=env | {"COLUMNS": "200"}, timeout=60).stdout
    for name in ("bench", "campaign", "report", "tune", "import", "untag"):
        assert f" {name} " in full, name


def test_registry_imports_one_benchmark_by_name_and_all_on_demand():
    code = ("import sys; from clusterbench.bench import registry as r\n"
            "c = r.benchmark_class('hpl'); print(c.name, 'clusterbench.bench.hpcc.benchmark' in sys.modules)\n"
            "t = r.BENCHMARKS; print(all(t[k].name == k for k, _, _ in r.BUILTIN), list(t) == [k for k, _, _ in "
            "r.BUILTIN], 'clusterbench.bench.hpcc.benchmark' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["hpl", "False", "True", "True", "True"], out.stderr


def test_register_before_and_after_the_table_is_built():
    from clusterbench.bench import registry
    from clusterbench.bench.base import Benchmark

    class Toy(Benchmark):
        name = "toy-overhead"

    registry.register(Toy)
    try:
        assert registry.benchmark_class("toy-overhead") is Toy
        assert registry.BENCHMARKS["toy-overhead"] is Toy
    finally:
        registry.BENCHMARKS.pop("toy-overhead", None)


@pytest.fixture
def stats():
    observe.discard_prefetch()
    before = dict(observe.prefetch_stats)
    yield lambda: {k: observe.prefetch_stats[k] - before[k] for k in before}
    observe.discard_prefetch()


def test_a_matching_read_ahead_is_used_once(stats):
    env = {"OMPI_MCA_btl": "self,vader"}
    assert observe.prefetch_state(["localhost"], env)
    assert observe.prefetch_state(["localhost"], env)  # the same read under way: not started twice
    first = observe.collect_state(["localhost"], env)
    assert stats() == {"started": 1, "used": 1}
    assert "error" not in first[os.uname().nodename]
    observe.collect_state(["localhost"], env)  # taken once: the next run reads again
    assert stats() == {"started": 1, "used": 1}


def test_a_read_ahead_for_another_script_or_too_old_is_not_used(stats, monkeypatch):
    observe.prefetch_state(["localhost"], {"OMPI_MCA_btl": "self,vader"})
    observe.collect_state(["localhost"], {"OMPI_MCA_btl": "self,tcp"})  # the run's MPI variables differ
    assert stats()["used"] == 0
    observe.prefetch_state(["localhost"], {})
    observe.discard_prefetch()  # as the executor does before applying a run's system settings
    observe.collect_state(["localhost"], {})
    assert stats()["used"] == 0
    monkeypatch.setattr(observe, "PREFETCH_MAX_AGE_S", 0.05)
    observe.prefetch_state(["localhost"], {})
    time.sleep(0.2)
    observe.collect_state(["localhost"], {})
    assert stats() == {"started": 3, "used": 0}


def test_nothing_is_read_ahead_when_observing_is_off(stats, monkeypatch):
    monkeypatch.setenv("CLUSTERBENCH_OBSERVE", "0")
    assert not observe.prefetch_state(["localhost"], {})
    assert stats()["started"] == 0


HEAVY = ("pandas", "numpy", "scipy", "matplotlib")


def _modules_after(argv: list[str], env: dict) -> tuple[set[str], str]:
    """The top-level packages imported by `clusterbench ARGV`, run in a fresh interpreter, and its output."""
    code = (f"import sys; sys.argv = ['clusterbench', *{argv!r}]\n"
            "from clusterbench.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('LOADED', ' '.join(sorted({m.partition('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    head, _, loaded = out.stdout.rpartition("LOADED")
    assert loaded, out.stderr
    return set(loaded.split()), head


@pytest.mark.parametrize("argv", [["--version"], ["--help"], []])
def test_version_and_help_import_no_analysis_library(tmp_path, argv):
    env = dict(os.environ) | {"CLUSTERBENCH_DB": str(tmp_path / "r.db"), "COLUMNS": "200"}
    loaded, out = _modules_after(argv, env)
    assert "clusterbench" in loaded
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    if argv == ["--version"]:
        assert out.startswith("clusterbench ") and not loaded & {"typer", "rich", "pydantic", "yaml"}
    else:
        assert " results " in out and " bench " in out  # the whole app's help, not an error


def test_results_listing_imports_no_analysis_library_and_a_selection_still_works(tmp_path):
    """A plain listing needs no pandas; --select (analysis.identity) and --group-by still load what they need."""
    from clusterbench.store.db import Store

    db = tmp_path / "r.db"
    with Store(db):
        pass
    env = dict(os.environ) | {"CLUSTERBENCH_DB": str(db), "COLUMNS": "200"}
    loaded, _ = _modules_after(["results"], env)
    assert "sqlite3" in loaded and not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    loaded, _ = _modules_after(["results", "--select", "nodes>=1"], env)
    assert "pandas" in loaded  # the selection path is still reached, lazily


def test_the_plain_top_level_help_says_what_the_commands_say():
    """cli/fast_help.py answers `clusterbench --help` without typer: its table must be the registered commands,
    in typer's order, each with the first sentence of its own help (edit SUMMARIES when a docstring changes)."""
    import typer.main

    from clusterbench.cli import fast_help

    group = typer.main.get_command(register_all())
    said = {name: command.get_short_help_str(limit=10_000) for name, command in group.commands.items()}
    assert fast_help.SUMMARIES == said
    assert list(fast_help.SUMMARIES) == list(said)
    assert fast_help.ABOUT == group.help
    declared = {opt for param in group.params for opt in param.opts + param.secondary_opts} | {"--help"}
    listed = {opt for name, _ in fast_help.OPTIONS for opt in re.findall(r"(?<!\S)-{1,2}[\w-]+", name)}
    assert declared == listed, (declared, listed)
    page = fast_help.text()
    assert all(f"  {name} " in page for name in said)


def test_bench_reads_the_state_ahead_from_its_start_and_the_run_takes_that_read(tmp_path):
    """`bench` starts the state read before typer is set up (cli/ahead.py): one read is started
    and the run uses it; with bad input the read may start but nothing is built and nothing runs."""
    from clusterbench.native.build import clock_binary

    clock_binary()  # the early read needs the clock kernel built; it never builds it itself
    spy = ("from clusterbench.execution import observe\n"
           "first = []\n"
           "real = observe.prefetch_state\n"
           "def spy(*a, **k):\n    first.append('typer' in sys.modules)\n    return real(*a, **k)\n"
           "observe.prefetch_state = spy\n")
    env = dict(os.environ) | {"CLUSTERBENCH_DB": str(tmp_path / "r.db")}
    out = main_in_new_python(["bench", "stream", "-p", "n=100000", "--json"], env, before=spy, after=(
        "print('STATS', first[0], observe.prefetch_stats['started'], observe.prefetch_stats['used'])"))
    assert out.returncode == 0, out.stderr
    # the first read started before typer was imported; the run took it (one read started, one used)
    assert out.stdout.rstrip().endswith("STATS False 1 1"), out.stdout[-500:] + out.stderr[-2000:]
    bad = subprocess.run([sys.executable, "-m", "clusterbench", "bench", "stream", "-p", "n=-5"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
