"""The batch-job engine under its first name: Slurm was its only scheduler. Everything now lives
in execution/batch_jobs.py (Slurm, LSF and PBS); this module keeps the old import path working."""

from __future__ import annotations

from clusterbench.execution.batch_jobs import (
    JOB_RECORD,
    SCHEDULERS,
    SETTLE_WAIT_S,
    TIMEOUT_STATES,
    run_jobs,
    settle_job,
)
from clusterbench.launch import slurm

__all__ = ["JOB_RECORD", "SCHEDULERS", "SETTLE_WAIT_S", "TIMEOUT_STATES", "run_jobs", "settle_job", "slurm"]
