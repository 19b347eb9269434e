"""Planning and storage at scale: expand a 100,000-point campaign, store 10,000 results.

Targets (issue 3): each under 2 s on the 2-core development VM. Prints the figures; not part
of `make test` (timings on a shared machine are samples, not facts).

    .venv/bin/python benchmarks/campaign_scale.py [--points 100000] [--results 10000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from clusterbench.bench.metrics import Metric
from clusterbench.campaign.expand import expand
from clusterbench.campaign.spec import parse_campaign
from clusterbench.store.db import Store
from clusterbench.store.records import RunRecord
from clusterbench.system.discover import discover


def campaign_text(benchmark: str, points: int) -> str:
    """`points` points: N over 1000 values x NB over points/1000 values, one derived value,
    one constraint. For hpcc every point also gets its placement, grid and memory check."""
    nbs = max(points // 1000, 1)
    extra = "      command: 'echo {n} {nb}'\n" if benchmark == "command" else "      layout: mpi\n"
    return f"""
name: scale
benchmarks:
  - benchmark: {benchmark}
    params:
{extra}      threshold: {{expr: "16.0 if nb < 400 else 32.0"}}
    space:
      n: 1000..1999
      nb: 8..{8 * nbs}:8
    where: ["n >= nb"]
"""


def time_expand(benchmark: str, points: int) -> tuple[float, int]:
    info = discover()
    campaign, source = parse_campaign(campaign_text(benchmark, points), "scale.yaml")
    t0 = time.perf_counter()
    runs = expand(campaign, source, info)
    return time.perf_counter() - t0, len(runs)


def _metrics(i: int) -> list[Metric]:
    labels = {"n": 1000 + i, "nb": 192}
    return [Metric("hpl_gflops", 80.0 + i % 7, "Gflop/s", True, labels), Metric("hpl_time", 10.0, "s", False, labels)]


def time_store_results(results: int) -> float:
    """Finished results as `clusterbench import` stores them: each atomic (run row, 2 metrics, raw
    output) in a savepoint, committed 500 at a time."""
    output = b"WR11C2R4  1000  192  1  2  10.0  8.0e+01\n" * 20
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "scale.db") as store, store.batch():
        t0 = time.perf_counter()
        for i in range(results):
            rec = RunRecord(id=f"scale-hpl-{i:06d}", benchmark="hpl", params={"n": 1000 + i, "nb": 192, "p": 1,
                            "q": 2}, campaign="scale", source="import", content_hash=f"h{i}")
            store.add_imported_run(rec, True, None, _metrics(i), {"source_file": f"/data/{i}.out"},
                                   "HPL.out", output, None, None, 10.0)
        return time.perf_counter() - t0


def time_store_lifecycle(results: int) -> float:
    """Live runs: begin_run ('running', committed before the process starts) + finish_run."""
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "scale.db") as store:
        t0 = time.perf_counter()
        for i in range(results):
            rid = f"scale-hpl-{i:06d}"
            store.begin_run(RunRecord(id=rid, benchmark="hpl", params={"n": 1000 + i, "nb": 192, "p": 1, "q": 2},
                                      campaign="scale", repeat=i % 3))
            store.finish_run(rid, "ok", True, None, 0, 1.0, _metrics(i))
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--results", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rows = [("expand (command benchmark)", "command"), ("expand (hpcc: placement, grid, memory check)", "hpcc")]
    for label, benchmark in rows:
        samples = [time_expand(benchmark, args.points) for _ in range(args.repeats)]
        secs = [s for s, _ in samples]
        print(f"{label}: {samples[0][1]} runs, median {statistics.median(secs):.2f} s "
              f"(min {min(secs):.2f}, max {max(secs):.2f}; target < 2 s)")
    for label, fn in (("store results (import path: atomic each, committed 500 at a time)", time_store_results),
                      ("live run lifecycle (begin_run + finish_run, 2 commits)", time_store_lifecycle)):
        secs = [fn(args.results) for _ in range(args.repeats)]
        print(f"{label}: {args.results} in median {statistics.median(secs):.2f} s "
              f"(min {min(secs):.2f}, max {max(secs):.2f}; target < 2 s)")


if __name__ == "__main__":
    main()
