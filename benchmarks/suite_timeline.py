#!/usr/bin/env python3
"""Where `make test`'s wall time goes, per xdist worker (issue 32): read the timeline that the suite writes
with CLUSTERBENCH_TEST_TIMELINE=FILE (tests/conftest.py: one JSON line per test, its worker, start and end)
and print, per worker, its busy time, its idle time and its longest tests; per serial group and for the rest,
the summed test time; and the wall time from the first start to the last end.

A test's time includes its setup, so a test that waited for the quiet lock (`quiet_machine`, while a virtual-
cluster comparison ran alone) carries that wait: the wait is counted per worker as "held by a quiet test".

    CLUSTERBENCH_TEST_TIMELINE=/tmp/timeline.jsonl make test
    .venv/bin/python benchmarks/suite_timeline.py /tmp/timeline.jsonl [--top 8]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.conftest import serial_group  # noqa: E402  (the suite's own grouping)


def load(path: Path) -> list[dict]:
    rows = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line cut by an interrupted run
        if {"worker", "test", "start", "end"} <= row.keys():
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timeline", type=Path)
    parser.add_argument("--top", type=int, default=8, help="longest tests shown per worker")
    args = parser.parse_args()
    rows = load(args.timeline)
    if not rows:
        raise SystemExit(f"{args.timeline}: no test lines (was CLUSTERBENCH_TEST_TIMELINE set for the run?)")
    first, last = min(r["start"] for r in rows), max(r["end"] for r in rows)
    print(f"{len(rows)} tests, wall {last - first:.0f} s from the first start to the last end")
    by_worker: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_worker[r["worker"]].append(r)
    for worker, tests in sorted(by_worker.items()):
        busy = sum(t["end"] - t["start"] for t in tests)
        end = max(t["end"] for t in tests)
        print(f"\n{worker}: {len(tests)} tests, busy {busy:.0f} s, idle {last - first - busy:.0f} s, "
              f"last test ends at {end - first:.0f} s")
        for t in sorted(tests, key=lambda t: t["start"] - t["end"])[:args.top]:
            print(f"  {t['end'] - t['start']:7.1f} s  at {t['start'] - first:5.0f} s  {t['test']}")
    groups: dict[str, float] = defaultdict(float)
    for r in rows:
        groups[serial_group(r["test"]) or "parallel"] += r["end"] - r["start"]
    print("\nsummed test time per group: " + ", ".join(f"{g} {s:.0f} s" for g, s in sorted(groups.items())))


if __name__ == "__main__":
    main()
