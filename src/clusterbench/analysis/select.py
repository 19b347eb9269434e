"""Which stored runs a report, a comparison, a listing or a tag command is about: selection terms.

A selection is a list of terms, each a word of its own or separated by commas:

    campaign:nb-sweep       runs of that campaign            (bare: a known campaign name)
    run:20261122-...        that run                         (bare: a stored run id)
    source:import           imported runs (or source:run)
    benchmark:hpl           runs of that benchmark
    KEY OP VALUE            blas=openblas-serial  nodes>=4  n>20000  interconnect!=tcp
    tag:KEY OP VALUE        the run's tag KEY only
    param:KEY OP VALUE      the run's parameter KEY only
    fact:PATH OP VALUE      a stored fact, by a dotted path: fact:pinning.verdict=match

OP is one of = != >= <= > <. A bare KEY is the run's tag KEY when it has one (a tag given at
import says what the file did not), else its parameter KEY, else one of the run's own values:
`nodes` (how many nodes it used; an imported run whose file and tags state none has no node
count and matches no `nodes` term), `system` (host name or system id), `status`, `campaign`,
`benchmark`, `source`. Values compare as canonical names for the keys that have them (so
blas=openblas_serial finds a stored 'openblas-serial'), as numbers when both sides are numbers
(nodes>=4, n=13440.0), else as text. A list (a parameter swept inside one run) matches when one
of its items does. A run without the key never matches a term on it, not even a != term.

Equality terms of one key are alternatives (blas=blis,blas=mkl: either); every other term must
hold, so ranges narrow (n>=20000,n<40000) and terms on different keys combine (campaign:a,
blas=blis: the blis runs of a). An empty selection is every stored run.

Speed (benchmarks/select_scale.py: 100,000 runs): campaign:, run:, source: and benchmark: terms
are answered by SQL with its indexes; for the runs left SQLite reads each term's key out of the
JSON columns (json_extract), so Python decodes no JSON to test a term; only the runs selected
are read in full and decoded.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache

from clusterbench.analysis.identity import known_node_count
from clusterbench.bench.canonical import canonical_value
from clusterbench.errors import UserInputError
from clusterbench.store.db import Store

SQL_KINDS = ("campaign", "run", "source", "benchmark")  # kind:VALUE, answered by SQL
KEY_KINDS = ("tag", "param", "fact")  # kind:KEY OP VALUE
KINDS = SQL_KINDS + KEY_KINDS
OPERATORS = ("!=", ">=", "<=", "=", ">", "<")  # longest first: '>=' is not '>' then '=VALUE'
DERIVED = ("nodes", "system", "status", "campaign", "benchmark", "source")
CANONICAL_KEYS = ("blas", "interconnect")
YAML_BOOLEANS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}

MAX_TERMS = 64
MAX_TERM_CHARS = 200
MAX_FACT_DEPTH = 16
MAX_SQL_IDS = 500  # more run ids than this are matched in Python (SQLite bounds a statement's parameters)
MAX_HINT_VALUES = 20

SYNTAX = ("terms are KEY=VALUE (also != >= <= > <), tag:KEY=VALUE, param:KEY=VALUE, fact:PATH.TO.FACT=VALUE, "
          "campaign:NAME, run:ID, source:import|run, benchmark:NAME, or a bare campaign name or run id; "
          "separate terms with commas, e.g. blas=openblas-serial,nodes>=4")
_TERM = re.compile(r"(?P<key>[^=!<>]*?)\s*(?P<op>!=|>=|<=|=|>|<)\s*(?P<value>.*)", re.DOTALL)
_KIND_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


@dataclass(frozen=True)
class Term:
    """One `KEY OP VALUE` condition: kind 'tag', 'param', 'fact' or 'auto' (a bare key). What the
    given value is as a canonical name, a number and a boolean is worked out once, not per run."""

    kind: str
    key: str
    op: str
    value: str
    text: str
    canonical: str | None = field(default=None, init=False, compare=False)  # 'blas' or 'interconnect'
    given: str = field(default="", init=False, compare=False)  # the value, canonical for those keys
    number: float | None = field(default=None, init=False, compare=False)
    boolean: str | None = field(default=None, init=False, compare=False)  # 'true'/'false' for yes, on, ...

    def __post_init__(self) -> None:
        last = self.key.rsplit(".", 1)[-1]
        canonical = last if last in CANONICAL_KEYS else None
        object.__setattr__(self, "canonical", canonical)
        object.__setattr__(self, "given", _canonical(canonical, self.value) if canonical else self.value)
        object.__setattr__(self, "number", _number(self.value))
        flag = YAML_BOOLEANS.get(self.value.lower())
        object.__setattr__(self, "boolean", None if flag is None else "true" if flag else "false")

    @property
    def group(self) -> tuple[str, str]:
        return self.kind, self.key

    def holds(self, found: tuple[bool, object]) -> bool:
        present, stored = found
        if not present or stored is None:
            return False
        op = "=" if self.op == "!=" else self.op
        if isinstance(stored, list):
            hit = any(self._compare(item, op) for item in stored)
        else:
            hit = self._compare(stored, op)
        return not hit if self.op == "!=" else hit

    def _compare(self, stored, op: str) -> bool:
        right: object = self.given
        if isinstance(stored, bool) and self.boolean is not None:  # --tag x=yes stores True, as YAML reads it
            right = self.boolean
        elif self.canonical and isinstance(stored, str):
            stored = _canonical(self.canonical, stored)
        left = _number(stored)
        if left is not None and self.number is not None:
            right = self.number
        else:
            left = _text(stored)
        if op == "=":
            return left == right
        if op == ">=":
            return left >= right
        if op == "<=":
            return left <= right
        if op == ">":
            return left > right
        return left < right


@lru_cache(maxsize=4096)
def _canonical(key: str, value: str) -> str:
    """canonical_value, remembered: a store spells its BLAS a handful of ways, a hundred thousand times."""
    return canonical_value(key, value)


def _number(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if value == value else None
    if isinstance(value, str) and len(value) <= MAX_TERM_CHARS and _NUMBER.fullmatch(value.strip()):
        return float(value)
    return None


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return str(value)


@dataclass
class Selection:
    """`terms`: kind -> alternatives for the SQL kinds (campaign, run, source, benchmark; callers
    build `Selection({"run": ids})`); a legacy "tag" entry of 'k=v' texts becomes conditions.
    `conditions`: the KEY OP VALUE terms."""

    terms: dict[str, set[str]] = field(default_factory=dict)
    text: str = ""
    conditions: tuple[Term, ...] = ()
    groups: list[list[Term]] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        tags = self.terms.get("tag")
        if tags:
            self.terms = {k: v for k, v in self.terms.items() if k != "tag"}
            self.conditions = (*self.conditions, *(parse_term(f"tag:{t}") for t in sorted(tags)))
        by_key: dict[tuple[str, str], list[Term]] = defaultdict(list)
        for term in self.conditions:
            by_key[term.group].append(term)
        self.groups = list(by_key.values())

    def describe(self) -> str:
        return self.text or "all stored runs"

    def needs(self) -> set[str]:
        """What the conditions read: 'facts' (a fact term), 'nodes', 'system'."""
        out = {"facts"} if any(t.kind == "fact" for t in self.conditions) else set()
        return out | {t.key for t in self.conditions if t.kind == "auto" and t.key in ("nodes", "system")}

    def matches(self, run: dict, hosts: dict[str, str | None] | None = None) -> bool:
        """Whether a decoded run (JSON columns as dicts) is selected; `hosts` (system id -> host
        name) answers `system` terms."""
        for kind, values in self.terms.items():
            if str(run.get("id" if kind == "run" else kind)) not in values:
                return False
        return self.conditions_hold(run, hosts or {})

    def conditions_hold(self, run: dict, hosts: dict[str, str | None]) -> bool:
        return all(_group_holds(terms, run, hosts) for terms in self.groups)


def _group_holds(terms: list[Term], run: dict, hosts: dict[str, str | None]) -> bool:
    found = lookup(run, terms[0].kind, terms[0].key, hosts)
    if len(terms) == 1:
        return terms[0].holds(found)
    equal = [t for t in terms if t.op == "="]
    if equal and not any(t.holds(found) for t in equal):
        return False
    return all(t.holds(found) for t in terms if t.op != "=")


def lookup(run: dict, kind: str, key: str, hosts: dict[str, str | None]) -> tuple[bool, object]:
    """(whether the run has it, its value) for a term's key; `system` gives [host name, id]."""
    if kind in ("tag", "auto") and key in run["tags"]:
        return True, run["tags"][key]
    if kind == "tag":
        return False, None
    if kind in ("param", "auto") and key in run["params"]:
        return True, run["params"][key]
    if kind == "param":
        return False, None
    if kind == "fact":
        node = run["facts"]
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return False, None
            node = node[part]
        return True, node
    if key == "nodes":
        count = node_count(run)
        return count is not None, count
    if key == "system":
        ids = [v for v in (hosts.get(run.get("system_id") or ""), run.get("system_id")) if v]
        return bool(ids), ids
    if key in DERIVED:
        return run.get(key) is not None, run.get(key)
    return False, None


