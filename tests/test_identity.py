"""One definition of "the same configuration" (analysis/identity.py), as the dataset and `results --stat` use it.

Issue 31, points 1 and 2: an imported run whose file states no node count has an unknown node
count (never 1), a tag given at import fills what the file does not state, and `results --stat`
keeps unlike runs apart (two BLAS, known and unknown thread counts, 1 core against 1 node) instead
of pooling them as repeats. Every store here is made by the real `clusterbench import` from the
real HPL outputs of tests/fixtures (copies that differ only by trailing blank lines are other
files to the importer: the same run measured again).
"""

from __future__ import annotations

import math
import os

import pytest
from tests.conftest import cli, cli_json, fixture

from clusterbench.analysis.dataset import load
from clusterbench.analysis.identity import configuration_ids, known_node_count
from clusterbench.analysis.plausibility import NODE_COUNT_UNKNOWN, percent_of_peak
from clusterbench.analysis.select import Selection, node_count, parse_selection, select_runs
from clusterbench.store.db import Store

SWEEP = "outputs/this-machine/hpl-nbsweep-N13440-1x2.log"  # 7 lines, NB 64..256, 2 ranks, no node count
HYBRID = "outputs/this-machine/hpl-N13440-1x1-omp2-bindnone.log"  # 4 lines, 1 rank x 2 threads (not stated)
RPEAK_VM = 78.24  # this VM's Rpeak per node: 2 cores x 2.445 GHz x 16 flop/cycle (AVX2 FMA), fixtures README


def _import(path, *tags: str) -> None:
    args = [a for t in tags for a in ("--tag", t)]
    out = cli("import", str(path), "-q", *args)
    assert out.returncode == 0, out.stdout + out.stderr


def _copy(tmp_path, relpath: str, name: str, blank_lines: int = 0):
    """The fixture's bytes under another name, with `blank_lines` more newlines: another file, same run."""
    target = tmp_path / name
    target.write_bytes(fixture(relpath).read_bytes() + b"\n" * blank_lines)
    return target


def _dataset():
    with Store(os.environ["CLUSTERBENCH_DB"], read_only=True) as store:
        return load(store, Selection(), {"hpl_gflops"})


def test_imported_hpl_without_node_count_is_unknown_not_one():
    _import(fixture(SWEEP))
    data = _dataset()
    assert len(data.runs) == 7
    for run in data.runs.values():
        assert known_node_count(run) is None and node_count(run) is None and run["node_count"] is None
        pct, why = percent_of_peak(run, 83.991, RPEAK_VM)
        assert pct is None and why == NODE_COUNT_UNKNOWN  # no % of Rpeak without a node count
    assert data.run_keys()["nodes"].isna().all()
    assert data.metrics["nodes"].isna().all() and len(data.metrics) == 7
    assert "nodes" not in data.identity().columns  # unknown: absent, not 1
    with Store(os.environ["CLUSTERBENCH_DB"], read_only=True) as store:  # `nodes=1` must not find them
        assert select_runs(store, parse_selection(["nodes=1"], store)) == []


def test_tag_given_at_import_fills_node_count_and_threads(tmp_path):
    _import(fixture(SWEEP), "nodes=8")
    _import(_copy(tmp_path, HYBRID, "hybrid.log"), "threads=2", "blas=openblas")
    data = _dataset()
    keys = data.run_keys()
    sweep = [rid for rid, run in data.runs.items() if run["params"].get("p") == 1 and run["params"].get("q") == 2]
    hybrid = [rid for rid in data.runs if rid not in sweep]
    assert len(sweep) == 7 and len(hybrid) == 4
    assert (keys.loc[sweep, "nodes"] == 8).all() and all(data.runs[r]["node_count"] == 8 for r in sweep)
    assert (data.identity().loc[sweep, "nodes"] == 8).all()
    assert (keys.loc[hybrid, "threads"] == 2).all() and (keys.loc[hybrid, "blas"] == "openblas").all()
    assert keys.loc[sweep, "threads"].isna().all()  # not stated by the sweep: unknown, not 1
    pct, _why = percent_of_peak(data.runs[sweep[0]], 83.991, RPEAK_VM)
    assert pct is not None and 10 < pct < 20  # 83.99 of 8 x 78.24 Gflop/s


