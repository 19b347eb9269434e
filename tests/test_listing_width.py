"""Listings on an 80- and a 120-column terminal (issue 36): `results`, `build list`, `campaign list` and the
progress lines fit the width, a run id is never cut (each stored id is printed whole on one line, and is what
`results ID` takes), the columns left out are said, `--wide` shows them all, and numbers carry readable units
(26.5 GB/s, not 2.645e+04 MB/s)."""

from __future__ import annotations

import io
import json
import re
from types import SimpleNamespace

import pytest
from rich.console import Console
from tests.conftest import cli

from clusterbench.analysis.listing import readable, significant
from clusterbench.bench.metrics import Metric
from clusterbench.store.db import Store
from clusterbench.store.records import RunRecord

WIDTHS = (80, 120)
CAMPAIGN = "pi-stream-scaling-over-every-node-2026"  # a long campaign name, as users write them
LONG_IDS = [f"{CAMPAIGN}-stream-{h}-r{r}" for h, r in (("0123456789ab", 12), ("ba9876543210", 3))]
TYPICAL_IDS = ["20261122-231301-hpl-63fdc8", "tune-hpl-1a2b3c4d5e-hpl-0123456789ab-r0", "import-hpcg-9f8e7d6c5b4a",
               "20261122-231501-pingpong-a1b2c3"]
BAR = set("━╸╺")  # what Rich draws a bar with (complete, halves, remaining)


def _store(db, ids: list[str]) -> None:
    """Runs with these ids and large figures: STREAM at 26 GB/s (stored in MB/s), HPL at 14.7 Tflop/s (stored in
    Gflop/s), a ping-pong latency in us; one excluded with a long reason and one with a note."""
    with Store(db) as store:
        for i, run_id in enumerate(ids):
            kind = run_id.split("-")[-3] if run_id.startswith("tune") else next(
                (b for b in ("stream", "hpl", "pingpong", "hpcg") if f"-{b}-" in run_id), "stream")
            campaign = CAMPAIGN if run_id.startswith(CAMPAIGN) else None
            params = {"n": 1_000_000_000 + i, "ntimes": 10, "threads": 64, "ranks": 128} if kind == "stream" else {
                "n": 200_000, "nb": 384, "p": 16, "q": 32, "ranks": 512, "threads": 1}
            store.begin_run(RunRecord(run_id, kind, params=params, campaign=campaign, repeat=i))
            store.conn.execute("UPDATE runs SET started_at=? WHERE id=?", (f"2026-11-22T23:{10 + i:02d}:01.000+00:00",
                                                                          run_id))
            metrics = {
                "stream": [Metric("stream_copy", 26450.3 + i, "MB/s"), Metric("stream_triad", 26451.7 + i, "MB/s")],
                "hpl": [Metric("hpl_gflops", 14734.2, "Gflop/s")],
                "pingpong": [Metric("latency_us", 0.3851, "us", False, {"bytes": 0})],
                "hpcg": [Metric("hpcg_gflops", 123.456, "Gflop/s")],
            }[kind]
            store.finish_run(run_id, "ok", True, None, 0, 1234.4 + i, metrics)
        store.exclude_runs([ids[0]], "node3 ran at 1.2 GHz after a BIOS update; measured again on 2026-11-23")
        store.add_note(ids[-1], "rerun after the BIOS update")


def _lines(text: str) -> list[str]:
    return text.rstrip("\n").split("\n")


def _check_fits(text: str, width: int) -> None:
    longest = max(_lines(text), key=len)
    assert len(longest) <= width, f"{len(longest)} > {width}: {longest!r}\n{text}"
    assert not re.search(r"\de[+-]\d", text), text  # no number with an exponent


def _check_ids_whole(text: str, ids: list[str]) -> None:
    for run_id in ids:
        assert any(run_id in line for line in _lines(text)), f"{run_id} not whole on a line:\n{text}"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("ids", [TYPICAL_IDS, LONG_IDS + TYPICAL_IDS], ids=["typical-ids", "long-ids"])
def test_results_fits_the_terminal_and_never_cuts_a_run_id(isolated_db, width, ids):
    _store(isolated_db, ids)
    out = cli("results", env={"COLUMNS": str(width)})
    assert out.returncode == 0, out.stderr
    _check_fits(out.stdout, width)
    _check_ids_whole(out.stdout, ids)
    assert "…" not in out.stdout, out.stdout  # Rich cut nothing
    assert "14734 Gflop/s" in out.stdout and "0.385 us" in out.stdout, out.stdout
    assert ids == TYPICAL_IDS or "26.5 GB/s" in out.stdout, out.stdout  # STREAM (MB/s) only in the long-ids store
    assert "`results RUN` or --wide shows what is left out here:" in out.stdout, out.stdout  # 120 is not enough
    for run_id in (ids[0], ids[-1]):  # the id as printed is what `results ID` takes
        shown = cli("results", run_id, "--format", "json")
        assert shown.returncode == 0 and json.loads(shown.stdout)["id"] == run_id, shown.stderr


