"""Where a campaign's runs go: this machine, a set of hosts over ssh + mpirun, or a batch
scheduler (Slurm, LSF, PBS).

A benchmark declares its program and how many ranks, threads and nodes it wants and how to
bind them (launch/spec.py: Launch, Placement); `launch_command` turns that into the line that
runs it here, and `launcher_record` into what is stored about it. The site adds what the place
needs: the hostfile of the first `nodes` hosts with their slots, the interconnect, `--rank-by`,
extra mpirun arguments, `srun` options inside a Slurm job, or under LSF and PBS the hostfile
that the job script writes from the allocation (LSB_DJOB_HOSTFILE, PBS_NODEFILE) for mpirun.
Benchmarks never see host names, and the launcher and its options are stored with every run.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.errors import UserInputError
from clusterbench.launch.hosts import Host, Inventory, render_hostfile
from clusterbench.launch.mpirun import MpiLaunch, interconnect_args, mpirun_command
from clusterbench.launch.spec import Launch
from clusterbench.pinning.strategies import Strategy, launcher_options
from clusterbench.system.mpi import MpiStack, mpi_stack

LAUNCHERS = ("local", "mpirun", "slurm", "lsf", "pbs")
BATCH = ("slurm", "lsf", "pbs")
NODEFILE_VARS = {"lsf": "LSB_DJOB_HOSTFILE", "pbs": "PBS_NODEFILE"}  # one line per slot of the job


@dataclass
class SrunOptions:
    """Launch the ranks with `srun` (inside a Slurm job) instead of mpirun."""

    cpu_bind: str | None = None  # cores, threads, sockets, none, map_cpu:..., verbose,cores
    distribution: str | None = None  # block, cyclic, block:cyclic, ...
    hint: str | None = None  # nomultithread, compute_bound, memory_bound
    cpus_per_task: int | None = None  # default: the run's threads per rank
    mpi: str | None = "pmix"  # srun --mpi plugin; None leaves Slurm's default
    flavour: str = "slurm"  # whose task/affinity computes the binding: slurm (stock) or psslurm (ParaStation)


@dataclass
class SlurmOptions:
    """How each run becomes a batch job."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = None  # sbatch --time; default: from the run's timeout
    exclusive: bool = True  # benchmarks do not share nodes
    sbatch_args: list[str] = field(default_factory=list)
    srun: SrunOptions | None = None  # None: mpirun inside the job (it reads the allocation)
    poll_s: float = 2.0
    max_queued: int = 100  # jobs in the queue at once


@dataclass
class LsfOptions:
    """How each run (or array of repeats) becomes an LSF job (bsub)."""

    queue: str | None = None
    project: str | None = None
    time: str | None = None  # bsub -W [hours:]minutes; default: from the run's timeout
    exclusive: bool = True
    bsub_args: list[str] = field(default_factory=list)
    poll_s: float = 2.0
    max_queued: int = 100


@dataclass
class PbsOptions:
    """How each run (or array of repeats) becomes a PBS Pro job (qsub)."""

    queue: str | None = None
    account: str | None = None
    walltime: str | None = None  # -l walltime=HH:MM:SS; default: from the run's timeout
    qsub_args: list[str] = field(default_factory=list)
    poll_s: float = 2.0
    max_queued: int = 100


