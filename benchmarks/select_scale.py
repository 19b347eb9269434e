"""Selections over 100,000 stored runs: how long `select_runs` takes for the usual terms.

Target (issue 19): each selection under about 2 s on the 2-core development VM. The store is
built with the real Store API (`add_imported_run` in batches, as `clusterbench import` writes),
with parameters, tags and facts of the shapes imports store, over 20 campaigns. Prints the
figures; not part of `make test` (timings on a shared machine are samples, not facts: the CPU
seconds beside each wall time show what a busy machine added).

    .venv/bin/python benchmarks/select_scale.py [--runs 100000] [--repeats 3] [--keep DB]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from clusterbench.analysis.select import parse_selection, select_runs
from clusterbench.bench.metrics import Metric
from clusterbench.store.db import Store
from clusterbench.store.records import RunRecord

BLAS = ("openblas-serial", "openblas-openmp", "blis-serial", "mkl")
SELECTIONS = (
    "",  # every run, fully decoded: what a report of the whole store reads
    "campaign:study-07",  # answered by SQL
    "benchmark:hpl,source:import,campaign:study-03,campaign:study-04",
    "blas=openblas_serial",  # a parameter, compared canonically
    "nodes>=4,n>20000",  # a derived value and a number range
    "tag:system=pi4,blas=blis-serial",
    "fact:pinning.verdict=mismatch",  # facts decoded for every run
    "campaign:study-11,fact:pinning.verdict=mismatch,interconnect=infiniband",
)


def build(path: Path, runs: int) -> float:
    """`runs` imported HPL results, 8 per file, 2 metrics each; returns the seconds it took."""
    t0 = time.perf_counter()
    with Store(path) as store, store.batch():
        output = b""
        for i in range(runs):
            if i % 8 == 0:  # a new "file": its bytes shared by its 8 results
                output = (f"HPL output file {i // 8}\n" + "WR11C2R4  20000  192  2  2  100.0  5.3e+01\n" * 60).encode()
            params = {"n": 10000 + (i % 40) * 1000, "nb": 64 * (1 + i % 4), "p": 2, "q": 2, "nodes": 1 + i % 8,
                      "blas": BLAS[i % len(BLAS)], "interconnect": ("tcp", "ib")[i % 2], "tv": "WR11C2R4"}
            facts = {"hpl_version": "2.3", "source_file": f"/data/study/{i // 8:06d}.out", "result_index": i % 8,
                     "pinning": {"verdict": ("match", "mismatch")[i % 13 == 0], "problems": []}}
            labels = {"n": params["n"], "nb": params["nb"], "p": 2, "q": 2, "residual": 0.002}
            rec = RunRecord(id=f"import-hpl-{i:08d}", benchmark="hpl", params=params,
                            campaign=f"study-{i % 20:02d}", tags={"system": ("pi4", "pi5")[i % 3 == 0]},
                            source="import", content_hash=f"{i // 8:064x}:{i % 8}")
            store.add_imported_run(rec, True, None, [Metric("hpl_gflops", 50.0 + i % 17, "Gflop/s", True, labels),
                                                     Metric("hpl_time", 100.0, "s", False, labels)],
                                   facts, f"{i // 8:06d}.out", output, None, None, 100.0)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="Build the store here and keep it (default: a temporary folder).")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "select.db"
        if not path.exists():
            print(f"built {args.runs:,} runs in {build(path, args.runs):.1f} s "
                  f"({path.stat().st_size / 2**20:.0f} MiB)")
        with Store(path, read_only=True) as store:
            print(f"{store.run_count():,} stored runs; target < 2 s per selection")
            for text in SELECTIONS:
                secs, cpu, found = [], [], 0
                for _ in range(args.repeats):
                    t0, c0 = time.perf_counter(), time.process_time()
                    found = len(select_runs(store, parse_selection(text, store)))
                    secs.append(time.perf_counter() - t0)
                    cpu.append(time.process_time() - c0)
                print(f"  {text or '(every run)':<78} {found:>7,} runs  median {statistics.median(secs):.2f} s "
                      f"(min {min(secs):.2f}, max {max(secs):.2f}; CPU {statistics.median(cpu):.2f} s)")


if __name__ == "__main__":
    main()
