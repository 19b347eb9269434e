"""Synthetic stores shaped like four real studies, in the real output formats, stored the way their users
stored them (issue 19): the report is tested on the data users bring, not on data shaped for it.

- Pi: a Raspberry Pi 4 cluster, ~100 HPL 2.3 files named `HPL.out.<nodes>_node_<N>_<NB>_<P>_<Q>[_<P>_<Q>].<blas>`,
  several grids and 8 HPL variants per file, BLAS spelled four ways, a few `.blis.mtu_9000` (an optimisation),
  two truncated files and one FAILED residual; imported with the real CLI and a name pattern.
- STFC: IMB PingPong and HPL 2.2 inside IBM LSF job reports (shm on 1 host, TCP and InfiniBand on 2; HPL on
  1, 2 and 4 hosts), plus the real cloud and LSF files of ../shared when it is there (read from there, never
  copied); imported with the real CLI.
- JSC: STREAM against OpenMP threads per binding strategy (OMP_PLACES / OMP_PROC_BIND), 3 repeats, stored as
  live runs are (begin_run, finish_run) with the real STREAM parser's metrics of a real-format output.
- HPCC: HPCC 1.5 outputs on 1 and 2 nodes x 1 and 2 processes per node, 3 repeats, imported with the CLI.

Every file is derived from a real output of tests/fixtures/outputs/this-machine (its header, layout and
wording) with the numbers and parameters rewritten. The values are SYNTHETIC: a small model per study (named
constants below) times seeded noise, so a test computes what the report must show from the store itself, and
the same seed gives the same bytes. The LSF job reports are written in IBM's documented format (the job
header, `# LSBATCH: User input`, the resource usage summary, `The output (if any) follows:`) with hosts,
users and paths of our own; nothing of the unlicensed ../shared files is copied.
"""

from __future__ import annotations

import math
import os
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from tests.conftest import HAS_SHARED, LOCAL_FIXTURES, SHARED_FIXTURES, cli

from clusterbench.bench.hpl.planner import hpl_flops

THIS_MACHINE = LOCAL_FIXTURES / "outputs" / "this-machine"
SEED = 19  # the issue number: every study is the same bytes on every machine


@dataclass
class Study:
    """A store holding one study, and what the generator wrote into it (the truth a test checks against)."""

    name: str
    db: Path
    # realpath of an imported file, or a live run's id -> what the generator put there (nodes, blas, ...)
    truth: dict[str, dict] = field(default_factory=dict)
    rpeak_node_gflops: float | None = None  # what the study's report needs given (imports carry no system)

    def truth_of(self, run: dict) -> dict:
        source = (run.get("facts") or {}).get("source_file")
        return self.truth.get(os.path.realpath(source) if source else run["id"], {})


def noisy(rng: random.Random, sigma: float) -> float:
    """A multiplicative noise factor around 1, bounded to +-4 sigma (no absurd sample)."""
    return 1.0 + max(-4 * sigma, min(4 * sigma, rng.gauss(0.0, sigma)))


def run_cli(db: Path, *args: str) -> None:
    """The real command line against this study's store; a failure fails the caller with the output."""
    out = cli(*args, env={"CLUSTERBENCH_DB": str(db)})
    assert out.returncode == 0, f"clusterbench {' '.join(args[:3])}...: exit {out.returncode}\n{out.stdout}{out.stderr}"


# ---------------------------------------------------------------- HPL output (HPL 2.3 layout, 2.2 banner)

HPL_FIXTURE = THIS_MACHINE / "hpl-nbsweep-N13440-1x2.log"
HPL_BANNERS = {"2.3": "HPLinpack 2.3  --  High-Performance Linpack benchmark  --   December 2, 2018",
               "2.2": "HPLinpack 2.2  --  High-Performance Linpack benchmark  --   February 24, 2016"}
# HPL_pdtest.c: the digits of the Gflops and the residual format of each version (2.3 prints more)
HPL_GFLOPS_DIGITS = {"2.3": 4, "2.2": 3, "2.0": 3}
HPL_RESIDUAL_FORMAT = {"2.3": "16.8e", "2.2": "16.7f"}
RESIDUAL_PREFIX = "||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)= "
RULE, DASHES = "=" * 80, "-" * 80
FACTORISATIONS = {"L": "Left", "C": "Crout", "R": "Right"}
BROADCASTS = {"0": "1ring", "1": "1ringM", "2": "2ring", "3": "2ringM", "4": "Blong", "5": "BlongM"}


@dataclass
class HplLine:
    """One T/V result of a file: the grid, the variant and the rate HPL is to print."""

    p: int
    q: int
    tv: str  # W R depth bcast rfact ndiv pfact nbmin, e.g. WR00L2R4
    gflops: float
    failed: bool = False  # the residual check FAILED


def _hpl_template() -> tuple[str, str]:
    """The fixture's text before its parameter echo, and between the echo and the first result."""
    text = HPL_FIXTURE.read_text()
    echo = text.index("The following parameter values will be used:\n\n") + len(
        "The following parameter values will be used:\n\n")
    after_align = text.index("\n", text.index("\nALIGN  :") + 1)
    first_result = text.index(f"{RULE}\nT/V")
    return text[:echo], text[after_align:first_result]


def hpl_result_line(tv: str, n: int, nb: int, p: int, q: int, seconds: float, gflops: float,
                    version: str) -> str:
    return f"{tv}{n:12d} {nb:5d} {p:5d} {q:5d} {seconds:18.2f} {gflops:22.{HPL_GFLOPS_DIGITS[version]}e}"


def _echo_values(name: str, values: list) -> str:
    return f"{name:<7}:" + "".join(f"{v:>8} " for v in values)


