"""What the nodes of a multi-node run execute, whether each node can reach it, and staging.

A run across nodes starts, on every node, the Python that runs the placement probe (the head's
`sys.executable`), the probe itself (pinning/probe.py), the kernels built in the build cache, the
official binaries (xhpl, hpcc, IMB, OSU) and, over ssh, `python3` for the activity sampler. On a
cluster whose home is shared these are the same files everywhere; a checkout, a venv or a build
cache on a node-local path (/tmp, a local disk) is not there on the nodes, and every rank then
fails with an opaque "exit code 132 ... while attempting to start process rank 0". `look` asks
each node, in one ssh per node and bounded time, whether it reaches each of these paths (a folder
by a token file the head writes into it: a node-local folder of the same name is not the head's).

`stage` is the way out when a shared file system is not: the head's files the nodes cannot see
are copied, over the same ssh, to a node-local folder on each node (`CLUSTERBENCH_STAGE_DIR`,
default /tmp/clusterbench-stage-UID), the probe and the binaries now, a kernel built later on
its first use (launch/remote.py: NodeCopies), and the commands name the copies. The head's venv
interpreter is replaced by the interpreter behind it, or the nodes' python3: the probe and the
sampler use the standard library only. Staging is asked for with `--stage` or
`CLUSTERBENCH_STAGE=1`. The results directory cannot be staged: every node writes its records there.
"""

from __future__ import annotations

import os
import shlex
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.errors import EnvironmentProblem
from clusterbench.launch.remote import NodeCopies, node_copies, run_everywhere, set_node_copies

STAGE_ENV = "CLUSTERBENCH_STAGE"
STAGE_DIR_ENV = "CLUSTERBENCH_STAGE_DIR"
LOOK_TIMEOUT_S = 30.0
MAX_NEEDS = 256  # paths asked about per node (binaries of a campaign included)
_TOKEN_PREFIX = ".clusterbench-visible-"

_requested = False


def request(on: bool = True) -> None:
    """Stage what the nodes cannot see, in this process (the `--stage` option)."""
    global _requested
    _requested = on


def requested() -> bool:
    return _requested or os.environ.get(STAGE_ENV, "").lower() in ("1", "yes", "true", "on")


def stage_folder() -> str:
    return os.environ.get(STAGE_DIR_ENV) or f"/tmp/clusterbench-stage-{os.getuid()}"


@dataclass(frozen=True)
class Need:
    """A path every node must reach: `kind` x (runs it), r (reads it) or d (the head's folder)."""

    path: str
    what: str
    kind: str
    shown: bool = True  # False: asked only to choose a stand-in (the interpreter behind a venv's)


def needs(binaries: list[str] = ()) -> list[Need]:
    """What a multi-node run makes the nodes execute or read, as paths on the head."""
    from clusterbench.build.registry import builds_root
    from clusterbench.execution.placement import PROBE
    from clusterbench.native.build import cache_root

    found = [Need(sys.executable, "the Python that runs the placement probe", "x"),
             Need(os.path.realpath(sys.executable), "the interpreter behind it", "x", shown=False),
             Need(str(PROBE), "the placement probe", "r")]
    folders = [(str(cache_root()), "the kernels' build cache"), (str(builds_root()), "the official builds' cache")]
    for path, what in folders:
        path = os.path.abspath(path)
        if not any(path == n.path or path.startswith(n.path + "/") for n in found if n.kind == "d"):
            found.append(Need(path, what, "d"))
    for binary in binaries:
        if binary and os.path.isabs(binary) and os.path.exists(binary):
            found.append(Need(os.path.abspath(binary), "a benchmark binary", "x"))
    unique: dict[tuple[str, str], Need] = {}
    for n in found:
        unique.setdefault((n.path, n.kind), n)  # the first says why (sys.executable may be no link)
    return list(unique.values())[:MAX_NEEDS]


@dataclass
class Sight:
    """What each node answered: the needs it cannot reach, its python3, and nodes that did not answer."""

    unseen: dict[str, list[Need]] = field(default_factory=dict)
    python3: dict[str, str | None] = field(default_factory=dict)
    unanswered: dict[str, str] = field(default_factory=dict)

    def shown(self) -> dict[str, list[Need]]:
        return {h: [n for n in ns if n.shown] for h, ns in self.unseen.items() if any(n.shown for n in ns)}


