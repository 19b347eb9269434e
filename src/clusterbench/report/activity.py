"""Activity section: what the nodes did during the runs, from the 1 Hz samples taken on every node.

A run sampled by system/sampler.py carries, per node, a summary in facts["activity"][host] and
the raw series as the artifact activity-HOST.jsonl. The table gives every sampled run and node:
user and sy+si (kernel + soft interrupt) shares of CPU time, where network receive processing
ran, TCP retransmits, and whether the node throttled. The timelines are the `top` view of a
study, but over the whole run: one panel per node, the CPU time shares stacked (idle is what is
left white), TCP retransmits per second on the right axis. They are bounded (MAX_TIMELINES runs,
MAX_PANELS nodes each, MAX_POINTS intervals per panel, merged exactly from the cumulative
counters); which runs get one is stated in the section and the captions: per benchmark, the run
whose busiest node spent the largest share in sy+si, the worst case being the one worth seeing.
"""

from __future__ import annotations

import csv
import io
import re

from clusterbench.analysis.dataset import Dataset
from clusterbench.report import csvsafe
from clusterbench.report.figures import _STYLE, svg_element
from clusterbench.report.looks import OKABE_ITO
from clusterbench.report.model import Picture, Section, Table
from clusterbench.system.activity import parse_series, summary_line, timeline

MAX_TIMELINES = 6
MAX_PANELS = 8
MAX_POINTS = 400
MAX_ROWS = 1000
MAX_HOST_CHARS = 255
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
MAX_ARTIFACT_BYTES = 64 * 2**20  # a series the store kept by path only (over its blob limit)
STACKED = (("user", "user", OKABE_ITO[0]), ("system", "system", OKABE_ITO[3]), ("softirq", "softirq", OKABE_ITO[1]),
           ("irq", "irq", OKABE_ITO[4]), ("iowait", "iowait", OKABE_ITO[5]), ("steal", "steal", "#999999"))
CSV_COLUMNS = ("run", "host", "t_s", "dt_s", "user", "system", "softirq", "irq", "iowait", "steal", "idle",
               "retransmits", "retransmits_per_s")


def metrics() -> set[str]:
    return set()


def _num(value) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def activity_of(run: dict) -> dict[str, dict]:
    """{host: summary} of a run, only well-formed entries (facts come from a store: anything may be there)."""
    found = run["facts"].get("activity") if isinstance(run.get("facts"), dict) else None
    if not isinstance(found, dict):
        return {}
    return {h: s for h, s in found.items() if isinstance(h, str) and 0 < len(h) <= MAX_HOST_CHARS
            and isinstance(s, dict)}


def _sy_si(summary: dict) -> float:
    return _num(summary.get("sy_si_percent")) or 0.0


def section(data: Dataset, _options, store=None) -> Section | None:
    """The section, or None when no selected run was sampled. `store` gives the series (artifacts);
    without it only the table is made."""
    runs = {rid: r for rid, r in data.runs.items() if activity_of(r)}
    if not runs:
        return None
    out = Section("activity", "What the nodes did during the runs", [
        "Every node of a run was sampled about once a second (CPU time per CPU from /proc/stat, soft "
        "interrupts per type and CPU, network interface and TCP counters, temperatures, frequencies, "
        "throttling). The counters are the node's, not only the run's: other work on a node shows too. "
        "sy+si is the share of CPU time spent in the kernel and in soft interrupts (top's sy and si), "
        "user includes nice; NET_RX says where network receive processing ran."])
    throttled = sorted(f"{rid} ({host})" for rid, r in runs.items() for host, s in activity_of(r).items()
                       if isinstance(s.get("throttled"), str))
    if throttled:
        out.paragraphs.append(f"Runs during which a node throttled (their numbers are suspect): "
                              f"{', '.join(throttled[:20])}{' and more' if len(throttled) > 20 else ''}.")
    out.tables.append(_table(runs))
    if store is not None:
        chosen = choose_timelines(runs)
        if chosen:
            out.paragraphs.append(
                f"Timelines: per benchmark, the run whose busiest node spent the largest share of its CPU time "
                f"in sy+si (at most {MAX_TIMELINES} runs, the highest first; at most {MAX_PANELS} nodes each).")
        for i, run in enumerate(chosen):
            picture = _timeline_picture(store, run, f"activity-timeline-{i}")
            if picture is not None:
                out.pictures.append(picture)
    return out


