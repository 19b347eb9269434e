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
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from clusterbench.errors import EnvironmentProblem
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

    if len(hosts) == 1:  # this machine's state before every run: no pool (concurrent.futures loads logging)
        return [one(hosts[0])]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(fanout, len(hosts))) as pool:
        return list(pool.map(one, hosts))


def fold(answers: list[Answer]) -> list[tuple[list[str], Answer]]:
    """Group hosts whose output and exit code are identical (like `clush -b`), largest first."""
    groups: dict[tuple[int, str, str], list[Answer]] = {}
    for a in answers:
        groups.setdefault((a.exit_code, a.stdout, a.stderr), []).append(a)
    ordered = sorted(groups.values(), key=lambda g: -len(g))
    return [([a.host for a in group], group[0]) for group in ordered]


# ---------------------------------------------------------------- staging: copies on the nodes

STAGE_TIMEOUT_S = 120.0
MAX_STAGED_BYTES = 1 << 30  # copied to the nodes in one clusterbench process, at most
MAX_STAGED_FILES = 10_000


class StagingError(EnvironmentProblem):
    """A file could not be copied to a node (the node, the path and ssh's or tar's message): exit code 1."""


@dataclass
class NodeCopies:
    """What the nodes cannot see at the head's path, copied to a node-local folder on each.

    `roots` are the head's folders and files the nodes do not see (a checkout, a build cache or
    a venv under a node-private /tmp or local disk): a file under one of them that a run's
    command names is copied on first use to `folder` + its head path, on every node of `hosts`,
    and the command names the copy. `python` replaces the head's interpreter (a venv cannot be
    copied) by one every node has. The copies stay in the node-local folder after the run."""

    hosts: list[str]
    folder: str
    roots: list[str]
    python: tuple[str, str] | None = None  # (the head's sys.executable, the nodes' interpreter)
    copied: dict[str, str] = field(default_factory=dict)
    staged_bytes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # runs started at once

    def under_roots(self, path: str) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/") for r in self.roots)

    def node_path(self, path: str) -> str:
        """The path the nodes use for the head's `path`: the copy when `path` is under a root
        (copied now if it is not yet), else `path` itself."""
        if self.python and path == self.python[0]:
            return self.python[1]
        if not os.path.isabs(path) or not self.under_roots(path) or not os.path.exists(path):
            return path
        with self.lock:
            if path not in self.copied:
                self.copy([path])
            return self.copied[path]

    def argv(self, argv: list[str]) -> list[str]:
        return [self.node_path(a) for a in argv]

    def env_value(self, value: str) -> str:
        """A PATH-like value (LD_LIBRARY_PATH) with each directory under a root replaced by its copy."""
        return os.pathsep.join(self.node_path(p) for p in value.split(os.pathsep))

    def add_hosts(self, hosts: list[str]) -> None:
        """Also copy to `hosts` (a Slurm partition's other nodes, where a job may land): what is
        copied already now, the rest on first use as for the others."""
        new = [h for h in dict.fromkeys(hosts) if h not in self.hosts]
        if not new:
            return
        with self.lock:
            done = sorted(self.copied)
            if done:
                self._send(done, new, fresh=False)
            self.hosts += new

    def copy(self, paths: list[str]) -> None:
        """`paths` (files or folders) copied to every node at once, in one tar stream per node."""
        self.staged_bytes += self._send(paths, self.hosts)
        for p in paths:
            self.copied[p] = self.folder.rstrip("/") + os.path.abspath(p)

    def _send(self, paths: list[str], hosts: list[str], fresh: bool = True) -> int:
        """The bytes of the files of `paths`, sent to `hosts`; StagingError naming a node that failed.
        `fresh`: not copied to other nodes before (counted against the bound)."""
        data, total, count = _tar_of(paths)
        if count > MAX_STAGED_FILES or (self.staged_bytes if fresh else 0) + total > MAX_STAGED_BYTES:
            raise StagingError(f"staging {', '.join(paths)} would copy {count} files, "
                               f"{(self.staged_bytes + total) / 2**20:.0f} MiB in all (at most {MAX_STAGED_FILES} "
                               f"files, {MAX_STAGED_BYTES >> 20} MiB): put it on a shared file system instead")
        folder = shlex.quote(self.folder)  # ours alone: another user's folder of that name is refused
        command = (f"mkdir -p {folder} && {{ [ -O {folder} ] || {{ echo 'not owned by this user: '{folder} >&2; "
                   f"exit 1; }}; }} && chmod 700 {folder} && tar -C {folder} -xf -")
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(64, len(hosts)) or 1) as pool:
            answers = list(pool.map(lambda h: _feed(h, command, data), hosts))
        failed = [a for a in answers if not a.ok]
        if failed:
            a = failed[0]
            reason = (a.stderr.strip().splitlines() or [f"exit code {a.exit_code}"])[-1][:300]
            raise StagingError(f"could not copy {', '.join(paths)} to {a.host}:{self.folder}: {reason}")
        return total


def _tar_of(paths: list[str]) -> tuple[bytes, int, int]:
    """An uncompressed tar of `paths` under their absolute names (without the leading '/'),
    symbolic links followed: the bytes, the bytes of the files, and how many files."""
    import io
    import tarfile

    buffer = io.BytesIO()
    total = count = 0
    with tarfile.open(fileobj=buffer, mode="w", dereference=True) as tar:
        for path in paths:
            for item in _walk(os.path.abspath(path)):
                info = tar.gettarinfo(item, arcname=item.lstrip("/"))
                count += 1
                total += info.size if info.isfile() else 0
                if count > MAX_STAGED_FILES or total > MAX_STAGED_BYTES:
                    return b"", total, count
                if info.isfile():
                    with open(item, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return buffer.getvalue(), total, count


def _walk(path: str):
    yield path
    if os.path.isdir(path) and not os.path.islink(path):
        for parent, folders, files in os.walk(path):
            for name in sorted(folders) + sorted(files):
                yield os.path.join(parent, name)


def _feed(host: str, command: str, data: bytes, timeout_s: float = STAGE_TIMEOUT_S) -> Answer:
    """`command` on `host` with `data` on its standard input."""
    argv = ["bash", "-c", command] if is_local(host) else [*ssh_command(host, 10), command]
    try:
        out = subprocess.run(argv, input=data, capture_output=True, timeout=timeout_s, check=False,
                             start_new_session=True)
    except subprocess.TimeoutExpired:
        return Answer(host, SSH_UNREACHABLE, "", f"no answer within {timeout_s:.0f} s")
    except OSError as exc:
        return Answer(host, SSH_UNREACHABLE, "", str(exc))
    return Answer(host, out.returncode, out.stdout.decode(errors="replace"), out.stderr.decode(errors="replace"))


_node_copies: NodeCopies | None = None


def set_node_copies(copies: NodeCopies | None) -> None:
    """Make every later multi-node command of this process use `copies` (None: the head's paths)."""
    global _node_copies
    _node_copies = copies


def node_copies() -> NodeCopies | None:
    return _node_copies
