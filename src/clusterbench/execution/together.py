"""Several runs at once, each on nodes of its own: the cluster run's per-node suite on every node
and its rounds of disjoint node pairs.

Each run goes through the one executor (`execute`) in a thread of its own with its own store
connection (`Store.sibling`: SQLite in WAL mode takes the writers one at a time), so it is started, supervised,
observed, parsed and stored exactly like a run made alone. A failed run is a stored result like
any other; it does not stop its neighbours.

The commands start together: each run's preparation (its directory, the nodes' state read, the
samplers) takes its own time, and a node whose kernel starts a second early or late runs part of it
alone, which on nodes that share anything (a switch, a file server, a virtual cluster's cores)
makes it look faster than its peers. A barrier just before each command starts removes that skew.

Interruption: Ctrl-C and SIGTERM reach the main thread only. It then sets a shared event that
every run's progress callback checks once a second; the callback raises, which makes the
executor stop that run's process tree and store the run as interrupted, as it does for a run
made alone. The main thread waits for every run to be stored before it passes the interrupt on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from clusterbench.execution.executor import RunRequest, RunResult, execute
from clusterbench.store.db import Store

START_WAIT_S = 300.0  # the longest a run waits at the start line for a neighbour still preparing


class Cancelled(KeyboardInterrupt):
    """Raised inside a run's thread when the runs together are being stopped."""


def run_together(store: Store, requests: list[RunRequest],
                 tick: Callable[[int, float, str | None], None] | None = None) -> list[RunResult | None]:
    """Run all `requests` at once; their results in order (None for a run that raised before it was
    stored, which only an environment problem such as a full disk does: that error is raised
    again once every run has ended)."""
    cancel = threading.Event()
    results: list[RunResult | None] = [None] * len(requests)
    errors: list[BaseException] = []
    ended = [threading.Event() for _ in requests]  # set by each worker as its very last step
    start_line = threading.Barrier(len(requests))

    def ready() -> None:
        try:
            start_line.wait(timeout=START_WAIT_S)
        except threading.BrokenBarrierError:  # a neighbour failed before its start, or all are stopping
            pass
        if cancel.is_set():
            raise Cancelled

    def work(index: int, request: RunRequest) -> None:
        def on_tick(elapsed: float, detail: str | None) -> None:
            if cancel.is_set():
                raise Cancelled
            if tick:
                tick(index, elapsed, detail)

        try:
            with store.sibling() as own:
                results[index] = execute(own, request, tick=on_tick, ready=ready)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            errors.append(exc)
            cancel.set()
            start_line.abort()
        finally:
            ended[index].set()

    for i, request in enumerate(requests):
        threading.Thread(target=work, args=(i, request), name=f"run-{i}", daemon=True).start()
    try:
        for done in ended:
            while not done.wait(0.2):
                pass
    except BaseException:
        # Waited for on our own events, not Thread.join: a join interrupted by Ctrl-C can report a
        # thread as finished while it still runs, and its run would stay 'running' in the store.
        cancel.set()
        start_line.abort()
        for done in ended:
            _wait_through_interrupts(done)
        raise
    real = [e for e in errors if not isinstance(e, Cancelled)]
    if real:
        raise real[0]
    if errors:
        raise KeyboardInterrupt
    return results


def _wait_through_interrupts(event: threading.Event) -> None:
    """Wait for `event` even if Ctrl-C is pressed again: the runs are being stopped and stored."""
    while True:
        try:
            if event.wait(0.2):
                return
        except KeyboardInterrupt:
            continue
