"""The figures a user asked for by name: each figure of `--spec report.yaml`, and `--metric M` with
--x/--series/... for a metric no section draws. Each is shaped by analysis/shape.py like the
sections' figures; what the user fixed is used, the rest inferred.

A figure that cannot be drawn as asked is an input error (exit 2) that names the figure, the
field and, for report.yaml, its line: a metric the selection does not hold (with those it does),
a key its values do not have (with those they have), a label filter that leaves nothing.
"""

from __future__ import annotations

from clusterbench.analysis import shape
from clusterbench.analysis.dataset import Dataset
from clusterbench.bench import registry
from clusterbench.errors import UserInputError
from clusterbench.report.figures import axis_label, shaped_figure
from clusterbench.report.model import Options, Section
from clusterbench.report.spec import located
from clusterbench.store.db import Store

GENERIC = shape.Family(x=("bytes", "nb", "workers", "threads", "nodes", "n", "ranks", "ppn"))
MAX_NAMES_SHOWN = 40


def metrics(options: Options) -> set[str]:
    """The metrics the asked-for figures read (so the dataset loads them)."""
    asked = [c.metric for c in options.figures] + [options.choice.metric if options.choice else None]
    return {m for m in asked if m}


def stored_metrics(store: Store, data: Dataset) -> list[str]:
    return store.metric_names(list(data.runs))


def section(store: Store, data: Dataset, options: Options) -> Section | None:
    if not options.figures:
        return None
    out = Section("figures", "Figures asked for", [
        "Figures named with --metric or in the report spec (--spec); what they did not fix was inferred from "
        "what varies. Invalid values are never drawn."])
    for i, choice in enumerate(options.figures):
        try:
            _figure(store, data, choice, i, out)
        except UserInputError as exc:
            raise located(exc, choice, i) from None
    return out


def _label_keys(choice: shape.Choice) -> tuple[str, ...] | None:
    """The labels that say what a value measured, as its benchmark declares them (HPL: T/V, N, NB, P, Q),
    plus those the figure filters on; never the outputs stored beside them (a residual, a start time),
    which would split every value into a panel of its own. None (every label) for an undeclared metric."""
    for cls in registry.registered():
        for spec in cls.metrics:
            if spec.name == choice.metric:
                return tuple(dict.fromkeys((*spec.labels, *(choice.labels or {}))))
    return None


def _best_over(metric: str) -> tuple[str, ...] | None:
    """The keys a figure of this metric takes the best over, as its benchmark declares them (a `figures`
    use in the `best` role: HPL's Rmax, best over grid, N, ...); None: the mean over repeats."""
    return next((d.use.best_over for d in registry.drawn("figures", "best") if d.spec.name == metric), None)


def _figure(store: Store, data: Dataset, choice: shape.Choice, index: int, out: Section) -> None:
    rows = data.of(choice.metric)
    if rows.empty:
        stored = stored_metrics(store, data)
        what = "no valid values" if choice.metric in stored else "no values"
        raise shape.KeyProblem(f"{what} of metric {choice.metric!r} in the selected runs", "metric",
                               hint="metrics of these runs: " + ", ".join(stored[:MAX_NAMES_SHOWN]))
    values = shape.filter_labels(shape.frame(data, rows, label_keys=_label_keys(choice)), choice.labels)
    if not len(values):
        raise shape.KeyProblem(f"labels: no value of {choice.metric} has the labels {choice.labels}", "labels",
                               hint="its labels: " + _label_values(rows))
    best = _best_over(choice.metric)
    family = shape.Family(x=GENERIC.x, nuisance=best or (), combine=shape.BEST if best is not None else shape.MEAN)
    found = shape.infer(values, family, choice)
    if found.x is None:
        raise shape.KeyProblem(f"x: the values of {choice.metric} have no numeric key to draw against", "x",
                               hint="name one with x: (keys here: " + ", ".join(shape.keys_of(values)[:40]) + ")")
    drawing = shape.draw(values, found, default_label=choice.metric)
    unit = rows["unit"].iloc[0]
    by_size = found.x == "bytes"
    title = choice.title or f"{choice.metric} against {shape.name(found.x)}"
    figure, table = shaped_figure(f"figure-{index + 1}", title, axis_label(found.x),
                                  f"{choice.metric} ({unit})" if unit else choice.metric, drawing,
                                  x_log=2 if by_size else None, x_bytes=by_size, x_integer=not by_size)
    out.figures += [figure] if figure else []
    out.tables += [table] if table else []


def _label_values(rows) -> str:
    """'test: PingPong, Sendrecv; bytes: 0, 1, 2, ...': what the labels hold, briefly."""
    seen: dict[str, set] = {}
    for labels in rows["labels"].head(5000):
        for key, value in labels.items():
            if isinstance(value, str | int | float):
                seen.setdefault(key, set()).add(value)
    return "; ".join(f"{k}: " + ", ".join(str(v) for v in sorted(vs, key=str)[:8]) + (", ..." if len(vs) > 8 else "")
                     for k, vs in sorted(seen.items())) or "none"
