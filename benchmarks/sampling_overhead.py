#!/usr/bin/env python3
"""Activity sampling overhead: the same ~60 s HPL with and without the 1 Hz sampler beside it.

Issue 18 samples every node of every run once a second (system/sampler.py) and asks that this
cost under 1% of a run's time. This script runs the standalone xhpl (found like `clusterbench
bench hpl` finds it, or built from ../shared/sources/hpl-2.3.tar.gz), 2 ranks through mpirun, N
sized from a short calibration run to take about --seconds, ALTERNATING (with, without, with,
...) in one session so the machine's drift hits both sides alike. The sampler runs exactly as the
executor starts it: `python3 -I -S -c SOURCE`, a pipe as stdin (closed at the end), stdout to a
file. Printed: each pair's wall time and HPL's own time and Gflop/s, the median ratios
with/without, and the sampler's own CPU time per sample (from its last line, start-up excluded).

    .venv/bin/python benchmarks/sampling_overhead.py [--pairs 3] [--seconds 60] [--interval 1.0] [--nb 192]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clusterbench.bench.hpl.benchmark import find_xhpl
from clusterbench.bench.hpl.input import HplInput, render_hpl_dat
from clusterbench.bench.hpl.output import parse_hpl
from clusterbench.bench.hpl.planner import hpl_flops
from clusterbench.launch.mpirun import MpiLaunch, mpirun_command
from clusterbench.system.activity import parse_series, sampler_argv, summarise

SOURCE = Path(__file__).resolve().parents[1].parent / "shared" / "sources" / "hpl-2.3.tar.gz"
RANKS = 2


def xhpl_binary() -> str:
    found = find_xhpl(mpi="openmpi")
    if found:
        return found
    if not SOURCE.is_file():
        raise SystemExit(f"no xhpl: build one with `clusterbench build hpl` ({SOURCE} is not here)")
    subprocess.run([sys.executable, "-m", "clusterbench", "build", "hpl", "--source", str(SOURCE)], check=True)
    return find_xhpl(mpi="openmpi") or sys.exit("clusterbench build hpl made no xhpl")


def run_hpl(xhpl: str, folder: Path, n: int, nb: int, interval: float | None) -> dict:
    """One HPL run in `folder` (HPL.dat there), with a sampler beside it when interval is given."""
    (folder / "HPL.dat").write_text(render_hpl_dat(HplInput(ns=[n], nbs=[nb], grids=[(1, RANKS)])))
    sampler, sink = None, folder / "activity.jsonl"
    if interval is not None:
        with sink.open("wb") as out:
            sampler = subprocess.Popen(sampler_argv(interval, 7200, python="python3"), stdin=subprocess.PIPE,
                                       stdout=out)
    start = time.perf_counter()
    done = subprocess.run(mpirun_command(MpiLaunch(ranks=RANKS, bind_to="core", mpi="openmpi"), [xhpl]),
                          cwd=folder, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    result = {"wall": wall}
    parsed = parse_hpl(done.stdout).results
    if not parsed:
        raise SystemExit(f"xhpl printed no result:\n{done.stdout[-2000:]}")
    result.update(hpl_time=parsed[0].time_s, gflops=parsed[0].gflops)
    if sampler is not None:
        sampler.stdin.close()
        sampler.wait(30)
        summary = summarise(parse_series(sink.read_text(), "here"))
        result.update(samples=summary["samples"], cpu_ms=summary["sampler_cpu_ms_per_sample"])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3, choices=range(1, 51), metavar="K (1..50)")
    ap.add_argument("--seconds", type=float, default=60.0, help="target HPL time (5..3600)")
    ap.add_argument("--interval", type=float, default=1.0, help="sampling interval (0.05..60)")
    ap.add_argument("--nb", type=int, default=192, choices=range(16, 1025), metavar="NB (16..1024)")
    args = ap.parse_args()
    if not 5 <= args.seconds <= 3600:
        raise SystemExit("--seconds must be within 5..3600")
    sampler_argv(args.interval)  # refuses an interval out of bounds before anything runs
    xhpl = xhpl_binary()
    with tempfile.TemporaryDirectory(prefix="cb-sampling-") as tmp:
        folder = Path(tmp)
        calib_n = 31 * args.nb  # a few seconds; the best of two, as other work on the machine only slows it
        rate = max(hpl_flops(calib_n) / run_hpl(xhpl, folder, calib_n, args.nb, None)["hpl_time"] for _ in range(2))
        n = int((1.5 * args.seconds * rate) ** (1 / 3)) // args.nb * args.nb
        n = min(n, 40_000)  # 12.8 GB of matrix: this machine's bound, and far beyond 60 s here
        print(f"xhpl {xhpl}\ncalibration N={calib_n}: {rate / 1e9:.2f} Gflop/s -> N={n} NB={args.nb} "
              f"1x{RANKS} for about {args.seconds:.0f} s; sampler interval {args.interval:g} s")
        sides: dict[str, list[dict]] = {"with": [], "without": []}
        for k in range(args.pairs):
            for side in ("with", "without"):
                sides[side].append(run_hpl(xhpl, folder, n, args.nb, args.interval if side == "with" else None))
            w, wo = sides["with"][-1], sides["without"][-1]
            print(f"pair {k + 1}: with {w['wall']:.2f} s wall, HPL {w['hpl_time']:.2f} s, {w['gflops']:.2f} Gflop/s "
                  f"({w['samples']} samples) | without {wo['wall']:.2f} s wall, HPL {wo['hpl_time']:.2f} s, "
                  f"{wo['gflops']:.2f} Gflop/s", flush=True)
    med = {side: {key: statistics.median(r[key] for r in runs) for key in ("wall", "hpl_time", "gflops")}
           for side, runs in sides.items()}
    print(f"median with/without: wall {med['with']['wall'] / med['without']['wall']:.4f}, HPL time "
          f"{med['with']['hpl_time'] / med['without']['hpl_time']:.4f}, Gflop/s "
          f"{med['with']['gflops'] / med['without']['gflops']:.4f}  [{args.pairs} alternating pairs]")
    costs = [r["cpu_ms"] for r in sides["with"] if r.get("cpu_ms") is not None]
    if costs:
        per_s = statistics.median(costs) / args.interval / 10  # ms per second -> percent of one CPU
        print(f"sampler CPU time per sample: median {statistics.median(costs):.2f} ms (min {min(costs):.2f}, "
              f"max {max(costs):.2f}) = {per_s:.3f}% of one CPU, {per_s / RANKS:.3f}% of the {RANKS} CPUs "
              f"the run used")


if __name__ == "__main__":
    main()
