"""The report's section tables pool only like runs (issue 31): a configuration is every key a run states
(analysis/identity.py), a flagged run is marked and never averaged nor a best, ties are ties, and every
table of repeats shows n and CV.

Each store is built from real-format files (the generators of tests/studies.py rewrite this machine's
HPL and HPCC outputs and IBM LSF job reports around IMB) through the real `clusterbench import`, and the
report is the real report build. What a table must hold is known from what each file was written with.
"""

from __future__ import annotations

import random
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from tests.conftest import query
from tests.studies import (
    HplLine,
    LsfJob,
    hpcc_text,
    hpl_text,
    imb_text,
    lsf_report,
    pingpong_rows,
    platform_mpi_protocols,
    run_cli,
)

from clusterbench.analysis.select import Selection
from clusterbench.report.build import build
from clusterbench.report.model import Options, Report, Table
from clusterbench.store.db import Store

START = datetime(2024, 5, 6, 10, 0, 0)


def _report(db: Path, options: Options | None = None) -> Report:
    with Store(db, read_only=True) as store:
        return build(store, Selection(), options or Options())


def _table(report: Report, slug: str) -> Table:
    found = [t for s in report.sections for t in s.tables if t.slug == slug]
    assert found, f"no table {slug}: {[t.slug for s in report.sections for t in s.tables]}"
    return found[0]


def _rows(table: Table) -> list[dict]:
    return [dict(zip(table.columns, row, strict=True)) for row in table.rows]


def _paragraphs(report: Report, slug: str) -> str:
    return " ".join(p for s in report.sections if s.slug == slug for p in s.paragraphs)


def _source_ids(db: Path) -> dict[str, list[str]]:
    """file name -> ids of the runs imported from it."""
    out: dict[str, list[str]] = {}
    for run_id, facts in query(db, "SELECT id, facts FROM runs"):
        match = re.search(r'"source_file":\s*"([^"]+)"', facts)
        out.setdefault(Path(match.group(1)).name if match else run_id, []).append(run_id)
    return out


def _first(db: Path, run_ids: list[str]) -> str:
    """The run of a file's first result line (a truncated file's valid one)."""
    (run_id,) = [i for i in run_ids if query(db, "SELECT valid FROM runs WHERE id = ?", i)[0][0]]
    return run_id


