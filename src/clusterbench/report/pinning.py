"""Pinning section: what each pinning strategy did to STREAM and HPL, with the placement it produced.

Runs that name a `pinning:` strategy are grouped by strategy (and scaling mode when several were
run). STREAM Triad is drawn against the CPUs used (threads x tasks), HPL's Gflop/s likewise; the
table gives means with their ranges and HPL's time. What it draws is what the benchmarks declare
(bench/declare.py): the metrics with a `pinning` use, `figure` (its id, title and axis) or `column`
(its header), in the uses' order; a metric two benchmarks store (HPCC's HPL lines) is drawn once,
from every run that has it. Beside them, each strategy's placement picture
(pinning/render.py), drawn from the prediction stored with its widest run, so the reader sees why
a strategy that put every task in one NUMA domain lost bandwidth. A run whose observed placement
differed from the prediction is marked in the table and in the picture's caption, and its points
are drawn as their own series ("... observed placement differs").
"""

from __future__ import annotations

from clusterbench.analysis.dataset import Dataset
from clusterbench.bench import registry
from clusterbench.bench.registry import Drawn
from clusterbench.pinning.model import prediction_from_dict
from clusterbench.pinning.render import picture_svg
from clusterbench.report import repeats
from clusterbench.report.figures import aggregate
from clusterbench.report.model import Figure, Picture, Section, Table
from clusterbench.system.sources import from_lscpu_parse

SECTION = "pinning"


def drawn(role: str) -> list[Drawn]:
    """The metrics drawn in this role, each once (the first benchmark that declares it)."""
    found: dict[str, Drawn] = {}
    for d in registry.drawn(SECTION, role):
        found.setdefault(d.spec.name, d)
    return list(found.values())


def metrics() -> set[str]:
    return {d.spec.name for d in registry.drawn(SECTION)}


def scale(d: Drawn) -> float:
    """Stored value x this = the value as the use shows it (a factor, applied as the section always has)."""
    return d.spec.shown(d.use)(1.0)


def workers(run: dict) -> int:
    p = run["params"]
    return int(p.get("threads") or 1) * int(p.get("ranks") or 1)


def verdict(run: dict) -> str:
    return (run["facts"].get("pinning") or {}).get("verdict", "not observed")


def _group(run: dict, with_mode: bool) -> str:
    p = run["params"]
    label = str(p["pinning"])
    if with_mode and p.get("scaling"):
        label += f", {p['scaling']} scaling"
    return label + (" (observed placement differs)" if verdict(run) == "mismatch" else "")


def section(data: Dataset, _options) -> Section | None:
    runs = {rid: r for rid, r in data.runs.items() if r["params"].get("pinning")}
    if not runs:
        return None
    with_mode = len({r["params"].get("scaling") for r in runs.values()}) > 1
    out = Section("pinning", "Pinning strategies", [
        "Each strategy is a named placement (docs/pinning.md), translated for the launcher that ran it. Points "
        "are means over repeats, bars the minimum and maximum. The pictures show the predicted placement of "
        "each strategy's widest run: one block per NUMA domain, a column per core, the first hardware thread "
        "of each core above its SMT siblings, each cell the task bound there. Every run's real placement was "
        "sampled while it ran and compared with the prediction."])
    for d in drawn("figure"):
        factor = scale(d)
        samples = [(_group(runs[rec.run_id], with_mode), workers(runs[rec.run_id]), rec.value * factor, rec.run_id)
                   for rec in data.of(d.spec.name).itertuples(index=False) if rec.run_id in runs]
        if samples:
            axis = d.use.axis or d.use.unit or d.spec.unit
            out.figures.append(Figure(d.use.key, d.use.title, "threads x tasks", axis, aggregate(samples),
                                      x_integer=True))
    out.tables.append(_table(data, runs))
    out.pictures += _pictures(runs, with_mode)
    return out


def _row_key(run: dict) -> tuple:
    p = run["params"]
    return p["pinning"], p.get("scaling") or "-", workers(run), f"{p.get('ranks') or 1} x {p.get('threads') or 1}"


