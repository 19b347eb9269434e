"""Issue 31, point 12: the conclusions drawn from stores that hold each way a conclusion can go wrong
(tests/conclusions_corpus.py), checked through what a user reads: the report's tables and the CSV behind its
figures, `results --stat`, `compare`, `history`, `import` and the exports, all with the real command line.

Every store is built once for the module (real files, real `clusterbench import`), and each report is built
once, so the module runs in well under a minute of CPU on this 2-core VM.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import sqlite3
from pathlib import Path

import pytest
from tests import conclusions_corpus as cc
from tests.conftest import cli

BUILDERS = {"host_groups": cc.host_groups, "unknown_nodes": cc.unknown_nodes, "unknown_threads": cc.unknown_threads,
            "hpcc_na": cc.hpcc_not_applicable, "blas": cc.blas_at_own_n, "tied": cc.tied_bests,
            "sweep": cc.export_sweep}
REPORTS = {"host_groups": (), "unknown_nodes": ("--rpeak-node", str(cc.NODE_RPEAK)), "unknown_threads": (),
           "hpcc_na": (), "blas": (), "tied": ()}


class Stores:
    """The corpora of the module and the folder of each one's report."""

    def __init__(self, root: Path, env: dict[str, str]):
        self.root, self.env = root, env
        self.corpora = {name: build(root) for name, build in BUILDERS.items()}
        self.reports: dict[str, Path] = {}
        for name, options in REPORTS.items():
            out = root / f"report-{name}"
            done = self.run(name, "report", "-o", str(out), *options)
            assert (out / "report.html").is_file(), done.stdout + done.stderr
            self.reports[name] = out

    def run(self, name: str, *args: str, code: int = 0):
        """The real command line against the store `name`; its exit code must be `code`."""
        done = cli("--db", str(self.corpora[name].db), *args, env=self.env)
        assert done.returncode == code, f"{args}: exit {done.returncode}\n{done.stdout}{done.stderr}"
        return done

    def json(self, name: str, *args: str):
        return json.loads(self.run(name, *args).stdout)

    def csv(self, name: str, file: str) -> list[dict[str, str]]:
        with (self.reports[name] / file).open(newline="") as f:
            return list(csv.DictReader(f))

    def run_ids(self, name: str, *select: str) -> set[str]:
        rows = self.json(name, "results", "--format", "json", *(("--select", ",".join(select)) if select else ()))
        return {r["run_id"] for r in rows}

    @functools.cached_property
    def host_group_runs(self) -> dict[str, dict[str, set[str]]]:
        """host group -> benchmark -> its run ids, as `results --select fact:job.host_group=G` exports them."""
        out: dict[str, dict[str, set[str]]] = {}
        for group in cc.HOST_GROUPS:
            rows = self.json("host_groups", "results", "--format", "json", "--select", f"fact:job.host_group={group}")
            for r in rows:
                out.setdefault(group, {}).setdefault(r["benchmark"], set()).add(r["run_id"])
        return out


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> Stores:
    root = tmp_path_factory.mktemp("conclusions")
    env = {"XDG_DATA_HOME": str(root / "xdg")}
    with pytest.MonkeyPatch.context() as mp:  # the corpus builders' own `import` calls see the same env
        mp.setenv("XDG_DATA_HOME", env["XDG_DATA_HOME"])
        return Stores(root, env)


