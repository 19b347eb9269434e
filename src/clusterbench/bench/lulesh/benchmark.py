"""`lulesh`: LULESH 2.0, LLNL's shock-hydrodynamics proxy application (MPI + OpenMP), figure of merit and time.

An application beside HPL for tuning studies: its cycles are a halo exchange with the 26
neighbours and an MPI_Allreduce of the time step, so network settings show in its figure (the
Mont-Blanc study saw 3.25x from TCP's rto_min). Runs `lulesh2.0 -s S [-i I] -r R -b B -c C [-p]`
under mpirun with OMP_NUM_THREADS = `threads`; every rank owns an S^3 cube of zones and the ranks
form a cube (1, 8, 27, ...), which is checked before anything runs. Without `i` the problem runs
to its stop time (LULESH's own default: 932 cycles at S=30 on one rank). The output is parsed by
bench/lulesh/output.py (FOM, times, the symmetry check).

Sizes are bounded before anything runs: S up to 1,000 and I up to 10^7 by declaration, and the
ranks a node holds must fit in 60% of its available memory at about 700 bytes per mesh node,
(S+1)^3 per rank, plus 16 MiB per process (measured here: 61 MB resident per rank at S=40, 371
MB at S=80, 15.6 MB at S=5). -r and -b are bounded by what LULESH's own int arithmetic survives
(-b 9 with 11 regions overflows its weights and crashes it; -b -2 hangs it; -c below 0 skips the
equation of state and -r 0 divides by zero, so both are refused).

More ranks than cores (8 ranks on this 2-core machine) is oversubscription: mpirun gets
`--oversubscribe` (bench/program.py does it for every placed program with more ranks than CPUs),
and the ranks are left unbound unless `bind_to` is given, because Open MPI refuses to bind more
ranks than cores ("binding more processes than cpus"); an explicit binding Open MPI would
refuse so is refused here first (Hydra binds several ranks to one core without complaint).
"""

from __future__ import annotations

from pathlib import Path

from clusterbench.bench.lulesh import output
from clusterbench.bench.lulesh.output import INT_MAX, cube_root, last_cycle, lulesh_outcome, parse_lulesh
from clusterbench.bench.metrics import Outcome, TooManyResults
from clusterbench.bench.native import GUESS_START_S, memory_limit
from clusterbench.bench.official import OFFICIAL_PLACEMENT, OfficialBinary
from clusterbench.bench.params import Param
from clusterbench.errors import UserInputError
from clusterbench.system.discover import SystemInfo
from clusterbench.units import format_bytes

MAX_S = 1000  # zones per side per rank; LULESH indexes zones with a 32-bit int (S^3 < 2^31)
MAX_I = 10_000_000  # cycles; LULESH's own "until the stop time" is 9,999,999
MAX_REGIONS = 10_000
MAX_COST = 1000
BYTES_PER_MESH_NODE = 700  # resident bytes per (S+1)^3 mesh node: 659-697 measured at S=40..80
RANK_BASE_BYTES = 16 * 2**20  # one rank's code, libraries and MPI buffers (15.6 MB at S=5)
# Deliberately low first guesses for estimate_s (ETAs learn real durations): this VM runs
# 1.04-1.1e6 zone-cycles per second per core; a cycle of the whole problem takes at most
# 32 x (global side) cycles to the stop time (measured: 23, 72, 231, 575, 932 at sides 3..30).
GUESS_ZONE_CYCLES_S = 5e5
CYCLES_PER_SIDE = 32
REGION_CYCLE_S = 20e-6  # per region per cycle (18 us measured with 1000 regions at S=5)
COST_FACTOR = 0.75  # each unit of -c adds about 0.7 x the cycle's time (72x slower at -c 100)


def nearest_cubes(n: int) -> tuple[int, int]:
    """The cubes just below (or equal to) and just above n (n >= 1)."""
    k = 1
    while (k + 1) ** 3 <= n:
        k += 1
    return k**3, (k + 1) ** 3


def lulesh_memory(s: int, ranks: int) -> int:
    """Bytes `ranks` LULESH processes of size `s` hold (the planning estimate)."""
    return ranks * (BYTES_PER_MESH_NODE * (s + 1) ** 3 + RANK_BASE_BYTES)


