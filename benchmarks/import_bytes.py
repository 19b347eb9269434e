"""What importing a study costs in database bytes (issue 19): ~2,000 Pi-shaped HPL files of ~7 KB with 8 results
each, imported with `clusterbench import` as their user did (name pattern, tag, node Rpeak).

Target: the database grows by at most about 1.5x the raw bytes of the files (each file is kept once,
however many results it holds), and importing the same files again adds nothing. The files are
synthetic (tests/studies.py: this machine's HPL 2.3 output with the numbers rewritten by the Pi model).
Growth is measured on the database file plus its -wal after a checkpoint, against the same empty
store. Prints the raw bytes, the growth, the ratio, the results stored and the seconds, for the import
and the re-import. Not part of `make test`.

    .venv/bin/python benchmarks/import_bytes.py [--files 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the study generators live with the tests

from tests.studies import PI_PATTERN, PI_RPEAK_NODE_GFLOPS, pi_bulk_files, write_files  # noqa: E402

from clusterbench.store.db import Store  # noqa: E402

TARGET_RATIO = 1.5
SMALL_RATIO, SMALL_ALLOWANCE = 2, 256 * 1024  # issue 32: a ~200 KB import grows the store by <= 2x + 256 KiB


def db_bytes(db: Path) -> int:
    """The database file plus its -wal, after a checkpoint (what the store occupies at rest)."""
    con = sqlite3.connect(db)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()
    wal = db.with_name(db.name + "-wal")
    return db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def import_files(db: Path, folder: Path) -> tuple[dict, float]:
    """`clusterbench import` of the folder as the Pi study's user ran it; its JSON summary and seconds."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "clusterbench", "import", "--json", str(folder), "--name-pattern",
                           PI_PATTERN, "--tag", "system=pi-cluster", "--rpeak-node", f"{PI_RPEAK_NODE_GFLOPS:g}"],
                          capture_output=True, text=True, env=dict(os.environ) | {"CLUSTERBENCH_DB": str(db)})
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"clusterbench import failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout), seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder, db = Path(tmp) / "pi-hpl", Path(tmp) / "results.db"
        paths = write_files(folder, pi_bulk_files(args.files))
        raw = sum(os.path.getsize(p) for p in paths)
        Store(db).close()  # the empty store: its schema is not the files' cost
        empty = db_bytes(db)
        print(f"{len(paths):,} files, {raw / 1e6:.2f} MB raw ({raw / len(paths) / 1e3:.1f} KB per file)")
        for attempt in ("import", "re-import"):
            before = db_bytes(db)
            summary, seconds = import_files(db, folder)
            after = db_bytes(db)
            print(f"{attempt}: {summary['stored']:,} results stored, {summary['already_stored']:,} already stored, "
                  f"{len(summary['skipped'])} files skipped, in {seconds:.1f} s; database +{(after - before) / 1e6:.2f}"
                  f" MB (now {after / 1e6:.2f} MB)", flush=True)
        growth = after - empty
        print(f"growth {growth / 1e6:.2f} MB for {raw / 1e6:.2f} MB of files: ratio {growth / raw:.2f} "
              f"(target <= {TARGET_RATIO} at 2,000 files); against 2 x raw + 256 KiB (the target of a small "
              f"import, ~200 KB: --files 29): {growth / (SMALL_RATIO * raw + SMALL_ALLOWANCE):.2f} (target <= 1)")


if __name__ == "__main__":
    main()