def stored_runs(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT count(*) FROM runs").fetchone()[0]
    finally:
        con.close()


def ids(cell: str) -> set[str]:
    return {part.strip() for part in cell.replace(",", ";").split(";") if part.strip()}


# ---------------------------------------------------------------- host groups of one cluster, run in sequence

def test_host_groups_are_never_pooled_in_hpl_tables(stores):
    """Old code: one 'hpl, default' row averaging the fast and the slow host group as repeats."""
    by_group = {g: runs["hpl"] for g, runs in stores.host_group_runs.items()}
    assert all(len(runs) == cc.GROUP_JOBS for runs in by_group.values())
    best = stores.csv("host_groups", "hpl-best.csv")
    configurations = stores.csv("host_groups", "hpl-configurations.csv")
    assert len(best) == len(configurations) == len(cc.HOST_GROUPS)
    for group, (per_node, _, _) in cc.HOST_GROUPS.items():
        expected = per_node * cc.GROUP_NODES
        (row,) = [r for r in best if f"host_group={group}" in r["variant"]]
        assert ids(row["runs"]) <= by_group[group] and row["nodes"] == str(cc.GROUP_NODES)
        assert abs(float(row["Rmax (Gflop/s)"]) / expected - 1) < 0.02
        (config,) = [r for r in configurations if f"host_group={group}" in r["configuration"]]
        assert ids(config["runs"]) == by_group[group] and int(config["n"]) == cc.GROUP_JOBS
        assert abs(float(config["mean"]) / expected - 1) < 0.02 and float(config["CV (%)"]) < 2


def test_host_groups_are_two_lines_of_the_network_figures(stores):
    """Old code: one TCP line mixing ~100 MiB/s and ~900 MiB/s networks."""
    by_group = {g: runs["imb"] for g, runs in stores.host_group_runs.items()}
    rows = [r for r in stores.csv("host_groups", "network-bandwidth.csv") if r["kind"] == "measured"]
    series = {r["series"] for r in rows}
    assert len(series) == len(cc.HOST_GROUPS)
    for group, (_, bandwidth, _) in cc.HOST_GROUPS.items():
        (line,) = [s for s in series if f"host_group={group}" in s]
        mine = [r for r in rows if r["series"] == line]
        assert all(ids(r["run_ids"]) == by_group[group] for r in mine)
        largest = max(mine, key=lambda r: float(r["message size"]))
        mib_s = float(largest["bandwidth (MB/s)"]) * 1e6 / 2**20
        assert abs(mib_s / bandwidth - 1) < 0.15 and float(largest["cv"]) < 0.1
    table = stores.csv("host_groups", "network-latency-table.csv")
    assert sorted(r["series"] for r in table) == sorted(series)


def test_host_groups_in_sequence_raise_no_regression(stores):
    """Old code: 'REGRESSION -64%' where the slow group's jobs followed the fast group's."""
    for metric in ("hpl_gflops", "peak_bandwidth"):
        found = stores.json("host_groups", "history", "-m", metric, "--json")
        assert found["regressions"] == 0
        groups = found["groups"]
        assert sorted(g["configuration"]["host_group"] for g in groups) == sorted(cc.HOST_GROUPS)
        assert all(len(g["values"]) == cc.GROUP_JOBS for g in groups)
        text = stores.run("host_groups", "history", "-m", metric, "--fail-on-regression").stdout
        assert "REGRESSION" not in text and all(f"host_group={g}" in text for g in cc.HOST_GROUPS)


def test_host_groups_stat_rows(stores):
    rows = stores.json("host_groups", "results", "--stat", "n,mean,cv", "--metric", "hpl_gflops", "--format", "json")
    assert sorted(r["host_group"] for r in rows) == sorted(cc.HOST_GROUPS)
    assert all(r["n"] == cc.GROUP_JOBS and r["cv"] < 0.02 for r in rows)


# ---------------------------------------------------------------- unknown node counts, a truncated file

def test_unknown_node_count_is_not_stated_and_a_tag_fills_it(stores):
    """Old code: the plain file at 1 node, and `--tag nodes=8` ignored by the report."""
    untagged = stores.run_ids("unknown_nodes", "study=unknown-nodes") - stores.run_ids("unknown_nodes", "nodes=8")
    (tagged,) = stores.run_ids("unknown_nodes", "nodes=8")
    cli_1 = cli("--db", str(stores.corpora["unknown_nodes"].db), "results", "--select", "nodes=1", env=stores.env)
    assert cli_1.returncode == 2, "no run may be taken for a 1-node run"
    best = {r["nodes"]: r for r in stores.csv("unknown_nodes", "hpl-best.csv")}
    assert set(best) == {"not stated", "8"}
    assert ids(best["8"]["runs"]) == {tagged}
    assert float(best["8"]["% of Rpeak"]) == pytest.approx(100 * cc.PLAIN_GFLOPS / (8 * cc.NODE_RPEAK), rel=1e-3)
    assert best["not stated"]["% of Rpeak"] == "" and "node count not stated" in best["not stated"]["note"]
    assert ids(best["not stated"]["runs"]) <= untagged
    runs = {r["runs"]: r for r in stores.csv("unknown_nodes", "runs.csv")}
    assert runs[tagged]["nodes"] == "8"
    stat = stores.json("unknown_nodes", "results", "--stat", "n,mean", "--metric", "hpl_gflops", "--format", "json")
    counted = [r for r in stat if r["n"]]
    assert sorted((r["nodes"] is None, r["n"]) for r in counted) == [(False, 1), (True, 1)]
    assert all(r["mean"] == pytest.approx(cc.PLAIN_GFLOPS) for r in counted)


def test_truncated_file_is_flagged_marked_and_never_best(stores):
    """Old code: the truncated 8-rank run at 221% of Rpeak, plotted above the Rpeak line, unmarked."""
    rows = stores.json("unknown_nodes", "results", "--format", "json", "--metric", "hpl_gflops")
    truncated = {r["run_id"] for r in rows if "truncated" in r["flags"]}
    assert truncated and all(r["params"]["ranks"] == 8 for r in rows if r["run_id"] in truncated)
    best_runs = set().union(*(ids(r["runs"]) for r in stores.csv("unknown_nodes", "hpl-best.csv")))
    assert not best_runs & truncated
    assert max(float(r["Rmax (Gflop/s)"]) for r in stores.csv("unknown_nodes", "hpl-best.csv")) < cc.TRUNCATED_GFLOPS
    figure = stores.csv("unknown_nodes", "hpl-rmax-vs-nodes.csv")
    drawn = [r for r in figure if ids(r["run_ids"]) & truncated]
    assert drawn and all("truncated" in r["flags"] for r in drawn)
    assert not [r for r in figure if r["kind"] == "measured" and ids(r["run_ids"]) & truncated]
    assert all(r["nodes"] == "" for r in drawn), "a run of unknown node count is never placed at a node count"
    configs = [r for r in stores.csv("unknown_nodes", "hpl-configurations.csv") if ids(r["runs"]) & truncated]
    assert configs and all(r["mean"] == "" and "truncated" in r["flags"] for r in configs)
    percent = [r["% of Rpeak"] for r in stores.csv("unknown_nodes", "hpl-best.csv")]
    assert all(p == "" or float(p) <= 100 for p in percent)


# ---------------------------------------------------------------- unknown thread counts (HPCC)

def test_threads_stated_and_not_stated_are_kept_apart(stores):
    """Old code: 1-thread, 4-thread and unstated ranks averaged as one configuration."""
    stat = stores.json("unknown_threads", "results", "--stat", "n,mean", "--metric", "hpl_gflops", "--format", "json")
    two_ranks = [r for r in stat if r.get("q") == 2]
    assert sorted((r["threads"] is None, r["threads"] or 0) for r in two_ranks) == [(False, 1), (False, 4), (True, 0)]
    assert all(r["n"] == cc.THREAD_REPEATS for r in stat)
    with (stores.reports["unknown_threads"] / "hpcc-summary.csv").open(newline="") as f:
        header = next(csv.reader(f))
    assert sum("threads not stated" in h for h in header) == 1
    assert len(header) == 2 + 5  # metric, unit; 1 per node x (1, 4 threads); 2 per node x (1, 4, not stated)


def test_smp_efficiency_is_not_computed_for_unstated_threads(stores):
    """Old code: SMP efficiency comparing single-thread ranks with 4-thread ranks."""
    with (stores.reports["unknown_threads"] / "hpcc-smp-efficiency.csv").open(newline="") as f:
        table = list(csv.reader(f))
    header = table[0]
    assert len(header) == 3 and not any("not stated" in h for h in header)
    assert "4 threads" in header[2] and "threads" not in header[1]
    hpl = next(r for r in table if r[0] == "HPL")
    assert all(40 < float(v) <= 105 for v in hpl[1:])  # 2 ranks x ~44 Gflop/s against 1 rank's ~48
    markdown = (stores.reports["unknown_threads"] / "report.md").read_text()
    assert "SMP efficiency cannot be computed for 1 node x 2 per node x threads not stated" in markdown


# ---------------------------------------------------------------- HPCC's -1 (not applicable)

def test_hpcc_not_applicable_is_never_a_value(stores):
    """Old code: ping-pong latency '-1 +- 0 (n=24) us'."""
    summary = stores.csv("hpcc_na", "hpcc-summary.csv")
    cells = [v for r in summary for k, v in r.items() if k not in ("metric", "unit")]
    assert not any(c.strip().startswith("-1") for c in cells)
    one_process = next(k for k in summary[0] if k.startswith("1 node x 1 per node"))
    for row in summary:
        if "ping-pong" in row["metric"].lower() or "ring" in row["metric"].lower():
            assert row[one_process] == "", row
    latency = next(r for r in summary if r["metric"] == "Ping-pong latency, min")
    assert "(n=3," in latency[next(k for k in summary[0] if k.startswith("1 node x 2 per node"))]
    stat = stores.json("hpcc_na", "results", "--stat", "n,min,mean", "--metric", "MinPingPongLatency_usec",
                       "--format", "json")
    assert [r["n"] for r in stat] == [3] and stat[0]["min"] > 0


def test_hpcc_not_applicable_is_not_exported_as_a_valid_value(stores):
    rows = stores.json("hpcc_na", "results", "--format", "json", "--benchmark", "hpcc")
    pingpong = [r for r in rows if "PingPong" in r["metric"] or "Ring" in r["metric"]]
    assert pingpong and all(r["value"] > 0 for r in pingpong if r["metric_valid"])


# ---------------------------------------------------------------- two BLAS, each at its own N and NB

def test_compare_of_two_blas_at_their_own_n_is_refused_with_nearest_pairs(stores):
    """Old code: 'the two selections have no metric in common'."""
    for extra in ((), ("--json",)):
        done = stores.run("blas", "compare", "blas=openblas", "blas=blis", *extra, code=2)
        said = done.stdout + done.stderr
        assert "no metric in common" not in said and "Traceback" not in said
        assert "differ in more than blas" in said and "nearest pairs" in said and "differ in n, nb" in said
        for blas, (n, nb, _) in cc.BLAS_RUNS.items():
            assert f"n={n}, nb={nb}" in said, blas
    best = stores.json("blas", "compare", "blas=openblas", "blas=blis", "--match-on", "nodes", "--json")
    (row,) = [r for r in best["rows"] if r["metric"] == "hpl_gflops"]
    assert row["a"]["n"] == row["b"]["n"] == 1 and 1.0 < row["b"]["mean"] / row["a"]["mean"] < 1.06


def test_repeats_named_in_file_names_are_pooled_in_the_figure(stores):
    """Three repeats of each BLAS (the repeat number read from the name): one point per BLAS, their mean and 95%
    interval, as the configuration table already pools them (n=3)."""
    configurations = stores.csv("blas", "hpl-configurations.csv")
    assert sorted(int(r["n"]) for r in configurations) == [cc.BLAS_REPEATS] * len(cc.BLAS_RUNS)
    figure = [r for r in stores.csv("blas", "hpl-rmax-vs-nb.csv") if r["kind"] == "measured"]
    assert len(figure) == len(cc.BLAS_RUNS)
    assert all(r["panel"] == "" and r["repeats"] == str(cc.BLAS_REPEATS) and r["bar"] == "ci95" for r in figure)


# ---------------------------------------------------------------- tied bests

def test_tied_bests_are_one_row_and_point_naming_both_runs(stores):
    """Old code: two tied bests shown as one run."""
    rows = stores.json("tied", "results", "--format", "json", "--metric", "hpl_gflops")
    tied = {r["run_id"] for r in rows if r["value"] == pytest.approx(cc.TIED_GFLOPS, rel=1e-3)}
    assert len(tied) == 2 and len(rows) == 3
    (best,) = stores.csv("tied", "hpl-best.csv")
    assert best["tie"] == "tie of 2" and ids(best["runs"]) == tied and best["NB"] == str(cc.PLAIN_NB)
    figure = [r for r in stores.csv("tied", "hpl-rmax-vs-nb.csv") if r["kind"] == "measured"]
    (point,) = [r for r in figure if float(r["block size NB"]) == cc.PLAIN_NB]
    assert ids(point["run_ids"]) | ids(point["tied_with"]) == tied and ids(point["tied_with"])
    (other,) = [r for r in figure if float(r["block size NB"]) == cc.TIED_OTHER_NB]
    assert other["tied_with"] == "" and float(other["Rmax (Gflop/s)"]) < float(point["Rmax (Gflop/s)"])


# ---------------------------------------------------------------- a wrong name pattern

def test_wrong_name_pattern_is_reported_refused_with_strict_and_corrected(tmp_path):
    """Old code: mismatched names stored without a word; a corrected re-import stored nothing ('already stored')."""
    corpus = cc.wrong_pattern_files(tmp_path)
    env = {"CLUSTERBENCH_DB": str(corpus.db)}
    mismatched = sorted(Path(p).name for p, truth in corpus.truth.items() if not truth["matches"])
    strict = cli("import", str(corpus.folder), "--name-pattern", cc.PATTERN, "--strict", env=env)
    assert strict.returncode == 2 and "Traceback" not in strict.stderr
    assert "--strict: 2 output file(s) do not match" in strict.stderr and all(m in strict.stderr for m in mismatched)
    assert not corpus.db.exists() or stored_runs(corpus.db) == 0
    wrong = "HPL.out.{nodes}_node_{n}_{nb}.{mpi}"  # reads the BLAS as the MPI
    first = cli("import", str(corpus.folder), "--name-pattern", wrong, env=env)
    assert first.returncode == 0 and "2 output file(s) do not match" in first.stdout
    assert all(m in first.stdout for m in mismatched)
    assert stored_runs(corpus.db) == len(corpus.truth)
    again = cli("import", str(corpus.folder), "--name-pattern", cc.PATTERN, env=env)
    assert again.returncode == 0 and "updated" in again.stdout, again.stdout
    assert stored_runs(corpus.db) == len(corpus.truth)
    exported = json.loads(cli("results", "--format", "json", "--metric", "hpl_gflops", env=env).stdout)
    params = sorted(((r["params"].get("nodes"), r["params"].get("blas"), r["params"].get("mpi")) for r in exported),
                    key=str)
    assert params == [(1, "openblas", None), (2, "blis", None), (None, None, None), (None, None, None)]


# ---------------------------------------------------------------- exports

@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_json_export_holds_every_run(stores, name):
    """Old code: `results --format csv|json` exported the newest 50 runs, without a word."""
    assert len(stores.run_ids(name)) == stored_runs(stores.corpora[name].db)


def test_table_says_what_it_leaves_out_and_exports_do_not(stores):
    runs = stored_runs(stores.corpora["sweep"].db)
    assert runs == len(cc.SWEEP_VARIANTS) > 50
    table = stores.run("sweep", "results").stdout
    assert f"50 of {runs} runs shown; --limit 0 for all" in table
    assert len(stores.run_ids("sweep")) == runs
    exported = stores.run("sweep", "results", "--format", "csv").stdout
    assert len({r["run_id"] for r in csv.DictReader(io.StringIO(exported))}) == runs
