"""`stream-binary`: McCalpin's own STREAM (`stream`, built by the user from stream.c).

The array size is compiled into that binary (-DSTREAM_ARRAY_SIZE); threads come from
OMP_NUM_THREADS. Its table (Best Rate MB/s per kernel) and its validation line are parsed; a
run without "Solution Validates" is invalid. clusterbench's own `stream` kernel follows the
same method and adds sizing, star mode and per-rank figures.
"""

from __future__ import annotations

from pathlib import Path

from clusterbench.bench.metrics import Outcome
from clusterbench.bench.official import OFFICIAL_PLACEMENT, OfficialBinary
from clusterbench.bench.stream import output
from clusterbench.bench.stream.output import stream_outcome


class StreamBinary(OfficialBinary):
    name = "stream-binary"
    binary_names = ("stream", "stream_c.exe", "stream_c")
    env_var = "CLUSTERBENCH_STREAM"
    install_hint = ("get McCalpin's stream.c (www.cs.virginia.edu/stream) and run `clusterbench build stream "
                    "--source PATH`, or compile it yourself (gcc -O3 -fopenmp -DSTREAM_ARRAY_SIZE=80000000 "
                    "stream.c -o stream) and put it on PATH or in $CLUSTERBENCH_STREAM")
    metrics = output.BINARY_METRICS  # its files import as `stream` runs (the kernel's FORMAT)
    openmp = True
    default_ranks = 1
    parameters = OFFICIAL_PLACEMENT

    def arguments(self) -> list[str]:
        return []

    def parse(self, workdir: Path) -> Outcome:
        out = stream_outcome(self.stdout(workdir))
        return out.whole_run_validity()
