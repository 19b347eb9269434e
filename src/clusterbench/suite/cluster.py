"""`clusterbench run -w NODESET`: what can this cluster do, and which node or link holds it back?

"It is not a priori clear that the machine works at its full capacity": the first aim of the HPC
Challenge studies of small clusters was operability, finding the node or cable that silently
slows the whole machine. One command does what those studies did by hand:

1. the preflight (every node answers, runs the same software, sees the results directory);
2. a per-node suite on every node at once, one benchmark at a time so that every node runs the
   same thing at the same moment: STREAM Triad, DGEMM on all cores, a small one-node HPL, the
   FMA clock of one core;
3. a ping-pong at 0 B and 1 MiB between every pair of nodes, in rounds of disjoint pairs
   (suite/pairs.py) so that no node is in two pairs at once;
4. HPL across all nodes, sized from the smallest node's memory and the budget.

Every run is stored like any other, tagged with the cluster run's id and its phase
(suite/cluster_tags.py), so the verdicts (median and MAD across nodes and pairs) are worked out
from the stored figures by the same code for the summary here and for the report later.
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from clusterbench.analysis.cluster import IPERF, NODE_MEASURES, ClusterView, stored_view
from clusterbench.analysis.cluster_tags import TAG_NODE, TAG_PAIR, TAG_PHASE, TAG_RUN
from clusterbench.analysis.outliers import Rule
from clusterbench.bench.registry import benchmark_class
from clusterbench.campaign.expand import expand
from clusterbench.campaign.spec import BenchmarkBlock, Campaign, CampaignError
from clusterbench.campaign.where import system_from_facts
from clusterbench.cluster.preflight import Preflight
from clusterbench.errors import UserInputError
from clusterbench.execution import loop
from clusterbench.execution.executor import RunResult
from clusterbench.execution.loop import Reporter
from clusterbench.execution.request import PlannedRun
from clusterbench.launch.hosts import Inventory
from clusterbench.launch.site import Site
from clusterbench.store.db import Store
from clusterbench.suite.pairs import rounds
from clusterbench.system.discover import SystemInfo

MAX_CLUSTER_NODES = 256  # the pairs phase alone is N(N-1)/2 runs
NODE_SHARE, HPL_SHARE = 0.35, 0.45  # of the budget; pairs, preflight and start-up share the rest
NODE_BENCHMARKS = ("clock", "stream", "dgemm", "hpl")  # DGEMM before HPL: its measured rate sizes HPL
PAIR_PASSES = 3  # every pair measured this often (passes apart in time); the best counts
# A node or link out of line is measured again before it is called slow: its benchmark's phase on every node,
# a flagged link's pairs, this many passes more. Only a fault that lasts survives (a 34% slower link on an
# unmodified virtual cluster, CI 2026-12-01, was a moment's noise; one pass more once left a node's DGEMM 34%
# below the others on a machine loaded by other work).
RECHECK_PASSES = 2
RECHECKED_KINDS = ("node", "pair", "iperf")  # phases whose flagged figures are measured again
# The rates of HPL's short runs here (a guess from Rpeak, a share of DGEMM, the loss across nodes) are the
# Hpl class's `short_run_rates`; its N, HPL's one time model (`time_model`) at the expected rate.
FALLBACK_RPEAK_GFLOPS = 10.0  # a node whose Rpeak is unknown
MIN_HPL_N = 1000
DGEMM_N, DGEMM_REPS = 1000, 3  # 8 Gflop per core: a fraction of a second on a server, seconds on a Pi
STREAM_NTIMES, MIN_STREAM_N = 6, 1_000_000  # 5 timed repetitions: the compared rate is their mean
CLOCK_MS = 1000  # long enough for the mean rate to average over a scheduler's time slices
IPERF_SECONDS = 3  # per pair: TCP's slow start is over within a second on any LAN
PAIR_SIZE_LOG2 = 20  # 1 MiB, with 0 B always measured
# 1 MiB is sent twice each way (IMB's 40 MiB per size took 20 s per pair over a 50 Mbit/s cable) ...
PAIR_VOLUME_MIB = 2
# ... and more, for at least 0.1 s per size: on a fast link a few MiB take milliseconds, which one wake-up of
# another process moves by a quarter (an unmodified virtual cluster flagged a link at -28% with 8 MiB)
PAIR_MIN_TIME_S = 0.1
TIMEOUT_FACTOR, MIN_TIMEOUT_S = 10.0, 60.0  # generous: a cluster's nodes may be much slower than guessed


@dataclass
class Phase:
    """Runs that go at once, each on its own nodes (one benchmark on every node, or one round of pairs).

    An HPL phase is sized again just before it runs (`resize`), from the rates the phases before it
    measured: a guess from Rpeak can be off by 10x (a generic BLAS, nodes sharing cores)."""

    label: str
    kind: str  # node, pair or hpl: the cluster_phase tag
    runs: list[tuple[PlannedRun, Site, dict]]  # the run, where it goes, its extra tags
    seconds: float = 0.0  # what an HPL phase is sized to take
    resize: Callable[[float], None] | None = None  # with the measured Gflop/s the HPL is expected to reach

    @property
    def estimate_s(self) -> float:
        return max((r.estimate_s or 0.0 for r, _, _ in self.runs), default=0.0)


@dataclass
class ClusterPlan:
    inventory: Inventory
    node_system: SystemInfo  # one compute node: the first node's topology, the smallest memory
    phases: list[Phase]
    budget_s: float
    skipped: list[str] = field(default_factory=list)
    interconnect: str = "auto"
    hpl_binary: str | None = None

    @property
    def estimate_s(self) -> float:
        return sum(p.estimate_s for p in self.phases)

    def to_dict(self) -> dict:
        return {"nodes": self.inventory.names, "budget_s": self.budget_s, "estimate_s": round(self.estimate_s, 1),
                "interconnect": self.interconnect, "hpl_binary": self.hpl_binary, "skipped": self.skipped,
                "phases": [{"label": p.label, "kind": p.kind, "estimate_s": round(p.estimate_s, 1),
                            "runs": [{"benchmark": r.benchmark, "params": r.params, "tags": tags}
                                     for r, _, tags in p.runs]} for p in self.phases]}


@dataclass
class ClusterResult:
    cluster_run: str
    plan: ClusterPlan
    results: list[RunResult]
    rechecked: list[str] = field(default_factory=list)  # what looked out of line and was measured again


def check_inventory(inv: Inventory) -> None:
    if len(inv.hosts) < 2:
        raise UserInputError(f"{inv.source} names {len(inv.hosts)} node: a cluster run needs at least 2",
                             hint="for one machine run `clusterbench run` without -w")
    if len(inv.hosts) > MAX_CLUSTER_NODES:
        raise UserInputError(f"{inv.source} names {len(inv.hosts)} nodes, more than {MAX_CLUSTER_NODES}",
                             hint="run the cluster in parts (-w node[1-128], then node[129-256])")


def plan_cluster(inv: Inventory, preflight: Preflight, local: SystemInfo, budget_s: float, *,
                 interconnect: str = "auto", mpi: str | None = None, hpl_binary: str | None = None,
                 hpl: bool = True, iperf: bool = False, pairs: bool = True) -> ClusterPlan:
    """Size every phase from the budget and the smallest node; nothing runs yet. HPL's N here is a
    first guess from Rpeak: the run sizes it again from what DGEMM measured. `pairs=False` leaves out
    the ping-pong between every pair (N(N-1)/2 runs): a check of the nodes alone."""
    check_inventory(inv)
    node = system_from_facts(preflight.facts, local)
    node.nodes = 1
    plan = ClusterPlan(inv, node, [], budget_s, interconnect=interconnect, hpl_binary=hpl_binary)
    rates = benchmark_class("hpl").short_run_rates
    guess = (node.rpeak_node_gflops or FALLBACK_RPEAK_GFLOPS) * rates.guess_efficiency
    per_bench_s = budget_s * NODE_SHARE / len(NODE_BENCHMARKS)
    base = {"mpi": mpi} if mpi else {}
    for name in NODE_BENCHMARKS:
        if name == "hpl" and not (hpl and hpl_binary):
            plan.skipped.append("hpl (one node): " + ("--no-hpl" if not hpl else "no xhpl (clusterbench build hpl)"))
            continue
        phase = Phase(f"{name} on every node", "node", [], seconds=per_bench_s)
        if name == "hpl":
            phase.resize = _resizer(phase, plan, base, 1, hpl_binary)
            phase.resize(guess)
        else:
            _fill_node_phase(phase, plan, base | _node_params(name, node, per_bench_s))
        if phase.runs:
            plan.phases.append(phase)
    if pairs:
        _plan_pairs(plan, base)
    else:
        plan.skipped.append("ping-pong between every pair: --no-pairs")
    if iperf:
        _plan_pairs(plan, base, iperf=True)
    if hpl and hpl_binary:
        nodes = len(inv.hosts)
        phase = Phase(f"HPL on all {nodes} nodes", "hpl", [], seconds=budget_s * HPL_SHARE)
        phase.resize = _resizer(phase, plan, base, nodes, hpl_binary)
        phase.resize(guess * nodes * rates.across_nodes)
        if phase.runs:
            plan.phases.append(phase)
    elif hpl:
        plan.skipped.append("hpl (all nodes): no xhpl found or built")
    return plan


def _fill_node_phase(phase: Phase, plan: ClusterPlan, params: dict) -> None:
    """One run of a benchmark per node."""
    name = phase.label.split()[0]
    phase.runs.clear()
    for host in plan.inventory.hosts:
        run = _one(BenchmarkBlock(benchmark=name, params=params), plan.node_system, plan.skipped)
        if run is None:
            return
        phase.runs.append((run, _site([host.name], plan.inventory, plan.interconnect), {TAG_NODE: host.name}))


def _plan_pairs(plan: ClusterPlan, base: dict, iperf: bool = False) -> None:
    """Every pair PAIR_PASSES times (ping-pong) or once (iperf3), each pass in rounds of disjoint pairs."""
    if iperf:
        name, kind, passes, what = "iperf3", "iperf", 1, "iperf3"
        params = base | {"between_nodes": True, "time": IPERF_SECONDS}
    else:
        name, kind, passes, what = "pingpong", "pair", PAIR_PASSES, "ping-pong"
        params = base | {"min_log2": PAIR_SIZE_LOG2, "max_log2": PAIR_SIZE_LOG2, "volume_mib": PAIR_VOLUME_MIB,
                         "min_time_s": PAIR_MIN_TIME_S, "rounds": 1,  # PAIR_PASSES passes, the best counts
                         "nodes": 2, "ranks": 2, "threads": 1, "bind_to": "none", "interconnect": plan.interconnect}
    all_rounds = rounds(plan.inventory.names)
    for npass in range(passes):
        for i, pairs in enumerate(all_rounds):
            phase = Phase(f"{what} pass {npass + 1}, round {i + 1} of {len(all_rounds)}", kind, [])
            for a, b in pairs:
                run = _one(BenchmarkBlock(benchmark=name, params=params), plan.node_system, plan.skipped)
                if run is None:
                    return
                phase.runs.append((run, _site([a, b], plan.inventory, plan.interconnect), {TAG_PAIR: f"{a},{b}"}))
            plan.phases.append(phase)


def _node_params(name: str, node: SystemInfo, seconds: float) -> dict:
    """One node's benchmark (not HPL) sized for about `seconds`."""
    cores = max(node.topology.cores_total, 1)
    if name == "stream":  # STREAM's own rule (4 x the last-level cache), unless that takes too long
        from clusterbench.bench.native import GUESS_MEMORY_BYTES_S

        fits = int(seconds * GUESS_MEMORY_BYTES_S / (8 * (5 + 10 * STREAM_NTIMES)))
        default = benchmark_class(name).default_n(node)
        return {"threads": cores, "ntimes": STREAM_NTIMES, "n": max(min(default, fits), MIN_STREAM_N)}
    if name == "dgemm":  # every core its own product (HPCC's StarDGEMM): the node's aggregate rate
        return {"ranks": cores, "n": DGEMM_N, "reps": DGEMM_REPS, "bind_to": "core"}
    return {"ms": CLOCK_MS}


