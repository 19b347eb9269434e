"""Parser for LULESH 2.0's standard output (only rank 0 prints): the closing "Run completed" block.

What a finished run prints, read here (values from a real 1-rank run, s=10, 20 cycles):

    Running problem size 10^3 per domain until completion      (the header, before the run)
    Num processors: 1
    Num threads: 1                                               (only an OpenMP build prints it)
    Total number of elements: 1000
    Run completed:
       Problem size        =  10
       MPI tasks           =  1
       Iteration count     =  20
       Final Origin Energy =  1.622358e+05
       Testing Plane 0 of Energy Array on rank 0:
            MaxAbsDiff   = 5.456968e-12
            TotalAbsDiff = 6.053843e-12
            MaxRelDiff   = 1.081397e-14
    Elapsed time         =      0.018 (s)
    Grind time (us/z/c)  = 0.91310455 (per dom)  (0.018262091 overall)
    FOM                  =  1095.1648 (z/s)

The FOM's unit. LULESH labels it "(z/s)", but it prints `1000 / grind`, the grind being in
microseconds per zone per cycle over all ranks: the value is thousands of zone-cycles per
second. Above, 1000 zones x 20 cycles / 0.018262091 s = 1.0952e6 zone-cycles/s, printed as
1095.1648. It is stored as printed (every published LULESH FOM is that number) with the unit it
really has, `kz/s` (10^3 zone updates per second), and checked against the elapsed time.

The elapsed time is read from the grind line's "overall" figure (8 significant digits) rather
than the "Elapsed time" line (2 significant digits).

Validity. A run is invalid when a line of the block is missing (aborted, truncated, or a rank
count that is not a cube: LULESH then prints "Num processors must be a cube of an integer" and
aborts), a figure is not a finite number, or one is impossible: no cycle run, an elapsed time,
grind time, FOM or final origin energy <= 0, a rank count that is not a cube, a FOM that
disagrees with tasks x size^3 x cycles / elapsed by more than 0.1% (the two are printed to 8
digits from the same timer: only an edited or corrupted output disagrees).

The symmetry check. The problem (a Sedov blast in one corner) is symmetric, so plane 0 of the
energy array must be symmetric about its diagonal up to rounding. MaxRelDiff above
`MAX_REL_DIFF` = 1e-8 makes the run invalid: correct runs here print 5e-15 to 3e-12 (s = 3 to 30,
2 to 932 cycles, 1 and 8 ranks, 1 and 2 threads), so rounding leaves four orders of magnitude of
headroom, while a broken run is off by the size of the field itself (`-c -5`, which skips the
equation of state, leaves the energies uninitialised: its runs print a final origin energy of
about 7e-310 and MaxRelDiff = 1 or inf, TotalAbsDiff nan).

Declared for the importer and the report: `FORMAT` (a file of LULESH outputs, one result per
"Run completed" block) and `METRICS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clusterbench.bench.declare import MetricSpec, OutputFormat, ReportUse, Result, merit
from clusterbench.bench.metrics import Metric, Outcome, TooManyResults, is_finite

MAX_REL_DIFF = 1e-8  # symmetry check: above this the run is wrong, not rounded (see the docstring)
FOM_AGREEMENT = 1e-3  # relative: the printed FOM against tasks x size^3 x cycles / elapsed
INT_MAX = 2**31 - 1  # LULESH counts sizes, ranks and cycles in 32-bit ints
MAX_BLOCKS = 10_000  # "Run completed" blocks one output may hold (a concatenated log of old runs)

_MARK = re.compile(r"^Running problem size \S{1,32}\^3 per domain until completion", re.M)
_BLOCK = re.compile(r"^Run completed:", re.M)
_VALUE = r"[ \t]*=[ \t]*(\S{1,64})(?!\S)"  # a printed number: 64 characters at most, else not read
_FIELDS = {  # key: regex of one line of the "Run completed" block
    "problem_size": re.compile(r"^[ \t]*Problem size" + _VALUE, re.M),
    "mpi_tasks": re.compile(r"^[ \t]*MPI tasks" + _VALUE, re.M),
    "iterations": re.compile(r"^[ \t]*Iteration count" + _VALUE, re.M),
    "final_origin_energy": re.compile(r"^[ \t]*Final Origin Energy" + _VALUE, re.M),
    "max_abs_diff": re.compile(r"^[ \t]*MaxAbsDiff" + _VALUE, re.M),
    "total_abs_diff": re.compile(r"^[ \t]*TotalAbsDiff" + _VALUE, re.M),
    "max_rel_diff": re.compile(r"^[ \t]*MaxRelDiff" + _VALUE, re.M),
    "elapsed_printed_s": re.compile(r"^Elapsed time" + _VALUE + r"[ \t]*\(s\)", re.M),
    "grind_domain_us": re.compile(r"^Grind time \(us/z/c\)" + _VALUE + r"[ \t]*\(per dom\)", re.M),
    "elapsed_s": re.compile(r"^Grind time \(us/z/c\).*?\([ \t]*(\S{1,64})[ \t]+overall\)", re.M),
    "fom": re.compile(r"^FOM" + _VALUE + r"[ \t]*\(z/s\)", re.M),
}
_INTEGERS = ("problem_size", "mpi_tasks", "iterations", "threads", "header_tasks", "header_size")
_HEADER = {
    "header_size": re.compile(r"^Running problem size (\S{1,32})\^3 per domain", re.M),
    "header_tasks": re.compile(r"^Num processors:[ \t]*(\S{1,32})(?!\S)", re.M),
    "threads": re.compile(r"^Num threads:[ \t]*(\S{1,32})(?!\S)", re.M),
}
_NOT_A_CUBE = "Num processors must be a cube of an integer"
_CYCLE = re.compile(r"^cycle = (\d{1,12}),", re.M)  # the progress line of `-p`
_METRICS = (("fom", "lulesh_fom", "kz/s", True), ("elapsed_s", "lulesh_elapsed_s", "s", False),
            ("grind_domain_us", "lulesh_grind_domain_us", "us", False))
_METRIC_KEYS = {key for key, *_ in _METRICS}


@dataclass
class LuleshRun:
    """The figures of one LULESH run as printed (None: the line is missing or unreadable)."""

    values: dict = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # lines of the block not found
    completed: bool = True  # a "Run completed" block was printed
    not_a_cube: bool = False  # LULESH refused the rank count


def cube_root(n: int) -> int | None:
    """The integer k with k^3 == n, None when n is not a perfect cube (exact for any int: a
    bisection over integers, about bit_length/3 steps, no float rounding)."""
    if n < 0:
        return None
    low, high = 0, 1 << (n.bit_length() // 3 + 1)  # high^3 > n
    while low < high:
        mid = (low + high + 1) // 2
        if mid**3 <= n:
            low = mid
        else:
            high = mid - 1
    return low if low**3 == n else None


def _number(text: str, integer: bool):
    """The printed number; None when unreadable, or for a count beyond LULESH's 32-bit ints (an
    edited file: keeping it would make later arithmetic overflow a float)."""
    try:
        value = int(text) if integer else float(text)
    except ValueError:  # "1e3" for an integer, "abc"
        return None
    return None if integer and abs(value) > INT_MAX else value


def _read(text: str, patterns: dict) -> tuple[dict, list[str]]:
    values, missing = {}, []
    for key, rx in patterns.items():
        m = rx.search(text)
        value = _number(m.group(1), key in _INTEGERS) if m else None
        if value is None:
            missing.append(key)
        else:
            values[key] = value
    return values, missing


def last_cycle(text: str) -> int | None:
    """The last cycle a run with `-p` printed ("cycle = 76, time = ..."), from the text's last 4 KiB."""
    cycles = _CYCLE.findall(text[-4096:])
    return int(cycles[-1]) if cycles else None


