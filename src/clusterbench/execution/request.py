"""A run to make, described by value: which benchmark at which resolved point, its id, repeat,
environment, limits, tags and the system settings to apply around it. Campaigns, `bench` and
`run` all produce these; the executor and
its run loop take nothing else (plus where the run goes, launch/site.Site)."""

from __future__ import annotations

from dataclasses import dataclass, field

from clusterbench.bench.base import Benchmark
from clusterbench.bench.registry import benchmark_class

SETTING_PREFIX = "system."


def recorded_params(params: dict, settings: dict[str, str]) -> dict:
    """A point's parameters with its settings as `system.<key>`: what is stored, and what its id hashes."""
    return params | {f"{SETTING_PREFIX}{k}": v for k, v in settings.items()}


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
    settings: dict[str, str] = field(default_factory=dict)  # `system:` settings (docs/settings.md), normalised

    @property
    def recorded_params(self) -> dict:
        """The point as stored: the benchmark's parameters and the settings, as `system.<key>`, so
        that reports, selections and `diff` see a swept MTU like any other parameter."""
        return recorded_params(self.params, self.settings)

    def bench_class(self) -> type[Benchmark]:
        return benchmark_class(self.benchmark)
