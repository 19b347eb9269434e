"""Run one benchmark command in its own directory and process group.

The command runs in a new session, so a timeout or an interrupt kills the whole tree
(mpirun and every rank it started), not just the parent. stdout and stderr go straight to
files in the run directory: nothing is held in memory, and a crash leaves them on disk.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass
class ProcessResult:
    exit_code: int | None
    duration_s: float
    timed_out: bool
    interrupted: bool = False


def kill_group(proc: subprocess.Popen, grace_s: float = 3.0) -> None:
    """SIGTERM the process group, then SIGKILL what is left after the grace period."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            # The leader is gone; make sure no rank survives in the group.
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue
        return


def run_process(cmd: list[str], cwd: Path, env: dict[str, str], timeout_s: float | None = None,
                tick: Callable[[float], None] | None = None, tick_every_s: float = 1.0) -> ProcessResult:
    """Run `cmd` to completion, a timeout, or Ctrl-C; stdout/stderr to cwd/{stdout,stderr}.txt."""
    cwd.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(cwd / "stdout.txt", "wb") as out, open(cwd / "stderr.txt", "wb") as err:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            while True:
                try:
                    code = proc.wait(timeout=tick_every_s)
                    return ProcessResult(code, time.monotonic() - start, False)
                except subprocess.TimeoutExpired:
                    elapsed = time.monotonic() - start
                    if tick:
                        tick(elapsed)
                    if timeout_s is not None and elapsed > timeout_s:
                        kill_group(proc)
                        return ProcessResult(proc.returncode, time.monotonic() - start, True)
        except BaseException:
            kill_group(proc)
            raise


@contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP (a batch system ending the job, a closed terminal) act like Ctrl-C:
    the run in flight is killed and recorded as interrupted, everything finished stays."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