def _resizer(phase: Phase, plan: ClusterPlan, base: dict, nodes: int, binary: str) -> Callable[[float], None]:
    """The function that (re)makes an HPL phase's run(s) for an expected rate in Gflop/s."""
    cores = max(plan.node_system.topology.cores_total, 1)
    system = _with_nodes(plan.node_system, nodes)
    hpl = benchmark_class("hpl")

    def resize(gflops: float) -> None:
        n = _hpl_n(phase.seconds, max(gflops, 0.01), plan.node_system.memory_bytes(), nodes)
        p, q = hpl.grids(cores * nodes)[0]
        params = base | {"n": n, "nb": hpl.sizing.short_run_nb, "p": p, "q": q, "layout": "mpi", "binary": binary}
        if nodes == 1:
            _fill_node_phase(phase, plan, params)
            return
        params |= {"nodes": nodes, "ranks": cores * nodes, "interconnect": plan.interconnect}
        run = _one(BenchmarkBlock(benchmark="hpl", params=params), system, plan.skipped)
        phase.runs[:] = [(run, _site(plan.inventory.names, plan.inventory, plan.interconnect), {})] if run else []

    return resize


def _hpl_n(seconds: float, gflops: float, memory: int | None, nodes: int) -> int:
    """The largest multiple of NB whose solve takes about `seconds` (HPL's time model, solve only: the start-up
    is in the budget's remainder), within 40% of the nodes' memory; at least MIN_HPL_N."""
    hpl = benchmark_class("hpl")
    nb = hpl.sizing.short_run_nb
    n = hpl.time_model.solve().largest_n(seconds, gflops, nb)
    if memory:
        n = min(n, hpl.n_for_memory(memory * nodes, 0.4, nb))
    return max(n, MIN_HPL_N)


