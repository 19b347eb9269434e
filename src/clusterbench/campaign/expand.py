"""From a campaign to the list of runs: combine the space, derive values, filter, repeat.

For each block: the swept lists are combined (product or zip); fixed and derived parameters
are added (derived ones in dependency order, so `n: {hpl_n: ...}` sees each NB); the point is
checked against the benchmark's declared parameters and completed by the benchmark (ranks,
grid, BLAS); `where` constraints drop points; each survivor becomes `repeats` runs.

A run's id is a hash of the campaign, benchmark, resolved parameters, environment and repeat
index. The same file expands to the same ids on every invocation, which is what lets a second
`campaign run` skip what is already stored.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from clusterbench.bench.base import Benchmark
from clusterbench.bench.params import Param
from clusterbench.bench.registry import benchmark_class
from clusterbench.campaign.source import CampaignError, CampaignSource, Location
from clusterbench.errors import UserInputError, suggest
from clusterbench.execution.request import SETTING_PREFIX, PlannedRun, recorded_params
from clusterbench.limits import exceeded, limit
from clusterbench.plan.ranges import is_range, parse_int_values
from clusterbench.system.discover import SystemInfo

if TYPE_CHECKING:  # a campaign file's models (pydantic); `bench` expands its one point without them (point.py)
    from clusterbench.bench.declare import Derived
    from clusterbench.campaign.spec import BenchmarkBlock, Campaign
    from clusterbench.plan.expr import Expression

# Imported where a block uses them (a derived value, a constraint, an env template): the benchmark that
# declares a derived value and the expression parser cost ~15 ms at every start of a point that has none.

_CANONICAL = json.JSONEncoder(sort_keys=True, default=str)  # built once: ids are made 100,000s of times


def run_id(campaign: str, benchmark: str, params: dict, env: dict, repeat: int, where: str = "") -> str:
    """Deterministic, so a campaign run again finds its finished runs. `where` (the launcher
    and hosts, empty for this machine) keeps runs of the same point on two sites apart."""
    parts = [campaign, benchmark, params, env, repeat] + ([where] if where else [])
    blob = _CANONICAL.encode(parts)
    return f"{campaign}-{benchmark}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}-r{repeat}"


def site_key(campaign: Campaign) -> str:
    """The cluster: section minus what does not change a result (whether the nodes are checked)."""
    if campaign.cluster.launcher == "local":
        return ""
    return _CANONICAL.encode(campaign.cluster.model_dump(exclude={"preflight"}))


def system_names(system: SystemInfo) -> dict[str, Any]:
    """Facts of the node that expressions may use."""
    t = system.topology
    sockets = max(t.sockets, 1)
    return {"cores": t.cores_total, "sockets": sockets, "cores_per_socket": t.cores_total // sockets,
            "pus": t.pus_total, "memory_bytes": system.memory_bytes() or 0,
            "rpeak": system.rpeak_node_gflops or 0.0}


def expand(campaign: Campaign, source: CampaignSource | None, system: SystemInfo) -> list[PlannedRun]:
    """Every run of the campaign. Sizes are counted before anything is built: a block's space
    (limit max_points) before its points are made, and the runs (max_runs) as they are made, so
    a hostile file is refused without taking the machine's memory."""
    runs: list[PlannedRun] = []
    seen: set[str] = set()
    if campaign.repeats > limit("max_repeats"):
        raise CampaignError(exceeded("max_repeats", campaign.repeats).message, source, ("repeats",),
                            hint="raise it with clusterbench --limit max_repeats=N ...")
    for i, block in enumerate(campaign.benchmarks):
        for run in _expand_block(campaign, block, ("benchmarks", i), source, system):
            if run.id not in seen:  # identical points (say, from two blocks) run once
                seen.add(run.id)
                runs.append(run)
                if len(runs) > limit("max_runs"):
                    raise CampaignError(exceeded("max_runs", f"more than {limit('max_runs')}", "runs").message,
                                        source, ("benchmarks", i),
                                        hint="narrow the space, or raise the limit: clusterbench --limit "
                                             "max_runs=N ... (or CLUSTERBENCH_LIMIT_MAX_RUNS=N)")
    # Repeat-major order: every configuration once before any is repeated, so slow drifts of
    # the machine (and --spread) touch all configurations alike.
    return sorted(runs, key=lambda r: r.repeat)  # stable: file order within a round


