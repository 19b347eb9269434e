"""clusterbench's own C kernels: build cache, real runs, placements, refusals, a new plugin."""

import json
import os
import re
import shutil
import sqlite3
import sys

import pytest
from tests.conftest import ROOT, cli, cli_json

from clusterbench.native import build as native


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """A fresh build cache per test, so 'compiles on first use' is really the first use."""
    path = tmp_path / "native-cache"
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(path))
    return path


def test_build_cache_compiles_once_and_rebuilds_on_any_change(tmp_path, monkeypatch, cache):
    first = native.build("stream", mpi=False, openmp=True)
    assert first.rebuilt and first.binary.is_file() and str(first.binary).startswith(str(cache))
    again = native.build("stream", mpi=False, openmp=True)
    assert not again.rebuilt and again.binary == first.binary
    other_flags = native.build("stream", mpi=False, openmp=True, cflags=["-O2"])
    assert other_flags.rebuilt and other_flags.key != first.key
    with_mpi = native.build("stream", mpi=True, openmp=True, defines=("USE_MPI",))
    assert with_mpi.rebuilt and with_mpi.key not in (first.key, other_flags.key)
    # A touched source (same name, one more comment) is a new build, and so is a touched header.
    folder = tmp_path / "src"
    shutil.copytree(native.source_path("stream").parent, folder)
    copy = folder / "stream.c"
    copy.write_text(copy.read_text() + "\n/* touched */\n")
    monkeypatch.setattr(native, "source_path", lambda kernel: copy)
    touched = native.build("stream", mpi=False, openmp=True)
    assert touched.rebuilt and touched.key != first.key
    header = folder / "cb_common.h"
    header.write_text(header.read_text() + "\n/* touched */\n")
    header_touched = native.build("stream", mpi=False, openmp=True)
    assert header_touched.rebuilt and header_touched.key != touched.key
    assert json.loads((touched.binary.parent / "build.json").read_text())["flags"][-1] == "-fopenmp"


def test_compiler_errors_name_the_command(tmp_path, monkeypatch):
    broken = tmp_path / "stream.c"
    broken.write_text("int main(void) { return undefined_symbol; }\n")
    monkeypatch.setattr(native, "source_path", lambda kernel: broken)
    with pytest.raises(native.BuildError) as info:
        native.build("stream", mpi=False)
    assert "$ " in str(info.value) and str(broken) in str(info.value) and "undefined_symbol" in str(info.value)


def _run(*args):
    (result,) = cli_json("bench", *args, "--json")
    return result


def _metric(result, name, **labels):
    return [m["value"] for m in result["metrics"] if m["name"] == name
            and all(m["labels"].get(k) == v for k, v in labels.items())]


def test_stream_runs_valid_and_is_reused(cache):
    result = _run("stream", "-p", "n=2000000", "-p", "ntimes=5", "-p", "threads=2")
    assert result["status"] == "ok" and result["valid"]
    triad = _metric(result, "stream_triad")[0]
    assert 1_000 < triad < 1_000_000  # MB/s: a sane range for any machine of this decade
    assert result["facts"]["threads"] == 2 and result["facts"]["array_size"] == 2_000_000
    builds = list(cache.iterdir())
    _run("stream", "-p", "n=2000000", "-p", "ntimes=5", "-p", "threads=2")
    assert list(cache.iterdir()) == builds  # no recompilation


def test_stream_star_mode_reports_per_rank(cache):
    result = _run("stream", "-p", "n=1000000", "-p", "ntimes=4", "-p", "ranks=2", "-p", "threads=1")
    assert result["valid"]
    per_rank = dict(zip(("min", "avg", "max"), [_metric(result, "stream_triad_per_rank", stat=s)[0]
                                                 for s in ("min", "avg", "max")], strict=True))
    assert per_rank["min"] <= per_rank["avg"] <= per_rank["max"]
    # The aggregate is all ranks' bytes over the slowest rank's time in each repetition, so it is at most
    # ranks x the slowest rank's best (equal when the ranks keep pace: a quiet machine; below it when one rank
    # is starved, as with other work on the cores). 0.1% for the printed rounding.
    assert 0 < _metric(result, "stream_triad")[0] <= 2 * per_rank["min"] * 1.001


