"""How the report's figures carry conclusions (issue 31, points 6, 10 and 1): flagged runs are drawn marked
and are never a best, tied bests are shown as ties, 3 or more repeats of one configuration are drawn as their
mean with its 95% interval (best-of stays an option), a configuration whose repeats spread is marked, and
values that do not state a key are kept apart, the caption saying so.

One store of real-format HPL files (tests/studies.py's generator, derived from this machine's HPL output),
imported with the real command line and tags as a user would, and the report built with `clusterbench
report`. The figures are checked from the CSV beside them and from the HTML.
"""

from __future__ import annotations

import csv
import math
import random
import re
import statistics
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from tests.conftest import cli
from tests.studies import HplLine, OutputFile, hpl_text, run_cli, write_files

from clusterbench.analysis.stats import DEFAULT_CV_WARN, t95

N, GRID = 13440, (1, 2)
RPEAK_NODE = 30.0
# folder -> (tags, [(NB, [(P, Q, Gflop/s)], truncated)]): one file per entry
FILES = {
    "openblas-1": (("nodes=1", "blas=openblas"), [(192, [(1, 2, r)], False) for r in (20.0, 20.2, 20.4)]),
    "openblas-2": (("nodes=2", "blas=openblas"), [(192, [(1, 2, r)], False) for r in (30.0, 40.0, 50.0)]),
    "blis-1": (("nodes=1", "blas=blis"), [(192, [(1, 2, 21.5)], False), (192, [(2, 1, 21.5)], False),
                                          (256, [(1, 2, 21.0)], False)]),
    "blis-2": (("nodes=2", "blas=blis"), [(192, [(1, 2, 35.0)], False), (192, [(1, 2, 45.0), (1, 2, 44.0)], True)]),
    "blis-unstated": (("blas=blis",), [(192, [(1, 2, 19.0)], False), (256, [(1, 2, 19.5)], False)]),
}