class _Block:
    """Per-block context so helpers can raise errors pointing into the file."""

    def __init__(self, block: BenchmarkBlock, loc: Location, source: CampaignSource | None):
        self.block, self.loc, self.source = block, loc, source
        self.axis_loc: dict[str, Location] = {}  # a swept setting (system.KEY) -> where its list is written

    def error(self, message: str, *where: str | int, hint: str | None = None) -> CampaignError:
        return CampaignError(message, self.source, (*self.loc, *where), hint=hint)


def _expand_block(campaign: Campaign, block: BenchmarkBlock, loc: Location,
                  source: CampaignSource | None, system: SystemInfo) -> list[PlannedRun]:
    ctx = _Block(block, loc, source)
    try:
        cls = benchmark_class(block.benchmark)
    except UserInputError as exc:
        raise ctx.error(exc.message, "benchmark", hint=exc.hint) from None
    declared = {p.name: p for p in cls.parameters}
    overlap = set(block.params) & set(block.space)
    if overlap:
        raise ctx.error(f"{sorted(overlap)[0]!r} is both fixed (params) and swept (space)", "space",
                        sorted(overlap)[0])
    for section in ("params", "space"):
        for name in getattr(block, section):
            if name not in declared and not cls.open_parameters:
                raise ctx.error(f"{block.benchmark} has no parameter {name!r}", section, name,
                                hint=suggest(name, list(declared), f"{block.benchmark} parameters", most=len(declared))
                                + f"; each with its help: clusterbench benchmarks {block.benchmark}")

    axes = {name: _space_values(ctx, name, raw) for name, raw in block.space.items()}
    fixed_settings, setting_axes = _settings(ctx, campaign, block)
    axes |= setting_axes
    _refuse_repeats(ctx, axes, declared)
    literal, derived = _split_params(ctx, block.params)
    if campaign.cluster.mpi and "mpi" in declared and "mpi" not in block.params and "mpi" not in axes:
        literal["mpi"] = campaign.cluster.mpi  # the campaign's MPI, unless the block chooses
    order = _derivation_order(ctx, derived, set(literal) | set(axes))
    where = [(k, _expression(ctx, text, "where", k)) for k, text in enumerate(block.where)]
    env_spec = {k: str(v) for k, v in (campaign.env | block.env).items()}
    names = system_names(system)
    defaults = {p.name: p.default for p in cls.parameters if p.default is not None and not p.required}

    runs: list[PlannedRun] = []
    repeats = block.repeats or campaign.repeats
    if block.repeats and repeats > limit("max_repeats"):
        raise ctx.error(exceeded("max_repeats", repeats).message, "repeats",
                        hint="raise it with clusterbench --limit max_repeats=N ...")
    combos = _combine(ctx, axes)
    check = _point_checker(ctx, cls, declared,
                           [*literal, *(a for a in axes if not a.startswith(SETTING_PREFIX)), *order])
    base_scope = names | defaults
    where_key = site_key(campaign)
    timeout = block.timeout_s or campaign.timeout_s
    tags = campaign.tags | block.tags
    for combo in combos:
        point = literal | {k: v for k, v in combo.items() if not k.startswith(SETTING_PREFIX)}
        settings = fixed_settings | {k[len(SETTING_PREFIX):]: v for k, v in combo.items()
                                     if k.startswith(SETTING_PREFIX)}
        for name in order:
            point[name] = _derive(ctx, name, derived[name], base_scope | point, system)
        point = check(point)
        try:
            cls.resolve(point, system)
        except CampaignError:
            raise
        except UserInputError as exc:
            raise ctx.error(exc.message, *_origin(block, exc.message), hint=exc.hint) from None
        scope = names | point if where or env_spec else point
        if where and not _holds(ctx, where, scope):
            continue
        env = {key: _substitute(ctx, value, scope, key) for key, value in env_spec.items()}
        if settings:
            from clusterbench.system.settings import mpi_env

            env |= mpi_env(settings)
        estimate = cls.estimate_s(point, system)
        if len(runs) + repeats > limit("max_runs"):
            raise ctx.error(exceeded("max_runs", f"more than {limit('max_runs')}", "runs of this block").message,
                            "space" if axes else "repeats",
                            hint="narrow the space, or raise the limit: clusterbench --limit max_runs=N ...")
        identity = recorded_params(point, settings)
        for r in range(repeats):
            runs.append(PlannedRun(run_id(campaign.name, block.benchmark, identity, env, r, where_key), campaign.name,
                                   block.label, block.benchmark, point, r, env, timeout,
                                   tags, estimate, settings))
    if not runs:
        raise ctx.error(f"the constraints remove all {_space_size(ctx, axes)} point(s): nothing would run",
                        "where", hint="check the where: expressions against the values in space:")
    return runs