def parse_lulesh(text: str, limit: int = MAX_BLOCKS) -> list[LuleshRun]:
    """Every run in `text`: one per "Run completed" block, with the header printed before it.
    A text with no block gives one incomplete run (what an aborted or truncated run leaves).
    TooManyResults beyond `limit` blocks."""
    starts = []
    for m in _BLOCK.finditer(text):
        if len(starts) == limit:
            raise TooManyResults("LULESH 'Run completed' blocks", limit)
        starts.append(m.start())
    if not starts:
        header, _ = _read(text, _HEADER)
        if (cycle := last_cycle(text)) is not None:
            header["last_cycle"] = cycle
        return [LuleshRun(header, completed=False, not_a_cube=_NOT_A_CUBE in text)]
    runs = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(text)
        before = text[starts[n - 1] if n else 0:start]
        header, _ = _read(before, _HEADER)
        block, missing = _read(text[start:end], _FIELDS)
        runs.append(LuleshRun(header | block, missing))
    return runs


def _impossible(v: dict) -> list[str]:
    """Why these printed figures cannot come from a correct LULESH run (empty: they can)."""
    why = []
    finite = {k: x for k, x in v.items() if is_finite(x)}
    for key in ("problem_size", "mpi_tasks", "iterations", "elapsed_s", "grind_domain_us", "fom",
                "final_origin_energy"):
        if key in finite and finite[key] <= 0:
            why.append(f"{key.replace('_', ' ')} {finite[key]:g} is impossible (must be > 0)")
    for key in ("max_abs_diff", "total_abs_diff", "max_rel_diff"):
        if key in finite and finite[key] < 0:
            why.append(f"{key} {finite[key]:g} is negative: an absolute difference cannot be")
    for key, value in v.items():  # the metrics' own values are checked by Outcome.check_values
        if key not in _METRIC_KEYS and not is_finite(value):
            why.append(f"{key} is not a finite number ({value})")
    tasks = finite.get("mpi_tasks")
    if tasks and tasks > 0 and cube_root(tasks) is None:
        why.append(f"{tasks} MPI tasks is not a cube: LULESH runs only on 1, 8, 27, ... ranks")
    if "header_tasks" in v and tasks and v["header_tasks"] != tasks:
        why.append(f"the header says {v['header_tasks']} processors, the result {tasks} MPI tasks")
    if "header_size" in v and "problem_size" in v and v["header_size"] != v["problem_size"]:
        why.append(f"the header says size {v['header_size']}, the result {v['problem_size']}")
    rel = finite.get("max_rel_diff")
    if rel is not None and rel > MAX_REL_DIFF:
        why.append(f"symmetry check failed: MaxRelDiff {rel:.3g} > {MAX_REL_DIFF:g} (a correct run differs "
                   "only by rounding, about 1e-12)")
    size, cycles, elapsed, fom = (finite.get(k) for k in ("problem_size", "iterations", "elapsed_s", "fom"))
    if all(x and x > 0 for x in (size, tasks, cycles, elapsed, fom)):
        expected = tasks * size**3 * cycles / elapsed / 1000
        if not is_finite(expected) or abs(fom - expected) > FOM_AGREEMENT * expected:
            why.append(f"FOM {fom:g} disagrees with {tasks} x {size}^3 zones x {cycles} cycles / {elapsed:g} s "
                       f"= {expected:.6g} kz/s (edited or corrupted output)")
    return why


