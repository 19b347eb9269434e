"""`clusterbench report` over a store of 100,000 runs shaped like the studies users bring (issue 19).

Targets: the report in under 10 s on the 2-core VM, its HTML under 5 MB. The store is synthetic in its
values but real in its shape (tests/studies.py): 80% Pi-style HPL results as the importer stores them (one
run per T/V line: N, NB, P x Q, variant, canonical BLAS and tuning, grids, node count, the file's facts), 10%
IMB PingPong runs over shm, TCP and InfiniBand on 1 and 2 hosts (26 message sizes each), 10% STREAM runs
against OpenMP threads per binding; 1% of the HPL results invalid. The rows are written through the Store
API in batches (begin_run and finish_run inside `Store.batch`), not through 100,000 file imports.

Each repeat times the report built and written in this process (read, sections, SVG, HTML, Markdown, CSV)
and then `clusterbench report` end to end in a new process (start-up, imports, the same work), alternating,
and prints every repeat with the HTML size and the number of figures and panels. Not part of `make test`.

    .venv/bin/python benchmarks/report_scale.py [--runs 100000] [--repeats 3] [--db PATH]

`--db PATH` keeps the store: filled there when the file is missing, reused as it is when present (to profile
the same store again without the minute of filling; `--runs` is then the store's own).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the study generators live with the tests

from tests.studies import (  # noqa: E402
    JSC_STRATEGIES,
    JSC_THREADS,
    PI_RPEAK_NODE_GFLOPS,
    PI_SPELLINGS,
    PI_VARIANTS,
    STFC_LINKS,
    jsc_triad,
    noisy,
    pi_rate,
    pingpong_rows,
)

from clusterbench.analysis.select import parse_selection  # noqa: E402
from clusterbench.bench.hpl.planner import hpl_flops  # noqa: E402
from clusterbench.bench.metrics import Metric  # noqa: E402
from clusterbench.report.build import build  # noqa: E402
from clusterbench.report.model import Options  # noqa: E402
from clusterbench.report.render import write  # noqa: E402
from clusterbench.store.db import Store  # noqa: E402
from clusterbench.store.records import RunRecord  # noqa: E402

SHARES = {"hpl": 0.8, "imb": 0.1, "stream": 0.1}
TARGET_SECONDS = 10.0  # the report over 100,000 runs, end to end
PI_GRIDS = {1: ((1, 1), (1, 4), (2, 2)), 2: ((1, 2), (1, 8), (2, 4)), 4: ((1, 4), (2, 2), (1, 16), (2, 8), (4, 4)),
            8: ((2, 4), (2, 16), (4, 8))}
PI_N = {1: 20000, 2: 28000, 4: 40000, 8: 56000}
START = datetime(2019, 7, 1, tzinfo=UTC)


def hpl_run(i: int, rng: random.Random) -> tuple[RunRecord, list[Metric], dict, bool]:
    """One imported Pi HPL result line, as the importer stores it."""
    nodes = rng.choice(tuple(PI_GRIDS))
    p, q = rng.choice(PI_GRIDS[nodes])
    spelled = rng.choice(tuple(PI_SPELLINGS))
    blas, tuning = PI_SPELLINGS[spelled]
    if blas == "openblas-openmp" and p * q > nodes:  # OpenMP BLAS: one rank per node
        p, q = 1, nodes
    nb = rng.randrange(32, 257, 8)
    tv = PI_VARIANTS[i % len(PI_VARIANTS)]
    model_nodes = min(nodes, 4)
    gflops = pi_rate(model_nodes, p * q, blas, tuning, nb, (p, q, tv), rng) * nodes / model_nodes
    n = PI_N[nodes]
    seconds = round(hpl_flops(n) / gflops / 1e9, 2)
    valid = rng.random() > 0.01
    started = START + timedelta(minutes=7 * i)
    name = f"HPL.out.{nodes}_node_{n}_{nb}_{p}_{q}.{spelled}"
    params = {"nodes": nodes, "n": n, "nb": nb, "p": p, "q": q, "ranks": p * q, "tv": tv, "blas": blas,
              "grids": [f"{p}x{q}"]} | ({"tuning": tuning} if tuning else {})
    labels = {"tv": tv, "n": n, "nb": nb, "p": p, "q": q, "residual": 0.0023 if valid else 27.3,
              "start": started.ctime(), "end": (started + timedelta(seconds=seconds)).ctime()}
    metrics = [Metric("hpl_gflops", hpl_flops(n) / seconds / 1e9, "Gflop/s", True, labels, valid),
               Metric("hpl_time", seconds, "s", False, labels, valid)]
    facts = {"hpl_version": "2.3", "threshold": 16.0, "source_file": f"/data/pi-study/{name}",
             "result_index": i % 8, "from_file_name": {"nodes": nodes, "n": n, "nb": nb, "blas": spelled},
             "as_written": {"blas": spelled}, "stated_start": started.ctime()}
    record = RunRecord(f"import-hpl-{i:08x}", "hpl", params, tags={"system": "pi-cluster"}, source="import",
                       content_hash=f"{i:064x}:{i % 8}", workdir="/data/pi-study")
    return record, metrics, facts, valid


def imb_run(i: int, rng: random.Random) -> tuple[RunRecord, list[Metric], dict, bool]:
    """One IMB PingPong section over one of the STFC links, as imported from an LSF job report."""
    (interconnect, hosts), (_flag, _prot, latency, bandwidth) = rng.choice(tuple(STFC_LINKS.items()))
    metrics = []
    rows = pingpong_rows(latency, bandwidth, rng)
    for size, usec in rows:
        labels = {"test": "PingPong", "bytes": size}
        metrics += [Metric("imb_time_us", round(usec, 2), "us", False, labels),
                    Metric("imb_bandwidth", round(size / usec / 1.048576, 2), "MiB/s", True, labels)]
    metrics.append(Metric("latency_us", round(rows[0][1], 2), "us", False, {"test": "PingPong", "bytes": 0}))
    params = {"test": "PingPong", "ranks": 2, "nodes": hosts, "interconnect": interconnect, "min_bytes": 0,
              "max_bytes": 16777216}
    facts = {"imb_version": "2017", "source_file": f"/data/stfc/{7300000 + i}.out",
             "job": {"scheduler": "lsf", "job_id": 7300000 + i, "queue": "scarf"}}
    record = RunRecord(f"import-imb-{i:08x}", "imb", params, tags={"system": "lsf-synthetic"}, source="import",
                       content_hash=f"{i:064x}:0", nodes=f"cn[{100 + i % 50},{150 + i % 50}]")
    return record, metrics, facts, True


def stream_run(i: int, rng: random.Random) -> tuple[RunRecord, list[Metric], dict, bool]:
    """One live STREAM run of the JSC binding study."""
    strategy = rng.choice(tuple(JSC_STRATEGIES))
    threads = rng.choice(JSC_THREADS)
    triad = jsc_triad(strategy, threads) * noisy(rng, 0.03)
    metrics = [Metric(f"stream_{kernel}", triad * share, "MB/s", True, {"kernel": kernel})
               for kernel, share in (("copy", 0.93), ("scale", 0.91), ("add", 0.99), ("triad", 1.0))]
    params = {"n": 80_000_000, "threads": threads, "ranks": 1} | JSC_STRATEGIES[strategy]
    record = RunRecord(f"jsc-stream-{i:08x}", "stream", params, campaign="jsc-stream-binding", repeat=i % 3,
                       env={"OMP_NUM_THREADS": str(threads)}, tags={"study": "jsc"})
    return record, metrics, {"stream_version": "5.10", "threads": threads}, True


def fill(store: Store, runs: int, seed: int = 19) -> dict[str, int]:
    rng = random.Random(seed)
    makers = {"hpl": hpl_run, "imb": imb_run, "stream": stream_run}
    counts = {kind: int(runs * share) for kind, share in SHARES.items()}
    counts["hpl"] += runs - sum(counts.values())
    order = [kind for kind, count in counts.items() for _ in range(count)]
    rng.shuffle(order)
    with store.batch(every=2000):
        for i, kind in enumerate(order):
            record, metrics, facts, valid = makers[kind](i, rng)
            store.begin_run(record)
            store.finish_run(record.id, "ok" if valid else "invalid", valid,
                             None if valid else "residual check FAILED (27.3)", 0, 1.0, metrics, facts=facts)
    return counts


def in_process(db: Path, out: Path) -> tuple[float, int, int]:
    """Seconds to build and write the report here; figures and panels drawn."""
    start = time.perf_counter()
    with Store(db, read_only=True) as store:
        doc = build(store, parse_selection([], store), Options(rpeak_node_gflops=PI_RPEAK_NODE_GFLOPS))
    write(doc, out)
    seconds = time.perf_counter() - start
    figures = [f for s in doc.sections for f in s.figures]
    return seconds, len(figures), sum(len(f.all_panels()) if hasattr(f, "all_panels") else 1 for f in figures)


def end_to_end(db: Path, out: Path) -> float:
    """Seconds of `clusterbench report` in a new process, start-up included."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "clusterbench", "report", "--out", str(out),
                           "--rpeak-node", f"{PI_RPEAK_NODE_GFLOPS:g}"], capture_output=True, text=True,
                          env=dict(os.environ) | {"CLUSTERBENCH_DB": str(db), "COLUMNS": "200"})
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"clusterbench report failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--db", type=Path, help="keep the store here: fill it when missing, reuse it when present")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "results.db"
        if db.exists():
            print(f"reusing the store {db}; database {db.stat().st_size / 2**20:.0f} MiB")
        else:
            start = time.perf_counter()
            with Store(db) as store:
                counts = fill(store, args.runs)
            print(f"filled a store with {args.runs:,} runs ({', '.join(f'{k} {v:,}' for k, v in counts.items())}) "
                  f"in {time.perf_counter() - start:.1f} s; database {db.stat().st_size / 2**20:.0f} MiB")
        here, there = [], []
        for i in range(args.repeats):
            seconds, figures, panels = in_process(db, Path(tmp) / f"report-{i}")
            here.append(seconds)
            html = (Path(tmp) / f"report-{i}" / "report.html").stat().st_size / 1e6
            print(f"repeat {i + 1}: build + write {seconds:.2f} s, {figures} figures ({panels} panels), "
                  f"HTML {html:.2f} MB", flush=True)
            there.append(end_to_end(db, Path(tmp) / f"cli-{i}"))
            cli_html = (Path(tmp) / f"cli-{i}" / "report.html").stat().st_size / 1e6
            print(f"repeat {i + 1}: clusterbench report end to end {there[-1]:.2f} s, HTML {cli_html:.2f} MB",
                  flush=True)
        print(f"median: build + write {sorted(here)[len(here) // 2]:.2f} s, end to end "
              f"{sorted(there)[len(there) // 2]:.2f} s (targets: < 10 s, HTML < 5 MB)")
        print(f"best: end to end {min(there):.2f} s = {min(there) / TARGET_SECONDS:.2f} x the target "
              f"({TARGET_SECONDS:g} s); build + write {min(here):.2f} s (a shared machine: best of {args.repeats})")


if __name__ == "__main__":
    main()