def _settings(ctx: _Block, campaign: Campaign, block: BenchmarkBlock) -> tuple[dict[str, str], dict[str, list]]:
    """The `system:` settings of a block (over the campaign's): the fixed ones, normalised, and the
    swept ones as axes named `system.<key>`. Each value is checked against the allow-list where it
    is written, so a bad one is refused with its line before anything runs."""
    if not (campaign.system or block.system):
        return {}, {}
    from clusterbench.system.settings import GROUPS as SETTING_GROUPS  # here: only a block with settings needs it
    from clusterbench.system.settings import validate

    fixed: dict[str, str] = {}
    axes: dict[str, list] = {}
    for loc, section in ((("system",), campaign.system), ((*ctx.loc, "system"), block.system)):
        for key, raw in _flat_settings(ctx, loc, section):
            where = (*loc, *key.split(".", 1)) if key.split(".", 1)[0] in SETTING_GROUPS else (*loc, key)
            values = raw if isinstance(raw, list) else [raw]
            if not values or len(values) > limit("max_points"):
                raise CampaignError(f"{key}: a swept setting needs 1 to {limit('max_points')} values", ctx.source,
                                    where)
            checked = []
            for value in values:
                if isinstance(value, dict | list) or value is None:
                    raise CampaignError(f"{key}: a setting's value is a plain value or a list of them", ctx.source,
                                        where)
                try:
                    checked.append(validate({key: value})[key])
                except ValueError as exc:
                    raise CampaignError(str(exc), ctx.source, where, hint="see `clusterbench system settings` "
                                        "for the settings that can be changed and their values") from None
            fixed.pop(key, None)
            axes.pop(f"{SETTING_PREFIX}{key}", None)  # the block's value replaces the campaign's
            if isinstance(raw, list):
                axes[f"{SETTING_PREFIX}{key}"] = checked
                ctx.axis_loc[f"{SETTING_PREFIX}{key}"] = where
            else:
                fixed[key] = checked[0]
    return fixed, axes


def _flat_settings(ctx: _Block, loc: Location, section: dict) -> Iterator[tuple[str, Any]]:
    """`sysctl: {net.ipv4.tcp_sack: 0}` -> ('sysctl.net.ipv4.tcp_sack', 0); plain keys as they are."""
    from clusterbench.system.settings import GROUPS as SETTING_GROUPS

    for key, value in section.items():
        if key in SETTING_GROUPS:
            if not isinstance(value, dict):
                raise CampaignError(f"{key} takes a mapping, e.g. {key}: {{name: value}}", ctx.source, (*loc, key))
            for sub, inner in value.items():
                yield f"{key}.{sub}", inner
        else:
            yield str(key), value


def _space_values(ctx: _Block, name: str, raw: Any) -> list:
    if isinstance(raw, list):
        if not raw:
            raise ctx.error("empty list: a swept parameter needs at least one value", "space", name)
        for k, v in enumerate(raw):
            if isinstance(v, dict | list):
                raise ctx.error("swept values must be plain values (number, string, true/false)", "space", name, k)
        return raw
    if is_range(raw):
        try:
            return parse_int_values(raw, name)
        except UserInputError as exc:
            raise ctx.error(exc.message, "space", name, hint=exc.hint) from None
    if isinstance(raw, dict):
        raise ctx.error("a swept parameter is a list or a range like 32..256:8; derived values go in params:",
                        "space", name)
    return [raw]


REPEAT_HINT = "sweep each value once; to measure a point more than once, give the block repeats: N"


