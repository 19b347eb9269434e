"""HPL section: Rmax against NB per BLAS, Rmax against node count per BLAS under Rpeak, the best
configuration per node count and BLAS, a baseline-against-optimisation table, and the invalid
runs kept apart.

Every HPL figure comes from the `hpl_gflops` metric, whether a standalone xhpl, HPCC's HPL
phase or an imported output wrote it; the N, NB, P and Q are the ones the output states. Which
metric that is, and which benchmarks store it, is their declaration (bench/declare.py): the
metrics with an `hpl` use in the role `rmax`.

The figures are shaped by what varies (analysis/shape.py), the studies' way: each point is the
best valid Rmax over the process grids, the T/V variants, N and repeats that share its NB (or
node count), and the CSV beside the figure carries the winner's grid, variant and N. Lines are
the BLAS (and whatever else tells configurations apart: a tuning, a tag); panels the node count
and the ranks or threads when they vary. An invalid value is never drawn, averaged or best.

The tables pool runs only when they are the same configuration (analysis/identity.py: a 1-core and a
1-node run are two rows, a node count no file or tag states is 'not stated', never 1); every row of
repeats shows n and CV (high CV marked); a flagged run (truncated, suspect, disturbed, excluded) is
listed apart and never a best; equal bests are a tie; % of Rpeak needs a known node count and peak.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from clusterbench.analysis import identity, shape
from clusterbench.analysis.dataset import Dataset
from clusterbench.bench import registry
from clusterbench.report import baselines, repeats
from clusterbench.report.figures import axis_label, shaped_figure
from clusterbench.report.model import Options, Point, Section, Series, Table
from clusterbench.report.system import node_peak, run_node_peak

NUISANCE = ("grid", "p", "q", "tv", "n", "grids")  # what the studies take the best over
# Lines: the BLAS, a tuning, then the machine before how its nodes were linked: a machine's scaling
# curve is one line even though its one-node point ran over shared memory and the others over a fabric.
# The batch cluster and host group an imported job report names are machines of their own: never one line.
SERIES = tuple(dict.fromkeys(("blas", "tuning", "system", "cluster", "host_group", *shape.DEFAULT_SERIES)))
MACHINE_KEYS = ("cluster", "host_group", "blas_loaded")  # identity keys the figures' values must carry
BY_NB = shape.Family(x=("nb",), series=SERIES, nuisance=NUISANCE, combine=shape.BEST, always=("blas",))
BY_NODES = shape.Family(x=("nodes",), series=SERIES, nuisance=NUISANCE, combine=shape.BEST, facets=False,
                        always=("blas",))
Y_LABEL = "Rmax (Gflop/s)"


def rmax() -> tuple[list[str], list[str]]:
    """The Rmax metrics (Gflop/s) and the benchmarks that store them, as declared."""
    drawn = registry.drawn("hpl", "rmax")
    return list(dict.fromkeys(d.spec.name for d in drawn)), list(dict.fromkeys(d.benchmark for d in drawn))


def metrics() -> set[str]:
    return set(rmax()[0])


def label_keys() -> tuple[str, ...]:
    """The labels that say what an Rmax value solved (T/V, N, NB, P, Q), as declared."""
    return tuple(dict.fromkeys(k for d in registry.drawn("hpl", "rmax") for k in d.spec.labels))


def section(data: Dataset, options: Options) -> Section | None:
    names, benchmarks = rmax()
    rows = data.of(*names, valid=None)
    hpl_runs = data.runs_of(*benchmarks)
    if rows.empty and not hpl_runs:
        return None
    valid = rows[rows["valid"].astype(bool)]  # an empty object column would select columns, not rows
    peak = node_peak(data, options)
    out = Section("hpl", "HPL", [])
    if peak:
        out.paragraphs.append(f"Rpeak per node: {peak.node_gflops:.2f} Gflop/s ({peak.derivation}).")
    else:
        out.paragraphs.append("Rpeak unknown (imported runs only): give --rpeak-node to draw it.")
    values = repeats.with_identity(shape.frame(data, valid, label_keys=label_keys()), data, MACHINE_KEYS, shape.RUN)
    if len(values):
        _figures(values, data, options, peak, out)
    out.tables.append(_configurations(values, data))
    bad = [r for r in hpl_runs if r["status"] != "ok"]
    bad_ids = set(rows.loc[~rows["valid"].astype(bool), "run_id"]) - {r["id"] for r in bad}
    bad += [data.runs[i] for i in sorted(bad_ids)]
    shown = {r["id"] for r in bad}
    flagged = [r for r in hpl_runs if r["id"] not in shown and not repeats.counted(data, r["id"])]
    if bad or flagged:
        out.tables.append(Table(
            "hpl-invalid", "Invalid, failed, unfinished or flagged HPL runs (never averaged nor a best)",
            ["runs", "benchmark", "status", "reason", "flags", "notes"],
            [[[r["id"]], r["benchmark"], r["status"], r["reason"], repeats.flag_text(r), repeats.notes_text(r)]
             for r in bad + flagged]))
    return out


def _figures(values: pd.DataFrame, data: Dataset, options: Options, peak, out: Section) -> None:
    choice = options.choice_for(rmax()[0])
    drawn: list[tuple] = []
    by_nodes = None
    for slug, family in (("hpl-rmax-vs-nb", BY_NB), ("hpl-rmax-vs-nodes", BY_NODES)):
        found = shape.infer(values, family, choice)
        if family is BY_NODES:
            by_nodes = found
        same = (found.x, found.series, found.facets, found.combine)
        if found.x is None or same in drawn or not (choice or found.x_varies or (found.x == "nodes" and peak)):
            continue  # one NB is no curve; one node count is a point only under a known peak
        drawn.append(same)
        drawing = shape.draw(values, found, default_label="Rmax")
        references = _peak_lines(drawing, peak, options) if found.x == "nodes" and peak else []
        what = "block size NB" if found.x == "nb" else "node count" if found.x == "nodes" else shape.name(found.x)
        title = choice.title if choice and choice.title else f"HPL Rmax against {what}"
        extra = "The lines are Rpeak and a fraction of it." if references else ""
        figure, table = shaped_figure(slug, title, axis_label(found.x), Y_LABEL, drawing, references, extra,
                                      x_integer=True)
        out.figures += [figure] if figure else []
        out.tables += [table] if table else []
    if by_nodes is not None:  # a best per node count, 'not stated' a count of its own (no file or tag said)
        best = replace(by_nodes, x="nodes", facets=[], combine=shape.BEST)
        out.tables.append(_best_table(values, best, data, options))
        if by_nodes.x is not None:
            out.tables += baselines.tables(values, best, data)


def _peak_lines(drawing: shape.Drawing, peak, options: Options) -> list[Series]:
    counts = sorted({p.x for panel in drawing.panels for s in panel.series for p in s.points} | {1.0})
    return [Series("Rpeak", [Point(c, peak.node_gflops * c) for c in counts], reference=True),
            Series(f"{options.rpeak_fraction:.0%} of Rpeak",
                   [Point(c, options.rpeak_fraction * peak.node_gflops * c) for c in counts], reference=True)]


def _label(rec: dict, keys: list[str]) -> str:
    return shape.series_label(keys, tuple(rec.get(k) for k in keys)) if keys else ""


BEST_COLUMNS = ["nodes", "N", "NB", "P x Q", "variant", "Rmax (Gflop/s)", "% of Rpeak", "T/V", "tie", "note", "runs"]


def _best_table(values: pd.DataFrame, best: shape.Shape, data: Dataset, options: Options) -> Table:
    """One row per node count and BLAS (and whatever else the lines are): the winning run. Only counted
    runs compete (no truncated, suspect, disturbed or excluded run is a best), and no value above 100%
    of Rpeak (impossible: it is flagged, never a best). Equal best values are a tie: every tied run is
    shown. % of Rpeak needs the run's known node count and the peak of its own system."""
    table = Table("hpl-best", "Best configuration per node count and BLAS (counted runs only)", BEST_COLUMNS, [],
                  note="Flagged runs (truncated, suspect, disturbed, excluded) and values above 100% of Rpeak are "
                       "never a best; equal best values are shown as a tie with all their runs. % of Rpeak needs a "
                       "known node count and a known peak.")
    percent, why = _percents(values, data, options)
    fair = values[repeats.counted_mask(data, values[shape.RUN]).to_numpy() & ~(percent > 100).to_numpy()]
    if not len(fair):
        return table
    fair = fair.assign(nodes=fair["nodes"].astype(float).fillna(UNKNOWN_NODES))  # unknown: a group of its own
    group = [k for k in dict.fromkeys([*best.facets, *best.series, best.x]) if k in fair]
    winners = shape.aggregate(fair, best).to_dict("records")
    label_keys = [k for k in best.series if k != "benchmark"]
    gid = identity.configuration_ids(fair[group], group)  # the winners' groups, an unknown value its own
    top = fair[shape.VALUE].groupby(gid).transform("max")
    ties = fair[fair[shape.VALUE].to_numpy() == top.to_numpy()]  # every row equal to its group's best
    tie_gid = gid[ties.index]
    group_of = {(r, v): g for r, v, g in zip(ties[shape.RUN], ties[shape.VALUE], tie_gid, strict=True)}
    members = {g: ties.loc[idx] for g, idx in ties.groupby(tie_gid).groups.items()}
    for rec in sorted(winners, key=lambda r: (r["nodes"], _label(r, best.series))):
        tied = members.get(group_of.get((rec[shape.RUN], rec[shape.VALUE])), fair.iloc[0:0])
        run_ids = sorted(set(tied[shape.RUN])) or [rec[shape.RUN]]
        nodes = None if rec["nodes"] == UNKNOWN_NODES else int(rec["nodes"])
        label = _label(rec, label_keys)
        pct = percent.get(tied.index[0]) if len(tied) else None
        reason = why.get(tied.index[0], "") if len(tied) else ""
        table.rows.append([_shown(nodes), _joined(tied, "n", rec), _joined(tied, "nb", rec),
                           _joined(tied, "grid", rec), f"{rec['benchmark']}, {label}" if label else rec["benchmark"],
                           float(rec[shape.VALUE]), None if pct is None or pct != pct else float(pct),
                           _joined(tied, "tv", rec), f"tie of {len(tied)}" if len(tied) > 1 else "",
                           reason, run_ids])
    return table


