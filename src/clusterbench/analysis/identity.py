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
import weakref
from collections.abc import Iterable
from functools import lru_cache
from itertools import chain

import numpy as np
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
        return _node_list_count(run["nodes"]) if isinstance(run["nodes"], str) else _parsed_count(run["nodes"])
    return None if run.get("source") == "import" else 1


@lru_cache(maxsize=4096)
def _node_list_count(text: str) -> int | None:
    """The nodes a node list names, once per distinct text (10,000 imported job reports name a few
    dozen lists: parsing each again cost more than the rest of their identity)."""
    return _parsed_count(text)


def _parsed_count(nodes) -> int | None:
    from ClusterShell.NodeSet import NodeSet

    try:
        return max(1, len(NodeSet(nodes)))
    except Exception:  # noqa: BLE001 - an imported free-text field, not a node set
        return None


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
    kind = type(value)  # the usual kinds first, without the isinstance chain (millions of calls)
    if kind is str:
        return value if len(value) <= MAX_VALUE_CHARS else None
    if kind is int:
        return value
    if kind is list and all(type(v) is str for v in value):  # grids ['1x4', '2x2']: one text per list
        return _joined_texts(tuple(value))
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


@lru_cache(maxsize=4096)
def _joined_texts(values: tuple[str, ...]) -> str | None:
    """`_plain` of a list of texts (JSON, as for any list), once per distinct list."""
    text = json.dumps(list(values), sort_keys=True, default=str)
    return text if len(text) <= MAX_VALUE_CHARS else None


def run_identity(run: dict, hostname: str | None = None) -> dict[str, object]:
    """The keys of one decoded run (params, tags, facts as dicts) that say what ran; a key the run
    does not state is absent here, and None is never a value. `hostname`: its stored system's."""
    params, tags = run.get("params") or {}, run.get("tags") or {}
    facts = run.get("facts") or {}
    keys: dict[str, object] = {"benchmark": run.get("benchmark")}
    for key, value in params.items():
        if _is_parameter_key(key) and (plain := _plain(value)) is not None:
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


@lru_cache(maxsize=4096)
def _is_parameter_key(key) -> bool:
    """Does a parameter of this name say what ran (not a repeat's number, a tag's or an internal name)?
    Decided once per name: 100,000 runs state the same dozen."""
    return key not in NOT_CONFIGURATION and not str(key).startswith(("tag:", "@"))


EFFECTIVE_KEYS = ("bind_to", "map_by", "rank_by", "cpu_bind", "distribution")


def effective_placement(run: dict) -> dict[str, str]:
    """The launcher's effective binding and mapping of a run (facts.pinning.effective: worked out
    from its documented defaults and checked by the probes), for the keys its parameters leave
    unset: a `pinning: default` run is labelled by what ran (Open MPI: bound to a core), not by
    a binding nobody asked for."""
    effective = ((run.get("facts") or {}).get("pinning") or {}).get("effective")
    if not effective:  # most runs: nothing recorded (every imported one)
        return {}
    params = run.get("params") or {}
    return {k: str(effective[k]) for k in EFFECTIVE_KEYS
            if effective.get(k) and params.get(k) in (None, "")}


def identity_frame(runs: dict[str, dict], hostnames: dict[str, str | None] | None = None) -> pd.DataFrame:
    """One row per run (index: run id), one column per identity key over all runs; NaN/None where
    a run does not state the key (unknown). `hostnames`: system id -> stored host name.

    Runs of a live `IdentityTable` (a report's dataset keeps one) are not worked out again: their
    rows are taken from it (the same frame as computed here, for any subset of its runs)."""
    hostnames = hostnames or {}
    if not runs:
        return pd.DataFrame()
    for table in list(_TABLES):
        if table.covers(runs, hostnames):
            return table.frame(list(runs))
    return IdentityTable(runs, hostnames, remember=False).frame()


_MISSING = np.nan  # a key a run does not state: NaN, as pandas fills a missing key of a record