def _with_nodes(node: SystemInfo, nodes: int) -> SystemInfo:
    system = copy.copy(node)
    system.nodes = nodes
    return system


def _one(block: BenchmarkBlock, system: SystemInfo, skipped: list[str]) -> PlannedRun | None:
    """The one run of a one-point block, or None with the reason in `skipped` (once per benchmark)."""
    ok, why = benchmark_class(block.benchmark).available()
    try:
        if not ok:
            raise UserInputError(why)
        run = expand(Campaign(name="cluster", benchmarks=[block]), None, system)[0]
    except (CampaignError, UserInputError) as exc:
        reason = f"{block.benchmark}: {exc.message}"
        if reason not in skipped:
            skipped.append(reason)
        return None
    run.timeout_s = max(MIN_TIMEOUT_S, (run.estimate_s or 10.0) * TIMEOUT_FACTOR)
    return run


def _site(names: list[str], inv: Inventory, interconnect: str) -> Site:
    hosts = [h for h in inv.hosts if h.name in names]
    return Site(launcher="mpirun", inventory=Inventory(hosts, inv.source), interconnect=interconnect)


def expected_hpl_gflops(results: list[RunResult], nodes: int) -> float | None:
    """What HPL should reach, from what ran so far: the slowest node's one-node HPL (times the nodes
    and the loss to communication) when it ran, else the slowest node's DGEMM (times the share a
    small HPL reaches of it). The slowest node sets HPL's pace: every rank waits for the others."""
    def slowest(name: str) -> float | None:
        per_run = [max((m.value for m in r.outcome.metrics if m.name == name and m.valid), default=None)
                   for r in results]
        values = [v for v in per_run if v is not None]
        return min(values) if values else None

    rates = benchmark_class("hpl").short_run_rates
    one_node = slowest("hpl_gflops")
    if one_node:
        return one_node * nodes * rates.scale(nodes)
    dgemm = slowest("dgemm_gflops")
    return dgemm * rates.of_dgemm * nodes * rates.scale(nodes) if dgemm else None


