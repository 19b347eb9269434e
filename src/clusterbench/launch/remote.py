"""Run one shell command on many nodes at once over ssh, and fold identical answers together.

In `launch` (not `cluster`) because the executor uses it too: node state before a run, the
activity samplers during it, and system settings applied and restored around it.

This is what the studies' `for i in 1..8; do ssh node$i ...; done` loops did, in parallel and
with every failure kept: an unreachable node is an answer (exit code 255 and ssh's message),
not an exception. The ssh command can be changed with `$CLUSTERBENCH_SSH` (say `ssh -p 2222
-i key`); BatchMode makes a node that wants a password fail at once instead of waiting.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from clusterbench.launch.hosts import is_local

SSH_UNREACHABLE = 255


@dataclass
class Answer:
    host: str
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def unreachable(self) -> bool:
        return self.exit_code == SSH_UNREACHABLE


def ssh_command(host: str, connect_timeout_s: int = 5) -> list[str]:
    base = shlex.split(os.environ.get("CLUSTERBENCH_SSH", "ssh"))
    return [*base, "-o", "BatchMode=yes", "-o", f"ConnectTimeout={connect_timeout_s}", host]


def run_on(host: str, command: str, timeout_s: float = 30.0) -> Answer:
    """`command` (a shell line) on `host`: directly when it is this machine, else over ssh."""
    argv = ["bash", "-c", command] if is_local(host) else [*ssh_command(host, int(min(timeout_s, 10))), command]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                             stdin=subprocess.DEVNULL, check=False,
                             start_new_session=True)  # a terminal's Ctrl-C stops clusterbench, which then
        # still needs these connections: to put back the settings it changed on the nodes
    except subprocess.TimeoutExpired:
        return Answer(host, SSH_UNREACHABLE, "", f"no answer within {timeout_s:.0f} s")
    except OSError as exc:
        return Answer(host, SSH_UNREACHABLE, "", str(exc))
    return Answer(host, out.returncode, out.stdout, out.stderr)


def run_everywhere(hosts: list[str], command: str, timeout_s: float = 30.0, fanout: int = 64,
                   on_answer: Callable[[Answer], None] | None = None) -> list[Answer]:
    """`command` on all hosts, at most `fanout` at a time; answers in the hosts' order."""
    if not hosts:
        return []

    def one(host: str) -> Answer:
        answer = run_on(host, command, timeout_s)
        if on_answer:
            on_answer(answer)
        return answer

    with ThreadPoolExecutor(max_workers=min(fanout, len(hosts))) as pool:
        return list(pool.map(one, hosts))


def fold(answers: list[Answer]) -> list[tuple[list[str], Answer]]:
    """Group hosts whose output and exit code are identical (like `clush -b`), largest first."""
    groups: dict[tuple[int, str, str], list[Answer]] = {}
    for a in answers:
        groups.setdefault((a.exit_code, a.stdout, a.stderr), []).append(a)
    ordered = sorted(groups.values(), key=lambda g: -len(g))
    return [([a.host for a in group], group[0]) for group in ordered]
