#!/usr/bin/env python3
"""Harness overhead: `clusterbench bench hpl -p n=N -p nb=NB` against the same `mpirun xhpl` run by hand.

Three figures (issue 20: a tuner runs many short trials, so the fixed cost of one run matters):

1. ratio on a ~10 s run: wall time of the CLI over that of bare mpirun xhpl, medians of
   alternating pairs (A B A B ...: drift of this shared machine hits both). Target <= 1.02.
2. fixed cost of one CLI run: the same on a tiny run (N=1000), tool minus bare, in seconds.
   Target < 0.3 s.
3. fixed cost of one run made in-process: discover + expand + `execution.loop.run_all` once per
   run in this process (what a tuner does per trial), minus the tiny bare run; the first call,
   which pays the imports and the per-process caches, is shown apart. Measured twice: as is, and
   with `execution.executor.prefetch_state()` called first in each trial, so the node-state read
   (about 0.1 s, half of it the clock kernel) overlaps the trial's planning.
4. the observer on a ~10 s run (issue 34, item 4: "the harness (probe, sampler, state read) costs
   <= 1% of the benchmark's own figure and <= 2% of wall time"): alternating pairs of bare mpirun
   xhpl and one in-process run (discover + expand + run_all, as a tuner's trial: state read,
   sampler, placement probe, store), each side's wall time and HPL's own Gflop/s (the bare run's
   from its output, the tool's as stored). The interpreter's start and imports, which a CLI run
   pays once per command and a tuner once per session, are not the observer's: figure 1 has them.

Both sides run the same HPL.dat (clusterbench.bench.hpl.input.render_hpl_dat: one N, NB, grid
1 x ranks) and the same mpirun line (launch.mpirun.mpirun_command with the layout's thread
variables, ranks bound to cores). The CLI runs keep everything a run records: node state, the
activity sampler, the placement probe, the libraries loaded, one stored row per run.

Python's bytecode: an installed clusterbench has its .pyc files (pip compiles them), but this
repository's environment may set PYTHONDONTWRITEBYTECODE, which makes every CLI start compile
its modules again. The CLI processes therefore get a bytecode cache in a temporary
PYTHONPYCACHEPREFIX (warmed by one unmeasured run) unless --no-bytecode-cache is given.

    .venv/bin/python benchmarks/harness_overhead.py [--n 10000] [--nb 192] [--pairs 3]
        [--tiny-n 1000] [--tiny-pairs 5] [--inprocess-runs 6] [--skip-long] [--no-bytecode-cache]
        [--observer-pairs 4] [--only-observer]
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

from clusterbench.bench.hpl.benchmark import find_xhpl
from clusterbench.bench.hpl.input import HplInput, render_hpl_dat
from clusterbench.bench.layout import layouts
from clusterbench.launch.mpirun import MpiLaunch, mpirun_command
from clusterbench.system.discover import discover


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10000, help="N of the long run (about 10 s here)")
    ap.add_argument("--nb", type=int, default=192)
    ap.add_argument("--pairs", type=int, default=3, help="alternating pairs of the long run")
    ap.add_argument("--tiny-n", type=int, default=1000)
    ap.add_argument("--tiny-pairs", type=int, default=5)
    ap.add_argument("--inprocess-runs", type=int, default=6, help="run_all calls in this process (0: skip)")
    ap.add_argument("--skip-long", action="store_true", help="only the tiny run's fixed costs")
    ap.add_argument("--no-bytecode-cache", action="store_true",
                    help="leave PYTHONDONTWRITEBYTECODE as the environment has it")
    ap.add_argument("--observer-pairs", type=int, default=4,
                    help="alternating pairs of bare xhpl and an in-process run at --n (0: skip)")
    ap.add_argument("--only-observer", action="store_true", help="only figure 4 (the observer on a long run)")
    args = ap.parse_args()
    for name in ("n", "tiny_n"):
        if not 100 <= getattr(args, name) <= 40000:
            ap.error(f"--{name.replace('_', '-')} must be within 100..40000")
    if not 1 <= args.pairs <= 50 or not 1 <= args.tiny_pairs <= 100 or not 0 <= args.inprocess_runs <= 100 \
            or not 0 <= args.observer_pairs <= 50:
        ap.error("--pairs 1..50, --tiny-pairs 1..100, --inprocess-runs 0..100, --observer-pairs 0..50")

    xhpl = find_xhpl()
    if not xhpl:
        sys.exit("xhpl not found: run `.venv/bin/clusterbench build hpl` first")
    topo = discover(with_software=False).topology
    layout = layouts(1, topo.sockets, topo.cores_per_socket)["mpi"]
    tmp = Path(tempfile.mkdtemp(prefix="cb-overhead-"))
    env = dict(os.environ) | {"CLUSTERBENCH_DB": str(tmp / "results.db")}
    os.environ["CLUSTERBENCH_DB"] = env["CLUSTERBENCH_DB"]  # the in-process runs too
    if not args.no_bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    bare_cmd = mpirun_command(MpiLaunch(layout.ranks, layout.env(), bind_to="core"), [xhpl])
    bare_env = env | layout.env()
    print(f"xhpl {xhpl}; {layout.ranks} ranks, grid 1x{layout.ranks}; bytecode cache "
          f"{'as the environment has it' if args.no_bytecode_cache else 'on (' + env['PYTHONPYCACHEPREFIX'] + ')'}",
          flush=True)

    def bare_dir(n: int) -> Path:
        d = tmp / f"bare-{n}"
        if not d.exists():
            d.mkdir()
            (d / "HPL.dat").write_text(render_hpl_dat(HplInput(ns=[n], nbs=[args.nb], grids=[(1, layout.ranks)])))
        return d

    def tool_cmd(n: int) -> list[str]:
        return [sys.executable, "-m", "clusterbench", "bench", "hpl", "-p", f"n={n}", "-p", f"nb={args.nb}", "--json"]

    def timed(cmd: list[str], cwd: Path, run_env: dict) -> float:
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, env=run_env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t0

    def pairs(n: int, count: int, label: str) -> tuple[float, float]:
        bare, tool = [], []
        for i in range(count):
            bare.append(timed(bare_cmd, bare_dir(n), bare_env))
            tool.append(timed(tool_cmd(n), tmp, env))
            print(f"  {label} pair {i + 1}: mpirun xhpl {bare[-1]:.3f} s, clusterbench bench {tool[-1]:.3f} s "
                  f"({tool[-1] - bare[-1]:+.3f} s)", flush=True)
        return statistics.median(bare), statistics.median(tool)

    timed(tool_cmd(args.tiny_n), tmp, env)  # warms the bytecode cache, the build lookups and the store
    timed(bare_cmd, bare_dir(args.tiny_n), bare_env)
    if args.only_observer:
        observer(args.n, args.nb, args.observer_pairs, bare_cmd, bare_dir(args.n), bare_env)
        return

    print(f"tiny run N={args.tiny_n} NB={args.nb}, {args.tiny_pairs} alternating pairs:", flush=True)
    tb, tt = pairs(args.tiny_n, args.tiny_pairs, "tiny")
    print(f"  medians: mpirun xhpl {tb:.3f} s, clusterbench bench {tt:.3f} s")
    print(f"fixed cost of one CLI run: {tt - tb:.3f} s  (target < 0.3 s)", flush=True)

    for ahead in (False, True) if args.inprocess_runs else ():
        how = "prefetch_state() first, then " if ahead else ""
        first, rest = in_process(args.tiny_n, args.nb, args.inprocess_runs, ahead)
        print(f"in-process, {how}discover + expand + run_all, N={args.tiny_n}: first call {first:.3f} s, "
              f"then median {statistics.median(rest):.3f} s over {len(rest)} calls "
              f"(min {min(rest):.3f}, max {max(rest):.3f})" if rest else f"in-process: one call {first:.3f} s")
        if rest:
            print(f"fixed cost of one in-process run{' (state read ahead)' if ahead else ''}: "
                  f"{statistics.median(rest) - tb:.3f} s (minus the bare median)", flush=True)

    if not args.skip_long:
        print(f"long run N={args.n} NB={args.nb}, {args.pairs} alternating pairs:", flush=True)
        b, t = pairs(args.n, args.pairs, "long")
        print(f"  medians: mpirun xhpl {b:.2f} s, clusterbench bench {t:.2f} s")
        print(f"overhead ratio: {t / b:.3f}  (target <= 1.02)")
    if args.observer_pairs:
        observer(args.n, args.nb, args.observer_pairs, bare_cmd, bare_dir(args.n), bare_env)


def observer(n: int, nb: int, count: int, bare_cmd: list[str], cwd: Path, bare_env: dict) -> None:
    """Figure 4: bare xhpl against one in-process run, alternating; wall time and HPL's Gflop/s."""
    from clusterbench.bench.hpl.output import parse_hpl

    print(f"observer: N={n} NB={nb}, {count} alternating pairs of bare mpirun xhpl and one in-process run:",
          flush=True)
    in_process(min(n, 1000), nb, 1, False)  # pays the imports and the per-process caches before the pairs
    walls, flops = ([], []), ([], [])
    for i in range(count):
        t0 = time.perf_counter()
        out = subprocess.run(bare_cmd, cwd=cwd, env=bare_env, check=True, capture_output=True, text=True).stdout
        walls[0].append(time.perf_counter() - t0)
        flops[0].append(max(r.gflops for r in parse_hpl(out).results))
        seconds, gflops = in_process(n, nb, 1, False, figure=True)
        walls[1].append(seconds[0])
        flops[1].append(gflops[0])
        print(f"  pair {i + 1}: bare {walls[0][-1]:.2f} s {flops[0][-1]:.2f} Gflop/s, in-process "
              f"{walls[1][-1]:.2f} s {flops[1][-1]:.2f} Gflop/s (wall x{walls[1][-1] / walls[0][-1]:.3f}, "
              f"Gflop/s x{flops[1][-1] / flops[0][-1]:.3f})", flush=True)
    wall_ratio = statistics.median(walls[1]) / statistics.median(walls[0])
    flop_ratio = statistics.median(flops[1]) / statistics.median(flops[0])
    print(f"  medians: bare {statistics.median(walls[0]):.2f} s {statistics.median(flops[0]):.2f} Gflop/s, "
          f"in-process {statistics.median(walls[1]):.2f} s {statistics.median(flops[1]):.2f} Gflop/s")
    print(f"observer cost: wall x{wall_ratio:.3f} (target <= 1.02), HPL's Gflop/s x{flop_ratio:.3f} "
          "(target >= 0.99)", flush=True)


