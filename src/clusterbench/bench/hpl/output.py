"""Parser for HPL output (netlib HPL 1.x/2.x, and the HPL section of HPCC).

One `HplResult` per printed T/V line. A result is valid only when its residual check was
printed and PASSED; a FAILED residual, or a result whose check never appeared (truncated
output, aborted run), is kept but marked invalid. The 'Finished N tests' summary is
cross-checked against the lines actually found.

A figure that cannot be true makes its result invalid too (`implausible`): a value that is not
finite, a negative time, Gflops <= 0, Gflops that do not follow from N and the time (HPL
computes them as (2/3 N^3 + 3/2 N^2) / time, so an edited or corrupted figure shows), and
more than 10^7 Gflop/s per MPI process, which no machine reaches. Against a known Rpeak,
`check_rpeak` invalidates anything above 10x Rpeak.

Declared here for the importer and the report: `FORMAT` (an HPL output file, one imported run
per T/V line) and `METRICS` (`hpl_gflops`, the Rmax of the HPL section and the energy section, and
where else it is drawn: `RMAX_USES`; `hpl_time`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clusterbench.bench.declare import MetricSpec, OutputFormat, ReportUse, Result, merit
from clusterbench.bench.hpl.timing import hpl_flops
from clusterbench.bench.metrics import MAX_GFLOPS_PER_PROCESS, Metric, Outcome, TooManyResults, is_finite

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

RPEAK_FACTOR = 10  # above 10x the Rpeak of the system it ran on, a figure is impossible
# HPL's Gflops follow from N and its own (unrounded) time; the printed time has two decimals.
# A figure more than this factor outside what N and the printed time allow was not computed by HPL.
CONSISTENCY_FACTOR = 2.0


def implausible(n: float, time_s: float, gflops: float, ranks: float | None,
                time_resolution: float = 0.005) -> list[str]:
    """Why these HPL figures cannot be a measurement ([] if they can).

    `time_resolution` is half the last printed digit of the time (0.005 for HPL's `%.2f`; 0
    for an exact time such as HPCC's summary): a printed 0.00 s is a solve under 5 ms, which
    is possible for a tiny N, so a zero time is impossible only when the Gflops say otherwise.
    Values that are not finite are left to `Outcome.check_values`.
    """
    if not (is_finite(n) and is_finite(time_s) and is_finite(gflops)):
        return []
    out = []
    if time_s < 0 or (time_s == 0 and time_resolution == 0):
        out.append(f"time {time_s:g} s is impossible")
    if gflops <= 0:
        out.append(f"{gflops:g} Gflop/s is impossible (no work measured)")
        return out
    if ranks and is_finite(ranks) and ranks > 0 and gflops > MAX_GFLOPS_PER_PROCESS * ranks:
        out.append(f"{gflops:.4g} Gflop/s from {ranks:g} process(es) is above {MAX_GFLOPS_PER_PROCESS:.0e} "
                   "Gflop/s per process, which no machine reaches")
    if n > 0 and time_s >= 0:
        work = hpl_flops(n) / 1e9  # Gflop
        slowest = work / (time_s + time_resolution) if time_s + time_resolution > 0 else float("inf")
        fastest = work / (time_s - time_resolution) if time_s > time_resolution else float("inf")
        if gflops * CONSISTENCY_FACTOR < slowest or gflops > fastest * CONSISTENCY_FACTOR:
            took = f"{time_s:g} s" if time_resolution == 0 else f"{time_s:.2f} s (printed)"
            out.append(f"{gflops:.4g} Gflop/s does not follow from N={n:g} in {took}: "
                       f"HPL's {work:.4g} Gflop in that time are {_span(slowest, fastest)} Gflop/s")
    return out


def _span(low: float, high: float) -> str:
    return f"{low:.4g}" if low == high else (f"at least {low:.4g}" if high == float("inf")
                                              else f"{low:.4g} to {high:.4g}")


def check_rpeak(outcome: Outcome, rpeak_gflops: float | None, what: str = "the system") -> None:
    """Invalidate an HPL (or HPCC) outcome whose Gflops exceed RPEAK_FACTOR x `rpeak_gflops`.

    For live runs, the Rpeak of the nodes used; for imports, the one given with --rpeak-node
    times the node count. The offending metrics are marked invalid and stay stored as evidence.
    """
    if not rpeak_gflops or not is_finite(rpeak_gflops) or rpeak_gflops <= 0:
        return
    bound = RPEAK_FACTOR * rpeak_gflops
    hit = False
    for m in outcome.metrics:
        gflops = m.value * 1000 if m.name == "HPL_Tflops" else m.value if m.name == "hpl_gflops" else None
        if gflops is not None and is_finite(gflops) and gflops > bound:
            hit = True
            reason = (f"{m.name} {m.value:.4g} is above {RPEAK_FACTOR}x the Rpeak of {what} "
                      f"({rpeak_gflops:.4g} Gflop/s)")
            if reason not in outcome.reasons:
                outcome.invalidate(reason)
    if hit:
        for m in outcome.metrics:
            if m.name.startswith("HPL_") or m.name in ("hpl_gflops", "hpl_time"):
                m.valid = False


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
    implausible: list[str] = field(default_factory=list)  # why its figures cannot be true

    @property
    def valid(self) -> bool:
        return self.passed is True and not self.implausible and is_finite(self.gflops) and is_finite(self.time_s)

    def labels(self) -> dict:
        return {"tv": self.tv, "n": self.n, "nb": self.nb, "p": self.p, "q": self.q}


def result_problems(r: HplResult, one_of_many: bool = False) -> list[str]:
    """HPL's verdict on one result line: why it is not a valid measurement ([] when it is).

    Its figures cannot be true, its residual check FAILED, or no check was printed for it. A
    live run's outcome holds all its lines (`one_of_many`: each reason names its line); an
    imported result is one line, stored as its own run.
    """
    line = f"{r.tv} N={r.n} NB={r.nb} {r.p}x{r.q}"
    out = [f"{line}: {reason}" if one_of_many else reason for reason in r.implausible]
    if r.passed is False:
        out.append(f"residual check FAILED for {line} (residual {r.residual})" if one_of_many
                   else f"residual check FAILED ({r.residual})")
    elif r.passed is None:
        out.append(f"no residual check printed for {line}" if one_of_many
                   else "no residual check printed for this result (truncated output?)")
    return out


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
            out += result_problems(r, one_of_many=True)
        return out

    def best(self) -> HplResult | None:
        valid = [r for r in self.results if r.valid]
        return max(valid, key=lambda r: r.gflops) if valid else None


def parse_hpl(text: str, max_results: int | None = None) -> HplOutput:
    """Every result line of an HPL output; `max_results` stops a hostile file early (TooManyResults)."""
    out = HplOutput()
    m = _VERSION.search(text)
    out.version = m.group(1) if m else None
    m = _THRESHOLD.search(text)
    out.threshold = float(m.group(1)) if m else None
    current: HplResult | None = None
    in_echo = False
    for raw in text.splitlines():
        line = raw.strip()
        first = line[:1]  # the cheap tests first: a match per line is costly (an HPL log has hundreds)
        if first == "T" and line.startswith("The following parameter values will be used"):
            in_echo = True
            continue
        if in_echo and not out.results and (echo := _ECHO.match(line)):  # the echo comes before any result
            out.parameters.setdefault(echo.group(1), echo.group(2).split())
            continue
        m = _RESULT.match(line) if first == "W" else None
        if m:
            current = HplResult(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)),
                                int(m.group(5)), float(m.group(6)), float(m.group(7)))
            current.implausible = implausible(current.n, current.time_s, current.gflops, current.p * current.q)
            out.results.append(current)
            if max_results is not None and len(out.results) > max_results:
                raise TooManyResults("HPL result lines", max_results)
            continue
        if current is None:
            continue
        if first == "|" and (m := _RESIDUAL.match(line)):
            value, ok = float(m.group(1)), m.group(2) == "PASSED"
            # HPL 1.0 prints three residuals: any FAILED fails the test, keep the largest.
            current.residual = value if current.residual is None else max(current.residual, value)
            current.passed = ok if current.passed is None else (current.passed and ok)
        elif "HPL_pdgesv() " in line and (m := _START.search(line)):
            current.start = m.group(1)
        elif "HPL_pdgesv() " in line and (m := _END.search(line)):
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
    return outcome.check_values()


def split_results(text: str, max_results: int) -> list[Result]:
    """An HPL output file as imported runs: one per T/V line, with the N, NB, P, Q it states.

    A line is valid on HPL's verdict (`result_problems`); a file that ends before HPL's summary
    only warns, since each line's own residual check decides its result.
    """
    parsed = parse_hpl(text, max_results=max_results)
    out = []
    for r in parsed.results:
        outcome = Outcome(facts={"hpl_version": parsed.version, "threshold": parsed.threshold})
        outcome.metrics += result_metrics(r)
        for reason in result_problems(r):
            outcome.invalidate(reason)
        if parsed.truncated:
            outcome.reasons.append("file ends before HPL's 'Finished N tests' summary")
        outcome.check_values()
        params = {"n": r.n, "nb": r.nb, "p": r.p, "q": r.q, "ranks": r.p * r.q, "tv": r.tv}
        duration = r.time_s if is_finite(r.time_s) else None
        out.append(Result("hpl", params, outcome, r.start, r.end, duration))
    return out


def recognise(text: str) -> bool:
    return "HPLinpack" in text and "T/V" in text


LINE_LABELS = ("tv", "n", "nb", "p", "q")  # a T/V line: the variant and the problem it solved
# Where the report and the commands use HPL's figures (bench/declare.py ReportUse): the Rmax of the HPL
# and energy sections, the Rmax held against the nodes' peak (analysis/plausibility.py, efficiency.py),
# a run's headline in a listing, the pinning section's figure and columns, a cluster run's per-node
# figure and its all-node run, a figure asked for by name, a tuning study's table.
RMAX_USES = (
    ReportUse("hpl", "rmax"), ReportUse("energy", "rmax"), ReportUse("peak", "rmax"),
    ReportUse("listing", "headline", "HPL", "Gflop/s"),
    ReportUse("pinning", "figure", "HPL against CPUs used, per strategy", order=20, key="pinning-hpl", axis="Gflop/s"),
    ReportUse("pinning", "column", "HPL Gflop/s", order=20),
    ReportUse("cluster", "node", "HPL (one node)", "Gflop/s", order=30, key="hpl"),
    ReportUse("cluster", "all-nodes"),
    # a figure asked for by name (report/custom.py): the best over what the studies take it over, as
    # the HPL section's figures (report/hpl.py NUISANCE)
    ReportUse("figures", "best", best_over=("grid", "p", "q", "tv", "n", "grids")),
    ReportUse("tuning", "headline"),  # the figure of merit a tuning study's table gives per configuration
)
RMAX = merit(MetricSpec("hpl_gflops", "Gflop/s", True, LINE_LABELS, uses=RMAX_USES, negative_not_applicable=True))
METRICS = (RMAX, MetricSpec("hpl_time", "s", False, LINE_LABELS, negative_not_applicable=True,
                            uses=(ReportUse("pinning", "column", "HPL time", order=30),)))
FORMAT = OutputFormat("hpl", recognise, split_results, title="HPL", rpeak_check=check_rpeak)
