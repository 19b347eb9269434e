"""Report generation for a store of 10,000 runs (target: under 10 s on the 2-core VM).

The store is synthetic in its values but real in its shape: HPCC runs carry every metric the
real HPCC 1.5 output of this machine (the shared fixture) gives, over an NB x BLAS x node-count
sweep; standalone HPL runs; ping-pong runs with 23 message sizes; STREAM runs over threads and
pinnings; 2% of the runs invalid. Times `report` end to end in-process (read, sections, SVG,
HTML, Markdown, CSV). Prints the figures; not part of `make test`.

    .venv/bin/python benchmarks/report_scale.py [--runs 10000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from clusterbench.analysis.select import Selection
from clusterbench.bench.hpcc.output import hpcc_outcome
from clusterbench.bench.metrics import Metric
from clusterbench.report.build import build
from clusterbench.report.model import Options
from clusterbench.report.render import write
from clusterbench.store.db import RunRecord, Store
from clusterbench.system.discover import discover

FIXTURE = Path(__file__).resolve().parents[2] / "shared/fixtures/outputs/this-machine/hpccoutf-2rank.txt"


def fill(store: Store, runs: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    info = discover()
    store.save_system(info.fingerprint(), info.topology.hostname, info.fingerprint_facts(), info.to_dict())
    hpcc_metrics = hpcc_outcome(FIXTURE.read_text()).metrics
    kinds = ["hpcc"] * 4 + ["hpl"] * 2 + ["pingpong"] * 2 + ["stream"] * 2
    with store.batch():
        for i in range(runs):
            kind = kinds[i % len(kinds)]
            nb, blas, nodes = rng.choice((64, 128, 192, 256)), rng.choice(("openblas", "blis")), rng.choice((1, 2, 4))
            params: dict = {"nodes": nodes}
            jitter = rng.uniform(0.8, 1.2)
            if kind == "hpcc":
                params |= {"n": 8192, "nb": nb, "blas": blas, "layout": "mpi", "ranks": 2 * nodes, "p": 1,
                           "q": 2 * nodes}
                metrics = [Metric(m.name, m.value * jitter, m.unit, m.higher_is_better,
                                  m.labels | ({"nb": nb} if m.labels else {})) for m in hpcc_metrics]
            elif kind == "hpl":
                params |= {"n": 8192, "nb": nb, "blas": blas, "p": 1, "q": 2 * nodes}
                labels = {"n": 8192, "nb": nb, "p": 1, "q": 2 * nodes}
                metrics = [Metric("hpl_gflops", 60 * nodes * jitter, "Gflop/s", True, labels),
                           Metric("hpl_time", 6 / jitter, "s", False, labels)]
            elif kind == "pingpong":
                params |= {"interconnect": rng.choice(("shm", "tcp")), "nodes": rng.choice((1, 2))}
                metrics = []
                for k in range(23):
                    size = 0 if k == 0 else 2 ** (k - 1)
                    usec = (0.2 + size / 9000) * jitter
                    metrics += [Metric("pingpong_time_us", usec, "us", False, {"bytes": size}),
                                Metric("pingpong_bandwidth", size / usec, "MB/s", True, {"bytes": size})]
            else:
                params |= {"threads": rng.choice((1, 2)), "bind_to": rng.choice(("core", "none")), "nodes": 1}
                metrics = [Metric(f"stream_{k}", 20000 * jitter * params["threads"] ** 0.5, "MB/s", True,
                                  {"kernel": k}) for k in ("copy", "scale", "add", "triad")]
            run_id = f"scale-{kind}-{i:05d}"
            store.begin_run(RunRecord(run_id, kind, params, campaign=f"scale-{kind}", repeat=i,
                                      system_id=info.fingerprint(), tags={"study": "scale"}))
            valid = rng.random() > 0.02
            store.finish_run(run_id, "ok" if valid else "invalid", valid, None if valid else "synthetic failure",
                             0, 1.0, metrics)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "results.db")
        t0 = time.perf_counter()
        fill(store, args.runs)
        print(f"filled a store with {args.runs} runs in {time.perf_counter() - t0:.1f} s")
        times = []
        for i in range(args.repeats):
            t0 = time.perf_counter()
            doc = build(store, Selection(), Options(power_watts=120.0))
            paths = write(doc, Path(tmp) / f"report-{i}")
            times.append(time.perf_counter() - t0)
        html = paths["html"].stat().st_size / 2**20
        figures = sum(len(s.figures) for s in doc.sections)
        print(f"report of {len(doc.runs.rows)} runs: {len(doc.sections)} sections, {figures} figures, "
              f"HTML {html:.1f} MiB")
        print(f"report generation: median {statistics.median(times):.2f} s over {args.repeats} "
              f"(all: {', '.join(f'{t:.2f}' for t in times)}); target < 10 s")


if __name__ == "__main__":
    main()