def hpl_text(n: int, nb: int, lines: list[HplLine], start: datetime, rng: random.Random, version: str = "2.3",
             truncate_after: int | None = None) -> str:
    """An HPL output of these results, in HPL's order, as HPL `version` prints it.

    The time is the one HPL would print for the rate (two decimals) and the Gflops follow from it, as HPL
    computes them; a FAILED residual is printed with HPL's norm lines. `truncate_after=k` ends the file
    after the k-th result's T/V and timing lines (a job killed before its residual check).
    """
    head, middle = _hpl_template()
    head = head.replace(HPL_BANNERS["2.3"], HPL_BANNERS[version])
    grids = list(dict.fromkeys((line.p, line.q) for line in lines))
    tvs = list(dict.fromkeys(line.tv for line in lines))

    def distinct(position: int) -> list[str]:
        return list(dict.fromkeys(tv[position] for tv in tvs))

    echo = [_echo_values("N", [n]), _echo_values("NB", [nb]), "PMAP   : Row-major process mapping",
            _echo_values("P", [p for p, _ in grids]), _echo_values("Q", [q for _, q in grids]),
            _echo_values("PFACT", [FACTORISATIONS[c] for c in distinct(6)]), _echo_values("NBMIN", distinct(7)),
            _echo_values("NDIV", distinct(5)), _echo_values("RFACT", [FACTORISATIONS[c] for c in distinct(4)]),
            _echo_values("BCAST", [BROADCASTS[c] for c in distinct(3)]), _echo_values("DEPTH", distinct(2)),
            "SWAP   : Mix (threshold = 64)", "L1     : transposed form", "U      : transposed form",
            "EQUIL  : yes", "ALIGN  : 8 double precision words"]
    out = [head + "\n".join(echo) + middle]
    clock = start
    for index, line in enumerate(lines):
        seconds = max(0.01, round(hpl_flops(n) / (line.gflops * 1e9), 2))
        gflops = hpl_flops(n) / seconds / 1e9
        ended = clock + timedelta(seconds=seconds)
        out.append(f"{RULE}\nT/V                N    NB     P     Q               Time                 Gflops\n"
                   f"{DASHES}\n"
                   + hpl_result_line(line.tv, n, nb, line.p, line.q, seconds, gflops, version)
                   + f"\nHPL_pdgesv() start time {clock.ctime()}\n\nHPL_pdgesv() end time   {ended.ctime()}\n\n")
        if truncate_after is not None and index + 1 >= truncate_after:
            return "".join(out)
        residual = 27.31 if line.failed else rng.uniform(1.5e-3, 4.5e-3)
        out.append(f"{DASHES}\n{RESIDUAL_PREFIX}{residual:{HPL_RESIDUAL_FORMAT[version]}} ...... "
                   f"{'FAILED' if line.failed else 'PASSED'}\n")
        if line.failed:  # HPL_pdtest.c prints the norms behind a failed check
            for name, value in (("||Ax-b||_oo  . . . . . . . . . . . . . . . . . =", 0.000002),
                                ("||A||_oo . . . . . . . . . . . . . . . . . . . =", 0.25 * n),
                                ("||A||_1  . . . . . . . . . . . . . . . . . . . =", 0.25 * n),
                                ("||x||_oo . . . . . . . . . . . . . . . . . . . =", 7.123456),
                                ("||x||_1  . . . . . . . . . . . . . . . . . . . =", 2.5 * n),
                                ("||b||_oo . . . . . . . . . . . . . . . . . . . =", 0.499987)):
                out.append(f"{name} {value:18.6f}\n")
        clock = ended + timedelta(seconds=rng.randint(2, 9))  # generating the next matrix
    failed = sum(line.failed for line in lines)
    out.append(f"{RULE}\n\nFinished {len(lines):6d} tests with the following results:\n"
               f"{'':8} {len(lines) - failed:6d} tests completed and passed residual checks,\n"
               f"{'':8} {failed:6d} tests completed and failed residual checks,\n"
               f"{'':8} {0:6d} tests skipped because of illegal input values.\n"
               f"{DASHES}\n\nEnd of Tests.\n{RULE}\n")
    return "".join(out)


# ---------------------------------------------------------------- Pi: Raspberry Pi 4 cluster, HPL 2.3

# Rpeak of one Raspberry Pi 4 (BCM2711): 4 Cortex-A72 cores x 1.5 GHz x 8 double-precision flop per cycle
# (two 128-bit NEON pipes, each an FMA on 2 doubles = 4 flop) = 48 Gflop/s, given with --rpeak-node.
PI_RPEAK_NODE_GFLOPS = 48.0
PI_PATTERN = "HPL.out.{nodes}_node_{n}_{nb}_{grids}.{blas}"
PI_NBS = (32, 64, 96, 128, 160, 192, 224, 256)
# HPL's loop order (HPL_pddriver.c): PFACT, then NBMIN, NDIV, RFACT (innermost here); depth 0, 1ring
PI_VARIANTS = tuple(f"WR00{rfact}2{pfact}{nbmin}" for pfact in "LR" for nbmin in "24" for rfact in "LR")
# The spelling in a file name -> (the canonical BLAS the store must hold, the optimisation it names)
PI_SPELLINGS = {"blis_serial": ("blis-serial", ""), "blis-serial": ("blis-serial", ""),
                "openblas_serial": ("openblas-serial", ""), "openblas-serial": ("openblas-serial", ""),
                "openblas-openmp": ("openblas-openmp", ""), "blis": ("blis", ""),
                "blis.mtu_9000": ("blis", "mtu_9000")}
