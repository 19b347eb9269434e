"""Execute one benchmark instance as a stored run: directory, process, parse, store.

The run row exists ('running') before the process starts; status, metrics and raw outputs
are written in one transaction when it ends. A timeout, a crash or Ctrl-C still ends in a
stored row saying what happened, and the run directory keeps every file.
"""

from __future__ import annotations

import json
import os
import shlex
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from clusterbench.bench.base import Benchmark
from clusterbench.bench.metrics import Outcome
from clusterbench.launch.process import run_process
from clusterbench.store.db import RunRecord, Store, relevant_env


@dataclass
class RunResult:
    id: str
    status: str  # ok, invalid, failed, timeout, interrupted
    valid: bool
    reason: str | None
    duration_s: float
    workdir: Path
    outcome: Outcome


def new_run_id(benchmark: str) -> str:
    """Time-ordered and unique: 20261122-031501-hpcc-1a2b3c."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{benchmark}-{uuid.uuid4().hex[:6]}"


def execute(store: Store, bench: Benchmark, system_id: str | None, run_id: str | None = None,
            campaign: str | None = None, repeat: int = 0, timeout_s: float | None = None,
            tags: dict | None = None, nodes: str | None = None,
            tick: Callable[[float, str | None], None] | None = None) -> RunResult:
    run_id = run_id or new_run_id(bench.name)
    workdir = store.runs_dir / run_id
    workdir.mkdir(parents=True, exist_ok=True)
    bench.prepare(workdir)
    cmd = bench.command()
    env = dict(os.environ) | bench.env()
    record = RunRecord(
        id=run_id, benchmark=bench.name, params=bench.params(), campaign=campaign, repeat=repeat,
        command=shlex.join(cmd), workdir=str(workdir), env=relevant_env(env),
        launcher=bench.launcher(), system_id=system_id, nodes=nodes or os.uname().nodename,
        tags=tags or {})
    (workdir / "run.json").write_text(json.dumps(record.__dict__, indent=2, default=str))
    store.begin_run(record)

    def on_tick(elapsed: float) -> None:
        if tick:
            tick(elapsed, bench.progress(workdir))

    artifacts = [workdir / name for name in bench.artifacts]
    try:
        proc = run_process(cmd, workdir, env, timeout_s, on_tick)
    except BaseException:
        store.finish_run(run_id, "interrupted", False, "interrupted by the user or a signal",
                         None, None, [], artifacts)
        raise

    outcome = bench.parse(workdir)
    if proc.timed_out:
        status, reason = "timeout", f"killed after the {timeout_s:.0f} s timeout"
        outcome.invalidate(reason)
    elif proc.exit_code != 0:
        status, reason = "failed", f"exit code {proc.exit_code}: {_stderr_tail(workdir)}"
        outcome.invalidate(reason)
    else:
        status = "ok" if outcome.valid else "invalid"
        reason = "; ".join(outcome.reasons) or None
    if status in ("timeout", "failed"):  # partial output of a broken run is never a result
        for m in outcome.metrics:
            m.valid = False
    store.finish_run(run_id, status, outcome.valid, reason if not outcome.valid else None,
                     proc.exit_code, proc.duration_s, outcome.metrics, artifacts, outcome.facts)
    return RunResult(run_id, status, outcome.valid, reason, proc.duration_s, workdir, outcome)


def _stderr_tail(workdir: Path, lines: int = 3) -> str:
    try:
        text = (workdir / "stderr.txt").read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])[:500]
