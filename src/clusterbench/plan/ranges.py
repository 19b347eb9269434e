"""Integer value lists as users write them: '32..256:8', '64,128,192', '1..8', '1..4194304:*2'.

A step written `*k` multiplies instead of adding: message sizes and node counts usually grow
in powers of two.
"""

from __future__ import annotations

import math
import re

from clusterbench.errors import UserInputError
from clusterbench.limits import exceeded, limit

_RANGE = re.compile(r"^\s*(\d+)\s*\.\.\s*(\d+)\s*(?::\s*(\*)?\s*(\d+))?\s*$")


def is_range(text: object) -> bool:
    return isinstance(text, str) and all(_RANGE.match(p) or p.strip().isdigit() for p in text.split(",")) \
        and ".." in text


def parse_int_values(text: str | int, what: str = "value") -> list[int]:
    """'32..256:8' -> 32, 40, ..., 256 (inclusive); '64,128' -> [64, 128]; '96' -> [96]."""
    if isinstance(text, int):
        return [text]
    values: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        m = _RANGE.match(part)
        if m:
            lo, hi, geometric, step = int(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4) or 1)
            if hi < lo or step <= 0 or (geometric and (step < 2 or lo < 1)):
                raise UserInputError(
                    f"invalid {what} range {part!r}: need start <= end and a positive step "
                    "(a *factor of at least 2 from a start of at least 1)",
                    hint="write a range as START..END[:STEP] or START..END:*FACTOR, e.g. 32..256:8, 1..1024:*2")
            count = (hi - lo) // step + 1 if not geometric else math.floor(math.log(hi / lo, step)) + 1
            if len(values) + count > limit("max_range_values"):
                raise exceeded("max_range_values", len(values) + count, f"{what} values of {str(text)[:80]!r}")
            if geometric:
                v = lo
                while v <= hi:
                    values.append(v)
                    v *= step
            else:
                values.extend(range(lo, hi + 1, step))
        elif part.isdigit():
            values.append(int(part))
        else:
            raise UserInputError(f"invalid {what} {part!r}",
                                 hint="use integers, a list like 64,128 or a range like 32..256:8")
    if not values:
        raise UserInputError(f"no {what} given")
    return values
