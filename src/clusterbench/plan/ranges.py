"""Integer value lists as users write them: '32..256:8', '64,128,192', '1..8', '2^4..2^10'."""

from __future__ import annotations

import re

from clusterbench.errors import UserInputError

_RANGE = re.compile(r"^\s*(\d+)\s*\.\.\s*(\d+)\s*(?::\s*(\d+))?\s*$")


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
            lo, hi, step = int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)
            if step <= 0 or hi < lo:
                raise UserInputError(
                    f"invalid {what} range {part!r}: need start <= end and a positive step",
                    hint="write a range as START..END[:STEP], e.g. 32..256:8")
            values.extend(range(lo, hi + 1, step))
        elif part.isdigit():
            values.append(int(part))
        else:
            raise UserInputError(f"invalid {what} {part!r}",
                                 hint="use integers, a list like 64,128 or a range like 32..256:8")
    if not values:
        raise UserInputError(f"no {what} given")
    return values
