"""`imb`: Intel MPI Benchmarks (IMB-MPI1): PingPong, PingPing, Sendrecv, Exchange, Allreduce, ...

Runs `IMB-MPI1 -msglog a:b [-iter N] [-iter_policy P] TESTS...`; every table of the output
becomes metrics labelled with its test and message size (`imb_time_us`, `imb_bandwidth` in
MiB/s as IMB prints them, `latency_us` at the smallest size, `peak_bandwidth`). A run whose
output stops before IMB's "All processes entering MPI_Finalize" is invalid.
"""

from __future__ import annotations

from pathlib import Path

from clusterbench.bench.imb import output
from clusterbench.bench.imb.output import parse_imb, section_outcome
from clusterbench.bench.metrics import Outcome
from clusterbench.bench.native import GUESS_START_S
from clusterbench.bench.official import OFFICIAL_PLACEMENT, OfficialBinary
from clusterbench.bench.params import Param
from clusterbench.errors import UserInputError
from clusterbench.system.discover import SystemInfo

PT2PT = ("PingPong", "PingPing")  # exactly two ranks take part


class Imb(OfficialBinary):
    name = "imb"
    binary_names = ("IMB-MPI1",)
    env_var = "CLUSTERBENCH_IMB"
    install_hint = ("get the Intel MPI Benchmarks source (github.com/intel/mpi-benchmarks) and run "
                    "`clusterbench build imb --source PATH`, or build IMB-MPI1 yourself (`make IMB-MPI1` with "
                    "CC=mpicc) and put it on PATH, in $CLUSTERBENCH_PATH or in $CLUSTERBENCH_IMB")
    output_formats = (output.FORMAT,)
    metrics = output.METRICS
    needs_mpi = True
    default_ranks = 2
    threaded_default = False
    parameters = (
        Param("tests", str, "PingPong", "IMB benchmarks, comma-separated (PingPong, PingPing, Sendrecv, "
              "Exchange, Allreduce, Bcast, ...)"),
        Param("min_log2", int, 0, "smallest non-zero message 2^min_log2 bytes (-msglog)", minimum=0),
        Param("max_log2", int, 22, "largest message 2^max_log2 bytes (-msglog)", minimum=0),
        Param("iter", int, None, "repetitions per size (-iter; IMB's default 1000)", minimum=1),
        Param("iter_policy", str, None, "IMB -iter_policy", choices=("dynamic", "multiple_np", "auto", "off")),
        *OFFICIAL_PLACEMENT,
    )

    @classmethod
    def check(cls, point: dict, system: SystemInfo) -> None:
        if point["min_log2"] > point["max_log2"]:
            raise UserInputError(f"min_log2={point['min_log2']} is larger than max_log2={point['max_log2']}")
        if point["max_log2"] > 30:
            raise UserInputError(f"max_log2={point['max_log2']}: IMB's messages stop at 2^30 bytes")
        if point["ranks"] < 2:
            raise UserInputError("ranks: IMB needs at least 2 ranks")

    @classmethod
    def estimate_s(cls, point: dict, system: SystemInfo) -> float | None:
        from clusterbench.bench.imb.sizing import exchange_seconds
        tests = len(point["tests"].split(","))
        return GUESS_START_S + tests * exchange_seconds(point["min_log2"], point["max_log2"],
                                                        point.get("iter") or 1000, point.get("iter_policy") != "off")

    def arguments(self) -> list[str]:
        p = self.point
        args = ["-msglog", f"{p['min_log2']}:{p['max_log2']}"]
        if p.get("iter"):
            args += ["-iter", str(p["iter"])]
        if p.get("iter_policy"):
            args += ["-iter_policy", p["iter_policy"]]
        return args + [t.strip() for t in p["tests"].split(",") if t.strip()]

    def parse(self, workdir: Path) -> Outcome:
        parsed = parse_imb(self.stdout(workdir))
        out = Outcome(facts={"imb_version": parsed.version, "command": parsed.command})
        if not parsed.sections:
            out.invalidate("no IMB result table in the output")
        for section in parsed.sections:
            part = section_outcome(parsed, section)
            out.metrics += part.metrics
            if not part.valid:
                out.invalidate("; ".join(part.reasons))
        if not parsed.finalized:
            out.invalidate("output ends before 'All processes entering MPI_Finalize' (aborted or truncated)")
        return out.whole_run_validity()