def node_count(run: dict) -> int | None:
    """Nodes a run used, None when nothing states it: `identity.known_node_count` (a `nodes` or
    `hosts` parameter, a `nodes` tag given at import, the node list; 1 only for a run clusterbench
    ran itself). An imported file that states no node count is never put at 1 node."""
    return known_node_count(run)


# ---------------------------------------------------------------- parsing

def split_terms(items: list[str] | str | None) -> list[str]:
    """The terms of command-line words (commas separate terms as spaces do), bounded."""
    if isinstance(items, str):
        items = [items]
    words: list[str] = []
    for item in items or []:
        if len(item) > MAX_TERMS * (MAX_TERM_CHARS + 1):
            raise UserInputError(f"a selection of {len(item):,} characters is longer than {MAX_TERMS} terms of "
                                 f"{MAX_TERM_CHARS} characters", hint=SYNTAX)
        words += [w.strip() for w in item.split(",") if w.strip()]
        if len(words) > MAX_TERMS:
            raise UserInputError(f"more than {MAX_TERMS} selection terms", hint="select with fewer terms, e.g. a "
                                 "campaign or a tag instead of many run ids")
    for word in words:
        if len(word) > MAX_TERM_CHARS:
            raise UserInputError(f"selection term {word[:40]!r}... has {len(word)} characters, more than "
                                 f"{MAX_TERM_CHARS}", hint=SYNTAX)
    return words


