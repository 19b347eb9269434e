"""Which benchmark modules a campaign can name. Adding a benchmark = one module + one line here."""

from __future__ import annotations

from clusterbench.bench.base import Benchmark
from clusterbench.bench.command import Command
from clusterbench.bench.hpcc import Hpcc
from clusterbench.bench.hpl import Hpl
from clusterbench.errors import UserInputError

BENCHMARKS: dict[str, type[Benchmark]] = {cls.name: cls for cls in (Hpcc, Hpl, Command)}


def benchmark_class(name: str) -> type[Benchmark]:
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise UserInputError(f"unknown benchmark {name!r}",
                             hint="known benchmarks: " + ", ".join(sorted(BENCHMARKS))) from None
