"""Where `srun` puts each task and which CPUs it binds it to, without running anything.

Two implementations of the same options:

* `flavour="slurm"`: stock Slurm 22.05 (Debian 12's package, what the virtual cluster runs) with
  SelectType=select/cons_tres, SelectTypeParameters=CR_Core and TaskPlugin=task/affinity (no cgroup
  core confinement). The node-level placement is srun's step layout (src/common/slurm_step_layout.c),
  the CPUs a step gets on a node are slurmctld's step allocation (src/slurmctld/step_mgr.c), and the
  masks are the task/affinity plugin's (src/plugins/task/affinity/dist_tasks.c, affinity.c), worked out
  in Slurm's abstract socket-core-thread numbering and mapped to OS CPU numbers at the end.
  `--cpu-bind=rank` exists up to 24.05: Slurm 24.11 removed it.
* `flavour="psslurm"`: ParaStation's psslurm (JSC's JURECA-DC, JUWELS), which replaces slurmd and pins
  with its own code (plugins/psslurm/src/psslurm/psslurmpin.c); see pinning/psslurm.py.

The nodes are assumed to be the job's alone (an exclusive allocation, as on an HPC system), the tasks
launched by one `srun` inside it. Everything assumed on the way is said in `Prediction.notes`.
The expectations in tests/test_pinning_slurm.py come from the real srun (tests/fixtures/pinning/srun/),
Slurm's cpu_management.html and psslurm's source, never from this module.
"""

from __future__ import annotations

import re

from clusterbench.errors import UserInputError
from clusterbench.pinning.model import SLURM_FLAVOURS, Prediction, parse_mask
from clusterbench.pinning.slurm_options import (
    MAX_COUNT,
    parse_cpu_bind,
    parse_distribution,
    parse_hint,
)
from clusterbench.pinning.slurm_shape import NodeShape, Request, node_shape, shape_notes
from clusterbench.system.topology import Topology


def _check_counts(topo: Topology, ntasks: int, nodes: int, ntasks_per_node: int | None, cpus_per_task: int,
                  overcommit: bool) -> None:
    for flag, value in (("--ntasks", ntasks), ("--nodes", nodes), ("--cpus-per-task", cpus_per_task),
                        ("--ntasks-per-node", ntasks_per_node)):
        if value is not None and not 1 <= value <= MAX_COUNT:
            raise UserInputError(f"{flag}={value} is out of range", where=flag, hint=f"1 to {MAX_COUNT}")
    if ntasks * cpus_per_task > min(nodes, ntasks) * topo.pus_total and not overcommit:
        raise UserInputError(
            f"{ntasks} tasks x {cpus_per_task} CPUs is more than the {min(nodes, ntasks) * topo.pus_total} "
            f"CPUs of {min(nodes, ntasks)} node(s) ({topo.source})", where="--ntasks",
            hint="use fewer tasks or CPUs per task, more --nodes, or --overcommit")


def _check_cores(shape: NodeShape, ntasks: int, nodes: int, cpus_per_task: int, hint: str | None) -> None:
    """With one thread per core (--hint) slurmctld counts every CPU of the step as a whole core."""
    if shape.threads > 1 and ntasks * cpus_per_task > nodes * shape.core_count:
        raise UserInputError(
            f"--hint={hint} uses one thread per core: {ntasks} tasks x {cpus_per_task} CPUs need that many "
            f"cores, {nodes} node(s) have {nodes * shape.core_count} (srun: 'More processors requested than "
            "permitted')", where="--hint", hint="use fewer tasks or CPUs per task, or --hint=multithread")


