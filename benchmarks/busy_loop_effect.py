"""What a one-core busy loop does to each benchmark here, and whether the disturbance flag sees it.

For each benchmark, PAIRS alternating pairs in one session: the run alone, then the same run beside a
`yes` burning one CPU (started detached, in a session of its own, as another user's job would be). Prints,
per benchmark: the headline's median alone and beside the loop, their ratio, and how many runs of each
kind were flagged `disturbed` (system/disturbance.py's thresholds) with the median share of the run's
CPUs that went to other processes. Run it on a quiet machine: the alone runs are the reference.

    .venv/bin/python benchmarks/busy_loop_effect.py [--pairs 3] [--only dgemm,stream]

Uses a store of its own in a temporary folder (the user's results are untouched).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "clusterbench"]
# benchmark -> (parameters, headline metric, its labels' filter, higher is better)
CASES = {
    "dgemm": (["-p", "ranks=2", "-p", "n=2000"], "dgemm_gflops", {}, True),
    "stream": (["-p", "ranks=2"], "stream_triad", {}, True),
    "clock": ([], "clock_gflops", {}, True),
    "pingpong": (["-p", "min_log2=20", "-p", "max_log2=20"], "pingpong_bandwidth", {"bytes": 1 << 20}, True),
    "hpl": (["-p", "n=4000", "-p", "ranks=2"], "hpl_gflops", {}, True),
}


def one_run(name: str, params: list[str], env: dict) -> dict | None:
    out = subprocess.run([*CLI, "bench", name, *params, "--json"], capture_output=True, text=True, env=env,
                         timeout=900)
    if out.returncode != 0:
        print(f"  {name}: exit {out.returncode}: {out.stderr.strip()[-200:]}", file=sys.stderr)
        return None
    runs = json.loads(out.stdout)
    return runs[0] if isinstance(runs, list) else runs


def headline(run: dict, metric: str, labels: dict, higher: bool) -> float | None:
    values = [m["value"] for m in run["metrics"] if m["name"] == metric and m.get("valid", True)
              and all((m.get("labels") or {}).get(k) == v for k, v in labels.items())]
    return (max(values) if higher else min(values)) if values else None


def others_percent(run: dict) -> float | None:
    nodes = (run["facts"].get("disturbance") or {}).get("nodes") or {}
    values = [n.get("others_percent") for n in nodes.values() if isinstance(n, dict) and n.get("judged")]
    return max(values) if values else None


class BusyLoop:
    def __enter__(self):
        self.tag = f"cb-busy-effect-{os.getpid()}"
        subprocess.run(["sh", "-c", f"setsid bash -c 'exec -a {self.tag} yes >/dev/null' </dev/null "
                                    ">/dev/null 2>&1 &"], check=True)
        time.sleep(0.3)
        return self

    def __exit__(self, *_):
        subprocess.run(["pkill", "-f", self.tag], capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3, choices=range(1, 21), metavar="1..20")
    parser.add_argument("--only", default=",".join(CASES), help="benchmarks, comma-separated")
    args = parser.parse_args()
    chosen = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in CASES]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; known: {', '.join(CASES)}")
    folder = tempfile.mkdtemp(prefix="cb-busy-effect-")
    env = dict(os.environ, XDG_DATA_HOME=folder, CLUSTERBENCH_DISTURBANCE="flag",
               PYTHONPATH=str(ROOT / "src"))
    env.pop("CLUSTERBENCH_DB", None)
    print(f"{args.pairs} alternating pairs per benchmark (alone, then beside a 1-core `yes`); store in {folder}")
    rows = []
    for name in chosen:
        params, metric, labels, higher = CASES[name]
        got: dict[str, list] = {"alone": [], "loop": []}
        for _ in range(args.pairs):
            for kind in ("alone", "loop"):
                if kind == "loop":
                    with BusyLoop():
                        run = one_run(name, params, env)
                else:
                    run = one_run(name, params, env)
                if run is not None:
                    got[kind].append((headline(run, metric, labels, higher), others_percent(run),
                                      bool(run["facts"].get("disturbed"))))
        rows.append((name, metric, got))
    print(f"\n{'benchmark':10} {'alone':>10} {'w/ loop':>10} {'ratio':>6} {'flagged':>8} {'flagged':>8} "
          f"{'others%':>8} {'others%':>8}")
    print(f"{'':10} {'median':>10} {'median':>10} {'':>6} {'alone':>8} {'w/ loop':>8} {'alone':>8} {'w/ loop':>8}")
    for name, _metric, got in rows:
        def med(kind: str, i: int, got: dict = got) -> float | None:
            values = [v[i] for v in got[kind] if v[i] is not None]
            return statistics.median(values) if values else None
        alone, loop = med("alone", 0), med("loop", 0)
        ratio = f"{loop / alone:.2f}" if alone and loop else "-"
        flagged = {k: f"{sum(v[2] for v in got[k])}/{len(got[k])}" for k in got}
        print(f"{name:10} {alone or 0:10.4g} {loop or 0:10.4g} {ratio:>6} {flagged['alone']:>8} "
              f"{flagged['loop']:>8} {med('alone', 1) or 0:8.1f} {med('loop', 1) or 0:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
