"""What differs between two runs, or between the two sides of a comparison.

Two numbers are only comparable when what made them is known. Each run is seen as flat
`key -> value` pairs in sections:

- `parameters`: the point of the benchmark, `system.*` settings the campaign asked for included;
- `settings`, `mpi`, `hardware`, `software`: each node's state as read before the run
  (system/state.py), keyed `<node>: <key>`; when both runs used nodes under other names the
  nodes are matched by position (`node 1`, `node 2`, ...);
- `machine`: the store's description of the system the run was planned on (model, cores, kernel, MPI);
- `environment`: the variables stored with the run; `launch`: the launcher and its options;
- `measured`: figures read each run (the core clock); left out unless asked, since they always differ.

`diff` lists the keys whose values differ; `side_summary` folds a selection's runs into the
values they all share, which is what `compare` prints above its verdicts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from clusterbench.errors import UserInputError
from clusterbench.store.db import Store
from clusterbench.store.queries import decoded_run
from clusterbench.system.state import SECTIONS, flatten

VARIES = "(varies)"
ABSENT = "-"
MAX_VALUE_CHARS = 200
MAX_DEPTH = 6
_LAUNCH_SKIP = {"hosts_source", "strategies"}
_MACHINE_KEYS = ("model", "cores", "sockets", "pus", "memory_gib", "kernel", "os", "mpi", "blas", "cc")


@dataclass(frozen=True)
class Difference:
    section: str
    key: str
    a: str
    b: str


def _text(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 3] + "..."


def _flat(prefix: str, value: object, out: dict[str, str], depth: int = 0) -> None:
    if isinstance(value, dict) and depth < MAX_DEPTH:
        for k, v in value.items():
            _flat(f"{prefix}.{k}" if prefix else str(k), v, out, depth + 1)
    else:
        out[prefix] = _text(value)


def run_view(store: Store, run_id: str) -> dict[str, dict[str, str]]:
    """One run as sections of flat key -> value pairs (see the module docstring)."""
    row = store.run(run_id)
    if row is None:
        raise UserInputError(f"no stored run {run_id!r}", hint="list them with `clusterbench results`")
    run = decoded_run(row)
    view: dict[str, dict[str, str]] = {s: {} for s in ("parameters", "environment", "launch", "machine")}
    _flat("", run["params"], view["parameters"])
    view["parameters"]["benchmark"] = run["benchmark"]
    view["environment"] = {k: _text(v) for k, v in run["env"].items()}
    _flat("", {k: v for k, v in run["launcher"].items() if k not in _LAUNCH_SKIP}, view["launch"])
    view["launch"]["nodes"] = run["nodes"] or ABSENT
    system = store.system(run["system_id"]) if run.get("system_id") else None
    if system is not None:
        facts = json.loads(system["facts"] or "{}")
        view["machine"] = {k: _text(facts[k]) for k in _MACHINE_KEYS if k in facts}
    provenance = run["facts"].get("binary_provenance")
    if isinstance(provenance, dict):
        _flat("binary", provenance, view.setdefault("software", {}))
    for node, node_state in (run["facts"].get("state") or {}).items():
        if not isinstance(node_state, dict):
            continue
        if "error" in node_state and len(node_state) == 1:
            view.setdefault("settings", {})[f"{node}: state"] = f"not read: {_text(node_state['error'])}"
            continue
        for key, value in flatten(node_state).items():
            section = SECTIONS.get(key.split(".", 1)[0], "settings")
            view.setdefault(section, {})[f"{node}: {key}"] = _text(value)
    return view


def _node_names(view: dict[str, dict[str, str]]) -> list[str]:
    names: list[str] = []
    for section in view.values():
        for key in section:
            node, sep, _ = key.partition(": ")
            if sep and node not in names:
                names.append(node)
    return names


def _by_position(view: dict[str, dict[str, str]], names: list[str]) -> dict[str, dict[str, str]]:
    """Node keys renamed `node 1: ...` in the order the run listed its nodes."""
    rename = {name: f"node {i + 1}" for i, name in enumerate(names)}
    out: dict[str, dict[str, str]] = {}
    for section, pairs in view.items():
        out[section] = {}
        for key, value in pairs.items():
            node, sep, rest = key.partition(": ")
            out[section][f"{rename[node]}: {rest}" if sep and node in rename else key] = value
    return out


def align(a: dict[str, dict[str, str]], b: dict[str, dict[str, str]]) -> tuple[dict, dict]:
    """Two views whose node keys can be matched: by name when both ran on the same nodes, else by position."""
    na, nb = _node_names(a), _node_names(b)
    if set(na) == set(nb):
        return a, b
    return _by_position(a, na), _by_position(b, nb)


def diff_views(a: dict[str, dict[str, str]], b: dict[str, dict[str, str]],
               measured: bool = False) -> list[Difference]:
    a, b = align(a, b)
    out = []
    for section in dict.fromkeys([*a, *b]):
        if section == "measured" and not measured:
            continue
        pa, pb = a.get(section, {}), b.get(section, {})
        for key in sorted(pa.keys() | pb.keys()):
            va, vb = pa.get(key, ABSENT), pb.get(key, ABSENT)
            if va != vb:
                out.append(Difference(section, key, va, vb))
    return out


def diff(store: Store, run_a: str, run_b: str, measured: bool = False) -> list[Difference]:
    """Every key whose value differs between two stored runs."""
    return diff_views(run_view(store, run_a), run_view(store, run_b), measured)


def side_summary(store: Store, run_ids: list[str]) -> dict[str, dict[str, str]]:
    """The values the runs of one side share; a key whose value differs between them is `(varies)`."""
    merged: dict[str, dict[str, str]] = {}
    for i, run_id in enumerate(sorted(set(run_ids))):
        view = run_view(store, run_id)
        if i == 0:
            merged = view
            continue
        merged, view = align(merged, view)
        for section in set(merged) | set(view):
            mine, theirs = merged.setdefault(section, {}), view.get(section, {})
            for key in set(mine) | set(theirs):
                if mine.get(key, ABSENT) != theirs.get(key, ABSENT):
                    mine[key] = VARIES
    return merged


def sides_differ(store: Store, a_runs: list[str], b_runs: list[str]) -> list[Difference]:
    """What distinguishes two selections: keys all runs of each side agree on, with other values
    on the two sides (a key that varies within a side says nothing about the sides)."""
    found = diff_views(side_summary(store, a_runs), side_summary(store, b_runs))
    return [d for d in found if VARIES not in (d.a, d.b)]
