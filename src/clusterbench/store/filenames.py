"""What a file's name says: `--name-pattern` fields, each typed by what it holds.

Old studies put their parameters in file names (`HPL.out.2_node_13440_128_1_4_2_2.blis_serial`).
A pattern such as `HPL.out.{nodes}_node_{n}_{nb}_{grids}.{blas}` names the parts. Reading every
part with a generic "is it a number?" went wrong: Python's int() accepts '_' between digits, so
the grids `1_32_2_16_4_8` became the integer 13221648. So each field has a type, written
`{field:type}` or implied by its name (`nodes` is a whole number, `grids` a list of P x Q
grids, `blas` a BLAS name made canonical), and a value that does not fit its type is kept as
the text it was, with the problem recorded, never turned into a wrong number.

The pattern is matched by a small matcher of its own, not a regular expression: with several
fields, a regular expression tries every way to cut a name (a few fields and a name of
underscores take hours), while this one remembers the cuts that failed and stays polynomial.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from clusterbench.bench.canonical import canonical_blas, canonical_interconnect
from clusterbench.errors import UserInputError

FIELD_TYPES = ("int", "float", "str", "grid", "grids", "blas", "interconnect")
# The type a field has when the pattern does not say: by what its name means.
TYPE_BY_NAME = {name: "int" for name in ("nodes", "n", "nb", "p", "q", "ranks", "threads", "cores", "ppn")} | {
    "grid": "grid", "grids": "grids", "blas": "blas", "interconnect": "interconnect"}

MAX_PATTERN_CHARS = 1000  # a longer --name-pattern is not a file name pattern
MAX_FIELDS = 32
MAX_FIELD_NAME_CHARS = 64
MAX_NAME_CHARS = 4096  # a file name is at most 255 bytes (1020 characters once shown with \xNN escapes)
MAX_DIGITS = 30  # a whole number in a file name with more digits is not a count
MAX_GRIDS = 1000  # P x Q grids one name may list

_FIELD_NAME = re.compile(rf"[A-Za-z_][A-Za-z0-9_]{{0,{MAX_FIELD_NAME_CHARS - 1}}}")
_DIGITS = re.compile(rf"[0-9]{{1,{MAX_DIGITS}}}")
_DECIMAL = re.compile(rf"[0-9]{{1,{MAX_DIGITS}}}\.[0-9]{{1,{MAX_DIGITS}}}")
_FLOAT = re.compile(r"[+-]?(?:[0-9]{1,30}\.?[0-9]{0,30}|\.[0-9]{1,30})(?:[eE][+-]?[0-9]{1,3})?")
_GRID = re.compile(r"([0-9]{1,9})\s*[xX_]\s*([0-9]{1,9})")
_GRID_X = re.compile(r"([0-9]{1,9})[xX]([0-9]{1,9})")
PATTERN_HINT = ("write the file name with {field} or {field:type} where a value stands, e.g. "
                "'HPL.out.{nodes}_node_{n}_{nb}_{grids}.{blas}'; types: " + ", ".join(FIELD_TYPES)
                + "; {{ and }} are literal braces")


@dataclass
class NameFields:
    """The typed values a file name gave, and what went wrong reading it."""

    values: dict = field(default_factory=dict)  # field -> typed (canonical) value, plus 'tuning' from a BLAS name
    as_written: dict = field(default_factory=dict)  # field -> the spelling in the name, where canonical differs
    problems: dict = field(default_factory=dict)  # field -> why its value was kept as text


@dataclass(frozen=True)
class NamePattern:
    """A parsed --name-pattern: literal texts and fields alternating, literals[0] first."""

    text: str
    literals: tuple[str, ...]  # len(fields) + 1 pieces of literal text around the fields
    fields: tuple[tuple[str, str], ...]  # (field, type)

    def split(self, name: str) -> dict[str, str] | None:
        """The raw text of each field in `name`, or None when the name does not fit the pattern.

        Like `^lit0(.+?)lit1(.+?)...litk$`: every field takes at least one character and the
        shortest cut that lets the rest fit wins. Which cuts let the rest fit is worked out
        first, from the end of the name back (`nearest`), so a name of n characters costs
        about fields x n steps, whatever it holds.
        """
        lits, n = self.literals, len(name)
        if n > MAX_NAME_CHARS or not name.startswith(lits[0]):
            return None
        if not self.fields:
            return {} if name == lits[0] else None
        last_end = n - len(lits[-1])  # where the last field ends
        if not name.endswith(lits[-1]) or last_end <= len(lits[0]):
            return None
        fits = [start < last_end for start in range(n + 1)]  # can fields i.. start here? (i = the last one)
        nearest_ends: list[list[int | None]] = []  # per field but the last: start -> its shortest end that fits
        for lit in reversed(lits[1:-1]):
            nearest: list[int | None] = [None] * (n + 1)
            best = None
            for start in range(n - 1, -1, -1):  # an end at start+1 (a field holds one character at least)
                end = start + 1
                if end + len(lit) <= n and fits[end + len(lit)] and name.startswith(lit, end):
                    best = end
                nearest[start] = best
            fits = [end is not None for end in nearest]
            nearest_ends.append(nearest)
        nearest_ends.reverse()
        if not fits[len(lits[0])]:
            return None
        out, start = {}, len(lits[0])
        for i, (fname, _) in enumerate(self.fields):
            end = last_end if i == len(self.fields) - 1 else nearest_ends[i][start]
            out[fname] = name[start:end]
            start = end + len(lits[i + 1])
        return out

    def read(self, name: str) -> NameFields:
        """The typed fields of a file name; a name that does not fit is a problem, not an error."""
        raw = self.split(name)
        if raw is None:
            return NameFields(problems={"name": f"the file name does not match --name-pattern {self.text!r}"})
        out = NameFields()
        for fname, ftype in self.fields:
            typed_field(fname, ftype, raw[fname], out)
        return out


def compile_name_pattern(pattern: str) -> NamePattern:
    """'HPL.out.{nodes}_node_{n}_{grids:grids}' -> a NamePattern; a pattern that cannot work is
    UserInputError (exit 2) saying which field and what is allowed."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise UserInputError(f"--name-pattern is {len(pattern):,} characters long, more than the limit of "
                             f"{MAX_PATTERN_CHARS:,}", hint=PATTERN_HINT)
    literals: list[str] = []
    fields: list[tuple[str, str]] = []
    text: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith(("{{", "}}"), i):
            text.append(pattern[i])
            i += 2
        elif pattern[i] == "{":
            close = pattern.find("}", i)
            if close == -1:
                raise UserInputError(f"invalid --name-pattern {pattern!r}: the '{{' at character {i + 1} is "
                                     "never closed", hint=PATTERN_HINT)
            if fields and not text:
                raise UserInputError(
                    f"invalid --name-pattern {pattern!r}: the fields {{{fields[-1][0]}}} and "
                    f"{pattern[i:close + 1]} touch, so nothing says where one ends",
                    hint="put the text that separates them in the name into the pattern, e.g. {nodes}_{n}")
            fields.append(_field_spec(pattern, pattern[i + 1:close], {f for f, _ in fields}))
            if len(fields) > MAX_FIELDS:
                raise UserInputError(f"--name-pattern has more than {MAX_FIELDS} fields", hint=PATTERN_HINT)
            literals.append("".join(text))
            text = []
            i = close + 1
        elif pattern[i] == "}":
            raise UserInputError(f"invalid --name-pattern {pattern!r}: a '}}' at character {i + 1} closes no "
                                 "field", hint=PATTERN_HINT)
        else:
            text.append(pattern[i])
            i += 1
    literals.append("".join(text))
    return NamePattern(pattern, tuple(literals), tuple(fields))


