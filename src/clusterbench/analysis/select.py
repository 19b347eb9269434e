"""Which stored runs a report or a comparison is about: selections by campaign, tag or run id.

A selection is a list of terms, each written `kind:value` or bare:

    campaign:nb-sweep     runs of that campaign           (bare: a known campaign name)
    tag:blas=blis         runs tagged blas=blis            (bare: key=value)
    run:20261122-...      that run                         (bare: a stored run id)
    source:import         imported runs (or source:run)
    benchmark:hpl         runs of that benchmark

Terms of one kind are alternatives (campaign:a campaign:b = either campaign); terms of
different kinds must all hold (campaign:a tag:blas=blis = runs of a tagged blis). Commas
separate terms as spaces do, so `compare campaign:a,tag:x=1 campaign:b` has two sides.
An empty selection is every stored run.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from clusterbench.errors import UserInputError
from clusterbench.store.db import Store, decoded_run

KINDS = ("campaign", "tag", "run", "source", "benchmark")


@dataclass
class Selection:
    terms: dict[str, set[str]] = field(default_factory=dict)  # kind -> alternatives
    text: str = ""

    def describe(self) -> str:
        return self.text or "all stored runs"

    def matches(self, run: dict) -> bool:
        for kind, values in self.terms.items():
            if kind == "tag":
                tags = run["tags"]
                if not any(k in tags and str(tags[k]) == v for k, v in (t.split("=", 1) for t in values)):
                    return False
            elif kind == "run":
                if run["id"] not in values:
                    return False
            elif str(run.get(kind)) not in values:
                return False
        return True


def parse_selection(items: list[str] | str | None, store: Store) -> Selection:
    """Terms from the command line; a bare word is resolved against the store."""
    if isinstance(items, str):
        items = [items]
    words = [w.strip() for item in (items or []) for w in item.split(",") if w.strip()]
    terms: dict[str, set[str]] = defaultdict(set)
    campaigns: set[str] | None = None
    for word in words:
        kind, sep, value = word.partition(":")
        if sep and kind in KINDS:
            if not value:
                raise UserInputError(f"empty selection term {word!r}", hint=f"write {kind}:VALUE")
            if kind == "tag" and "=" not in value:
                raise UserInputError(f"tag term {word!r} needs key=value", hint="e.g. tag:blas=blis")
            terms[kind].add(value)
            continue
        if campaigns is None:
            campaigns = store.campaign_names()
        if word in campaigns:
            terms["campaign"].add(word)
        elif "=" in word:
            terms["tag"].add(word)
        elif store.run(word) is not None:
            terms["run"].add(word)
        else:
            known = ", ".join(sorted(campaigns)[:8]) or "none stored"
            raise UserInputError(
                f"{word!r} is neither a campaign, a tag (key=value) nor a stored run id",
                hint=f"campaigns: {known}; or write campaign:NAME, tag:KEY=VALUE, run:ID, "
                     "source:import, benchmark:NAME")
    return Selection(dict(terms), " ".join(words))


def select_runs(store: Store, selection: Selection) -> list[dict]:
    """The selected runs, oldest first, with their JSON columns decoded."""
    return [run for run in map(decoded_run, store.all_runs()) if selection.matches(run)]
