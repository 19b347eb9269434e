"""Assemble a report from the store: the selected runs, each section that has data, and the
appendix of runs that every "runs" cell points into."""

from __future__ import annotations

from datetime import UTC, datetime

from clusterbench.analysis.dataset import Dataset, load
from clusterbench.analysis.select import Selection
from clusterbench.errors import UserInputError
from clusterbench.execution.request import SETTING_PREFIX
from clusterbench.report import activity, energy, hpcc, hpl, memory, network, pinning, system, tuning
from clusterbench.report.model import Options, Report, Section, Table
from clusterbench.store.db import Store

SECTIONS = (system, hpl, hpcc, network, memory, pinning, tuning, energy)
SHOWN_PARAMS = ("n", "nb", "p", "q", "ranks", "threads", "nodes", "layout", "blas", "bind_to", "map_by",
                "interconnect", "pinning", "scaling", "array_size", "test")


def build(store: Store, selection: Selection, options: Options, title: str | None = None,
          extra: list[Section] | None = None) -> Report:
    data = load(store, selection, set().union(*(module.metrics() for module in SECTIONS)))
    if not data.runs:
        raise UserInputError(f"no stored runs match {selection.describe()!r}",
                             hint="list campaigns with `clusterbench campaign list`, runs with `clusterbench results`")
    sections = [s for s in (module.section(data, options) for module in SECTIONS) if s is not None]
    if (sampled := activity.section(data, options, store)) is not None:  # needs the store: series are artifacts
        sections.append(sampled)
    return Report(title or "clusterbench report", selection.describe(),
                  datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), str(store.path), sections + (extra or []),
                  runs_table(data))


def comparison_report(store: Store, section: Section, run_ids: set[str], title: str, selection: str) -> Report:
    """A report holding one comparison section and the runs of both sides."""
    data = load(store, Selection({"run": run_ids}, selection), names=set())
    return Report(title, selection, datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), str(store.path), [section],
                  runs_table(data))


def runs_table(data: Dataset) -> Table:
    """One row per selected run: where every number in the report comes from."""
    rows = []
    for run in data.runs.values():
        shown = [k for k in SHOWN_PARAMS if k in run["params"]] + sorted(k for k in run["params"]
                                                                           if k.startswith(SETTING_PREFIX))
        params = " ".join(f"{k}={run['params'][k]}" for k in shown)
        tags = " ".join(f"{k}={v}" for k, v in run["tags"].items())
        rows.append([[run["id"]], run["benchmark"], run["campaign"], run["status"], run["node_count"],
                     run["nodes"], params, tags, (run["started_at"] or "")[:19], run["duration_s"],
                     run["workdir"] or run["facts"].get("source_file")])
    return Table("runs", f"Runs ({len(rows)})",
                 ["runs", "benchmark", "campaign", "status", "nodes", "node list", "parameters", "tags",
                  "started (UTC)", "duration (s)", "run directory or source file"], rows)
