"""Golden values: what each node and link of a cluster should measure, learned from the earlier
healthy cluster runs of the same hardware, and each figure's verdict against it.

The peers' outlier rule (analysis/outliers.py) finds the node that is slower than the others; it
cannot see a cluster whose nodes are all equally slow (a stray job on every node, a firmware
update that halved the memory clock everywhere). A golden value can: it is what healthy runs on
the same hardware measured before.

What is learned, per (hardware, configuration, measure):
- a figure is the one the cluster view shows (analysis/cluster.py: the best valid value of the
  node's or pair's runs in that cluster run), so the verdict and the table speak of one number;
- only healthy figures teach: the run that gave it counts (analysis/flags.counts: not failed,
  invalid, truncated, suspect, disturbed or excluded), and the outlier rule did not flag it in
  its own cluster view (for a link: neither the pair nor either node's links together);
- only earlier cluster runs teach (started before the judged one; never the judged run itself),
  the MAX_EARLIER_RUNS most recent of them;
- figures are pooled only when the hardware (the stored system's CPU model, sockets, cores,
  hardware threads and memory in GiB) is the same and the runs' configuration (analysis/identity:
  every parameter, tag and recorded BLAS, the cluster run's, node's and pair's names aside) is the
  same. A cluster run records one system for all its nodes (the first node's topology, the
  smallest memory): the hardware of a node is that system's. Unknown hardware pools with nothing.
  One-node HPL is sized from the DGEMM rate just measured, so its N, and so its configuration,
  often differ from run to run: its verdict is then "cannot tell".

The expected value is the median of the healthy figures; their spread is 1.4826 x their median
absolute deviation (a robust standard deviation). The tolerance, as a fraction of the expected
value, is the largest of TOLERANCE_Z robust standard deviations, MIN_TOLERANCE (three figures
that agree to 0.1% must not make a 0.1% band) and the measure's own noise floor (Measure.min_spread:
0-byte latency wanders by 15%). With fewer than MIN_HEALTHY healthy figures there is no verdict:
"cannot tell", with the count.

Verdicts per figure: `pass` (within the tolerance on the bad side, or better than expected),
`slow` (worse than expected by more than the tolerance; by how much), `failed` (its runs ran but
none gave a valid value), `cannot tell`. A node's verdict is the worst of its measures that could
be judged (failed, then slow, then pass); `cannot tell` only when none could. A disturbed run is
judged like any other (a busy node does fail) and its evidence is shown; it only never teaches.

`judged_view` (what `run -w` prints) learns from the whole store; `judged_views` (the report) from
the earlier cluster runs its selection holds. `drain_list` writes the Slurm commands that drain the
failing nodes (`run -w --drain-list FILE`); clusterbench never runs them. The verdicts are worked out
again whenever a view is made, never stored, as the peers' flags are.
"""

from __future__ import annotations

import json
import math
import shlex
import sqlite3
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from clusterbench.analysis import cluster
from clusterbench.analysis.cluster import (
    IPERF,
    PAIR_MEASURES,
    ClusterView,
    Measure,
    cluster_view,
    cluster_views,
    natural,
    stored_data,
)
from clusterbench.analysis.cluster_tags import TAG_NODE, TAG_PAIR, TAG_PHASE, TAG_RUN
from clusterbench.analysis.dataset import Dataset
from clusterbench.analysis.flags import NOT_COUNTED, run_flags
from clusterbench.analysis.golden_verdicts import (
    CANNOT_TELL,
    FAILED,
    PASS,
    SLOW,
    Expected,
    Judgement,
    SubjectVerdict,
    Verdict,
)
from clusterbench.analysis.identity import run_identity
from clusterbench.analysis.outliers import MAD_TO_SIGMA, Rule
from clusterbench.store.db import Store

TOLERANCE_Z = 3.5  # robust standard deviations of the healthy figures (as the outlier rule's cut)
MIN_TOLERANCE = 0.05  # the narrowest band, a fraction of the expected value
MIN_HEALTHY = 3  # healthy figures needed before a verdict
MAX_EARLIER_RUNS = 20  # earlier cluster runs read for golden values (the most recent ones)
MAX_REASON_CHARS = 120  # a drain command's reason
MAX_NODE_NAME_CHARS = 255
MAX_EVIDENCE_CHARS = 200

# Not part of a figure's configuration: which cluster run, node or pair it was, and the stored
# system's host name (the hardware is compared by its own facts).
_NOT_CONFIGURATION = ("system", f"tag:{TAG_RUN}", f"tag:{TAG_NODE}", f"tag:{TAG_PAIR}")


