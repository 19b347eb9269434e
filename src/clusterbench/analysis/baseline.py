"""Which runs may be a candidate's baseline: the rules `compare` and the report's baseline tables share.

A change is only a change of the key under study when everything else is equal. A baseline is
therefore either declared by the user (a selection, or `KEY=VALUE` naming the baseline value of a
key), or a run that differs from the candidate only in the keys under study: every other
identifying key (analysis/identity.py: benchmark, N, NB, grid, nodes, BLAS, tags...) equal, a
key one of them does not state counting as a difference. When no such run exists the comparison
is refused, naming the keys that differ and the nearest pairs (fewest differing keys), instead of
comparing an HPCC run with an HPL run or N=13440 with N=44640.

Flagged runs (analysis/flags.py: failed, invalid, truncated, suspect, disturbed, excluded) are
never on either side; how many were left out is said.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from clusterbench.analysis import flags, identity
from clusterbench.errors import UserInputError

MAX_NEAREST = 5  # nearest pairs listed in a refusal
MAX_SEARCHED = 300  # configurations per side searched for the nearest pairs (300 x 300 comparisons)
MAX_DECLARED = 16
MAX_SHOWN_CHARS = 70  # one configuration in a message: fits an 80-column terminal with its indent


def twins(key: str) -> set[str]:
    """A key and the names it also goes by in an identity: `blas` is the parameter, the `tag:blas`
    given at import, and the BLAS the run really loaded."""
    bare = key.removeprefix("tag:")
    out = {bare, f"tag:{bare}"}
    if bare == "blas":
        out.add("blas_loaded")
    return out


def study_keys(keys) -> set[str]:
    """Every identity name of these keys under study."""
    return set().union(*(twins(k) for k in keys)) if keys else set()


def configuration(ident: dict, labels: dict | None, under_study: set[str]) -> dict:
    """What a value was measured under, apart from the keys under study: the run's identity and the
    value's identifying labels (a label wins over a parameter of the same name: HPL's per-line N)."""
    out = {k: v for k, v in ident.items() if k not in under_study}
    for key, value in (labels or {}).items():
        if key not in under_study and value is not None:
            out[key] = value
    return out


def text(conf: dict) -> str:
    """A configuration as a stable key (numbers as numbers: 13440.0 is 13440)."""
    return "\x01".join(f"{k}={identity.shown(conf[k])}" for k in sorted(conf))


def shown(conf: dict, keys=None, limit: int = MAX_SHOWN_CHARS) -> str:
    """'n=13440, nb=64' for these keys (all by default), bounded for a message."""
    keys = sorted(conf) if keys is None else keys
    words = ", ".join(f"{k}={identity.shown(conf.get(k))}" for k in keys)
    return words if len(words) <= limit else words[: limit - 3] + "..."


@dataclass
class Nearest:
    """Two configurations, one per side, and the keys that keep them apart."""

    a: dict
    b: dict
    differ: list[str]
    a_runs: list[str] = field(default_factory=list)
    b_runs: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return f"differ in {', '.join(self.differ)}: {shown(self.a, self.differ)} vs {shown(self.b, self.differ)}"


def nearest_pairs(a: dict[str, tuple[dict, list[str]]], b: dict[str, tuple[dict, list[str]]],
                  limit: int = MAX_NEAREST) -> list[Nearest]:
    """The pairs of configurations (text -> (configuration, runs)) with the fewest differing keys,
    at most MAX_SEARCHED per side searched."""
    found = []
    for conf_a, runs_a in list(a.values())[:MAX_SEARCHED]:
        for conf_b, runs_b in list(b.values())[:MAX_SEARCHED]:
            found.append(Nearest(conf_a, conf_b, identity.differing_keys(conf_a, conf_b), runs_a, runs_b))
    found.sort(key=lambda n: (len(n.differ), n.differ, text(n.a), text(n.b)))
    return found[:limit]


def refusal(differ: list[str]) -> str:
    """A table cell or a line: why there is no baseline."""
    return f"no comparable baseline (differs in: {', '.join(differ)})"


def counted(runs: dict[str, dict]) -> tuple[dict[str, dict], Counter]:
    """The runs that may be a baseline or a candidate, and how many of each flag were left out
    (a run with two flags counts under its first, so the counts add up to the runs left out)."""
    kept, left_out = {}, Counter()
    for rid, run in runs.items():
        if flags.counts(run):
            kept[rid] = run
        else:
            left_out[next(f for f in flags.run_flags(run) if f in flags.NOT_COUNTED)] += 1
    return kept, left_out


def left_out_text(side: str, left_out: Counter) -> str:
    """'baseline: 2 flagged runs left out (truncated 1, suspect 1)', '' when none was."""
    total = sum(left_out.values())
    if not total:
        return ""
    detail = ", ".join(f"{flag} {n}" for flag, n in sorted(left_out.items()))
    return f"{side}: {total} flagged run{'s' if total > 1 else ''} left out ({detail})"


def parse_declared(items: list[str] | None) -> dict[str, str]:
    """`--baseline KEY=VALUE` options: the value of KEY that is the baseline."""
    out: dict[str, str] = {}
    for item in (items or [])[: MAX_DECLARED + 1]:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UserInputError(f"--baseline {item!r} is not KEY=VALUE", hint="e.g. --baseline tuning=none")
        out[key.strip()] = value.strip()
    if len(out) > MAX_DECLARED:
        raise UserInputError(f"at most {MAX_DECLARED} --baseline declarations")
    return out
