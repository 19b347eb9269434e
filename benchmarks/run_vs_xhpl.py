#!/usr/bin/env python3
"""`clusterbench run` with its default budget against the best standalone HPL run by hand beside it (issue 20).

Each pair: (A) `clusterbench run --json` in a new process, with its default budget; (B) the same xhpl
with the same HPL.dat as the run's standalone HPL (its N, NB, grid, layout and knobs, read from A's
plan), started by hand with mpirun, `--bare-repeats` times (default 1). Pairs alternate A B A B so that
drift of this noisy machine hits both. The first pair starts from nothing: an empty store and an
empty build cache, so A includes building xhpl (a fresh machine); later pairs reuse both (a second
run). The figure is A's Rmax / B's Gflop/s, per pair and as the ratio of the medians (target >= 0.95).

`--reference nb=128,bcast=2rm,...` runs B in another configuration (e.g. the tuner's best) at A's N.

    .venv/bin/python benchmarks/run_vs_xhpl.py [--pairs 3] [--budget 2m] [--reference K=V,...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clusterbench.bench.hpl.benchmark import knob_input
from clusterbench.bench.hpl.input import HplInput, render_hpl_dat
from clusterbench.bench.layout import layouts
from clusterbench.launch.mpirun import MpiLaunch, mpirun_command
from clusterbench.system.discover import discover

RESULT = re.compile(r"^W\S+\s+\d+\s+\d+\s+\d+\s+\d+\s+\S+\s+(\S+)\s*$", re.M)


def parse_reference(text: str | None) -> dict:
    out: dict = {}
    for item in filter(None, (text or "").split(",")):
        key, _, value = item.partition("=")
        out[key.strip()] = int(value) if value.strip().isdigit() else value.strip()
    return out


def bare_xhpl(xhpl: str, point: dict, workdir: Path) -> tuple[float, float]:
    """Gflop/s and wall seconds of xhpl with this point's HPL.dat, started by hand."""
    topo = discover(with_software=False).topology
    lay = layouts(1, topo.sockets, topo.cores_per_socket)[point.get("layout", "mpi")]
    inp = HplInput(ns=[point["n"]], nbs=[point["nb"]], grids=[(point["p"], point["q"])], **knob_input(point))
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "HPL.dat").write_text(render_hpl_dat(inp))
    env = dict(os.environ) | lay.env()
    blas = point.get("blas")
    if blas and blas != "default":
        env["LD_LIBRARY_PATH"] = f"/usr/lib/x86_64-linux-gnu/{blas}:" + env.get("LD_LIBRARY_PATH", "")
    bind = "core" if lay.threads_per_rank == 1 else "none"
    cmd = mpirun_command(MpiLaunch(lay.ranks, lay.env(), bind_to=bind), [xhpl])
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - t0
    rates = [float(x) for x in RESULT.findall(out)]
    if not rates or "FAILED" in out:
        raise SystemExit(f"bare xhpl gave no valid result:\n{out[-2000:]}")
    return max(rates), wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--budget", default=None, help="passed to `run --budget` (default: run's own default)")
    ap.add_argument("--bare-repeats", type=int, default=1)
    ap.add_argument("--reference", default=None, help="B's configuration, e.g. nb=128,bcast=2rm (default: A's)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cb-run-vs-xhpl-"))
    env = dict(os.environ) | {"CLUSTERBENCH_DB": str(tmp / "results.db"), "CLUSTERBENCH_CACHE": str(tmp / "cache")}
    rows = []
    for i in range(args.pairs):
        cmd = [sys.executable, "-m", "clusterbench", "run", "--json"]
        cmd += ["--budget", args.budget] if args.budget else []
        t0 = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp)
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
            return 1
        summary = json.loads(done.stdout)
        hpl_runs = [r for r in summary["runs"] if "-hpl-" in r["id"]]
        plan = summary.get("hpl_plan") or {}
        point = dict(plan.get("point") or {})
        if not point:
            print("the run had no standalone HPL; nothing to compare", summary["skipped"])
            return 1
        point |= parse_reference(args.reference)
        xhpl = plan["binary"]
        bare = [bare_xhpl(xhpl, point, tmp / f"bare-{i}-{k}") for k in range(args.bare_repeats)]
        best_bare = max(g for g, _ in bare)
        rmax = summary["rmax_gflops"]
        rows.append((rmax, best_bare, wall, bare[0][1]))
        print(f"pair {i + 1} ({'fresh: empty store and build cache' if i == 0 else 'second run'}): "
              f"run {wall:.0f} s, Rmax {rmax:.2f} Gflop/s ({summary['hpl']['benchmark']}, N={point['n']}, "
              f"{summary.get('hpl_config_source')}); bare xhpl {best_bare:.2f} Gflop/s in {bare[0][1]:.0f} s; "
              f"ratio {rmax / best_bare:.3f}; xhpl run ok: {all(r['valid'] for r in hpl_runs)}", flush=True)
    med_a = statistics.median(r[0] for r in rows)
    med_b = statistics.median(r[1] for r in rows)
    print(f"medians over {len(rows)} pairs: run Rmax {med_a:.2f} / bare xhpl {med_b:.2f} Gflop/s = "
          f"{med_a / med_b:.3f} (target >= 0.95); fresh pair {rows[0][0] / rows[0][1]:.3f}, "
          f"run wall times {', '.join(f'{r[2]:.0f}' for r in rows)} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
