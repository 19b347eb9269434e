"""`--quiet-check`: wait, up to a limit, until the run's nodes are quiet, or refuse to run and say why.

A figure measured beside other work is flagged afterwards (system/disturbance.py); on a shared node it
is cheaper to not start it. The check runs the activity sampler on every node of the run for a short
window (QUIET_WINDOW_S), nothing of the run started yet, and judges it with the disturbance rules: any
process but clusterbench's own (its ancestors, the sampler) is other work, and the same thresholds
apply (other work >= 5% of the node's CPU time or >= 20% of one CPU, steal >= 5%). A busy node is
measured again every RETRY_S until the limit; then the run is refused with the evidence (exit 1: the
environment, not the input, is at fault).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from clusterbench.errors import EnvironmentProblem
from clusterbench.execution.observe import Samplers
from clusterbench.launch.site import Site
from clusterbench.system import activity, disturbance

QUIET_WINDOW_S = 1.5
RETRY_S = 5.0
MAX_WAIT_S = 24 * 3600.0


def busy_evidence(hosts: list[str], window_s: float = QUIET_WINDOW_S) -> list[str]:
    """What keeps the nodes from being quiet now ([] when they are), from one window of samples."""
    with tempfile.TemporaryDirectory(prefix="clusterbench-quiet-") as folder:
        samplers = Samplers(hosts, Path(folder), interval_s=0.5, max_seconds=window_s + 30)
        samplers.start()
        time.sleep(window_s)
        samplers.stop_quietly()
        evidence: list[str] = []
        for s in samplers.running:
            if s.error:
                evidence.append(f"{s.host}: not sampled ({s.error})")
                continue
            series = activity.parse_series(s.path.read_text(errors="replace"), s.host)
            verdict = disturbance.judge(series, disturbance.RunProcesses(no_run=True))
            evidence += verdict.evidence
        return evidence


def wait_for_quiet(hosts: list[str], limit_s: float,
                   said: Callable[[str], None] | None = None) -> float:
    """Return once every node is quiet (the seconds waited); raise EnvironmentProblem with the evidence
    when they are still busy after `limit_s`."""
    limit_s = max(0.0, min(limit_s, MAX_WAIT_S))
    start = time.monotonic()
    while True:
        evidence = busy_evidence(hosts)
        waited = time.monotonic() - start
        if not evidence:
            return waited
        if waited + RETRY_S > limit_s:
            raise EnvironmentProblem(
                f"the node{'s are' if len(hosts) > 1 else ' is'} not quiet after {waited:.0f} s: "
                + "; ".join(evidence[:4]),
                hint="wait for the other work to end, run elsewhere, or give --quiet-check a longer limit")
        if said:
            said(f"waiting for quiet nodes ({waited:.0f} of {limit_s:.0f} s): {evidence[0]}")
        time.sleep(RETRY_S)


def limit_s() -> float | None:
    """The limit asked for (`clusterbench --quiet-check 2m ...` sets CLUSTERBENCH_QUIET_CHECK in
    seconds), None when no check is wanted."""
    import os

    text = os.environ.get("CLUSTERBENCH_QUIET_CHECK", "").strip()
    try:
        value = float(text) if text else None
    except ValueError:
        return None
    return value if value is not None and 0 <= value <= MAX_WAIT_S else None


def check_sites(sites: list[Site], waiting: Callable[[float, str], None] | None = None) -> None:
    """The quiet check, when asked for, on the nodes of `sites` (this machine for a local run; a batch
    job's nodes are not known before it starts, so it is not checked)."""
    limit = limit_s()
    if limit is None:
        return
    hosts: list[str] = []
    for site in sites:
        if site.batch():
            continue
        names = site.inventory.names if site.inventory else ["localhost"]
        hosts += [h for h in names if h not in hosts]
    if hosts:
        wait_for_quiet(hosts, limit, (lambda text: waiting(RETRY_S, text)) if waiting else None)
