#!/usr/bin/env python3
"""The budgeted tuner against an exhaustive sweep of the same space (issue 20, item 5).

1. Sweep: every point of a defined space at one N, each `--repeats` times (default 3), through the
   tuner's own trial path (tune.trials.TrialEvaluator: one stored `hpl` run per trial), timed. Its best
   configuration is the one with the best median.
2. Tuner: for each budget fraction (default 5%, 10%, 15% of the sweep's wall time) and each seed
   (`--seeds`, default 3), `clusterbench tune hpl`'s session (tune.session) with its top level at the
   sweep's N and that budget.
3. Re-measure: each tuner's final configuration and the sweep's best, alternately (A B A B ...: a
   drift of this shared machine hits both alike), `--remeasure` times each (default 5); the figure is
   median(tuner's) / median(sweep best's). Target: >= 0.99 at 15% for every seed.

Default space (144 points): nb {96,128,192,256} x grid {mpi 1xC, mpi Cx1, the first hybrid 1x1} x blas
{openblas-pthread, blis-openmp} (both threaded variants work for one thread per rank and for a
threaded rank) x bcast {1rg,1rm,2rm} x depth {0,1}, at N=6000 (one solve about 1-2 s on the 2-core
development VM). Full run on that VM: the sweep 432 trials, about 20-25 minutes; the tuner runs
0.9 x the sweep's time in total (3 seeds x 30%), another 20 minutes; the re-measurements about 5
minutes: about 50 minutes in all. `--quick` (N=1200, 16 points x 2 repeats, one seed, a 60% budget
only: a smaller one is less than the search's first round on so few points;
3 re-measurements) takes 1-2 minutes and checks the plumbing, not the figure.

`--campaign FILE` runs it on the site of a campaign file's `cluster:` section (the virtual cluster:
scripts/virtual-cluster) with the space of its hpl block (keep it small).

    .venv/bin/python benchmarks/tuner_vs_sweep.py [--n 6000] [--seeds 3] [--repeats 3] [--remeasure 5]
        [--fractions 0.05,0.10,0.15] [--quick] [--campaign FILE [--block NAME]] [--db PATH]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

HPL_DEFAULTS = {"bcast": "1rm", "depth": 1, "pfact": "right"}  # HPL.dat's tuned defaults (bench/hpl/input.py)


def default_space(quick: bool, lays: dict) -> dict:
    hybrid = next((name for name, lay in lays.items() if name != "mpi"), None)
    mpi = lays["mpi"]
    grids = [f"mpi 1x{mpi.ranks}"] + ([f"mpi {mpi.ranks}x1"] if mpi.ranks > 1 else [])
    if hybrid:
        grids.append(f"{hybrid} {lays[hybrid].ranks}x1" if lays[hybrid].ranks > 1 else f"{hybrid} 1x1")
    if quick:
        return {"nb": [64, 128], "grid": [grids[0], grids[-1]], "blas": ["openblas-pthread"], "bcast": ["1rm", "2rm"],
                "depth": [0, 1]}
    return {"nb": [96, 128, 192, 256], "grid": grids, "blas": ["openblas-pthread", "blis-openmp"],
            "bcast": ["1rg", "1rm", "2rm"], "depth": [0, 1]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--remeasure", type=int, default=None)
    ap.add_argument("--fractions", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--campaign", type=Path)
    ap.add_argument("--block")
    ap.add_argument("--db", help="results database (default: a new temporary one)")
    args = ap.parse_args()
    q = args.quick
    n = args.n or (1200 if q else 6000)
    seeds = args.seeds or (1 if q else 3)
    repeats = args.repeats or (2 if q else 3)
    remeasure = args.remeasure or (3 if q else 5)
    fractions = [float(f) for f in (args.fractions or ("0.6" if q else "0.05,0.10,0.15")).split(",")]
    tmp = tempfile.mkdtemp(prefix="tuner-vs-sweep-")
    os.environ["CLUSTERBENCH_DB"] = args.db or str(Path(tmp) / "results.db")

    from clusterbench.bench.hpl.tuning import distinct_layouts
    from clusterbench.errors import UserInputError
    from clusterbench.launch.site import LOCAL
    from clusterbench.store.db import Store
    from clusterbench.system.discover import discover
    from clusterbench.tune.search import Config
    from clusterbench.tune.session import TuneOptions, prepare

    tag = uuid.uuid4().hex[:6]  # fresh session names: every trial here is measured, none replayed
    site, site_key = LOCAL, ""
    if args.campaign:
        from clusterbench.cli.tune_cmd import _from_campaign

        base, site, site_key, system = _from_campaign(args.campaign, args.block, TuneOptions())
        space = {k: v if isinstance(v, list) else [v] for k, v in base.space.items()}
        fixed, n = base.fixed, args.n or base.n or n
        env, timeout = base.env, base.timeout_s
    else:
        system = discover()
        space, fixed, env, timeout = default_space(q, distinct_layouts(system, 1)), {}, {}, None
    for knob, value in HPL_DEFAULTS.items():  # the tuner's default knobs, fixed: its space is the sweep's
        space.setdefault(knob, [value])
    dims = list(space)
    points = [Config.of(dict(zip(dims, combo, strict=True))) for combo in itertools.product(*space.values())]
    print(f"space: {len(points)} points ({' x '.join(f'{k} {len(v)}' for k, v in space.items())}) at N={n}; "
          f"sweep {repeats} repeats; tuner budgets {fractions} x sweep time, {seeds} seed(s); "
          f"re-measure median of {remeasure}; db {os.environ['CLUSTERBENCH_DB']}", flush=True)

    def session(name: str, levels: int, budget: float, seed: int = 0):
        opts = TuneOptions(budget_s=budget, n=n, space={k: list(v) for k, v in space.items()}, fixed=dict(fixed),
                           levels=levels, seed=seed, repeats=3, name=name, env=dict(env), timeout_s=timeout)
        return prepare(store, opts, system, site=site, site_key=site_key, system_id=system.fingerprint())

    with Store() as store:
        store.remember_system(system)
        sweep = session(f"sweep-{tag}", 1, 5e5)
        sweep.evaluator.preflight(points[0])
        t0 = time.monotonic()
        values: dict[Config, list[float]] = {}
        for r in range(repeats):  # repeat-major, as campaigns run
            for c in points:
                values.setdefault(c, []).append(sweep.evaluator.evaluate(c, 0, r).value)
        sweep_s = time.monotonic() - t0
        medians = {c: statistics.median(v) for c, v in values.items() if all(x == x for x in v)}
        best = max(medians, key=medians.get)
        print(f"sweep: {len(points) * repeats} trials in {sweep_s:.0f} s; best {best.key()} "
              f"median {medians[best]:.2f} Gflop/s", flush=True)

        remeasured = session(f"remeasure-{tag}", 1, 5e5)
        rows = []
        for fraction in fractions:
            for seed in range(seeds):
                try:
                    tuner = session(f"tuner-{tag}-{fraction}-{seed}", 3, fraction * sweep_s, seed)
                except UserInputError as exc:
                    print(f"  budget {fraction:.0%} seed {seed}: refused: {exc.message}", flush=True)
                    rows.append((fraction, seed, "(refused)", float("nan"), float("nan"), float("nan"), 0.0))
                    continue
                t1 = time.monotonic()
                result = tuner.run()
                took = time.monotonic() - t1
                if result.best is None:
                    rows.append((fraction, seed, "(none)", float("nan"), float("nan"), float("nan"), took))
                    continue
                pick = Config.of(result.best.config.as_dict())
                a, b = [], []
                for r in range(remeasure):
                    a.append(remeasured.evaluator.evaluate(pick, 0, r).value)
                    b.append(remeasured.evaluator.evaluate(best, 0, r).value)
                ma, mb = statistics.median(a), statistics.median(b)
                rows.append((fraction, seed, pick.key(), ma, mb, ma / mb, took))
                print(f"  budget {fraction:.0%} seed {seed}: {pick.key()} {ma:.2f} vs {mb:.2f} Gflop/s "
                      f"= {ma / mb:.3f} (tuner took {took:.0f} s, {result.stopped})", flush=True)

    print("\nbudget  seed  ratio   tuner Gflop/s  sweep-best Gflop/s  tuner s  configuration")
    for fraction, seed, key, ma, mb, ratio, took in rows:
        print(f"{fraction:6.0%}  {seed:4d}  {ratio:5.3f}  {ma:13.2f}  {mb:18.2f}  {took:7.0f}  {key}")
    for fraction in fractions:
        got = [r for r in rows if r[0] == fraction]
        ok = sum(1 for r in got if r[5] >= 0.99)
        print(f"budget {fraction:.0%}: {ok} of {len(got)} seeds reach >= 0.99 of the sweep's best "
              f"(sweep {sweep_s:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