UNKNOWN_NODES = -1.0  # a node count no file or tag states: its own row, shown "not stated"


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _joined(rows: pd.DataFrame, key: str, rec: dict):
    """The value of `key` the tied rows share, or their values joined with ' / '."""
    if key not in rows or not len(rows):
        return shape.plain(rec.get(key))
    distinct = list(dict.fromkeys(str(shape.plain(v)) for v in rows[key] if not _missing(shape.plain(v))))
    if len(distinct) <= 1:
        return shape.plain(rows[key].iloc[0])
    return " / ".join(distinct)


def _percents(values: pd.DataFrame, data: Dataset, options: Options) -> tuple[pd.Series, dict]:
    """Per value (index of `values`): % of Rpeak, NaN where it cannot be known, and why: the node count
    must be known (a file or a tag states it) and so must the peak of the run's system."""
    percent = pd.Series(float("nan"), index=values.index)
    why: dict = {}
    per_run: dict[str, tuple[float | None, str]] = {}
    codes, ids = pd.factorize(values[shape.RUN].to_numpy(dtype=object))  # per run, not per value
    for rid in ids.tolist():  # a list: a text column's own iteration costs a lookup per element
        run = data.runs[rid]
        nodes = identity.known_node_count(run)
        node = run_node_peak(data, options, run)
        if nodes is None:
            per_run[rid] = (None, "node count not stated")
        elif not node:
            per_run[rid] = (None, "peak unknown")
        else:
            per_run[rid] = (node * nodes, "")
    peaks = pd.Series(np.asarray([per_run[r][0] for r in ids], dtype=object)[codes] if len(ids) else [],
                      index=values.index, dtype=object)
    known = peaks.notna()
    percent[known] = 100 * values.loc[known, shape.VALUE].astype(float) / peaks[known].astype(float)
    reasons = [per_run[r][1] for r in ids]
    above = (percent > 100).to_numpy()  # NaN: not above
    for index, code, high in zip(values.index.tolist(), codes.tolist(), above.tolist(), strict=True):
        if reasons[code]:
            why[index] = reasons[code]
        elif high:
            why[index] = "above 100% of Rpeak: impossible, flagged suspect"
    return percent, why


