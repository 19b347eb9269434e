"""Run one benchmark command in its own directory, under a supervisor that owns its process tree.

The command runs in a new session under a small supervisor process (launch/supervise.py), so a
timeout, an interrupt or the death of clusterbench itself, kill -9 included, kills the whole tree
(mpirun, every rank it started, and anything that moved to a session of its own). stdout and
stderr go straight to files in the run directory: nothing is held in memory, and a crash leaves
them on disk.
"""

from __future__ import annotations

import errno
import json
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from clusterbench.launch import supervise


@dataclass
class ProcessResult:
    exit_code: int | None
    duration_s: float
    timed_out: bool
    interrupted: bool = False


def _supervisor_command(*args: str) -> list[str]:
    """`python -I -S -c ...` importing supervise.py from its directory: isolated from the user's
    Python settings, without site-packages, and from the bytecode cached when clusterbench imported
    it (a script would be compiled again at every run)."""
    folder = str(Path(supervise.__file__).resolve().parent)
    code = f"import sys; sys.path.insert(0, {folder!r}); import supervise; supervise.os._exit(supervise.main(sys.argv))"
    return [sys.executable, "-I", "-S", "-c", code, *args]


def wait_exit(proc: subprocess.Popen, timeout: float) -> int:
    """`proc.wait(timeout)`, woken by the process's exit (a pidfd) rather than by Popen.wait's
    polling, whose sleeps double up to 50 ms: every run waits for its supervisor and samplers to
    exit, and would notice it that much later. Popen.wait where Linux has no pidfd (before 5.3)."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd here, or the process is already reaped
        return proc.wait(timeout)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(max(0, math.ceil(timeout * 1000))):
            raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(pidfd)
    return proc.wait()


def _encode_spec(executable: str, cmd: list[str], env: dict[str, str]) -> bytes:
    items = [os.fsencode(executable), str(len(cmd)).encode(), *map(os.fsencode, cmd),
             *(os.fsencode(k) + b"=" + os.fsencode(v) for k, v in env.items())]
    if any(b"\0" in item for item in items):
        raise ValueError("embedded null byte")
    payload = b"\0".join(items)
    return str(len(payload)).encode() + b"\n" + payload


class Supervised:
    """A command running under its supervisor (see launch/supervise.py): the supervisor dies with
    us, and takes every process of the command with it."""

    def __init__(self, cmd: list[str], cwd: Path, env: dict[str, str], stdout, stderr,
                 record: Path | None = None):
        executable = cmd[0] if os.sep in cmd[0] else shutil.which(cmd[0], path=env.get("PATH", os.defpath))
        if not executable:  # what Popen raises, before anything starts
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), cmd[0])
        spec = _encode_spec(executable, cmd, env)
        ctl_r, self.ctl = os.pipe()
        self.status, status_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                _supervisor_command(str(ctl_r), str(status_w), str(os.getpid())),
                cwd=cwd, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, pass_fds=(ctl_r, status_w),
                start_new_session=True)
        except BaseException:
            self.close()
            raise
        finally:
            os.close(ctl_r)
            os.close(status_w)
        try:
            if record is not None:  # before the command starts: on resume, no record means it never ran
                record.write_text(json.dumps(supervise.make_record(self.proc.pid)))
            _write_all(self.ctl, spec)
        except BaseException:
            self.close()  # end-of-file before the command: the supervisor exits without starting it
            raise

    def wait(self, timeout: float | None = None) -> int:
        """The supervisor's exit status; TimeoutExpired after `timeout`. Woken by the status pipe
        (written, or closed, when the supervisor ends), not by Popen.wait's polling back-off."""
        if self.proc.returncode is None and self.status is not None:
            poller = select.poll()
            poller.register(self.status, select.POLLIN)
            if not poller.poll(None if timeout is None else int(timeout * 1000)):
                raise subprocess.TimeoutExpired(self.proc.args, timeout)
        return wait_exit(self.proc, max(timeout or 0.0, 10.0))

    def stop(self, grace_s: float = supervise.STOP_GRACE_S) -> None:
        """Ask the supervisor to stop the whole tree (SIGTERM, SIGKILL after `grace_s`); if it does
        not answer, kill the tree from here."""
        try:
            os.write(self.ctl, b"t")
        except OSError:
            pass
        try:
            self.proc.wait(grace_s + 5.0)
        except subprocess.TimeoutExpired:
            supervise.kill_tree(self.proc.pid)
            self.proc.wait()

    def result(self) -> tuple[int | None, float | None]:
        """(exit code or -signal, seconds) of the command as the supervisor measured them."""
        try:
            os.set_blocking(self.status, False)
            text = os.read(self.status, 256).decode()
            code, seconds = text.split()
            return int(code), float(seconds)
        except (OSError, ValueError):
            return self.proc.returncode, None

    def close(self) -> None:
        for fd in ("ctl", "status"):
            if getattr(self, fd, None) is not None:
                os.close(getattr(self, fd))
                setattr(self, fd, None)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def run_process(cmd: list[str], cwd: Path, env: dict[str, str], timeout_s: float | None = None,
                tick: Callable[[float], None] | None = None, tick_every_s: float = 1.0,
                record: Path | None = None) -> ProcessResult:
    """Run `cmd` to completion, a timeout, or Ctrl-C; stdout/stderr to cwd/{stdout,stderr}.txt.

    The command runs under a supervisor (launch/supervise.py) that kills its whole tree, `setsid`
    descendants included, on a timeout, an interrupt, or the death of this process (kill -9 too);
    `record` (the run directory's supervisor.json) says which supervisor that is."""
    cwd.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(cwd / "stdout.txt", "wb") as out, open(cwd / "stderr.txt", "wb") as err:
        sup = Supervised(cmd, cwd, env, out, err, record)
        try:
            timed_out = False
            while True:
                try:
                    sup.wait(timeout=tick_every_s)
                    break
                except subprocess.TimeoutExpired:
                    elapsed = time.monotonic() - start
                    if tick:
                        tick(elapsed)
                    if timeout_s is not None and elapsed > timeout_s:
                        sup.stop()
                        timed_out = True
                        break
            code, seconds = sup.result()
            return ProcessResult(code, time.monotonic() - start if seconds is None or timed_out else seconds,
                                 timed_out)
        except BaseException:
            sup.stop()
            raise
        finally:
            sup.close()


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
