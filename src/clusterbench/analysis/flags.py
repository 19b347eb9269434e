"""Short flags that say a stored result is incomplete or suspicious, wherever results are listed.

A result can be valid and still deserve a second look: an HPL file that ends before HPL's
'Finished N tests' summary keeps each line's own residual verdict, but the run was cut short;
a file name that says one N while the output says another. Such facts used to show only in
`results RUN_ID`. These flags are the one place that decides them, so the listing, the report's
run table and every CSV say the same thing.
"""

from __future__ import annotations

FLAGS = {
    "failed": "the run did not finish normally (failed, timed out, interrupted or still running)",
    "invalid": "the benchmark's own validation failed or a figure is impossible: never counted as a result",
    "truncated": "the output ends before the benchmark's closing summary (cut short or aborted)",
    "warning": "valid, with a remark stored in its reason",
    "name-conflict": "the file name states a value the output contradicts (the output's value was kept)",
    "suspect": "a figure beyond what the machine can do (above 100% of its peak): kept, never a best",
    "disturbed": "other work took the run's CPUs while it ran (facts.disturbed): never a best",
    "excluded": "excluded by a user (clusterbench exclude), with the reason: never a best",
}
# Flags that keep a run out of bests, baselines, history, comparisons and the tuner by default.
NOT_COUNTED = frozenset({"failed", "invalid", "truncated", "suspect", "disturbed", "excluded"})
_TRUNCATION_WORDS = ("truncat", "ends before", "aborted")


def run_flags(run: dict) -> list[str]:
    """The flags of one run (a decoded run row: status, valid, reason, facts), in FLAGS order."""
    out = []
    status = run.get("status")
    if status not in ("ok", "invalid", None):
        out.append("failed")
    if run.get("valid") == 0 or run.get("valid") is False or status == "invalid":
        out.append("invalid")
    reason = (run.get("reason") or "").lower()
    if any(word in reason for word in _TRUNCATION_WORDS):
        out.append("truncated")
    elif reason and "invalid" not in out and "failed" not in out:
        out.append("warning")
    facts = run.get("facts") or {}
    if facts.get("file_name_conflicts"):
        out.append("name-conflict")
    if run.get("suspect") or facts.get("suspect"):
        out.append("suspect")
    if facts.get("disturbed"):
        out.append("disturbed")
    if run.get("excluded"):
        out.append("excluded")
    return out


def counts(run: dict) -> bool:
    """May this run's values be a best, a baseline, a point of a history or a tuner's evidence?"""
    return not NOT_COUNTED.intersection(run_flags(run))


def flags_text(run: dict) -> str:
    """'truncated, name-conflict', or '' for a clean result."""
    return ", ".join(run_flags(run))
