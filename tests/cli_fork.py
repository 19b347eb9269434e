"""The tests' way to run the real command line fast: forked from a process that has already imported the heavy
libraries (tests/cli_zygote.py), instead of a new interpreter that imports them again for each call. Measured on
this 2-core machine before it existed: the pure-Python tests' 420 calls took 607 s of the 1,055 s those tests
took, most of it importing pandas, SciPy and matplotlib again.

Each call is still the real `python -m clusterbench ARGS` in a process of its own: its own environment, folder,
standard input and output, exit code (a signal's as a negative code, as `subprocess` gives), and atexit handlers
and threads ended by the interpreter as at any exit. Only the libraries' import is shared, and clusterbench's own
modules are imported by each child (some read the environment when imported).

One server per test process (each xdist worker), started at the first call. A call made while another is under
way in the same process (a test's threads), through another interpreter than the server's (a test that sets
sys.executable to a wrapper), or with CLUSTERBENCH_TEST_FORK=0, starts a new interpreter instead.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ZYGOTE = Path(__file__).resolve().with_name("cli_zygote.py")


class _Server:
    def __init__(self) -> None:
        self.executable = sys.executable
        self.proc = subprocess.Popen([sys.executable, str(ZYGOTE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=dict(os.environ))
        self.folder = Path(tempfile.mkdtemp(prefix="cb-cli-fork-"))
        self.lock = threading.Lock()
        self.pending = b""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _line(self, deadline: float | None) -> str:
        """The server's next line, or "" at the deadline (time.monotonic()) or when it has gone. Read from the
        pipe's descriptor into a buffer of our own: a buffered reader may hold the next line where select()
        cannot see it."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.pending:
            wait = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                return ""
            chunk = os.read(fd, 4096)
            if not chunk:
                return ""
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode().strip()

    def run(self, args: list[str], env: dict, cwd: str | None, stdin: str | None, timeout: float | None,
            memory: int | None) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "clusterbench", *args]
        files = {name: self.folder / name for name in ("stdin", "stdout", "stderr")}
        files["stdin"].write_text(stdin or "")
        for name in ("stdout", "stderr"):
            files[name].write_bytes(b"")
        request = {"args": list(args), "env": env, "cwd": cwd or os.getcwd(), "memory": memory,
                   **{name: str(path) for name, path in files.items()}}
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        started = self._line(time.monotonic() + 60)
        if not started.startswith("pid "):
            raise RuntimeError(f"the CLI fork server did not start the command ({started!r})")
        pid = int(started.split()[1])
        deadline = None if timeout is None else time.monotonic() + timeout
        ended = self._line(deadline)
        if not ended:  # past the timeout: killed, as subprocess.run does
            os.kill(pid, signal.SIGKILL)
            self._line(None)
            raise subprocess.TimeoutExpired(argv, timeout, files["stdout"].read_text(), files["stderr"].read_text())
        code = os.waitstatus_to_exitcode(int(ended.split()[1]))
        return subprocess.CompletedProcess(argv, code, files["stdout"].read_text(), files["stderr"].read_text())

    def close(self) -> None:
        if self.alive():
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


_server: _Server | None = None


def _the_server() -> _Server:
    global _server
    if _server is None or not _server.alive():
        _server = _Server()
        atexit.register(_server.close)
    return _server


def run_cli(args: list[str] | tuple[str, ...], env: dict, *, cwd: str | Path | None = None,
            stdin: str | None = None, timeout: float | None = 600,
            memory: int | None = None) -> subprocess.CompletedProcess:
    """`python -m clusterbench ARGS` with this environment, folder, standard input text, timeout and address-space
    limit (bytes), captured as text: what `subprocess.run(..., capture_output=True, text=True)` returns."""
    cwd = str(cwd) if cwd is not None else None
    if os.environ.get("CLUSTERBENCH_TEST_FORK", "1") != "0":
        server = _the_server()
        if server.executable == sys.executable and server.lock.acquire(blocking=False):
            try:
                return server.run(list(args), env, cwd, stdin, timeout, memory)
            finally:
                server.lock.release()

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run([sys.executable, "-m", "clusterbench", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, input=stdin, timeout=timeout, preexec_fn=limit if memory else None)