@dataclass(frozen=True)
class Figure:
    """One node's (or pair's) figure of one measure in one cluster run, with what pools it."""

    subject: str  # "node2", or "node1-node2"
    measure: Measure
    value: float | None
    run: str | None  # the run that gave the value (None: no valid value)
    key: tuple | None  # (hardware, configuration); None when the hardware is not known
    cluster_run: str
    started_at: str | None
    healthy: bool  # may it teach a golden value?
    attempted: tuple[str, ...] = ()  # the subject's runs of the measure's benchmark in this cluster run
    evidence: str | None = None  # why its run does not count (disturbed: the evidence)
    failure: str | None = None  # no valid value: what the runs said


def describe() -> str:
    return (f"expected = median of at least {MIN_HEALTHY} healthy earlier figures on the same hardware and "
            f"configuration; slow when worse by more than max({TOLERANCE_Z:g} x 1.4826 x MAD, "
            f"{100 * MIN_TOLERANCE:.0f}%, the measure's noise floor)")


# ---------------------------------------------------------------- figures of a view


def hardware(data: Dataset, run: dict) -> tuple | None:
    """The hardware of the node a run was made on: the stored system's CPU model, sockets, cores,
    hardware threads and memory (GiB); None when the system does not say its model and cores."""
    info = (data.systems.get(run.get("system_id") or "") or {}).get("info") or {}
    topo = info.get("topology") or {}
    memory = (info.get("memory") or {}).get("total_bytes")
    if not topo.get("model_name") or not topo.get("cores"):
        return None
    gib = round(memory / 2**30) if isinstance(memory, (int, float)) and memory > 0 else None
    return (str(topo["model_name"]), topo.get("sockets"), topo.get("cores"), topo.get("pus"), gib)


def configuration(run: dict) -> tuple:
    """The run's identity (analysis/identity.py) but which cluster run, node or pair it was."""
    keys = run_identity(run)
    return tuple(sorted((k, json.dumps(v, sort_keys=True, default=str)) for k, v in keys.items()
                        if k not in _NOT_CONFIGURATION))


def evidence(run: dict) -> str | None:
    """Why a run does not count, in a few words: its flags, and the disturbance's evidence."""
    flags = [f for f in run_flags(run) if f in NOT_COUNTED]
    if not flags:
        return None
    text = ", ".join(flags)
    disturbed = (run.get("facts") or {}).get("disturbed")
    if disturbed:
        text += ": " + _evidence_text(disturbed)
    return text[:MAX_EVIDENCE_CHARS]


def _evidence_text(disturbed) -> str:
    if isinstance(disturbed, dict):
        for key in ("why", "summary", "reason"):
            if isinstance(disturbed.get(key), str):
                return disturbed[key]
        parts = [f"{k}={v}" for k, v in list(disturbed.items())[:8] if isinstance(v, (str, int, float, bool))]
        return ", ".join(parts)
    return str(disturbed)


def _failure(runs: list[dict]) -> str:
    last = runs[-1]
    return (f"{last.get('status')}" + (f": {last['reason']}" if last.get("reason") else ""))[:MAX_EVIDENCE_CHARS]


def view_figures(view: ClusterView, data: Dataset) -> list[Figure]:
    """Every figure of a cluster view (nodes' measures, then links'), judged healthy or not."""
    mine = [r for r in data.runs.values() if str((r.get("tags") or {}).get(TAG_RUN)) == view.run]
    mine.sort(key=lambda r: (r.get("started_at") or "", r["id"]))
    tried: dict[tuple[str, str], list[dict]] = {}
    for run in mine:
        tags = run.get("tags") or {}
        if tags.get(TAG_PHASE) == "node" and tags.get(TAG_NODE):
            tried.setdefault((str(tags[TAG_NODE]), run["benchmark"]), []).append(run)
        elif tags.get(TAG_PHASE) in ("pair", "iperf") and tags.get(TAG_PAIR):
            a, _, b = str(tags[TAG_PAIR]).partition(",")
            tried.setdefault((f"{a}-{b}", run["benchmark"]), []).append(run)
    out: list[Figure] = []
    for row in view.rows:  # a measure the node never ran (--no-hpl) has no verdict, not a "cannot tell"
        flagged = {f.measure for f in row.flags}
        for m in cluster.NODE_MEASURES:
            runs = tried.get((row.node, m.benchmark), [])
            if row.values.get(m.key) is None and not runs:
                continue
            out.append(_figure(view, data, row.node, m, row.values.get(m.key), row.runs.get(m.key), runs,
                               m.key in flagged))
    node_flags = {(f.subject, f.measure) for f in view.node_flags}
    for cell in view.pairs:
        subject, flagged = f"{cell.a}-{cell.b}", {f.measure for f in cell.flags}
        for m in (*PAIR_MEASURES, IPERF):
            runs = tried.get((subject, m.benchmark), [])
            if cell.values.get(m.key) is None and not runs:
                continue
            bad = (m.key in flagged or (cell.a, f"links_{m.key}") in node_flags
                   or (cell.b, f"links_{m.key}") in node_flags)
            out.append(_figure(view, data, subject, m, cell.values.get(m.key), cell.runs.get(m.key), runs, bad))
    return out


