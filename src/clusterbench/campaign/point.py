"""One benchmark point as `clusterbench bench` gives it (`-p key=value`, --timeout, --repeats), as a
campaign of one block that expand.py expands like any other, without the campaign file's pydantic
models (spec.py): building those costs about 0.2 s of CPU at every start, which is most of the
fixed cost of a run a tuner pays for each trial.

Nothing is checked less: the models would check only the types of what the command line gives
(text, a whole number); the timeout is checked here as spec.py checks it, and the parameters are
checked by the expansion against the benchmark's declared parameters, as in a campaign.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusterbench.campaign.source import duration_s
from clusterbench.errors import UserInputError


@dataclass(frozen=True)
class _Local:
    """A campaign's `cluster:` section left out: runs on this machine, with the default MPI."""

    launcher: str = "local"
    mpi: str | None = None


@dataclass
class PointBlock:
    """What expand.py reads of a benchmark block (spec.BenchmarkBlock), for one point."""

    benchmark: str
    params: dict[str, Any]
    timeout: str | int | float | None = None
    repeats: int | None = None
    name: str | None = None
    space: dict[str, Any] = field(default_factory=dict)
    combine: str = "product"
    where: list[str] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)
    system: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.name or self.benchmark

    @property
    def timeout_s(self) -> float | None:
        return duration_s(self.timeout)


@dataclass
class PointCampaign:
    """What expand.py reads of a campaign (spec.Campaign): a name and one block, nothing else set."""

    name: str
    benchmarks: list[PointBlock]
    repeats: int = 1
    timeout_s: float | None = None
    env: dict[str, Any] = field(default_factory=dict)
    system: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, Any] = field(default_factory=dict)
    cluster: _Local = field(default_factory=_Local)


def one_point(benchmark: str, params: dict[str, Any], timeout: str | None = None, repeats: int = 1,
              name: str = "bench") -> PointCampaign:
    """The campaign `name` of one block: `benchmark` at `params`. A bad timeout or repeat count is
    refused naming its option (`--timeout: ...`), as the command line gave it."""
    if timeout is not None:
        try:
            duration_s(timeout)
        except ValueError as exc:
            raise UserInputError(f"--timeout: {exc}") from None
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise UserInputError(f"--repeats: must be a whole number of at least 1, got {repeats!r}")
    return PointCampaign(name, [PointBlock(str(benchmark), dict(params), timeout, repeats)])
