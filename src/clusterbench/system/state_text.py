"""Reading the node-state answer safely: labelled sections, clipped values, summaries over CPUs.

The answer comes from another machine, so it is treated as hostile: the whole text, the lines of
a section, each value and the number of keys are bounded before anything is built, and what was
clipped is said in the facts' notes rather than hidden.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clusterbench.system.topology import compress_cpulist

ABSENT = "absent"
MAX_TEXT_CHARS = 4 * 2**20
MAX_LINE_CHARS = 4096
MAX_SECTIONS = 2048
MAX_SECTION_LINES = 20_000
MAX_VALUE_CHARS = 512
MAX_KEYS = 512
MAX_NOTES = 20


def clip(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass
class Sections:
    """`@@cb:<name> [arg]` blocks of an answer, by (name, arg); the first of a repeated one wins."""

    blocks: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    complete: bool = False

    @classmethod
    def split(cls, text: str) -> Sections:
        sec = cls()
        if len(text) > MAX_TEXT_CHARS:
            sec.note(f"answer of {len(text):,} characters clipped to {MAX_TEXT_CHARS:,}")
            text = text[:MAX_TEXT_CHARS]
        current: list[str] | None = None
        for line in text.splitlines():
            if line.startswith("@@cb:"):
                name, _, arg = line[5:].partition(" ")
                if name == "end":
                    sec.complete = True
                    current = None
                    continue
                key = (clip(name, 64), clip(arg.strip(), 256))
                if key in sec.blocks or len(sec.blocks) >= MAX_SECTIONS:
                    current = None
                    if len(sec.blocks) >= MAX_SECTIONS:
                        sec.note(f"more than {MAX_SECTIONS} sections: the rest ignored")
                    continue
                current = sec.blocks[key] = []
            elif current is not None:
                if len(current) < MAX_SECTION_LINES:
                    current.append(line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS])
                elif len(current) == MAX_SECTION_LINES:
                    current.append("")  # marks the note as given once
                    sec.note(f"a section of more than {MAX_SECTION_LINES:,} lines clipped")
        if not sec.complete:
            sec.note("incomplete answer: no end marker (the script was cut short)")
        return sec

    def lines(self, name: str, arg: str = "") -> list[str] | None:
        block = self.blocks.get((name, arg))
        if block is None:
            return None
        return block[:MAX_SECTION_LINES]

    def has(self, name: str) -> bool:
        return any(n == name for n, _ in self.blocks)

    def args(self, name: str) -> list[str]:
        return [a for n, a in self.blocks if n == name]

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES and text not in self.notes:
            self.notes.append(text)


def files_of(lines: list[str] | None) -> dict[str, str]:
    """`grep -sH .` output: path -> its first line (whitespace runs made single spaces)."""
    out: dict[str, str] = {}
    for line in (lines or [])[:MAX_SECTION_LINES]:
        path, sep, value = line.partition(":")
        if sep and path.startswith("/") and path not in out:
            out[path] = clip(" ".join(value.split()), 2048)
    return out


def compress(cpus: list[int]) -> str:
    return compress_cpulist(sorted(set(cpus)))


def summarise(by_member: dict[int, str], noun: str = "CPUs") -> str:
    """One value per CPU (or queue) in one line: "all 8 CPUs: performance", or each value with
    the members that have it ("performance on CPUs 0-3; powersave on CPUs 4-7")."""
    if not by_member:
        return ABSENT
    groups: dict[str, list[int]] = {}
    for member, value in sorted(by_member.items()):
        groups.setdefault(value, []).append(member)
    if len(groups) == 1:
        return f"all {len(by_member)} {noun}: {next(iter(groups))}"
    parts = sorted(groups.items(), key=lambda item: item[1][0])
    return clip("; ".join(f"{value} on {noun} {compress(members)}" for value, members in parts), 2048)
