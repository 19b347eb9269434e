"""Stock Slurm 22.05: the CPUs a step gets on each node and the task/affinity plugin's masks.

Per node, three stages, each as Slurm does it (sources named so the rules can be checked):
  1. the step's cores (slurmctld, step_mgr.c _pick_step_cores): with --exact, which -c implies
     since 22.05, only ceil(tasks x CPUs / threads per core) cores, or whole cores per task when a
     task needs more than a core; taken cyclically over the sockets, cores-per-task at a time
     (default), socket after socket (*:block) or core index by core index over the sockets
     (*:fcyclic). Without --exact the step has the whole node.
  2. the layout (slurmd, dist_tasks.c _task_layout_lllp_cyclic/_block) in abstract CPU numbers:
     socket-level block or plane fills the step's CPUs in order; otherwise tasks go round the
     sockets, each taking its CPUs from where its socket left off (fcyclic: every CPU of a task on
     the next socket). Binding to cores skips the unused threads of a task's last core. Then each
     mask grows to whole cores or sockets (of the step's CPUs), or, for ldoms, to whole NUMA nodes.
  3. explicit bindings (affinity.c get_cpuset): rank binds local task i to OS CPU i, rank_ldom to
     NUMA node i, map/mask lists pick entry i modulo their length; these, and none, are checked
     against the step's CPUs first (dist_tasks.c lllp_distribution).
The third --distribution level is not used by task/affinity (only task/cgroup reads it).
"""

from __future__ import annotations

from clusterbench.errors import UserInputError
from clusterbench.pinning.model import TaskPlacement, parse_mask
from clusterbench.pinning.slurm_shape import NodeShape, Request, tasks_by_node

WHERE = "--cpu-bind"


def affinity_tasks(req: Request, shape: NodeShape, notes: list[str]) -> list[TaskPlacement]:
    """Every task's placement, node by node."""
    if req.dist.core:
        notes.append(f"the third --distribution level ({req.dist.core}) is ignored: stock Slurm 22.05's "
                     "task/affinity does not read it (only task/cgroup's core selection would)")

    def node_sets(count: int, node_notes: list[str]) -> list[frozenset[int]]:
        return node_masks(req, shape, count, step_cores(req, shape, count, node_notes), node_notes)

    return tasks_by_node(req, shape, node_sets, notes)


def node_masks(req: Request, shape: NodeShape, ntasks: int, cores, notes: list[str] | None = None
               ) -> list[frozenset[int]]:
    """The OS CPUs of each of the `ntasks` tasks on a node where the step holds `cores` (the node's
    socket-major core numbers): task/affinity's part alone, whatever chose the cores."""
    notes = [] if notes is None else notes
    bind_kind, how = _binding(req, notes)
    avail = [False] * shape.size
    for core in cores:
        for t in range(shape.threads):
            avail[core * shape.threads + t] = True
    return _node_masks(req, shape, bind_kind, how, ntasks, avail, notes)


# --------------------------------------------------------------------------- what binding applies

def _binding(req: Request, notes: list[str]) -> tuple[str | None, str]:
    """(kind, how): the --cpu-bind kind after --hint, and whether it was given, hinted or is automatic."""
    kind = req.bind.kind
    if req.hints:
        hinted = "cores" if req.hints & {"compute_bound", "memory_bound"} else "threads"
        notes.append(f"--hint={','.join(sorted(req.hints))} binds to {hinted}"
                     + (", one hardware thread per core" if req.threads_per_core == 1 else ""))
        if "memory_bound" in req.hints:
            notes.append("--hint=memory_bound's one-core-per-socket request shapes only a new job "
                         "allocation, not a step in whole nodes: placed as compute_bound")
        return hinted, "hint"
    if kind is None:
        return None, "auto"
    if req.bind.kind == "rank":
        notes.append("--cpu-bind=rank was removed in Slurm 24.11; this is 22.05's behaviour")
    return kind, "given"


