"""The engine's phases (execution/loop.run_phases): runs started together, a plan that changes between
phases through its hooks, one reporter, and one Interrupted once the runs in flight are stored.

Real runs of the `command` benchmark through the real executor into a real SQLite store.
"""

from __future__ import annotations

import os
import signal
import threading

import pytest

from clusterbench.errors import Interrupted
from clusterbench.execution.loop import Phase, QuietReporter, run_phases
from clusterbench.execution.request import PlannedRun
from clusterbench.launch.site import LOCAL
from clusterbench.store.db import Store


def _run(name: str, command: str) -> PlannedRun:
    return PlannedRun(name, "", "b", "command", {"command": command}, 0, timeout_s=60)


def _phase(label: str, *commands: str) -> Phase:
    runs = [_run(f"{label}-{i}", c) for i, c in enumerate(commands)]
    return Phase(label, "test", runs, [LOCAL] * len(runs), [{"phase": label} for _ in runs], estimate_s=1.0)


class _Told(QuietReporter):
    def __init__(self) -> None:
        self.phases: list[tuple[str, float, float]] = []
        self.started: list[str] = []
        self.finished: list[str] = []

    def phase_started(self, phase, done_s, planned_s) -> None:
        self.phases.append((phase.label, done_s, planned_s))

    def run_started(self, run) -> None:
        self.started.append(run.id)

    def run_finished(self, run, result, eta) -> None:
        self.finished.append(run.id)


def test_phases_run_in_turn_and_the_hooks_change_the_plan(tmp_path):
    told = _Told()
    skipped = _phase("skipped", "echo never")
    first = _phase("first", "echo one", "echo two")
    seen_before: list[int] = []

    def before(phase, results):
        seen_before.append(len(results))
        return phase is not skipped

    def after(phase, results, left):
        return [_phase("again", "echo three")] if phase is first else []

    with Store(tmp_path / "r.db") as store:
        results = run_phases(store, [first, skipped], told, before=before, after=after)
        rows = {r["id"]: r for r in store.conn.execute("SELECT id, status FROM runs")}
    assert [r.status for r in results] == ["ok", "ok", "ok"]
    assert len(rows) == 3 and all(r["status"] == "ok" for r in rows.values())
    assert [p[0] for p in told.phases] == ["first", "again"]  # the skipped phase was never started
    assert seen_before == [0, 2, 3]  # `before` saw the results so far each time
    assert told.phases[1][1] > 0  # seconds done grew
    assert sorted(told.started) == sorted(told.finished) == ["again-0", "first-0", "first-1"]


def test_an_interrupt_stores_the_runs_in_flight_and_is_raised_once(tmp_path):
    told = _Told()
    phase = _phase("slow", "sleep 30", "sleep 30")

    def interrupt_when_started(*_args) -> None:
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()

    told.phase_started = interrupt_when_started
    with Store(tmp_path / "r.db") as store:
        with pytest.raises(Interrupted) as caught:
            run_phases(store, [phase, _phase("never", "echo no")], told)
        statuses = [r["status"] for r in store.conn.execute("SELECT status FROM runs")]
    assert statuses == ["interrupted", "interrupted"]
    assert "0 run(s) finished" in caught.value.stored
