"""Campaign files: the YAML format, its pydantic models, and errors that name file, line, field.

A campaign is a name, a description, tags and a list of benchmark blocks. Each block names a
benchmark module, fixes some parameters (`params`), sweeps others (`space`, combined as a
product or zipped), filters points (`where`), and says how often (`repeats`), how long at most
(`timeout`) and with which environment (`env`). See docs/campaigns.md.

The YAML is composed node by node so that every value keeps the line it came from; the
pydantic models check the structure, and the expansion (expand.py) checks the values against
each benchmark's declared parameters, both reporting `file:line: field: what is wrong`.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from clusterbench.campaign.precision import DEFAULT_MAX_RUNS, DEFAULT_PRECISION, AutoRepeats, parse_precision
from clusterbench.campaign.source import (  # noqa: F401 - re-exported: they were defined here
    CampaignError,
    CampaignSource,
    Location,
    Scalar,
    _dotted,
)
from clusterbench.campaign.source import duration_s as _duration
from clusterbench.errors import UserInputError
from clusterbench.limits import exceeded, limit

_VALUE_DESCRIPTION = "a value; or a derived value {expr: '...'}"
# The derived values the benchmarks declare (`{hpl_n: {...}}`) are added to it by `json_schema`, from the registry.
_VALUE_SCHEMA = {
    "description": _VALUE_DESCRIPTION,
    "anyOf": [
        {"type": ["string", "number", "integer", "boolean"]},
        {"type": "array"},
        {"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"],
         "additionalProperties": False},
    ],
}
_SPACE_SCHEMA = {
    "description": "a list of values, or an integer range '32..256:8' / '1..1048576:*2'",
    "anyOf": [{"type": "array", "minItems": 1}, {"type": "string"}, {"type": ["number", "integer", "boolean"]}],
}
ParamValue = Annotated[Any, WithJsonSchema(_VALUE_SCHEMA)]
SpaceValue = Annotated[Any, WithJsonSchema(_SPACE_SCHEMA)]
def _checked_duration(value: str | int | float) -> str | int | float:
    """Validated where written (file:line:field), kept as written (the campaign's own text)."""
    _duration(value)
    return value


def _finite_first(value: Any) -> Any:
    """NaN/infinity refused before the str | int | float union, which would otherwise report a
    puzzling 'should be a valid string' for `.nan`."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a positive, finite duration")
    return value


Duration = Annotated[str | int | float, BeforeValidator(_finite_first), AfterValidator(_checked_duration),
                     WithJsonSchema(
    {"type": ["string", "number"], "description": "seconds, or a duration like 90s, 10m, 2h"})]


_REPEATS_FORMS = "a whole number, auto, or {auto: {precision: 0.02, max: 10}}"


def auto_repeats(value: Any) -> AutoRepeats | None:
    """The policy of `repeats: auto` or `repeats: {auto: {precision: 0.02, max: 10}}` (campaign/precision.py),
    None for anything else (a count). ValueError, saying the forms, for an `auto` written wrong."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return AutoRepeats()
    if not isinstance(value, dict):
        return None
    if set(value) != {"auto"}:
        raise ValueError(f"must be {_REPEATS_FORMS}")
    inner = value["auto"] if value["auto"] is not None else {}
    if not isinstance(inner, dict) or set(inner) - {"precision", "max"}:
        raise ValueError("auto takes precision: (0.02 or '2%') and max: (3 to 100), e.g. "
                         "{auto: {precision: 0.02, max: 10}}")
    precision = inner.get("precision", DEFAULT_PRECISION)
    try:
        if isinstance(precision, str):
            precision = parse_precision(precision, "precision")
        return AutoRepeats(precision, inner.get("max", DEFAULT_MAX_RUNS))
    except UserInputError as exc:
        raise ValueError(exc.message) from None


def _count_of_repeats(value: Any) -> Any:
    """`repeats: auto` planned as its most runs (expand.py plans that many; the engine stops earlier)."""
    policy = auto_repeats(value)
    if policy is not None:
        return policy.max_runs
    if isinstance(value, str) and not value.strip().isdigit():
        raise ValueError(f"must be {_REPEATS_FORMS}")
    return value


Repeats = Annotated[int, BeforeValidator(_count_of_repeats), WithJsonSchema({
    "description": "runs per point: a number, or auto: until the 95% interval of the headline metric is "
                   "within precision of the mean (default 0.02), 3 to max runs (default 10)",
    "anyOf": [{"type": "integer", "minimum": 1}, {"const": "auto"},
              {"type": "object", "additionalProperties": False, "required": ["auto"],
               "properties": {"auto": {"type": ["object", "null"], "additionalProperties": False, "properties": {
                   "precision": {"type": ["number", "string"]},
                   "max": {"type": "integer", "minimum": 3, "maximum": 100}}}}}]})]


class _Repeated(BaseModel):
    """Keeps the `repeats: auto` policy a block or a campaign was written with (the field holds its count)."""

    _auto: AutoRepeats | None = PrivateAttr(None)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_auto(cls, data: Any, handler: Any) -> Any:
        model = handler(data)
        if isinstance(data, dict):
            try:
                model._auto = auto_repeats(data.get("repeats"))
            except ValueError:  # refused where the field is validated
                model._auto = None
        return model

    @property
    def auto_repeats(self) -> AutoRepeats | None:
        return self._auto


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _checked_env(env: dict[str, Any]) -> dict[str, Any]:
    """Names a process environment can hold (no '=', no NUL, no empty name), values without NUL."""
    for key, value in env.items():
        if not _ENV_NAME.match(str(key)):
            raise ValueError(f"environment name {str(key)[:60]!r} is not a variable name "
                             "(letters, digits and _, not starting with a digit)")
        if "\0" in str(value):
            raise ValueError(f"environment value of {key} contains a NUL byte")
    return env


def _checked_name(name: str | None) -> str | None:
    if name is not None:
        if len(name) > limit("max_name_chars"):
            raise ValueError(f"{len(name)} characters exceeds the limit max_name_chars={limit('max_name_chars')} "
                             "(names become file and directory names)")
        if "\0" in name or "/" in name:
            raise ValueError("a name cannot contain '/' or a NUL byte (names become file names)")
    return name


Env = Annotated[dict[str, Scalar], AfterValidator(_checked_env)]
# `system:` settings (docs/settings.md): a key -> a value or a list (swept), or for sysctl/mca/cvar/
# coalesce a mapping of such. The values are checked against the allow-list when the campaign expands.
SystemSettings = Annotated[dict[str, Any], WithJsonSchema({"type": "object", "description": (
    "OS, network and MPI settings applied on the run's nodes before each run and restored after: "
    "mtu, rto_min, governor, thp, rps, interface, sysctl: {...}, coalesce: {...}, mca: {...}, cvar: {...}; "
    "a list sweeps a value")})]
_SYSTEM_HELP = "settings applied on every node of a run and restored after (docs/settings.md)"
Name = Annotated[str, AfterValidator(_checked_name)]


class _Timed(BaseModel):
    """The per-run `timeout` both a campaign (default) and a block (override) may set."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    timeout: Duration | None = Field(None, description="per-run limit; the whole process tree is killed")

    @property
    def timeout_s(self) -> float | None:
        return _duration(self.timeout)


class BenchmarkBlock(_Timed, _Repeated):
    """One benchmark module swept over a parameter space."""

    benchmark: str = Field(description="benchmark module: hpcc, hpl, command, ...")
    name: Name | None = Field(None, description="label of this block (default: the benchmark name)")
    description: str = ""
    params: dict[str, ParamValue] = Field(default_factory=dict, description="fixed or derived parameters")
    space: dict[str, SpaceValue] = Field(default_factory=dict, description="swept parameters")
    combine: Literal["product", "zip"] = Field("product", description="product of all lists, or zip them")
    where: list[str] = Field(default_factory=list, description="constraints, e.g. 'p <= q'")
    repeats: Repeats | None = Field(None, ge=1, description="runs per point (default: the campaign's, else 1)")
    env: Env = Field(default_factory=dict, description="environment; '{name}' is replaced")
    system: SystemSettings = Field(default_factory=dict, description=_SYSTEM_HELP)
    tags: dict[str, Scalar] = Field(default_factory=dict)

    @field_validator("where", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @property
    def label(self) -> str:
        return self.name or self.benchmark


class SrunSection(BaseModel):
    """Start the ranks with srun inside the job (Slurm binds them) instead of mpirun."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    cpu_bind: str | None = Field(None, description="srun --cpu-bind: cores, threads, sockets, none, ...")
    distribution: str | None = Field(None, description="srun --distribution: block, cyclic, block:cyclic, ...")
    hint: str | None = Field(None, description="srun --hint: nomultithread, compute_bound, memory_bound")
    cpus_per_task: int | None = Field(None, ge=1, description="default: the run's threads per rank")
    mpi: str | None = Field("pmix", description="srun --mpi plugin (pmix, pmi2, none)")


class SrunStrategy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cpu_bind: str | None = Field(None, max_length=4096, description="srun --cpu-bind")
    distribution: str | None = Field(None, max_length=256, description="srun --distribution")
    hint: str | None = Field(None, max_length=256, description="srun --hint")


class MpirunStrategy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    map_by: str | None = Field(None, max_length=256, description="--map-by / -map-by")
    bind_to: str | None = Field(None, max_length=4096, description="--bind-to / -bind-to")
    rank_by: str | None = Field(None, max_length=256, description="Open MPI --rank-by")
    hwthread_cpus: bool = Field(False, description="Open MPI --use-hwthread-cpus")


class StrategySection(BaseModel):
    """A pinning strategy of the campaign's own: the options that express it for each launcher
    (`{c}` stands for the threads per task); a launcher it names no options for refuses it."""

    model_config = ConfigDict(extra="forbid")

    summary: str = Field("", max_length=500)
    srun: SrunStrategy | None = None
    openmpi: MpirunStrategy | None = None
    hydra: MpirunStrategy | None = None


class SlurmSection(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = Field(None, description="sbatch --time (default: from the run's timeout)")
    exclusive: bool = Field(True, description="whole nodes per job, so runs do not share them")
    sbatch_args: list[str] = Field(default_factory=list, description="more sbatch options, e.g. --constraint=ib")
    srun: SrunSection | None = Field(None, description="launch with srun; absent: mpirun inside the job")
    poll: Duration = Field(2, description="how often the queue is polled")
    max_queued: int = Field(100, ge=1, description="jobs queued at once")

    @property
    def poll_s(self) -> float:
        return _duration(self.poll)


_ONE_LINE = r"^[^\n\r\x00]*$"
OneLine = Annotated[str, Field(max_length=4096, pattern=_ONE_LINE)]


class _QueuedSection(BaseModel):
    """What every batch scheduler's section shares: how often its queue is asked, how many runs wait in it."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    poll: Duration = Field(2, description="how often the queue is asked (bjobs, qstat)")
    max_queued: int = Field(100, ge=1, le=100_000, description="runs queued at once (array elements count one each)")

    @property
    def poll_s(self) -> float:
        return _duration(self.poll)


class LsfSection(_QueuedSection):
    """Each run (or the repeats of a point, as an array) as an LSF job."""

    queue: OneLine | None = Field(None, description="bsub -q")
    project: OneLine | None = Field(None, description="bsub -P")
    time: OneLine | None = Field(None, pattern=r"^(\d{1,6}:)?\d{1,8}$",
                                 description="bsub -W [hours:]minutes (default: from the run's timeout)")
    exclusive: bool = Field(True, description="bsub -x: whole hosts per job, so runs do not share them")
    bsub_args: list[OneLine] = Field(default_factory=list, max_length=100,
                                     description="more bsub options, one per #BSUB line, e.g. '-R \"select[ib]\"'")


class PbsSection(_QueuedSection):
    """Each run (or the repeats of a point, as an array) as a PBS Professional job."""

    queue: OneLine | None = Field(None, description="qsub -q")
    account: OneLine | None = Field(None, description="qsub -A")
    walltime: OneLine | None = Field(None, pattern=r"^(\d{1,6}:)?(\d{1,2}:)?\d{1,8}$",
                                     description="-l walltime=HH:MM:SS (default: from the run's timeout)")
    qsub_args: list[OneLine] = Field(default_factory=list, max_length=100,
                                     description="more qsub options, one per #PBS line, e.g. '-l place=excl'")


class ClusterSection(BaseModel):
    """Where the runs go: this machine, hosts over ssh + mpirun, or a batch scheduler: Slurm,
    LSF or PBS (docs/launchers.md)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    launcher: Literal["local", "mpirun", "slurm", "lsf", "pbs"] = "local"
    hosts: str | None = Field(None, description="node set (node[1-8]), hostfile path, or 'slurm', 'lsf', 'pbs' "
                                                "(the current allocation)")
    interconnect: Literal["auto", "shm", "tcp", "ib"] = Field("auto", description="default transport of MPI runs")
    mpi: Literal["openmpi", "mpich"] | None = Field(
        None, description="default MPI of MPI runs (each has its own mpirun and mpicc); absent: the mpirun on PATH")
    net_if: str | None = Field(None, description="TCP interface or CIDR for MPI traffic, e.g. eth1 or 10.0.0.0/24")
    rank_by: str | None = Field(None, description="mpirun --rank-by")
    mpi_args: list[str] = Field(default_factory=list, description="more mpirun arguments")
    slurm: SlurmSection | None = None
    lsf: LsfSection | None = Field(None, description="with launcher: lsf")
    pbs: PbsSection | None = Field(None, description="with launcher: pbs")
    preflight: bool = Field(True, description="check the nodes before a multi-node campaign starts")
    strategies: dict[Name, StrategySection] = Field(
        default_factory=dict, max_length=100,
        description="pinning strategies of this campaign, by name, beside the built-in ones (docs/pinning.md)")


class Campaign(_Timed, _Repeated):

    name: Name = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
                      description="identifies the campaign in the store; letters, digits, - _ .")
    description: str = ""
    tags: dict[str, Scalar] = Field(default_factory=dict, description="stored with every run")
    repeats: Repeats = Field(1, ge=1, description="default runs per point")
    env: Env = Field(default_factory=dict, description="environment for every run")
    system: SystemSettings = Field(default_factory=dict, description=_SYSTEM_HELP + " (every block)")
    cluster: ClusterSection = Field(default_factory=ClusterSection, description="where the runs go")
    benchmarks: list[BenchmarkBlock] = Field(min_length=1)


def auto_policies(campaign: Campaign) -> dict[str, AutoRepeats]:
    """Block label -> its `repeats: auto` policy, for the blocks that repeat until precise (a block's own
    `repeats:` wins over the campaign's)."""
    out: dict[str, AutoRepeats] = {}
    for block in campaign.benchmarks:
        policy = block.auto_repeats if block.repeats is not None else campaign.auto_repeats
        if policy is not None:
            out.setdefault(block.label, policy)
    return out


def load_campaign(path: str | Path) -> tuple[Campaign, CampaignSource]:
    return parse_campaign(read_yaml_text(path, "campaign file"), str(path))


def read_yaml_text(path: str | Path, what: str) -> str:
    """The text of a YAML file the user wrote (a campaign, a report spec), bounded in size and decoded,
    with a clear error for a folder, an unreadable or a too-large file."""
    path = Path(path)
    try:
        if path.is_dir():
            raise UserInputError(f"{what} {path} is a directory", hint="give the path of a .yaml file")
        size = path.stat().st_size
        if size > limit("max_file_bytes"):
            raise exceeded("max_file_bytes", f"{size} bytes", f"{what} {path}")
        raw = path.read_bytes()
    except OSError as exc:
        raise UserInputError(f"cannot read {what} {path}: {exc.strerror}") from None
    return decode_text(raw, str(path))


def decode_text(raw: bytes, path: str) -> str:
    """UTF-8 text, or a located refusal (a binary file, another encoding)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise UserInputError(f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start}",
                             where=f"{path}:{line}", hint="campaign files are UTF-8 YAML; is this the right "
                                                         "file? convert it with iconv -t UTF-8") from None
    if "\0" in text:
        line = text[:text.index("\0")].count("\n") + 1
        raise UserInputError("a NUL byte in the file: this is not a text file", where=f"{path}:{line}")
    return text


def parse_campaign(text: str, path: str = "<campaign>") -> tuple[Campaign, CampaignSource]:
    if len(text) > limit("max_file_bytes"):
        raise exceeded("max_file_bytes", f"{len(text)} characters", f"campaign {path}")
    data, lines = _compose(text, path)
    source = CampaignSource(path, lines)
    if not isinstance(data, dict):
        raise CampaignError("a campaign file must be a mapping with name: and benchmarks:", source)
    try:
        return Campaign.model_validate(data), source
    except ValidationError as exc:
        raise _first_error(exc, source) from None


def _first_error(exc: ValidationError, source: CampaignSource) -> CampaignError:
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    more = f" (and {exc.error_count() - 1} more problem(s))" if exc.error_count() > 1 else ""
    if err["type"] == "extra_forbidden":
        model = _model_at(loc)
        return CampaignError(f"unknown key{more}", source, loc,
                             hint="allowed keys here: " + ", ".join(model.model_fields))
    if err["type"] == "missing":
        return CampaignError(f"this required key is missing{more}", source, loc)
    message = err["msg"].removeprefix("Value error, ")
    shown = repr(err.get("input"))
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return CampaignError(f"{message} (got {shown}){more}", source, loc)


def _model_at(loc: Location) -> type[BaseModel]:
    """The model whose keys are allowed where an unknown key was found."""
    if loc[0] == "cluster":
        if len(loc) == 3 and loc[1] in ("lsf", "pbs"):
            return LsfSection if loc[1] == "lsf" else PbsSection
        return {2: ClusterSection, 3: SlurmSection}.get(len(loc), SrunSection)
    return Campaign if len(loc) == 1 else BenchmarkBlock


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with a budget: aliases, nesting depth. A 450-byte alias bomb or
    20,000 nested brackets are refused while the file is read, before anything is built."""

    def __init__(self, text: str, path: str):
        super().__init__(text)
        self.path, self.depth, self.aliases = path, 0, 0

    def _refuse(self, name: str, count: int | str, what: str) -> None:
        mark = self.peek_event().start_mark
        error = exceeded(name, count, what)
        error.where = f"{self.path}:{mark.line + 1}"
        raise error

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > limit("max_yaml_aliases"):
                self._refuse("max_yaml_aliases", self.aliases, "YAML aliases")
        self.depth += 1
        if self.depth > limit("max_yaml_depth"):
            self._refuse("max_yaml_depth", self.depth, "YAML nesting depth")
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _compose(text: str, path: str) -> tuple[Any, dict[Location, int]]:
    """Load YAML keeping the line of every mapping key and sequence item, within the limits."""
    loader = _BoundedLoader(text, path)
    try:
        node = loader.get_single_node()
        if node is None:
            raise UserInputError("the campaign file is empty", where=path)
        lines: dict[Location, int] = {(): node.start_mark.line + 1}
        _walk(node, (), lines, path, [limit("max_yaml_nodes")])  # aliases counted where used: before building
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark else ""
        raise UserInputError(f"not valid YAML: {exc.problem or exc.context}", where=f"{path}{line}") from None
    except yaml.YAMLError as exc:  # a reader error (control characters, ...) has no mark attribute
        raise UserInputError(f"not valid YAML: {exc}", where=path) from None
    finally:
        loader.dispose()
    return data, lines


def _walk(node: yaml.Node, loc: Location, lines: dict[Location, int], path: str, budget: list[int]) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        error = exceeded("max_yaml_nodes", f"more than {limit('max_yaml_nodes')}", "YAML nodes (aliases expanded)")
        error.where = f"{path}:{node.start_mark.line + 1}"
        raise error
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise UserInputError(f"{_dotted(loc) or 'top level'}: a key must be plain text, not a "
                                     f"{key_node.id}", where=f"{path}:{key_node.start_mark.line + 1}")
            key = key_node.value
            if key in seen:
                raise UserInputError(f"{_dotted((*loc, key))}: duplicate key (YAML would keep only the last)",
                                     where=f"{path}:{key_node.start_mark.line + 1}")
            seen.add(key)
            lines[(*loc, key)] = key_node.start_mark.line + 1
            _walk(value_node, (*loc, key), lines, path, budget)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[(*loc, i)] = item.start_mark.line + 1
            _walk(item, (*loc, i), lines, path, budget)


def json_schema() -> dict:
    schema = Campaign.model_json_schema()
    _with_derived_values(schema)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "clusterbench campaign"
    return schema


def _with_derived_values(node: Any) -> None:
    """Every parameter value's schema in `node`, with the derived values the benchmarks declare (bench/declare.py
    `Derived`, `{hpl_n: {fraction: 0.8}}`) as more forms of it: asked of the registry, so no benchmark is named here."""
    from clusterbench.bench.registry import derived_values

    found = derived_values()
    forms = [_keys_sorted({"type": "object", "required": [d.name], "additionalProperties": False,
                           "properties": {d.name: d.schema}}) for d in found]
    description = _VALUE_DESCRIPTION + "".join(f" or {d.example}" for d in found if d.example)

    def visit(item: Any) -> None:
        if isinstance(item, dict):
            if item.get("description") == _VALUE_DESCRIPTION and "anyOf" in item:
                item["description"] = description
                item["anyOf"] = [*item["anyOf"], *forms]
            for value in item.values():
                visit(value)
        elif isinstance(item, list):
            for value in item:
                visit(value)

    visit(node)


def _keys_sorted(item: Any, names: bool = False) -> Any:
    """`item` with every mapping's keys in order, as pydantic writes the rest of the schema (the names of
    `properties` stay in their declared order)."""
    if isinstance(item, dict):
        keys = list(item) if names else sorted(item)
        return {key: _keys_sorted(item[key], key == "properties" and not names) for key in keys}
    return [_keys_sorted(value) for value in item] if isinstance(item, list) else item