def new_cluster_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def run_cluster(store: Store, plan: ClusterPlan, reporter: Reporter | None = None,
                rule: Rule = Rule()) -> ClusterResult:
    """The plan's phases run by the engine (execution/loop.run_phases), the runs of a phase at once;
    all stored and tagged (the verdicts are the analysis's, from what is stored: analysis/cluster.py).
    Between phases, the engine asks this plan's two hooks: before an HPL phase, size it again from
    the rates measured so far (`Phase.resize`); after the last node, ping-pong or iperf3 phase, measure again what
    `rule` puts out of line (`recheck_phases`), before the phases across all nodes."""
    cluster_run = new_cluster_run_id()
    system_id = store.remember_system(plan.node_system)
    ours: dict[int, Phase] = {}  # the engine's phase (by id) -> this plan's
    rechecked: list[str] = []
    checked = [False]  # the re-check is made once, after the last node, pair or iperf phase of the plan

    def fill(made: loop.Phase, phase: Phase) -> loop.Phase:
        """The engine's view of this plan's phase as it is now (its runs change when it is resized)."""
        made.runs, made.sites = [r for r, _, _ in phase.runs], [s for _, s, _ in phase.runs]
        made.tags = [{"suite": "cluster", TAG_RUN: cluster_run, TAG_PHASE: phase.kind} | extra
                     for _, _, extra in phase.runs]
        return made

    def engine_phase(phase: Phase) -> loop.Phase:
        made = fill(loop.Phase(phase.label, phase.kind, [], [], [], phase.estimate_s), phase)
        ours[id(made)] = phase
        return made

    def before(made: loop.Phase, results: list[RunResult]) -> bool:
        phase = ours[id(made)]
        if phase.resize is None:
            return True
        rate = expected_hpl_gflops(results, 1 if phase.kind == "node" else len(plan.inventory.hosts))
        if rate:
            phase.resize(rate)
        return bool(fill(made, phase).runs)

    def after(made: loop.Phase, _results: list[RunResult], left: list[loop.Phase]) -> list[loop.Phase]:
        if checked[0] or made.kind not in RECHECKED_KINDS or any(p.kind in RECHECKED_KINDS for p in left):
            return []
        checked[0] = True
        again, why = recheck_phases(stored_view(store, cluster_run, rule), plan)
        rechecked.extend(why)
        return [engine_phase(p) for p in again]

    def make_bench(made: loop.Phase, run: PlannedRun):
        bench = run.bench_class().from_point(run.params)
        if made.kind == "node" and hasattr(bench, "on_remote_node"):
            bench.on_remote_node = True  # one process too goes to its node (a one-host mpirun)
        return bench

    results = loop.run_phases(store, [engine_phase(p) for p in plan.phases], reporter or loop.QuietReporter(),
                              system_id=system_id, before=before, after=after, make_bench=make_bench)
    return ClusterResult(cluster_run, plan, results, rechecked)