def _field_spec(pattern: str, spec: str, seen: set[str]) -> tuple[str, str]:
    name, sep, ftype = spec.partition(":")
    name, ftype = name.strip(), ftype.strip()
    if not _FIELD_NAME.fullmatch(name):
        raise UserInputError(f"invalid --name-pattern {pattern!r}: {{{spec[:80]}}} is not a field name",
                             hint=f"a field name is 1 to {MAX_FIELD_NAME_CHARS} letters, digits and _ "
                                  f"(not starting with a digit); {PATTERN_HINT}")
    if name in seen:
        raise UserInputError(f"invalid --name-pattern {pattern!r}: the field {{{name}}} appears twice",
                             hint="each field may appear once")
    if sep and ftype not in FIELD_TYPES:
        raise UserInputError(f"invalid --name-pattern {pattern!r}: the field {{{name}}} has the unknown type "
                             f"{ftype[:40]!r}", hint="the known types are " + ", ".join(FIELD_TYPES))
    return name, ftype if sep else TYPE_BY_NAME.get(name, "")


def typed_field(name: str, ftype: str, raw: str, out: NameFields) -> None:
    """Put the value of one field into `out`: typed, canonical, or kept as text with its problem.

    `ftype` '' (a field whose name implies no type): digits are an int, a plain decimal a
    float, anything else the text itself; '1_000' stays text, since a name's '_' separates.
    """
    if ftype == "":
        if _DIGITS.fullmatch(raw):
            out.values[name] = int(raw)
        elif _DECIMAL.fullmatch(raw):
            out.values[name] = float(raw)
        else:
            out.values[name] = raw
        return
    if ftype == "blas":
        canonical, rest = canonical_blas(raw)
        out.values[name] = canonical
        if rest and "tuning" not in out.values:
            out.values["tuning"] = rest
        if canonical != raw:
            out.as_written[name] = raw
        return
    if ftype == "interconnect":
        out.values[name] = canonical = canonical_interconnect(raw)
        if canonical != raw:
            out.as_written[name] = raw
        return
    value, problem = _CONVERT[ftype](raw)
    out.values[name] = raw if problem else value
    if problem:
        out.problems[name] = f"{raw[:80]!r} is {problem}: kept as text"