@dataclass
class Site:
    launcher: str = "local"
    inventory: Inventory | None = None  # mpirun: the hosts, in order
    interconnect: str = "auto"
    net_if: str | None = None
    rank_by: str | None = None
    mpi_args: list[str] = field(default_factory=list)
    slurm: SlurmOptions | None = None
    lsf: LsfOptions | None = None
    pbs: PbsOptions | None = None
    workdir: Path | None = None  # set per run: where the hostfile goes
    forward_env: dict[str, str] = field(default_factory=dict)  # set per run: also for remote ranks
    strategies: dict[str, Strategy] = field(default_factory=dict)  # the campaign's own pinning strategies
    # set per run under LSF/PBS: (path, MPI implementation) of the hostfile its job script writes
    allocation_hostfile: tuple[str, str] | None = None

    def batch(self) -> tuple[str, SlurmOptions | LsfOptions | PbsOptions] | None:
        """(scheduler name, its options) when runs go as batch jobs, else None."""
        for name in BATCH:
            opts = getattr(self, name)
            if opts is not None:
                return name, opts
        return None

    def for_run(self, workdir: Path, forward_env: dict[str, str] | None = None) -> Site:
        """This site for one run: its directory, and variables that remote ranks need too (the
        loader trace that tells which BLAS each rank loaded; the directory is shared)."""
        site = copy.copy(self)
        site.workdir = workdir
        site.forward_env = dict(forward_env or {})
        return site

    def max_nodes(self) -> int | None:
        if self.launcher == "local":
            return 1
        return len(self.inventory.hosts) if self.inventory else None

    def hosts_for(self, nodes: int) -> list[Host]:
        if self.launcher != "mpirun" or not self.inventory:
            if nodes > 1 and self.launcher == "local":
                raise UserInputError(f"nodes={nodes} needs several hosts",
                                     hint="add a cluster: section with launcher: mpirun and hosts:, or launcher: slurm")
            return []
        return self.inventory.first(nodes)

    def node_names(self, nodes: int) -> str | None:
        """The folded node list a run uses, when it is known before it starts."""
        hosts = self.hosts_for(nodes)
        return str(Inventory(hosts, "").nodeset()) if hosts else None

    def apply(self, launch: MpiLaunch, nodes: int, implementation: str) -> MpiLaunch:
        """`launch` with this site's hosts (a hostfile in `implementation`'s format), transport
        and extra options."""
        launch.interconnect = launch.interconnect or self.interconnect
        launch.net_if = self.net_if
        launch.rank_by = launch.rank_by or self.rank_by
        launch.extra = [*self.mpi_args, *launch.extra]
        if self.launcher != "local":
            launch.env = launch.env | self.forward_env
        if launch.interconnect == "shm" and nodes > 1:
            raise UserInputError("interconnect: shm (shared memory only) cannot join several nodes",
                                 hint="use tcp, ib or auto for runs over more than one node")
        if self.launcher in NODEFILE_VARS and nodes >= 1:
            # the hosts are known only inside the job: its script writes this file from the allocation
            launch.ranks_per_node = math.ceil(launch.ranks / nodes)
            launch.oversubscribe = False
            if self.workdir is not None:
                path = str(self.workdir / "hostfile")
                launch.hostfile = path
                self.allocation_hostfile = (path, implementation)
        hosts = self.hosts_for(nodes)
        if hosts:
            per_node = math.ceil(launch.ranks / nodes)
            launch.ranks_per_node = per_node
            launch.oversubscribe = False
            if self.workdir is not None:
                path = self.workdir / "hostfile"
                path.write_text(render_hostfile(hosts, per_node, implementation))
                launch.hostfile = str(path)
        return launch

    def resolve(self, launch: MpiLaunch, nodes: int, pinning: str | None = None
                ) -> tuple[MpiLaunch, MpiStack, SrunOptions | None]:
        """`launch` as this site runs it: hosts, transport, extra options and the pinning strategy
        translated for the launcher; with the MPI stack and, inside Slurm with srun, srun's options."""
        stack = mpi_stack(launch.mpi)  # found once per process and MPI
        launch = self.apply(launch, nodes, stack.implementation)
        srun = self.slurm.srun if self.slurm and self.slurm.srun else None
        if pinning:
            threads = launch.threads or 1
            per_node = launch.ranks_per_node or math.ceil(launch.ranks / nodes)
            if srun:
                srun = dataclasses.replace(srun, **launcher_options(pinning, "srun", threads, per_node,
                                                                    self.strategies))
            else:  # the strategy replaces the benchmark's own binding and mapping
                launch.bind_to = launch.map_by = launch.rank_by = None
                which = "hydra" if stack.hydra else "openmpi"
                for key, value in launcher_options(pinning, which, threads, per_node, self.strategies).items():
                    setattr(launch, key, value)
        return launch, stack, srun

    def command(self, launch: MpiLaunch, program: list[str], nodes: int, pinning: str | None = None) -> list[str]:
        launch, stack, srun = self.resolve(launch, nodes, pinning)
        if srun:
            return srun_command(launch, program, srun, nodes, stack.implementation)
        return mpirun_command(launch, program, stack)

    def launch_command(self, launch: Launch) -> list[str]:
        """The argument list that starts `launch` here: the program itself when it has no
        placement, else the mpirun (Open MPI or Hydra) or srun line of its placement."""
        if launch.placement is None:
            return list(launch.program)
        from clusterbench.launch.remote import node_copies  # with ssh and threads: only once a run is launched

        mpi_launch, program = self.mpi_launch(launch), list(launch.program)
        copies = node_copies() if self.launcher != "local" else None
        if copies is not None:  # staging (launch/remote.py): the nodes run copies of what they cannot see
            program = copies.argv(program)
            if mpi_launch.env.get("LD_LIBRARY_PATH"):
                mpi_launch.env["LD_LIBRARY_PATH"] = copies.env_value(mpi_launch.env["LD_LIBRARY_PATH"])
        return self.command(mpi_launch, program, launch.placement.nodes, launch.placement.pinning)

    @staticmethod
    def mpi_launch(launch: Launch) -> MpiLaunch:
        p = launch.placement
        assert p is not None
        return MpiLaunch(ranks=p.ranks, env=dict(launch.env), bind_to=p.bind_to, map_by=p.map_by,
                         oversubscribe=p.oversubscribe, interconnect=p.interconnect, mpi=p.mpi, threads=p.threads)

    def launcher_record(self, launch: Launch) -> dict:
        """How a run was launched, stored with it: 'local' or 'mpirun' with its placement, the MPI
        stack, and this site."""
        p = launch.placement
        if p is None:
            return {"name": "local"} | launch.facts
        pinning = {"pinning": p.pinning} if p.pinning else {}
        return ({"name": "mpirun", "ranks": p.ranks, "bind_to": p.bind_to, "map_by": p.map_by, "nodes": p.nodes}
                | pinning | launch.facts | mpi_stack(p.mpi).describe() | self.describe())

    def launcher_kind(self, mpi: str | None) -> str:
        """Which placement rules apply to a run of MPI `mpi` here: srun, hydra or openmpi."""
        if self.slurm and self.slurm.srun:
            return "srun"
        return "hydra" if mpi_stack(mpi).hydra else "openmpi"

    def describe(self) -> dict:
        """What is stored with each run about where it went."""
        out: dict = {"launcher": self.launcher, "interconnect": self.interconnect}
        if self.inventory:
            out["hosts"] = self.inventory.nodeset()
            out["hosts_source"] = self.inventory.source
        for key in ("net_if", "rank_by"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.mpi_args:
            out["mpi_args"] = self.mpi_args
        if self.strategies:
            out["strategies"] = {k: vars(v) for k, v in self.strategies.items()}
        for name in ("lsf", "pbs"):
            if getattr(self, name):
                out[name] = {k: v for k, v in vars(getattr(self, name)).items() if v not in (None, [], ())}
        if self.slurm:
            out["slurm"] = {k: v for k, v in vars(self.slurm).items() if v not in (None, [], ())}
            if self.slurm.srun:
                out["slurm"]["srun"] = {k: v for k, v in vars(self.slurm.srun).items() if v is not None}
        return out


LOCAL = Site()


def srun_environment(launch: MpiLaunch, implementation: str | None = None) -> dict[str, str]:
    """The variables that select the run's interconnect for ranks started by srun, the same
    choice as the mpirun line (launch/mpirun.interconnect_args): Open MPI's `--mca K V` becomes
    OMPI_MCA_K=V; MPICH's `-genv K V` is K=V, and `-iface X` its libfabric/UCX equivalents."""
    if (launch.interconnect or "auto") == "auto" and not launch.net_if:
        return {}
    if implementation is None:
        implementation = mpi_stack(launch.mpi).implementation
    args = interconnect_args(launch, implementation)
    env: dict[str, str] = {}
    i = 0
    while i < len(args):
        flag = args[i]
        if flag == "--mca" and i + 2 < len(args):
            env[f"OMPI_MCA_{args[i + 1]}"] = args[i + 2]
            i += 3
        elif flag == "-genv" and i + 2 < len(args):
            env[args[i + 1]] = args[i + 2]
            i += 3
        elif flag == "-iface" and i + 1 < len(args):
            if "/" not in args[i + 1]:  # an interface name (a CIDR has no variable of its own here)
                env |= {"FI_TCP_IFACE": args[i + 1], "UCX_NET_DEVICES": args[i + 1]}
            i += 2
        else:
            i += 1
    return env


def srun_command(launch: MpiLaunch, program: list[str], opts: SrunOptions, nodes: int,
                 implementation: str | None = None) -> list[str]:
    """`srun` for the ranks of a run inside its job; binding by Slurm's task/affinity plugin.

    The interconnect's variables go before srun (`env K=V srun --export=ALL ...`): srun hands its
    whole environment to the step, whereas srun --export=ALL,K=V would cut a value such as
    `self,tcp` at its comma."""
    env = srun_environment(launch, implementation)
    prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
    cmd = [*prefix, "srun", f"--nodes={nodes}", f"--ntasks={launch.ranks}"]
    threads = launch.threads or int(launch.env.get("OMP_NUM_THREADS", "1"))
    cmd.append(f"--cpus-per-task={opts.cpus_per_task or threads}")
    if opts.cpu_bind:
        cmd.append(f"--cpu-bind={opts.cpu_bind}")
    if opts.distribution:
        cmd.append(f"--distribution={opts.distribution}")
    if opts.hint:
        cmd.append(f"--hint={opts.hint}")
    if opts.mpi:
        cmd.append(f"--mpi={opts.mpi}")
    cmd.append("--export=ALL")
    return cmd + list(program)
