"""Tuning section: what a `system:` sweep did, each set of settings a series, beside the TCP
retransmissions and timeouts its runs caused.

The studies' tables were "baseline against optimisation", one setting at a time, with the settings
only in folder names. Here the settings are the runs' `system.*` parameters (applied on the nodes
and read back in each run's state). The baseline is the configuration that holds each setting's
most common value, and every other configuration is named by how it differs from it.
For every benchmark of the sweep the table gives its figure of merit per configuration (median
with the range over repeats, and the change against the baseline) and, from the activity
samplers, the TCP retransmissions and timeouts per run summed over the run's nodes, so a faster
`rto_min` can be read against the drops it recovers from. Ping-pong runs are also drawn:
bandwidth and latency against message size, one series per configuration.
"""

from __future__ import annotations

from collections import Counter
from statistics import median

from clusterbench.analysis.dataset import Dataset
from clusterbench.execution.request import SETTING_PREFIX
from clusterbench.report import repeats
from clusterbench.report.figures import aggregate
from clusterbench.report.model import Figure, Section, Table

BASELINE = "baseline"
def headlines() -> dict[str, list[tuple[str, str | None, str | None]]]:
    """Each benchmark's headline in a tuning study, as its metrics declare it (ReportUse "tuning",
    "headline"; `pick`: the label whose smallest or largest value is the one shown): benchmark ->
    [(metric, label, smallest|largest)]."""
    from clusterbench.bench import registry

    out: dict[str, list[tuple[str, str | None, str | None]]] = {}
    for drawn in registry.drawn("tuning", "headline"):
        out.setdefault(drawn.benchmark, []).append((drawn.spec.name, *(drawn.use.pick or (None, None))))
    return out


def metrics() -> set[str]:
    return {name for heads in headlines().values() for name, _, _ in heads}


def _settings(run: dict) -> dict[str, str]:
    return {k[len(SETTING_PREFIX):]: str(v) for k, v in run["params"].items() if k.startswith(SETTING_PREFIX)}


def configurations(runs: dict[str, dict]) -> tuple[dict[str, str], str, list[str]]:
    """run id -> its configuration's label, the baseline's description, and the settings that vary.

    A configuration is labelled by how it differs from the baseline (`tcp_sack=0, rto_min=5ms`),
    with each key's last part when that is unambiguous, so legends stay short; the baseline is
    `baseline`."""
    values: dict[str, Counter] = {}
    for run in runs.values():
        for key, value in _settings(run).items():
            values.setdefault(key, Counter())[value] += 1
    varying = sorted(k for k, c in values.items() if len(c) > 1)
    usual = {k: values[k].most_common(1)[0][0] for k in varying}
    last = [k.rsplit(".", 1)[-1] for k in varying]
    short = {k: (s if last.count(s) == 1 else k) for k, s in zip(varying, last, strict=True)}

    def label(settings: dict[str, str]) -> str:
        changed = [f"{short[k]}={settings.get(k, '-')}" for k in varying if settings.get(k) != usual[k]]
        return ", ".join(changed) or BASELINE

    described = ", ".join(f"{k}={usual[k]}" for k in varying) or "the settings as set"
    return {rid: label(_settings(run)) for rid, run in runs.items()}, described, varying


def _tcp(run: dict) -> tuple[int | None, int | None, float | None]:
    """Retransmitted segments and timeouts summed over the run's nodes, and its busiest node's sy+si %."""
    retrans = timeouts = None
    busiest = None
    for summary in (run["facts"].get("activity") or {}).values():
        if not isinstance(summary, dict) or "error" in summary:
            continue
        tcp = summary.get("tcp") or {}
        if isinstance(tcp.get("retransmits"), int):
            retrans = (retrans or 0) + tcp["retransmits"]
        if isinstance(tcp.get("timeouts"), int):
            timeouts = (timeouts or 0) + tcp["timeouts"]
        if isinstance(summary.get("sy_si_percent"), int | float):
            busiest = max(busiest or 0.0, float(summary["sy_si_percent"]))
    return retrans, timeouts, busiest