def _hpl_gflops(rate: float) -> float:
    """The Gflop/s HPL 2.3 prints for this rate (%.4e; the time rounded to 2 decimals, as the generator writes it)."""
    from clusterbench.bench.hpl.planner import hpl_flops

    seconds = round(hpl_flops(N) / (rate * 1e9), 2)
    return float(f"{hpl_flops(N) / seconds / 1e9:.4e}")


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("marks")
    db, rng, start = root / "marks.db", random.Random(31), datetime(2025, 4, 1, 9, 0, 0)
    for folder, (tags, files) in FILES.items():
        outputs = []
        for i, (nb, lines, truncated) in enumerate(files):
            text = hpl_text(N, nb, [HplLine(p, q, "WR11C2R4" if j == 0 else "WR11C2R2", r)
                                    for j, (p, q, r) in enumerate(lines)], start, rng,
                            truncate_after=2 if truncated else None)
            outputs.append(OutputFile(f"hpl-{folder}-{i}.out", text, {}))
            start += timedelta(hours=1)
        write_files(root / folder, outputs)
        run_cli(db, "import", "-q", str(root / folder), *[a for t in tags for a in ("--tag", t)])
    out = root / "report"
    result = cli("report", "--out", str(out), "--rpeak-node", str(RPEAK_NODE), env={"CLUSTERBENCH_DB": str(db)})
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def _csv(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _figure_html(out: Path, slug: str) -> str:
    html = (out / "report.html").read_text(encoding="utf-8")
    found = re.search(rf'<figure id="figure-{slug}".*?</figure>', html, re.S)
    assert found, f"no figure {slug} in the HTML"
    return found.group(0)


def _rows(out: Path, slug: str, series: str, x: float) -> list[dict]:
    rows = [r for r in _csv(out / f"{slug}.csv") if r["series"] == series and r["nodes"] == f"{x!r}"]
    assert rows, f"no row of {series} at {x} in {slug}.csv"
    return rows


def test_a_truncated_run_is_drawn_marked_in_the_legend_and_is_never_the_best(report):
    rows = _rows(report, "hpl-rmax-vs-nodes", "blis", 2.0)
    measured = [r for r in rows if r["kind"] == "measured"]
    flagged = [r for r in rows if r["kind"] == "flagged"]
    assert len(measured) == 1 and len(flagged) == 1
    # the truncated file's 45 Gflop/s beat the complete one's 35: drawn marked, the best is the complete run's
    assert float(flagged[0]["Rmax (Gflop/s)"]) == pytest.approx(_hpl_gflops(45.0))
    assert "truncated" in flagged[0]["flags"]
    assert float(measured[0]["Rmax (Gflop/s)"]) == pytest.approx(_hpl_gflops(35.0))
    assert measured[0]["flags"] == "" and flagged[0]["run_ids"] not in measured[0]["run_ids"].split(";")
    figure = _figure_html(report, "hpl-rmax-vs-nodes")
    assert "truncated (cut short): not counted" in figure  # its legend line, in the SVG's text
    assert "drawn apart with their own marker" in figure  # and the caption says so


def test_two_tied_bests_are_shown_as_a_tie(report):
    (best,) = [r for r in _rows(report, "hpl-rmax-vs-nodes", "blis", 1.0) if r["kind"] == "measured"]
    # grids 1x2 and 2x1 both printed 21.5 Gflop/s: two configurations, one value each, a tie
    assert float(best["Rmax (Gflop/s)"]) == pytest.approx(_hpl_gflops(21.5))
    tied = best["tied_with"].split(";")
    assert len(tied) == 1 and tied[0] and tied[0] not in best["run_ids"].split(";")
    figure = _figure_html(report, "hpl-rmax-vs-nodes")
    assert "tied best: other runs equal as printed" in figure and "A ringed point is a best tied" in figure
    # no tie where the best is alone
    (alone,) = [r for r in _rows(report, "hpl-rmax-vs-nodes", "openblas", 1.0) if r["kind"] == "measured"]
    assert alone["tied_with"] == ""


def test_three_repeats_are_drawn_as_their_mean_with_its_95_percent_interval(report):
    (point,) = [r for r in _rows(report, "hpl-rmax-vs-nodes", "openblas", 1.0) if r["kind"] == "measured"]
    values = [_hpl_gflops(r) for r in (20.0, 20.2, 20.4)]
    mean, half = statistics.mean(values), t95(2) * statistics.stdev(values) / math.sqrt(3)
    assert point["bar"] == "ci95" and point["n_values"] == "3" and point["repeats"] == "3"
    assert float(point["Rmax (Gflop/s)"]) == pytest.approx(mean)  # not the best repeat (20.4)
    assert float(point["y_min"]) == pytest.approx(mean - half) and float(point["y_max"]) == pytest.approx(mean + half)
    assert len(point["run_ids"].split(";")) == 3 and point["high_cv"] == ""
    assert float(point["cv"]) == pytest.approx(statistics.stdev(values) / mean)
    figure = _figure_html(report, "hpl-rmax-vs-nodes")
    assert "bar: 95% interval of a mean of 3+ repeats" in figure
    assert "3 or more repeats of one configuration compete as their mean, drawn with its 95% interval" in figure


def test_best_over_repeats_keeps_best_of_as_an_option(report, tmp_path):
    db = report.parent / "marks.db"
    out = tmp_path / "best-of"
    result = cli("report", "--out", str(out), "--rpeak-node", str(RPEAK_NODE), "--best-over", "repeats",
                 env={"CLUSTERBENCH_DB": str(db)})
    assert result.returncode == 0, result.stdout + result.stderr
    (point,) = [r for r in _rows(out, "hpl-rmax-vs-nodes", "openblas", 1.0) if r["kind"] == "measured"]
    assert float(point["Rmax (Gflop/s)"]) == pytest.approx(_hpl_gflops(20.4)) and point["bar"] == ""
    assert len(point["run_ids"].split(";")) == 1


def test_a_configuration_whose_repeats_spread_is_marked(report):
    (point,) = [r for r in _rows(report, "hpl-rmax-vs-nodes", "openblas", 2.0) if r["kind"] == "measured"]
    values = [_hpl_gflops(r) for r in (30.0, 40.0, 50.0)]
    assert float(point["cv"]) == pytest.approx(statistics.stdev(values) / statistics.mean(values))
    assert float(point["cv"]) > DEFAULT_CV_WARN and point["high_cv"] == "yes" and point["bar"] == "ci95"
    figure = _figure_html(report, "hpl-rmax-vs-nodes")
    assert f"repeats spread: CV above {DEFAULT_CV_WARN:.0%}" in figure and "A point in a square spreads" in figure


def test_unknown_and_known_node_counts_are_kept_apart_and_the_caption_says_so(report):
    # against NB: one panel per node count, the runs that state none in a panel of their own
    rows = [r for r in _csv(report / "hpl-rmax-vs-nb.csv") if r["kind"] == "measured"]
    panels = {r["panel"] for r in rows}
    assert {"1 node", "2 nodes", "node count not stated"} <= panels
    unstated = {float(r["block size NB"]): float(r["Rmax (Gflop/s)"]) for r in rows
                if r["panel"] == "node count not stated"}
    assert unstated == {192.0: pytest.approx(_hpl_gflops(19.0)), 256.0: pytest.approx(_hpl_gflops(19.5))}
    assert "Values that do not state the node count are kept apart" in _figure_html(report, "hpl-rmax-vs-nb")
    # against node count: they cannot be placed, are not pooled into a count, and are listed in the CSV
    by_nodes = _csv(report / "hpl-rmax-vs-nodes.csv")
    apart = [r for r in by_nodes if r["kind"] == "x not stated"]
    assert sorted(float(r["Rmax (Gflop/s)"]) for r in apart) == [pytest.approx(_hpl_gflops(19.0)),
                                                                pytest.approx(_hpl_gflops(19.5))]
    assert all(r["nodes"] == "" for r in apart)
    placed = [r for r in by_nodes if r["kind"] == "measured"]
    assert not {r["run_ids"] for r in apart} & {i for r in placed for i in r["run_ids"].split(";")}
    assert "whose node count is not stated are not drawn" in _figure_html(report, "hpl-rmax-vs-nodes")


def test_a_count_some_runs_state_and_others_do_not_is_never_combined():
    """STREAM against ranks: runs that state 1 or 4 threads and runs that do not are three lines, and the
    unknown ones get no workers count from a default of 1 thread."""
    import pandas as pd

    from clusterbench.analysis import shape
    from clusterbench.analysis.dataset import Dataset

    runs, records = {}, []
    for threads in (1, 4, None):
        for ranks in (1, 2):
            for repeat in range(3):
                rid = f"t{threads}-r{ranks}-{repeat}"
                params = {"ranks": ranks} | ({"threads": threads} if threads else {})
                runs[rid] = {"id": rid, "benchmark": "stream", "params": params, "tags": {}, "facts": {},
                             "node_count": 1, "campaign": "c", "status": "ok", "valid": 1}
                records.append({"run_id": rid, "benchmark": "stream", "name": "stream_triad", "unit": "MB/s",
                                "value": 1000.0 * ranks * (threads or 2) + repeat, "labels": {}, "valid": True,
                                "nodes": 1, "higher_is_better": True})
    data = Dataset(runs, pd.DataFrame(records))
    values = shape.frame(data, data.of("stream_triad"))
    assert values.loc[values["threads"].isna(), "workers"].isna().all()
    found = shape.infer(values, shape.Family(x=("ranks",), facets=False))
    assert "threads" in found.series and "threads" not in found.over
    drawing = shape.draw(values, found)
    labels = sorted(s.label for s in drawing.panels[0].series)
    assert labels == ["1 thread", "4 threads", "threads not stated"]
    assert "Values that do not state the threads are kept apart" in drawing.caption()
    unstated = next(s for s in drawing.panels[0].series if s.label == "threads not stated")
    assert [(p.y, p.bar, p.n) for p in unstated.points] == [(2001.0, "ci95", 3), (4001.0, "ci95", 3)]