def _auto_kind(shape: NodeShape, avail: list[bool], cpus_needed: int, notes: list[str]) -> str | None:
    """task/affinity's automatic binding (no --cpu-bind): to sockets, cores or threads when the
    tasks x CPUs of the node equal the step's whole sockets, whole cores or threads; else none."""
    whole_sockets = part_sockets = whole_cores = part_cores = 0
    per_socket = shape.cores * shape.threads
    for s in range(shape.sockets):
        socket = avail[s * per_socket:(s + 1) * per_socket]
        if all(socket):
            whole_sockets += 1
        elif any(socket):
            part_sockets += 1
        for c in range(shape.cores):
            core = socket[c * shape.threads:(c + 1) * shape.threads]
            if all(core):
                whole_cores += 1
            elif any(core):
                part_cores += 1
    threads = sum(avail)
    if cpus_needed == whole_sockets and part_sockets == 0:
        kind = "sockets"
    elif cpus_needed == whole_cores and part_cores == 0:
        kind = "cores"
    elif cpus_needed == threads:
        kind = "threads"
    else:
        notes.append(f"no --cpu-bind: tasks x CPUs per node ({cpus_needed}) match neither the step's "
                     f"{whole_sockets} sockets, {whole_cores} cores nor {threads} threads, so task/affinity "
                     "binds every task to all the step's CPUs (TaskPluginParam sets no default)")
        return None
    notes.append(f"no --cpu-bind: tasks x CPUs per node = {cpus_needed} = the step's {kind}, so task/affinity "
                 f"binds to {kind} automatically")
    return kind


# --------------------------------------------------------------------------- 1. the step's cores

