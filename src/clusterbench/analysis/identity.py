"""One definition of "the same configuration": which stored runs are repeats of each other.

Every table, figure, `compare`, `history`, `results --stat` and the tuner pools runs as repeats
only through this module. A run's *identity* is every key it states about what ran:

- the benchmark, the machine (`system`: the stored system's host name, else a `system` tag),
  the batch cluster and host group an imported job report names (`cluster`, `host_group`: two
  host groups of one LSF cluster are different hardware);
- the node count (`nodes`), from a parameter, a tag given at import (`--tag nodes=8`), the run's
  node list, or, for a run clusterbench itself ran on one machine, 1. An imported run whose file
  states none has an **unknown** node count: None, never 1;
- every parameter (ranks, threads, BLAS, MPI, interconnect, N, NB, grids, settings...) but the
  ones that only number repeats; a tag given at import fills a parameter the file does not state;
- the BLAS the run really loaded (`blas_loaded`), when it was recorded;
- every tag (`tag:K`); tags that do not vary in a selection split nothing.

A key a run does not state is unknown (None). Two runs are the same configuration when every key
either of them has is equal, an unknown value counting as a value of its own: a run that states
threads=4 is never pooled with one that does not say, and tables show the unknown one apart, as
"not stated". `differing_keys` says which keys keep two runs apart (the reason a baseline or a
comparison is refused).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

import pandas as pd

NOT_CONFIGURATION = frozenset({"repeat", "run", "run_id", "samples"})  # number repeats, not settings
FILLED_BY_TAGS = ("nodes", "ranks", "threads", "blas", "mpi", "interconnect", "system", "host_group", "cluster")
JOB_KEYS = ("cluster", "host_group")  # from an imported job report (facts.job)
UNKNOWN_TEXT = "not stated"
MAX_VALUE_CHARS = 200


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def known_node_count(run: dict) -> int | None:
    """Nodes a run used, or None when nothing says: its `nodes` (or `hosts`) parameter, a `nodes`
    tag (given at import), its node list, else 1 only for a run clusterbench ran itself (it knows
    it ran on this one machine). An imported file that states no node count is unknown."""
    params, tags = run.get("params") or {}, run.get("tags") or {}
    for value in (params.get("nodes"), params.get("hosts"), _tag_int(tags.get("nodes"))):
        if (count := _count(value)) is not None:
            return count
    if run.get("nodes"):
        from ClusterShell.NodeSet import NodeSet

        try:
            return max(1, len(NodeSet(run["nodes"])))
        except Exception:  # noqa: BLE001 - an imported free-text field, not a node set
            return None
    return None if run.get("source") == "import" else 1


def node_count_source(run: dict) -> str:
    """Where `known_node_count` took the run's node count from, in words (for a reason or a caption)."""
    params, tags = run.get("params") or {}, run.get("tags") or {}
    if _count(params.get("nodes")) is not None:
        return "stated by the run"
    if _count(params.get("hosts")) is not None:
        return "hosts stated in the file"
    if _count(_tag_int(tags.get("nodes"))) is not None:
        return "from the tag nodes"
    if run.get("nodes"):
        return "from its node list"
    return "not stated" if run.get("source") == "import" else "ran here, on one machine"


def _tag_int(value):
    """A tag's value as a count: tags given on the command line may arrive as text ('8')."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return value


def _plain(value):
    """A value usable as a key: numbers and short text as they are, lists joined, else None."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return None if isinstance(value, float) and math.isnan(value) else value
    if isinstance(value, str):
        return value if len(value) <= MAX_VALUE_CHARS else None
    if isinstance(value, list | tuple | dict):
        text = json.dumps(value, sort_keys=True, default=str)
        return text if len(text) <= MAX_VALUE_CHARS else None
    return None