def _table(runs: dict[str, dict]) -> Table:
    rows = []
    for rid, run in runs.items():
        for host, s in activity_of(run).items():
            tcp = s.get("tcp") if isinstance(s.get("tcp"), dict) else {}
            where = (s.get("net_rx") or {}).get("where") if isinstance(s.get("net_rx"), dict) else None
            if isinstance(s.get("error"), str):  # the executor could not sample this node
                where = f"not sampled: {s['error'][:120]}"
            rows.append([[rid], run["benchmark"], host, _num(s.get("user_percent")), _num(s.get("sy_si_percent")),
                         _num(s.get("irq_percent")), where if isinstance(where, str) else None,
                         _int(tcp.get("retransmits")), _int(tcp.get("timeouts")),
                         _num(s.get("context_switches_per_s")), _num(s.get("temperature_max_c")),
                         s["throttled"] if isinstance(s.get("throttled"), str) else "no"])
    note = ("user and sy+si: percent of all CPU time of the node over the run. retransmits and timeouts: the "
            "node's TCP RetransSegs and TCPTimeouts over the run. throttled: vcgencmd bits, thermal_throttle "
            "events or a temperature at a trip point, seen during the run.")
    if len(rows) > MAX_ROWS:
        note += f" Only the {MAX_ROWS} nodes with the highest sy+si of {len(rows)} are listed."
        rows = sorted(rows, key=lambda r: -(r[4] or 0.0))[:MAX_ROWS]
    rows.sort(key=lambda r: (r[0][0], r[2]))
    return Table("activity-table", "Node activity per run",
                 ["runs", "benchmark", "node", "user %", "sy+si %", "irq %", "NET_RX", "TCP retransmits",
                  "TCP timeouts", "context switches/s", "max temperature (C)", "throttled"], rows, note=note)


def _int(value) -> int | None:
    return value if type(value) is int else None


def choose_timelines(runs: dict[str, dict]) -> list[dict]:
    """Per benchmark the run with the highest sy+si on its busiest node; the MAX_TIMELINES highest."""
    best: dict[str, tuple[float, str]] = {}
    for rid, run in runs.items():
        score = max(_sy_si(s) for s in activity_of(run).values())
        if run["benchmark"] not in best or (score, rid) > best[run["benchmark"]]:
            best[run["benchmark"]] = (score, rid)
    ranked = sorted(best.values(), key=lambda p: (-p[0], p[1]))
    return [runs[rid] for _, rid in ranked[:MAX_TIMELINES]]


def load_series(store, run_id: str, host: str):
    """The parsed series of one node of a run from its artifact, or None when it was not stored. The
    executor names the file after the host with anything but [A-Za-z0-9_.-] replaced by '_'."""
    row = store.artifact(run_id, f"activity-{host}.jsonl") or store.artifact(
        run_id, f"activity-{_UNSAFE.sub('_', host)}.jsonl")
    if row is None:
        return None
    data = row["content"]
    if data is None and row["path"]:  # larger than the store keeps inline: read the file it names
        try:
            with open(row["path"], "rb") as f:
                data = f.read(MAX_ARTIFACT_BYTES)
        except OSError:
            return None
    return parse_series((data or b"")[:MAX_ARTIFACT_BYTES].decode("utf-8", "replace"), host)