def test_results_wide_shows_every_column_and_a_wide_terminal_needs_no_note(isolated_db):
    _store(isolated_db, TYPICAL_IDS)
    wide = cli("results", "--wide", env={"COLUMNS": "80"})
    assert wide.returncode == 0, wide.stderr
    header = next(line for line in _lines(wide.stdout) if line.startswith("run id"))
    for column in ("benchmark", "status", "result", "params", "duration", "started (UTC)"):
        assert column in header, header
    assert "left out" not in wide.stdout and max(map(len, _lines(wide.stdout))) > 80
    _check_ids_whole(wide.stdout, TYPICAL_IDS)
    assert "n=200000 nb=384 p=16 q=32 ranks=512 threads=1" in wide.stdout and "1235 s" in wide.stdout
    roomy = cli("results", env={"COLUMNS": "250"})
    assert "left out" not in roomy.stdout and "2026-11-22 23:10" in roomy.stdout, roomy.stdout


def test_results_of_one_run_and_its_statistics_carry_readable_units(isolated_db):
    _store(isolated_db, LONG_IDS)
    page = cli("results", LONG_IDS[1], env={"COLUMNS": "80"})
    assert page.returncode == 0, page.stderr
    assert "26.5 GB/s" in page.stdout and "e+04" not in page.stdout, page.stdout
    _check_fits(page.stdout.split("command:")[1], 80)  # the metrics table (the lines above are free text)
    stats = cli("results", "--campaign", CAMPAIGN, "--metric", "stream_triad", "--stat", "n,mean,std,min,max",
                env={"COLUMNS": "80"})
    assert stats.returncode == 0, stats.stderr
    assert "GB/s" in stats.stdout and "26.5" in stats.stdout and "MB/s" not in stats.stdout, stats.stdout
    _check_fits(stats.stdout, 80)


@pytest.mark.parametrize("value,unit,shown", [
    (26450.3, "MB/s", "26.5 GB/s"), (999.4, "MB/s", "999 MB/s"), (14734.2, "Gflop/s", "14734 Gflop/s"),
    (23.56, "Gflop/s", "23.6 Gflop/s"), (0.3851, "us", "0.385 us"), (1500.0, "us", "1.50 ms"),
    (2048.0, "MiB/s", "2.00 GiB/s"), (99.96, "", "100"), (0.0, "MB/s", "0 MB/s"), (1234.5, "count", "1234 count"),
])
def test_a_value_reads_in_its_unit_with_three_significant_digits(value, unit, shown):
    assert readable(value, unit) == shown


def test_a_hostile_value_cannot_make_a_cell_hundreds_wide():
    assert len(significant(1e300)) < 12 and significant(float("nan")) == "nan"


@pytest.mark.parametrize("width", WIDTHS)
def test_campaign_list_fits_and_keeps_the_campaign_name_whole(isolated_db, width):
    _store(isolated_db, LONG_IDS + TYPICAL_IDS)
    with Store(isolated_db) as store:
        other = "a-second-campaign-with-an-even-longer-name-for-the-nightly-runs"
        store.begin_run(RunRecord(f"{other}-hpl-0123456789ab-r0", "hpl", campaign=other))
    out = cli("campaign", "list", env={"COLUMNS": str(width)})
    assert out.returncode == 0, out.stderr
    _check_fits(out.stdout, width)
    assert CAMPAIGN in out.stdout and other in out.stdout, out.stdout
    assert width < 120 or "2026-11-22 23:" in out.stdout, out.stdout  # the last run, beside 63 characters of name
    header = next(line for line in _lines(out.stdout) if line.startswith("campaign "))
    assert "runs" in header and "ok" in header
    if "left out" in out.stdout:
        wide = cli("campaign", "list", "--wide", env={"COLUMNS": str(width)})
        assert "unfinished" in wide.stdout and "left out" not in wide.stdout


