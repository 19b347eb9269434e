"""Ranks, threads, grid, binding and BLAS variant of an MPI benchmark, from a few parameters.

A campaign says `layout: mpi` or `layout: hybrid-node` and, optionally, `blas:`. From the
node's topology this module works out the rest the way the HPL FAQ and the published studies
do it:

- `mpi`: one rank per core, each bound to its core, a serial BLAS (threads would fight the
  other ranks for cores);
- `hybrid-socket`: one rank per socket bound to the socket, `OMP_NUM_THREADS` = cores per
  socket, a threaded BLAS;
- `hybrid-node`: one rank per node, not bound, `OMP_NUM_THREADS` = cores per node, a threaded BLAS.

The BLAS is chosen per run without root: Debian installs each variant's `libblas.so.3` in its
own directory (openblas-serial, openblas-openmp, openblas-pthread, blis-openmp, ...), and putting
that directory first on `LD_LIBRARY_PATH` makes the dynamic loader pick it. Which library was
really loaded is checked at run time (see launch/libtrace.py).
"""

from __future__ import annotations

import os
import re
from functools import lru_cache

from clusterbench.bench.layout import layouts
from clusterbench.bench.params import MAX_COUNT, Param
from clusterbench.errors import UserInputError, suggest
from clusterbench.launch.mpirun import INTERCONNECTS
from clusterbench.pinning.strategies import SCALING_MODES, STRATEGIES, scaled
from clusterbench.system.discover import SystemInfo
from clusterbench.system.mpi import MPI_CHOICES, default_mpi_name

LAYOUT_NAMES = ("mpi", "hybrid-socket", "hybrid-node")
BIND_CHOICES = ("core", "socket", "numa", "none")
DEFAULT_BLAS = "default"  # whatever libblas.so.3 the system alternative points at

MPI_PARAM = Param("mpi", str, None, "MPI implementation: openmpi or mpich (default: the campaign's cluster.mpi, "
                  "else the mpirun on PATH)", choices=MPI_CHOICES)
# The one set of placement parameters of every benchmark that runs through mpirun or srun.
PLACEMENT_PARAMS = (
    Param("nodes", int, 1, "nodes (ranks are spread evenly over them)", minimum=1, maximum=MAX_COUNT),
    Param("ranks", int, None, "MPI ranks (default: from the layout, else the benchmark's)", minimum=1,
          maximum=MAX_COUNT),
    Param("threads", int, None, "OpenMP threads per rank (default: from the layout, else the benchmark's)",
          minimum=1, maximum=MAX_COUNT),
    Param("bind_to", str, None, "binding: core, socket, numa or none (default: from the layout)",
          choices=BIND_CHOICES),
    Param("map_by", str, None, "rank placement, passed to mpirun --map-by: core (fill a socket first), "
          "socket (round-robin over sockets), numa, node, ppr:1:socket:pe=4, ..."),
    Param("interconnect", str, None, "transport: auto, shm (shared memory only), tcp, ib "
          "(default: the campaign's cluster: section, else auto)", choices=INTERCONNECTS),
    MPI_PARAM,
    Param("pinning", str, None, "pinning strategy, translated for srun, Open MPI or Hydra: " + ", ".join(STRATEGIES)
          + ", or one the campaign defines under cluster.strategies (see docs/pinning.md)"),
    Param("scaling", str, None, "scaling mode over `workers` CPUs: thread (one task, that many threads), "
          "task (that many one-thread tasks), hybrid (a task per NUMA domain, the rest as threads)",
          choices=SCALING_MODES),
    Param("workers", int, None, "CPUs a `scaling` mode uses per node (default: every core)", minimum=1,
          maximum=MAX_COUNT),
)
LAYOUT_PARAM = Param("layout", str, "mpi", "rank/thread layout: mpi, hybrid-socket or hybrid-node",
                     choices=LAYOUT_NAMES)
BLAS_PARAM = Param("blas", str, None, "BLAS variant directory (openblas-serial, blis-openmp, ...) or 'default'")
LAYOUT_MAP_BY = {"hybrid-socket": "socket", "hybrid-node": "node"}  # mpirun --map-by a layout implies


@lru_cache(maxsize=1)
def blas_variants() -> dict[str, str]:
    """Installed variants, read once per process: campaigns resolve thousands of points."""
    from clusterbench.system.software import blas_variant_dirs

    return blas_variant_dirs()


def default_blas_for(threads: int, variants: dict[str, str]) -> str:
    """Serial BLAS for one thread per rank, a threaded one otherwise, if installed."""
    wanted = ("openblas-serial",) if threads == 1 else ("openblas-openmp", "openblas-pthread", "blis-openmp")
    for name in wanted:
        if name in variants:
            return name
    return DEFAULT_BLAS


CORE_MARK = "@"  # openblas-serial@SkylakeX: the variant's library with OPENBLAS_CORETYPE=SkylakeX
_CORE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")


def split_blas(blas: str | None) -> tuple[str | None, str | None]:
    """('openblas-serial', 'SkylakeX') from 'openblas-serial@SkylakeX'; (blas, None) without a core. A core
    name that is not a plain word is refused: it becomes an environment value of the run."""
    if not blas or CORE_MARK not in blas:
        return blas, None
    name, _, core = blas.partition(CORE_MARK)
    if not _CORE_NAME.fullmatch(core) or not name:
        raise UserInputError(f"BLAS variant {blas[:80]!r}: the kernel after {CORE_MARK!r} must be an OpenBLAS "
                             "core name (letters, digits, _; at most 32)", hint="e.g. openblas-serial@SkylakeX")
    return name, core


