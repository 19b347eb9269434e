"""`clusterbench history --noise`: the noise floors learned again from the stored repeats, listed.

The floors (analysis/noise.py) are derived data: this listing recomputes every one from the runs
that count before it shows them, so what it prints is what `compare` and `history` will use.
A table of 80 columns: benchmark and metric, the system, the configuration keys that tell the
listed floors of one benchmark apart, the floor, and the counted values it comes from.
"""

from __future__ import annotations

import json

from rich.markup import escape
from rich.table import Table

from clusterbench.cli.shared import console, open_store
from clusterbench.errors import UserInputError

MAX_LISTED = 200  # floors printed; --json gives all
MAX_CONFIGURATION_CHARS = 36


def show_floors(selection: list[str] | None, metric: str | None, as_json: bool) -> None:
    from clusterbench.analysis import noise
    from clusterbench.analysis.learn_noise import refresh
    from clusterbench.analysis.select import parse_selection, select_runs

    with open_store() as store:
        floors = refresh(store)
        if selection:
            chosen = {run["id"] for run in select_runs(store, parse_selection(selection, store))}
            floors = [f for f in floors if chosen.intersection(f.runs)]
    if metric:
        name = metric.split("[", 1)[0].strip()
        floors = [f for f in floors if f.metric == name]
    if as_json:
        print(json.dumps([f.as_row() | {"configuration": json.loads(f.configuration)} for f in floors], indent=2))
        return
    if not floors:
        raise UserInputError("no noise floor: no configuration has 3 counted repeats"
                             + (" in this selection" if selection or metric else ""),
                             hint="repeat a point: clusterbench bench NAME --repeats auto, or repeats: in a campaign")
    table = Table(title=f"noise floors (robust CV of one run): {len(floors)}", title_justify="left")
    for column, justify in (("benchmark", "left"), ("metric", "left"), ("system", "left"),
                            ("configuration", "left"), ("floor", "right"), ("n", "right")):
        table.add_column(column, justify=justify, overflow="fold")
    shown = floors[:MAX_LISTED]
    varying = _varying(shown)
    for f in shown:
        config = json.loads(f.configuration)
        keys = varying.get(f.benchmark, [])
        words = ", ".join(f"{k}={config.get(k, 'not stated')}" for k in keys) or "-"
        if len(words) > MAX_CONFIGURATION_CHARS:
            words = words[:MAX_CONFIGURATION_CHARS - 3] + "..."
        table.add_row(escape(f.benchmark), escape(f.metric), escape(f.system or "not stated"), escape(words),
                      noise.percent(f.floor), str(f.n))
    console.print(table)
    if len(floors) > len(shown):
        console.print(f"{len(floors) - len(shown)} more floors not shown (--json lists them all)")
    console.print("compare and history: a change within its floor is noise (docs/history.md)", highlight=False)


def _varying(floors) -> dict[str, list[str]]:
    """benchmark -> the configuration keys (system apart) whose values differ among its listed floors."""
    by_benchmark: dict[str, list[dict]] = {}
    for f in floors:
        by_benchmark.setdefault(f.benchmark, []).append(json.loads(f.configuration))
    out = {}
    for benchmark, configs in by_benchmark.items():
        keys = sorted({k for c in configs for k in c} - {"system"})
        out[benchmark] = [k for k in keys if len({c.get(k) for c in configs}) > 1]
    return out