# The model: Gflop/s of one node at its best NB, the NB each library likes, scaling over the Gigabit switch
PI_NODE_GFLOPS = {"blis-serial": 10.6, "openblas-serial": 11.4, "openblas-openmp": 9.8, "blis": 10.6}
PI_BEST_NB = {"blis": 192, "openblas": 128}
PI_SCALING = {1: 1.0, 2: 0.86, 4: 0.77}  # parallel efficiency on 1, 2, 4 nodes
PI_MTU_GAIN = {2: 0.04, 4: 0.07}  # jumbo frames: fewer packets per panel broadcast
PI_ONE_CORE = 1.08 / 4  # one core alone has the node's memory bandwidth to itself
PI_NOISE = 0.015


@dataclass(frozen=True)
class PiSetup:
    label: str
    nodes: int
    grids: tuple[tuple[int, int], ...]
    n: int
    spellings: tuple[str, ...]  # taken in turn over the NBs: one library, several spellings
    nbs: tuple[int, ...] = PI_NBS


PI_SETUPS = (
    *(PiSetup("1 core", 1, ((1, 1),), 10000, s) for s in (("blis_serial", "blis-serial"),
                                                          ("openblas_serial", "openblas-serial"))),
    *(PiSetup("1 node", 1, ((1, 4), (2, 2)), 20000, s) for s in (("blis-serial", "blis_serial"),
                                                                 ("openblas_serial",))),
    *(PiSetup("2 nodes", 2, ((1, 8), (2, 4)), 28000, s) for s in (("blis_serial", "blis-serial"),
                                                                  ("openblas-serial", "openblas_serial"))),
    *(PiSetup("4 nodes", 4, ((1, 16), (2, 8), (4, 4)), 40000, s) for s in (("blis-serial", "blis_serial"),
                                                                           ("openblas_serial",))),
    PiSetup("1 node OpenMP", 1, ((1, 1),), 20000, ("openblas-openmp",)),
    PiSetup("2 nodes OpenMP", 2, ((1, 2),), 28000, ("openblas-openmp",)),
    PiSetup("4 nodes OpenMP", 4, ((1, 4), (2, 2)), 40000, ("openblas-openmp",)),
    *(PiSetup(f"{k} nodes, {s}", k, (grid,), n, (s,), (128, 192))
      for k, grid, n in ((2, (2, 4), 28000), (4, (4, 4), 40000)) for s in ("blis", "blis.mtu_9000")),
)
# (setup label, library, NB) -> the result a file ends after (a killed job); its last line would be the best
PI_TRUNCATED = {("4 nodes", "blis", 160): 13, ("2 nodes", "openblas", 224): 9}
# (setup label, library, NB) -> the result whose residual check FAILED; it would be the best if counted
PI_FAILED = {("1 node", "openblas", 192): 5}
PI_SUSPECT_GAIN = 1.25  # how much faster the unverified results are: enough to win if they counted


@dataclass
class OutputFile:
    name: str
    text: str
    truth: dict  # what the generator wrote: the facts the store and the report must hold again


def pi_rate(setup_nodes: int, ranks: int, blas: str, tuning: str, nb: int, line: tuple[int, int, str],
            rng: random.Random) -> float:
    """The model's Gflop/s for one result line, with its noise."""
    p, q, tv = line
    library = blas.split("-")[0]
    rate = PI_NODE_GFLOPS[blas] * setup_nodes * PI_SCALING[setup_nodes]
    if ranks == setup_nodes and blas.endswith("serial"):  # one rank of a serial BLAS per node: 1 core of 4
        rate *= PI_ONE_CORE
    rate *= 1 - 0.05 * math.log2(nb / PI_BEST_NB[library]) ** 2
    rate *= 1 - 0.04 * abs(math.log2(q / p))  # long thin grids broadcast over more hops
    rate *= 1 + 0.01 * (tv[4] == "R") + 0.015 * (tv[6] == "R") + 0.005 * (tv[7] == "4")
    rate *= 1 + (PI_MTU_GAIN.get(setup_nodes, 0.0) if tuning else 0.0)
    return rate * noisy(rng, PI_NOISE)


def pi_files(seed: int = SEED) -> list[OutputFile]:
    """The Pi study: 96 HPL 2.3 files (1,344 result lines, 1,326 left after the two truncations), named as
    the user named them."""
    rng = random.Random(seed)
    files = []
    start = datetime(2019, 7, 1, 9, 0, 0)
    for setup in PI_SETUPS:
        for i, nb in enumerate(setup.nbs):
            spelled = setup.spellings[i % len(setup.spellings)]
            blas, tuning = PI_SPELLINGS[spelled]
            library = blas.split("-")[0]
            lines = []
            for p, q in setup.grids:
                for tv in PI_VARIANTS:
                    rate = pi_rate(setup.nodes, p * q, blas, tuning, nb, (p, q, tv), rng)
                    lines.append(HplLine(p, q, tv, rate))
            key = (setup.label, library, nb)
            cut = PI_TRUNCATED.get(key)
            if cut is not None:
                lines[cut - 1].gflops *= PI_SUSPECT_GAIN
            if key in PI_FAILED:
                lines[PI_FAILED[key]].failed = True
                lines[PI_FAILED[key]].gflops *= PI_SUSPECT_GAIN
            grids = "_".join(f"{p}_{q}" for p, q in setup.grids)
            name = f"HPL.out.{setup.nodes}_node_{setup.n}_{nb}_{grids}.{spelled}"
            text = hpl_text(setup.n, nb, lines, start, rng, truncate_after=cut)
            start += timedelta(hours=3)
            files.append(OutputFile(name, text, {
                "setup": setup.label, "nodes": setup.nodes, "blas": blas, "tuning": tuning, "as_written": spelled,
                "grids": [f"{p}x{q}" for p, q in setup.grids], "n": setup.n, "nb": nb,
                "truncated_after": cut, "failed_line": PI_FAILED.get(key)}))
    return files


