"""Execute one benchmark instance as a stored run: directory, process, parse, store.

The run row exists ('running') before the process starts; status, metrics and raw outputs
are written in one transaction when it ends. A timeout, a crash or Ctrl-C still ends in a
stored row saying what happened, and the run directory keeps every file.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from clusterbench.bench.base import Benchmark
from clusterbench.bench.metrics import Metric, Outcome
from clusterbench.build import registry
from clusterbench.launch import libtrace
from clusterbench.launch.process import ProcessResult, run_process
from clusterbench.launch.site import LOCAL, Site
from clusterbench.store.db import RunRecord, Store, relevant_env
from clusterbench.system import power


@dataclass
class RunResult:
    id: str
    status: str  # ok, invalid, failed, timeout, interrupted
    valid: bool
    reason: str | None
    duration_s: float
    workdir: Path
    outcome: Outcome
    benchmark: str = ""
    params: dict = field(default_factory=dict)  # as recorded in the store


def new_run_id(benchmark: str) -> str:
    """Time-ordered and unique: 20261122-031501-hpcc-1a2b3c."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{benchmark}-{uuid.uuid4().hex[:6]}"


@dataclass
class Started:
    """A run whose row and directory exist and whose command is known, not yet finished."""

    id: str
    bench: Benchmark
    workdir: Path
    record: RunRecord
    command: list[str]
    env: dict[str, str]
    artifacts: list[Path]


def start(store: Store, bench: Benchmark, system_id: str | None, run_id: str | None = None,
          campaign: str | None = None, repeat: int = 0, tags: dict | None = None, nodes: str | None = None,
          params: dict | None = None, extra_env: dict[str, str] | None = None, site: Site = LOCAL) -> Started:
    """Directory, inputs, command and the 'running' row of one run. `params` (default:
    bench.params()) is what is recorded; `extra_env` is added on top of the benchmark's own
    environment (campaign `env:`); `site` says where it runs (hosts, launcher)."""
    run_id = run_id or new_run_id(bench.name)
    workdir = store.runs_dir / run_id
    if workdir.exists():  # a previous, unfinished attempt: start clean
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    trace = libtrace.trace_env(workdir) if bench.uses_blas else {}
    bench.site = site.for_run(workdir, trace)
    bench.prepare(workdir)
    cmd = bench.command()
    env = dict(os.environ) | bench.env() | (extra_env or {}) | trace
    record = RunRecord(
        id=run_id, benchmark=bench.name, params=params if params is not None else bench.params(),
        campaign=campaign, repeat=repeat,
        command=shlex.join(cmd), workdir=str(workdir), env=relevant_env(env),
        launcher=bench.launcher(), system_id=system_id,
        nodes=bench.site.node_names(bench.node_count()) or nodes or os.uname().nodename, tags=tags or {})
    (workdir / "run.json").write_text(json.dumps(record.__dict__, indent=2, default=str))
    store.begin_run(record)
    artifacts = [workdir / name for name in bench.artifacts]
    if bench.uses_blas:
        artifacts.append(workdir / "libraries.txt")
    return Started(run_id, bench, workdir, record, cmd, env, artifacts)


def interrupted(store: Store, run: Started, reason: str = "interrupted by the user or a signal") -> None:
    store.finish_run(run.id, "interrupted", False, reason, None, None, [], run.artifacts)


def execute(store: Store, bench: Benchmark, system_id: str | None, run_id: str | None = None,
            campaign: str | None = None, repeat: int = 0, timeout_s: float | None = None,
            tags: dict | None = None, nodes: str | None = None,
            tick: Callable[[float, str | None], None] | None = None, params: dict | None = None,
            extra_env: dict[str, str] | None = None, site: Site = LOCAL) -> RunResult:
    """Run `bench` once here (or through mpirun from here) and store it."""
    run = start(store, bench, system_id, run_id, campaign, repeat, tags, nodes, params, extra_env, site)

    def on_tick(elapsed: float) -> None:
        if tick:
            tick(elapsed, bench.progress(run.workdir))

    power_meter = power.meter()
    try:
        if power_meter:
            power_meter.start()
        proc = run_process(run.command, run.workdir, run.env, timeout_s, on_tick)
    except BaseException:
        interrupted(store, run)
        raise
    reading = power_meter.stop() if power_meter else None
    return finish(store, run, proc, timeout_s, power_reading=reading)


def finish(store: Store, run: Started, proc: ProcessResult, timeout_s: float | None,
           nodes: str | None = None, launcher: dict | None = None,
           power_reading: power.PowerReading | None = None) -> RunResult:
    """Parse the outputs, decide the status and store everything in one transaction."""
    bench, workdir, record = run.bench, run.workdir, run.record
    outcome = bench.parse(workdir)
    built = registry.provenance(str(bench.binary)) if getattr(bench, "binary", None) else None
    if built:  # clusterbench built it: which source, version, MPI, BLAS link and flags made it
        outcome.facts["binary_provenance"] = built
    if power_reading:  # valid with the run: an invalid run's power is not an efficiency figure
        labels = {"source": power_reading.source, "seconds": round(power_reading.seconds, 3)}
        outcome.metrics += [Metric("power_w", power_reading.watts, "W", False, labels, outcome.valid),
                            Metric("energy_j", power_reading.joules, "J", False, labels, outcome.valid)]
    if bench.uses_blas:
        _check_blas(bench, libtrace.collect(workdir), outcome)
    if proc.timed_out:
        limit = f"the {timeout_s:.0f} s timeout" if timeout_s else "its time limit"
        status, reason = "timeout", f"killed after {limit}"
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
    store.finish_run(run.id, status, outcome.valid, reason if not outcome.valid else None,
                     proc.exit_code, proc.duration_s, outcome.metrics, run.artifacts, outcome.facts,
                     nodes=nodes, launcher=launcher)
    (workdir / "run.json").write_text(json.dumps(
        record.__dict__ | {"status": status, "valid": outcome.valid, "reason": reason,
                           "duration_s": proc.duration_s, "facts": outcome.facts,
                           "nodes": nodes or record.nodes, "launcher": launcher or record.launcher},
        indent=2, default=str))
    return RunResult(run.id, status, outcome.valid, reason, proc.duration_s, workdir, outcome,
                     record.benchmark, record.params)


def _check_blas(bench: Benchmark, loaded: libtrace.LoadedLibraries, outcome: Outcome) -> None:
    """Record the BLAS the processes loaded; a run that loaded another one than asked is invalid."""
    outcome.facts |= loaded.facts()
    wanted = bench.blas
    if wanted and wanted != "default" and loaded.by_process:
        got = loaded.blas_variants()
        if wanted not in got:
            outcome.invalidate(f"asked for BLAS {wanted} but the processes loaded {', '.join(got) or 'none'}")


def _stderr_tail(workdir: Path, lines: int = 3) -> str:
    try:
        text = (workdir / "stderr.txt").read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])[:500]
