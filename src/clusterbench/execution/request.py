"""A run to make, described by value: which benchmark at which resolved point, its id, repeat,
environment, limits and tags. Campaigns, `bench` and `run` all produce these; the executor and
its run loop take nothing else (plus where the run goes, launch/site.Site)."""

from __future__ import annotations

from dataclasses import dataclass, field

from clusterbench.bench.base import Benchmark
from clusterbench.bench.registry import benchmark_class


@dataclass(slots=True)
class PlannedRun:
    id: str
    campaign: str
    block: str
    benchmark: str
    params: dict
    repeat: int
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float | None = None
    tags: dict = field(default_factory=dict)
    estimate_s: float | None = None

    def bench_class(self) -> type[Benchmark]:
        return benchmark_class(self.benchmark)