def look(hosts: list[str], wanted: list[Need], timeout_s: float = LOOK_TIMEOUT_S) -> Sight:
    """Ask every node at once, one ssh each, whether it reaches every path of `wanted`."""
    token = uuid.uuid4().hex
    written: list[Path] = []
    made: list[list[Path]] = []
    lines = []
    for i, need in enumerate(wanted):
        if need.kind == "d":
            folder = Path(need.path)
            made.append([p for p in (folder, *folder.parents) if not p.exists()])
            marker = folder / f"{_TOKEN_PREFIX}{token[:12]}"
            try:
                folder.mkdir(parents=True, exist_ok=True)
                marker.write_text(token + "\n")
                written.append(marker)
            except OSError:
                continue  # the head cannot write its own cache: the build says so, with its hint
            lines.append(f'[ "$(cat -- {shlex.quote(str(marker))} 2>/dev/null)" = {token} ] '
                         f"&& echo '@@cb {i} ok' || echo '@@cb {i} no'")
        else:
            flag = "-x" if need.kind == "x" else "-r"
            lines.append(f"test {flag} {shlex.quote(need.path)} && echo '@@cb {i} ok' || echo '@@cb {i} no'")
    lines.append('echo "@@cb python3 $(command -v python3)"')
    try:
        answers = run_everywhere(hosts, "\n".join(lines), timeout_s)
    finally:
        for marker in written:
            marker.unlink(missing_ok=True)
        for folders in made:
            remove_made(folders)
    sight = Sight()
    for a in answers:
        seen: dict[str, str] = {}
        for line in a.stdout.splitlines():
            parts = line.split(" ", 2)
            if len(parts) >= 3 and parts[0] == "@@cb":
                seen[parts[1]] = parts[2].strip()
        if "python3" not in seen:
            sight.unanswered[a.host] = (a.stderr.strip().splitlines() or [f"exit code {a.exit_code}"])[-1][:300]
            continue
        sight.python3[a.host] = seen["python3"] or None
        missing = [n for i, n in enumerate(wanted) if seen.get(str(i)) == "no"]
        if missing:
            sight.unseen[a.host] = missing
    return sight


def remove_made(made: list[Path]) -> None:
    """The folders a check made, innermost first, if nothing else was put there (the preflight's too)."""
    for path in made:
        try:
            path.rmdir()
        except OSError:
            return


def stage(hosts: list[str], sight: Sight, folder: str | None = None) -> NodeCopies:
    """Copy what some node cannot see to `folder` on every node of `hosts` and make this process's
    multi-node commands use the copies; EnvironmentProblem (exit code 1) when it cannot be done."""
    folder = folder or stage_folder()
    if not os.path.isabs(folder):
        raise EnvironmentProblem(f"{STAGE_DIR_ENV}={folder} is not an absolute path",
                                 hint="give a node-local folder such as /tmp/clusterbench-stage")
    unseen = {n for ns in sight.unseen.values() for n in ns if n.shown}
    python = None
    if any(n.path == sys.executable for n in unseen):
        python = (sys.executable, _stand_in_python(hosts, sight))
    roots = sorted({n.path for n in unseen if n.path != sys.executable})
    copies = NodeCopies(list(hosts), folder, roots, python)
    files = [n.path for n in unseen if n.kind in ("x", "r") and n.path != sys.executable]
    if files:
        copies.copy(sorted(set(files)))  # the probe and the binaries now: a node that cannot take them fails here
    set_node_copies(copies)
    return copies


def _stand_in_python(hosts: list[str], sight: Sight) -> str:
    """The interpreter the nodes run the probe with: the one behind the head's venv when every
    node has it, else the nodes' python3 when they all have it at the same path."""
    behind = os.path.realpath(sys.executable)
    if not any(n.path == behind and n.kind == "x" for ns in sight.unseen.values() for n in ns):
        return behind
    found = {sight.python3.get(h) for h in hosts}
    if len(found) == 1 and None not in found:
        return found.pop()
    lacking = sorted(h for h in hosts if not sight.python3.get(h))
    raise EnvironmentProblem(
        f"no Python to run the placement probe with on every node: {sys.executable} and {behind} are not "
        f"there, and python3 is " + (f"missing on {', '.join(lacking)}" if lacking else "at different paths"),
        hint="install python3 on the nodes, or run clusterbench from a Python on a shared file system")


def extend_to(hosts: list[str]) -> None:
    """Also stage on `hosts` when something is staged: every node a run may land on (a batch
    scheduler's partition, beyond the nodes the preflight checked)."""
    copies = node_copies()
    if copies is not None:
        copies.add_hosts(hosts)


def unstage() -> None:
    """Commands name the head's paths again (the copies stay in the nodes' folder)."""
    set_node_copies(None)


def staged() -> NodeCopies | None:
    return node_copies()