def _refuse_repeats(ctx: _Block, axes: dict[str, list], declared: dict[str, Param]) -> None:
    """A value swept twice (`nb: [64, 64]`) makes the same point twice, and the same point has the same
    run id: the second would silently collapse into the first, one run where the file shows two.
    Refused where the repeat is written (file, line, field and item). With `combine: zip` an axis may
    repeat a value (`n: [1000, 1000]` beside `nb: [64, 128]`); a whole point may not."""
    def where(name: str) -> Location:
        return ctx.axis_loc.get(name) or (*ctx.loc, "space", name)

    if ctx.block.combine == "zip":
        if len({len(values) for values in axes.values()}) != 1:
            return  # unequal lists: _space_size refuses them, located
        names = list(axes)
        first: dict[tuple, int] = {}
        for k, values in enumerate(zip(*axes.values(), strict=True)):
            key = tuple(_same_value(v, declared.get(n)) for n, v in zip(names, values, strict=True))
            if key in first:
                shown = ", ".join(f"{n}={v!r}" for n, v in zip(names, values, strict=True))
                raise CampaignError(f"point {k} ({shown}) is point {first[key]} again: the same run twice, "
                                    "stored once", ctx.source, (*where(names[0]), k), hint=REPEAT_HINT)
            first[key] = k
        return
    for name, values in axes.items():
        seen: dict[tuple, int] = {}
        for k, value in enumerate(values):
            key = _same_value(value, declared.get(name))
            if key in seen:
                raise CampaignError(f"{value!r} is swept twice (items {seen[key]} and {k}): the same runs twice, "
                                    "stored once", ctx.source, (*where(name), k), hint=REPEAT_HINT)
            seen[key] = k


def _same_value(value: Any, param: Param | None) -> tuple:
    """What makes two swept values the same point: the value as its parameter takes it (3 and 3.0 of an
    integer parameter are one value), true kept apart from 1."""
    if param is not None:
        try:
            value = param.check(value)
        except UserInputError:
            pass  # refused, located, when the point is checked
    return (type(value) is bool, value)


def _split_params(ctx: _Block, params: dict) -> tuple[dict, dict]:
    literal, derived = {}, {}
    for name, raw in params.items():
        if isinstance(raw, dict) and raw.keys() == {"expr"}:
            derived[name] = _expression(ctx, raw["expr"], "params", name, "expr")
        elif isinstance(raw, dict) and len(raw) == 1 and (found := _declared(next(iter(raw)))) is not None:
            opts = raw[found.name] or {}
            if not isinstance(opts, dict):
                raise ctx.error(f"{found.name} takes a mapping of options", "params", name, found.name)
            unknown = set(opts) - found.options
            if unknown:
                raise ctx.error(f"unknown {found.name} option {sorted(unknown)[0]!r}", "params", name, found.name,
                                hint=f"{found.name} options: " + ", ".join(sorted(found.options)))
            for option, value in opts.items():
                problem = found.problem(option, value)
                if problem:
                    raise ctx.error(f"{found.name} {option}: {problem}, got {value!r}", "params", name, found.name,
                                    option)
            derived[name] = (found, opts)
        elif isinstance(raw, dict):
            from clusterbench.bench.registry import derived_values

            forms = "".join(f" or {{{d.name}: {{...}}}}" for d in derived_values())
            raise ctx.error(f"a mapping here must be {{expr: '...'}}{forms}", "params", name,
                            hint="write a plain value, or derive it: {expr: 'cores // 2'}")
        elif is_range(raw):
            raise ctx.error("a range is a sweep: move it to space:", "params", name)
        else:
            literal[name] = raw
    return literal, derived


def _declared(key: str) -> Derived | None:
    """The derived value a benchmark declares under this name (`hpl_n`), through the registry."""
    if key == "expr":
        return None
    from clusterbench.bench.registry import derived as declared

    return declared(key)


def _expression(ctx: _Block, text: Any, *where: str | int) -> Expression:
    from clusterbench.plan.expr import Expression

    if not isinstance(text, str):
        raise ctx.error("an expression must be a string", *where)
    try:
        return Expression(text)
    except UserInputError as exc:
        raise ctx.error(exc.message, *where, hint=exc.hint) from None


def _derivation_order(ctx: _Block, derived: dict, known: set[str]) -> list[str]:
    """Derived parameters in an order where each one's inputs come first (cycles refused)."""
    if not derived:
        return []
    from clusterbench.plan.expr import Expression

    deps = {name: (set(spec.names) if isinstance(spec, Expression) else spec[0].inputs) & set(derived)
            for name, spec in derived.items()}
    order: list[str] = []
    while deps:
        ready = sorted(n for n, d in deps.items() if not d - set(order))
        if not ready:
            name = sorted(deps)[0]
            raise ctx.error("derived parameters depend on each other in a cycle: " + ", ".join(sorted(deps)),
                            "params", name)
        order += ready
        for n in ready:
            del deps[n]
    return order


