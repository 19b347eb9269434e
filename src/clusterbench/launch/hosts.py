"""Which nodes a campaign runs on: from a hostfile, a node set, or the current Slurm allocation.

Users already have their nodes written down in one of three forms, and clusterbench reads
each as it is: an MPI hostfile (Open MPI's `node1 slots=4`, MPICH's `node1:4`, or one name per
line), a ClusterShell node set (`node[1-8]`, `pi[01-04],head`), or the allocation of the Slurm
job it runs in (`SLURM_JOB_NODELIST` with `SLURM_JOB_CPUS_PER_NODE`). The order is kept:
`nodes: 2` in a campaign means the first two hosts.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path

from clusterbench.errors import UserInputError

SLURM_ALLOCATION = "slurm"


@dataclass(frozen=True)
class Host:
    name: str
    slots: int | None = None  # None: not said; the node's core count is used


@dataclass
class Inventory:
    hosts: list[Host]
    source: str  # where the list came from, for messages and provenance

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def nodeset(self, count: int | None = None) -> str:
        """The folded form (node[1-4]) of the first `count` hosts."""
        from ClusterShell.NodeSet import NodeSet  # here: 15 ms to import, which a run on this machine never needs

        return str(NodeSet.fromlist(self.names[:count] if count else self.names))

    def first(self, count: int) -> list[Host]:
        if count > len(self.hosts):
            raise UserInputError(f"{count} nodes asked for, but {self.source} lists only {len(self.hosts)}",
                                 hint=f"hosts: {self.nodeset()}")
        return self.hosts[:count]


def expand_nodeset(text: str) -> list[str]:
    """Names in the order written (NodeSet alone sorts them): 'pi[01-02],head' -> pi01, pi02, head."""
    from ClusterShell.NodeSet import NodeSet, NodeSetParseError

    parts = re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", text)
    try:
        names = [name for part in parts for name in NodeSet(part)]
        if not names or ",".join(parts) != text.strip():
            raise NodeSetParseError(text, "unbalanced brackets or empty name")
        return list(dict.fromkeys(names))
    except NodeSetParseError as exc:
        raise UserInputError(f"not a node set: {text!r} ({exc})",
                             hint="write node[1-8], node1,node2 or pi[01-04],head") from None


_OMPI_LINE = re.compile(r"^(\S+)(?:\s+.*?\bslots\s*=\s*(\d+))?")
_HYDRA_LINE = re.compile(r"^([^\s:]+):(\d+)")


def parse_hostfile(text: str, source: str = "hostfile") -> Inventory:
    """Open MPI (`name slots=N ...`), MPICH (`name:N`) or plain names; comments and blanks skipped.
    A name may itself be a node set (`node[1-4] slots=2`)."""
    hosts: list[Host] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = _HYDRA_LINE.match(line) or _OMPI_LINE.match(line)
        if not m:
            raise UserInputError(f"cannot read this hostfile line: {raw!r}", where=f"{source}:{number}")
        slots = int(m.group(2)) if m.group(2) else None
        hosts += [Host(name, slots) for name in expand_nodeset(m.group(1))]
    if not hosts:
        raise UserInputError("the hostfile names no host", where=source)
    return Inventory(_unique(hosts, source), source)


def slurm_allocation(env: dict[str, str] | None = None) -> Inventory:
    """The nodes of the Slurm job this process runs in, with their CPU counts."""
    env = os.environ if env is None else env
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise UserInputError("not inside a Slurm allocation (SLURM_JOB_NODELIST is not set)",
                             hint="run inside salloc/sbatch, or give --hosts node[1-8] or a hostfile")
    names = expand_nodeset(nodelist)
    slots = _slurm_counts(env.get("SLURM_JOB_CPUS_PER_NODE", ""), len(names))
    return Inventory([Host(n, s) for n, s in zip(names, slots, strict=True)], "the Slurm allocation")


def _slurm_counts(text: str, count: int) -> list[int | None]:
    """'4(x2),2' -> [4, 4, 2]; anything unreadable -> unknown slots."""
    out: list[int | None] = []
    for part in filter(None, text.split(",")):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not m:
            return [None] * count
        out += [int(m.group(1))] * int(m.group(2) or 1)
    return out if len(out) == count else [None] * count


def inventory(spec: str | None) -> Inventory:
    """From what a user typed: a hostfile path, 'slurm', a node set; None = this machine."""
    if not spec or spec in ("localhost", "local"):
        return Inventory([Host(socket.gethostname())], "this machine")
    if spec == SLURM_ALLOCATION:
        return slurm_allocation()
    path = Path(spec).expanduser()
    if path.is_file():
        return parse_hostfile(path.read_text(), str(path))
    if "/" in spec:
        raise UserInputError(f"hostfile not found: {spec}")
    return Inventory(_unique([Host(n) for n in expand_nodeset(spec)], spec), spec)


def _unique(hosts: list[Host], source: str) -> list[Host]:
    seen: set[str] = set()
    for h in hosts:
        if h.name in seen:
            raise UserInputError(f"host {h.name} is listed twice", where=source,
                                 hint="give each node once, with slots=N for several ranks")
        seen.add(h.name)
    return hosts


def is_local(name: str) -> bool:
    """Is `name` this machine (run directly, not over ssh)?"""
    return name in ("localhost", "127.0.0.1", socket.gethostname(), socket.getfqdn())


def render_hostfile(hosts: list[Host], slots: int, implementation: str = "Open MPI") -> str:
    """The hostfile a run uses: each host with the ranks it gets."""
    if implementation == "Open MPI":
        return "".join(f"{h.name} slots={slots}\n" for h in hosts)
    return "".join(f"{h.name}:{slots}\n" for h in hosts)
