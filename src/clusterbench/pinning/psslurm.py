"""ParaStation psslurm's pinning (JSC's JURECA-DC, JUWELS): psslurm replaces slurmd and binds with its
own code, plugins/psslurm/src/psslurm/psslurmpin.c (psmgmt), read at commit 01410ae7 (2023).

What differs from stock Slurm:
  * every socket:core distribution combination is honoured, the core level too (block, cyclic,
    fcyclic); unset levels take psslurm.conf's defaults (DEFAULT_SOCKET_DIST=cyclic,
    DEFAULT_CORE_DIST=inherit: the core level follows the socket level);
  * without --cpu-bind the default is DEFAULT_CPU_BIND_TYPE=threads (no automatic choice);
  * hardware threads are numbered as on Linux with SMT: thread t of core c is t x cores + c (so
    "fill a core" means c, c + cores, then c + 1); each task starts from where the previous one
    left off, on the next socket (socket cyclic) or right after it (socket block), and takes its
    CPUs in the iteration order of the core distribution;
  * cores and sockets bindings grow a task's threads to whole cores / sockets (ldoms = sockets:
    psslurm treats NUMA domains as sockets); rank walks the step's cores from where the previous
    task stopped; rank_ldom takes the task's CPUs on the next socket; none = the step's CPUs;
  * a mask or map that does not fit the step pins to all the step's CPUs (with a message) instead
    of failing, except map_cpu with -c > 1, which aborts the step.
--hint=nomultithread and compute_bound pin as if every core had one thread (psslurm sees the first
as CPU_BIND_ONE_THREAD_PER_CORE; the second is assumed to reach it as SLURM_HINT, where it reads it).
The step's cores come from slurmctld as for stock Slurm (psslurm only pins inside them). psslurm
numbers threads t x cores + c and maps them through psid's CPU map; here that map is hwloc's order
(thread t of the c-th core), the identity on Linux-numbered nodes such as the EPYC 7742 fixture.
"""

from __future__ import annotations

import re

from clusterbench.errors import UserInputError
from clusterbench.pinning.model import TaskPlacement, parse_mask
from clusterbench.pinning.slurm_affinity import step_cores
from clusterbench.pinning.slurm_shape import NodeShape, Request, tasks_by_node

WHERE = "--cpu-bind"

# thread iteration orders (psslurmpin.c enum thread_iter_strategy)
CYCLECORES, CYCLESOCKETS_CYCLECORES, CYCLESOCKETS_FILLCORES, FILLSOCKETS_CYCLECORES, FILLSOCKETS_FILLCORES = range(5)
# where the next task starts (enum next_start_strategy)
CYCLIC_CYCLIC, BLOCK_BLOCK, CYCLIC_BLOCK, BLOCK_CYCLIC = range(4)

_STRATEGIES = {  # (socket, core) distribution -> (iteration order, next start)
    ("block", "cyclic"): (FILLSOCKETS_FILLCORES, BLOCK_CYCLIC),
    ("block", "fcyclic"): (FILLSOCKETS_CYCLECORES, BLOCK_CYCLIC),
    ("block", "block"): (FILLSOCKETS_FILLCORES, BLOCK_BLOCK),
    ("fcyclic", "block"): (CYCLESOCKETS_FILLCORES, CYCLIC_BLOCK),
    ("fcyclic", "cyclic"): (CYCLESOCKETS_FILLCORES, CYCLIC_CYCLIC),
    ("fcyclic", "fcyclic"): (CYCLESOCKETS_CYCLECORES, CYCLIC_CYCLIC),
    ("cyclic", "block"): (FILLSOCKETS_FILLCORES, CYCLIC_BLOCK),
    ("cyclic", "fcyclic"): (FILLSOCKETS_CYCLECORES, CYCLIC_CYCLIC),
    ("cyclic", "cyclic"): (FILLSOCKETS_FILLCORES, CYCLIC_CYCLIC),
}


