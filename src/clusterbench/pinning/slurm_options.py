"""srun's placement options as srun 22.05 reads them: --cpu-bind, --distribution, --hint.

Parsing only; what they do is in pinning/slurm_affinity.py (stock Slurm) and pinning/psslurm.py.
Anything srun would refuse is refused here, located at its option.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clusterbench.errors import UserInputError

MAX_COUNT = 65536  # tasks, nodes, CPUs per task, list repeats: bounded before any list is built

BIND_TYPES = ("none", "threads", "cores", "sockets", "ldoms", "rank", "rank_ldom")
BIND_LISTS = ("map_cpu", "mask_cpu", "map_ldom", "mask_ldom")
_BIND_ALIASES = {"no": "none", "thread": "threads", "core": "cores", "socket": "sockets", "ldom": "ldoms"}
HINTS = ("nomultithread", "multithread", "compute_bound", "memory_bound")


@dataclass(frozen=True)
class CpuBind:
    """--cpu-bind: `kind` None means not given (task/affinity then binds automatically)."""

    kind: str | None = None
    values: tuple[str, ...] = ()  # the list of map_cpu, mask_cpu, map_ldom, mask_ldom
    verbose: bool = False


def parse_cpu_bind(text: str | None) -> CpuBind:
    """'verbose,cores', 'map_cpu:0,5,2*3', 'q,rank' -> CpuBind. Values of a list follow it after
    commas, as srun reads them; 'N*K' repeats N K times."""
    if text is None or not text.strip():
        return CpuBind()
    kind: str | None = None
    values: list[str] = []
    verbose = False
    in_list = False
    for word in (w.strip() for w in text.lower().split(",")):
        if in_list and re.fullmatch(r"(0x)?[0-9a-f]+(\*\d+)?", word):
            values.extend(_expand_multiplier(word))
            continue
        in_list = False
        word = _BIND_ALIASES.get(word, word)
        if word in ("v", "verbose"):
            verbose = True
        elif word in ("q", "quiet"):
            verbose = False
        elif word in BIND_TYPES or word.split(":", 1)[0] in BIND_LISTS:
            if kind is not None:
                raise UserInputError(f"{text!r} gives more than one binding type ({kind}, {word})",
                                     where="--cpu-bind", hint="give one of " + ", ".join(BIND_TYPES + BIND_LISTS))
            kind, _, rest = word.partition(":")
            if kind in BIND_LISTS:
                if not rest:
                    raise UserInputError(f"{text!r}: {kind} needs a list", where="--cpu-bind",
                                         hint=f"e.g. {kind}:0,1")
                values.extend(_expand_multiplier(rest))
                in_list = True
        elif word == "boards":
            raise UserInputError("--cpu-bind=boards: Slurm 22.05 no longer has it", where="--cpu-bind")
        else:
            raise UserInputError(f"unknown word {word!r} in {text!r}", where="--cpu-bind",
                                 hint="verbose, " + ", ".join(BIND_TYPES) + ", or map_cpu:/mask_cpu:/"
                                      "map_ldom:/mask_ldom: with a list")
    if kind in BIND_LISTS:
        for v in values:
            try:
                int(v[2:] if v.startswith("0x") else v, 16 if kind.startswith("mask") or v.startswith("0x") else 10)
            except ValueError:
                raise UserInputError(f"{v!r} in {text!r} is not a number", where="--cpu-bind") from None
    return CpuBind(kind, tuple(values), verbose)


def _expand_multiplier(word: str) -> list[str]:
    """'3*4' -> ['3', '3', '3', '3'] (srun's list shorthand), bounded."""
    value, _, count = word.partition("*")
    if not re.fullmatch(r"(0x)?[0-9a-f]+", value) or (count and not count.isdigit()):
        raise UserInputError(f"{word!r} is not a CPU, mask or domain", where="--cpu-bind")
    n = int(count) if count else 1
    if not 1 <= n <= MAX_COUNT:
        raise UserInputError(f"repeat count in {word!r} out of range", where="--cpu-bind",
                             hint=f"1 to {MAX_COUNT}")
    return [value] * n


@dataclass(frozen=True)
class Distribution:
    """--distribution node[:socket[:core]][,pack|,nopack]; None = '*' (the default)."""

    node: str = "block"  # block, cyclic, plane
    socket: str | None = None  # block, cyclic, fcyclic
    core: str | None = None
    plane: int | None = None
    pack: bool | None = None
    given: bool = False


def parse_distribution(text: str | None) -> Distribution:
    if text is None or not text.strip():
        return Distribution()
    words = text.strip().lower()
    main, _, flag = words.partition(",")
    pack = None
    if flag:
        if flag not in ("pack", "nopack"):
            raise UserInputError(f"unknown flag {flag!r} in {text!r}", where="--distribution",
                                 hint="pack or nopack")
        pack = flag == "pack"
    if main.startswith("plane"):
        m = re.fullmatch(r"plane=(\d+)", main)
        if not m or not 1 <= int(m.group(1)) <= MAX_COUNT:
            raise UserInputError(f"{text!r}: plane needs a size", where="--distribution",
                                 hint="plane=N with N from 1; nothing may follow it")
        return Distribution("plane", plane=int(m.group(1)), pack=pack, given=True)
    levels = main.split(":")
    if len(levels) > 3:
        raise UserInputError(f"{text!r}: at most node:socket:core", where="--distribution")
    allowed = (("block", "cyclic", "arbitrary"), ("block", "cyclic", "fcyclic"), ("block", "cyclic", "fcyclic"))
    parsed: list[str | None] = []
    for i, word in enumerate(levels):
        if word in ("*", ""):
            parsed.append(None)
        elif word in allowed[i]:
            parsed.append(word)
        else:
            raise UserInputError(f"{text!r}: unknown {('node', 'socket', 'core')[i]} "
                                 f"distribution {word!r}", where="--distribution",
                                 hint="one of " + ", ".join(allowed[i]) + " or *")
    parsed += [None] * (3 - len(parsed))
    if parsed[0] == "arbitrary":
        raise UserInputError("--distribution=arbitrary needs a host list (SLURM_HOSTFILE); not modelled",
                             where="--distribution", hint="use block, cyclic or plane=N")
    return Distribution(parsed[0] or "block", parsed[1], parsed[2], None, pack, True)


def parse_hint(text: str | None) -> frozenset[str]:
    if text is None or not text.strip():
        return frozenset()
    words = frozenset(w.strip().lower() for w in text.split(","))
    unknown = sorted(words - set(HINTS))
    if unknown:
        raise UserInputError(f"unknown hint {unknown[0]!r} in {text!r}", where="--hint",
                             hint="one of " + ", ".join(HINTS))
    if {"multithread", "nomultithread"} <= words:
        raise UserInputError(f"{text!r}: multithread and nomultithread contradict", where="--hint")
    return words