def effective(run: dict) -> str:
    """What the launcher really did ('bind_to=core, map_by=core'), as recorded with the prediction from
    its documented defaults and checked by the probes (facts.pinning.effective): a strategy that leaves
    an option unset ('default') is labelled by what ran, not by an invented 'none'."""
    found = ((run.get("facts") or {}).get("pinning") or {}).get("effective") or {}
    return ", ".join(f"{k}={v}" for k, v in found.items() if k not in ("from", "checked") and v not in (None, ""))


def _table(data: Dataset, runs: dict[str, dict]) -> Table:
    """One row per strategy, mode and size: the declared columns (STREAM Triad, HPL's Gflop/s and time) as
    mean (min-max), n and CV over counted repeats (a flagged run is never averaged: named apart), what the
    launcher did, the placement verdicts."""
    groups: dict[tuple, list[dict]] = {}
    for run in runs.values():
        groups.setdefault(_row_key(run), []).append(run)
    columns = drawn("column")
    names = [d.spec.name for d in columns]
    samples: dict[tuple[tuple, str], list[float]] = {}
    for d in columns:
        factor = scale(d)
        for rec in data.of(d.spec.name).itertuples(index=False):
            if rec.run_id in runs and repeats.counted(data, rec.run_id):
                samples.setdefault((_row_key(runs[rec.run_id]), d.spec.name), []).append(rec.value * factor)
    rows = []
    for key in sorted(groups):
        members = groups[key]
        verdicts = sorted({verdict(r) for r in members})
        migrations = sum((r["facts"].get("pinning") or {}).get("migrations", 0) for r in members)
        stats = {name: repeats.describe(samples.get((key, name), [])) for name in names}
        high = [name for name, st in stats.items() if st["high"]]
        flagged = [r["id"] for r in members if not repeats.counted(data, r["id"])]
        rows.append([*key, *[repeats.cell_text(stats[name]) for name in names],
                     f"{repeats.HIGH_CV} ({', '.join(high)})" if high else "",
                     "; ".join(sorted({effective(r) for r in members} - {""})) or "not recorded",
                     ", ".join("MISMATCH" if v == "mismatch" else v for v in verdicts), migrations,
                     repeats.runs_flags(data, flagged), sorted(r["id"] for r in members)])
    return Table("pinning-table", "Strategies: STREAM Triad (GB/s), HPL Gflop/s and time (s), mean (min-max), n, CV",
                 ["strategy", "scaling", "CPUs", "tasks x threads", *(d.use.title for d in columns), "spread",
                  "ran as", "placement", "migrations", "flagged runs (not averaged)", "runs"], rows,
                 note="ran as: the launcher's effective binding and mapping (its documented defaults filled in, "
                      "checked by the probes). placement: match = every rank and thread ran where predicted; "
                      "MISMATCH = at least one did not (the run's facts say which); partial = not every thread was "
                      "seen. migrations: the kernel's se.nr_migrations summed over every thread of the row's runs. "
                      + repeats.note())


def _pictures(runs: dict[str, dict], with_mode: bool) -> list[Picture]:
    """One picture per strategy (and mode): the prediction stored with its widest observed run."""
    best: dict[str, dict] = {}
    for run in runs.values():
        placed = run["facts"].get("pinning") or {}
        if not placed.get("prediction") or not placed.get("node_layout"):
            continue
        label = _group(run, with_mode).removesuffix(" (observed placement differs)")
        if label not in best or workers(run) > workers(best[label]):
            best[label] = run
    pictures = []
    for i, (label, run) in enumerate(sorted(best.items())):
        placed = run["facts"]["pinning"]
        try:
            topology = from_lscpu_parse(placed["node_layout"], source="the run's node")
            svg = picture_svg(prediction_from_dict(placed["prediction"], topology))
        except (ValueError, KeyError, TypeError):
            continue
        p = run["params"]
        caption = (f"{p.get('ranks') or 1} task(s) x {p.get('threads') or 1} thread(s), launcher "
                   f"{placed['prediction'].get('launcher')}"
                   + (f" (ran as {effective(run)})" if effective(run) else "")
                   + f"; run {run['id']}: placement {placed.get('verdict')}")
        if placed.get("verdict") == "mismatch":
            caption += " (observed differs: " + "; ".join(placed.get("problems", [])[:2]) + ")"
        pictures.append(Picture(f"pinning-picture-{i}", label, svg, caption))
    return pictures
