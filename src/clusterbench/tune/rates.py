"""The HPL model's measured inputs for a system, read from the store (helper A writes this module).

Interface fixed by the integrator; the helper may add to it, not change what is below."""

from __future__ import annotations

from clusterbench.bench.hpl.model import Rates
from clusterbench.store.db import Store
from clusterbench.system.discover import SystemInfo


def rates_for(store: Store | None, system: SystemInfo, nodes: int = 1) -> tuple[Rates, str]:
    """The rates and a sentence saying where each came from (stored DGEMM/ping-pong/HPL runs, or Rpeak)."""
    raise NotImplementedError
