"""Multi-fidelity, budgeted, noise-aware search over a discrete space (helper C1 writes this module).

Interface fixed by the integrator; the helper may add to it, not change what is below."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, order=True)
class Config:
    """One point of the space: (key, value) pairs sorted by key; hashable, stable across processes."""

    items: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, values: dict[str, Any]) -> Config:
        return cls(tuple(sorted(values.items())))

    def as_dict(self) -> dict[str, Any]:
        return dict(self.items)

    def key(self) -> str:
        """A stable text form, e.g. 'bcast=1rm,depth=1,nb=192': used in run ids and tags."""
        return ",".join(f"{k}={v}" for k, v in self.items)


@dataclass
class Space:
    """Discrete dimensions, each an ordered list of values (order matters for neighbours)."""

    dims: dict[str, list[Any]]

    @property
    def size(self) -> int:
        out = 1
        for values in self.dims.values():
            out *= len(values)
        return out


@dataclass(frozen=True)
class Sample:
    """One measurement: a configuration at a fidelity level. `value` is NaN when the run was invalid."""

    config: Config
    level: int
    repeat: int
    value: float  # higher is better (Gflop/s)
    seconds: float  # the trial's wall time, harness included
    valid: bool
    run_id: str | None = None
    replayed: bool = False  # found in the store: costs no budget


class Evaluator(Protocol):
    def estimate_s(self, config: Config, level: int) -> float: ...
    def evaluate(self, config: Config, level: int, repeat: int) -> Sample: ...


@dataclass
class Incumbent:
    config: Config
    level: int
    median: float
    ci_low: float
    ci_high: float
    samples: list[float]


@dataclass
class SearchResult:
    best: Incumbent | None
    trials: list[Sample] = field(default_factory=list)
    history: list[tuple[float, float]] = field(default_factory=list)  # (elapsed s, best-so-far median)
    stopped: str = ""  # why the search ended: budget, space exhausted, ...
    spent_s: float = 0.0


def search(space: Space, levels: int, evaluator: Evaluator, budget_s: float, *, seed: int = 0,
           prior: Callable[[Config], float] | None = None, eta: int = 3, final_repeats: int = 3,
           progress: Callable[[Sample, SearchResult], None] | None = None) -> SearchResult:
    raise NotImplementedError