def pi_bulk_files(count: int, seed: int = SEED) -> Iterator[OutputFile]:
    """`count` Pi-shaped files of one grid and 8 variants each (~7 KB): a study of the size users have."""
    rng = random.Random(seed)
    grids = {1: ((1, 4), (2, 2), (1, 1)), 2: ((1, 8), (2, 4)), 4: ((1, 16), (2, 8), (4, 4)), 8: ((2, 16), (4, 8))}
    sizes = {1: (20000, 20480), 2: (28000, 28800), 4: (40000, 40960), 8: (56000, 57344)}
    spellings = list(PI_SPELLINGS)
    made = 0
    start = datetime(2019, 7, 1, 9, 0, 0)
    for nb in range(32, 257, 8):
        for nodes, shapes in grids.items():
            for n in sizes[nodes]:
                for p, q in shapes:
                    for spelled in spellings:
                        if made == count:
                            return
                        blas, tuning = PI_SPELLINGS[spelled]
                        setup_nodes = nodes if nodes in PI_SCALING else 4  # 8 nodes: the 4-node efficiency
                        lines = [HplLine(p, q, tv, pi_rate(setup_nodes, p * q, blas, tuning, nb, (p, q, tv), rng)
                                         * nodes / setup_nodes) for tv in PI_VARIANTS]
                        yield OutputFile(f"HPL.out.{nodes}_node_{n}_{nb}_{p}_{q}.{spelled}",
                                         hpl_text(n, nb, lines, start, rng), {"nodes": nodes, "blas": blas})
                        start += timedelta(hours=1)
                        made += 1


def write_files(folder: Path, files: list[OutputFile] | Iterator[OutputFile]) -> dict[str, dict]:
    """The files into `folder`; realpath -> truth."""
    folder.mkdir(parents=True, exist_ok=True)
    truth = {}
    for f in files:
        path = folder / f.name
        path.write_text(f.text)
        truth[os.path.realpath(path)] = f.truth
    return truth


def pi_study(root: Path) -> Study:
    """The Pi files written and imported as the user did: the name pattern, a system tag and the node Rpeak."""
    folder = root / "pi-hpl"
    truth = write_files(folder, pi_files())
    study = Study("pi", root / "pi.db", truth, PI_RPEAK_NODE_GFLOPS)
    run_cli(study.db, "import", "-q", str(folder), "--name-pattern", PI_PATTERN, "--tag", "system=pi-cluster",
            "--rpeak-node", f"{PI_RPEAK_NODE_GFLOPS:g}")
    return study


# ---------------------------------------------------------------- IBM LSF job reports (IBM's documented format)

@dataclass
class LsfJob:
    job_id: int
    name: str
    hosts: list[tuple[str, int]]  # (host, slots) in the order LSF lists them
    bsub: list[str]  # the #BSUB options of the job script
    commands: list[str]  # the script's commands (mpirun ...)
    output: str  # what the job printed
    started: datetime
    run_s: int
    exit_code: int = 0
    cluster: str = "crafted"
    queue: str = "par-multi"
    user: str = "bench01"


def lsf_report(job: LsfJob) -> str:
    """The mail LSF sends when a job ends (`bsub -o` file), in the layout IBM documents for Spectrum LSF."""
    first, *others = job.hosts
    home, work = f"/home/{job.user}", f"/home/{job.user}/{job.name.lower()}"
    state = "Done" if job.exit_code == 0 else "Exited"
    ending = "Successfully completed." if job.exit_code == 0 else f"Exited with exit code {job.exit_code}."
    slots = sum(n for _, n in job.hosts)
    lines = [f"Sender: LSF System <lsfadmin@{first[0]}>",
             f"Subject: Job {job.job_id}: <{job.name}> in cluster <{job.cluster}> {state}", "",
             f"Job <{job.name}> was submitted from host <login1.{job.cluster}.example> by user <{job.user}> "
             f"in cluster <{job.cluster}>.",
             f"Job was executed on host(s) <{first[1]}*{first[0]}>, in queue <{job.queue}>, as user <{job.user}> "
             f"in cluster <{job.cluster}>.",
             *(f"{'':28}<{n}*{host}>" for host, n in others),
             f"<{home}> was used as the home directory.", f"<{work}> was used as the working directory.",
             f"Started at {job.started.ctime()}",
             f"Results reported on {(job.started + timedelta(seconds=job.run_s + 3)).ctime()}", "",
             "Your job looked like:", "", "-" * 60, "# LSBATCH: User input",
             *(f"#BSUB {option}" for option in job.bsub), *job.commands, "", "-" * 60, "", ending, "",
             "Resource usage summary:", "",
             f"    CPU time :{job.run_s * slots * 0.97:>42.2f} sec.",
             f"    Max Memory :{1850.0 * len(job.hosts):>40.2f} MB",
             f"    Average Memory :{1610.0 * len(job.hosts):>36.2f} MB",
             f"    Total Requested Memory :{'-':>28}", f"    Delta Memory :{'-':>38}",
             f"    Max Swap :{2048:>39} MB", f"    Max Processes :{slots + 4:>37}",
             f"    Max Threads :{slots + 6:>39}", f"    Run time :{job.run_s:>39} sec.",
             f"    Turnaround time :{job.run_s + 41:>32} sec.", "",
             "The output (if any) follows:", "", job.output.rstrip("\n"), "", "", "PS:", "",
             f"Read file <{work}/outputs/{job.job_id}.err> for stderr output of this job.", ""]
    return "\n".join(lines)


