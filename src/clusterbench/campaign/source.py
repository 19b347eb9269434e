"""Where a campaign's values came from, and errors that point there: `file:line: field: message`.

Without pydantic and YAML, so that what expands a point and reports its errors (expand.py, and
`bench`, whose one point needs no campaign file: point.py) does not import them: building the
campaign file's models (spec.py) costs about 0.2 s of CPU at every start. spec.py re-exports
these names.
"""

from __future__ import annotations

import math

from clusterbench.errors import UserInputError

Scalar = str | int | float | bool
Location = tuple[str | int, ...]
DURATION_HINT = "write seconds or 90s, 10m, 2h"


class CampaignError(UserInputError):
    """A campaign problem located in its file: `file:line: field: message`."""

    def __init__(self, message: str, source: CampaignSource | None, loc: Location = (), hint: str | None = None):
        field = _dotted(loc)
        where = source.where(loc) if source else None
        super().__init__(f"{field}: {message}" if field else message, hint=hint, where=where)
        self.loc = loc


class CampaignSource:
    """The file a campaign came from and the line of every key and list item in it."""

    def __init__(self, path: str, lines: dict[Location, int]):
        self.path = path
        self.lines = lines

    def line(self, loc: Location) -> int | None:
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get(())

    def where(self, loc: Location) -> str:
        line = self.line(loc)
        return f"{self.path}:{line}" if line else self.path


def _dotted(loc: Location) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def duration_s(value: str | int | float | None) -> float | None:
    """Seconds of a `timeout`/`poll` as written (seconds, or 90s, 10m, 2h); a ValueError saying what
    is wrong for anything else (pydantic reports it with its location)."""
    if value is None:
        return None
    from clusterbench.units import parse_duration

    try:
        seconds = parse_duration(value) if isinstance(value, str) else float(value)
    except UserInputError as exc:
        raise ValueError(f"{exc.message}; {DURATION_HINT}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError("must be a positive, finite duration")
    return seconds