def in_process(n: int, nb: int, runs: int, ahead: bool, figure: bool = False) -> tuple:
    """Seconds of each `run_all` call with one planned run, in this process, as a tuner makes them;
    `ahead`: each trial first starts the node-state read (executor.prefetch_state), so that it
    overlaps the trial's discovery, expansion and store set-up. `figure`: (every call's seconds,
    every call's stored hpl_gflops) instead of (first, rest)."""
    from clusterbench.campaign.expand import expand
    from clusterbench.campaign.spec import BenchmarkBlock, Campaign
    from clusterbench.execution.executor import prefetch_state
    from clusterbench.execution.loop import QuietReporter, run_all
    from clusterbench.store.db import Store

    times, gflops = [], []
    for _ in range(runs):
        t0 = time.perf_counter()  # discovery and expansion included: a tuner plans each trial too
        if ahead:
            prefetch_state()
        info = discover()
        planned = expand(Campaign(name="bench", benchmarks=[BenchmarkBlock(benchmark="hpl",
                                                                             params={"n": n, "nb": nb})]), None, info)
        with Store() as store:
            store.remember_system(info)
            results = run_all(store, planned, QuietReporter(), system_id=info.fingerprint(), one_off=True, tags={})
        times.append(time.perf_counter() - t0)
        if results[0].status != "ok":
            sys.exit(f"in-process run {results[0].id} ended {results[0].status}: {results[0].reason}")
        gflops += [m.value for m in results[0].outcome.metrics if m.name == "hpl_gflops"][:1]
    return (times, gflops) if figure else (times[0], times[1:])


if __name__ == "__main__":
    main()