def test_pingpong_full_table_0_to_4_mib():
    result = _run("pingpong", "-p", "max_log2=22", "-p", "iter=200")
    assert result["valid"]
    sizes = [m["labels"]["bytes"] for m in result["metrics"] if m["name"] == "pingpong_time_us"]
    assert sizes == [0] + [2**k for k in range(23)]
    reps = {m["labels"]["bytes"]: m["labels"]["repetitions"] for m in result["metrics"]
            if m["name"] == "pingpong_time_us"}
    assert reps[0] == 200 and reps[4 * 2**20] == 10  # IMB's policy: 40 MiB per size at most
    latency = _metric(result, "latency_us")[0]
    assert 0 < latency < 1000
    one_mib = _metric(result, "pingpong_bandwidth", bytes=2**20)[0]
    assert one_mib > _metric(result, "pingpong_bandwidth", bytes=1)[0]


def test_pingpong_volume_caps_the_repetitions_of_large_sizes():
    """volume_mib=2: 1 MiB is sent twice, 2 MiB once; small sizes keep `iter` (the cluster run's pair phase
    uses this so a slow cable costs seconds, not IMB's 40 MiB per size)."""
    result = _run("pingpong", "-p", "min_log2=19", "-p", "max_log2=21", "-p", "iter=100", "-p", "volume_mib=2")
    reps = {m["labels"]["bytes"]: m["labels"]["repetitions"] for m in result["metrics"]
            if m["name"] == "pingpong_time_us"}
    assert reps == {0: 100, 2**19: 4, 2**20: 2, 2**21: 1}


def test_pingpong_time_floor_repeats_a_quick_size_more_up_to_iter():
    """min_time_s: with volume_mib=1, 1 MiB would be sent once, a few hundred microseconds here; a floor of
    50 ms repeats it more (as its timed warm-up says), never beyond `iter`. Without the floor: once."""
    def reps(*more: str) -> dict:
        result = _run("pingpong", "-p", "min_log2=20", "-p", "max_log2=20", "-p", "iter=400", "-p", "volume_mib=1",
                      *more)
        return {m["labels"]["bytes"]: m["labels"]["repetitions"] for m in result["metrics"]
                if m["name"] == "pingpong_time_us"}

    assert reps() == {0: 400, 2**20: 1}
    floored = reps("-p", "min_time_s=0.05")
    assert floored[0] == 400 and 1 < floored[2**20] <= 400, floored


def test_pingpong_policy_off_repeats_every_size_alike():
    result = _run("pingpong", "-p", "max_log2=12", "-p", "iter=50", "-p", "iter_policy=off")
    assert {m["labels"]["repetitions"] for m in result["metrics"] if m["name"] == "pingpong_time_us"} == {50}


@pytest.mark.skipif(not os.path.exists("/usr/lib/x86_64-linux-gnu/blis-openmp/libblas.so.3"), reason="needs BLIS")
def test_dgemm_checked_and_blas_recorded():
    serial = _run("dgemm", "-p", "n=600", "-p", "blas=openblas-serial")
    blis = _run("dgemm", "-p", "n=600", "-p", "blas=blis-openmp")
    for result, variant in ((serial, "openblas-serial"), (blis, "blis-openmp")):
        assert result["valid"] and 0.1 < _metric(result, "dgemm_gflops")[0] < 10_000
        assert result["facts"]["blas_loaded_variant"] == variant
        assert result["facts"]["max_relative_error"] < 1e-12


def _placement(bind: str):
    result = _run("affinity", "-p", "ranks=2", "-p", "threads=1", "-p", f"bind_to={bind}")
    assert result["valid"]
    return result["facts"]["placement"]


def test_affinity_matches_bind_to_core():
    rows = _placement("core")
    allowed = [r["allowed"] for r in rows]
    assert all(len(a) == 1 for a in allowed) and len({a[0] for a in allowed}) == 2
    assert all(r["cpu"] == r["allowed"][0] for r in rows)