def run_identity(run: dict, hostname: str | None = None) -> dict[str, object]:
    """The keys of one decoded run (params, tags, facts as dicts) that say what ran; a key the run
    does not state is absent here, and None is never a value. `hostname`: its stored system's."""
    params, tags = run.get("params") or {}, run.get("tags") or {}
    facts = run.get("facts") or {}
    keys: dict[str, object] = {"benchmark": run.get("benchmark")}
    for key, value in params.items():
        if key not in NOT_CONFIGURATION and not str(key).startswith(("tag:", "@")):
            if (plain := _plain(value)) is not None:
                keys[key] = plain
    for key, value in tags.items():
        if (plain := _plain(value)) is None:
            continue
        keys[f"tag:{key}"] = plain
        if key in FILLED_BY_TAGS and key not in keys:  # a tag fills what the file does not state
            keys[key] = _tag_int(plain) if key in ("nodes", "ranks", "threads") else plain
    job = facts.get("job") or {}
    for key in JOB_KEYS:
        if job.get(key) and key not in keys:
            keys[key] = str(job[key])
    system = hostname or keys.get("system")
    if system:
        keys["system"] = system
    keys.pop("hosts", None)  # what `nodes` counts
    nodes = known_node_count(run)
    if nodes is None:
        keys.pop("nodes", None)
    else:
        keys["nodes"] = nodes
    if facts.get("blas_loaded_variant"):
        keys["blas_loaded"] = facts["blas_loaded_variant"]
    for key, value in effective_placement(run).items():  # what the launcher did where nothing was asked
        keys.setdefault(key, value)
    return keys


EFFECTIVE_KEYS = ("bind_to", "map_by", "rank_by", "cpu_bind", "distribution")


def effective_placement(run: dict) -> dict[str, str]:
    """The launcher's effective binding and mapping of a run (facts.pinning.effective: worked out
    from its documented defaults and checked by the probes), for the keys its parameters leave
    unset: a `pinning: default` run is labelled by what ran (Open MPI: bound to a core), not by
    a binding nobody asked for."""
    effective = ((run.get("facts") or {}).get("pinning") or {}).get("effective") or {}
    params = run.get("params") or {}
    return {k: str(effective[k]) for k in EFFECTIVE_KEYS
            if effective.get(k) and params.get(k) in (None, "")}


def identity_frame(runs: dict[str, dict], hostnames: dict[str, str | None] | None = None) -> pd.DataFrame:
    """One row per run (index: run id), one column per identity key over all runs; NaN/None where
    a run does not state the key (unknown). `hostnames`: system id -> stored host name."""
    hostnames = hostnames or {}
    records = {rid: run_identity(run, hostnames.get(run.get("system_id") or "")) for rid, run in runs.items()}
    frame = pd.DataFrame.from_dict(records, orient="index") if records else pd.DataFrame()
    return frame


def varying_keys(frame: pd.DataFrame) -> list[str]:
    """The identity keys that take more than one value (unknown counting as one) in these runs."""
    return [c for c in frame.columns if frame[c].astype(object).map(_text).nunique(dropna=False) > 1]


def configuration_ids(frame: pd.DataFrame, keys: Iterable[str] | None = None) -> pd.Series:
    """A group number per run: runs share one exactly when every key (all columns by default) is
    equal, an unknown value being a value of its own (13440.0, 13440 and '13440' are one value).
    The one grouping every repeat table uses. Each distinct value of a key is put in words once,
    then the rows are grouped on small integers: 100,000 runs take a fraction of a second."""
    import numpy as np

    keys = list(frame.columns if keys is None else keys)
    if frame.empty:
        return pd.Series([], dtype="int64", index=frame.index)
    if not keys:
        return pd.Series(0, index=frame.index, dtype="int64")
    columns = []
    for key in keys:
        codes, uniques = pd.factorize(frame[key].astype(object), use_na_sentinel=True)
        words = [_text(u) for u in uniques]
        word_codes = np.asarray(pd.factorize(pd.Series(words, dtype=object), use_na_sentinel=True)[0],
                                dtype="int64")
        mapped = word_codes[np.clip(codes, 0, None)] if len(word_codes) else np.full(len(codes), -1)
        columns.append(np.where(codes >= 0, mapped, -1))
    table = pd.DataFrame(np.column_stack(columns), index=frame.index)
    return table.groupby(list(table.columns), sort=False).ngroup().astype("int64")


def same_configuration(a: dict, b: dict, ignore: Iterable[str] = ()) -> bool:
    """Are two identities (run_identity) the same configuration, keys in `ignore` aside?"""
    return not differing_keys(a, b, ignore)


def differing_keys(a: dict, b: dict, ignore: Iterable[str] = ()) -> list[str]:
    """The keys two identities disagree on, a key one of them does not state included (sorted)."""
    skip = set(ignore)
    return sorted(k for k in (a.keys() | b.keys()) - skip if _text(a.get(k)) != _text(b.get(k)))


def _text(value) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def shown(value) -> str:
    """A key's value in a table: the value, or 'not stated' when the run does not say."""
    return UNKNOWN_TEXT if _text(value) is None else _text(value)
