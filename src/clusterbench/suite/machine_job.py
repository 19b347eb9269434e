"""`clusterbench run` on one machine as one library call: discover the node, plan the kernels, HPCC
and the standalone HPL within the budget, build xhpl if it is missing, run the plan through the
engine and summarise.

The CLI parses and checks the options, calls `run_machine_job` once and prints; every decision
about the plan (HPL dropped, with its reason, when xhpl cannot be built) is made here, not in the
CLI. What the CLI shows while the job works it is told through `MachineJobEvents`.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Protocol

from clusterbench.bench.registry import benchmark_class
from clusterbench.campaign.precision import MIN_RUNS, AutoRepeats
from clusterbench.execution.loop import QuietReporter, Reporter
from clusterbench.store.db import Store
from clusterbench.suite.characterise import SuitePlan, SuiteResult, plan_suite, run_suite
from clusterbench.suite.summary import summarise
from clusterbench.suite.xhpl import build_xhpl
from clusterbench.system.discover import SystemInfo, discover


@dataclass(frozen=True)
class MachineJobOptions:
    """What `run` (without -w) was asked for, parsed and checked (cli/run_cmd.py)."""

    budget_s: float
    full: bool = False
    n: int | None = None
    nb: int | None = None
    layout: str | None = None
    kernels: bool = True
    hpl: bool = True
    xhpl: str | None = None
    flops_per_cycle: int | None = None
    frequency: float | None = None
    dry_run: bool = False
    repeats: int = 1  # the headline run (HPL, else HPCC) this many times
    auto: AutoRepeats | None = None  # ... or until precise (--repeats auto), within the budget


class MachineJobEvents(Protocol):
    """What the job tells whoever shows it, in order."""

    def planned(self, plan: SuitePlan) -> None: ...
    def building(self, what: str) -> AbstractContextManager: ...
    def built(self, binary: str, rebuilt: bool) -> None: ...
    def runs(self, plan: SuitePlan) -> AbstractContextManager[Reporter]: ...  # the engine's reporter


class QuietMachineEvents:
    """Events that show nothing (a library caller, a test)."""

    def planned(self, plan: SuitePlan) -> None:
        pass

    def building(self, what: str) -> AbstractContextManager:
        return nullcontext()

    def built(self, binary: str, rebuilt: bool) -> None:
        pass

    def runs(self, plan: SuitePlan) -> AbstractContextManager[Reporter]:
        return nullcontext(QuietReporter())


@dataclass
class MachineJob:
    """The node, the plan; the results and their summary unless it was a dry run."""

    system: SystemInfo
    plan: SuitePlan
    result: SuiteResult | None = None
    summary: dict | None = None


def run_machine_job(store: Store, options: MachineJobOptions,
                    events: MachineJobEvents | None = None) -> MachineJob:
    """The one-machine job, from discovery to the stored, summarised runs (see the module docstring)."""
    events = events or QuietMachineEvents()
    system = discover(options.flops_per_cycle, options.frequency)
    find_xhpl = benchmark_class("hpl").find_binary
    xhpl = find_xhpl(options.xhpl) if options.xhpl else (find_xhpl() if options.hpl else None)
    start = time.monotonic()
    planned_s = options.budget_s / MIN_RUNS if options.auto else options.budget_s / max(1, options.repeats)
    plan = plan_suite(system, store, planned_s, full=options.full, n=options.n, nb=options.nb,
                      layout_name=options.layout, xhpl=xhpl, kernels=options.kernels, standalone=options.hpl)
    events.planned(plan)
    if options.dry_run:
        return MachineJob(system, plan)
    if plan.hpl and not plan.hpl.binary:
        _build_standalone(plan, events)
    with events.runs(plan) as reporter:
        result = run_suite(system, store, plan, reporter, repeats=options.repeats, auto=options.auto,
                           deadline=start + options.budget_s, say=getattr(events, "say", None))
    return MachineJob(system, plan, result, summarise(system, result, str(store.path)))


def _build_standalone(plan: SuitePlan, events: MachineJobEvents) -> None:
    """Build xhpl (once: the build cache keeps it) before the runs; without it the suite goes on with
    HPCC's HPL, and the plan says why."""
    built, why = build_xhpl(events.building)
    if built is None:
        plan.skipped.append(f"hpl: xhpl could not be built ({why}); Rmax comes from HPCC's HPL phase")
        plan.hpl = None
        return
    plan.hpl.binary = str(built.binary)
    events.built(str(built.binary), built.rebuilt)