def test_affinity_matches_bind_to_none():
    rows = _placement("none")
    everything = sorted(os.sched_getaffinity(0))
    assert all(r["allowed"] == everything for r in rows)


@pytest.mark.parametrize("args, message", [
    (["pingpong", "-p", "max_log2=31"], "above the limit"),
    (["stream", "-p", "threads=0"], "threads must be at least 1"),
    (["stream", "-p", f"n={10**12}"], "more than the"),
    (["dgemm", "-p", f"n={10**6}"], "more than the"),
    (["pingpong", "-p", "ranks=1"], "at least 2 ranks"),
    (["pingpong", "-p", "volume_mib=0"], "volume_mib"),
    (["pingpong", "-p", "min_time_s=0"], "min_time_s"),
    (["pingpong", "-p", "min_time_s=3600"], "min_time_s"),
    (["stream", "-p", "bind_to=everywhere"], "bind_to must be one of"),
    (["nosuch"], "unknown benchmark"),
])
def test_invalid_parameters_are_refused_before_running(args, message, isolated_db, cache):
    out = cli("bench", *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert message in " ".join(out.stderr.split())
    assert not cache.exists() or not any(cache.iterdir())  # nothing was even compiled
    if isolated_db.exists():
        assert sqlite3.connect(isolated_db).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_benchmarks_lists_availability():
    rows = {r["name"]: r for r in cli_json("benchmarks", "--json")}
    assert {"hpcc", "hpl", "stream", "pingpong", "dgemm", "affinity", "command"} <= set(rows)
    assert rows["stream"]["available"] is True
    assert rows["hpl"]["available"] is bool(shutil.which("xhpl") or os.environ.get("CLUSTERBENCH_XHPL"))


def test_the_plugin_example_in_the_docs_works(tmp_path, isolated_db):
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    code = re.search(r"## Example: a new benchmark in one module.*?```python\n(.*?)```", text, re.S).group(1)
    module = tmp_path / "ddcopy_plugin.py"
    module.write_text(code)
    sys.path.insert(0, str(tmp_path))
    try:
        __import__("ddcopy_plugin")
        from clusterbench.bench.registry import BENCHMARKS
        from clusterbench.campaign.expand import expand
        from clusterbench.campaign.spec import parse_campaign
        from clusterbench.execution.executor import RunRequest, execute
        from clusterbench.store.db import Store
        from clusterbench.system.discover import discover

        campaign, source = parse_campaign("name: dd\nbenchmarks:\n  - benchmark: ddcopy\n"
                                          "    space: {count: [64, 128]}\n", "dd.yaml")
        runs = expand(campaign, source, discover(with_software=False))
        assert len(runs) == 2
        with Store(isolated_db) as store:
            results = [execute(store, RunRequest(BENCHMARKS["ddcopy"].from_point(r.params), run_id=r.id,
                                                 params=r.params)) for r in runs]
        assert all(r.status == "ok" for r in results)
        assert all(r.outcome.best("dd_rate").value > 0.01 for r in results)
    finally:
        sys.path.remove(str(tmp_path))
        from clusterbench.bench.registry import BENCHMARKS
        BENCHMARKS.pop("ddcopy", None)


def test_pingpong_rounds_report_the_median_and_the_spread_of_each_size():
    """rounds=5: each size's loop runs five times; the figure is the median loop, and the facts give each size's
    spread (slowest - fastest) / median; rounds=1 prints IMB's one loop and no spread."""
    result = _run("pingpong", "-p", "min_log2=10", "-p", "max_log2=12", "-p", "iter=100", "-p", "rounds=5")
    assert result["valid"]
    spreads = result["facts"]["round_spread_percent"]
    assert set(spreads) == {"0", "1024", "2048", "4096"} and all(v >= 0 for v in spreads.values())
    single = _run("pingpong", "-p", "min_log2=10", "-p", "max_log2=10", "-p", "iter=100", "-p", "rounds=1")
    assert single["valid"] and "round_spread_percent" not in single["facts"]
