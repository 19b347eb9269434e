"""Parser for HPL output (netlib HPL 1.x/2.x, and the HPL section of HPCC).

One `HplResult` per printed T/V line. A result is valid only when its residual check was
printed and PASSED; a FAILED residual, or a result whose check never appeared (truncated
output, aborted run), is kept but marked invalid. The 'Finished N tests' summary is
cross-checked against the lines actually found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clusterbench.bench.metrics import Metric, Outcome

_VERSION = re.compile(r"HPLinpack\s+(\d+(?:\.\d+)*)")
_RESULT = re.compile(
    r"^(W[RC]\w*)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+(?:[eE][+-]?\d+)?)\s+"
    r"([\d.]+(?:[eE][+-]?\d+)?)\s*$")
_RESIDUAL = re.compile(r"^\|\|Ax-b\|\|.*?=\s*([\d.]+(?:[eE][+-]?\d+)?)\s*\.+\s*(PASSED|FAILED)")
_START = re.compile(r"HPL_pdgesv\(\) start time\s+(.+?)\s*$")
_END = re.compile(r"HPL_pdgesv\(\) end time\s+(.+?)\s*$")
_FINISHED = re.compile(r"Finished\s+(\d+)\s+tests")
_COUNTS = {
    "passed": re.compile(r"(\d+)\s+tests completed and passed"),
    "failed": re.compile(r"(\d+)\s+tests completed and failed"),
    "skipped": re.compile(r"(\d+)\s+tests skipped"),
}
_ECHO = re.compile(r"^(N|NB|PMAP|P|Q|PFACT|NBMIN|NDIV|RFACT|BCAST|DEPTH|SWAP|L1|U|EQUIL|ALIGN)\s+:\s+(.*?)\s*$")
_THRESHOLD = re.compile(r"scaled residuals are less than\s+([\d.]+)")


@dataclass
class HplResult:
    tv: str
    n: int
    nb: int
    p: int
    q: int
    time_s: float
    gflops: float
    residual: float | None = None
    passed: bool | None = None  # None: no residual line seen
    start: str | None = None
    end: str | None = None

    @property
    def valid(self) -> bool:
        return self.passed is True

    def labels(self) -> dict:
        return {"tv": self.tv, "n": self.n, "nb": self.nb, "p": self.p, "q": self.q}


@dataclass
class HplOutput:
    version: str | None = None
    results: list[HplResult] = field(default_factory=list)
    parameters: dict[str, list[str]] = field(default_factory=dict)
    threshold: float | None = None
    finished: int | None = None
    passed: int | None = None
    failed: int | None = None
    skipped: int | None = None

    @property
    def truncated(self) -> bool:
        return self.finished is None

    def problems(self) -> list[str]:
        """Inconsistencies between the result lines and HPL's own summary."""
        out = []
        if self.truncated:
            out.append("output ends before HPL's 'Finished N tests' summary (truncated or aborted)")
        else:
            checked = [r for r in self.results if r.passed is not None]
            if self.finished is not None and self.finished != len(self.results) + (self.skipped or 0) \
                    and self.finished != len(self.results):
                out.append(f"HPL reports {self.finished} tests but {len(self.results)} result lines were found")
            if self.passed is not None and self.passed != sum(1 for r in checked if r.passed):
                out.append(f"HPL reports {self.passed} passed but {sum(1 for r in checked if r.passed)} "
                           "PASSED residuals were found")
        for r in self.results:
            if r.passed is False:
                out.append(f"residual check FAILED for {r.tv} N={r.n} NB={r.nb} {r.p}x{r.q} "
                           f"(residual {r.residual})")
            elif r.passed is None:
                out.append(f"no residual check printed for {r.tv} N={r.n} NB={r.nb} {r.p}x{r.q}")
        return out

    def best(self) -> HplResult | None:
        valid = [r for r in self.results if r.valid]
        return max(valid, key=lambda r: r.gflops) if valid else None


def parse_hpl(text: str) -> HplOutput:
    out = HplOutput()
    m = _VERSION.search(text)
    out.version = m.group(1) if m else None
    m = _THRESHOLD.search(text)
    out.threshold = float(m.group(1)) if m else None
    current: HplResult | None = None
    in_echo = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("The following parameter values will be used"):
            in_echo = True
            continue
        echo = _ECHO.match(line) if in_echo else None
        if echo and not out.results:
            out.parameters.setdefault(echo.group(1), echo.group(2).split())
            continue
        m = _RESULT.match(line)
        if m:
            current = HplResult(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)),
                                int(m.group(5)), float(m.group(6)), float(m.group(7)))
            out.results.append(current)
            continue
        if current is None:
            continue
        if m := _RESIDUAL.match(line):
            value, ok = float(m.group(1)), m.group(2) == "PASSED"
            # HPL 1.0 prints three residuals: any FAILED fails the test, keep the largest.
            current.residual = value if current.residual is None else max(current.residual, value)
            current.passed = ok if current.passed is None else (current.passed and ok)
        elif m := _START.search(line):
            current.start = m.group(1)
        elif m := _END.search(line):
            current.end = m.group(1)
    if m := _FINISHED.search(text):
        out.finished = int(m.group(1))
        for key, rx in _COUNTS.items():
            c = rx.search(text, m.end())
            setattr(out, key, int(c.group(1)) if c else None)
    return out


def result_metrics(r: HplResult) -> list[Metric]:
    """`hpl_gflops` and `hpl_time` of one T/V line, labelled with its N, NB, P, Q and residual."""
    labels = r.labels() | {"residual": r.residual, "start": r.start, "end": r.end}
    return [Metric("hpl_gflops", r.gflops, "Gflop/s", True, labels, r.valid),
            Metric("hpl_time", r.time_s, "s", False, labels, r.valid)]


def hpl_outcome(text: str) -> Outcome:
    """Metrics for every result line (`hpl_gflops`, `hpl_time`) and the run's verdict."""
    parsed = parse_hpl(text)
    outcome = Outcome(facts={"hpl_version": parsed.version, "hpl_parameters": parsed.parameters,
                             "hpl_finished": parsed.finished, "hpl_passed": parsed.passed,
                             "hpl_failed": parsed.failed, "hpl_skipped": parsed.skipped})
    for r in parsed.results:
        outcome.metrics += result_metrics(r)
    if not parsed.results:
        outcome.invalidate("no HPL result line found")
    for problem in parsed.problems():
        outcome.invalidate(problem)
    return outcome