class Lulesh(OfficialBinary):
    name = "lulesh"
    binary_names = ("lulesh2.0",)
    env_var = "CLUSTERBENCH_LULESH"
    install_hint = ("get the LULESH 2.0 source (github.com/LLNL/LULESH) and run "
                    "`clusterbench build lulesh --source PATH`")
    needs_mpi = True  # built with -DUSE_MPI=1: always started by mpirun, even on one rank
    default_ranks = 1
    threaded_default = True  # MPI + OpenMP: threads default to the node's cores / ranks
    unbind_threaded_ranks = True
    output_formats = (output.FORMAT,)
    metrics = output.METRICS
    parameters = (
        Param("s", int, 30, "-s: zones per side of each rank's cube (LULESH's default 30)", minimum=1,
              maximum=MAX_S),
        Param("i", int, None, "-i: cycles to run (default: until the problem's stop time)", minimum=1,
              maximum=MAX_I),
        Param("r", int, 11, "-r: number of regions (LULESH's default 11)", minimum=1, maximum=MAX_REGIONS),
        Param("b", int, 1, "-b: load imbalance between regions, the exponent of their weights (default 1)",
              minimum=0, maximum=30),
        Param("c", int, 1, "-c: extra cost of the expensive regions (default 1)", minimum=0, maximum=MAX_COST),
        Param("p", bool, False, "-p: print every cycle (shown as the run's progress)"),
        *OFFICIAL_PLACEMENT,
    )

    @classmethod
    def resolve(cls, point: dict, system: SystemInfo) -> None:
        bind_given = point.get("bind_to")
        super().resolve(point, system)  # ranks, threads, binding, MPI; then check()
        per_node = -(-point["ranks"] // point["nodes"])
        cores = system.topology.cores_total
        if cores and per_node > cores:  # oversubscribed: unbound by default, Open MPI refuses to bind them
            if bind_given and bind_given != "none" and point.get("mpi") == "openmpi":
                raise UserInputError(
                    f"bind_to={bind_given}: Open MPI refuses to bind {per_node} processes to a node of {cores} cores "
                    "(more processes than cores)", where="bind_to", hint="bind_to: none, or fewer ranks per node")
            point["bind_to"] = "none"

    @classmethod
    def check(cls, point: dict, system: SystemInfo) -> None:
        ranks = point["ranks"]
        if cube_root(ranks) is None:
            below, above = nearest_cubes(ranks)
            raise UserInputError(f"ranks={ranks}: LULESH runs on a cube number of ranks (1, 8, 27, 64, ...)",
                                 where="ranks", hint=f"the nearest cubes are {below} and {above}")
        weights = 0
        for k in range(1, point["r"] + 1):
            weights += k ** point["b"]
            if weights > INT_MAX:  # LULESH sums the weights k^b, k = 1..r, in an int
                raise UserInputError(f"b={point['b']} with r={point['r']} regions: the region weights (1^b + 2^b "
                                     f"+ ... + r^b) overflow LULESH's int and crash it", where="b",
                                     hint="a smaller b or fewer regions (LULESH's defaults: r=11, b=1)")
        per_node = -(-ranks // point["nodes"])
        need, limit = lulesh_memory(point["s"], per_node), memory_limit(system)
        if limit is not None and need > limit:
            largest = max((s for s in range(1, point["s"]) if lulesh_memory(s, per_node) <= limit), default=None)
            raise UserInputError(f"s={point['s']} with {per_node} rank(s) per node needs about {format_bytes(need)}, "
                                 f"more than the {format_bytes(limit)} a node can spare", where="s",
                                 hint=f"s={largest} fits" if largest else "fewer ranks per node")

    @classmethod
    def estimate_s(cls, point: dict, system: SystemInfo) -> float | None:
        ranks, s = point["ranks"], point["s"]
        side = s * (cube_root(ranks) or 1)
        cycles = min(point.get("i") or MAX_I, CYCLES_PER_SIDE * side)
        cores = max(system.topology.cores_total, 1)
        per_node = -(-ranks // (point.get("nodes") or 1))
        speed = min(point.get("threads") or 1, cores / per_node)  # cores' worth per rank (< 1 oversubscribed)
        cycle_s = s**3 * (1 + COST_FACTOR * point["c"]) / (GUESS_ZONE_CYCLES_S * speed) + REGION_CYCLE_S * point["r"]
        return GUESS_START_S + cycles * cycle_s

    def arguments(self) -> list[str]:
        p = self.point
        args = ["-s", str(p["s"])]
        if p.get("i"):
            args += ["-i", str(p["i"])]
        args += ["-r", str(p["r"]), "-b", str(p["b"]), "-c", str(p["c"])]
        return args + (["-p"] if p.get("p") else [])

    def parse(self, workdir: Path) -> Outcome:
        try:
            (run,) = parse_lulesh(self.stdout(workdir), limit=1)
        except TooManyResults:
            out = Outcome()
            out.invalidate("more than one 'Run completed' block in the output of one run")
            return out
        out = lulesh_outcome(run)
        p, v = self.point, run.values
        if not run.completed:
            return out
        for key, param, what in (("problem_size", "s", "problem size"), ("mpi_tasks", "ranks", "MPI tasks"),
                                 ("threads", "threads", "threads")):
            if key in v and p.get(param) is not None and v[key] != p[param]:
                out.invalidate(f"LULESH ran with {what} {v[key]}, the run asked for {p[param]}")
        cycles = v.get("iterations")
        if isinstance(cycles, int):
            if p.get("i") and cycles > p["i"]:
                out.invalidate(f"LULESH ran {cycles} cycles, more than the {p['i']} asked for")
            out.facts["lulesh_stopped_by"] = "cycle count" if p.get("i") and cycles == p["i"] else "stop time"
        return out.whole_run_validity()

    def progress(self, workdir: Path) -> str | None:
        if not self.point.get("p"):
            return None
        try:  # only the tail: this runs every second beside busy ranks
            with open(workdir / "stdout.txt", "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - 4096))
                cycle = last_cycle(f.read().decode(errors="replace"))
        except OSError:
            return None
        total = self.point.get("i")
        return None if cycle is None else f"cycle {cycle}" + (f"/{total}" if total else "")