def parse_term(word: str) -> Term:
    """A `[tag:|param:|fact:]KEY OP VALUE` term, or UserInputError saying the syntax."""
    kind, rest = "auto", word
    prefix, sep, after = word.partition(":")
    if sep and prefix in KEY_KINDS:
        kind, rest = prefix, after
    match = _TERM.fullmatch(rest)
    if match is None:
        problem = "has no operator" if not any(c in rest for c in "=!<>") else "has a malformed operator"
        raise UserInputError(f"selection term {word!r} {problem}", hint=SYNTAX)
    key, op, value = match["key"].strip(), match["op"], match["value"].strip()
    if value[:1] in ("=", "<", ">", "!"):
        raise UserInputError(f"selection term {word!r} has a malformed operator ({op}{value[:1]})",
                             hint="operators are = != >= <= > <; " + SYNTAX)
    if not key or not value:
        raise UserInputError(f"selection term {word!r} needs a key and a value", hint=SYNTAX)
    if kind == "fact" and (len(key.split(".")) > MAX_FACT_DEPTH or "" in key.split(".")):
        raise UserInputError(f"fact path {key!r} is not a dotted path of at most {MAX_FACT_DEPTH} names",
                             hint="e.g. fact:pinning.verdict=match")
    return Term(kind, key, op, value, word)


def parse_selection(items: list[str] | str | None, store: Store) -> Selection:
    """Terms from the command line; a bare word without an operator is resolved against the store."""
    words = split_terms(items)
    sql_terms: dict[str, set[str]] = defaultdict(set)
    conditions: list[Term] = []
    campaigns: set[str] | None = None
    for word in words:
        kind, sep, value = word.partition(":")
        if sep and kind in SQL_KINDS:
            if not value:
                raise UserInputError(f"empty selection term {word!r}", hint=f"write {kind}:VALUE")
            sql_terms[kind].add(value)
            continue
        if sep and kind in KEY_KINDS:
            conditions.append(parse_term(word))
            continue
        if campaigns is None:
            campaigns = store.campaign_names()
        if word in campaigns:
            sql_terms["campaign"].add(word)
        elif store.run(word) is not None:
            sql_terms["run"].add(word)
        elif sep and _KIND_PREFIX.fullmatch(kind):
            raise UserInputError(f"unknown kind {kind!r} in selection term {word!r}",
                                 hint=f"kinds: {', '.join(KINDS)}; " + SYNTAX)
        elif any(c in word for c in "=!<>"):
            conditions.append(parse_term(word))
        else:
            known = ", ".join(sorted(campaigns)[:8]) or "none stored"
            raise UserInputError(f"{word!r} is neither a campaign, a stored run id nor a KEY=VALUE term",
                                 hint=f"campaigns: {known}; " + SYNTAX)
    return Selection(dict(sql_terms), " ".join(words), tuple(conditions))


