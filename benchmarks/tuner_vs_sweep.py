#!/usr/bin/env python3
"""The budgeted tuner against an exhaustive sweep of the same space (issue 20 item 5, issue 34 deliverable 3).

1. Sweep: every point of a space at one N, each `--repeats` times (default 3), repeat-major, through the
   tuner's own trial path (tune.trials.TrialEvaluator: one stored `hpl` run per trial), timed. A trial that
   does not count (analysis/flags.counts: disturbed by other work, suspect, ...) is measured again, at
   most twice more. Its best is the best median.
2. Tuner: for each budget fraction (default 10% and 15% of the sweep's wall time) and each seed (`--seeds`,
   default 5), `clusterbench tune hpl`'s session (tune.session: levels, promotion by layout, pairing) with
   its top level at the sweep's N and that budget. Its time fraction is its wall time / the sweep's.
3. Re-measure: each tuner's pick and the sweep's best, alternately (A B A B ...: a drift of this shared
   machine hits both alike), `--remeasure` times each (default 5; trials that do not count are measured
   again). The ratio is median(pick's) / median(sweep best's); the same configuration is 1 by definition.
   The noise floor is the sweep best's own spread in its re-measurements (median absolute deviation /
   median, pooled over seeds): a ratio below 0.99 but within that floor of 1 is "within noise", reported
   beside the strict count. Target: ratio >= 0.99 at <= 15% of the sweep's time in >= 4 of 5 seeds.

Spaces (`--space`, repeatable; default both built-in ones):

- `layouts`: 36 points, nb {128,192,256} x grid {mpi 1xC, mpi Cx1, hybrid-node} x blas {openblas-pthread,
  blis-openmp} (threaded both: every layout takes them) x depth {0,1}, at N=8000. On the 2-core VM the
  layouts' order changes with N (two ranks win at N~3000, one rank of two threads at N=8000): the space
  promotion by layout is for. Its sweep took 955 s (3 repeats) on that VM.
- `knobs`: 24 points, nb {96,128,192,256} x grid {mpi 1xC, mpi Cx1} x depth {0,1,2}, at N=6000 (serial
  and threaded BLAS are both paired with one thread per rank: openblas-pthread is used).
- a user-given space: a JSON object (`--space '{"nb": [64, 128], "grid": ["mpi 1x2"], "n": 5000}'`) or a
  JSON file of one; `n` is its N (default `--n`, else 6000). Knobs it does not name are HPL.dat's tuned
  defaults, fixed (bcast 1rm, depth 1, pfact right); the BLAS, when not named, openblas-pthread.

Time on the 2-core VM: `layouts` about 16 min sweep + 20 min tuner (5 seeds x 25%) + 15 min re-measure;
`knobs` about 6 + 8 + 8 min: about 75 minutes for both. `--quick` (N=1200, 2 sweep repeats, 3
re-measurements, one seed) checks the plumbing in a few minutes, not the figure.

    .venv/bin/python benchmarks/tuner_vs_sweep.py [--space layouts --space knobs --space FILE|JSON]
        [--seeds 5] [--fractions 0.10,0.15] [--repeats 3] [--remeasure 5] [--n N] [--quick]
        [--campaign FILE [--block NAME]] [--db PATH] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

HPL_DEFAULTS = {"bcast": "1rm", "depth": 1, "pfact": "right"}  # HPL.dat's tuned defaults (bench/hpl/input.py)
TARGET = 0.99
MAX_RETRIES = 2  # a trial that does not count (disturbed) is measured again at most this many times
MAX_POINTS = 2000  # a sweep larger than this is refused: it would take days


def builtin_space(name: str, system, quick: bool) -> tuple[dict, int]:
    """A built-in space (its dimensions) and its N."""
    from clusterbench.bench.hpl.tuning import every_layout

    lays = every_layout(system, 1)
    mpi = lays["mpi"]
    grids = [f"mpi 1x{mpi.ranks}"] + ([f"mpi {mpi.ranks}x1"] if mpi.ranks > 1 else [])
    if name == "layouts":
        hyb = lays["hybrid-node"]
        space = {"nb": [128, 192, 256], "grid": grids + [f"hybrid-node 1x{hyb.ranks}"],
                 "blas": ["openblas-pthread", "blis-openmp"], "depth": [0, 1]}
        return space, 1200 if quick else 8000
    if name == "knobs":
        return {"nb": [96, 128, 192, 256], "grid": grids, "depth": [0, 1, 2], "blas": ["openblas-pthread"]}, \
            1200 if quick else 6000
    raise SystemExit(f"--space {name}: not a built-in space (layouts, knobs), a JSON object or a JSON file")


def user_space(text: str, default_n: int) -> tuple[str, dict, int]:
    path = Path(text)
    raw = path.read_text() if not text.lstrip().startswith("{") and path.is_file() else text
    try:
        space = json.loads(raw)
    except ValueError as exc:
        raise SystemExit(f"--space {text[:60]}: not JSON ({exc})") from None
    if not isinstance(space, dict) or not space:
        raise SystemExit(f"--space {text[:60]}: give a JSON object of dimension -> list of values")
    n = int(space.pop("n", default_n))
    name = path.stem if raw is not text else "user"
    return name, {k: v if isinstance(v, list) else [v] for k, v in space.items()}, n


def median_spread(values: list[float]) -> float:
    """Median absolute deviation / median: the noise of repeated measurements of one configuration."""
    m = statistics.median(values)
    return statistics.median(abs(v - m) for v in values) / m if m > 0 else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--space", action="append", help="layouts, knobs, a JSON object or a JSON file (repeatable)")
    ap.add_argument("--n", type=int, default=None, help="N of a user-given space without its own n")
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--remeasure", type=int, default=None)
    ap.add_argument("--fractions", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--campaign", type=Path)
    ap.add_argument("--block")
    ap.add_argument("--db", help="results database (default: a new temporary one)")
    ap.add_argument("--json", type=Path, help="write every figure to this JSON file too")
    args = ap.parse_args()
    q = args.quick
    seeds = args.seeds or (1 if q else 5)
    repeats = args.repeats or (2 if q else 3)
    remeasure = args.remeasure or (3 if q else 5)
    fractions = [float(f) for f in (args.fractions or "0.10,0.15").split(",")]
    if not (1 <= seeds <= 100 and 2 <= repeats <= 20 and 1 <= remeasure <= 50
            and all(0 < f <= 1 for f in fractions) and len(fractions) <= 10):
        raise SystemExit("out of bounds: --seeds 1..100, --repeats 2..20, --remeasure 1..50, fractions in (0, 1]")
    tmp = tempfile.mkdtemp(prefix="tuner-vs-sweep-")
    os.environ["CLUSTERBENCH_DB"] = args.db or str(Path(tmp) / "results.db")

    from clusterbench.errors import UserInputError
    from clusterbench.launch.site import LOCAL
    from clusterbench.store.db import Store
    from clusterbench.system.discover import discover
    from clusterbench.tune.session import TuneOptions

    site, site_key, env, timeout, fixed = LOCAL, "", {}, None, {}
    spaces: list[tuple[str, dict, int]] = []
    if args.campaign:
        from clusterbench.tune.campaign_block import options_from_campaign

        base, site, site_key, system = options_from_campaign(args.campaign, args.block, TuneOptions(), "hpl")
        spaces.append((args.campaign.stem, {k: v if isinstance(v, list) else [v] for k, v in base.space.items()},
                       args.n or base.n or 6000))
        fixed, env, timeout = base.fixed, base.env, base.timeout_s
    else:
        system = discover()
        for text in args.space or ["layouts", "knobs"]:
            if text in ("layouts", "knobs"):
                spaces.append((text, *builtin_space(text, system, q)))
            else:
                spaces.append(user_space(text, args.n or (1200 if q else 6000)))
    print(f"db {os.environ['CLUSTERBENCH_DB']}; sweep {repeats} repeats; tuner budgets {fractions} x sweep time, "
          f"{seeds} seed(s); re-measure median of {remeasure}, alternating", flush=True)
    report = []
    with Store() as store:
        store.remember_system(system)
        for name, space, n in spaces:
            try:
                report.append(compare(store, system, site, site_key, name, space, n, fixed, env, timeout, seeds,
                                      repeats, remeasure, fractions))
            except UserInputError as exc:
                print(f"space {name}: refused: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""), flush=True)
    for r in report:
        summarise(r, fractions)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    return 0


def compare(store, system, site, site_key, name, space, n, fixed, env, timeout, seeds, repeats, remeasure,
            fractions) -> dict:
    """One space: the sweep, then the tuner per fraction and seed, each pick re-measured against the best."""
    from clusterbench.errors import UserInputError
    from clusterbench.tune.session import TuneOptions, prepare

    for knob, value in HPL_DEFAULTS.items():  # the tuner's default knobs, fixed: its space is the sweep's
        if knob not in fixed:
            space.setdefault(knob, [value])
    if "blas" not in fixed:
        space.setdefault("blas", ["openblas-pthread"])
    tag = uuid.uuid4().hex[:6]  # fresh session names: every trial here is measured, none replayed

    def session(label: str, levels: int, budget: float, seed: int = 0):
        opts = TuneOptions(budget_s=budget, n=n, space={k: list(v) for k, v in space.items()}, fixed=dict(fixed),
                           levels=levels, seed=seed, repeats=3, name=f"{label}-{name}-{tag}", env=dict(env),
                           timeout_s=timeout)
        return prepare(store, opts, system, site=site, site_key=site_key, system_id=system.fingerprint())

    sweep = session("sweep", 1, 5e5)
    if sweep.tspace.space.size > MAX_POINTS:  # bounded before it is listed
        raise UserInputError(f"{sweep.tspace.space.size:,} points: more than {MAX_POINTS} to sweep")
    points = list(sweep.tspace.space.configs())
    print(f"\nspace {name}: {len(points)} points "
          f"({' x '.join(f'{k} {len(v)}' for k, v in sweep.tspace.space.dims.items())}) at N={n}"
          + "".join(f"; {note}" for note in sweep.tspace.space.dropped), flush=True)
    sweep.evaluator.preflight(points[0])
    counter = {"uncounted": 0}
    t0 = time.monotonic()
    values: dict = {}
    for r in range(repeats):  # repeat-major, as campaigns run
        for c in points:
            v = measure(sweep.evaluator, c, r, counter)
            if v is not None:
                values.setdefault(c, []).append(v)
    sweep_s = time.monotonic() - t0
    medians = {c: statistics.median(v) for c, v in values.items() if len(v) == repeats}
    if not medians:
        raise UserInputError("no configuration of the sweep has all its repeats valid")
    best = max(medians, key=medians.get)
    print(f"sweep: {len(points) * repeats} trials in {sweep_s:.0f} s ({counter['uncounted']} did not count and were "
          f"measured again); best {best.key()} median {medians[best]:.2f} Gflop/s", flush=True)
    rows, spreads = [], []
    for fraction in fractions:
        for seed in range(seeds):
            row = {"fraction": fraction, "seed": seed}
            try:
                tuner = session(f"tuner{fraction:g}-s{seed}", 3, fraction * sweep_s, seed)
            except UserInputError as exc:
                print(f"  budget {fraction:.0%} seed {seed}: refused: {exc.message}", flush=True)
                rows.append(row | {"pick": "(refused)", "ratio": float("nan"), "time_fraction": 0.0})
                continue
            t1 = time.monotonic()
            result = tuner.run()
            took = time.monotonic() - t1
            row |= {"time_fraction": took / sweep_s, "stopped": result.stopped, "trials": len(result.trials),
                    "uncounted": tuner.evaluator.uncounted, "levels_n": tuner.tspace.fidelities}
            if result.best is None:
                rows.append(row | {"pick": "(none)", "ratio": float("nan")})
                print(f"  budget {fraction:.0%} seed {seed}: no pick ({result.stopped})", flush=True)
                continue
            pick = result.best.config
            a, b = remeasured(session(f"remeasure{fraction:g}-s{seed}", 1, 5e5).evaluator, pick, best, remeasure,
                              counter)
            ratio = 1.0 if pick == best else (statistics.median(a) / statistics.median(b) if a and b
                                              else float("nan"))
            if len(b) >= 3:
                spreads.append(median_spread(b))
            rows.append(row | {"pick": pick.key(), "pick_gflops": statistics.median(a) if a else float("nan"),
                               "best_gflops": statistics.median(b) if b else float("nan"), "ratio": ratio})
            print(f"  budget {fraction:.0%} seed {seed}: {pick.key()} ratio {ratio:.3f} at "
                  f"{took / sweep_s:.1%} of the sweep's time ({result.stopped})", flush=True)
    floor = statistics.median(spreads) if spreads else float("nan")
    return {"space": name, "n": n, "points": len(points), "sweep_s": sweep_s, "sweep_best": best.key(),
            "sweep_best_median": medians[best], "noise_floor": floor, "uncounted": counter["uncounted"],
            "rows": rows}


def measure(evaluator, config, repeat: int, counter: dict) -> float | None:
    """One valid, counted figure of `config` (its repeat index `repeat`, moved on past trials that do not
    count), or None when it failed or never counted."""
    for attempt in range(MAX_RETRIES + 1):
        sample = evaluator.evaluate(config, 0, repeat + 1000 * attempt)
        if sample.uncounted:
            counter["uncounted"] += 1
            continue
        return sample.value if sample.valid else None
    return None


def remeasured(evaluator, pick, best, times: int, counter: dict) -> tuple[list[float], list[float]]:
    """The pick and the sweep's best measured alternately (A B A B ...), `times` each (none when equal)."""
    a, b = [], []
    if pick == best:
        return a, b
    for r in range(times):
        for config, out in ((pick, a), (best, b)):
            v = measure(evaluator, config, r, counter)
            if v is not None:
                out.append(v)
    return a, b


