#!/usr/bin/env python3
"""Placement probe overhead: the same MPI run with each rank started directly and through the probe.

Every MPI run clusterbench makes starts its ranks as `python -I -S probe.py DIR -- PROGRAM` (see
docs/pinning.md). This script alternates (A B A B ...) `mpirun -np R PROGRAM` and the probed
version, R ranks of clusterbench's own STREAM kernel bound to cores, and prints the median wall
time and the median Triad rate of each side with their ratios. Targets: the probe adds no more
than about 50 ms per run (one interpreter start per rank, in parallel), and the measured figure
stays within the noise (a Triad ratio near 1; this machine varies by 10-25 % run to run).

    .venv/bin/python benchmarks/probe_overhead.py [--repeats 7] [--ranks 2] [--n 4000000]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clusterbench.launch.mpirun import MpiLaunch, mpirun_command
from clusterbench.native.build import build
from clusterbench.pinning import probe


def run(cmd: list[str]) -> tuple[float, float]:
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    seconds = time.perf_counter() - start
    triad = re.search(r"^Triad:?\s+([\d.]+)", out.stdout, re.M)
    return seconds, float(triad.group(1)) if triad else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--n", type=int, default=4_000_000)
    args = ap.parse_args()
    binary = str(build("stream", mpi=True, openmp=True).binary)
    program = [binary, str(args.n), "5"]
    direct = mpirun_command(MpiLaunch(ranks=args.ranks, bind_to="core"), program)
    folder = Path(tempfile.mkdtemp(prefix="cb-probe-"))
    probed = mpirun_command(MpiLaunch(ranks=args.ranks, bind_to="core"),
                            [sys.executable, "-I", "-S", probe.__file__, str(folder / "placement"), "--", *program])
    times: dict[str, list[float]] = {"direct": [], "probed": []}
    rates: dict[str, list[float]] = {"direct": [], "probed": []}
    for _ in range(args.repeats):
        for name, cmd in (("direct", direct), ("probed", probed)):
            seconds, triad = run(cmd)
            times[name].append(seconds)
            rates[name].append(triad)
    for name in times:
        print(f"{name:7s} wall median {statistics.median(times[name]):.3f} s  (min {min(times[name]):.3f}, "
              f"max {max(times[name]):.3f})  Triad median {statistics.median(rates[name]):.0f} MB/s")
    ratio_t = statistics.median(times["probed"]) / statistics.median(times["direct"])
    ratio_r = statistics.median(rates["probed"]) / statistics.median(rates["direct"])
    extra = statistics.median(times["probed"]) - statistics.median(times["direct"])
    print(f"probed/direct: wall {ratio_t:.3f} ({extra * 1000:+.0f} ms per run), Triad {ratio_r:.3f}  "
          f"[{args.repeats} alternating pairs, {args.ranks} ranks, n={args.n}]")
    print(f"probe records: {len(list((folder / 'placement').glob('probe-*.json')))} written to {folder}")


if __name__ == "__main__":
    main()