# ---------------------------------------------------------------- selecting

def select_runs(store: Store, selection: Selection) -> list[dict]:
    """The selected runs, oldest first, with their JSON columns decoded."""
    return [run for _row, run in _selected(store, selection)]


def select_rows(store: Store, selection: Selection, rows: Iterable[sqlite3.Row] | None = None) -> list[sqlite3.Row]:
    """The rows (of `rows`, else of every stored run) the selection holds for, as they were."""
    return [row for row, _run in _selected(store, selection, rows)]


def _selected(store: Store, selection: Selection,
              rows: Iterable[sqlite3.Row] | None = None) -> Iterator[tuple[sqlite3.Row, dict]]:
    """(row, decoded run) of each selected run, oldest first (or in the order of `rows`).

    With KEY OP VALUE terms, two passes: the columns the terms read (params and tags, facts
    only for fact terms) of the runs SQL leaves, then the full rows of the runs selected. Most
    of a run row's bytes (command, env, facts) are so read and decoded only for those."""
    in_python = {k: v for k, v in selection.terms.items() if k == "run" and len(v) > MAX_SQL_IDS}
    needs = selection.needs()
    hosts = store.hostnames() if "system" in needs else {}
    if rows is None:
        pushed = {("id" if k == "run" else k): v for k, v in selection.terms.items() if k not in in_python}
        if selection.conditions:
            tested = [r for r, run in _candidates(store, selection, needs, pushed)
                      if _kept(r, in_python) and selection.conditions_hold(run, hosts)]
            full = store.runs_by_id(r["id"] for r in tested)
            rows = [full[r["id"]] for r in tested if r["id"] in full]
            in_python = {}
            selection = Selection()  # every term is answered: what is left is decoding
        else:
            rows = store.find_runs(**pushed)
    else:
        in_python = selection.terms
    for row in rows:
        if not _kept(row, in_python):
            continue
        run = _as_dict(row)
        for key in ("params", "tags", "facts"):
            run[key] = _loads(run[key])
        if selection.conditions and not selection.conditions_hold(run, hosts):
            continue
        for key in ("env", "launcher"):
            run[key] = _loads(run[key])
        yield row, run


TESTED_COLUMNS = ("id", "campaign", "benchmark", "status", "source", "system_id", "nodes")
JSON_TYPES = {"true": True, "false": False, "null": None}


def _candidates(store: Store, selection: Selection, needs: set[str],
                pushed: dict[str, set[str]]) -> Iterator[tuple[sqlite3.Row, dict]]:
    """(row, what the terms read of it) of the runs SQL leaves. SQLite extracts each term's key
    from the JSON columns (json_type, json_extract), so no run's JSON is decoded in Python and
    only the columns the terms read are fetched; a key SQLite cannot address, or a malformed
    JSON text somewhere, falls back to decoding each run's params and tags."""
    plan = _extracts(selection)
    if plan is not None:
        derived = {DERIVED_COLUMNS[t.key] for t in selection.conditions
                   if t.kind == "auto" and t.key in DERIVED_COLUMNS}
        if "nodes" in derived:  # whether a run without a node list knows it ran on one machine
            derived.add("source")
        columns = ("id", *sorted(derived))
        try:
            rows = store.find_runs(columns, [(column, path) for column, path, _ in plan], **pushed)
        except sqlite3.OperationalError:  # malformed JSON in some run (or SQLite without JSON functions)
            rows = None
        if rows is not None:
            width = len(columns)
            slots = [(width + 2 * i, column, parts) for i, (column, _path, parts) in enumerate(plan)]
            for row in rows:
                values = tuple(row)
                run = dict(zip(columns, values[:width], strict=True))
                run["params"], run["tags"], run["facts"] = {}, {}, {}
                for at, column, parts in slots:
                    kind = values[at]
                    if kind is None:  # the key is absent
                        continue
                    value = values[at + 1]
                    if kind in JSON_TYPES:
                        value = JSON_TYPES[kind]
                    elif kind == "array" or kind == "object":
                        value = json.loads(value)
                    node = run[column]
                    for part in parts[:-1]:
                        node = node.setdefault(part, {})
                    node[parts[-1]] = value
                yield row, run
            return
    columns = TESTED_COLUMNS + ("params", "tags") + (("facts",) if "facts" in needs else ())
    for row in store.find_runs(columns, **pushed):
        yield row, _partly_decoded(row, needs)


