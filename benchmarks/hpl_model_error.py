"""How well the HPL model (bench/hpl/model.py, rates from tune/rates.py) predicts real xhpl runs.

Runs the real xhpl, through `clusterbench campaign run` into a temporary store, in three steps:

1. the inputs: the built-in `dgemm` kernel (every core busy) and `pingpong` kernel; the model
   predicts from these alone (uncalibrated, efficiency tune.rates.UNCALIBRATED_EFFICIENCY);
2. calibration: small runs (N <= --split) of every grid and NB, to which rates_for fits
   efficiency, nb_half, panel_ratio and thread_loss;
3. the held-out runs (N > --split), predicted before they run from what steps 1-2 stored.

It prints measured vs predicted Gflop/s for the held-out runs with the relative error of the
uncalibrated and of the calibrated model, then their median and maximum absolute error (and the
calibrated model's error on its own calibration runs).

Here (default): grids 1x2 and 2x1, and 1 rank x 2 OpenMP threads (OpenBLAS's OpenMP build), NB
64..256, N 2000..8000 (a few minutes on 2 cores). `--vc NAME`: the same over two nodes of a
virtual cluster, one rank per node (grids 1x2 and 2x1 over TCP); the cluster is brought up with
scripts/virtual-cluster (as root, nodes NAME1 and NAME2, no Slurm) unless it is up already, and
always brought down again. The virtual nodes share this machine's cores, so their absolute
figures mean little, but the prediction error does. `--hosts SPEC` uses nodes you have (a node
set such as node[1-2], or a hostfile).

    .venv/bin/python benchmarks/hpl_model_error.py
    .venv/bin/python benchmarks/hpl_model_error.py --vc modelvc
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from clusterbench.bench.hpl.model import predict  # noqa: E402
from clusterbench.bench.hpl.planner import hpl_flops  # noqa: E402
from clusterbench.store.db import Store  # noqa: E402
from clusterbench.tune.rates import hpl_points, rates_for, system_ids  # noqa: E402

VC_SCRIPT = ROOT / "scripts" / "virtual-cluster"
THREADED_BLAS = "openblas-openmp"


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns", default="2000,4000,6000,8000", help="N of the 1x2 runs")
    ap.add_argument("--other-ns", default="4000,8000", help="N of the other grids/layouts")
    ap.add_argument("--nbs", default="64,128,192,256")
    ap.add_argument("--split", type=int, default=4000, help="runs with N <= this calibrate, the others are predicted")
    ap.add_argument("--repeats", type=int, default=1, help="repeats of the held-out runs (their spread is the noise)")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--vc", metavar="NAME", help="a two-node virtual cluster (brought up if it is not)")
    where.add_argument("--hosts", help="node set or hostfile of two nodes (one rank per node)")
    ap.add_argument("--keep", type=Path, help="copy the store here at the end (to look at the runs again)")
    ap.add_argument("--subnet", default="10.79.0", help="the virtual cluster's subnet when this script brings it up")
    args = ap.parse_args()
    for name in ("ns", "other_ns", "nbs"):
        values = [int(v) for v in getattr(args, name).split(",") if v.strip()]
        if not values or any(v <= 0 or v > 20000 for v in values):
            ap.error(f"--{name.replace('_', '-')}: positive integers up to 20000")
        setattr(args, name, values)
    if not 1 <= args.repeats <= 5:
        ap.error("--repeats: 1 to 5")
    return args


def layouts(multi: bool) -> list[tuple[str, dict, str]]:
    """(block name, params, which N list) of each grid/layout measured."""
    if multi:
        one = {"nodes": 2, "ranks": 2, "threads": 1, "bind_to": "none"}
        return [("g1x2", one | {"p": 1, "q": 2}, "ns"), ("g2x1", one | {"p": 2, "q": 1}, "other_ns")]
    return [("g1x2", {"ranks": 2, "threads": 1, "p": 1, "q": 2}, "ns"),
            ("g2x1", {"ranks": 2, "threads": 1, "p": 2, "q": 1}, "other_ns"),
            ("t2", {"ranks": 1, "threads": 2, "p": 1, "q": 1, "blas": THREADED_BLAS}, "other_ns")]


def campaign(name: str, blocks: list[dict], hosts: str | None, repeats: int = 1) -> str:
    spec: dict = {"name": name, "timeout": "10m", "repeats": repeats, "benchmarks": blocks}
    if hosts:
        spec["cluster"] = {"launcher": "mpirun", "hosts": hosts, "interconnect": "tcp"}
    return json.dumps(spec, indent=1)  # JSON is YAML


def run_campaign(folder: Path, name: str, text: str, env: dict) -> float:
    path = folder / f"{name}.yaml"
    path.write_text(text)
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "clusterbench", "campaign", "run", str(path)], env=env,
                         capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        sys.exit(f"campaign {name} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return time.monotonic() - start


def hpl_blocks(args, multi: bool, calibration: bool) -> list[dict]:
    blocks = []
    for block, params, which in layouts(multi):
        ns = [n for n in getattr(args, which) if (n <= args.split) == calibration]
        if ns:
            blocks.append({"benchmark": "hpl", "name": block, "params": params,
                           "space": {"n": ns, "nb": args.nbs}})
    return blocks


def system_for(folder: Path, name: str, env: dict):
    """The SystemInfo the campaign's runs were stored under (the compute nodes' facts on a cluster)."""
    from clusterbench.campaign.load import load_runs

    old = os.environ.get("CLUSTERBENCH_DB")
    os.environ["CLUSTERBENCH_DB"] = env["CLUSTERBENCH_DB"]
    try:
        return load_runs(folder / f"{name}.yaml").system
    finally:
        if old is None:
            os.environ.pop("CLUSTERBENCH_DB", None)
        else:
            os.environ["CLUSTERBENCH_DB"] = old


def vc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(VC_SCRIPT), *args], capture_output=True, text=True, timeout=300)


def main() -> None:
    args = parse_args()
    brought_up = None
    hosts = args.hosts
    if args.vc:
        state = Path("/run/clusterbench-vc") / args.vc
        if not (state / "size").exists():
            out = vc("up", "2", "--name", args.vc, "--prefix", args.vc, "--subnet", args.subnet, "--no-slurm")
            if out.returncode != 0:
                vc("down", "--name", args.vc)
                sys.exit(f"virtual-cluster up failed: {out.stdout[-2000:]}{out.stderr[-2000:]}")
            brought_up = args.vc
        prefix = (state / "prefix").read_text().strip()
        hosts = f"{prefix}[1-2]"
    folder = Path(tempfile.mkdtemp(prefix="hpl-model-", dir="/var/tmp"))  # outside /tmp: nodes share it
    try:
        measure(args, folder, hosts)
        if args.keep:
            with Store(folder / "results.db", read_only=True) as store:
                store.backup(args.keep, force=True)
            print(f"store kept in {args.keep}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if brought_up:
            down = vc("down", "--name", brought_up)
            print(f"virtual cluster {brought_up} down (exit {down.returncode})")


def measure(args, folder: Path, hosts: str | None) -> None:
    multi = hosts is not None
    env = dict(os.environ) | {"CLUSTERBENCH_DB": str(folder / "results.db")}
    nodes = 2 if multi else 1
    where = f"2 nodes ({hosts}), one rank per node" if multi else "this machine"
    print(f"HPL model error on {where}; calibrate on N <= {args.split}, predict N > {args.split}")
    inputs = ([{"benchmark": "dgemm", "params": {"n": 2000, "nodes": 2, "ranks": 2, "bind_to": "none"}},
               {"benchmark": "pingpong", "params": {"nodes": 2, "bind_to": "none", "max_log2": 22}}] if multi else
              [{"benchmark": "dgemm", "params": {"n": 2000, "ranks": 2}}, {"benchmark": "pingpong"}])
    took = run_campaign(folder, "model-inputs", campaign("model-inputs", inputs, hosts), env)
    system = system_for(folder, "model-inputs", env)
    with Store(env["CLUSTERBENCH_DB"], read_only=True) as store:
        uncal, uncal_src = rates_for(store, system, nodes)
    print(f"inputs ({took:.0f} s): {uncal_src}")
    took = run_campaign(folder, "model-cal", campaign("model-cal", hpl_blocks(args, multi, True), hosts), env)
    with Store(env["CLUSTERBENCH_DB"], read_only=True) as store:
        cal, cal_src = rates_for(store, system, nodes)
        cal_points = hpl_points(store, system_ids(store, system))
    print(f"calibration ({took:.0f} s, {len(cal_points)} runs): {cal_src}")
    print(f"  rates: core {cal.core_gflops:.1f} Gflop/s, latency {cal.latency_s * 1e6:.2f} us, bandwidth "
          f"{cal.bandwidth_bytes_s / 1e9:.2f} GB/s, nb_half {cal.nb_half:g}, panel_ratio {cal.panel_ratio:g}, "
          f"thread_loss {cal.thread_loss:g}, efficiency {cal.efficiency:.3f}")
    took = run_campaign(folder, "model-test", campaign("model-test", hpl_blocks(args, multi, False), hosts,
                                                       args.repeats), env)
    with Store(env["CLUSTERBENCH_DB"], read_only=True) as store:
        test_ids = {r["id"] for r in store.runs(campaign="model-test") if r["status"] == "ok"}
        points = [pt for pt in hpl_points(store, system_ids(store, system)) if pt.run_id in test_ids]
    print(f"held-out runs ({took:.0f} s): {len(points)} results\n")
    header = (f"{'N':>6} {'NB':>4} {'grid':>5} {'thr':>3} {'measured':>9} {'uncal.':>8} {'err':>7} "
              f"{'calib.':>8} {'err':>7}")
    print(header + "\n" + "-" * len(header))
    errors_u, errors_c, groups = [], [], {}
    for pt in sorted(points, key=lambda x: (x.problem.p, x.problem.threads_per_rank, x.problem.n, x.problem.nb)):
        pr = pt.problem
        measured = hpl_flops(pr.n) / pt.seconds / 1e9
        pu, pc = predict(pr, uncal).gflops, predict(pr, cal).gflops
        eu, ec = pu / measured - 1, pc / measured - 1
        errors_u.append(abs(eu))
        errors_c.append(abs(ec))
        groups.setdefault((pr.n, pr.nb, pr.p, pr.q, pr.threads_per_rank), []).append(measured)
        print(f"{pr.n:>6} {pr.nb:>4} {f'{pr.p}x{pr.q}':>5} {pr.threads_per_rank:>3} {measured:>9.2f} {pu:>8.2f} "
              f"{100 * eu:>+6.1f}% {pc:>8.2f} {100 * ec:>+6.1f}%")
    in_sample = [abs(predict(pt.problem, cal).seconds / pt.seconds - 1) for pt in cal_points]
    print()
    if errors_c:
        print(f"uncalibrated: median |error| {100 * statistics.median(errors_u):.1f}%, max {100 * max(errors_u):.1f}%")
        print(f"calibrated:   median |error| {100 * statistics.median(errors_c):.1f}%, max {100 * max(errors_c):.1f}% "
              f"(held-out, {len(errors_c)} results)")
    if in_sample:
        print(f"calibrated on its own {len(in_sample)} calibration runs (time): median |error| "
              f"{100 * statistics.median(in_sample):.1f}%, max {100 * max(in_sample):.1f}%")
    spreads = [max(v) / min(v) - 1 for v in groups.values() if len(v) > 1]
    if spreads:
        print(f"noise: repeats of one held-out point differ by median {100 * statistics.median(spreads):.1f}%, "
              f"max {100 * max(spreads):.1f}%")


if __name__ == "__main__":
    main()