class _Node:
    """psslurm's view of one node: S sockets x C cores x T threads, thread index t x cores + core."""

    def __init__(self, shape: NodeShape, threads: int, step: list[int]):
        self.shape = shape
        self.sockets, self.per_socket, self.threads = shape.sockets, shape.cores, threads
        self.cores = shape.sockets * shape.cores
        self.count = self.cores * threads
        self.step = frozenset(step)  # the step's cores

    def core(self, thread: int) -> int:
        return thread % self.cores

    def socket(self, thread: int) -> int:
        return self.core(thread) // self.per_socket

    def iterate(self, order: int, start: int):
        """psslurmpin.c thread_iter_next: up to `count` threads from `start` in the given order."""
        nxt = start
        for n in range(1, self.count + 1):
            if nxt >= self.count:
                return
            yield nxt
            if n >= self.count:
                return
            if nxt == self.count - 1:  # the last thread is always followed by thread 0
                nxt = 0
                continue
            thread, core = divmod(nxt, self.cores)
            if order == CYCLECORES:
                nxt += 1
            elif order == CYCLESOCKETS_CYCLECORES:
                if (nxt + 1) % self.cores == 0:
                    nxt = (thread + 1) * self.cores
                else:
                    nxt = core + self.per_socket
                    nxt = (nxt + (1 if nxt >= self.cores else 0)) % self.cores + self.cores * thread
            elif order == CYCLESOCKETS_FILLCORES:
                nxt += self.per_socket
                nxt = (nxt + (1 if nxt >= self.count else 0)) % self.count
            elif order == FILLSOCKETS_CYCLECORES:
                socket = core // self.per_socket
                nxt += 1
                nextcore = nxt % self.cores
                if nextcore // self.per_socket > socket or nextcore == 0:
                    nxt += self.cores - self.per_socket
                    if nxt >= self.count:
                        nxt = nxt % self.count + self.per_socket
            else:  # FILLSOCKETS_FILLCORES
                nxt += self.cores
                if nxt >= self.count:
                    nxt = nxt % self.count + 1

    def next_socket_start(self, thread: int) -> int:
        return (self.socket(thread) + 1) % self.sockets * self.per_socket

    def all_threads(self) -> set[int]:
        """The step's hardware threads (psslurm's stepHWthreads): every thread of its cores, even under
        --hint=nomultithread, which only narrows what the pinning iterates over."""
        return {t * self.cores + c for c in self.step for t in range(self.shape.threads)}

    def socket_threads(self, socket: int) -> set[int]:
        return {t * self.cores + socket * self.per_socket + c for c in range(self.per_socket)
                for t in range(self.threads)}

    def core_threads(self, core: int) -> set[int]:
        return {t * self.cores + core for t in range(self.threads)}

    def os_cpus(self, threads) -> frozenset[int]:
        """psid's map: thread t of core c -> hwloc's t-th PU of the c-th core."""
        logical, per_core = self.shape.logical, self.shape.threads
        return frozenset(logical[(h % self.cores) * per_core + h // self.cores] for h in threads)

    def physical(self, cpus) -> frozenset[int]:
        """CPU numbers psslurm takes as physical (masks, maps, ldoms): unmap then map = identity."""
        return frozenset(cpus) & self.shape.pus


class _Pinner:
    """The per-node state of psslurmpin.c setStepSlots: thread use counts, the last thread used."""

    def __init__(self, node: _Node, tpp: int, order: int, start_rule: int, overcommit: bool, notes: list[str]):
        self.node, self.tpp, self.order, self.start_rule = node, tpp, order, start_rule
        self.overcommit, self.notes = overcommit, notes
        self.used = [0] * node.count
        self.last = -1
        self.maxuse = 1
        self.rank_last_cpu, self.rank_thread = -1, 0

    def _all(self, why: str) -> set[int]:
        if why not in self.notes:
            self.notes.append(why)
        return self.node.all_threads()

    def next_start(self) -> int | None:
        node = self.node
        if self.start_rule == CYCLIC_CYCLIC:
            it = node.iterate(FILLSOCKETS_CYCLECORES, node.next_socket_start(self.last))
        elif self.start_rule == BLOCK_BLOCK:
            it = node.iterate(FILLSOCKETS_FILLCORES, self.last)
        elif self.start_rule == CYCLIC_BLOCK:
            it = node.iterate(FILLSOCKETS_FILLCORES, node.next_socket_start(self.last))
        else:
            it = node.iterate(FILLSOCKETS_FILLCORES, (node.core(self.last) + 1) % node.cores)
        for thread in it:
            if node.core(thread) in node.step and self.used[thread] < self.maxuse:
                return thread
        return None

    def threads_binding(self) -> set[int]:
        """getThreadsBinding: tpp threads in the distribution's order from the task's start."""
        start = 0
        if self.last >= 0:
            found = self.next_start()
            if found is None:
                if not self.overcommit:
                    return self._all("psslurm: no threads left for a task, it is pinned to all the step's CPUs")
                self.maxuse += 1
                self.last, found = -1, 0
            start = found
        return self._fill(self.order, start, lower_first=True)

    def socket_rank_binding(self) -> set[int]:
        """getSocketRankBinding (rank_ldom): tpp threads, filling cores, from the next socket on."""
        start = self.node.next_socket_start(self.last) if self.last >= 0 else 0
        return self._fill(FILLSOCKETS_FILLCORES, start, lower_first=False)

    def _fill(self, order: int, start: int, lower_first: bool) -> set[int]:
        """tpp threads of the step in `order` from `start`, each used at most `maxuse` times; with
        `lower_first`, a core's lower hardware threads before the one the order reached. When the
        step runs out: over-committed, every thread may be used once more and the walk starts again
        from 0; else the task gets all the step's CPUs. The last thread taken is where the next
        task starts."""
        node, cpus = self.node, set()
        left, thread = self.tpp, start
        while True:
            for thread in node.iterate(order, start):
                core = node.core(thread)
                if core not in node.step or self.used[thread] >= self.maxuse:
                    continue
                if lower_first:
                    for lower in range(thread // node.cores):
                        if self.used[lower * node.cores + core] < self.maxuse:
                            thread = lower * node.cores + core
                            break
                cpus.add(thread)
                self.used[thread] += 1
                left -= 1
                if left == 0:
                    break
            if left == 0:
                break
            if not self.overcommit:
                cpus = self._all("psslurm: not enough threads left for a task, it is pinned to all the step's CPUs")
                break
            self.maxuse += 1
            self.last, start = -1, 0
        self.last = thread
        return cpus

    def rank_binding(self) -> set[int]:
        """getRankBinding: the next tpp step cores after the last one used, on the current thread
        level; when a level is used up, the next hardware thread of every core."""
        node, cpus, found = self.node, set(), 0
        while found <= self.tpp:
            for core in range(node.cores):
                if (self.rank_last_cpu == -1 or self.rank_last_cpu < core) and core in node.step:
                    cpus.add(core + self.rank_thread * node.cores)
                    self.rank_last_cpu = core
                    found += 1
                    if found == self.tpp:
                        return cpus
            if not found and self.rank_last_cpu == -1:
                return cpus
            if found == self.tpp:
                return cpus
            self.rank_last_cpu = -1
            self.rank_thread = (self.rank_thread + 1) % node.threads
        return cpus

    def grow(self, cpus: set[int], unit: str) -> set[int]:
        """bindToSockets / bindToCores: every socket (core) holding one of the task's threads, whole."""
        node = self.node
        if unit == "cores":
            return set().union(*(node.core_threads(node.core(t)) for t in cpus))
        return set().union(*(node.socket_threads(node.socket(t)) for t in cpus))


def _strategy(req: Request, notes: list[str]) -> tuple[int, int]:
    socket = req.dist.socket or "cyclic"
    core = req.dist.core or socket
    if not req.dist.socket or not req.dist.core:
        notes.append(f"psslurm distribution {socket}:{core} (psslurm.conf defaults DEFAULT_SOCKET_DIST=cyclic, "
                     "DEFAULT_CORE_DIST=inherit assumed)")
    return _STRATEGIES[(socket, core)]


def psslurm_tasks(req: Request, shape: NodeShape, notes: list[str]) -> list[TaskPlacement]:
    """Every task's CPUs as psslurm pins them, node by node."""
    kind = req.bind.kind
    hints = req.hints
    if hints:
        kind = "cores" if hints & {"compute_bound", "memory_bound"} else "threads"
        if "memory_bound" in hints and req.cpus_per_task > 1:
            notes.append("psslurm ignores --hint=memory_bound with --cpus-per-task > 1 (it says so)")
    elif kind is None:
        kind = "threads"
        notes.append("no --cpu-bind: psslurm binds to threads (DEFAULT_CPU_BIND_TYPE=threads assumed)")
    one_thread = bool(hints & {"nomultithread", "compute_bound"})
    if one_thread and shape.threads > 1:
        notes.append("psslurm pins as if every core had one hardware thread (--hint)")
    if kind == "map_cpu" and req.cpus_per_task > 1:
        raise UserInputError("psslurm: type map_cpu cannot be used with --cpus-per-task > 1 (it aborts the step)",
                             where=WHERE, hint="use mask_cpu, or -c 1")
    order, start_rule = _strategy(req, notes)

    def node_sets(count: int, node_notes: list[str]) -> list[frozenset[int]]:
        node = _Node(shape, 1 if one_thread else shape.threads, step_cores(req, shape, count, node_notes))
        pinner = _Pinner(node, req.cpus_per_task, order, start_rule, req.overcommit, notes)
        return _node_sets(req, kind, node, pinner, count)

    return tasks_by_node(req, shape, node_sets, notes)


def _node_sets(req: Request, kind: str, node: _Node, pinner: _Pinner, ntasks: int) -> list[frozenset[int]]:
    """The CPUs of each local task. Over-committed, psslurm's state comes back whenever every thread has
    been used equally often: from the first repeat on the sets repeat too, so they are copied."""
    sets: list[frozenset[int]] = []
    seen: dict[tuple, int] = {}
    stateful = kind not in ("none", "map_cpu", "mask_cpu", "map_ldom", "mask_ldom")
    for local in range(ntasks):
        if stateful and req.overcommit and min(pinner.used) == max(pinner.used):
            key = (pinner.last, pinner.maxuse - pinner.used[0], pinner.rank_last_cpu, pinner.rank_thread)
            if key in seen:
                start = seen[key]
                sets.extend(sets[start + (k - start) % (local - start)] for k in range(local, ntasks))
                return sets
            seen[key] = local
        sets.append(_task_cpus(req, kind, node, pinner, local))
    return sets


def _task_cpus(req: Request, kind: str, node: _Node, pinner: _Pinner, local: int) -> frozenset[int]:
    """psslurmpin.c setCPUset for one task, as OS CPUs."""
    if kind == "none":
        return node.os_cpus(node.all_threads())
    if kind in ("map_cpu", "mask_cpu", "map_ldom", "mask_ldom"):
        return _from_list(req, kind, node, pinner, local)
    if req.cpus_per_task > node.count:
        return node.os_cpus(pinner._all("psslurm: a task wants more threads than the node has: all the step's CPUs"))
    if kind == "rank":
        return node.os_cpus(pinner.rank_binding())
    if kind == "rank_ldom":
        return node.os_cpus(pinner.socket_rank_binding())
    cpus = pinner.threads_binding()
    if kind in ("sockets", "ldoms"):
        note = "psslurm: ldoms are sockets (it treats NUMA domains as sockets)"
        if kind == "ldoms" and note not in pinner.notes:
            pinner.notes.append(note)
        cpus = pinner.grow(cpus, "sockets")
    elif kind == "cores":
        cpus = pinner.grow(cpus, "cores")
    return node.os_cpus(cpus)


def _strtoul(value: str) -> int:
    """A map entry as psslurm reads it (C strtoul, base 0): 0x hexadecimal, a leading 0 octal."""
    if value.startswith("0x"):
        return int(value[2:], 16)
    if value.startswith("0"):
        octal = re.match(r"[0-7]*", value).group()
        return int(octal, 8) if octal else 0
    return int(value)


def _from_list(req: Request, kind: str, node: _Node, pinner: _Pinner, local: int) -> frozenset[int]:
    """getBindMapFromString: the task's entry (local id, wrapping); what does not fit the step pins
    to all the step's CPUs instead."""
    value = req.bind.values[local % len(req.bind.values)]
    step_os = node.os_cpus(node.all_threads())
    fallback = f"psslurm: --cpu-bind={kind} entry {value} does not fit the step: pinned to all its CPUs"
    if kind == "map_cpu":
        cpu = _strtoul(value)
        if cpu >= node.count or cpu not in step_os:
            return node.os_cpus(pinner._all(fallback))
        return frozenset({cpu})
    if kind == "mask_cpu":
        cpus = node.physical(parse_mask(value))
        if len(cpus) < req.cpus_per_task or not cpus <= step_os:
            return node.os_cpus(pinner._all(fallback))
        return cpus
    sockets = [_strtoul(value)] if kind == "map_ldom" else \
        [i for i in range(int(value, 16).bit_length()) if int(value, 16) >> i & 1]
    if kind == "map_ldom" and sockets[0] >= node.sockets:
        return node.os_cpus(pinner._all(fallback))
    # psslurm numbers a socket's CPUs t x cores + socket x cores-per-socket + c and takes them as physical
    cpus = node.physical(set().union(*(node.socket_threads(s) for s in sockets)) if sockets else set())
    if kind == "mask_ldom" and (len(cpus) < req.cpus_per_task or not cpus <= step_os):
        return node.os_cpus(pinner._all(fallback))
    return cpus
