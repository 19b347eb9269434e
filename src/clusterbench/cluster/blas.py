"""The system BLAS alternative (Debian's `libblas.so.3`) on every node: show it, and set it as root.

The Pi study switched OpenBLAS and BLIS on eight nodes with an ssh loop around
`update-alternatives`; one node left behind silently changes every multi-node result. Runs
of clusterbench choose their BLAS per run through LD_LIBRARY_PATH; this is for the programs
that use the system default (and for checking that it is the same everywhere).
"""

from __future__ import annotations

import re
import shlex

from clusterbench.errors import UserInputError
from clusterbench.launch.remote import Answer, run_everywhere

SHOW = ("for f in /etc/alternatives/libblas.so.3*; do [ -e \"$f\" ] && "
        "echo \"$(basename \"$f\") $(readlink \"$f\")\"; done")


def parse_alternative(text: str) -> tuple[str, str] | None:
    """'libblas.so.3-x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/blis-openmp/libblas.so.3' ->
    (the alternative's name, the variant)."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            variant = parts[1].rstrip("/").split("/")[-2]
            return parts[0], variant
    return None


def show(hosts: list[str]) -> list[Answer]:
    return run_everywhere(hosts, SHOW)


def set_variant(hosts: list[str], variant: str) -> list[Answer]:
    """update-alternatives --set on every node (root on the nodes); each node answers."""
    if not re.fullmatch(r"[A-Za-z0-9._+-]+", variant):
        raise UserInputError(f"not a BLAS variant name: {variant!r}", hint="e.g. openblas-serial, blis-openmp")
    v = shlex.quote(variant)
    script = (
        "for f in /etc/alternatives/libblas.so.3*; do [ -e \"$f\" ] || continue; "
        "name=$(basename \"$f\"); dir=$(dirname \"$(dirname \"$(readlink \"$f\")\")\"); "
        f"target=\"$dir/{variant}/libblas.so.3\"; "
        f"[ -e \"$target\" ] || {{ echo \"variant {v} is not installed here ($target)\" >&2; exit 3; }}; "
        "update-alternatives --set \"$name\" \"$target\" >/dev/null || exit $?; "
        "echo \"$name $(readlink \"$f\")\"; done")
    return run_everywhere(hosts, script)