def step_cores(req: Request, shape: NodeShape, ntasks: int, notes: list[str]) -> list[int]:
    """The node's cores (socket-major index) slurmctld gives the step, in index order."""
    all_cores = list(range(shape.core_count))
    if not req.exact or ntasks == shape.core_count:
        if not req.exact:
            notes.append("the step has the whole node (no --exact; in 22.05 -c implies it, unless --overcommit)")
        return all_cores
    per_core = 1 if req.threads_per_core == 1 else shape.threads  # CPUs the step counts per core
    c = req.cpus_per_task
    if req.overcommit:  # --exact --overcommit: slurmctld counts one CPU, so one core, per task
        needed = min(ntasks, shape.core_count)
    elif c > per_core:
        cores_per_task = -(-c // per_core)
        needed = ntasks * cores_per_task
    else:
        needed = -(-ntasks * c // per_core)
    if needed > shape.core_count:
        if not req.overcommit:
            raise UserInputError(f"the step needs {needed} cores per node, the node has {shape.core_count} "
                                 "(whole cores per task: Slurm does not split a core between tasks' CPUs)",
                                 where="--cpus-per-task", hint="fewer tasks or CPUs per task, or --overcommit")
        return all_cores
    notes.append(f"--exact: the step gets {needed} of the node's {shape.core_count} cores")
    cores_per_task = needed // ntasks  # may be 0: then a socket is filled before the next
    picked: list[int] = []
    if req.dist.socket == "block":
        picked = all_cores[:needed]
    elif req.dist.socket == "fcyclic":
        order = [s * shape.cores + i for i in range(shape.cores) for s in range(shape.sockets)]
        picked = order[:needed]
    else:  # cyclic, the default: cores_per_task cores from a socket, then the next socket
        nxt, run = [0] * shape.sockets, 0  # `run` carries over when a socket runs out mid-task
        while len(picked) < needed:
            for s in range(shape.sockets):
                while nxt[s] < shape.cores and len(picked) < needed:
                    picked.append(s * shape.cores + nxt[s])
                    nxt[s] += 1
                    run += 1
                    if run == cores_per_task:
                        run = 0
                        break
    return sorted(picked)


# --------------------------------------------------------------------------- 2. and 3. the masks

def _node_masks(req: Request, shape: NodeShape, kind: str | None, how: str, ntasks: int, avail: list[bool],
                notes: list[str]) -> list[frozenset[int]]:
    """The OS CPUs of each local task on one node."""
    step_os = shape.os_cpus(a for a in range(shape.size) if avail[a])
    whole_node = all(avail)
    if kind in ("none", "rank", "rank_ldom", "map_ldom", "mask_ldom") and not whole_node:
        if kind == "none":
            notes.append("--cpu-bind=none in a step without the whole node: task/affinity still confines "
                         "every task to the step's CPUs")
            return [step_os] * ntasks
        raise UserInputError(
            f"--cpu-bind={kind} needs the whole node, but this step has {len(step_os)} of its {shape.size} CPUs "
            "(Slurm: 'Entire node must be allocated')", where=WHERE,
            hint="drop -c/--exact so the step gets the node, or use threads/cores")
    if kind == "none":
        return [shape.pus] * ntasks
    if kind == "rank":
        return [_rank_cpu(shape, local) for local in range(ntasks)]
    if kind in ("rank_ldom", "map_ldom", "mask_ldom"):
        return [_ldom_binding(req, shape, kind, local) for local in range(ntasks)]
    if kind in ("map_cpu", "mask_cpu"):
        lists = [_list_cpus(shape, kind, value) for value in req.bind.values]
        if not whole_node and not all(cpus <= step_os for cpus in lists):
            raise UserInputError(f"--cpu-bind={kind}:{','.join(req.bind.values)} names CPUs outside the step's "
                                 "allocation (Slurm checks every entry: 'CPU binding outside of job step "
                                 "allocation')", where=WHERE, hint="without -c the step has the whole node")
        return [lists[local % len(lists)] for local in range(ntasks)]
    if how == "auto":
        kind = _auto_kind(shape, avail, ntasks * req.cpus_per_task, notes)
        if kind is None:
            return [step_os] * ntasks
    abstract = _layout(req, shape, kind, ntasks, avail, notes)
    if abstract is None:  # dist_tasks.c: "overriding binding", every task gets the step's CPUs
        return [step_os] * ntasks
    return [_expand(shape, kind, mask, avail) for mask in abstract]


def _rank_cpu(shape: NodeShape, local: int) -> frozenset[int]:
    cpu = local % (shape.size * shape.threads)
    if cpu not in shape.pus:
        raise UserInputError(f"--cpu-bind=rank binds local task {local} to OS CPU {cpu}, which this node lacks",
                             where=WHERE, hint="rank binds task i to CPU i: run fewer tasks per node")
    return frozenset({cpu})


def _numa_of(shape: NodeShape, cpu: int) -> int:
    """libnuma's node of a CPU; CPUs it does not know count as node 0 (Slurm's zeroed table). Masks
    built from it are cut to the node's CPUs: the kernel ignores the rest."""
    for node, cpus in shape.numa.items():
        if cpu in cpus:
            return node
    return 0


def _ldom_cpus(shape: NodeShape, *ldoms: int) -> frozenset[int]:
    """What affinity.c _bind_ldom gives for each of `ldoms`: every CPU numbered below sockets x cores
    x threads whose NUMA node is the ldom modulo the highest NUMA node number + 1."""
    nodes = {ldom % (max(shape.numa) + 1) for ldom in ldoms}
    cpus = frozenset(c for c in range(shape.size) if _numa_of(shape, c) in nodes) & shape.pus
    if not cpus:
        node = ",".join(map(str, sorted(nodes)))
        raise UserInputError(f"NUMA node {node} has no CPUs here, the kernel would refuse the "
                             "empty mask", where=WHERE)
    return cpus


def _ldom_binding(req: Request, shape: NodeShape, kind: str, local: int) -> frozenset[int]:
    if kind == "rank_ldom":
        return _ldom_cpus(shape, local)
    value = req.bind.values[local % len(req.bind.values)]
    if kind == "map_ldom":
        return _ldom_cpus(shape, _number(value))
    bits = int(value, 16)
    if bits <= 0 or bits.bit_length() > 1024:
        raise UserInputError(f"mask_ldom:{value} names no NUMA node", where=WHERE)
    return _ldom_cpus(shape, *(i for i in range(bits.bit_length()) if bits >> i & 1))


def _number(value: str) -> int:
    """A map entry as srun reads it: hexadecimal after 0x, else decimal."""
    return int(value[2:], 16) if value.startswith("0x") else int(value, 10)


def _list_cpus(shape: NodeShape, kind: str, value: str) -> frozenset[int]:
    """The CPUs of one map_cpu or mask_cpu entry (OS numbers, as given)."""
    if kind == "map_cpu":
        cpus = frozenset({_number(value)})
    else:
        try:
            cpus = parse_mask(value)
        except ValueError:
            cpus = frozenset()
        if not cpus:
            raise UserInputError(f"mask_cpu:{value} is not a CPU mask", where=WHERE)
    outside = sorted(cpus - shape.pus)
    if outside:
        raise UserInputError(f"{kind}:{value} names CPU {outside[0]}, which the node lacks "
                             f"(it has {min(shape.pus)}-{max(shape.pus)})", where=WHERE)
    return cpus


def _layout(req: Request, shape: NodeShape, kind: str, ntasks: int, avail: list[bool],
            notes: list[str]) -> list[set[int]] | None:
    """Each task's abstract CPUs before they grow to cores or sockets; None when task/affinity gives
    up (more tasks than CPUs: it then binds every task to all the step's CPUs, the launch goes on)."""
    size = shape.size
    count = sum(avail)
    # one thread per core: asked for (--hint), or implied when the node has no SMT (slurmd sets
    # CPU_BIND_ONE_THREAD_PER_CORE when its CPUs equal sockets x cores)
    tpc = req.threads_per_core or (1 if "nomultithread" in req.hints or shape.threads == 1 else 0)
    cpt = req.cpus_per_task
    if (tpc and count < cpt * (shape.threads // tpc)) or count < ntasks:
        notes.append(f"over-committed: {ntasks} tasks x {cpt} CPUs for the step's {count} CPUs, so task/affinity "
                     "overrides the binding and gives every task all of them")
        return None
    if count < ntasks * cpt:
        cpt = count // ntasks
        notes.append(f"over-committed: task/affinity lowers CPUs per task to {cpt}")
    skip_threads = kind == "cores"
    if req.dist.node == "plane" or req.dist.socket == "block":
        return _lllp_block(shape, avail, ntasks, cpt, tpc, skip_threads)
    return _lllp_cyclic(shape, avail, ntasks, cpt, tpc, skip_threads, req.dist.socket == "fcyclic", size)


def _unused_threads(cpt: int, threads: int) -> int:
    """When binding to cores, the threads a task leaves unused in its last core."""
    return threads - cpt if cpt < threads else cpt % threads


def _lllp_block(shape: NodeShape, avail: list[bool], ntasks: int, cpt: int, tpc: int,
                skip_threads: bool) -> list[set[int]]:
    """Walk the step's CPUs in order, giving each task its CPUs; round again (over-subscribing)
    until all tasks have theirs."""
    masks: list[set[int]] = [set() for _ in range(ntasks)]
    task = c = 0
    while task < ntasks:
        before = task
        core_threads = [0] * shape.core_count
        i = 0
        while i < shape.size and task < ntasks:
            if avail[i] and not (tpc and core_threads[i // shape.threads] >= tpc):
                masks[task].add(i)
                core_threads[i // shape.threads] += 1
                c += 1
                if c == cpt:
                    c = 0
                    task += 1
                    if skip_threads:
                        i += _unused_threads(cpt, shape.threads)
            i += 1
        if task == before:
            raise UserInputError("task/affinity's block layout found no CPU for a task", where=WHERE)
    return masks


def _lllp_cyclic(shape: NodeShape, avail: list[bool], ntasks: int, cpt: int, tpc: int, skip_threads: bool,
                 fcyclic: bool, size: int) -> list[set[int]]:
    """Tasks go round the sockets; each socket hands out its CPUs in order from where it stopped.
    With fcyclic every CPU of a task comes from the next socket."""
    per_socket = shape.cores * shape.threads
    masks: list[set[int]] = [set() for _ in range(ntasks)]
    next_pu = [0] * shape.sockets
    core_threads = [0] * shape.core_count
    s = task = p = 0
    while task < ntasks:
        before = task
        for _ in range(size):
            switched = False
            start = s
            while next_pu[s] >= per_socket:
                s = (s + 1) % shape.sockets
                if s == start:  # every socket used up: over-subscribe from the beginning
                    next_pu = [0] * shape.sockets
                    core_threads = [0] * shape.core_count
            bit = (next_pu[s] + s * per_socket) % size
            next_pu[s] += 1
            if not avail[bit]:
                continue
            core = bit // shape.threads
            if tpc and core_threads[core] >= tpc:
                continue
            masks[task].add(bit)
            if fcyclic:
                s = (s + 1) % shape.sockets
                switched = True
            core_threads[core] += 1
            p += 1
            if p < cpt:
                continue
            if skip_threads:
                next_pu[s] += _unused_threads(cpt, shape.threads)
            p = 0
            if not switched:
                s = (s + 1) % shape.sockets
            task += 1
            if task >= ntasks:
                break
        if task == before:
            raise UserInputError("task/affinity's cyclic layout found no CPU for a task", where=WHERE)
    return masks


def _expand(shape: NodeShape, kind: str, mask: set[int], avail: list[bool]) -> frozenset[int]:
    """Grow an abstract mask to the binding unit and map it to OS CPUs."""
    if kind == "cores" and shape.threads > 1:
        mask = {a for b in mask for a in range(b - b % shape.threads, b - b % shape.threads + shape.threads)
                if avail[a]}
    elif kind == "sockets" and shape.cores * shape.threads > 1:
        per = shape.cores * shape.threads
        mask = {a for b in mask for a in range(b - b % per, b - b % per + per) if avail[a]}
    cpus = shape.os_cpus(mask)
    if kind == "ldoms":
        nodes = {_numa_of(shape, c) for c in cpus}
        cpus = frozenset(c for c in range(shape.size) if _numa_of(shape, c) in nodes) & shape.pus
    if not cpus:
        raise UserInputError("a task's mask holds no CPU of the node (its CPUs are numbered beyond "
                             "Slurm's mask)", where=WHERE)
    return cpus