def _headline_values(data: Dataset, run_ids: set[str], name: str, label: str | None,
                     pick: str | None) -> dict[str, tuple[float, str]]:
    """run id -> (value, what it is) for one headline metric, valid values only."""
    rows = data.of(name)
    rows = rows[rows["run_id"].isin(run_ids)]
    out: dict[str, tuple[float, str]] = {}
    for run_id, group in rows.groupby("run_id"):
        if label is None:
            best = group["value"].max() if group["higher_is_better"].iloc[0] else group["value"].min()
            out[run_id] = (float(best), name)
            continue
        keyed = [(rec.labels.get(label), rec.value) for rec in group.itertuples() if rec.labels.get(label) is not None]
        if keyed:
            at, value = (min if pick == "smallest" else max)(keyed, key=lambda kv: kv[0])
            out[run_id] = (float(value), f"{name} at {label}={at}")
    return out


def section(data: Dataset, _options) -> Section | None:
    runs = {rid: r for rid, r in data.runs.items() if _settings(r)}
    if not runs:
        return None
    label_of, described, varying = configurations(runs)
    out = Section("tuning", "System settings", [
        "Runs made with system: settings (docs/settings.md), applied on every node of a run before it and "
        "restored after; each run's state shows the values really in effect. A configuration is named by the "
        f"settings in which it differs from the baseline, which holds each setting's most common value "
        f"({described}). TCP retransmissions and timeouts are per run, summed over its nodes, from "
        "the activity samplers (node-wide counters: other traffic on a node counts too)."])
    table = Table("tuning-configurations", "Figure of merit and TCP trouble per configuration",
                  ["benchmark", "configuration", "metric", "n", "median", "min", "max", "CV (%)", "spread",
                   "change vs baseline (%)", "retransmits / run", "timeouts / run", "max sy+si %", "runs"], [],
                  note=repeats.note())
    flagged = {rid for rid in runs if not repeats.counted(data, rid)}
    if flagged:
        shown = sorted(flagged)[:20]
        out.paragraphs.append(f"{len(flagged)} flagged run(s) are not counted: "
                              + repeats.runs_flags(data, shown) + (" ..." if len(flagged) > 20 else ""))
    declared = headlines()
    for benchmark in sorted({r["benchmark"] for r in runs.values()}):
        ids = {rid for rid, r in runs.items() if r["benchmark"] == benchmark and rid not in flagged}
        for name, label, pick in declared.get(benchmark, ()):
            values = _headline_values(data, ids, name, label, pick)
            by_config: dict[str, list[str]] = {}
            for rid in sorted(values):
                by_config.setdefault(label_of[rid], []).append(rid)
            base = by_config.get(BASELINE)
            base_median = median(values[r][0] for r in base) if base else None
            for config in sorted(by_config, key=lambda c: (c != BASELINE, c)):
                rids = by_config[config]
                vals = [values[r][0] for r in rids]
                mid = median(vals)
                change = round(100 * (mid - base_median) / base_median, 1) if base_median else None
                tcp = [_tcp(runs[r]) for r in rids]
                spread = repeats.describe(vals)
                table.rows.append([benchmark, config, values[rids[0]][1], len(vals), mid, min(vals), max(vals),
                                   repeats.cv_percent(spread), repeats.mark(spread), change,
                                   _median([t[0] for t in tcp]), _median([t[1] for t in tcp]),
                                   _median([t[2] for t in tcp]), rids])
    if table.rows:
        out.tables.append(table)
    _pingpong_figures(data, runs, label_of, out)
    return out if out.tables or out.figures else None


def _median(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return median(known) if known else None


def _pingpong_figures(data: Dataset, runs: dict[str, dict], label_of: dict[str, str], out: Section) -> None:
    ids = {rid for rid, r in runs.items() if r["benchmark"] == "pingpong"}
    for slug, name, title, y_label, y_log in (
            ("tuning-pingpong-bandwidth", "pingpong_bandwidth", "Ping-pong bandwidth per configuration", "MB/s", None),
            ("tuning-pingpong-latency", "pingpong_time_us", "Ping-pong time per configuration", "us", 10)):
        rows = data.of(name)
        rows = rows[rows["run_id"].isin(ids)]
        samples = [(label_of[rec.run_id], rec.labels["bytes"], rec.value, rec.run_id)
                   for rec in rows.itertuples() if rec.labels.get("bytes")]
        if samples:
            out.figures.append(Figure(slug, title, "message size", y_label, aggregate(samples), x_log=2, y_log=y_log,
                                      x_bytes=True, caption="Means over repeats, bars the minimum and maximum; "
                                                            "one series per configuration of settings."))