def platform_mpi_protocols(hosts: list[tuple[str, int]], inter: str) -> str:
    """What IBM Platform MPI's `mpirun -prot` prints before the program's output: hosts, ranks, protocols."""
    out, rank = [], 0
    for i, (_, slots) in enumerate(hosts):
        ranks = f"{rank}" if slots == 1 else f"{rank} - {rank + slots - 1}"
        out.append(f"Host {i} -- ip 10.30.0.{11 + i} -- ranks {ranks}")
        rank += slots
    out += ["", " host | " + "    ".join(str(i) for i in range(len(hosts))), "======|" + "=" * 5 * len(hosts) + "=="]
    for i in range(len(hosts)):
        out.append(f"{i:5d} : " + "  ".join("SHM" if i == j else inter for j in range(len(hosts))))
    out += ["", " Prot -  All Intra-node communication is: SHM"]
    if len(hosts) > 1:
        out.append(f" Prot -  All Inter-node communication is: {inter}")
    return "\n".join(out) + "\n\n"


# ---------------------------------------------------------------- IMB PingPong (layout of this machine's IMB)

IMB_FIXTURE = THIS_MACHINE / "imb-pingpong-bindcore.txt"
MIB = 1.048576  # IMB's Mbytes/sec are MiB/s: bytes per microsecond / 1.048576


def imb_text(binary: str, rows: list[tuple[int, float]], date: datetime) -> str:
    """An IMB 2017 PingPong output with these (bytes, one-way usec) rows, `-msglog 0:24`."""
    text = IMB_FIXTURE.read_text()
    text = "\n".join(line for line in text.splitlines() if not line.startswith("[vm:")) + "\n"  # Open MPI's
    header = text[:text.index("       #bytes #repetitions")]
    header = (header.replace("Intel(R) MPI Benchmarks 2018, MPI-1 part",
                             "Intel (R) MPI Benchmarks 2017, MPI-1 part    ")
              .replace("Sun Nov 22 02:24:34 2026", date.ctime())
              .replace("6.18.44-fc-v769", "3.10.0-957.27.2.el7.x86_64")
              .replace("#1 SMP PREEMPT_DYNAMIC @0", "#1 SMP Mon Jul 29 17:46:05 UTC 2019")
              .replace("./IMB-MPI1 -msglog 0:22 -iter 1000 PingPong",
                       f"{binary} -iter 1000 -time 200 -msglog 0:24 -iter_policy off PingPong")
              .replace("Maximum message length in bytes:   4194304", "Maximum message length in bytes:   16777216"))
    table = ["       #bytes #repetitions      t[usec]   Mbytes/sec"]
    for size, usec in rows:
        table.append(f"{size:13d}{1000:13d}{usec:13.2f}{size / usec / MIB:13.2f}")
    return header + "\n".join(table) + "\n\n\n# All processes entering MPI_Finalize\n\n"


# (interconnect, hosts, mpirun flag, the -prot inter-node protocol) -> one-way latency us, bandwidth MiB/s
STFC_LINKS = {("shm", 1): ("", "", 0.42, 5200.0), ("tcp", 2): ("-TCP", "TCP", 61.0, 1050.0),
              ("infiniband", 2): ("-IBV", "IBV", 1.45, 6100.0)}
STFC_REPEATS = 3
STFC_HPL_HOSTS = (1, 2, 4)
STFC_HPL_PER_NODE = 420.0  # Gflop/s of one 16-core host at N for 80% of its memory
STFC_HPL_SCALING = {1: 1.0, 2: 0.95, 4: 0.9}
STFC_HPL_N = {1: 80640, 2: 114048, 4: 161280}
STFC_HPL_GRIDS = {1: (4, 4), 2: (4, 8), 4: (8, 8)}
STFC_SYSTEM = "lsf-synthetic"
# The real files of ../shared (read from there, never copied): file -> tags and the truth about them
STFC_REAL = {"imb-cloud/20170322_154501.out": {"system": "scd-cloud", "hosts": 1, "interconnect": None},
             "imb-cloud/20170323_020501.out": {"system": "scd-cloud", "hosts": 2, "interconnect": None},
             "imb-cloud/20170323_040501.out": {"system": "scd-cloud", "hosts": 2, "interconnect": None},
             "lsf-scd/480257.out": {"system": "scarf", "hosts": 2, "interconnect": "tcp"},
             "lsf-scd/4099231.out": {"system": "jasmin", "hosts": 2, "interconnect": None}}


def pingpong_rows(latency: float, bandwidth: float, rng: random.Random) -> list[tuple[int, float]]:
    """One-way times for 0 B .. 16 MiB: latency + size / bandwidth, a rendezvous step at 16 KiB, noise."""
    rows, repeat = [], noisy(rng, 0.015)
    for k in range(26):
        size = 0 if k == 0 else 2 ** (k - 1)
        usec = latency + size / (bandwidth * MIB) + (0.6 * latency if size >= 16384 else 0.0)
        rows.append((size, max(0.01, usec * repeat * noisy(rng, 0.02))))
    return rows


