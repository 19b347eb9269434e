"""Declared benchmark parameters: name, type, default, limits, and the check of a value.

Each benchmark module lists its parameters as `Param`s. Campaign files are checked against
these declarations before anything runs, so a misspelt parameter or a negative N is an error
naming the file, line and field, not a crash an hour into a sweep.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from clusterbench.errors import UserInputError

REQUIRED = object()
MAX_COUNT = 2**20  # nodes, ranks, threads: beyond any machine, and small enough to plan with
MAX_N = 10**8  # an HPL matrix of 80 PB: beyond any machine's memory


@dataclass(frozen=True)
class Param:
    name: str
    kind: type  # int, float, str, bool, list
    default: Any = None  # None: optional, derived by the benchmark when absent; REQUIRED: must be given
    help: str = ""
    choices: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def check(self, value: Any) -> Any:
        """The value converted to this parameter's type, or a UserInputError saying why not."""
        if type(value) is self.kind and (self.choices is None or value in self.choices) \
                and (self.minimum is None or value >= self.minimum) \
                and (self.maximum is None or value <= self.maximum) \
                and (self.kind is not float or math.isfinite(value)) and (self.kind is not str or "\0" not in value):
            return value  # the common case, first: campaigns check every parameter of every point
        kind_name = self.kind.__name__
        if self.kind is str and isinstance(value, bool) and self.choices:
            value = _yaml_word(value, self.choices)
        if self.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        elif self.kind is int and isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, self.kind) or (self.kind is int and isinstance(value, bool)):
            raise UserInputError(f"{self.name} must be {_article(kind_name)} {kind_name}, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise UserInputError(f"{self.name} must be one of {', '.join(self.choices)}; got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise UserInputError(f"{self.name} must be a finite number, got {value!r}")
        if isinstance(value, str) and "\0" in value:
            raise UserInputError(f"{self.name} contains a NUL byte")
        if self.minimum is not None and value < self.minimum:
            raise UserInputError(f"{self.name} must be at least {self.minimum:g}, got {value!r}")
        if self.maximum is not None and value > self.maximum:
            raise UserInputError(f"{self.name} must be at most {self.maximum:g}, got {value!r}")
        return value


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _yaml_word(value: bool, choices: tuple[str, ...]) -> str | bool:
    """YAML 1.1 reads `off`, `no`, `on`, `yes` as booleans; give a word parameter its word back."""
    words = ("off", "no", "false") if value is False else ("on", "yes", "true")
    return next((w for w in words if w in choices), value)