def test_known_and_unknown_threads_are_different_configurations(tmp_path):
    _import(_copy(tmp_path, HYBRID, "a.log"), "threads=2")
    _import(_copy(tmp_path, HYBRID, "b.log", 1), "threads=2")
    _import(_copy(tmp_path, HYBRID, "c.log", 2))
    data = _dataset()
    ids = configuration_ids(data.identity())
    frame = data.identity().assign(group=ids)
    for _nb, rows in frame.groupby("nb"):
        stated = rows[rows["threads"].notna()]
        unstated = rows[rows["threads"].isna()]
        assert len(stated) == 2 and stated["group"].nunique() == 1  # the two copies tagged threads=2: repeats
        assert len(unstated) == 1 and unstated["group"].iloc[0] not in set(stated["group"])


def _stat_rows(*extra: str) -> list[dict]:
    return cli_json("results", "--metric", "hpl_gflops", "--stat", "n,mean,cv", "--format", "json", *extra)


def test_results_stat_keeps_two_blas_and_unknown_threads_apart(tmp_path):
    _import(_copy(tmp_path, HYBRID, "openblas-1.log"), "blas=openblas", "threads=2")
    _import(_copy(tmp_path, HYBRID, "openblas-2.log", 1), "blas=openblas", "threads=2")
    _import(_copy(tmp_path, HYBRID, "blis.log", 2), "blas=blis", "threads=2")
    _import(_copy(tmp_path, HYBRID, "unknown.log", 3), "blas=openblas")
    rows = _stat_rows()
    at_224 = [r for r in rows if r["nb"] == 224]
    by_config = {(r["blas"], r["threads"]): r for r in at_224}
    assert set(by_config) == {("openblas", 2), ("blis", 2), ("openblas", None)}  # JSON: null for a key not stated
    assert by_config[("openblas", 2)]["n"] == 2  # the true repeats are pooled
    assert by_config[("blis", 2)]["n"] == 1 and by_config[("openblas", None)]["n"] == 1
    assert by_config[("openblas", 2)]["cv"] == pytest.approx(0.0, abs=1e-12)  # the same file twice
    assert all(r["n"] >= 1 and r["mean"] > 0 for r in rows)
    assert len(rows) == 3 * 4  # 3 configurations x the file's 4 block sizes, nothing pooled across NB


def test_results_stat_keeps_one_core_and_one_node_apart(tmp_path):
    """The issue's "Rmax per configuration" row that pooled a 1-core and a 1-node study (mean 10.37 ± 5.69)."""
    _import(_copy(tmp_path, SWEEP, "core.log"), "scale=1core")
    _import(_copy(tmp_path, SWEEP, "node.log", 1), "scale=1node", "nodes=1")
    rows = [r for r in _stat_rows() if r["nb"] == 64]
    assert len(rows) == 2 and {r["n"] for r in rows} == {1}
    assert {(r["tag:scale"], r["nodes"]) for r in rows} == {("1core", None), ("1node", 1)}
    assert all(not (isinstance(r["cv"], float) and math.isfinite(r["cv"])) for r in rows)  # n=1: no spread


def test_the_tuner_pools_only_same_configuration_runs_that_count(tmp_path):
    """`run` reuses the best configuration "measured twice": two runs of ONE configuration, both counted.
    Values are lines of the fixtures' HPL files (NB 224: 83.991 and 83.324 with 2 ranks, 87.333 hybrid)."""
    from clusterbench.bench.metrics import Metric
    from clusterbench.store.records import RunRecord
    from clusterbench.tune.known import best_known

    runs = [("o1", {"blas": "openblas"}, {}, 83.991, None), ("o2", {"blas": "openblas"}, {}, 83.324, None),
            ("b1", {"blas": "blis", "threads": 2}, {}, 87.333, None),  # threads stated...
            ("b2", {"blas": "blis"}, {}, 87.333, None),  # ...and not: another configuration
            ("b3", {"blas": "blis", "threads": 2}, {}, 87.333, "file ends before HPL's 'Finished N tests' summary")]
    with Store(tmp_path / "known.db") as store:
        store.save_system("sys1", "node-a", {}, {})
        for i, (rid, extra, tags, value, reason) in enumerate(runs):
            params = {"n": 13440, "nb": 224, "p": 1, "q": 2} | extra
            store.begin_run(RunRecord(rid, "hpl", params, tags=tags, system_id="sys1"))
            store.finish_run(rid, "ok", True, reason, 0, 1.0 + i, [Metric("hpl_gflops", value, "Gflop/s")])
        known = best_known(store, "sys1")
    assert known is not None and known.params["blas"] == "openblas" and known.samples == 2
    assert abs(known.gflops - (83.991 + 83.324) / 2) < 1e-9