@pytest.mark.parametrize("width", WIDTHS)
def test_build_list_fits_and_folds_the_binary_path_rather_than_cutting_it(tmp_path, width):
    cache = tmp_path / "cache"
    binary = cache / "builds" / ("hpl-2.3-openmpi-4.1.4-openblas-pthread-" + "0123456789abcdef" * 2) / "bin" / "xhpl"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    entry = {"name": "xhpl", "version": "2.3", "mpi": "openmpi", "mpi_version": "4.1.4", "blas": "openblas-pthread",
             "cflags": "-O3 -march=native -funroll-loops -fomit-frame-pointer", "binary": str(binary),
             "source": "/home/someone/sources/hpl-2.3.tar.gz", "built_at": "2026-11-22T23:13:01+00:00"}
    (cache / "builds" / "registry.json").write_text(json.dumps([entry]))
    env = {"COLUMNS": str(width), "CLUSTERBENCH_CACHE": str(cache)}
    out = cli("build", "list", env=env)
    assert out.returncode == 0, out.stderr
    _check_fits(out.stdout, width)
    assert "xhpl" in out.stdout and "openmpi 4.1.4" in out.stdout and "2026-11-22 23:13" in out.stdout, out.stdout
    assert "…" not in out.stdout
    lines = _lines(out.stdout)
    header = next(i for i, line in enumerate(lines) if line.startswith("name "))
    at = lines[header].index("binary")
    folded = "".join(line[at:].strip() for line in lines[header + 1:])
    assert str(binary) in folded, out.stdout  # whole, folded over lines
    wide = cli("build", "list", "--wide", env=env)
    assert str(binary) in wide.stdout and entry["source"] in wide.stdout and entry["cflags"] in wide.stdout


def _rendered(progress, width: int) -> str:
    """The progress display's line as a terminal `width` wide shows it."""
    out = Console(width=width, file=io.StringIO(), record=True, force_terminal=True, color_system="standard")
    out.print(progress.make_tasks_table(progress.tasks))
    return out.export_text()


def _check_bar_line(text: str, width: int, *shown: str) -> None:
    [line] = _lines(text)  # one line: nothing wrapped
    assert len(line) <= width, (len(line), line)
    assert sum(ch in BAR for ch in line) >= 10, line  # the bar is there, at least 10 wide
    for part in shown:
        assert part in line, (part, line)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_campaign_bar_keeps_its_bar_count_and_eta_and_shortens_the_description(monkeypatch, width):
    from clusterbench.cli import progress, shared

    monkeypatch.setattr(shared, "console", Console(width=width, file=io.StringIO()), raising=False)
    run = SimpleNamespace(id=LONG_IDS[0], block="stream-scaling", repeat=3, recorded_params={
        "n": 1_000_000_000, "ntimes": 10, "threads": 64, "ranks": 128, "bind_to": "core", "map_by": "numa:PE=2",
        "blas": "openblas-pthread", "array_alignment": 4096})
    eta = SimpleNamespace(seconds=lambda: 754.0)
    bar = progress.RunProgress()
    bar.start([run] * 12, 0, eta)
    bar.run_started(run)
    bar.run_finished(run, SimpleNamespace(status="ok", duration_s=60.0, reason=None), eta)
    bar.tick(run, 12.0, "Triad pass 3 of 10:\n 26450.3 MB/s")
    text = _rendered(bar.progress, width)
    _check_bar_line(text, width, "stream-scaling r3", "1/12 runs", "ETA 12 min 34 s", "…")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_tuner_s_bar_stays_after_a_trial_with_a_long_configuration(width):
    from clusterbench.cli.tune_cmd import TrialBar

    console = Console(width=width, file=io.StringIO())
    bar = TrialBar("tune hpl", 600.0, console)
    _check_bar_line(_rendered(bar.progress, width), width, "tune hpl", "0/600 s budget")
    config = ("bcast=1rm,blas=openblas-pthread,depth=1,grid=hybrid-node 2x4,layout=mpi,nb=192,nbmin=4,ndiv=2,"
              "pfact=right,rfact=crout,swap=mix")
    bar.show(123.4, f"L0 23.45 Gflop/s {config}")  # the first trial: the bar used to vanish here
    _check_bar_line(_rendered(bar.progress, width), width, "tune hpl", "123/600 s budget", "L0 23.45 Gflop/s", "…")


def test_no_line_is_wider_than_the_terminal_even_when_it_is_narrow(isolated_db):
    """At 60 columns the long ids leave no room beside them: each id on its own line, the rest under it."""
    _store(isolated_db, LONG_IDS + TYPICAL_IDS)
    out = cli("results", env={"COLUMNS": "64"})
    assert out.returncode == 0, out.stderr
    _check_fits(out.stdout, 64)
    _check_ids_whole(out.stdout, LONG_IDS + TYPICAL_IDS)