# the run columns a bare derived key reads (`nodes` also reads params.nodes and params.hosts)
DERIVED_COLUMNS = {"nodes": "nodes", "system": "system_id", "status": "status", "campaign": "campaign",
                   "benchmark": "benchmark", "source": "source"}


def _extracts(selection: Selection) -> list[tuple[str, str, tuple[str, ...]]] | None:
    """(JSON column, JSON path, key path) for each key the terms read; None when a key holds a
    character a JSON path cannot quote."""
    wanted: dict[tuple[str, tuple[str, ...]], None] = {}
    for terms in selection.groups:
        kind, key = terms[0].group
        parts = tuple(key.split(".")) if kind == "fact" else (key,)
        if kind in ("tag", "auto"):
            wanted[("tags", parts)] = None
        if kind in ("param", "auto"):
            wanted[("params", parts)] = None
        if kind == "fact":
            wanted[("facts", parts)] = None
        if kind == "auto" and key == "nodes":
            wanted[("params", ("hosts",))] = None
    if any('"' in part or "\\" in part for _column, parts in wanted for part in parts):
        return None
    return [(column, "$" + "".join(f'."{part}"' for part in parts), parts) for column, parts in wanted]


def _kept(row: sqlite3.Row, in_python: dict[str, set[str]]) -> bool:
    return not in_python or all(str(row["id" if k == "run" else k]) in v for k, v in in_python.items())


def _as_dict(row: sqlite3.Row) -> dict:
    """A row as a dict: dict(row) finds each of its 24 columns by name again (100,000 rows: a second)."""
    return dict(row) if isinstance(row, dict) else dict(zip(row.keys(), row, strict=True))


def _partly_decoded(row: sqlite3.Row, needs: set[str]) -> dict:
    """What the terms read of a run: params and tags always, facts only for fact terms."""
    run = dict(row)
    for key in ("params", "tags", "facts") if "facts" in needs else ("params", "tags"):
        run[key] = _loads(run[key])
    run.setdefault("facts", {})
    return run


def _loads(text: str | None) -> dict:
    """A JSON column as a dict: {} for an empty one (most env and tags columns: nothing to parse)
    and for one that does not decode to a mapping (a damaged row selects as a run without them)."""
    if not text or text == "{}":
        return {}
    known = _SMALL_JSON.get(text)
    if known is not None:
        return dict(known)  # a copy: callers may change their run's dicts
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    if len(text) <= 64 and len(_SMALL_JSON) < 1024 and not any(isinstance(v, dict | list) for v in value.values()):
        _SMALL_JSON[text] = dict(value)
    return value


# Short flat JSON texts decoded once: a store repeats a few launchers and tag sets a hundred thousand times.
_SMALL_JSON: dict[str, dict] = {}


# ---------------------------------------------------------------- why nothing matched

