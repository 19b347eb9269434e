"""Bounds on everything a campaign file or an option can make clusterbench build, checked first.

A campaign file is code from someone else: a few hundred bytes can ask for 10^9 runs, a YAML
alias bomb, an expression with a 10^10-character string, or a range of 10^8 values. Each bound
is counted *before* anything is built, and a refusal names the limit and how to raise it:
`clusterbench --limit max_runs=200000 campaign run big.yaml` (or the environment variable
CLUSTERBENCH_LIMIT_MAX_RUNS=200000). Defaults are far above what real studies use.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from clusterbench.errors import UserInputError


@dataclass(frozen=True)
class Limit:
    name: str
    default: int
    what: str
    maximum: int = 2**62  # even a raised limit stays a bound


LIMITS = {limit.name: limit for limit in (
    Limit("max_runs", 100_000, "runs one campaign or plan may expand to (points x repeats)"),
    Limit("max_points", 1_000_000, "points of one block's space before filtering"),
    Limit("max_range_values", 100_000, "values one range such as 32..256:8 may produce"),
    Limit("max_repeats", 10_000, "repeats of one point"),
    Limit("max_file_bytes", 4 * 2**20, "bytes of a campaign file"),
    Limit("max_yaml_aliases", 100, "YAML aliases (*name) in a campaign file"),
    Limit("max_yaml_depth", 64, "nesting depth of a campaign file"),
    Limit("max_yaml_nodes", 200_000, "YAML nodes of a campaign file, aliases counted where used"),
    Limit("max_expr_chars", 2_000, "characters of one expression"),
    Limit("max_expr_depth", 40, "nesting depth of one expression"),
    Limit("max_expr_nodes", 500, "syntax nodes of one expression"),
    Limit("max_int_bits", 256, "bits of an integer an expression computes"),
    Limit("max_sequence", 100_000, "characters of a string or items of a list an expression computes"),
    Limit("max_name_chars", 100, "characters of a campaign or block name"),
    Limit("max_parse_seconds", 10, "seconds the metric patterns of one run may take on its output"),
)}

_overrides: dict[str, int] = {}


def limit(name: str) -> int:
    """The value in force: an override, CLUSTERBENCH_LIMIT_<NAME>, or the default."""
    if name in _overrides:
        return _overrides[name]
    env = os.environ.get(f"CLUSTERBENCH_LIMIT_{name.upper()}")
    if env:
        return _checked(name, env, f"CLUSTERBENCH_LIMIT_{name.upper()}")
    return LIMITS[name].default


def check_environment() -> None:
    """Refuse a misspelt or malformed CLUSTERBENCH_LIMIT_* at start-up, not when first consulted
    (or never: an unknown name would otherwise be ignored in silence)."""
    for key, value in os.environ.items():
        if key.startswith("CLUSTERBENCH_LIMIT_"):
            _checked(key.removeprefix("CLUSTERBENCH_LIMIT_").lower(), value, key)


def override(name: str, value: str) -> None:
    """`--limit name=value`: raise (or lower) one limit for this process."""
    _overrides[name] = _checked(name, value, f"--limit {name}")


def _checked(name: str, value: str, where: str) -> int:
    if name not in LIMITS:
        raise UserInputError(f"{where}: unknown limit {name!r}", hint="limits: " + ", ".join(sorted(LIMITS)))
    try:
        number = int(value)
    except ValueError:
        raise UserInputError(f"{where}: {value!r} is not a whole number") from None
    if not 1 <= number <= LIMITS[name].maximum:
        raise UserInputError(f"{where}: {number} is out of range (1..{LIMITS[name].maximum})")
    return number


def exceeded(name: str, count: int | str, subject: str | None = None, hint: str | None = None) -> UserInputError:
    """The error for `subject` going past limit `name` (the caller raises it where it can locate it)."""
    value = limit(name)
    return UserInputError(f"{subject + ': ' if subject else ''}{count} exceeds the limit {name}={value} "
                          f"({LIMITS[name].what})",
                          hint=hint or f"if you mean it, raise it: clusterbench --limit {name}=N ... "
                                       f"(or CLUSTERBENCH_LIMIT_{name.upper()}=N)")


def check(name: str, count: int, subject: str) -> None:
    if count > limit(name):
        raise exceeded(name, count, subject)
