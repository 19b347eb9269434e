"""Exports are complete (issue 31, Why 10): `results --format csv|json` has every selected run,
not the table's default --limit of 50; the table keeps its limit and says how many it shows."""

from __future__ import annotations

import csv
import io

import pytest
from tests.conftest import cli, cli_json

from clusterbench.bench.metrics import Metric
from clusterbench.store.db import Store
from clusterbench.store.records import RunRecord

RUNS = 158  # the size of the study in the issue: 47 of its 158 values were exported


@pytest.fixture
def store_of_158(isolated_db):
    """158 finished STREAM runs, one value each (the value is the run's number: each must come out),
    half tagged half=a, the other half=b; started one second apart, so 'newest' is well defined."""
    with Store(isolated_db) as store:
        for i in range(RUNS):
            run_id = f"r{i:03d}"
            store.begin_run(RunRecord(run_id, "stream", params={"threads": 1}, tags={"half": "a" if i % 2 else "b"}))
            store.conn.execute("UPDATE runs SET started_at=? WHERE id=?",
                               (f"2026-11-01T00:{i // 60:02d}:{i % 60:02d}.000+00:00", run_id))
            store.finish_run(run_id, "ok", True, None, 0, 1.0, [Metric("stream_triad", float(i), "MB/s")])
    return isolated_db


def test_json_and_csv_exports_hold_every_run_not_the_newest_50(store_of_158):
    records = cli_json("results", "--format", "json")
    assert len(records) == RUNS
    assert sorted(r["value"] for r in records) == [float(i) for i in range(RUNS)]
    out = cli("results", "--format", "csv")
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert len(rows) == RUNS and {r["run_id"] for r in rows} == {f"r{i:03d}" for i in range(RUNS)}
    assert {"excluded", "notes"} <= set(rows[0])  # the curation travels with the export


def test_an_export_of_a_selection_or_a_filter_is_complete_and_an_explicit_limit_is_kept(store_of_158):
    assert len(cli_json("results", "--select", "half=a", "--format", "json")) == RUNS // 2
    assert len(cli_json("results", "--benchmark", "stream", "--format", "json")) == RUNS
    newest = cli_json("results", "--limit", "10", "--format", "json")
    assert [r["value"] for r in newest] == [float(i) for i in range(RUNS - 1, RUNS - 11, -1)]


def test_the_table_keeps_its_limit_and_says_how_many_runs_it_shows(store_of_158):
    out = cli("results")
    assert out.returncode == 0, out.stderr
    assert f"50 of {RUNS} runs shown; --limit 0 for all" in out.stdout
    assert out.stdout.count("r1") + out.stdout.count("r0") == 50  # run ids are r000..r157: 50 rows
    selected = cli("results", "--select", "half=a", "--limit", "20")
    assert f"20 of {RUNS // 2} runs shown; --limit 0 for all" in selected.stdout
    everything = cli("results", "--limit", "0")
    assert "runs shown" not in everything.stdout and "r000" in everything.stdout and "r157" in everything.stdout


def test_counts_above_a_thousand_are_written_with_separators(tmp_path):
    from clusterbench.analysis.listing import Listing

    assert Listing(runs=[None] * 50, records=[], total=2345).shown_note == "50 of 2,345 runs shown; --limit 0 for all"
    assert Listing(runs=[None] * 3, records=[], total=3).shown_note is None


def test_version_is_printed_before_typer_and_rich_are_imported():
    """`clusterbench --version` (issue 32) answers from the package metadata, without loading the CLI:
    measured 0.05 s for the whole command."""
    import subprocess
    import sys
    from importlib.metadata import version

    code = ("import sys; sys.argv = ['clusterbench', '--version']; from clusterbench.cli import main; main(); "
            "print(sorted(m for m in ('typer', 'rich', 'pandas', 'clusterbench.store.db') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"clusterbench {version('clusterbench')}", "[]"]
    assert cli("--version").stdout.strip() == f"clusterbench {version('clusterbench')}"
    from typer.testing import CliRunner

    from clusterbench.cli import register_all

    in_process = CliRunner().invoke(register_all(), ["--version"])
    assert in_process.exit_code == 0 and in_process.output.strip() == f"clusterbench {version('clusterbench')}"