def _figure(view: ClusterView, data: Dataset, subject: str, m: Measure, value: float | None, run_id: str | None,
            tried: list[dict], flagged: bool) -> Figure:
    run = data.runs.get(run_id or "")
    if value is None or run is None:
        return Figure(subject, m, None, None, None, view.run, view.started_at, False,
                      tuple(r["id"] for r in tried), failure=_failure(tried) if tried else None)
    hw = hardware(data, run)
    counted = data.counts(run["id"])
    return Figure(subject, m, value, run["id"], None if hw is None else (hw, configuration(run)), view.run,
                  run.get("started_at") or view.started_at, counted and not flagged,
                  tuple(r["id"] for r in tried), evidence=evidence(run))


# ---------------------------------------------------------------- learning and judging


def learn(figures: Iterable[Figure]) -> dict[tuple[str, tuple], Expected]:
    """(measure key, (hardware, configuration)) -> the golden value from the healthy figures."""
    pooled: dict[tuple[str, tuple], list[Figure]] = {}
    for f in figures:
        if f.healthy and f.key is not None and f.value is not None and math.isfinite(f.value):
            pooled.setdefault((f.measure.key, f.key), []).append(f)
    out: dict[tuple[str, tuple], Expected] = {}
    for key, found in pooled.items():
        out[key] = expected(found)
    return out


def expected(found: list[Figure]) -> Expected:
    """The golden value of these healthy figures (one measure, one hardware and configuration)."""
    values = [f.value for f in found if f.value is not None]
    median = statistics.median(values)
    spread = MAD_TO_SIGMA * statistics.median(abs(v - median) for v in values)
    m = found[0].measure
    relative = TOLERANCE_Z * spread / abs(median) if median else math.inf
    tolerance = max(relative, MIN_TOLERANCE, m.min_spread)
    starts = [f.started_at for f in found if f.started_at]
    return Expected(median, tolerance, len(values), len({f.cluster_run for f in found}),
                    min(starts) if starts else None, spread)


def judge(figure: Figure, golden: dict[tuple[str, tuple], Expected]) -> Verdict:
    """One figure's verdict against the golden values."""
    m = figure.measure

    def verdict(state: str, why: str, exp: Expected | None = None, worse: float | None = None) -> Verdict:
        return Verdict(figure.subject, m.key, m.label, m.unit, state, figure.value, exp, worse, why,
                       figure.failure if state == FAILED else figure.evidence, figure.run)

    if figure.value is None:
        if figure.attempted:
            return verdict(FAILED, f"failed: {m.label}: no valid value from {len(figure.attempted)} run(s) "
                                   f"({figure.failure})")
        return verdict(CANNOT_TELL, f"cannot tell: {m.label} not measured")
    if figure.key is None:
        return verdict(CANNOT_TELL, f"cannot tell: {m.label}: the hardware of the node is not known")
    exp = golden.get((m.key, figure.key))
    count = exp.count if exp else 0
    if exp is None or count < MIN_HEALTHY:
        return verdict(CANNOT_TELL, f"cannot tell: {m.label}: only {count} healthy figure(s) on this hardware "
                                    f"and configuration ({MIN_HEALTHY} needed)", exp)
    if exp.value == 0 or not math.isfinite(exp.value):
        return verdict(CANNOT_TELL, f"cannot tell: {m.label}: the expected value is {exp.value:g}", exp)
    worse = (exp.value - figure.value) / exp.value if m.higher_is_better else (figure.value - exp.value) / exp.value
    where = f"{figure.value:.3g} {m.unit} vs {exp.value:.3g} expected"
    if worse > exp.tolerance:
        word = "below" if m.higher_is_better else "above"
        return verdict(SLOW, f"slow by {100 * worse:.0f}%: {m.label} {100 * worse:.0f}% {word} expected "
                             f"({where}, tolerance {100 * exp.tolerance:.0f}%)", exp, worse)
    return verdict(PASS, f"pass: {m.label} {where} (tolerance {100 * exp.tolerance:.0f}%)", exp, worse)


def judgement(figures: list[Figure], golden: dict[tuple[str, tuple], Expected], view: ClusterView,
              source: str) -> Judgement:
    """The verdicts of a view's figures, grouped by node and link in the view's order."""
    by_subject: dict[str, SubjectVerdict] = {}
    for f in figures:
        by_subject.setdefault(f.subject, SubjectVerdict(f.subject)).measures.append(judge(f, golden))
    nodes = [by_subject[r.node] for r in view.rows if r.node in by_subject]
    links = [by_subject[s] for s in (f"{c.a}-{c.b}" for c in view.pairs) if s in by_subject]
    return Judgement(nodes, links, source, describe())