def recheck_phases(view: ClusterView, plan: ClusterPlan) -> tuple[list[Phase], list[str]]:
    """The phases that measure again what `view` flags, and what they are for ("node2: links_bandwidth").

    A flagged per-node figure: its benchmark on every node at once, RECHECK_PASSES more times (the nodes
    shared the machine the first time, they share it again). A flagged link, or a node flagged on its
    links: those pairs RECHECK_PASSES more times, in rounds of disjoint pairs, with the benchmark that
    measured the flagged figure (ping-pong for latency and bandwidth, iperf3 for TCP throughput, which
    is measured once and so is the likeliest to be caught by noise). The figures are the best over all
    passes, so noise in the first ones is outvoted and a lasting fault stays."""
    benchmarks: set[str] = set()
    pairs: dict[str, set[tuple[str, str]]] = {"pair": set(), "iperf": set()}
    why: list[str] = []
    by_key = {m.key: m.benchmark for m in NODE_MEASURES}
    for row in view.rows:
        for f in row.flags:
            why.append(f"{row.node}: {f.measure}")
            if f.measure in by_key:
                benchmarks.add(by_key[f.measure])
            else:  # its links taken together
                pairs[_link_kind(f.measure.removeprefix("links_"))] |= {
                    (c.a, c.b) for c in view.pairs if row.node in (c.a, c.b)}
    for cell in view.pairs:
        for f in cell.flags:
            why.append(f"{cell.a}-{cell.b}: {f.measure}")
            pairs[_link_kind(f.measure)].add((cell.a, cell.b))
    again = [Phase(f"again ({npass + 1} of {RECHECK_PASSES}): {p.label}", p.kind, list(p.runs), p.seconds)
             for npass in range(RECHECK_PASSES) for p in plan.phases
             if p.kind == "node" and p.label.split()[0] in benchmarks]
    for kind, what in (("pair", "ping-pong"), ("iperf", "iperf3")):
        planned = {extra[TAG_PAIR]: (run, site, extra) for p in plan.phases if p.kind == kind
                   for run, site, extra in p.runs}
        chosen = [planned[f"{a},{b}"] for a, b in sorted(pairs[kind]) if f"{a},{b}" in planned]
        for npass in range(RECHECK_PASSES if chosen else 0):
            for i, group in enumerate(disjoint_rounds(chosen, lambda r: r[2][TAG_PAIR].split(","))):
                again.append(Phase(f"{what} again, pass {npass + 1}, round {i + 1}", kind, group))
    return again, why


def _link_kind(measure: str) -> str:
    """The phase kind whose runs measured a link measure: iperf3's TCP throughput, else the ping-pong."""
    return "iperf" if measure == IPERF.key else "pair"


def disjoint_rounds(items: list, members: Callable[[object], list[str]]) -> list[list]:
    """`items` in rounds in which no node is in two items, each round as full as it goes in order."""
    left, out = list(items), []
    while left:
        busy: set[str] = set()
        round_, rest = [], []
        for item in left:
            names = set(members(item))
            (rest if names & busy else round_).append(item)
            if not names & busy:
                busy |= names
        out.append(round_)
        left = rest
    return out
