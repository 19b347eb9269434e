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
from json.encoder import c_make_encoder, encode_basestring_ascii

_COMPACT = (",", ":")


def _encoder(sort_keys: bool = False, default: Callable | None = None) -> Callable[[object], str]:
    """A JSON encoder made once, writing exactly what `json.JSONEncoder(separators=(",", ":"), ...).encode`
    writes. `encode` builds a new C encoder and a float formatter on every call (half of the time of
    encoding an HPL label, and an import encodes four texts per result and one per label): here the C
    encoder is made once, without the check for circular values (the store writes parsed values, never
    circular), and called directly."""
    options = json.JSONEncoder(separators=_COMPACT, sort_keys=sort_keys, default=default)
    if c_make_encoder is None:  # a Python without the C accelerator: the standard path
        return options.encode
    made = c_make_encoder(None, options.default, encode_basestring_ascii, None, ":", ",", sort_keys, False, True)

    def encode(value: object) -> str:
        if isinstance(value, str):  # as JSONEncoder.encode: a string alone is written directly
            return encode_basestring_ascii(value)
        return "".join(made(value, 0))

    return encode


_ENCODERS: dict[tuple[bool, Callable | None], Callable[[object], str]] = {}


def _json(value, sort_keys: bool = False, default: Callable | None = None) -> str:
    """JSON as the store writes it: without the blanks after ',' and ':' (same information, smaller).
    One encoder per set of options, made once (see `_encoder`)."""
    encode = _ENCODERS.get((sort_keys, default))
    if encode is None:
        encode = _ENCODERS[sort_keys, default] = _encoder(sort_keys, default)
    return encode(value)


# Metric labels as _json(labels, sort_keys=True, default=str) writes them, the encoder looked up once
# (an HPCC import encodes a hundred labels per result).
_LABELS_JSON = _encoder(sort_keys=True, default=str)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
