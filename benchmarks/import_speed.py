"""How fast `clusterbench import` reads real files (issue 32): the fixture corpus replicated to 20,000 files.

The corpus is every output under tests/fixtures/outputs (this machine's HPL, HPCC, HPCG, IMB, OSU, STREAM)
and, when it is there, ../shared/fixtures/outputs (cloud HPL and IMB, LSF job reports). Each copy gets one
line appended that names the copy, so no two files have the same bytes: every copy is a new file to the
store, not a duplicate it skips. The copies are imported with `clusterbench import --json` in a new process
(start-up included) into an empty store, and the script prints the results stored per second against the
target (>= 5,000 results/s), then the same import again (every result already stored: what a re-run of an
import costs). Not part of `make test`.

    .venv/bin/python benchmarks/import_speed.py [--files 20000] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPORA = (ROOT / "tests" / "fixtures" / "outputs", ROOT.parent / "shared" / "fixtures" / "outputs")
TARGET = 5000  # results per second


def corpus() -> list[Path]:
    """Every fixture output file (sorted, so copies are made in the same order each time)."""
    files = []
    for folder in CORPORA:
        if folder.is_dir():
            files += sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    if not files:
        raise SystemExit(f"no fixture outputs under {', '.join(map(str, CORPORA))}")
    return files


def replicate(files: list[Path], count: int, folder: Path) -> int:
    """`count` files, the corpus round-robin, each with a line naming its copy (distinct content); their bytes."""
    texts = [f.read_bytes() for f in files]
    total = 0
    for i in range(count):
        k = i % len(files)
        sub = folder / f"batch-{i // 1000:03d}"
        if i % 1000 == 0:
            sub.mkdir(parents=True, exist_ok=True)
        data = texts[k] + (b"" if texts[k].endswith(b"\n") else b"\n") + f"# copy {i} of {files[k].name}\n".encode()
        (sub / f"{i:06d}-{files[k].name}").write_bytes(data)
        total += len(data)
    return total


def import_folder(db: Path, folder: Path) -> tuple[dict, float]:
    """`clusterbench import --json` of the folder in a new process: its summary and wall seconds."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "clusterbench", "import", "--json", str(folder)],
                          capture_output=True, text=True, env=dict(os.environ) | {"CLUSTERBENCH_DB": str(db)})
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"clusterbench import failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout), seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=1, help="imports into a new empty store (best reported)")
    args = ap.parse_args()
    files = corpus()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "corpus"
        raw = replicate(files, args.files, folder)
        print(f"{len(files)} fixture outputs replicated to {args.files:,} distinct files, {raw / 1e6:.1f} MB",
              flush=True)
        rates = []
        for i in range(args.repeats):
            db = Path(tmp) / f"results-{i}.db"
            summary, seconds = import_folder(db, folder)
            stored = summary["stored"]
            rates.append(stored / seconds)
            print(f"import {i + 1}: {stored:,} results stored ({len(summary['skipped'])} files skipped) in "
                  f"{seconds:.1f} s: {rates[-1]:,.0f} results/s", flush=True)
            summary, seconds = import_folder(db, folder)
            print(f"  again: {summary['already_stored']:,} already stored, {summary['stored']} stored, in "
                  f"{seconds:.1f} s: {summary['already_stored'] / seconds:,.0f} results/s", flush=True)
        best = max(rates)
        print(f"best: {best:,.0f} results/s = {best / TARGET:.2f} x the target ({TARGET:,} results/s)")


if __name__ == "__main__":
    main()