def srun_placement(topo: Topology, *, ntasks: int, nodes: int = 1, ntasks_per_node: int | None = None,
                   cpus_per_task: int = 1, cpu_bind: str | None = None, distribution: str | None = None,
                   hint: str | None = None, flavour: str = "slurm", overcommit: bool = False,
                   exact: bool | None = None) -> Prediction:
    """The CPUs `srun -n ntasks -N nodes [-c cpus_per_task] [--cpu-bind ..] [-m ..] [--hint ..]` binds
    each task to, on nodes shaped like `topo` allocated to the job alone.

    `cpus_per_task=1` is taken as -c not given. `exact` is srun's --exact: None = as Slurm 22.05.8
    decides (-c > 1 implies it unless --overcommit), True = --exact given (or -c 1 given, which
    implies it the same way)."""
    if flavour not in SLURM_FLAVOURS:
        raise UserInputError(f"unknown Slurm flavour {flavour!r}", where="--flavour", hint=" or ".join(SLURM_FLAVOURS))
    shape = node_shape(topo)
    notes: list[str] = shape_notes(shape)
    req = parse_request(topo, shape, notes, ntasks=ntasks, nodes=nodes, ntasks_per_node=ntasks_per_node,
                        cpus_per_task=cpus_per_task, cpu_bind=cpu_bind, distribution=distribution, hint=hint,
                        overcommit=overcommit, exact=exact)
    if flavour == "psslurm":
        from clusterbench.pinning.psslurm import psslurm_tasks
        tasks = psslurm_tasks(req, shape, notes)
    else:
        from clusterbench.pinning.slurm_affinity import affinity_tasks
        tasks = affinity_tasks(req, shape, notes)
    options = {"ntasks": ntasks, "nodes": len(req.tasks), "ntasks_per_node": ntasks_per_node,
               "cpus_per_task": cpus_per_task, "cpu_bind": cpu_bind, "distribution": distribution, "hint": hint,
               "overcommit": overcommit or None, "exact": req.exact or None}
    effective = {"cpu_bind": req.bind.kind or "auto", "distribution": distribution or "block:cyclic",
                 "from": "given" if cpu_bind and distribution else
                 "Slurm's defaults (task/affinity binds automatically; distribution block:cyclic)"}
    return Prediction(topo, sorted(tasks, key=lambda t: t.rank), "srun", len(req.tasks), flavour,
                      {k: v for k, v in options.items() if v is not None}, notes, effective)


def parse_request(topo: Topology, shape: NodeShape, notes: list[str], *, ntasks: int, nodes: int = 1,
                  ntasks_per_node: int | None = None, cpus_per_task: int = 1, cpu_bind: str | None = None,
                  distribution: str | None = None, hint: str | None = None, overcommit: bool = False,
                  exact: bool | None = None) -> Request:
    """srun's options checked and parsed, with the tasks dealt out to the nodes."""
    _check_counts(topo, ntasks, nodes, ntasks_per_node, cpus_per_task, overcommit)
    bind, dist, hints = parse_cpu_bind(cpu_bind), parse_distribution(distribution), parse_hint(hint)
    if exact is True and overcommit:  # slurmctld then counts one CPU per task (a core's threads with --hint)
        per_task = shape.threads if hints & {"nomultithread", "compute_bound", "memory_bound"} else 1
        if ntasks * per_task > min(nodes, ntasks) * shape.size:
            raise UserInputError(f"--exact --overcommit: {ntasks} tasks need {ntasks * per_task} CPUs, the nodes have "
                                 f"{min(nodes, ntasks) * shape.size} (srun: 'More processors requested than "
                                 "permitted')", where="--ntasks", hint="drop --exact, or use fewer tasks")
    if hints and bind.kind is not None:
        raise UserInputError(f"--hint={hint} and --cpu-bind={cpu_bind} together: srun refuses both",
                             where="--hint", hint="--hint may only go with --cpu-bind=verbose")
    tpc = 1 if hints & {"nomultithread", "compute_bound", "memory_bound"} else None
    if tpc == 1 and not overcommit:
        _check_cores(shape, ntasks, min(nodes, ntasks), cpus_per_task, hint)
    if exact is None:  # 22.05.8: -c implies --exact, but not with --overcommit; --hint does not
        exact = cpus_per_task > 1 and not overcommit
    req = Request(ntasks, nodes, cpus_per_task, bind, dist, hints, overcommit, exact, tpc)
    req.tasks = node_layout(req, shape, ntasks_per_node, notes)
    return req


# --------------------------------------------------------------------------- tasks over nodes