def _derive(ctx: _Block, name: str, spec: Any, scope: dict, system: SystemInfo) -> Any:
    from clusterbench.plan.expr import Expression

    where = ("params", name)
    try:
        if isinstance(spec, Expression):
            return spec.evaluate(scope)
        found, opts = spec
        return found.compute(opts, scope, system)
    except UserInputError as exc:
        raise ctx.error(exc.message, *where, hint=exc.hint) from None


def _point_checker(ctx: _Block, cls: type[Benchmark], declared: dict[str, Param],
                   keys: list[str]) -> Callable[[dict], dict]:
    """Check every point of a block. All points have the same names, so what is missing
    (required parameters, defaults to fill in) is worked out once, not per point."""
    for param in cls.parameters:
        if param.required and param.name not in keys:
            raise ctx.error(f"{cls.name} needs the parameter {param.name!r}", "params", hint=param.help or None)
    defaults = {p.name: p.default for p in cls.parameters if p.name not in keys and p.default is not None}
    checks = [(name, declared.get(name), "space" if name in ctx.block.space else "params") for name in keys]

    def check(point: dict) -> dict:
        checked: dict[str, Any] = {}
        for name, param, section in checks:
            value = point[name]
            try:
                if param:
                    checked[name] = param.check(value)
                elif isinstance(value, dict | list):
                    raise UserInputError(f"{name} must be a plain value")
                else:
                    checked[name] = value
            except UserInputError as exc:
                raise ctx.error(exc.message, section, name, hint=param.help if param else None) from None
        checked.update(defaults)
        return checked

    return check


def _origin(block: BenchmarkBlock, message: str) -> Location:
    """Point an error from a benchmark's resolve() at the parameter its message names."""
    for section in ("space", "params"):
        for name in getattr(block, section):
            if message.lower().startswith((f"{name} ", f"{name}=")) or f" {name} " in f" {message.lower()} ":
                return (section, name)
    return ("benchmark",)


def _holds(ctx: _Block, where: list[tuple[int, Expression]], scope: dict) -> bool:
    """True when every constraint holds for the point."""
    for k, expr in where:
        try:
            if not expr.evaluate(scope):
                return False
        except UserInputError as exc:
            raise ctx.error(exc.message, "where", k, hint=exc.hint) from None
    return True


def _substitute(ctx: _Block, value: str, scope: dict, key: str) -> str:
    from clusterbench.plan.expr import substitute

    try:
        return substitute(value, scope)
    except UserInputError as exc:
        raise ctx.error(exc.message, "env", key, hint=exc.hint) from None


def _space_size(ctx: _Block, axes: dict[str, list]) -> int:
    """How many points the space has, from the axis lengths alone (nothing is built)."""
    if not axes:
        return 1
    if ctx.block.combine == "zip":
        lengths = {len(v) for v in axes.values()}
        if len(lengths) > 1:
            detail = ", ".join(f"{n}: {len(v)}" for n, v in axes.items())
            raise ctx.error(f"combine: zip needs lists of equal length ({detail})", "combine")
        return lengths.pop()
    return math.prod(len(v) for v in axes.values())


def _combine(ctx: _Block, axes: dict[str, list]) -> Iterator[dict]:
    """The points of the space, one at a time, after its size was checked against max_points."""
    size = _space_size(ctx, axes)
    if size > limit("max_points"):
        raise ctx.error(exceeded("max_points", size, "points in the space").message, "space",
                        hint="narrow the space, or raise the limit: clusterbench --limit max_points=N ...")
    if not axes:
        return iter([{}])
    names = list(axes)
    values = zip(*axes.values(), strict=True) if ctx.block.combine == "zip" else itertools.product(*axes.values())
    return (dict(zip(names, v, strict=True)) for v in values)


def total_estimate(runs: list[PlannedRun]) -> tuple[float, int]:
    """Sum of the known estimates, and how many runs have none."""
    known = [r.estimate_s for r in runs if r.estimate_s is not None and math.isfinite(r.estimate_s)]
    return sum(known), len(runs) - len(known)
