"""Stores that hold each way a conclusion can go wrong (issue 31, point 12), for the conclusion tests.

Each class is one store, written in the real output formats (derived from this machine's outputs with
tests/studies.py's generators) and imported with the real command line, as a user would:

- `host_groups`: HPL and IMB inside IBM LSF job reports of ONE cluster, two host groups (`#BSUB -m`):
  a fast group then a slow one, run one after another. Different hardware, never repeats, never a regression.
- `unknown_nodes`: plain HPL files that state no node count, one imported as it is and one with
  `--tag nodes=8`; and a truncated 8-rank (2x4) file (its first result passed, the second was cut
  before its residual) whose Gflop/s exceed one node's Rpeak.
- `unknown_threads`: HPCC files of 2 ranks on 1 node, some named with their thread count and some not, and
  1-rank references of known threads (the SMP efficiency's baseline).
- `hpcc_not_applicable`: one-process HPCC files, whose ping-pong figures HPCC prints as -1.
- `blas_at_own_n`: HPL at 8 nodes with two BLAS, each at its own N and NB (the way studies tune).
- `tied_bests`: two HPL files whose best results are the same Gflop/s (and a slower one at another NB).
- `wrong_pattern`: files imported with a --name-pattern that only some of their names match.

The values are SYNTHETIC (named constants below), so a test checks a conclusion against what was written.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from tests.studies import (
    HplLine,
    LsfJob,
    OutputFile,
    hpcc_text,
    hpl_text,
    imb_text,
    lsf_report,
    pingpong_rows,
    platform_mpi_protocols,
    run_cli,
    write_files,
)

from clusterbench.bench.hpl.planner import hpl_flops

SEED = 31  # the issue number
CLUSTER = "lotus"
# host group -> (Gflop/s per node of HPL, IMB TCP bandwidth MiB/s, IMB TCP latency us): different hardware
HOST_GROUPS = {"broadwell256G": (420.0, 900.0, 48.0), "haswell128G": (150.0, 100.0, 95.0)}
GROUP_JOBS = 4  # HPL jobs per host group, one after another (the fast group first)
GROUP_NODES = 2
GROUP_N = 114048
NODE_RPEAK = 30.0  # Gflop/s of one node, given with --rpeak-node for the unknown-node store
PLAIN_N, PLAIN_NB = 13440, 192
PLAIN_GFLOPS = 22.0  # one node's HPL rate in the plain files
TRUNCATED_GFLOPS = 66.3  # an 8-rank (2x4) run: 221% of one node's 30 Gflop/s Rpeak
BLAS_RUNS = {"openblas": (52416, 168, 3010.0), "blis": (51840, 192, 3105.0)}  # N, NB, Gflop/s at 8 nodes
BLAS_REPEATS = 3
TIED_GFLOPS = 20.5
TIED_OTHER_NB = 128
THREAD_REPEATS = 3
PATTERN = "HPL.out.{nodes}_node_{n}_{nb}.{blas}"


@dataclass
class Corpus:
    """One store and what was written into it."""

    name: str
    db: Path
    folder: Path
    truth: dict[str, dict] = field(default_factory=dict)  # realpath -> what the generator put there
    rpeak_node_gflops: float | None = None


def _new(root: Path, name: str) -> Corpus:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    return Corpus(name, root / f"{name}.db", folder)


def host_groups(root: Path, seed: int = SEED) -> Corpus:
    """HPL on 2 nodes and IMB PingPong over TCP, in LSF job reports of one cluster and two host groups."""
    rng = random.Random(seed)
    corpus = _new(root, "host-groups")
    files, job_id, start = [], 4100001, datetime(2017, 3, 1, 9, 0, 0)
    for group, (per_node, bandwidth, latency) in HOST_GROUPS.items():
        for repeat in range(GROUP_JOBS):
            hosts = [(f"host{300 + 10 * repeat + i}", 16) for i in range(GROUP_NODES)]
            rate = per_node * GROUP_NODES * (1 + rng.uniform(-0.01, 0.01))
            hpl = hpl_text(GROUP_N, 192, [HplLine(4, 8, "WR11C2R4", rate)], start + timedelta(seconds=8), rng,
                           version="2.2")
            job = LsfJob(job_id, "HPL", hosts, ["-x", "-n 32", '-R "span[ptile=16]"', "-J HPL", f'-m "{group}"'],
                         ["mpirun -lsf -prot /home/bench01/hpl/bin/xhpl"], platform_mpi_protocols(hosts, "TCP") + hpl,
                         start, int(hpl_flops(GROUP_N) / rate / 1e9) + 20, cluster=CLUSTER)
            files.append(OutputFile(f"hpl-{job_id}.out", lsf_report(job),
                                    {"kind": "hpl", "group": group, "gflops": rate}))
            job_id, start = job_id + 1, start + timedelta(hours=6)
            pair = [(f"host{300 + 10 * repeat}", 1), (f"host{301 + 10 * repeat}", 1)]
            imb = imb_text("/home/bench01/imb/IMB-MPI1", pingpong_rows(latency, bandwidth, rng),
                           start + timedelta(seconds=5))
            job = LsfJob(job_id, "PingPong", pair, ["-x", "-n 2", '-R "span[ptile=1]"', "-J PingPong", f'-m "{group}"'],
                         ["mpirun -lsf -prot -TCP /home/bench01/imb/IMB-MPI1 PingPong"],
                         platform_mpi_protocols(pair, "TCP") + imb, start, 600, cluster=CLUSTER)
            files.append(OutputFile(f"imb-{job_id}.out", lsf_report(job),
                                    {"kind": "imb", "group": group, "bandwidth": bandwidth}))
            job_id, start = job_id + 1, start + timedelta(hours=6)
    corpus.truth = write_files(corpus.folder, files)
    run_cli(corpus.db, "import", "-q", str(corpus.folder), "--tag", "study=host-groups")
    return corpus


def unknown_nodes(root: Path, seed: int = SEED) -> Corpus:
    """Plain HPL files: one with no node count anywhere, one tagged nodes=8 at import, one truncated 8-rank file."""
    rng = random.Random(seed)
    corpus = _new(root, "unknown-nodes")
    corpus.rpeak_node_gflops = NODE_RPEAK
    start = datetime(2024, 5, 2, 10, 0, 0)
    plain = [HplLine(1, 2, "WR11C2R4", PLAIN_GFLOPS)]
    files = {"untagged": OutputFile("hpl-plain.out", hpl_text(PLAIN_N, PLAIN_NB, plain, start, rng),
                                    {"nodes": None, "gflops": PLAIN_GFLOPS}),
             "tagged": OutputFile("hpl-eight.out", hpl_text(PLAIN_N, PLAIN_NB, plain, start + timedelta(hours=1), rng),
                                  {"nodes": 8, "gflops": PLAIN_GFLOPS}),
             "truncated": OutputFile("hpl-truncated.out",
                                     hpl_text(PLAIN_N, PLAIN_NB, [HplLine(2, 4, "WR11C2R4", TRUNCATED_GFLOPS),
                                                                  HplLine(2, 4, "WR11C2R2", TRUNCATED_GFLOPS * 0.9)],
                                              start + timedelta(hours=2), rng, truncate_after=2),
                                     {"nodes": None, "gflops": TRUNCATED_GFLOPS, "truncated": True})}
    for key, output in files.items():
        folder = corpus.folder / key
        corpus.truth |= write_files(folder, [output])
        tags = ["--tag", "nodes=8"] if key == "tagged" else []
        run_cli(corpus.db, "import", "-q", str(folder), *tags, "--tag", "study=unknown-nodes")
    return corpus


def unknown_threads(root: Path, seed: int = SEED) -> Corpus:
    """HPCC on 1 node (`--tag nodes=1`): 2 ranks with three files named threads=1, three threads=4 and three
    not saying; and their 1-rank references (one process per node, the SMP efficiency's baseline), three named
    threads=1 and three threads=4. The unstated ones have no reference they may be compared with."""
    rng = random.Random(seed)
    corpus = _new(root, "unknown-threads")
    for threads in (1, 4, None):
        for repeat in range(1, THREAD_REPEATS + 1):
            name = f"hpcc-t{threads}-r{repeat}.txt" if threads else f"hpcc-r{repeat}.txt"
            output = OutputFile(name, hpcc_text(1, 2, rng), {"threads": threads, "repeat": repeat, "ppn": 2})
            folder = corpus.folder / (f"t{threads}" if threads else "unstated")
            corpus.truth |= write_files(folder, [output])
    for threads in (1, 4):
        files = [OutputFile(f"hpcc-t{threads}-alone-r{repeat}.txt", hpcc_text(1, 1, rng),
                            {"threads": threads, "repeat": repeat, "ppn": 1})
                 for repeat in range(1, THREAD_REPEATS + 1)]
        corpus.truth |= write_files(corpus.folder / "alone", files)
    run_cli(corpus.db, "import", "-q", str(corpus.folder / "t1"), str(corpus.folder / "t4"),
            "--name-pattern", "hpcc-t{threads}-r{repeat}.txt", "--tag", "nodes=1")
    run_cli(corpus.db, "import", "-q", str(corpus.folder / "alone"),
            "--name-pattern", "hpcc-t{threads}-alone-r{repeat}.txt", "--tag", "nodes=1")
    run_cli(corpus.db, "import", "-q", str(corpus.folder / "unstated"), "--tag", "nodes=1")
    return corpus


def hpcc_not_applicable(root: Path, seed: int = SEED) -> Corpus:
    """Three one-process HPCC outputs (ping-pong printed as -1) beside three two-process ones."""
    rng = random.Random(seed)
    corpus = _new(root, "hpcc-na")
    files = [OutputFile(f"hpcc-{procs}p-r{r}.txt", hpcc_text(1, procs, rng), {"procs": procs})
             for procs in (1, 2) for r in range(1, 4)]
    corpus.truth = write_files(corpus.folder, files)
    run_cli(corpus.db, "import", "-q", str(corpus.folder), "--tag", "nodes=1")
    return corpus


def blas_at_own_n(root: Path, seed: int = SEED) -> Corpus:
    """HPL at 8 nodes, two BLAS each at its own N and NB, 3 repeats each, named as the studies name files."""
    rng = random.Random(seed)
    corpus = _new(root, "blas-own-n")
    files, start = [], datetime(2023, 1, 10, 8, 0, 0)
    for blas, (n, nb, gflops) in BLAS_RUNS.items():
        for repeat in range(BLAS_REPEATS):
            rate = gflops * (1 + rng.uniform(-0.01, 0.01))
            name = PATTERN.format(nodes=8, n=n, nb=nb, blas=blas) + f".r{repeat}"
            files.append(OutputFile(name, hpl_text(n, nb, [HplLine(4, 8, "WR11C2R4", rate)], start, rng),
                                    {"blas": blas, "n": n, "nb": nb, "gflops": rate}))
            start += timedelta(hours=1)
    corpus.truth = write_files(corpus.folder, files)
    run_cli(corpus.db, "import", "-q", str(corpus.folder), "--name-pattern", PATTERN + ".r{repeat}")
    return corpus


def tied_bests(root: Path, seed: int = SEED) -> Corpus:
    """Two HPL files of one configuration (NB=PLAIN_NB) whose results print the same Gflop/s, and a slower
    third at TIED_OTHER_NB, so the report draws Rmax against NB with the tie as one point of two runs."""
    rng = random.Random(seed)
    corpus = _new(root, "tied")
    start = datetime(2024, 2, 1, 12, 0, 0)
    runs = [(PLAIN_NB, TIED_GFLOPS), (PLAIN_NB, TIED_GFLOPS), (TIED_OTHER_NB, TIED_GFLOPS * 0.9)]
    files = [OutputFile(f"hpl-{i}.out", hpl_text(PLAIN_N, nb, [HplLine(1, 2, "WR11C2R4", rate)],
                                                 start + timedelta(hours=i), rng), {"nb": nb, "gflops": rate})
             for i, (nb, rate) in enumerate(runs)]
    corpus.truth = write_files(corpus.folder, files)
    run_cli(corpus.db, "import", "-q", str(corpus.folder), "--tag", "nodes=1")
    return corpus


def wrong_pattern_files(root: Path, seed: int = SEED) -> Corpus:
    """HPL files of which two are named to PATTERN and two are not (the store is left to the test)."""
    rng = random.Random(seed)
    corpus = _new(root, "wrong-pattern")
    start = datetime(2024, 3, 1, 12, 0, 0)
    names = [PATTERN.format(nodes=1, n=PLAIN_N, nb=PLAIN_NB, blas="openblas"),
             PATTERN.format(nodes=2, n=PLAIN_N, nb=PLAIN_NB, blas="blis"),
             f"hpl_{PLAIN_N}_{PLAIN_NB}.log", "run-17.txt"]
    files = [OutputFile(name, hpl_text(PLAIN_N, PLAIN_NB, [HplLine(1, 2, "WR11C2R4", PLAIN_GFLOPS + i)],
                                       start + timedelta(hours=i), rng), {"matches": i < 2})
             for i, name in enumerate(names)]
    corpus.truth = write_files(corpus.folder, files)
    return corpus


SWEEP_VARIANTS = tuple(f"WR{depth}{bcast}R2{pfact}{nbmin}" for depth in "01" for bcast in "012345" for pfact in "LCR"
                       for nbmin in "24")  # 72 results of one HPL file: more than the table's 50 rows


def export_sweep(root: Path, seed: int = SEED) -> Corpus:
    """One HPL file that sweeps every variant of SWEEP_VARIANTS (72 results, each a stored run), imported with
    --tag nodes=1: more runs than the `results` table shows by default, for the export's completeness."""
    rng = random.Random(seed)
    corpus = _new(root, "export-sweep")
    lines = [HplLine(1, 2, tv, PLAIN_GFLOPS * (1 + rng.uniform(-0.05, 0.05))) for tv in SWEEP_VARIANTS]
    corpus.truth = write_files(corpus.folder, [OutputFile("hpl-variants.out", hpl_text(
        PLAIN_N, PLAIN_NB, lines, datetime(2024, 4, 1, 9, 0, 0), rng), {"results": len(lines)})])
    run_cli(corpus.db, "import", "-q", str(corpus.folder), "--tag", "nodes=1")
    return corpus
