"""Which nodes a campaign runs on: from a hostfile, a node set, or the current batch allocation.

Users already have their nodes written down in one of three forms, and clusterbench reads
each as it is: an MPI hostfile (Open MPI's `node1 slots=4`, MPICH's `node1:4`, or one name per
line), a ClusterShell node set (`node[1-8]`, `pi[01-04],head`), or the allocation of the batch
job it runs in: Slurm (`SLURM_JOB_NODELIST` with `SLURM_JOB_CPUS_PER_NODE`), LSF
(`LSB_DJOB_HOSTFILE`, one line per slot, else `LSB_MCPU_HOSTS`, "hostA 4 hostB 4") or PBS
(`PBS_NODEFILE`, one line per slot). `current_allocation` says which of them this process runs
inside. The order is kept: `nodes: 2` in a campaign means the first two hosts.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path

from clusterbench.errors import UserInputError

SLURM_ALLOCATION = "slurm"
ALLOCATIONS = ("slurm", "lsf", "pbs")
MAX_NODEFILE_BYTES = 16 * 2**20  # of a scheduler's node file (one line per slot)
MAX_ALLOCATION_HOSTS = 100_000


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


def _slot_lines(names: list[str] | list[tuple[str, int]], source: str) -> Inventory:
    """Host names, one per slot (or with their slot count), in order -> each host once with its slots."""
    counts: dict[str, int] = {}
    for item in names:
        name, slots = item if isinstance(item, tuple) else (item, 1)
        if len(counts) >= MAX_ALLOCATION_HOSTS and name not in counts:
            raise UserInputError(f"{source} lists more than {MAX_ALLOCATION_HOSTS} hosts")
        if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,255}", name):
            raise UserInputError(f"{source}: {name[:60]!r} is not a host name")
        counts[name] = counts.get(name, 0) + slots
    if not counts:
        raise UserInputError(f"{source} names no host")
    return Inventory([Host(n, c) for n, c in counts.items()], source)


def _read_nodefile(path: str, var: str) -> list[str]:
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_NODEFILE_BYTES + 1)
    except OSError as exc:
        raise UserInputError(f"cannot read {var}={path}: {exc.strerror}") from None
    if len(raw) > MAX_NODEFILE_BYTES:
        raise UserInputError(f"{var}={path} is larger than {MAX_NODEFILE_BYTES} bytes")
    return [line.split()[0] for line in raw.decode("utf-8", "replace").splitlines() if line.split()]


def lsf_allocation(env: dict[str, str] | None = None) -> Inventory:
    """The hosts of the LSF job this process runs in: LSB_DJOB_HOSTFILE (one host per slot),
    else LSB_MCPU_HOSTS ("hostA 4 hostB 4")."""
    env = os.environ if env is None else env
    path = env.get("LSB_DJOB_HOSTFILE")
    if path:
        return _slot_lines(_read_nodefile(path, "LSB_DJOB_HOSTFILE"), "the LSF allocation (LSB_DJOB_HOSTFILE)")
    pairs = env.get("LSB_MCPU_HOSTS", "")
    if not pairs.strip():
        raise UserInputError("not inside an LSF job (LSB_DJOB_HOSTFILE and LSB_MCPU_HOSTS are not set)",
                             hint="run inside bsub, or give --hosts node[1-8] or a hostfile")
    if len(pairs) > MAX_NODEFILE_BYTES:
        raise UserInputError(f"LSB_MCPU_HOSTS is longer than {MAX_NODEFILE_BYTES} characters")
    words = pairs.split()
    if len(words) % 2 or not all(re.fullmatch(r"\d{1,9}", w) for w in words[1::2]):
        raise UserInputError(f"LSB_MCPU_HOSTS is not 'host count host count ...': {pairs[:80]!r}")
    pairs_list = [(name, int(count)) for name, count in zip(words[::2], words[1::2], strict=True)]
    return _slot_lines(pairs_list, "the LSF allocation (LSB_MCPU_HOSTS)")


def pbs_allocation(env: dict[str, str] | None = None) -> Inventory:
    """The hosts of the PBS job this process runs in: PBS_NODEFILE, one line per slot (mpiprocs)."""
    env = os.environ if env is None else env
    path = env.get("PBS_NODEFILE")
    if not path:
        raise UserInputError("not inside a PBS job (PBS_NODEFILE is not set)",
                             hint="run inside qsub, or give --hosts node[1-8] or a hostfile")
    return _slot_lines(_read_nodefile(path, "PBS_NODEFILE"), "the PBS allocation (PBS_NODEFILE)")


def current_allocation(env: dict[str, str] | None = None) -> Inventory | None:
    """The inventory of the Slurm, LSF or PBS job this process runs inside, or None outside any.
    A job whose variables are set but unreadable is an error (UserInputError), not None."""
    env = os.environ if env is None else env
    if env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST"):
        return slurm_allocation(env)
    if env.get("LSB_DJOB_HOSTFILE") or env.get("LSB_MCPU_HOSTS"):
        return lsf_allocation(env)
    if env.get("PBS_NODEFILE"):
        return pbs_allocation(env)
    return None


def inventory(spec: str | None) -> Inventory:
    """From what a user typed: a hostfile path, 'slurm', 'lsf', 'pbs', a node set; None = this machine."""
    if not spec or spec in ("localhost", "local"):
        return Inventory([Host(socket.gethostname())], "this machine")
    if spec == SLURM_ALLOCATION:
        return slurm_allocation()
    if spec == "lsf":
        return lsf_allocation()
    if spec == "pbs":
        return pbs_allocation()
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
    # in this order: the name every run on this machine has is answered without a DNS lookup (getfqdn)
    return name in ("localhost", "127.0.0.1") or name == socket.gethostname() or name == socket.getfqdn()


def render_hostfile(hosts: list[Host], slots: int, implementation: str = "Open MPI") -> str:
    """The hostfile a run uses: each host with the ranks it gets."""
    if implementation == "Open MPI":
        return "".join(f"{h.name} slots={slots}\n" for h in hosts)
    return "".join(f"{h.name}:{slots}\n" for h in hosts)
