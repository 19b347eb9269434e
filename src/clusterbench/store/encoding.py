"""How the store writes values as text: JSON without blanks, one encoder per set of options, and
UTC timestamps. Every module of the store that writes a run, a tag or a metric writes it this way,
so the stored text of a value does not depend on which of them wrote it.

JSON columns are written without blanks (`{"n":1000}`): the same information, and a store of
a hundred thousand imported results is a fifth smaller.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

_COMPACT = (",", ":")


def _json(value, **kwargs) -> str:
    """JSON as the store writes it: without the blanks after ',' and ':' (same information, smaller).
    One encoder per set of options, made once (json.dumps with options makes one per call: an import
    encodes three texts per result)."""
    key = tuple(sorted(kwargs.items()))
    encode = _ENCODERS.get(key)
    if encode is None:
        encode = _ENCODERS[key] = json.JSONEncoder(separators=_COMPACT, **kwargs).encode
    return encode(value)


_ENCODERS: dict[tuple, Callable[[object], str]] = {}

# Metric labels as _json(labels, sort_keys=True, default=str) writes them, with one encoder made once
# (json.dumps with options builds a new encoder per call: a tenth of an HPCC import's time).
_LABELS_JSON = json.JSONEncoder(separators=_COMPACT, sort_keys=True, default=str).encode


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
