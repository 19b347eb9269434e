"""Which benchmark modules a campaign can name.

Built-in modules are listed here (adding one = one module + one line). A module outside the
package registers itself with `register(cls)`, or is found through the `clusterbench.benchmarks`
entry-point group of an installed distribution (`[project.entry-points."clusterbench.benchmarks"]
mybench = "mypkg.mybench:MyBench"`).
"""

from __future__ import annotations

from clusterbench.bench.affinity import Affinity
from clusterbench.bench.base import Benchmark
from clusterbench.bench.command import Command
from clusterbench.bench.dgemm import Dgemm
from clusterbench.bench.hpcc.benchmark import Hpcc
from clusterbench.bench.hpcg.benchmark import Hpcg
from clusterbench.bench.hpl.benchmark import Hpl
from clusterbench.bench.imb.benchmark import Imb
from clusterbench.bench.iperf3 import Iperf3
from clusterbench.bench.osu.benchmark import Osu
from clusterbench.bench.pingpong import PingPong
from clusterbench.bench.stream.binary import StreamBinary
from clusterbench.bench.stream.kernel import Stream
from clusterbench.errors import UserInputError

BENCHMARKS: dict[str, type[Benchmark]] = {
    cls.name: cls for cls in (Hpcc, Hpl, Hpcg, Imb, Osu, StreamBinary, Iperf3,  # official binaries
                              Stream, PingPong, Dgemm, Affinity, Command)}  # clusterbench's own kernels


def register(cls: type[Benchmark]) -> type[Benchmark]:
    """Make a benchmark class known under its `name` (usable as a class decorator)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    BENCHMARKS[cls.name] = cls
    return cls


def _load_entry_points() -> None:
    from importlib.metadata import entry_points

    for ep in entry_points(group="clusterbench.benchmarks"):
        if ep.name not in BENCHMARKS:
            try:
                register(ep.load())
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the tool
                raise UserInputError(f"benchmark plugin {ep.name!r} ({ep.value}) failed to load: {exc}") from None


def benchmark_class(name: str) -> type[Benchmark]:
    if name not in BENCHMARKS:
        _load_entry_points()
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise UserInputError(f"unknown benchmark {name!r}",
                             hint="known benchmarks: " + ", ".join(sorted(BENCHMARKS))) from None
