"""report.yaml: figures a report draws beside the ones it infers (`clusterbench report --spec FILE`).

    figures:
      - metric: hpl_gflops
        x: nb
        series: [blas]
        facet: [nodes]
        best_over: [grid, tv, n]
        title: Rmax against NB per BLAS
      - metric: imb_time_us
        labels: {test: PingPong}
        x: bytes
        series: interconnect, nodes
        mean: true
      - metric: stream_triad_mbs
        best_over: [repeats]    # the best repeat, not the mean of 3 or more with its 95% interval
        cv_warn: 0.10           # mark points whose repeats spread more than 10% (default 5%)

Each figure names a stored metric and, for any role it wants to fix, the keys (labels,
parameters, tags, derived keys: analysis/shape.py); a role left out is inferred. The file is read
the way campaign files are (campaign/spec.py: bounded YAML, the line of every key kept), so every
mistake is reported as `file:line: figures[i].field: what is wrong`, exit code 2; a key or metric
the selection does not hold is reported at its line too, listing those it does hold.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from clusterbench.analysis.shape import MAX_CV_WARN, MAX_KEY_CHARS, MAX_KEYS, Choice

# The campaign loader's bounded YAML reader and line bookkeeping: one reader for every YAML file.
from clusterbench.campaign.spec import CampaignSource, _compose, read_yaml_text
from clusterbench.errors import UserInputError

MAX_FIGURES = 50
Key = Annotated[str, StringConstraints(min_length=1, max_length=MAX_KEY_CHARS, pattern=r"^[^@\s][^\s]*$")]


def _comma_list(value: Any) -> Any:
    """'blas, nodes' -> ['blas', 'nodes']: a list may be written as one comma-separated string."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


Keys = Annotated[list[Key], BeforeValidator(_comma_list), Field(max_length=MAX_KEYS)]


class FigureSpec(BaseModel):
    """One figure: a metric and, for each role, the keys it is drawn by (None: inferred)."""

    model_config = ConfigDict(extra="forbid")

    metric: str = Field(min_length=1, max_length=200, description="a stored metric name, e.g. hpl_gflops")
    x: Key | None = Field(None, description="the key on the x axis (a number: nb, bytes, threads, nodes)")
    series: Keys | None = Field(None, description="keys whose values are the lines")
    facet: Keys | None = Field(None, description="keys whose values are the panels (small multiples)")
    best_over: Keys | None = Field(None, description="keys the best value is taken over (HPL: grid, tv, n); "
                                   "`repeats`: the best repeat instead of the mean of 3 or more")
    mean: bool = Field(False, description="mean with min-max bars over what is not a line or panel")
    cv_warn: float | None = Field(None, gt=0, le=MAX_CV_WARN,
                                  description="mark points whose repeats' CV exceeds this fraction (default 0.05)")
    title: str | None = Field(None, max_length=200)
    labels: dict[Key, str | int | float] = Field(default_factory=dict, max_length=MAX_KEYS,
                                                 description="only values with these labels, e.g. {test: PingPong}")

    @model_validator(mode="after")
    def _one_way_to_combine(self) -> FigureSpec:
        if self.mean and self.best_over:
            raise ValueError("best_over and mean exclude each other: give one of them")
        return self


class ReportSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    figures: list[FigureSpec] = Field(min_length=1, max_length=MAX_FIGURES)


FIELDS = {"x": "x", "series": "series", "facet": "facet", "best over": "best_over", "labels": "labels"}


def load_spec(path: str | Path) -> list[Choice]:
    """The figures of a report.yaml, each a Choice that remembers the line of each of its fields."""
    return parse_spec(read_yaml_text(path, "report spec"), str(path))


def parse_spec(text: str, path: str = "<report.yaml>") -> list[Choice]:
    if not text.strip():
        raise UserInputError("the report spec is empty", where=path, hint="write figures: with a list of figures")
    data, lines = _compose(text, path)
    source = CampaignSource(path, lines)
    if not isinstance(data, dict):
        raise UserInputError("a report spec must be a mapping with figures:", where=source.where(()))
    try:
        spec = ReportSpec.model_validate(data)
    except ValidationError as exc:
        raise _first_error(exc, source) from None
    choices = []
    for i, f in enumerate(spec.figures):
        where = {name: source.where(("figures", i, name)) for name in (*FigureSpec.model_fields, "metric")}
        choices.append(Choice(metric=f.metric, x=f.x, series=_tuple(f.series), facets=_tuple(f.facet),
                              best_over=_tuple(f.best_over), mean=f.mean, title=f.title, labels=dict(f.labels),
                              where=where, cv_warn=f.cv_warn))
    return choices


def _tuple(keys: list[str] | None) -> tuple[str, ...] | None:
    return None if keys is None else tuple(keys)


def located(exc: UserInputError, choice: Choice, index: int) -> UserInputError:
    """A problem found while drawing a report.yaml figure, placed at its line and field."""
    field = FIELDS.get(getattr(exc, "role", ""), "metric")
    if choice.where:
        exc.where = choice.where.get(field) or exc.where
        exc.message = f"figures[{index}].{field}: {exc.message}"
        exc.args = (exc.message,)
    return exc


def _dotted(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _first_error(exc: ValidationError, source: CampaignSource) -> UserInputError:
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    more = f" (and {exc.error_count() - 1} more problem(s))" if exc.error_count() > 1 else ""
    field = _dotted(loc)
    where = source.where(loc)
    if err["type"] == "extra_forbidden":
        allowed = ReportSpec.model_fields if len(loc) == 1 else FigureSpec.model_fields
        return UserInputError(f"{field}: unknown key{more}", where=where,
                              hint="allowed keys here: " + ", ".join(allowed))
    if err["type"] == "missing":
        return UserInputError(f"{field}: this required key is missing{more}", where=where)
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "string_pattern_mismatch":
        message = "a key is a label, parameter or tag name without spaces, not starting with @"
    shown = repr(err.get("input"))
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return UserInputError(f"{field}: {message} (got {shown}){more}", where=where)
