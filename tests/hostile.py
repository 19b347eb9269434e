"""Running the command line on hostile or careless input, bounded, and checking how it refused.

Every case of the hostile corpus (tests/test_hostile*.py) runs the real CLI in a subprocess under
an address-space limit (`ulimit -v`, RLIMIT_AS) and a wall-clock bound, so a resource bomb fails
the test instead of taking the machine down, and then asserts the exit code, that the message
names what and where, that no Python traceback leaked, and (by the caller) that nothing was
stored or run.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from tests.cli_fork import run_cli

MEMORY_LIMIT_BYTES = 3 * 2**30  # far above what any refusal needs; far below what a bomb takes
TIME_LIMIT_S = 60.0


@dataclass
class Refusal:
    code: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def text(self) -> str:
        return self.stdout + self.stderr


def run_bounded(*args: str, env: dict | None = None, cwd: Path | None = None, stdin: str | None = None,
                timeout_s: float = TIME_LIMIT_S) -> Refusal:
    """The CLI with `args`, under the memory limit; fails the test if it outlives `timeout_s`."""
    full_env = dict(os.environ) | {"COLUMNS": "200"} | (env or {})
    start = time.monotonic()
    done = run_cli(args, full_env, cwd=cwd, stdin=stdin, timeout=timeout_s, memory=MEMORY_LIMIT_BYTES)
    return Refusal(done.returncode, done.stdout, done.stderr, time.monotonic() - start)


def assert_refused(out: Refusal, code: int, *fragments: str) -> None:
    """Exit `code`, every fragment in the message, and no traceback."""
    assert out.code == code, f"exit {out.code}, wanted {code}:\n{out.text[-3000:]}"
    assert "Traceback" not in out.text, out.text[-3000:]
    for fragment in fragments:
        assert fragment in out.text, f"{fragment!r} not in:\n{out.text[-3000:]}"
