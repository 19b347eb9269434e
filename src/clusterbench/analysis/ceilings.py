"""Node ceilings, and a run placed against them: what the node can really do, measured by its own kernels.

"16% of Rpeak" says nothing until it is set against what this node reaches: the FMA rate of its cores
(the `clock` kernel), DGEMM on the same cores and BLAS (the `dgemm` kernel), STREAM Triad at the same
thread count. A ceiling is the **best** counted figure of one measure among the stored runs of one
system (its fingerprint: hardware and software, so a new node type or a new software stack starts
afresh), per scope (cores or threads used) and variant (the BLAS that was loaded). Best, not median:
a ceiling is what the node can reach. A run that does not count (disturbed, invalid, suspect,
excluded: analysis/flags) never sets one. Which metrics are ceilings, and which runs are placed
against them, the benchmarks declare (`ReportUse("ceiling", ...)`, the `peak`/`rmax` and
`ceiling` uses): nothing here names a benchmark.

`place(run)` explains one run: its figure against each ceiling that applies, and the bottleneck with
its evidence, first that applies: the run was disturbed; its BLAS ran generic kernels (with the
remedy); the BLAS itself is far below the FMA peak; the solver is far below DGEMM on its cores; else
it is near the node's ceiling. Where no ceiling is stored it says which kernel would measure it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from clusterbench.analysis.flags import counts, run_flags
from clusterbench.analysis.peak import physical_cores, stored_peak
from clusterbench.bench import registry
from clusterbench.store.db import Store
from clusterbench.store.queries import decoded_run

MEASURES = ("fma", "dgemm", "memory")  # the roles of ReportUse("ceiling", role)
MAX_ROWS = 200_000  # metric rows read per measure: a store larger than this is read by its newest runs
BLAS_FAR_BELOW_FMA = 0.5  # DGEMM under half the FMA peak on the same cores: the BLAS is the bottleneck
SOLVER_FAR_BELOW_DGEMM = 0.6  # an Rmax under 60% of DGEMM on its cores: HPL's own parameters are
NEAR_CEILING = 0.85  # at or above 85% of its ceiling: the run is where the node can take it


@dataclass(frozen=True)
class Ceiling:
    system_id: str
    measure: str  # fma, dgemm, memory (STREAM Triad)
    cores: int  # cores (ranks x threads) the figure was measured on; fma: 1 (a core's rate)
    variant: str  # the BLAS loaded (dgemm); '' otherwise
    value: float
    unit: str
    runs: int  # counted runs behind it
    best_run: str
    newest: str  # when the newest of them started

    def label(self) -> str:
        what = {"fma": "FMA peak", "dgemm": "DGEMM", "memory": "STREAM Triad"}[self.measure]
        scope = f"{self.cores} {'core' if self.measure != 'memory' else 'thread'}{'s' if self.cores != 1 else ''}"
        return f"{what}, {scope}" + (f", {self.variant}" if self.variant else "")


@dataclass
class Placement:
    run_id: str
    benchmark: str
    figure: str  # the metric placed
    value: float | None
    unit: str
    # (what, ceiling, unit, fraction, source: the runs behind the ceiling)
    against: list[tuple[str, float, str, float, str]] = field(default_factory=list)
    bottleneck: str = ""
    evidence: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)  # what else about the run matters
    missing: list[str] = field(default_factory=list)  # ceilings not stored, and how to measure them

    def as_dict(self) -> dict:
        out = asdict(self)
        out["against"] = [{"ceiling": w, "value": v, "unit": u, "fraction": round(f, 4), "source": src}
                          for w, v, u, f, src in self.against]
        return out


def _scope(params: dict) -> int:
    """Cores a run used: ranks x threads (a key it does not state counts as 1: the kernels state both)."""
    def positive(key: str) -> int:
        value = params.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1_000_000 else 1
    return positive("ranks") * positive("threads")


def _variant(params: dict, facts: dict) -> str:
    """The BLAS a run used: the one its processes loaded (facts), else the one it asked for."""
    return str(facts.get("blas_loaded_variant") or params.get("blas") or "")[:80]


def _counted_rows(store: Store, metric: str, benchmark: str, system_id: str | None) -> list[dict]:
    rows = store.metric_rows(metric, benchmark=benchmark, system_id=system_id, valid_only=True)[-MAX_ROWS:]
    out = []
    for row in rows:
        run = decoded_run(row)
        run["valid"] = row["run_valid"]
        if counts(run):
            out.append(run)
    return out


def ceilings(store: Store, system_id: str | None = None) -> list[Ceiling]:
    """Every ceiling the stored runs set (of one system, or of all), by system, measure, cores, variant."""
    best: dict[tuple, Ceiling] = {}
    for measure in MEASURES:
        for drawn in registry.drawn("ceiling", measure):
            for run in _counted_rows(store, drawn.spec.name, drawn.benchmark, system_id):
                if not drawn.use.selects(run.get("labels") if isinstance(run.get("labels"), dict) else
                                         json.loads(run.get("labels") or "{}")):
                    continue
                params, facts = run.get("params") or {}, run.get("facts") or {}
                cores = 1 if measure == "fma" else _scope(params)
                variant = _variant(params, facts) if measure == "dgemm" else ""
                key = (run["system_id"], measure, cores, variant)
                old = best.get(key)
                value = float(run["value"])
                runs = (old.runs if old else 0) + 1
                newest = max(old.newest if old else "", run.get("started_at") or "")
                if old is None or value > old.value:
                    best[key] = Ceiling(run["system_id"], measure, cores, variant, value, drawn.spec.unit, runs,
                                        run["run_id"], newest)
                else:
                    best[key] = Ceiling(**{**asdict(old), "runs": runs, "newest": newest})
    return sorted(best.values(), key=lambda c: (c.system_id, MEASURES.index(c.measure), c.variant, c.cores))


def _pick(found: list[Ceiling], measure: str, cores: int,
          variant: str | None = None) -> tuple[float, str, str] | None:
    """The ceiling of `measure` on `cores` (and `variant`) as (value, what, source): measured there, else a
    smaller measurement scaled by cores (said so); None when none is stored."""
    same = [c for c in found if c.measure == measure and (variant is None or c.variant == variant)]
    exact = [c for c in same if c.cores == cores]
    if exact:
        c = max(exact, key=lambda c: c.value)
        return c.value, c.label(), f"best of {c.runs}: {c.best_run}"
    below = [c for c in same if c.cores < cores]
    if below:
        c = max(below, key=lambda c: c.value / c.cores)
        return c.value / c.cores * cores, f"{c.label()} x {cores}/{c.cores}", f"best of {c.runs}: {c.best_run}"
    return None


def _declared(section: str, role: str) -> set[str]:
    """The metrics the benchmarks declare in this role: an Rmax (`peak`), a DGEMM or Triad ceiling."""
    return {d.spec.name for d in registry.drawn(section, role)}


def place(store: Store, run_id: str) -> Placement | None:
    """One run against the ceilings of its system; None when no such run is stored."""
    row = store.run(run_id)
    if row is None:
        return None
    run = decoded_run(row)
    system_row = store.system(run.get("system_id") or "")
    system = {"info": json.loads(system_row["info"])} if system_row is not None and system_row["info"] else {}
    metrics = {m["name"]: m for m in store.conn.execute(
        "SELECT name, value, unit, valid FROM metrics WHERE run_id=? ORDER BY id", (run_id,)).fetchall()}
    found = ceilings(store, run.get("system_id")) if run.get("system_id") else []
    params, facts = run.get("params") or {}, run.get("facts") or {}
    cores = _scope(params)
    rmax = next((n for n in metrics if n in _declared("peak", "rmax") | _declared("ceiling", "dgemm")), None)
    memory = next((n for n in metrics if n in _declared("ceiling", "memory")), None)
    name = rmax or memory or next(iter(metrics), "")
    metric = metrics.get(name)
    out = Placement(run_id, run.get("benchmark") or "", name, float(metric["value"]) if metric else None,
                    metric["unit"] if metric else "")
    _facts(out, run, params, facts)
    if metric is None:
        out.bottleneck = "cannot tell: the run stored no figure"
        return out
    if rmax:
        _place_compute(out, found, system, cores, params, facts)
    elif memory:
        _place_memory(out, found, cores)
    else:
        out.bottleneck = f"cannot tell: no ceiling applies to {name} yet (FMA, DGEMM and Triad are measured)"
    disturbed = "disturbed" in run_flags(run)
    if disturbed:  # first: a disturbed figure explains nothing about the node
        out.bottleneck = "other work on the run's CPUs: the figure is not the node's"
        out.evidence.insert(0, _disturbance_text(facts))
    return out


def _facts(out: Placement, run: dict, params: dict, facts: dict) -> None:
    flags = run_flags(run)
    if flags:
        out.facts.append("flags: " + ", ".join(flags))
    if params.get("bind_to") in ("none", None) and run.get("benchmark"):
        out.facts.append(f"binding: {params.get('bind_to') or 'not stated'} (threads may move between cores)")
    pinning = facts.get("pinning") if isinstance(facts.get("pinning"), dict) else {}
    if pinning.get("verdict") in ("mismatch", "partial"):
        problems = [str(p)[:120] for p in (pinning.get("problems") or [])[:3]]
        out.facts.append(f"placement: {pinning['verdict']}" + (f" ({'; '.join(problems)})" if problems else ""))
    env = facts.get("blas_kernel") or {}
    if isinstance(env, dict) and env.get("openblas_coretype"):
        out.facts.append(f"setting: OPENBLAS_CORETYPE={env['openblas_coretype']}")


def _place_compute(out: Placement, found: list[Ceiling], system: dict, cores: int, params: dict,
                   facts: dict) -> None:
    value = out.value or 0.0
    variant = _variant(params, facts)
    dgemm = _pick(found, "dgemm", cores, variant) if variant else None
    if dgemm is None:
        dgemm = _pick(found, "dgemm", cores)
    fma = _pick(found, "fma", 1)
    fma_cores = (fma[0] * cores, f"{fma[1]} x {cores}", fma[2]) if fma else None
    rpeak = stored_peak(system).get("rpeak_node_gflops")
    node_cores = physical_cores(system)
    solver = out.figure not in _declared("ceiling", "dgemm")  # an Rmax; else the run is a DGEMM itself
    for ceiling in (dgemm, fma_cores):
        if ceiling:
            out.against.append((ceiling[1], ceiling[0], out.unit, value / ceiling[0], ceiling[2]))
    if rpeak and node_cores:
        nominal = float(rpeak) * min(cores, node_cores) / node_cores
        out.against.append((f"nominal Rpeak, {min(cores, node_cores)} of {node_cores} cores", nominal, out.unit,
                            value / nominal, "the system's description"))
    if not dgemm:
        out.missing.append(f"DGEMM on {cores} core(s): clusterbench bench dgemm -p ranks={cores} -p threads=1")
    if not fma:
        out.missing.append("FMA peak of a core: clusterbench bench clock")
    kernel = facts.get("blas_kernel") if isinstance(facts.get("blas_kernel"), dict) else {}
    if kernel.get("verdict") == "fallback":
        out.bottleneck = "the BLAS kernel"
        out.evidence.append(f"{kernel.get('why')}; remedy: {kernel.get('remedy')}")
        return
    if dgemm and fma_cores and dgemm[0] < BLAS_FAR_BELOW_FMA * fma_cores[0]:
        out.bottleneck = "the BLAS"
        out.evidence.append(f"DGEMM reaches {dgemm[0] / fma_cores[0]:.0%} of the FMA peak on {cores} core(s)")
        return
    if not solver:
        if fma_cores:
            share = value / fma_cores[0]
            out.bottleneck = "compute: near the FMA peak" if share >= NEAR_CEILING else "the BLAS"
            out.evidence.append(f"DGEMM reaches {share:.0%} of the FMA peak on {cores} core(s)")
        else:
            out.bottleneck = "cannot tell: no FMA peak is stored"
        return
    if dgemm:
        share = value / dgemm[0]
        if share < SOLVER_FAR_BELOW_DGEMM:
            out.bottleneck = "the solver's parameters or communication"
            out.evidence.append(f"Rmax is {share:.0%} of DGEMM on the same cores: a larger N, another NB or grid "
                                "(clusterbench tune hpl) moves it")
        else:
            out.bottleneck = ("compute: near the node's ceiling" if share >= NEAR_CEILING else
                              "compute, with some loss to the solver")
            out.evidence.append(f"Rmax is {share:.0%} of DGEMM on the same cores")
        return
    out.bottleneck = "cannot tell: no DGEMM ceiling is stored for these cores"


def _place_memory(out: Placement, found: list[Ceiling], threads: int) -> None:
    exact = [c for c in found if c.measure == "memory" and c.cores == threads]
    if not exact:  # bandwidth does not scale with threads: only a ceiling measured at this count is one
        out.missing.append(f"STREAM Triad with {threads} thread(s): clusterbench bench stream -p threads={threads}")
        out.bottleneck = f"cannot tell: no Triad ceiling with {threads} thread(s) is stored"
        return
    best = max(exact, key=lambda c: c.value)
    value = out.value or 0.0
    out.against.append((best.label(), best.value, out.unit, value / best.value,
                        f"best of {best.runs}: {best.best_run}"))
    share = value / best.value
    out.bottleneck = "memory bandwidth" + (": at the node's ceiling" if share >= NEAR_CEILING else
                                           ": below this node's best, a placement or array-size effect")
    out.evidence.append(f"{share:.0%} of the best Triad measured with {threads} thread(s)")


def _disturbance_text(facts: dict) -> str:
    """The evidence system/disturbance.py stored ("node1: 59% of CPU 1 went to pid 6619 `yes`")."""
    flagged = facts.get("disturbed")
    evidence = flagged.get("evidence") if isinstance(flagged, dict) else None
    if isinstance(evidence, list) and evidence:
        return "; ".join(str(e) for e in evidence[:3])[:300]
    return "flagged disturbed"