def core_env(blas: str | None) -> dict[str, str]:
    """OPENBLAS_CORETYPE of a variant that names its kernels; {} otherwise (a user's own setting then holds)."""
    core = split_blas(blas)[1]
    return {"OPENBLAS_CORETYPE": core} if core else {}


def remedy_variants(names: list[str]) -> list[str]:
    """NAME@CORE for each installed OpenBLAS variant among `names` whose kernels fall back here to narrower
    ones than the CPU has (with this environment's OPENBLAS_CORETYPE, which a user may have set): the remedy
    as a variant of its own, so that the tuner measures it beside the library's own choice."""
    from clusterbench.system import blas_kernel

    coretype = os.environ.get("OPENBLAS_CORETYPE") or None
    out = []
    for name in names:
        directory = blas_variants().get(name)
        library = os.path.join(directory, "libblas.so.3") if directory else ""
        if not library or not os.path.exists(library):
            continue
        found = blas_kernel.judge(library, coretype)
        remedy = (found or {}).get("remedy") or ""
        if found and found.get("verdict") == "fallback" and remedy.startswith("OPENBLAS_CORETYPE="):
            out.append(f"{name}{CORE_MARK}{remedy.partition('=')[2]}")
    return out


def choose_blas(requested: str | None, threads: int) -> str:
    """The variant asked for (checked to be installed; NAME@CORE: NAME installed), else the default for the
    thread count."""
    variants = blas_variants()
    blas = requested or default_blas_for(threads, variants)
    name = split_blas(blas)[0]
    if name != DEFAULT_BLAS and name not in variants:
        names = sorted(variants)
        raise UserInputError(f"BLAS variant {blas!r} is not installed on this machine",
                             hint=(suggest(name, names, "installed variants", most=len(names)) if names
                                   else "no variant is installed here") + "; or 'default': the system's own")
    return blas


def blas_dir(blas: str | None) -> str | None:
    """The directory to put first on LD_LIBRARY_PATH for this variant (None: leave it alone)."""
    name = split_blas(blas)[0]
    return None if not name or name == DEFAULT_BLAS else blas_variants().get(name)


def library_path_env(directory: str | None) -> dict[str, str]:
    """LD_LIBRARY_PATH with `directory` first, so the loader finds that libblas.so.3 first."""
    if not directory:
        return {}
    rest = os.environ.get("LD_LIBRARY_PATH", "")
    return {"LD_LIBRARY_PATH": directory + (os.pathsep + rest if rest else "")}


def apply_scaling(point: dict, system: SystemInfo) -> None:
    """Ranks and threads of a point that names a `scaling` mode (in place); refuses a point that
    also names them itself, since the two would contradict each other."""
    mode = point.get("scaling")
    if not mode:
        return
    given = [k for k in ("ranks", "threads") if point.get(k)]
    if given:
        raise UserInputError(f"scaling: {mode} sets ranks and threads itself; remove {' and '.join(given)}",
                             where="scaling")
    topo = system.topology
    nodes = point.get("nodes") or 1
    workers = point.get("workers") or topo.cores_total
    if workers > topo.pus_total:
        raise UserInputError(f"workers: {workers} is more than the {topo.pus_total} CPUs of a node", where="workers",
                             hint=f"at most {topo.pus_total}")
    ranks, threads = scaled(mode, workers, max(topo.numa_domains, topo.sockets, 1))
    point.update(ranks=ranks * nodes, threads=threads)


def resolve_placement(point: dict, system: SystemInfo) -> None:
    """Fill ranks, threads, bind_to and blas of a checked point (in place) from the node."""
    apply_scaling(point, system)
    topo = system.topology
    bind_given = point.get("bind_to")
    point.update(_placement(point.get("layout", "mpi"), point.get("nodes", 1), point.get("ranks"),
                            point.get("threads"), point.get("bind_to"), point.get("blas"),
                            max(topo.sockets, 1), topo.cores_total))
    if point.get("pinning") and not bind_given:  # a strategy decides the binding: none invented
        point.pop("bind_to", None)
    point["mpi"] = point.get("mpi") or default_mpi_name()


@lru_cache(maxsize=4096)  # the points of a sweep share a handful of placements
def _placement(layout: str, nodes: int, ranks: int | None, threads: int | None, bind_to: str | None,
               blas: str | None, sockets: int, cores: int) -> dict:
    base = layouts(nodes, sockets, max(cores // sockets, 1))[layout]
    ranks = ranks or base.ranks
    threads = threads or max(base.threads_per_rank * base.ranks // ranks, 1)
    default_bind = {"mpi": "core", "hybrid-socket": "socket", "hybrid-node": "none"}[base.name]
    bind = bind_to or (default_bind if threads == 1 or base.name != "mpi" else "none")
    return {"ranks": ranks, "threads": threads, "bind_to": bind, "blas": choose_blas(blas, threads)}


def available_rpeak(point: dict, system: SystemInfo) -> float | None:
    """Rpeak (Gflop/s) of the cores a resolved point actually uses, for time estimates."""
    rpeak = system.rpeak_node_gflops
    if not rpeak:
        return None
    nodes = point.get("nodes", 1)
    share = point["ranks"] * point["threads"] / max(system.topology.cores_total * nodes, 1)
    return rpeak * nodes * min(share, 1.0)
