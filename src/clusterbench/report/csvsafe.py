"""Every CSV clusterbench writes goes through `cell`: OWASP's rule against CSV (formula) injection.

A spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` as a formula (and tab or carriage
return can hide such a start), so a tag, campaign or host name such as `=cmd|' /C calc'!A0` would
run when someone opens the export. A *text* cell with one of these first characters gets a
leading single quote, which spreadsheets show as text. Numbers are left alone: a float -3.5 stays
the number -3.5; only strings are neutralised.
"""

from __future__ import annotations

from collections.abc import Iterable

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def cell(value):
    """The value to write in a CSV cell: a string that a spreadsheet would read as a formula gets a
    leading `'`; anything else (numbers, None, booleans) is returned unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def row(values: Iterable) -> list:
    return [cell(v) for v in values]


def frame(table):
    """A pandas DataFrame with its text cells (and column names) neutralised; numeric columns untouched."""
    from pandas.api.types import is_numeric_dtype

    out = table.copy()
    for column in out.columns:
        if not is_numeric_dtype(out[column]):  # text (object or string dtype), possibly mixed with numbers
            out[column] = out[column].map(cell)
    out.columns = [cell(c) for c in out.columns]
    return out
