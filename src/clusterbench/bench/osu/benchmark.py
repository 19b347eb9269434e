"""`osu`: OSU Micro-Benchmarks: osu_latency, osu_bw, osu_bibw and the collective latency tests.

Runs `osu_<test> -m MIN:MAX [-i N] [-x W]`; the table becomes `osu_latency_us` (latency tests
and collectives) or `osu_bandwidth` (MB/s, 10^6 bytes) per size, with `latency_us` at the
smallest size or `peak_bandwidth`. OSU starts at 1 byte, not 0. The binaries are looked for
by their names (osu_latency, ...), also in the folders of `$CLUSTERBENCH_PATH` such as
`.../libexec/osu-micro-benchmarks/mpi/pt2pt`.
"""

from __future__ import annotations

from pathlib import Path

from clusterbench.bench.metrics import Outcome
from clusterbench.bench.official import OFFICIAL_PLACEMENT, OfficialBinary
from clusterbench.bench.osu import output
from clusterbench.bench.osu.output import osu_outcome, parse_osu
from clusterbench.bench.params import Param
from clusterbench.errors import UserInputError
from clusterbench.system.discover import SystemInfo

POINT_TO_POINT = ("latency", "bw", "bibw")
COLLECTIVES = ("allreduce", "bcast", "alltoall", "allgather", "reduce", "barrier")


class Osu(OfficialBinary):
    name = "osu"
    binary_names = ("osu_latency", "osu_bw")
    env_var = "CLUSTERBENCH_OSU"
    install_hint = ("get the OSU Micro-Benchmarks source (mvapich.cse.ohio-state.edu) and run "
                    "`clusterbench build osu --source PATH`, or build them yourself (./configure CC=mpicc "
                    "CXX=mpicxx && make) and add the folders of osu_latency etc. to $CLUSTERBENCH_PATH or PATH")
    output_formats = (output.FORMAT,)
    metrics = output.METRICS
    needs_mpi = True
    default_ranks = 2
    threaded_default = False
    parameters = (
        Param("test", str, "latency", "OSU test: latency, bw, bibw, or a collective (allreduce, bcast, ...)",
              choices=(*POINT_TO_POINT, *COLLECTIVES)),
        Param("min_bytes", int, 1, "smallest message (bytes)", minimum=0),
        Param("max_bytes", int, 4 * 2**20, "largest message (bytes)", minimum=1),
        Param("iterations", int, None, "-i: iterations per size (OSU's default)", minimum=1),
        Param("warmup", int, None, "-x: warm-up iterations (OSU's default)", minimum=0),
        *OFFICIAL_PLACEMENT,
    )

    @classmethod
    def names_for(cls, point: dict | None) -> tuple[str, ...]:
        return (f"osu_{point['test']}",) if point else cls.binary_names

    @classmethod
    def check(cls, point: dict, system: SystemInfo) -> None:
        if point["min_bytes"] > point["max_bytes"]:
            raise UserInputError(f"min_bytes={point['min_bytes']} is larger than max_bytes={point['max_bytes']}")
        if point["test"] in POINT_TO_POINT and point["ranks"] != 2:
            raise UserInputError(f"ranks: osu_{point['test']} runs between exactly 2 ranks, not {point['ranks']}")

    def arguments(self) -> list[str]:
        p = self.point
        args = ["-m", f"{p['min_bytes']}:{p['max_bytes']}"]
        if p.get("iterations"):
            args += ["-i", str(p["iterations"])]
        if p.get("warmup") is not None:
            args += ["-x", str(p["warmup"])]
        return args

    def parse(self, workdir: Path) -> Outcome:
        out = osu_outcome(parse_osu(self.stdout(workdir)))
        largest = max((int(m.labels.get("bytes", 0)) for m in out.metrics), default=0)
        if out.valid and largest < self.point["max_bytes"]:
            out.invalidate(f"the table stops at {largest} bytes, before max_bytes={self.point['max_bytes']} "
                           "(aborted or truncated)")
        return out.whole_run_validity()