def node_layout(req: Request, shape: NodeShape, ntasks_per_node: int | None, notes: list[str]) -> list[list[int]]:
    """The global task ids on each node, as srun's step layout deals them out (first
    --distribution level). Every node offers the job all its CPUs; `cpus` counts tasks that fit."""
    nodes = req.nodes
    if nodes > req.ntasks:
        notes.append(f"srun runs {req.ntasks} task(s) on {req.ntasks} of the {nodes} nodes "
                     "(it warns and lowers the node count)")
        nodes = req.ntasks
    if ntasks_per_node is not None and ntasks_per_node * nodes != req.ntasks:
        notes.append(f"--ntasks-per-node={ntasks_per_node} does not match {req.ntasks} tasks on {nodes} nodes: "
                     "srun warns and ignores it")
    usable = shape.core_count if req.threads_per_core == 1 else shape.size  # CPUs the layout counts
    cpus = usable if req.overcommit else max(1, usable // req.cpus_per_task)  # tasks that fit a node
    if req.dist.node == "cyclic":
        return _cyclic(req.ntasks, nodes, cpus)
    if req.dist.node == "plane":
        return _plane(req.ntasks, nodes, cpus, req.dist.plane or 1)
    return _block(req.ntasks, nodes, cpus, bool(req.dist.pack))


def _even_counts(ntasks: int, nodes: int) -> list[int]:
    """Tasks per node when they are dealt one per node per round (Slurm counts block layouts this
    way, over-subscribing every node alike once all are full): on identical nodes, an even split
    with the first nodes taking the remainder."""
    rounds, rest = divmod(ntasks, nodes)
    return [rounds + (1 if i < rest else 0) for i in range(nodes)]


def _block(ntasks: int, nodes: int, cpus: int, pack: bool) -> list[list[int]]:
    """Consecutive task ids share a node. ',pack' fills node after node up to its CPUs instead
    (after one task on each), spreading only what is left over."""
    if pack:
        counts = [1] * nodes
        left = ntasks - nodes
        for i in range(nodes):
            add = min(max(cpus - 1, 0), left)
            counts[i] += add
            left -= add
        for i in range(nodes):
            counts[i] += left // nodes + (1 if i < left % nodes else 0)
    else:
        counts = _even_counts(ntasks, nodes)
    out, first = [], 0
    for n in counts:
        out.append(list(range(first, first + n)))
        first += n
    return out


def _cyclic(ntasks: int, nodes: int, cpus: int) -> list[list[int]]:
    """Task i on node i mod nodes (identical nodes fill alike, so the CPU limit never reorders)."""
    return [list(range(i, ntasks, nodes)) for i in range(nodes)]


def _plane(ntasks: int, nodes: int, cpus: int, size: int) -> list[list[int]]:
    """slurm_step_layout.c _task_layout_plane: count first (one task on every node, then up to
    `size` per node per round, the first round counting that one, while CPUs last), then hand the
    ids out `size` at a time, node after node."""
    counts = [0] * nodes
    given, over, first = 0, False, True
    while given < ntasks:
        room = False
        if first:
            for i in range(min(nodes, ntasks)):
                counts[i] += 1
            given = min(nodes, ntasks)
        for i in range(nodes):
            if given >= ntasks:
                break
            if counts[i] == cpus and not over:  # Slurm tests cpus - tasks != 0
                continue
            add = min(size - (1 if first else 0), ntasks - given)
            if not over and counts[i] < cpus:
                add = min(add, cpus - counts[i])
            room = room or (add > 0 and counts[i] + 2 <= cpus)  # room left after its first new task
            counts[i] += add
            given += add
        first = False
        over = over or not room
    out: list[list[int]] = [[] for _ in range(nodes)]
    task = 0
    while task < ntasks:
        for i in range(nodes):
            take = min(size, counts[i] - len(out[i]), ntasks - task)
            out[i].extend(range(task, task + take))
            task += take
    return out


# --------------------------------------------------------------------------- srun --cpu-bind=verbose

_VERBOSE = re.compile(
    r"cpu[-_]bind(?:[-_][a-z]+)?=(?P<kind>[A-Z_]+)\s*-\s*(?P<host>[^\s,]+),\s*task\s+(?P<task>\d+)\s+"
    r"(?P<local>\d+)\s+\[(?P<pid>\d+)\]:\s*mask\s+(?P<mask>(?:0x)?[0-9a-fA-F]+(?:,(?:0x)?[0-9a-fA-F]+)*)"
    r"(?P<set>\s+set(?P<failed>\s+FAILED)?)?")


def parse_cpu_bind_verbose(text: str) -> list[dict]:
    """The masks srun --cpu-bind=verbose reports, one dict per line: host, task (global id), cpus
    (frozenset of OS CPUs), local (task id on the node), kind (MASK, RANK, MAP, LDRANK, ... ;
    psslurm says THREADS, CORES, ...) and failed. Stock Slurm 22.05 (slurmstepd) prints
    'cpu-bind=MASK - node1, task  0  0 [9889]: mask 0x3 set'; psslurm prints 'cpu_bind=THREADS - ...'
    in the same shape; older Slurm wrote 'cpu_bind'. Lines may carry srun's --label prefix. On
    'set FAILED' the mask is the one the task kept, not the one Slurm computed (failed=True).
    --cpu-bind=none on a whole node prints 'cpu-bind=NONE ... mask 0x0' (nothing set): cpus is None,
    the task is not bound."""
    rows = []
    for line in text.splitlines():
        m = _VERBOSE.search(line)
        if not m or not (m.group("set") or m.group("kind") == "NONE"):
            continue
        try:
            cpus = None if m.group("kind") == "NONE" else parse_mask(m.group("mask"))
        except ValueError:
            continue
        rows.append({"host": m.group("host"), "task": int(m.group("task")), "cpus": cpus,
                     "local": int(m.group("local")), "kind": m.group("kind"), "failed": bool(m.group("failed"))})
    return rows
