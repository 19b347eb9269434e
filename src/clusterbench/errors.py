"""Errors that the CLI turns into a clear message and an exit code.

A `UserInputError` means the user asked for something that cannot work (bad option value,
a problem that does not fit in memory, a missing binary). It is raised *before* anything
runs, and the CLI exits with code 2 after printing what, where and how to fix it.
"""

from __future__ import annotations


class UserInputError(Exception):
    """Bad input: printed as `error: <what>` plus an optional hint, exit code 2."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None, where: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.where = where

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.hint:
            text += f"\nhint: {self.hint}"
        return text


class MissingToolError(UserInputError):
    """A required program (mpirun, hpcc, ...) is not installed."""


class EnvironmentProblem(UserInputError):
    """The machine, not the input, is at fault (a database that cannot be opened or written, a
    full disk, a lock held by another run): printed like bad input, exit code 1."""

    exit_code = 1


class Interrupted(BaseException):
    """The work was stopped by Ctrl-C, SIGTERM or SIGHUP, after everything finished was stored.

    Raised once, by the library function that ran the work (the run loop, the cluster job, the
    tuner), with `stored` saying what is kept and how to go on; the CLI prints it in one place
    (`clusterbench.cli.main`) and exits with 130. A BaseException, as KeyboardInterrupt is, so
    no `except Exception` on the way up swallows it, and not a KeyboardInterrupt, so that typer
    does not turn it into a silent exit before the CLI can say what was kept.
    """

    def __init__(self, stored: str):
        super().__init__(stored)
        self.stored = stored


def suggest(value: object, known: list[str], what: str, most: int = 20) -> str:
    """The hint for a name that is none of `known`: 'did you mean ...?' with the close ones (difflib's
    ratio of at least 0.6), else `what` and the first `most` of them.

    One function for every name a user types (a benchmark, a parameter, a pinning strategy, a BLAS
    variant, a campaign, a metric), so that a typo is answered the same way everywhere; here, at the
    bottom of the layers, so that each of them can ask it. difflib is imported only when a name was
    wrong."""
    import difflib

    known = [str(name) for name in known]
    close = difflib.get_close_matches(str(value), known, n=5, cutoff=0.6)
    if close:
        return f"did you mean {' or '.join(repr(c) for c in close)}? ({len(known)} {what.split()[-1]} in all)"
    shown = ", ".join(known[:most])
    return f"{what}: {shown}" + (f" and {len(known) - most} more" if len(known) > most else "")
