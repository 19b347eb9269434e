"""Each built-in kernel at its defaults beside the real reference, alternating in one session; ratios.

References (built from the official sources with `clusterbench build ... --source`, or found on
PATH / $CLUSTERBENCH_PATH as `clusterbench benchmarks` shows):
- `stream` kernel vs McCalpin's stream.c 5.10 (`build stream`: the same array rule, 4 x LLC and
  at least 10M elements; NTIMES 10), Triad with 1 thread and with all cores;
- `pingpong` kernel vs IMB-MPI1 PingPong (`build imb`): 0-byte latency and 1 MiB bandwidth (IMB's
  MiB/s converted to MB/s), 2 ranks bound to cores on both sides;
- the same against OSU 7.4 `osu_latency` at 1 byte (OSU has no 0-byte size) and `osu_bw` at
  1 MiB (a windowed stream of messages, not a ping-pong: informative, no target);
- `dgemm` kernel vs HPCC's SingleDGEMM (informative: HPCC sizes its DGEMM from the HPL N).

The sides alternate (ours, reference, ours, ...) `--pairs` times, so drift of this noisy VM hits
both; the ratio is of the medians, and each side's coefficient of variation is printed.

    .venv/bin/python benchmarks/kernel_validation.py [--sources ../shared/sources] [--pairs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

MIB_TO_MB = 1.048576


def cb(db: Path, *args: str) -> list | dict:
    out = subprocess.run([sys.executable, "-m", "clusterbench", "--db", str(db), *args],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"clusterbench {' '.join(args)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return json.loads(out.stdout)


def value(runs: list[dict], name: str, **labels) -> float:
    found = [m["value"] for r in runs if r["valid"] for m in r["metrics"]
             if m["name"] == name and all(m["labels"].get(k) == v for k, v in labels.items())]
    if not found:
        raise SystemExit(f"no valid {name} {labels} in {[r['id'] for r in runs]}")
    return found[0]


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values) * 100 if len(values) > 1 else 0.0


def build_references(sources: Path) -> None:
    """`clusterbench build` each reference from its tarball (a cached build is reused)."""
    for what, tarball in (("stream", "stream-5.10.tar.gz"), ("imb", "imb-2021.11.tar.gz"),
                          ("osu", "osu-micro-benchmarks-7.4.tar.gz")):
        path = sources / tarball
        if path.is_file():
            done = subprocess.run([sys.executable, "-m", "clusterbench", "build", what, "--source", str(path),
                                   "--json"], capture_output=True, text=True)
            print(f"reference {what}: " + ("built/cached" if done.returncode == 0 else
                                           f"build failed: {done.stderr.strip()[-300:]}"))


def compare(db: Path, pairs: int, label: str, ours: list[str], reference: list[str],
            measures: dict[str, tuple[Callable[[list], float], Callable[[list], float]]]) -> None:
    """Alternate the two commands `pairs` times; per measure: medians, ratio, CV per side."""
    got: dict[str, tuple[list[float], list[float]]] = {m: ([], []) for m in measures}
    for _ in range(pairs):
        a = cb(db, *ours, "--json")
        b = cb(db, *reference, "--json")
        for name, (of_ours, of_ref) in measures.items():
            got[name][0].append(of_ours(a))
            got[name][1].append(of_ref(b))
    for name, (a, b) in got.items():
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{label} | {name}: ours {ma:.3f} (CV {cv(a):.1f}%) / reference {mb:.3f} (CV {cv(b):.1f}%) "
              f"= {ma / mb:.3f}   ours: {', '.join(f'{x:.3f}' for x in a)}   ref: {', '.join(f'{x:.3f}' for x in b)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5, help="alternating runs of each side (default 5)")
    ap.add_argument("--sources", type=Path, default=None,
                    help="folder with the official tarballs (e.g. ../shared/sources): build the references first")
    ap.add_argument("--only", choices=("stream", "pingpong", "osu", "dgemm"), action="append",
                    help="run only these comparisons (repeatable)")
    args = ap.parse_args()
    if args.sources:
        build_references(args.sources)
    wanted = set(args.only or ("stream", "pingpong", "osu", "dgemm"))
    from clusterbench.system.discover import discover

    cores = discover(with_software=False).topology.cores_total
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "v.db"
        if "stream" in wanted:
            for threads in sorted({1, cores}):
                compare(db, args.pairs, f"STREAM Triad MB/s, {threads} thread(s), defaults",
                        ["bench", "stream", "-p", f"threads={threads}"],
                        ["bench", "stream-binary", "-p", f"threads={threads}"],
                        {"triad": (lambda r: value(r, "stream_triad"), lambda r: value(r, "stream_triad"))})
        if "pingpong" in wanted:
            compare(db, args.pairs, "ping-pong vs IMB-MPI1 PingPong, 2 ranks bound to cores",
                    ["bench", "pingpong", "-p", "bind_to=core"],
                    ["bench", "imb", "-p", "tests=PingPong", "-p", "bind_to=core"],
                    {"0 B latency us": (lambda r: value(r, "pingpong_time_us", bytes=0),
                                        lambda r: value(r, "imb_time_us", test="PingPong", bytes=0)),
                     "1 MiB bandwidth MB/s": (
                         lambda r: value(r, "pingpong_bandwidth", bytes=2**20),
                         lambda r: value(r, "imb_bandwidth", test="PingPong", bytes=2**20) * MIB_TO_MB)})
        if "osu" in wanted:
            compare(db, args.pairs, "ping-pong vs osu_latency, 2 ranks bound to cores",
                    ["bench", "pingpong", "-p", "bind_to=core"],
                    ["bench", "osu", "-p", "test=latency", "-p", "bind_to=core"],
                    {"1 B latency us": (lambda r: value(r, "pingpong_time_us", bytes=1),
                                        lambda r: value(r, "osu_latency_us", bytes=1))})
            compare(db, args.pairs, "ping-pong vs osu_bw (windowed; informative)",
                    ["bench", "pingpong", "-p", "bind_to=core"],
                    ["bench", "osu", "-p", "test=bw", "-p", "bind_to=core"],
                    {"1 MiB bandwidth MB/s": (lambda r: value(r, "pingpong_bandwidth", bytes=2**20),
                                              lambda r: value(r, "osu_bandwidth", bytes=2**20))})
        if "dgemm" in wanted:
            compare(db, args.pairs, "DGEMM Gflop/s, 1 rank, vs HPCC SingleDGEMM (informative)",
                    ["bench", "dgemm", "-p", "ranks=1", "-p", "threads=1", "-p", "blas=openblas-serial"],
                    ["bench", "hpcc", "-p", "n=4000", "-p", "blas=openblas-serial"],
                    {"gflops": (lambda r: value(r, "dgemm_gflops"), lambda r: value(r, "SingleDGEMM_Gflops"))})


if __name__ == "__main__":
    main()