def summarise(r: dict, fractions: list[float]) -> None:
    print(f"\n{r['space']}: {r['points']} points at N={r['n']}, sweep {r['sweep_s']:.0f} s, best {r['sweep_best']} "
          f"({r['sweep_best_median']:.2f} Gflop/s); noise floor {r['noise_floor']:.1%} (MAD/median of its "
          f"re-measurements); {r['uncounted']} trials did not count (measured again)")
    print("budget  seed  ratio  time   pick")
    for row in r["rows"]:
        print(f"{row['fraction']:6.0%}  {row['seed']:4d}  {row['ratio']:5.3f}  {row.get('time_fraction', 0):5.1%}  "
              f"{row['pick'][:56]}")
    for fraction in fractions:
        got = [row for row in r["rows"] if row["fraction"] == fraction]
        ok = sum(1 for row in got if row["ratio"] >= TARGET)
        noise = sum(1 for row in got if row["ratio"] < TARGET and 1 - row["ratio"] <= r["noise_floor"])
        within = [row["time_fraction"] for row in got if row.get("time_fraction")]
        print(f"budget {fraction:.0%}: {ok} of {len(got)} seeds reach >= {TARGET} of the sweep's best "
              f"({noise} more within the noise floor); time used at most "
              f"{max(within, default=0):.1%} of the sweep's")


if __name__ == "__main__":
    sys.exit(main())