def _hpl(folder: Path, name: str, gflops: float, *, n: int = 10000, nb: int = 128, p: int = 1, q: int = 1,
         seed: int = 0, truncate: bool = False, hours: int = 0) -> Path:
    """An HPL 2.3 output of one result line (this machine's layout), written to folder/name; `truncate`:
    a second line follows and the file ends before its residual check (a job killed there), so the first
    result is valid but its run is flagged truncated."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [HplLine(p, q, "WR11C2R4", gflops)] + ([HplLine(p, q, "WR11C2L4", gflops * 0.9)] if truncate else [])
    text = hpl_text(n, nb, lines, START + timedelta(hours=hours + seed), random.Random(seed),
                    truncate_after=2 if truncate else None)
    path = folder / name
    path.write_text(text)
    return path


# ---------------------------------------------------------------- HPL: configurations, bests, flags, ties


@pytest.fixture(scope="module")
def hpl_store(tmp_path_factory) -> tuple[Path, dict[str, list[str]]]:
    """1 core (1 thread) and 1 node (4 threads) at the same N, NB and grid: the file does not say which,
    the tag given at import does. Three repeats of each; on 2 nodes a tie of two runs and a truncated run
    that would win if it counted; a spread configuration (CV about 20%)."""
    root = tmp_path_factory.mktemp("hpl")
    db = root / "hpl.db"
    core, node, two, spread = root / "core", root / "node", root / "two", root / "spread"
    for i, rate in enumerate((2.61, 2.66, 2.58)):
        _hpl(core, f"core-{i}.out", rate, seed=i)
    for i, rate in enumerate((10.2, 10.4, 10.1)):
        _hpl(node, f"node-{i}.out", rate, seed=10 + i)
    _hpl(two, "two-a.out", 19.5, n=14000, p=1, q=2, seed=20)
    _hpl(two, "two-b.out", 19.5, n=14000, p=1, q=2, seed=21)  # the same Gflops: a tie
    _hpl(two, "two-c.out", 18.1, n=14000, p=1, q=2, seed=22)
    _hpl(two, "two-cut.out", 24.0, n=14000, p=1, q=2, seed=23, truncate=True)  # cut short: never a best
    for i, rate in enumerate((5.0, 7.0, 4.0)):
        _hpl(spread, f"spread-{i}.out", rate, n=12000, nb=192, seed=30 + i)
    run_cli(db, "import", "-q", str(core), "--tag", "nodes=1", "--tag", "threads=1", "--tag", "blas=openblas")
    run_cli(db, "import", "-q", str(node), "--tag", "nodes=1", "--tag", "threads=4", "--tag", "blas=openblas")
    run_cli(db, "import", "-q", str(two), "--tag", "nodes=2", "--tag", "threads=4", "--tag", "blas=openblas")
    run_cli(db, "import", "-q", str(spread), "--tag", "nodes=1", "--tag", "threads=4", "--tag", "blas=openblas")
    return db, _source_ids(db)


def test_one_core_and_one_node_runs_are_never_one_row(hpl_store):
    db, ids = hpl_store
    core = {i for k, v in ids.items() if k.startswith("core-") for i in v}
    node = {i for k, v in ids.items() if k.startswith("node-") for i in v}
    rows = _rows(_table(_report(db), "hpl-configurations"))
    mixed = [r for r in rows if set(r["runs"]) & core and set(r["runs"]) & node]
    assert not mixed, f"1-core and 1-node runs pooled in one row: {mixed}"
    (core_row,) = [r for r in rows if set(r["runs"]) == core]
    (node_row,) = [r for r in rows if set(r["runs"]) == node]
    assert core_row["n"] == node_row["n"] == 3
    assert core_row["mean"] == pytest.approx(sum((2.61, 2.66, 2.58)) / 3, rel=0.01)
    assert node_row["mean"] == pytest.approx(sum((10.2, 10.4, 10.1)) / 3, rel=0.01)
    assert "threads=1" in core_row["configuration"] and "threads=4" in node_row["configuration"]


def test_every_configuration_shows_n_and_cv_and_a_high_cv_is_marked(hpl_store):
    db, ids = hpl_store
    table = _table(_report(db), "hpl-configurations")
    assert {"n", "CV (%)", "spread"} <= set(table.columns)
    rows = _rows(table)
    spread = {i for k, v in ids.items() if k.startswith("spread-") for i in v}
    (row,) = [r for r in rows if set(r["runs"]) == spread]
    values = (5.0, 7.0, 4.0)
    mean = sum(values) / 3
    std = (sum((v - mean) ** 2 for v in values) / 2) ** 0.5
    assert row["n"] == 3 and row["CV (%)"] == pytest.approx(100 * std / mean, rel=0.02)
    assert row["spread"] == "high CV"
    node = {i for k, v in ids.items() if k.startswith("node-") for i in v}
    (calm,) = [r for r in rows if set(r["runs"]) == node]
    assert 0 < calm["CV (%)"] < 5 and calm["spread"] == ""


def test_a_truncated_run_is_marked_never_averaged_and_never_the_best(hpl_store):
    db, ids = hpl_store
    cut = _first(db, ids["two-cut.out"])
    report = _report(db)
    rows = _rows(_table(report, "hpl-configurations"))
    with_cut = [r for r in rows if cut in r["runs"]]
    assert with_cut and all(r["runs"] == [cut] and r["mean"] is None and "truncated" in r["flags"]
                            for r in with_cut), with_cut
    best = _rows(_table(report, "hpl-best"))
    assert all(cut not in r["runs"] for r in best), best
    invalid = _rows(_table(report, "hpl-invalid"))
    assert any(r["runs"] == [cut] and "truncated" in r["flags"] for r in invalid), invalid


def test_tied_bests_are_shown_as_a_tie(hpl_store):
    db, ids = hpl_store
    tied = sorted(ids["two-a.out"] + ids["two-b.out"])
    best = [r for r in _rows(_table(_report(db), "hpl-best")) if r["nodes"] == 2]
    assert len(best) == 1, best
    (row,) = best
    assert sorted(row["runs"]) == tied and row["tie"] == "tie of 2"
    assert row["Rmax (Gflop/s)"] == pytest.approx(19.5, rel=0.01)


def test_percent_of_rpeak_needs_a_known_node_count_and_an_impossible_value_is_no_best(tmp_path):
    """A run whose file states no node count has no % of Rpeak (it is not put at 1 node); a value above
    100% of Rpeak is impossible and never a best."""
    db = tmp_path / "p.db"
    _hpl(tmp_path / "unknown", "u.out", 60.0, n=20000, p=2, q=4, seed=1)
    _hpl(tmp_path / "known", "k-ok.out", 30.0, n=20000, p=2, q=4, seed=2)
    _hpl(tmp_path / "known", "k-high.out", 150.0, n=20000, p=2, q=4, seed=3)  # 150 of a 48 Gflop/s node
    run_cli(db, "import", "-q", str(tmp_path / "unknown"))
    run_cli(db, "import", "-q", str(tmp_path / "known"), "--tag", "nodes=1")
    ids = _source_ids(db)
    best = _rows(_table(_report(db, Options(rpeak_node_gflops=48.0)), "hpl-best"))
    unknown = [r for r in best if ids["u.out"][0] in r["runs"]]
    assert unknown and unknown[0]["nodes"] == "not stated" and unknown[0]["% of Rpeak"] is None
    assert unknown[0]["note"] == "node count not stated"
    one = [r for r in best if r["nodes"] == 1]
    assert len(one) == 1 and one[0]["runs"] == ids["k-ok.out"], one
    assert one[0]["% of Rpeak"] == pytest.approx(100 * 30.0 / 48.0, rel=0.01)


# ---------------------------------------------------------------- LSF host groups: never averaged


def _lsf_pingpong(job_id: int, group: str, bandwidth: float, rng: random.Random, start: datetime) -> str:
    names = [(f"{group}-n{job_id % 100:02d}a.example", 1), (f"{group}-n{job_id % 100:02d}b.example", 1)]
    binary = "/home/bench01/imb/src/IMB-MPI1"
    output = imb_text(binary, pingpong_rows(60.0, bandwidth, rng), start + timedelta(seconds=9))
    job = LsfJob(job_id, "PingPong", names, ["-x", "-n 2", '-R "span[ptile=1]"', "-J PingPong", "-W 0:45",
                                             f'-m "{group}"'],
                 [f"mpirun -lsf -prot -TCP {binary} -iter 1000 -time 200 -msglog 0:24 -iter_policy off PingPong"],
                 platform_mpi_protocols(names, "TCP") + output, start, 1200, cluster="scd")
    return lsf_report(job)


@pytest.fixture(scope="module")
def lsf_store(tmp_path_factory) -> tuple[Path, dict[str, list[str]]]:
    """IMB PingPong over TCP in two host groups of one LSF cluster, run one after the other: ~100 MiB/s
    in one, ~900 MiB/s in the other (different hardware), three jobs each."""
    root = tmp_path_factory.mktemp("lsf")
    db, folder = root / "lsf.db", root / "jobs"
    folder.mkdir()
    rng, start = random.Random(31), START
    for i, (group, bandwidth) in enumerate([("old10", 100.0)] * 3 + [("new20", 900.0)] * 3):
        (folder / f"{group}-{7100 + i}.out").write_text(_lsf_pingpong(7100 + i, group, bandwidth, rng, start))
        start += timedelta(hours=2)
    run_cli(db, "import", "-q", str(folder), "--tag", "study=hostgroups")
    return db, _source_ids(db)


def test_host_groups_of_one_cluster_are_never_averaged(lsf_store):
    db, ids = lsf_store
    groups = {g: {i for k, v in ids.items() if k.startswith(g) for i in v} for g in ("old10", "new20")}
    report = _report(db)
    for slug in ("network-bandwidth-table", "network-latency-table"):
        rows = _rows(_table(report, slug))
        assert all(not (set(r["runs"]) & groups["old10"] and set(r["runs"]) & groups["new20"]) for r in rows), rows
        assert {frozenset(r["runs"]) for r in rows} >= {frozenset(g) for g in groups.values()}
        assert all(re.search(r"n=3, CV \d", r["largest size"]) for r in rows), rows
    figure = next(f for s in report.sections for f in s.figures if f.slug == "network-bandwidth")
    for panel in figure.all_panels():
        for series in panel.series:
            runs = {r for p in series.points for r in p.runs}
            assert not (runs & groups["old10"] and runs & groups["new20"]), series.label


# ---------------------------------------------------------------- HPCC: BLAS and NB apart, -1 absent, SMP


def _hpcc_file(folder: Path, name: str, nodes: int, ppn: int, rng: random.Random, nb: int = 224) -> Path:
    text = hpcc_text(nodes, ppn, rng)
    if nb != 224:  # the HPL part's block size, as HPCC echoes it and prints it on the result line
        text = text.replace("NB     :     224 ", f"NB     : {nb:7d} ").replace("HPL_NB=224", f"HPL_NB={nb}")
        text = re.sub(r"^(WR11C2R4\s+\d+\s+)224(\s)", lambda m: f"{m.group(1)}{nb:>3}{m.group(2)}", text, flags=re.M)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def hpcc_store(tmp_path_factory) -> tuple[Path, dict[str, list[str]]]:
    """1 node: 1 and 2 processes, two BLAS (tagged at import), two NB for one BLAS; no thread count.
    (HPCC's -1: one process has no pair to time, so the 1-per-node files keep HPCC's -1 latencies.)"""
    root = tmp_path_factory.mktemp("hpcc")
    db = root / "hpcc.db"
    rng = random.Random(31)
    for blas in ("openblas", "mkl"):
        for ppn in (1, 2):
            for r in range(2):
                _hpcc_file(root / blas, f"{blas}-{ppn}ppn-r{r}.txt", 1, ppn, rng)
    for r in range(2):
        _hpcc_file(root / "nb", f"openblas-nb192-r{r}.txt", 1, 2, rng, nb=192)
    for blas in ("openblas", "mkl"):
        run_cli(db, "import", "-q", str(root / blas), "--tag", f"blas={blas}", "--tag", "nodes=1")
    run_cli(db, "import", "-q", str(root / "nb"), "--tag", "blas=openblas", "--tag", "nodes=1")
    return db, _source_ids(db)


def _columns_of(table: Table) -> dict[str, list[str]]:
    runs = next(row for row in table.rows if row[0] == "runs")
    return dict(zip(table.columns[2:], runs[2:], strict=True))


def test_hpcc_two_blas_and_two_nb_are_not_pooled(hpcc_store):
    db, ids = hpcc_store
    table = _table(_report(db), "hpcc-summary")
    columns = _columns_of(table)
    blas_of = {i: k.split("-")[0] for k, v in ids.items() for i in v}
    nb192 = {i for k, v in ids.items() if "nb192" in k for i in v}
    for label, runs in columns.items():
        assert len({blas_of[r] for r in runs}) == 1, f"{label} pools two BLAS: {runs}"
        assert not (set(runs) & nb192) or set(runs) == nb192, f"{label} mixes NB 192 and 224: {runs}"
        assert len(runs) == 2, (label, runs)
    assert len(columns) == 5
    hpl = next(row for row in table.rows if row[0] == "HPL")
    assert all(cell is None or re.search(r"\(n=2, CV \d", cell) for cell in hpl[2:]), hpl


def test_hpcc_not_applicable_minus_one_is_never_shown(hpcc_store):
    db, ids = hpcc_store
    table = _table(_report(db), "hpcc-summary")
    alone = {i for k, v in ids.items() if "-1ppn-" in k for i in v}
    columns = _columns_of(table)
    one_ppn = [j for j, label in enumerate(table.columns) if label in columns and set(columns[label]) <= alone]
    assert one_ppn, columns
    latency = [row for row in table.rows if "atency" in str(row[0])]
    assert latency, [row[0] for row in table.rows]
    for row in table.rows[:-1]:
        for cell in row[2:]:
            assert cell is None or not str(cell).startswith("-1"), (row[0], cell)
    for row in latency:
        assert all(row[j] is None for j in one_ppn), row  # one process: no pair, HPCC's -1, absent


def test_hpcc_smp_efficiency_is_refused_when_threads_are_not_stated(hpcc_store, tmp_path):
    db, _ids = hpcc_store
    report = _report(db)
    slugs = [t.slug for s in report.sections for t in s.tables]
    assert "hpcc-smp-efficiency" not in slugs
    assert "SMP efficiency cannot be computed" in _paragraphs(report, "hpcc")
    # the same files with the thread count stated: computed
    stated = tmp_path / "stated.db"
    rng = random.Random(31)
    for ppn in (1, 2):
        for r in range(2):
            _hpcc_file(tmp_path / "t", f"t-{ppn}ppn-r{r}.txt", 1, ppn, rng)
    run_cli(stated, "import", "-q", str(tmp_path / "t"), "--tag", "threads=1", "--tag", "nodes=1")
    smp = _table(_report(stated), "hpcc-smp-efficiency")
    assert len(smp.columns) == 2 and any(row[0] == "HPL" and row[1] for row in smp.rows)


# ---------------------------------------------------------------- the runs table


def test_runs_table_shows_unknown_node_counts_and_flags_with_reasons(hpl_store, tmp_path):
    db, ids = hpl_store
    report = _report(db)
    rows = {r["runs"][0]: r for r in _rows(report.runs)}
    cut = _first(db, ids["two-cut.out"])
    assert "truncated" in rows[cut]["flags"] and "notes" in report.runs.columns
    assert rows[ids["core-0.out"][0]]["nodes"] == 1
    bare = tmp_path / "bare.db"
    _hpl(tmp_path / "bare", "bare.out", 9.0, seed=5)
    run_cli(bare, "import", "-q", str(tmp_path / "bare"))
    (row,) = _rows(_report(bare).runs)
    assert row["nodes"] == "not stated"