def _as_int(raw: str) -> tuple[int | None, str | None]:
    return (int(raw), None) if _DIGITS.fullmatch(raw) else (None, f"not a whole number of at most {MAX_DIGITS} "
                                                                   "digits")


def _as_float(raw: str) -> tuple[float | None, str | None]:
    if _FLOAT.fullmatch(raw) and any(c.isdigit() for c in raw):
        value = float(raw)
        if value - value == 0:  # finite: 1e999 is inf
            return value, None
    return None, "not a finite number"


def _as_str(raw: str) -> tuple[str, None]:
    return raw, None


def _as_grid(raw: str) -> tuple[str | None, str | None]:
    m = _GRID.fullmatch(raw.strip())
    if not m:
        return None, "not a P x Q grid (like 2x16 or 2_16)"
    return _grid(int(m.group(1)), int(m.group(2)))


def _as_grids(raw: str) -> tuple[list[str] | None, str | None]:
    """'1_32_2_16_4_8' or '1x32,2x16' (also '1x32_2x16') -> ['1x32', '2x16', ...]."""
    if len(raw) > MAX_GRIDS * 20:
        return None, "too long for a list of P x Q grids"
    if "x" in raw.lower():
        items = [p for p in re.split(r"[,;+_\s]+", raw.strip()) if p]
        pairs = [_GRID_X.fullmatch(p) for p in items]
        if not items or not all(pairs):
            return None, "not a list of P x Q grids (like 1x32,2x16 or 1_32_2_16)"
        numbers = [(int(m.group(1)), int(m.group(2))) for m in pairs if m]
    else:
        parts = re.split(r"[_,]", raw.strip())
        if not all(_DIGITS.fullmatch(p) for p in parts):
            return None, "not a list of P x Q grids (like 1_32_2_16 or 1x32,2x16)"
        if len(parts) % 2:
            return None, f"not a list of P x Q grids: an odd count of numbers ({len(parts)})"
        numbers = [(int(parts[k]), int(parts[k + 1])) for k in range(0, len(parts), 2)]
    if len(numbers) > MAX_GRIDS:
        return None, f"more than {MAX_GRIDS} grids"
    grids = []
    for p, q in numbers:
        grid, problem = _grid(p, q)
        if problem:
            return None, problem
        grids.append(grid)
    return grids, None


def _grid(p: int, q: int) -> tuple[str | None, str | None]:
    if p < 1 or q < 1:
        return None, f"not a P x Q grid ({p}x{q}: P and Q are at least 1)"
    return f"{p}x{q}", None


_CONVERT = {"int": _as_int, "float": _as_float, "str": _as_str, "grid": _as_grid, "grids": _as_grids}


# A date and time of day in a file name, as programs and job scripts write them: HPCG's report
# `HPCG-Benchmark_3.1_2017-03-27_15-44-28.txt`, HPCG 3.0's `..._2015:12:01-10:09:23.yaml`, a cron job's
# `20170322_154501.out`. Digits glued to either side are part of another number, not a date.
_NAME_TIME = re.compile(r"(?<![0-9])((?:19|20)[0-9]{2})([-.:]?)([0-9]{2})\2([0-9]{2})[-_.T]?"
                        r"([0-9]{2})([-.:]?)([0-9]{2})\6([0-9]{2})(?![0-9])")


def time_in_name(name: str) -> str | None:
    """The date and time a file name holds, as ISO 8601 without a zone (the writer's local time, as
    HPL and HPCC print theirs), or None when it holds none that is a real date."""
    for m in _NAME_TIME.finditer(name[:MAX_NAME_CHARS]):
        year, _, month, day, hour, _, minute, second = m.groups()
        try:
            return datetime(int(year), int(month), int(day), int(hour), int(minute), int(second)).isoformat()
        except ValueError:  # 2017-13-45: digits, not a date
            continue
    return None