class IdentityTable:
    """`run_identity` of a set of runs, kept column by column (one object array per key): the
    frame of the runs, or of any subset of them, is made from it without working out an identity
    again. A report asks for the identities of its 100,000 runs several times (its dataset, the
    baseline tables, the configuration numbers of every figure); each costs seconds.

    The runs are taken as they are when the table is made: a dataset's runs do not change after
    `load`. With `remember`, `identity_frame` serves the same runs (the same objects, the same host
    names) from this table while it lives (its owner holds it; nothing here keeps it alive)."""

    def __init__(self, runs: dict[str, dict], hostnames: dict[str, str | None] | None = None,
                 remember: bool = True):
        self.hostnames = dict(hostnames or {})
        self.runs = runs
        self.ids = list(runs)
        self.position = {rid: i for i, rid in enumerate(self.ids)}
        count = len(self.ids)
        lists: dict[str, list] = {}  # lists while filling: an item set in a list costs less than in an array
        number: dict[str, int] = {}  # key -> its column's number
        stated: list[tuple[int, ...]] = []  # per run: the numbers of the keys it states, in its order
        hostnames = self.hostnames
        for i, run in enumerate(runs.values()):
            keys = run_identity(run, hostnames.get(run.get("system_id") or ""))
            for key, value in keys.items():
                column = lists.get(key)
                if column is None:
                    column = lists[key] = [_MISSING] * count
                    number[key] = len(number)
                column[i] = value
            stated.append(tuple([number[key] for key in keys]))
        # one object array per key, each item kept as it is (np.array would unpack a list or tuple value)
        columns = {key: np.fromiter(values, dtype=object, count=count) for key, values in lists.items()}
        self.columns = columns
        self.lists = list(lists.values())  # by key number: an item of a list is read faster than of an array
        self.names = list(columns)
        self.stated = stated
        if remember:
            _TABLES.add(self)

    def covers(self, runs: dict[str, dict], hostnames: dict[str, str | None]) -> bool:
        """Are these exactly runs of this table (the same run objects) with the same host names?"""
        if hostnames != self.hostnames:
            return False
        mine = self.runs
        return all(mine.get(rid) is run for rid, run in runs.items())

    def identity(self, run_id: str, run: dict) -> dict[str, object] | None:
        """`run_identity` of one run of the table (the same keys in the same order, the same values), or
        None when the table does not hold this run object (another run of that id, or none)."""
        at = self.position.get(run_id)
        if at is None or self.runs.get(run_id) is not run:
            return None
        names, columns = self.names, self.columns
        return {names[k]: columns[names[k]][at] for k in self.stated[at]}

    def signature(self, run_id: str, run: dict) -> tuple[tuple[int, ...], tuple] | None:
        """The keys one run of the table states (as this table numbers them) and their values, in its
        order: equal for two runs of the table exactly when their identities are equal dicts (a key for
        putting an identity in words once). None when the table does not hold this run object."""
        at = self.position.get(run_id)
        if at is None or self.runs.get(run_id) is not run:
            return None
        stated, lists = self.stated[at], self.lists
        return stated, tuple([lists[k][at] for k in stated])

    def frame(self, ids: list[str] | None = None) -> pd.DataFrame:
        """`identity_frame` of these runs of the table (all by default), in this order."""
        if ids is None:
            ids, columns = self.ids, self.columns
        else:
            if not ids:
                return pd.DataFrame()
            at = [self.position[i] for i in ids]
            # the keys these runs state, in the order records would give them (first stated first)
            order = dict.fromkeys(chain.from_iterable(self.stated[i] for i in at))
            columns = {self.names[k]: self.columns[self.names[k]][at] for k in order}
        # object columns, then the kinds pandas infers for records (ints with a gap: floats; texts: strings)
        return pd.DataFrame(columns, index=pd.Index(ids), copy=False).infer_objects()


_TABLES: weakref.WeakSet[IdentityTable] = weakref.WeakSet()


def varying_keys(frame: pd.DataFrame) -> list[str]:
    """The identity keys that take more than one value (unknown counting as one) in these runs."""
    return [c for c in frame.columns if _distinct_words(frame[c]) > 1]


def _distinct_words(column: pd.Series) -> int:
    """How many values a column takes as `key_text` words (unknown counting as one): each distinct value
    is put in words once, not each of 100,000 rows."""
    codes, uniques = pd.factorize(column.astype(object), use_na_sentinel=True)
    if any(type(u) is bool for u in uniques):  # True == 1 to a hash, not in words: row by row
        return column.astype(object).map(key_text).nunique(dropna=False)
    words = {key_text(u) for u in uniques}
    if len(codes) and (codes < 0).any():
        words.add(None)
    return len(words)


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
        words = [key_text(u) for u in uniques]
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
    return sorted(k for k in (a.keys() | b.keys()) - skip if key_text(a.get(k)) != key_text(b.get(k)))


def key_text(value) -> str | None:
    """A key's value as text for comparing identities: 13440.0 is 13440; None and NaN are unknown."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def shown(value) -> str:
    """A key's value in a table: the value, or 'not stated' when the run does not say."""
    return UNKNOWN_TEXT if key_text(value) is None else key_text(value)