def _timeline_picture(store, run: dict, slug: str) -> Picture | None:
    summaries = activity_of(run)
    hosts = sorted(summaries, key=lambda h: (-_sy_si(summaries[h]), h))[:MAX_PANELS]
    panels = []
    for host in sorted(hosts):
        series = load_series(store, run["id"], host)
        if series is not None and len(series.samples) >= 2:
            panels.append((host, summaries[host], timeline(series, MAX_POINTS), series))
    if not panels:
        return None
    walls = [s.samples[0].wall for _, _, _, s in panels]
    if None not in walls:  # one time axis for all nodes: each starts where its wall clock says
        for (_, _, tl, _), wall in zip(panels, walls, strict=True):
            tl["t"] = [round(t + wall - min(walls), 3) for t in tl["t"]]
    title = f"{run['benchmark']} run {run['id']}: CPU time per node"
    intervals = sum(len(s.samples) - 1 + s.thinned for _, _, _, s in panels)
    drawn = sum(len(tl["t"]) for _, _, tl, _ in panels)
    caption = (f"Stacked shares of each node's CPU time per sampling interval (white: idle); black line, right "
               f"axis: TCP retransmits per second. The run with the highest sy+si of its benchmark's sampled "
               f"runs. {len(panels)} node(s), {drawn} plotted intervals"
               + (f" (merged exactly from {intervals})" if drawn < intervals else "") + ".")
    if len(summaries) > len(panels):
        caption += f" {len(panels)} of {len(summaries)} nodes shown: those with the highest sy+si and a stored series."
    return Picture(slug, title, timeline_svg(slug, title, panels), caption,
                           csv=timeline_csv(run["id"], [(h, tl) for h, _, tl, _ in panels]))


def timeline_csv(run_id: str, panels: list[tuple[str, dict]]) -> str:
    """The drawn values: one row per node and interval, text cells safe from formula injection."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for host, tl in panels:
        for i, t in enumerate(tl["t"]):
            w.writerow([csvsafe.cell(run_id), csvsafe.cell(host), repr(t), repr(tl["dt"][i]),
                        *(repr(tl[k][i]) for k in ("user", "system", "softirq", "irq", "iowait", "steal", "idle")),
                        tl["retransmits"][i], repr(tl["retransmits_per_s"][i])])
    return buf.getvalue()


def timeline_svg(slug: str, title: str, panels: list[tuple[str, dict, dict, object]]) -> str:
    """One panel per node: stacked CPU time shares over the run, retransmits per second on a second axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    with matplotlib.rc_context(_STYLE | {"svg.hashsalt": slug, "axes.spines.right": True}):
        figure, axes = plt.subplots(len(panels), 1, figsize=(7.5, 1.1 + 1.75 * len(panels)), sharex=True,
                                    layout="constrained", squeeze=False)
        span = max(tl["t"][-1] for _, _, tl, _ in panels) or 1.0  # the nodes' series cover the same run
        for ax, (host, summary, tl, _series) in zip(axes[:, 0], panels, strict=True):
            xs = [tl["t"][0] - tl["dt"][0], *tl["t"]]  # each value holds over the interval that ends at its t
            ax.stackplot(xs, *[[tl[key][0], *tl[key]] for key, _, _ in STACKED], step="pre",
                         colors=[c for _, _, c in STACKED], labels=[label for _, label, _ in STACKED], linewidth=0)
            ax.set_ylim(0, 100)
            ax.set_xlim(0, span)
            ax.set_ylabel("% of CPU time")
            ax.set_title(summary_line(host, summary), fontsize=8.5, loc="left")
            ax.set_axisbelow(True)  # grid lines behind the areas, not across them
            ax.grid(True, axis="y", color="#dddddd", linewidth=0.6)
            right = ax.twinx()
            right.yaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
            right.step(xs, [tl["retransmits_per_s"][0], *tl["retransmits_per_s"]], where="pre", color="#000000",
                       linewidth=1.0, label="TCP retransmits/s")
            right.set_ylim(0, max(1.0, max(tl["retransmits_per_s"]) * 1.15))
            right.set_ylabel("retransmits/s")
        axes[-1, 0].set_xlabel("seconds since the first sample of the earliest node")
        figure.suptitle(title, fontsize=10)
        handles, labels = axes[0, 0].get_legend_handles_labels()
        extra_h, extra_l = axes[0, 0].figure.axes[-1].get_legend_handles_labels()
        figure.legend(handles + extra_h, labels + extra_l, loc="outside lower center", ncol=7, frameon=False,
                      fontsize=8)
        return svg_element(figure)