def lulesh_outcome(run: LuleshRun) -> Outcome:
    """Metrics and facts of one run, invalid with every reason that applies."""
    v = run.values
    facts = {f"lulesh_{k}": v[k] for k in ("problem_size", "mpi_tasks", "threads", "iterations")
             if k in v and is_finite(v[k])}
    facts |= {k: v[k] for k in ("final_origin_energy", "max_abs_diff", "total_abs_diff", "max_rel_diff",
                                "elapsed_printed_s") if k in v and is_finite(v[k])}
    if all(isinstance(v.get(k), int) and v[k] > 0 for k in ("problem_size", "mpi_tasks")):
        facts["lulesh_zones"] = v["mpi_tasks"] * v["problem_size"] ** 3  # elements over all ranks
    out = Outcome(facts=facts)
    if not run.completed:
        if "last_cycle" in v:
            out.facts["lulesh_last_cycle"] = v["last_cycle"]
        out.invalidate("LULESH refused the rank count: " + _NOT_A_CUBE if run.not_a_cube else
                       "no 'Run completed' block (LULESH aborted or the output is truncated)")
        return out
    if run.missing:
        out.invalidate("the 'Run completed' block lacks " + ", ".join(run.missing) + " (truncated or edited)")
    for key, name, unit, higher in _METRICS:
        if key in v:
            out.metrics.append(Metric(name, v[key], unit, higher))
    zones, cycles, elapsed = facts.get("lulesh_zones"), v.get("iterations"), v.get("elapsed_s")
    if zones and isinstance(cycles, int) and cycles > 0 and is_finite(elapsed) and elapsed > 0:
        # LULESH's grindTime2 (not printed; the FOM is 1000 over it), computed as LULESH computes it
        out.metrics.append(Metric("lulesh_grind_us", float(f"{elapsed * 1e6 / cycles / zones:.8g}"), "us", False))
    for reason in _impossible(v):
        out.invalidate(reason)
    return out.whole_run_validity()


def split_results(text: str, max_results: int) -> list[Result]:
    """A file of LULESH outputs: one imported run per "Run completed" block, with the size, ranks
    and threads it states."""
    results = []
    for run in parse_lulesh(text, min(max_results, MAX_BLOCKS)):
        v = run.values
        params = {}
        for name, keys in (("s", ("problem_size", "header_size")), ("ranks", ("mpi_tasks", "header_tasks")),
                           ("threads", ("threads",))):  # the result's own figure, else the header's
            found = next((v[k] for k in keys if isinstance(v.get(k), int)), None)
            if found is not None:
                params[name] = found
        results.append(Result("lulesh", params, lulesh_outcome(run)))
    return results


def recognise(text: str) -> bool:
    # the substrings first (a search for a line start scans every character of every file asked)
    return ("Running problem size" in text and bool(_MARK.search(text))) \
        or "Testing Plane 0 of Energy Array on rank 0:" in text


METRICS = (
    # as LULESH prints it (labelled "z/s"): 10^3 zone-cycles per second; a tuning study's table gives it
    merit(MetricSpec("lulesh_fom", "kz/s", True, uses=(ReportUse("tuning", "headline"),))),
    MetricSpec("lulesh_elapsed_s", "s", False),
    MetricSpec("lulesh_grind_domain_us", "us", False),  # per zone per cycle on one domain (one rank)
    MetricSpec("lulesh_grind_us", "us", False),  # per zone per cycle over all ranks (1000 / FOM)
)
FORMAT = OutputFormat("lulesh", recognise, split_results, title="LULESH")
