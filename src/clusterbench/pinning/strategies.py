"""Named pinning strategies, and what each means for srun, Open MPI's mpirun and Hydra's mpiexec.

The names are the seven strategies of the JSC pinning study (srun `--cpu-bind=threads|cores|rank|
rank_ldom` and `--distribution=*:block:*|*:fcyclic:*|*:*:cyclic`) plus Slurm's defaults (`default`,
and `core-block` = `*:*:block`, the study's baseline distributions). A campaign says `pinning: cores`
and the site's launcher gets the options that mean the same there. Where a launcher has no
counterpart the strategy is refused for it, with the reason, rather than silently run as something
else: Open MPI cannot bind by OS CPU number without a rankfile (`rank`), nor spread one task's CPUs
over sockets (`socket-fcyclic`), nor choose how a task's CPUs fill SMT siblings (`core-*`); Hydra can
bind by CPU number (`-bind-to user:0,1,...`).

`{c}` in an option stands for the threads per task (srun's --cpus-per-task).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clusterbench.errors import UserInputError, suggest

SCALING_MODES = ("thread", "hybrid", "task")


@dataclass(frozen=True)
class Strategy:
    name: str
    summary: str
    srun: dict = field(default_factory=dict)  # cpu_bind, distribution, hint
    openmpi: dict | None = None  # map_by, bind_to, rank_by, hwthread_cpus; None: no counterpart
    hydra: dict | None = None  # map_by, bind_to; None: no counterpart
    why_not: str = ""  # why a launcher has no counterpart


STRATEGIES: dict[str, Strategy] = {s.name: s for s in (
    Strategy("default", "the launcher's own defaults (srun: block:cyclic, automatic binding)", {}, {}, {}),
    Strategy("threads", "srun --cpu-bind=threads: each task bound to its c hardware threads",
             {"cpu_bind": "threads"},
             {"map_by": "socket:PE={c}", "bind_to": "hwthread", "hwthread_cpus": True},
             {"map_by": "socket", "bind_to": "hwthread:{c}"}),
    Strategy("cores", "srun --cpu-bind=cores: each task bound to the cores of its c CPUs",
             {"cpu_bind": "cores"},
             {"map_by": "socket:PE={c}", "bind_to": "core"},
             {"map_by": "socket", "bind_to": "core:{c}"}),
    Strategy("rank", "srun --cpu-bind=rank: task i bound to CPU i (removed in Slurm 24.11)",
             {"cpu_bind": "rank"}, None, {"bind_to": "user:{ranks}"},
             "Open MPI binds by object, not by OS CPU number (that needs a rankfile)"),
    Strategy("rank_ldom", "srun --cpu-bind=rank_ldom: tasks bound to NUMA domains by rank",
             {"cpu_bind": "rank_ldom"},
             {"map_by": "numa", "bind_to": "numa"},
             {"map_by": "numa", "bind_to": "numa"}),
    Strategy("socket-block", "srun --distribution=*:block:*: fill a socket with tasks before the next",
             {"distribution": "*:block"},
             {"map_by": "slot:PE={c}", "bind_to": "core"},
             {"map_by": "core", "bind_to": "core:{c}"}),
    Strategy("socket-fcyclic", "srun --distribution=*:fcyclic:*: even a task's CPUs go round the sockets",
             {"distribution": "*:fcyclic"}, None, None,
             "mpirun keeps the CPUs of one rank together; only Slurm spreads them over sockets"),
    Strategy("core-block", "srun --distribution=*:*:block: a task's CPUs fill a core's hardware threads first",
             {"distribution": "*:*:block"}, None, None,
             "mpirun has no core-level distribution of a rank's CPUs"),
    Strategy("core-cyclic", "srun --distribution=*:*:cyclic: a task's CPUs go round the cores first",
             {"distribution": "*:*:cyclic"}, None, None,
             "mpirun has no core-level distribution of a rank's CPUs"),
)}


def strategy(name: str, own: dict[str, Strategy] | None = None) -> Strategy:
    """A built-in strategy or one of `own` (a campaign's `cluster.strategies`)."""
    known = STRATEGIES | (own or {})
    try:
        return known[name]
    except KeyError:
        raise UserInputError(f"unknown pinning strategy {name!r}", where="pinning",
                             hint=suggest(name, list(known), "strategies", most=len(known))
                             + "; or define it under cluster.strategies") from None


def user_strategy(name: str, summary: str, srun: dict | None, openmpi: dict | None, hydra: dict | None) -> Strategy:
    """A campaign's own strategy; its name must not hide a built-in one."""
    if name in STRATEGIES:
        raise UserInputError(f"strategy {name!r} is built in", where=f"cluster.strategies.{name}",
                             hint="give yours another name")
    drop = lambda options: None if options is None else {k: v for k, v in options.items() if v}  # noqa: E731
    return Strategy(name, summary or "defined by the campaign", drop(srun), drop(openmpi), drop(hydra),
                    "the campaign gives no options for this launcher")


def launcher_options(name: str, launcher: str, threads: int, ranks_per_node: int,
                     own: dict[str, Strategy] | None = None) -> dict:
    """The options of strategy `name` for `launcher` (srun, openmpi, hydra), with {c} (threads per
    task) and {ranks} (the local task numbers of a node: Hydra's `user:` list is read per node, by
    local index, as srun's `rank` binds local task i to CPU i) filled in; UserInputError when the
    launcher has no counterpart."""
    s = strategy(name, own)
    options = getattr(s, launcher) if launcher in ("srun", "openmpi", "hydra") else None
    if options is None:
        raise UserInputError(f"pinning strategy {name!r} cannot be expressed with {launcher}: {s.why_not}",
                             where="pinning", hint="use it with srun (a Slurm site), or pick another strategy")
    out = {}
    for key, value in options.items():
        if isinstance(value, str):
            value = value.replace("{c}", str(threads)).replace("{ranks}", ",".join(map(str, range(ranks_per_node))))
        out[key] = value
    return out


def expressible(launcher: str) -> list[str]:
    """The built-in strategies `launcher` (srun, openmpi, hydra) has a counterpart for."""
    return [s.name for s in STRATEGIES.values() if getattr(s, launcher, None) is not None]


def scaled(mode: str, workers: int, groups: int) -> tuple[int, int]:
    """(ranks, threads per rank) of a scaling mode on `workers` CPUs: `thread` = one task with
    `workers` threads, `task` = `workers` single-threaded tasks, `hybrid` = one task per group
    (socket or NUMA domain, as many as fit) with the CPUs shared among them as threads."""
    if mode not in SCALING_MODES:
        raise UserInputError(f"unknown scaling mode {mode!r}", where="scaling",
                             hint="one of " + ", ".join(SCALING_MODES))
    if mode == "thread":
        return 1, workers
    if mode == "task":
        return workers, 1
    ranks = max(1, min(groups, workers))
    return ranks, max(1, workers // ranks)
