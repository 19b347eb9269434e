#!/usr/bin/env python3
"""CLI start-up and the fixed cost of one run (issue 32): wall seconds of `clusterbench --help`,
`--version` and `results`, and of `clusterbench bench stream` against the same binary started by
a bare `mpirun -np 2` (targets: start-up <= 0.2 s; fixed cost of a run <= 0.3 s).

Every case runs in alternating rounds (A B A B ...), so that the drift of this shared machine hits
each side alike; each prints min and median. With --other-src PATH (e.g. a `git worktree add
/tmp/cb-head HEAD` checkout's src), the same commands run from that tree too (PYTHONPATH=PATH, the
same venv), alternating with this one: a before/after comparison in one session.

The fixed cost is the median of (tool - bare) over the rounds. The tool's run keeps everything a
run records (node state, activity sampler, placement probe, one stored row); the bare side runs
the same MPI build of clusterbench's own STREAM kernel (USE_MPI, as at ranks=2), same n, ranks bound to cores.

Bytecode: this repository's environment may set PYTHONDONTWRITEBYTECODE, which makes every start
compile the modules changed since the last cache; an installed clusterbench has its .pyc files.
The processes therefore get a bytecode cache in a temporary PYTHONPYCACHEPREFIX (warmed by one
unmeasured round) unless --no-bytecode-cache is given.

    .venv/bin/python benchmarks/cli_startup.py [--rounds 7] [--other-src /tmp/cb-head/src] [--no-run] [--n 100000]
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

import clusterbench

THIS_SRC = str(Path(clusterbench.__file__).resolve().parents[1])
STARTUP = {"--version": ["--version"], "--help": ["--help"], "results": ["results", "--limit", "20"]}


def timed(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def summary(times: list[float]) -> str:
    return f"min {min(times):.3f} s, median {statistics.median(times):.3f} s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--other-src", help="a second source tree to alternate with (its src folder)")
    ap.add_argument("--no-run", action="store_true", help="start-up only, no bench run")
    ap.add_argument("--n", type=int, default=100_000, help="STREAM array size of the run (tiny: the run is ~20 ms)")
    ap.add_argument("--no-bytecode-cache", action="store_true")
    args = ap.parse_args()
    if not 1 <= args.rounds <= 100 or not 1000 <= args.n <= 10_000_000:
        ap.error("--rounds 1..100, --n 1000..10000000")

    tmp = Path(tempfile.mkdtemp(prefix="cb-startup-"))
    base = dict(os.environ) | {"CLUSTERBENCH_DB": str(tmp / "results.db"), "COLUMNS": "120"}
    if not args.no_bytecode_cache:
        base.pop("PYTHONDONTWRITEBYTECODE", None)
        base["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    trees = {"this": THIS_SRC} | ({"other": str(Path(args.other_src).resolve())} if args.other_src else {})
    envs = {name: base | {"PYTHONPATH": src} for name, src in trees.items()}
    print(f"trees: {trees}; bytecode cache {'off' if args.no_bytecode_cache else 'on'}; {args.rounds} rounds",
          flush=True)

    cases: dict[str, list[str]] = {}
    for label, argv in STARTUP.items():
        for tree in trees:
            cases[f"{label} [{tree}]"] = [sys.executable, "-m", "clusterbench", *argv]
    run_argv = ["bench", "stream", "-p", f"n={args.n}", "-p", "ranks=2", "-p", "threads=1", "--json"]
    if not args.no_run:
        from clusterbench.launch.mpirun import MpiLaunch, mpirun_command
        from clusterbench.native.build import build

        # the binary `bench stream` runs at ranks=2: the MPI build (USE_MPI), whose MPI_Init is part of
        # the bare side too (the build without it starts ~0.3 s faster and would count that as our cost)
        binary = str(build("stream", mpi=True, openmp=True, defines=("USE_MPI",)).binary)
        cases["bare mpirun"] = mpirun_command(MpiLaunch(ranks=2, bind_to="core"), [binary, str(args.n), "10"])
        for tree in trees:
            cases[f"bench stream [{tree}]"] = [sys.executable, "-m", "clusterbench", *run_argv]

    def env_of(case: str) -> dict:
        tree = case.rpartition("[")[2].rstrip("]")
        return envs.get(tree, base | {"OMP_NUM_THREADS": "1"})

    for case, cmd in cases.items():  # warm-up: bytecode cache, build lookups, the store
        timed(cmd, env_of(case))
    times: dict[str, list[float]] = {case: [] for case in cases}
    for _ in range(args.rounds):
        for case, cmd in cases.items():
            times[case].append(timed(cmd, env_of(case)))
    for case, ts in times.items():
        print(f"{case:28s} {summary(ts)}")
    if not args.no_run:
        for tree in trees:
            diffs = [t - b for t, b in zip(times[f"bench stream [{tree}]"], times["bare mpirun"], strict=True)]
            print(f"fixed cost of one run [{tree}]: median {statistics.median(diffs):.3f} s, min {min(diffs):.3f} s "
                  f"(tool - bare, per round; target <= 0.3 s)")


if __name__ == "__main__":
    main()
