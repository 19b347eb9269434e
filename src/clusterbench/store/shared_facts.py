"""What the results of one imported file share in their facts text, stored once (schema version 4).

The results of one file have most of their facts in common (`"from_file_name":[...],"file_mtime":"..."`).
The file's `import_files` row holds up to four such fragments, each result's stored facts a marker in
place of each, and every read puts the fragments back (`facts_sql`), so readers get the very text that
was written. This module finds the fragments, writes the markers and reads them back; the table and its
migration are in `schema`.
"""

from __future__ import annotations

import json

from clusterbench.store.encoding import _json

# The markers of the four shared fragments inside a run's stored facts: a member whose key is a newline and a
# digit, escaped as Python's json never escapes a newline (it writes \n, never \u000a), so no facts text
# holds one by itself, and the text stays JSON for a reader of the raw column.
FACT_MARKERS = tuple(f'"\\u000a{i}":0' for i in range(1, 5))


# A shared fragment is worth a marker from this length on (a marker is 11 characters).
MIN_FRAGMENT_CHARS = 24
NO_FRAGMENTS = ("", "", "", "")
# Members of an imported result's facts that are its own, never shared: the path stays in the stored text
# (one can still find a file's runs with LIKE), and the index differs by definition.
UNSHARED_FACTS = frozenset({"source_file", "result_index"})


def shared_fragments(facts: list[dict], texts: list[str]) -> tuple[str, str, str, str]:
    """The (at most four, longest) runs of consecutive members of the first result's facts whose text
    every other result's facts text holds too (`texts`: as stored, _json(facts, default=str)); "" for
    the slots not used. A file of one result shares nothing: its fragments would cost, not save."""
    if len(facts) < 2:
        return NO_FRAGMENTS
    groups: list[list[str]] = [[]]
    for key, value in facts[0].items():
        member = _json({key: value}, default=str)[1:-1]
        if key not in UNSHARED_FACTS and all(member in text for text in texts[1:]):
            groups[-1].append(member)
        elif groups[-1]:
            groups.append([])
    joined = [",".join(g) for g in groups if g]
    kept = set(sorted((f for f in joined if len(f) >= MIN_FRAGMENT_CHARS), key=len, reverse=True)[:4])
    chosen = [f for f in joined if f in kept]
    return tuple(chosen + [""] * (4 - len(chosen)))  # type: ignore[return-value]


def encode_facts(text: str, fragments: tuple[str, ...]) -> str:
    """A result's facts text as stored: each shared fragment replaced by its marker, when reading it
    back (decode_facts, FACTS_SQL) gives exactly `text`; else `text` itself. A text that holds a marker
    of its own could not be read back as written: refused (ValueError), never stored changed."""
    if decode_facts(text, fragments) != text:
        raise ValueError("the facts hold text that marks a shared fragment")
    out = text
    for marker, fragment in zip(FACT_MARKERS, fragments, strict=True):
        if fragment:
            out = out.replace(fragment, marker)
    return out if decode_facts(out, fragments) == text else text


def decode_facts(text: str, fragments: tuple[str, ...]) -> str:
    """The facts text as written, from the stored text and its file's fragments (what FACTS_SQL does)."""
    for marker, fragment in reversed(list(zip(FACT_MARKERS, fragments, strict=True))):
        text = text.replace(marker, fragment)
    return text


def _facts_dict(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def facts_sql(table: str) -> str:
    """The SQL of a run's facts as written (the shared fragments of an imported file put back), for a
    query on `table` (a name or an alias of runs). A run that is not imported costs one test."""
    decoded = f"{table}.facts"
    for i in range(4, 0, -1):
        decoded = f"replace({decoded}, '{FACT_MARKERS[i - 1]}', f.f{i})"
    return (f"CASE WHEN {table}.content_hash IS NULL THEN {table}.facts ELSE coalesce((SELECT {decoded}"
            f" FROM import_files f WHERE f.sha256 = substr({table}.content_hash, 1, 64)), {table}.facts) END")
