"""Parsing and formatting of memory sizes and durations given on the command line."""

from __future__ import annotations

import math
import re

from clusterbench.errors import UserInputError

MAX_SIZE_BYTES = 2**60  # 1 EiB: no node, and no sum of nodes, has more
MAX_DURATION_S = 365 * 86400

_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
    "t": 1000**4, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*$")

_TIME_UNITS = {"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}
_TIME_RE = re.compile(r"([0-9]*\.?[0-9]+)\s*([a-z]*)")


def parse_size(text: str, what: str = "size") -> int:
    """Bytes from '4GiB', '512MiB', '2G' (decimal) or a plain byte count."""
    m = _SIZE_RE.match(str(text))
    unit = m.group(2).lower() if m else None
    if not m or unit not in _SIZE_UNITS:
        raise UserInputError(
            f"invalid {what} {text!r}",
            hint="use a number with a unit such as 4GiB, 512MiB, 16GB or a byte count",
        )
    number = float(m.group(1)) * _SIZE_UNITS[unit]
    if not math.isfinite(number) or number > MAX_SIZE_BYTES:
        raise UserInputError(f"{what} {str(text)[:40]!r} is larger than any machine (at most 1 EiB)")
    value = int(number)
    if value <= 0:
        raise UserInputError(f"{what} must be positive, got {text!r}")
    return value


def parse_duration(text: str, what: str = "duration") -> float:
    """Seconds from '120', '90s', '2m', '1h30m'."""
    s = str(text).strip().lower()
    pos, total = 0, 0.0
    for m in _TIME_RE.finditer(s):
        if m.start() != pos or m.group(2) not in _TIME_UNITS:
            break
        total += float(m.group(1)) * _TIME_UNITS[m.group(2)]
        pos = m.end()
    if not s or pos != len(s) or total <= 0:
        raise UserInputError(f"invalid {what} {str(text)[:40]!r}", hint="use seconds or units: 90, 90s, 2m, 1h30m")
    if not math.isfinite(total) or total > MAX_DURATION_S:
        raise UserInputError(f"{what} {str(text)[:40]!r} is longer than a year", hint="use at most 365d")
    return total


def format_bytes(n: float) -> str:
    """Binary units, as memory is sized in powers of two."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
