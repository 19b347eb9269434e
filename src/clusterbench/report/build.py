"""Assemble a report from the store: the selected runs, each section that has data, and the
appendix of runs that every "runs" cell points into."""

from __future__ import annotations

from datetime import UTC, datetime

from clusterbench.analysis.dataset import Dataset, gc_paused, load
from clusterbench.analysis.identity import UNKNOWN_TEXT, known_node_count
from clusterbench.analysis.select import Selection
from clusterbench.errors import UserInputError
from clusterbench.execution.request import SETTING_PREFIX
from clusterbench.report import (
    activity,
    ceilings,
    cluster,
    custom,
    energy,
    history,
    hpcc,
    hpl,
    memory,
    network,
    pinning,
    repeats,
    system,
    tuning,
)
from clusterbench.report.looks import settle
from clusterbench.report.model import Options, Report, Section, Table
from clusterbench.store.db import Store

SECTIONS = (system, cluster, hpl, hpcc, network, memory, pinning, tuning, energy)
SHOWN_PARAMS = ("n", "nb", "p", "q", "ranks", "threads", "nodes", "layout", "blas", "tuning", "bind_to", "map_by",
                "interconnect", "pinning", "scaling", "array_size", "test")
# Where --x/--series/... apply without --metric: the first of these the selection holds.
DRAWN_FIRST = (hpl, network, memory)


def build(store: Store, selection: Selection, options: Options, title: str | None = None,
          extra: list[Section] | None = None) -> Report:
    with gc_paused():  # see there: most of the time of a large report went to the collector
        return _build(store, selection, options, title, extra)


def _build(store: Store, selection: Selection, options: Options, title: str | None,
           extra: list[Section] | None) -> Report:
    names = set().union(*(module.metrics() for module in SECTIONS)) | custom.metrics(options) | history.metrics()
    data = load(store, selection, names, lazy=True,  # each metric read when a section first asks
                rpeak_node_gflops=options.rpeak_node_gflops)
    if not data.runs:
        raise UserInputError(f"no stored runs match {selection.describe()!r}",
                             hint="list campaigns with `clusterbench campaign list`, runs with `clusterbench results`")
    _resolve_choice(store, data, options)
    sections = [s for s in (module.section(data, options) for module in SECTIONS) if s is not None]
    if (sampled := activity.section(data, options, store)) is not None:  # needs the store: series are artifacts
        sections.append(sampled)
    if (over_time := history.section(data, options, store)) is not None:  # change points per system
        sections.append(over_time)
    if (against := ceilings.section(data, options, store)) is not None:  # the node's own ceilings
        sections.append(against)
    if (figures := custom.section(store, data, options)) is not None:
        sections.append(figures)
    settle(sections)  # no figure of one point, at most 8 lines a panel (report/looks.py)
    return Report(title or "clusterbench report", selection.describe(),
                  datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), str(store.path), sections + (extra or []),
                  runs_table(data))


def _resolve_choice(store: Store, data: Dataset, options: Options) -> None:
    """--x/--series/... without --metric: the HPL Rmax figures, else the first metric drawn. A
    metric no section draws gets a figure of its own (the custom section); one the selection does
    not hold is refused, naming those it does."""
    choice = options.choice
    if choice is None:
        return
    if choice.metric is None:
        for module in DRAWN_FIRST:
            present = data.of(*module.metrics())
            if len(present):
                choice.metric = sorted(set(present["name"]))[0]
                return
        raise UserInputError("--x, --series, --facet and --best-over need a figure, and this selection has none "
                             "of HPL, network or STREAM", hint="name the metric with --metric; "
                             "stored here: " + ", ".join(custom.stored_metrics(store, data)[:30]))
    drawn = set().union(*(module.metrics() for module in DRAWN_FIRST))
    if choice.metric not in drawn:
        options.figures.append(choice)  # a figure of its own, checked like a report.yaml figure
        options.choice = None


def comparison_report(store: Store, section: Section, run_ids: set[str], title: str, selection: str) -> Report:
    """A report holding one comparison section and the runs of both sides."""
    data = load(store, Selection({"run": run_ids}, selection), names=set())
    settle([section])
    return Report(title, selection, datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), str(store.path), [section],
                  runs_table(data))


def runs_table(data: Dataset) -> Table:
    """One row per selected run: where every number in the report comes from, its flags (truncated,
    name-conflict, suspect, disturbed, excluded, ...: analysis/flags.py) with their reasons, and its notes.
    A node count no file or tag states is 'not stated', never 1."""
    rows = []
    own = getattr(data, "flags", None)
    for rid, run in data.runs.items():
        params = run["params"]
        shown = [k for k in SHOWN_PARAMS if k in params]
        shown += sorted(k for k in params if k.startswith(SETTING_PREFIX))
        count = run["node_count"] if "node_count" in run else known_node_count(run)  # load: known_node_count
        found = own(rid) if callable(own) else None
        rows.append([[run["id"]], run["benchmark"], run["campaign"], run["status"],
                     "" if found == [] else repeats.flag_text(run, found),  # a clean run: no flags to word
                     repeats.notes_text(run) if run.get("notes") else "", _count_text(count), run["nodes"],
                     " ".join([f"{k}={_short(v) if type(v := params[k]) is list else v}" for k in shown]),
                     " ".join([f"{k}={v}" for k, v in run["tags"].items()]), (run["started_at"] or "")[:19],
                     run["duration_s"], run["workdir"] or run["facts"].get("source_file")])
    return Table("runs", f"Runs ({len(rows)})",
                 ["runs", "benchmark", "campaign", "status", "flags", "notes", "nodes", "node list", "parameters",
                  "tags", "started (UTC)", "duration (s)", "run directory or source file"], rows,
                 note="flags: failed, invalid, truncated (the output ends before its summary), warning (a remark "
                      "in the run's reason), name-conflict (the file name says what the output contradicts), "
                      "suspect (a figure beyond what the machine can do), disturbed (other work took its CPUs), "
                      "excluded (by a user, with the reason). A flagged run is never averaged nor a best. notes: "
                      "`clusterbench note`. nodes 'not stated': no file or tag says how many.")


def _count_text(count: int | None) -> int | str:
    """A node count, or 'not stated' when no file or tag says (never 1 by default)."""
    return UNKNOWN_TEXT if count is None else count


def _short(value) -> str:
    """A list parameter (grids) as '1x4,2x2'."""
    return ",".join([str(v) for v in value]) if type(value) is list else str(value)
