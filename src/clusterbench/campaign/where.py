"""From a campaign's `cluster:` section to a Site, the nodes' facts and the SystemInfo to plan with.

A multi-node campaign is planned for the compute nodes, not for the machine clusterbench runs
on (often a login node): their cores set the ranks, the smallest free memory among them sizes
N. Those facts come from the preflight, gathered over ssh before anything is expanded.
"""

from __future__ import annotations

import subprocess

from clusterbench.campaign.spec import ClusterSection, LsfSection, PbsSection, SlurmSection
from clusterbench.cluster.facts import NodeFacts
from clusterbench.errors import UserInputError
from clusterbench.launch.hosts import Host, Inventory, expand_nodeset, inventory
from clusterbench.launch.site import LsfOptions, PbsOptions, Site, SlurmOptions, SrunOptions
from clusterbench.pinning.strategies import user_strategy
from clusterbench.system.discover import SystemInfo
from clusterbench.system.microarch import estimate_peak
from clusterbench.system.software import Memory


def site_from_section(section: ClusterSection) -> Site:
    slurm = None
    if section.launcher == "slurm":
        s = section.slurm or SlurmSection()
        srun = SrunOptions(**s.srun.model_dump()) if s.srun else None
        slurm = SlurmOptions(partition=s.partition, account=s.account, qos=s.qos, time=s.time,
                             exclusive=s.exclusive, sbatch_args=list(s.sbatch_args), srun=srun,
                             poll_s=s.poll_s, max_queued=s.max_queued)
    lsf = pbs = None
    if section.launcher == "lsf":
        s = section.lsf or LsfSection()
        lsf = LsfOptions(queue=s.queue, project=s.project, time=s.time, exclusive=s.exclusive,
                         bsub_args=list(s.bsub_args), poll_s=s.poll_s, max_queued=s.max_queued)
    elif section.launcher == "pbs":
        s = section.pbs or PbsSection()
        pbs = PbsOptions(queue=s.queue, account=s.account, walltime=s.walltime, qsub_args=list(s.qsub_args),
                         poll_s=s.poll_s, max_queued=s.max_queued)
    for name in ("lsf", "pbs"):
        if getattr(section, name) is not None and section.launcher != name:
            raise UserInputError(f"cluster.{name} is given but cluster.launcher is {section.launcher}",
                                 hint=f"set launcher: {name}, or remove the {name}: section")
    inv = None
    if section.launcher == "mpirun":
        if not section.hosts:
            raise UserInputError("cluster.launcher: mpirun needs cluster.hosts",
                                 hint="a node set (node[1-4]), a hostfile path, or 'slurm' inside an allocation")
        inv = inventory(section.hosts)
    elif section.launcher == "slurm":
        inv = inventory(section.hosts) if section.hosts else partition_nodes(slurm.partition)
    elif section.hosts:  # lsf, pbs: the nodes the jobs will get, for the preflight and for sizing
        inv = inventory(section.hosts)
    strategies = {name: user_strategy(name, s.summary, *(None if o is None else o.model_dump()
                                                         for o in (s.srun, s.openmpi, s.hydra)))
                  for name, s in section.strategies.items()}
    return Site(launcher=section.launcher, inventory=inv, interconnect=section.interconnect,
                net_if=section.net_if, rank_by=section.rank_by, mpi_args=list(section.mpi_args), slurm=slurm,
                lsf=lsf, pbs=pbs, strategies=strategies)


def partition_nodes(partition: str | None) -> Inventory:
    """The nodes of a Slurm partition (the default one when none is named), for preflight and sizing."""
    cmd = ["sinfo", "-h", "-o", "%N"] + (["-p", partition] if partition else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        raise UserInputError("sinfo not found: is this a Slurm cluster?",
                             hint="install slurm-client, or use launcher: mpirun with hosts:") from None
    names = [n for line in out.stdout.split() for n in expand_nodeset(line)]
    if out.returncode != 0 or not names:
        raise UserInputError(f"sinfo lists no nodes{' in partition ' + partition if partition else ''}: "
                             f"{out.stderr.strip()}", hint="check SLURM_CONF / the partition name")
    return Inventory([Host(n) for n in dict.fromkeys(names)], f"Slurm partition {partition or '(default)'}")


def system_from_facts(facts: list[NodeFacts], local: SystemInfo) -> SystemInfo:
    """The compute nodes as one SystemInfo: the first node's topology, the smallest memory."""
    up = [f for f in facts if f.reachable and f.topology]
    if not up:
        return local
    memories = [f.memory for f in up if f.memory]
    memory = Memory(min(m.total_bytes for m in memories), min(m.available_bytes for m in memories),
                    f"smallest /proc/meminfo of {len(memories)} node(s)") if memories else None
    topo = up[0].topology
    if not topo.model_name and local.topology.model_name:
        topo.model_name = local.topology.model_name
    peak = estimate_peak(topo)
    if peak.rpeak_gflops is None and topo.model_name == local.topology.model_name:
        peak = local.peak  # lscpu text may lack the flags/frequency the live node gave
    return SystemInfo(topology=topo, memory=memory, peak=peak, software=local.software, nodes=len(up))