def stfc_files(seed: int = SEED) -> list[OutputFile]:
    """IMB PingPong over shm, TCP and InfiniBand, and HPL 2.2 on 1, 2 and 4 hosts, each an LSF job report."""
    rng = random.Random(seed)
    files, job_id, start = [], 7310001, datetime(2017, 3, 20, 14, 5, 1)
    for (interconnect, hosts), (flag, inter, latency, bandwidth) in STFC_LINKS.items():
        for repeat in range(STFC_REPEATS):
            names = [(f"cn{120 + 2 * i + repeat}.crafted.example", 2 // hosts) for i in range(hosts)]
            binary = "/home/bench01/imb/src/IMB-MPI1"
            output = imb_text(binary, pingpong_rows(latency, bandwidth, rng), start + timedelta(seconds=9))
            job = LsfJob(job_id, "PingPong", names, ["-x", "-n 2", f'-R "span[ptile={2 // hosts}]"', "-J PingPong",
                                                      "-o /home/bench01/pingpong/outputs/%J.out", "-W 0:45",
                                                      '-m "ib-hosts"'],
                         [f"mpirun -lsf -prot {flag + ' ' if flag else ''}{binary} -iter 1000 -time 200 "
                          "-msglog 0:24 -iter_policy off PingPong"],
                         platform_mpi_protocols(names, inter or "SHM") + output, start, 1200 + 7 * repeat)
            files.append(OutputFile(f"{job_id}.out", lsf_report(job), {
                "kind": "imb", "hosts": hosts, "interconnect": interconnect, "system": STFC_SYSTEM}))
            job_id, start = job_id + 1, start + timedelta(hours=2)
    for hosts in STFC_HPL_HOSTS:
        for repeat in range(STFC_REPEATS + (1 if hosts == 4 else 0)):
            failed = repeat == STFC_REPEATS  # one more job on 4 hosts: killed before its residual check
            p, q = STFC_HPL_GRIDS[hosts]
            n = STFC_HPL_N[hosts]
            rate = STFC_HPL_PER_NODE * hosts * STFC_HPL_SCALING[hosts] * noisy(rng, 0.012) * (1.3 if failed else 1)
            names = [(f"cn{140 + 4 * repeat + i}.crafted.example", 16) for i in range(hosts)]
            hpl = hpl_text(n, 192, [HplLine(p, q, "WR11C2R4", rate)], start + timedelta(seconds=8), rng,
                           version="2.2", truncate_after=1 if failed else None)
            if failed:
                hpl += "MPI Application rank 37 killed before MPI_Finalize() with signal 9\n"
            job = LsfJob(job_id, "HPL", names, ["-x", f"-n {16 * hosts}", '-R "span[ptile=16]"', "-J HPL",
                                                "-o /home/bench01/hpl/outputs/%J.out", "-W 2:00", '-m "ib-hosts"'],
                         [". /etc/profile.modules", "module load intel/17.0", "module load intel/mkl/17.0",
                          "mpirun -lsf -prot /home/bench01/hpl/hpl-2.2/bin/Linux_Intel64/xhpl"],
                         platform_mpi_protocols(names, "IBV") + hpl, start,
                         int(hpl_flops(n) / rate / 1e9) + 20, exit_code=1 if failed else 0)
            files.append(OutputFile(f"{job_id}.out", lsf_report(job), {
                "kind": "hpl", "hosts": hosts, "interconnect": "infiniband", "system": STFC_SYSTEM, "failed": failed}))
            job_id, start = job_id + 1, start + timedelta(hours=3)
    return files


def stfc_study(root: Path) -> Study:
    """The crafted LSF reports, plus the real STFC files of ../shared when it is beside the checkout."""
    folder = root / "stfc-lsf"
    truth = write_files(folder, stfc_files())
    study = Study("stfc", root / "stfc.db", truth)
    run_cli(study.db, "import", "-q", str(folder), "--tag", "study=stfc", "--tag", f"system={STFC_SYSTEM}")
    if HAS_SHARED:
        for relpath, facts in STFC_REAL.items():
            path = SHARED_FIXTURES / "outputs" / relpath
            study.truth[os.path.realpath(path)] = facts | {"kind": "imb" if "imb" in relpath or "480257" in relpath
                                                            else "hpl", "real": True}
            run_cli(study.db, "import", "-q", str(path), "--tag", "study=stfc", "--tag", f"system={facts['system']}")
    return study


# ---------------------------------------------------------------- JSC: STREAM against threads per binding

STREAM_FIXTURE = THIS_MACHINE / "stream-omp2.txt"
JSC_THREADS = (1, 2, 4, 8, 16, 24, 32, 48)
JSC_STRATEGIES = {"close": {"places": "cores", "proc_bind": "close"},
                  "spread": {"places": "cores", "proc_bind": "spread"},
                  "none": {"proc_bind": "false"}}
JSC_SOCKET_MBS, JSC_RAMP = 105_000.0, 7.0  # a socket's saturated Triad (MB/s), threads to 63% of it
JSC_CORES_PER_SOCKET = 24
JSC_ARRAY = 80_000_000
JSC_REPEATS = 3
KERNEL_BYTES = {"Copy": 16, "Scale": 16, "Add": 24, "Triad": 24}  # bytes per element STREAM counts
KERNEL_SHARE = {"Copy": 0.93, "Scale": 0.91, "Add": 0.99, "Triad": 1.0}


def socket_mbs(threads: float) -> float:
    return JSC_SOCKET_MBS * (1 - math.exp(-threads / JSC_RAMP)) if threads > 0 else 0.0


def jsc_triad(strategy: str, threads: int) -> float:
    """close fills socket 0 first; spread halves the threads over both sockets; unbound threads float."""
    if strategy == "close":
        first = min(threads, JSC_CORES_PER_SOCKET)
        return socket_mbs(first) + socket_mbs(threads - first)
    both = 2 * socket_mbs(threads / 2)
    return both if strategy == "spread" else 0.85 * both


def stream_text(threads: int, triad_mbs: float, rng: random.Random) -> str:
    """A STREAM 5.10 output of this machine's layout with these threads and rates."""
    text = STREAM_FIXTURE.read_text()
    text = re.sub(r"Number of Threads (requested|counted) = \d+", lambda m: f"Number of Threads {m.group(1)} = "
                  f"{threads}", text)
    text = text.replace("Array size = 80000000", f"Array size = {JSC_ARRAY}")
    for kernel, share in KERNEL_SHARE.items():
        rate = triad_mbs * share * noisy(rng, 0.004)
        best = KERNEL_BYTES[kernel] * JSC_ARRAY / (rate * 1e6)
        row = f"{kernel + ':':<11}{rate:12.1f}  {best * 1.04:11.6f}  {best:11.6f}  {best * 1.11:11.6f}"
        text = re.sub(rf"^{kernel}:.*$", row, text, flags=re.M)
    return text


def jsc_study(root: Path, seed: int = SEED) -> Study:
    """72 live-like STREAM runs: begin_run, the real parser on the output, finish_run with the output file."""
    from clusterbench.bench.stream.output import stream_outcome
    from clusterbench.store.db import Store
    from clusterbench.store.records import RunRecord

    rng = random.Random(seed)
    study = Study("jsc", root / "jsc.db")
    outputs = root / "jsc-runs"
    outputs.mkdir(parents=True, exist_ok=True)
    with Store(study.db) as store:
        for strategy, params in JSC_STRATEGIES.items():
            noise = 0.06 if strategy == "none" else 0.02  # unbound threads migrate: wider spread
            for threads in JSC_THREADS:
                for repeat in range(JSC_REPEATS):
                    run_id = f"jsc-stream-{strategy}-t{threads:02d}-r{repeat}"
                    env = {"OMP_NUM_THREADS": str(threads), "OMP_PROC_BIND": params["proc_bind"]}
                    if "places" in params:
                        env["OMP_PLACES"] = params["places"]
                    store.begin_run(RunRecord(
                        run_id, "stream", {"n": JSC_ARRAY, "threads": threads, "ranks": 1} | params,
                        campaign="jsc-stream-binding", repeat=repeat, command=f"stream {JSC_ARRAY} 10",
                        workdir=str(outputs), env=env, tags={"study": "jsc"}))
                    text = stream_text(threads, jsc_triad(strategy, threads) * noisy(rng, noise), rng)
                    stdout = outputs / f"{run_id}.stdout"
                    stdout.write_text(text)
                    outcome = stream_outcome(text)
                    store.finish_run(run_id, "ok" if outcome.valid else "invalid", outcome.valid,
                                     "; ".join(outcome.reasons) or None, 0, 4.0 + threads * 0.01, outcome.metrics,
                                     [stdout], outcome.facts)
                    study.truth[run_id] = {"strategy": strategy, "threads": threads, "repeat": repeat}
    return study


# ---------------------------------------------------------------- HPCC: 1 and 2 nodes x 1 and 2 processes per node

HPCC_FIXTURE = THIS_MACHINE / "hpccoutf-2rank.txt"
HPCC_NODES, HPCC_PPN, HPCC_REPEATS = (1, 2), (1, 2), 3
HPCC_N = {1: 13440, 2: 19040}  # N x N doubles in ~80% of the nodes' memory, a multiple of NB=224
HPCC_GRIDS = {1: (1, 1), 2: (1, 2), 4: (2, 2)}
# Per process with one process per node, and what a second process on the node leaves of it ("SMP factor")
HPCC_HPL_PER_PROCESS = 48.0  # Gflop/s
HPCC_SMP = {"hpl": {1: 0.90, 2: 0.88}, "dgemm": {1: 0.97, 2: 0.97}, "stream": {1: 0.62, 2: 0.55},
            "random": {1: 0.80, 2: 0.80}, "fft": {1: 0.90, 2: 0.90}}
HPCC_NETWORK_HPL = {1: 1.0, 2: 0.93}  # HPL over the network on 2 nodes
# latency us and bandwidth GB/s of a pair inside a node (shared memory) and across nodes (InfiniBand)
HPCC_INTRA, HPCC_INTER = (0.16, 13.0), (1.6, 6.1)
HPCC_PAIR_KEYS = ("MaxPingPongLatency_usec", "RandomlyOrderedRingLatency_usec", "MinPingPongBandwidth_GBytes",
                  "NaturallyOrderedRingBandwidth_GBytes", "RandomlyOrderedRingBandwidth_GBytes",
                  "MinPingPongLatency_usec", "AvgPingPongLatency_usec", "MaxPingPongBandwidth_GBytes",
                  "AvgPingPongBandwidth_GBytes", "NaturallyOrderedRingLatency_usec")


def hpcc_values(nodes: int, ppn: int, rng: random.Random) -> dict[str, float]:
    """The summary values the model gives one run (with noise); the keys HPCC prints them under."""
    procs = nodes * ppn

    def smp(kind: str) -> float:
        return HPCC_SMP[kind][nodes] if ppn > 1 else 1.0

    def jitter(value: float) -> float:
        return value * noisy(rng, 0.015)

    hpl_tflops = jitter(procs * HPCC_HPL_PER_PROCESS * smp("hpl") * HPCC_NETWORK_HPL[nodes]) / 1000
    triad = jitter(28.0 * smp("stream"))
    out = {"HPL_Tflops": hpl_tflops, "StarDGEMM_Gflops": jitter(47.5 * smp("dgemm")),
           "SingleDGEMM_Gflops": jitter(47.8), "PTRANS_GBs": jitter(6.0 if nodes == 1 else 1.1 * ppn),
           "MPIRandomAccess_GUPs": jitter(0.012 * procs ** 0.6 * (0.3 if nodes > 1 else 1.0)),
           "StarRandomAccess_GUPs": jitter(0.09 * smp("random")), "SingleRandomAccess_GUPs": jitter(0.09),
           "StarSTREAM_Copy": triad * 1.15, "StarSTREAM_Scale": triad * 0.93, "StarSTREAM_Add": triad * 1.0,
           "StarSTREAM_Triad": triad, "SingleSTREAM_Copy": jitter(32.2), "SingleSTREAM_Scale": jitter(26.0),
           "SingleSTREAM_Add": jitter(28.1), "SingleSTREAM_Triad": jitter(28.0),
           "MPIFFT_Gflops": jitter(4.0 * procs ** 0.8 * (0.5 if nodes > 1 else 1.0)),
           "StarFFT_Gflops": jitter(3.4 * smp("fft")), "SingleFFT_Gflops": jitter(3.9),
           "CommWorldProcs": procs, "HPLMaxProcs": procs, "HPLMinProcs": procs, "MPIFFT_Procs": procs}
    if procs == 1:  # no pair to measure: the values HPCC initialises these to (-1) stay in the summary
        out |= {key: -1.0 for key in HPCC_PAIR_KEYS}
        return out
    near, far = HPCC_INTRA, HPCC_INTER if nodes > 1 else HPCC_INTRA
    ring_lat, ring_bw = (far[0] * 1.1, far[1] * 0.64) if nodes > 1 else (near[0], near[1] * 0.86)
    out |= {"MinPingPongLatency_usec": jitter(near[0] if ppn > 1 or nodes == 1 else far[0]),
            "MaxPingPongLatency_usec": jitter(far[0]), "AvgPingPongLatency_usec": jitter((near[0] + far[0]) / 2),
            "MinPingPongBandwidth_GBytes": jitter(far[1]),
            "MaxPingPongBandwidth_GBytes": jitter(near[1] if ppn > 1 or nodes == 1 else far[1]),
            "AvgPingPongBandwidth_GBytes": jitter((near[1] + far[1]) / 2),
            "NaturallyOrderedRingLatency_usec": jitter(ring_lat * 0.9),
            "NaturallyOrderedRingBandwidth_GBytes": jitter(ring_bw * 1.1),
            "RandomlyOrderedRingLatency_usec": jitter(ring_lat), "RandomlyOrderedRingBandwidth_GBytes": jitter(ring_bw)}
    return out


def hpcc_text(nodes: int, ppn: int, rng: random.Random) -> str:
    """This machine's HPCC output rewritten for `nodes` x `ppn` processes: the summary, the HPL section's
    grid, N and result, and the process counts it prints. The other sections' bodies keep their wording."""
    procs, n = nodes * ppn, HPCC_N[nodes]
    p, q = HPCC_GRIDS[procs]
    values = hpcc_values(nodes, ppn, rng)
    seconds = round(hpl_flops(n) / (values["HPL_Tflops"] * 1e12), 4)
    values |= {"HPL_time": seconds, "HPL_Tflops": hpl_flops(n) / seconds / 1e12, "HPL_N": n, "HPL_nprow": p,
               "HPL_npcol": q}
    text = HPCC_FIXTURE.read_text()
    text = text.replace("Hostname: 'vm'", f"Hostname: 'synth-n{nodes}-001'")
    text = re.sub(r"^N      :\s+\d+ $", f"N      : {n:7d} ", text, flags=re.M)
    text = re.sub(r"^P      :\s+\d+ $", f"P      : {p:7d} ", text, flags=re.M)
    text = re.sub(r"^Q      :\s+\d+ $", f"Q      : {q:7d} ", text, flags=re.M)
    text = re.sub(r"Running on \d+ processors", f"Running on {procs} processors", text)
    text = re.sub(r"Number of nodes: \d+", f"Number of nodes: {procs}", text)
    result = hpl_result_line("WR11C2R4", n, 224, p, q, seconds, values["HPL_Tflops"] * 1000, "2.0")
    text = re.sub(r"^WR11C2R4\s+\d+\s+224\s+\d+\s+\d+\s+[\d.]+\s+[\d.e+]+$", result, text, flags=re.M)

    def summary_line(m: re.Match) -> str:
        key = m.group(1)
        if key not in values:
            return m.group(0)
        value = values[key]
        return f"{key}={value:d}" if isinstance(value, int) else f"{key}={value:g}"

    begin, end = text.index("Begin of Summary section."), text.index("End of Summary section.")
    return text[:begin] + re.sub(r"^(\w+)=(.*)$", summary_line, text[begin:end], flags=re.M) + text[end:]


def hpcc_study(root: Path, seed: int = SEED) -> Study:
    """12 HPCC outputs imported with the real CLI; the node count comes from the file name, as users name them."""
    rng = random.Random(seed)
    folder = root / "hpcc"
    study = Study("hpcc", root / "hpcc.db")
    for repeat in range(1, HPCC_REPEATS + 1):
        files = [OutputFile(f"hpccoutf-{nodes}node-{nodes * ppn}rank-r{repeat}.txt", hpcc_text(nodes, ppn, rng),
                            {"nodes": nodes, "ppn": ppn, "procs": nodes * ppn, "repeat": repeat})
                 for nodes in HPCC_NODES for ppn in HPCC_PPN]
        truth = write_files(folder, files)
        study.truth |= truth
        # HPCC prints no thread count: the study states it (one thread per process), or its SMP efficiency
        # could compare single-thread ranks with multi-thread ones and is refused (issue 31)
        run_cli(study.db, "import", "-q", *sorted(truth), "--name-pattern",
                f"hpccoutf-{{nodes}}node-{{ranks}}rank-r{repeat}.txt", "--tag", "study=hpcc", "--tag", "threads=1")
    return study