def judged_views(data: Dataset, rule: Rule = Rule()) -> list[ClusterView]:
    """cluster.cluster_views, each judged against the earlier cluster runs the selection holds (a report)."""
    views = cluster_views(data, rule)
    judge_in(views, data)
    return views


def judged_view(store: Store, cluster_run: str, rule: Rule = Rule()) -> ClusterView:
    """cluster.stored_view, judged against the earlier cluster runs of the whole store (`run -w`)."""
    data = stored_data(store, cluster_run)
    view = cluster_view(data, cluster_run, rule)
    judge_stored(store, view, data)
    return view


def judge_in(views: list[ClusterView], data: Dataset) -> None:
    """Set each view's verdicts from the earlier views among them (a report: the golden values are
    those of the cluster runs the selection holds)."""
    ordered = sorted(views, key=lambda v: (v.started_at or "", v.run))
    figures = {v.run: view_figures(v, data) for v in ordered}
    for i, view in enumerate(ordered):
        earlier = [f for v in ordered[max(0, i - MAX_EARLIER_RUNS):i] if _before(v, view) for f in figures[v.run]]
        view.verdicts = judgement(figures[view.run], learn(earlier), view,
                                  "the earlier cluster runs in this selection")


def judge_stored(store: Store, view: ClusterView, data: Dataset) -> None:
    """Set a stored view's verdicts from the earlier cluster runs in the whole store (`run -w`)."""
    try:
        earlier_ids = earlier_runs(store, view)
    except sqlite3.OperationalError as exc:  # a malformed tags text somewhere: no golden values, said so
        view.verdicts = judgement(view_figures(view, data), {}, view, f"the store's earlier runs unreadable: {exc}")
        return
    earlier: list[Figure] = []
    for run in earlier_ids:  # one at a time: a view groups every row of its dataset, so one load of all is quadratic
        before = stored_data(store, run)
        earlier += view_figures(cluster_view(before, run, view.rule), before)
    view.verdicts = judgement(view_figures(view, data), learn(earlier), view,
                              f"{len(earlier_ids)} earlier cluster run(s) in the store")


def earlier_runs(store: Store, view: ClusterView) -> list[str]:
    """The ids of the MAX_EARLIER_RUNS most recent cluster runs that started before this one."""
    benchmarks = sorted({m.benchmark for m in cluster.NODE_MEASURES} | {m.benchmark for m in (*PAIR_MEASURES, IPERF)})
    rows = store.find_runs(columns=["id", "started_at"], extracts=[("tags", f"$.{TAG_RUN}")], benchmark=benchmarks)
    first: dict[str, str] = {}
    for row in rows:
        run = row["v0"]
        if run is None or str(run) == view.run:
            continue
        first[str(run)] = min(first.get(str(run), "~"), row["started_at"] or "")
    start = view.started_at or "~"
    ids = [r for r, at in first.items() if at < start]
    ids.sort(key=lambda r: (first[r], r))
    return ids[-MAX_EARLIER_RUNS:]


def _before(earlier: ClusterView, view: ClusterView) -> bool:
    return (earlier.started_at or "") < (view.started_at or "~") and earlier.run != view.run


# ---------------------------------------------------------------- the drain list


def drain_list(view: ClusterView, written_at: str) -> tuple[str, list[str]]:
    """The text of a drain list (Slurm commands for the failing nodes, never run by clusterbench) and
    the nodes it names. Every value is shell-quoted; a node name with control characters or longer
    than MAX_NODE_NAME_CHARS is left out with a comment (quoting cannot make it one safe line)."""
    failing = view.verdicts.failing_nodes() if view.verdicts else []
    lines = [f"# clusterbench drain list: cluster run {_printable(view.run)}, written {written_at}",
             "# Slurm commands for the nodes that failed their verdict against golden values.",
             "# clusterbench never runs them: review, then run them yourself (e.g. sh FILE)."]
    named: list[str] = []
    if not failing:
        lines.append("# no node failed its verdict: nothing to drain")
    for verdict in sorted(failing, key=lambda v: natural(v.subject)):
        node = verdict.subject
        if len(node) > MAX_NODE_NAME_CHARS or not node.isprintable() or not node:
            lines.append(f"# left out: a node name that cannot be written safely ({_printable(repr(node))})")
            continue
        reason = _printable(f"clusterbench {view.run}: {verdict.short()}")
        if len(reason) > MAX_REASON_CHARS:
            reason = reason[:MAX_REASON_CHARS - 3] + "..."
        lines.append(f"scontrol update nodename={shlex.quote(node)} state=drain reason={shlex.quote(reason)}")
        named.append(node)
    return "\n".join(lines) + "\n", named


def _printable(text: str, most: int = 200) -> str:
    return "".join(c if c.isprintable() else "?" for c in str(text))[:most]
