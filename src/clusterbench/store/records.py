"""What a Store writes a run from: a RunRecord (`begin_run`: what is known before the run starts), an
ImportedRun (`add_imported_runs`: one result read from an old file), and the environment kept with a run.
Plain data, so that every module of the store, and its callers, can name them without the Store.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clusterbench.bench.metrics import Metric

# Environment variables that change results and are stored with each run.
RELEVANT_ENV_PREFIXES = ("OMP_", "OPENBLAS_", "BLIS_", "MKL_", "GOMP_", "KMP_", "OMPI_", "PMIX_",
                         "MPICH_", "HYDRA_", "I_MPI_", "UCX_", "SLURM_", "LD_LIBRARY_PATH",
                         "CLUSTERBENCH_")


def relevant_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in sorted(env.items()) if k.startswith(RELEVANT_ENV_PREFIXES)}


@dataclass
class RunRecord:
    id: str
    benchmark: str
    params: dict = field(default_factory=dict)
    campaign: str | None = None
    repeat: int = 0
    command: str | None = None
    workdir: str | None = None
    env: dict = field(default_factory=dict)
    launcher: dict = field(default_factory=dict)
    system_id: str | None = None
    nodes: str | None = None
    tags: dict = field(default_factory=dict)
    source: str = "run"
    content_hash: str | None = None


@dataclass
class ImportedRun:
    """One result of an imported file, as `Store.add_imported_runs` stores it."""

    rec: RunRecord
    valid: bool
    reason: str | None
    metrics: list[Metric]
    facts: dict
    started_at: str | None
    ended_at: str | None
    duration_s: float | None