def no_match_error(store: Store, selection: Selection) -> UserInputError:
    """Why a selection matched no run: the term whose key holds no such value (with the values
    stored for that key), else the combination."""
    total = store.run_count()
    if not total:
        return UserInputError(f"no runs stored yet in {store.path}",
                              hint="store some with `clusterbench run`, `campaign run` or `import`")
    for kind, wanted in selection.terms.items():
        if kind == "run":
            if not any(store.run(i) is not None for i in sorted(wanted)[:MAX_SQL_IDS]):
                return UserInputError(f"no stored run has the id {sorted(wanted)[0]!r} ({total} runs are stored)",
                                      hint="list run ids with `clusterbench results`")
            continue
        stored = store.distinct(kind)
        if not set(wanted) & set(stored):
            return UserInputError(f"no stored run matches {kind}:{sorted(wanted)[0]} ({total} runs are stored)",
                                  hint=f"{kind}: {_shown(stored)}" if stored else f"no run has a {kind}")
    groups: dict[tuple[str, str], list[Term]] = defaultdict(list)
    for term in selection.conditions:
        groups[term.group].append(term)
    if groups:
        rows = store.find_runs(**{("id" if k == "run" else k): v for k, v in selection.terms.items()
                                  if k != "run" or len(v) <= MAX_SQL_IDS})
        needs = selection.needs() | {"facts"}
        hosts = store.hostnames()
        runs = [_partly_decoded(row, needs) for row in rows]
        for terms in groups.values():
            if not any(_group_holds(terms, run, hosts) for run in runs):
                kind, key = terms[0].group
                values = stored_values(runs, kind, key, hosts)
                label = key if kind == "auto" else f"{kind}:{key}"
                hint = f"{label}: {_shown(values)}" if values else f"no selected run has a {label} ({_keys(runs)})"
                among = (f"among the {len(runs)} runs {' '.join(_sql_texts(selection))} selects" if selection.terms
                         else f"({len(runs)} runs are stored)")
                return UserInputError(f"no stored run matches {', '.join(t.text for t in terms)} {among}", hint=hint)
    return UserInputError(f"no stored run matches {selection.describe()!r} (each term alone matches runs, "
                          "not all together)", hint="drop a term to see what each holds, e.g. "
                                                    "`clusterbench results --select TERM`")


# Facts whose values are a closed set clusterbench itself writes: the placement verdict of a run whose
# placement was observed (pinning/verify.py). A term that asks for one of them is a question ("which runs
# were placed wrongly?") whose answer may be none: an empty listing, exit 0. A value nothing has of any
# other key stays a refusal (exit 2, with the values stored), since there it is mostly a typo.
CLOSED_FACTS = {"pinning.verdict": ("match", "mismatch", "partial", "unobserved")}


def empty_answer(store: Store, selection: Selection, rows: Iterable[sqlite3.Row] | None = None) -> bool:
    """Whether a selection that holds for no run (of `rows`, else of every stored run) is answered by
    nothing rather than refused: it asks for a value of a closed fact (CLOSED_FACTS), and the rest of
    it selects runs, so only that question leaves none. A campaign, a run id or a value that no run has
    is still refused by the caller (no_match_error), naming that term."""
    closed = [t for t in selection.conditions if t.kind == "fact" and t.value in CLOSED_FACTS.get(t.key, ())]
    if not closed:
        return False
    rest = Selection(dict(selection.terms), "", tuple(t for t in selection.conditions if t not in closed))
    if not rest.terms and not rest.conditions:
        return bool(rows) if rows is not None else bool(store.run_count())
    return bool(select_rows(store, rest, rows))


def _sql_texts(selection: Selection) -> list[str]:
    return [f"{kind}:{value}" for kind, values in selection.terms.items() for value in sorted(values)[:3]]


def stored_values(runs: list[dict], kind: str, key: str, hosts: dict[str, str | None]) -> list[str]:
    """The distinct values the runs hold for a term's key, as text, sorted (numbers by value)."""
    values: set = set()
    for run in runs:
        present, value = lookup(run, kind, key, hosts)
        if present and value is not None:
            values.update(value if isinstance(value, list) else [value])
    texts = {_text(v) for v in values}
    return sorted(texts, key=lambda t: (_number(t) is None, _number(t) or 0.0, t))


def _keys(runs: list[dict]) -> str:
    """'tags: system; parameters: n, nb, p, q': the keys the runs have, for a term on a key none has."""
    tags = sorted({k for run in runs for k in run["tags"]})
    params = sorted({k for run in runs for k in run["params"]})
    return (f"tags: {_shown(tags)}" if tags else "no tags") + "; " + (
        f"parameters: {_shown(params)}" if params else "no parameters") + f"; or {', '.join(DERIVED)}"


def _shown(values: list[str]) -> str:
    head = ", ".join(values[:MAX_HINT_VALUES])
    return head + (f" and {len(values) - MAX_HINT_VALUES} more" if len(values) > MAX_HINT_VALUES else "")