CONFIG_COLUMNS = ["configuration", "nodes", "N", "NB", "P x Q", "T/V", "n", "mean", "std", "CV (%)", "min", "max",
                  "spread", "flags", "runs"]
LINE_KEYS = ("n", "nb", "p", "q", "tv")  # what each result line states: part of its configuration
SHOWN_APART = ("nodes", "n", "nb", "p", "q", "tv")  # keys with a column of their own


def _configurations(values: pd.DataFrame, data: Dataset) -> Table:
    """n, mean, std, CV, min and max of every configuration over its counted repeats. A configuration is
    every key the run states (analysis/identity.py: benchmark, system, cluster, host group, nodes, ranks,
    threads, BLAS, MPI, interconnect, settings, tags) with the line's N, NB, P x Q and T/V: a 1-core run
    and a 1-node run are never one row, a key a run does not state is 'not stated' and its own row.
    A flagged run's values are never averaged: each is a row of its own, its flags shown."""
    table = Table("hpl-configurations", "Rmax per configuration (valid runs, Gflop/s)", CONFIG_COLUMNS, [],
                  note=repeats.note())
    if not len(values):
        return table
    runs = values[shape.RUN].to_numpy()
    keys = repeats.identities(data, pd.unique(runs)).reindex(runs).reset_index(drop=True)
    for key in LINE_KEYS:
        if key in values:
            line = values[key].reset_index(drop=True)
            keys[key] = line.where(line.notna(), keys[key]) if key in keys else line
    keys = keys.drop(columns=[c for c in ("grid", "grids") if c in keys])
    varying = identity.varying_keys(keys)
    ids = identity.configuration_ids(keys, varying).to_numpy()
    counted = repeats.counted_mask(data, pd.Series(runs)).to_numpy()
    value = values[shape.VALUE].to_numpy(dtype=float)
    described = [k for k in keys.columns if k not in SHOWN_APART and (k in varying or k in ("benchmark", "blas"))
                 and not _filled(keys, k)]
    groups: dict[tuple, list[int]] = {}
    for i, (gid, ok) in enumerate(zip(ids, counted, strict=True)):
        groups.setdefault((int(gid), "") if ok else (int(gid), runs[i]), []).append(i)
    rows = []
    # each group's first row as a dict (one conversion, not a Series per group): its keys' values
    firsts = keys.iloc[[members[0] for members in groups.values()]].to_dict("records")
    described_groups = repeats.describe_groups(value, list(groups.values()))
    for ((_gid, flagged_run), members), first, stats in zip(groups.items(), firsts, described_groups, strict=True):
        member_runs = sorted(set(runs[members]))
        configuration = ", ".join(f"{k}={identity.shown(first.get(k))}" for k in described)
        grid = (f"{shape.plain(first['p'])}x{shape.plain(first['q'])}" if "p" in first and "q" in first
                and not _missing(first["p"]) and not _missing(first["q"]) else identity.UNKNOWN_TEXT)
        flags = repeats.runs_flags(data, member_runs)
        rows.append([configuration, _shown(first.get("nodes")), _shown(first.get("n")),
                     _shown(first.get("nb")), grid, _shown(first.get("tv")), stats["n"],
                     None if flagged_run else stats["mean"], None if flagged_run else stats["std"],
                     None if flagged_run else repeats.cv_percent(stats), stats["min"], stats["max"],
                     "flagged: not averaged" if flagged_run else repeats.mark(stats), flags, member_runs])
    table.rows = sorted(rows, key=lambda r: tuple(_order(c) for c in r[:6]))
    return table


def _filled(keys: pd.DataFrame, key: str) -> bool:
    """Is `key` a tag that only repeats the key it filled (`tag:threads` = `threads` on every row)?"""
    if not key.startswith("tag:") or key[4:] not in keys:
        return False
    return bool((keys[key].map(identity.shown) == keys[key[4:]].map(identity.shown)).all())


def _shown(value):
    value = shape.plain(value)
    return identity.UNKNOWN_TEXT if value is None else value


def _order(value) -> tuple:
    return (0, float(value), "") if isinstance(value, int | float) else (1, 0.0, str(value))
