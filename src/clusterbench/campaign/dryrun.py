"""The dry run of a campaign (`clusterbench plan FILE`): every run, whether it is stored, the time left.

Nothing runs and nothing is written: the runs are those `campaign run` would make (the same
ids), checked against the store, so the estimate covers only what a next `campaign run`
would still do.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.campaign.engine import finished_ids
from clusterbench.campaign.expand import total_estimate
from clusterbench.execution.request import PlannedRun
from clusterbench.store.db import Store


@dataclass
class DryRun:
    campaign: str
    runs: list[PlannedRun]
    done: set[str]  # ids of the runs already stored as finished
    pending_estimate_s: float  # the sum of the pending runs' estimates ...
    without_estimate: int  # ... of which this many have none

    @property
    def pending(self) -> list[PlannedRun]:
        return [r for r in self.runs if r.id not in self.done]

    def to_dict(self) -> dict:
        """The dry run as `plan FILE --json` prints it."""
        return {"campaign": self.campaign, "runs": len(self.runs), "done": len(self.done),
                "pending_estimate_s": self.pending_estimate_s, "runs_without_estimate": self.without_estimate,
                "plan": [{"id": r.id, "block": r.block, "benchmark": r.benchmark, "repeat": r.repeat,
                          "params": r.recorded_params, "env": r.env, "timeout_s": r.timeout_s,
                          "estimate_s": r.estimate_s, "done": r.id in self.done} for r in self.runs]}


def dry_run(store: Store, campaign: str, runs: list[PlannedRun]) -> DryRun:
    """Which of `runs` are stored as finished, and the estimated time of the others."""
    done = finished_ids(store, runs)
    estimate, unknown = total_estimate([r for r in runs if r.id not in done])
    return DryRun(campaign, runs, done, estimate, unknown)
