#!/usr/bin/env python3
"""Harness overhead: `clusterbench run --n N` against the same `mpirun hpcc` run by hand.

Prints the wall time of each and their ratio (target: at most 1.05 for a run of about 10 s).
Both sides run the same hpccinf.txt, written by clusterbench's own planner; they alternate
(A B A B ...) so that drift of this noisy machine hits both, and the medians are compared.

    .venv/bin/python benchmarks/harness_overhead.py [--n 4608] [--nb 192] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clusterbench.bench.hpl.input import HplInput, render_hpccinf
from clusterbench.bench.hpl.planner import grids
from clusterbench.bench.layout import layouts
from clusterbench.launch.mpirun import MpiLaunch, mpirun_command
from clusterbench.system.discover import discover


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=4608)
    ap.add_argument("--nb", type=int, default=192)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    topo = discover(with_software=False).topology
    layout = layouts(1, topo.sockets, topo.cores_per_socket)["mpi"]
    p, q = grids(layout.ranks)[0]
    tmp = Path(tempfile.mkdtemp(prefix="cb-overhead-"))
    env = dict(os.environ) | layout.env() | {"CLUSTERBENCH_DB": str(tmp / "results.db")}
    bare_dir = tmp / "bare"
    bare_dir.mkdir()
    (bare_dir / "hpccinf.txt").write_text(render_hpccinf(
        HplInput(ns=[args.n], nbs=[args.nb], grids=[(p, q)], device_out=8)))
    bare_cmd = mpirun_command(MpiLaunch(layout.ranks, layout.env(), bind_to="core"), ["hpcc"])
    # --no-kernels: `run` also measures STREAM and ping-pong by default; only HPCC is compared here
    tool_cmd = [sys.executable, "-m", "clusterbench", "run", "--n", str(args.n), "--nb", str(args.nb),
                "--no-kernels", "--json"]

    def timed(cmd: list[str], cwd: Path) -> float:
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t0

    bare, tool = [], []
    for i in range(args.repeats):
        bare.append(timed(bare_cmd, bare_dir))
        tool.append(timed(tool_cmd, tmp))
        print(f"repeat {i + 1}: mpirun hpcc {bare[-1]:.2f} s, clusterbench run {tool[-1]:.2f} s", flush=True)
    b, t = statistics.median(bare), statistics.median(tool)
    print(f"N={args.n} NB={args.nb} {layout.ranks} ranks, {args.repeats} repeats (medians)")
    print(f"mpirun hpcc alone : {b:.2f} s")
    print(f"clusterbench run  : {t:.2f} s")
    print(f"overhead ratio    : {t / b:.3f}  (target <= 1.05)")


if __name__ == "__main__":
    main()
