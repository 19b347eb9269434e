"""The space one session searches: the benchmark's tunable space, the values every trial shares, the levels.

What the dimensions are, their defaults and bounds, which of their values only go together (HPL: a
serial BLAS only with one thread per rank) and the fidelity levels are the benchmark's: its
tuning declaration (bench/declare.py's `Tuning`, e.g. bench/hpl/tuning.py) builds and checks them
before anything runs. Here they become the search's Space (tune/search.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from clusterbench.bench.declare import Tuning
from clusterbench.system.discover import SystemInfo
from clusterbench.tune.search import Space


@dataclass
class TuneSpace:
    """The space to search, the fixed values every trial shares, and each fidelity level's value."""

    space: Space
    fixed: dict
    fidelities: list
    nodes: int

    def describe(self) -> list[tuple[str, str]]:
        return [(k, ", ".join(str(v) for v in vals)) for k, vals in self.space.dims.items()]


def build_space(tuning: Tuning, system: SystemInfo, nodes: int, user: dict[str, object], *,
                option: Callable[[str], str], fixed: dict | None = None) -> tuple[Space, dict]:
    """The declaration's space from its defaults and the user's dimensions (`option(key)` names where each
    was written, for messages: '--space nb=...' or 'FILE: benchmarks[0].space.nb'), and the fixed values."""
    declared, fixed = tuning.space(system, nodes, user, option=option, fixed=fixed)
    # a declaration may say which values only go together (`joint`) and what it left out (`dropped`)
    return Space(declared.dims, dict(declared.joint), list(declared.dropped)), fixed
