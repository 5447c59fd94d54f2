"""The dependency item (the ``dependencies`` table) and its per-source copies (``dependencies-by-table``).

The item has exactly the seed's fields, in the seed's spelling, plus two Lakeline extensions:
``triggerMode`` (``"any"``, the default and the seed's behaviour: every source arrival triggers the
target; or ``"all"``: a target partition runs once every source has arrived for it), and
``scratchTables``, the tables its steps may write besides ``dataset``.

Items are validated when written (CLI) and when read (stream Lambda, routing), field by field and then
for what they will do: masks round-trip, shifts stay in the calendar, inline SQL is one statement per
step writing only the item's tables, and every ``$token`` is defined. Every problem is reported with the
path of the field it concerns, e.g.
``dependencies[0].relativedelta_attributes.weekday: 'SA(0)': the occurrence must not be 0``.
Table names are normalised one way, lowercase ``database.table``, for reads and writes alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import pydantic
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from lakeline.dependencies.dates import (
    ABSOLUTE_KEYS,
    REFERENCE_MOMENT,
    RELATIVE_KEYS,
    RelativeDeltaAttributes,
    WholeNumber,
    check_partition_mask,
    check_round_trip,
    check_substitution_format,
    shift_problem,
)
from lakeline.dependencies.statements import step_problem
from lakeline.dependencies.tokens import (
    BUILTIN_TOKENS,
    TOKEN_PATTERN,
    builtin_token_values,
    substitute_tokens,
    undefined_tokens,
)
from lakeline.errors import InvalidInputError, validation_problems
from lakeline.names import check_identifier, check_qualified_table
from lakeline.quality.checks import Checks

# A stage B run's plan travels in its state machine's input, which Step Functions refuses over 256 KiB. A plan is
# refused well under it: the rest is for the lease's waiting messages and what the state machine adds (an error,
# the steps' results). Its steps' SQL is in it twice (as run, rewritten into the run's temp table, and as resolved,
# for the lineage events), and its checks once.
MAX_PLAN_BYTES = 192 * 1024
PLAN_FRAME_BYTES = 16 * 1024  # the plan's names, locations, publish statements and message, with room to spare
MAX_SOURCES = 50  # keeps every change of one item inside a single DynamoDB transaction (100 actions)
SQL_FILE_PATTERN = re.compile(r"^[A-Za-z0-9_\-]+(?:/[A-Za-z0-9_\-]+)*\.sql$")

Usage = Literal["append", "overwrite"]
TriggerMode = Literal["any", "all"]


class DependencyItemError(InvalidInputError):
    """An invalid dependency item; ``problems`` lists every error as ``field.path: problem``."""

    def __init__(self, what: str, problems: list[str]) -> None:
        self.what = what
        self.problems = problems
        super().__init__(f"{what} is invalid:\n" + "\n".join(f"  - {problem}" for problem in problems))


def normalise_table_name(value: Any, what: str = "table") -> str:
    """The one spelling of a table name for reads and writes: lowercase ``database.table``."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a string written database.table, got {value!r}")
    database, table = check_qualified_table(value.lower(), what)
    return f"{database}.{table}"


def table_name_field(what: str) -> BeforeValidator:
    """A ``database.table`` field, spelt the one way (``normalise_table_name``); ``what`` names it in errors."""
    return BeforeValidator(lambda value: normalise_table_name(value, what))


def identifier_field(what: str) -> AfterValidator:
    return AfterValidator(lambda value: check_identifier(value, what))


def table_names_field(what: str) -> BeforeValidator:
    """A list of ``database.table`` names, as a tuple, each spelt the one way."""

    def check(value: Any) -> tuple[str, ...]:
        if not isinstance(value, list | tuple):
            raise InvalidInputError("must be a list of database.table names")
        return tuple(normalise_table_name(name, what) for name in value)

    return BeforeValidator(check)


PartitionMask = Annotated[str, AfterValidator(lambda value: check_partition_mask(value, "partitionPythonMask"))]
PartitionColumn = Annotated[str, identifier_field("partitionColumn")]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    def to_item(self) -> dict[str, Any]:
        """The normalised model as stored in DynamoDB: the seed's field names, only what is set."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


MAX_TARGET_RANGE = 366


class TargetRange(_Model):
    """The target partitions one source partition feeds beyond the first: ``count`` partitions in all,
    each ``step`` after the one before (the seven 7-day windows that contain a day: ``count`` 7, ``step``
    ``{"days": 1}``), so that data arriving for that day, late or not, rebuilds every one of them."""

    count: WholeNumber = Field(ge=1, le=MAX_TARGET_RANGE)  # a whole number, also as DynamoDB's Decimal
    step: RelativeDeltaAttributes

    @model_validator(mode="after")
    def _moves(self) -> TargetRange:
        given = self.step.to_item()
        absolute = sorted(key for key in given if key not in RELATIVE_KEYS)
        if absolute:
            raise ValueError(f"step takes relative attributes only ({', '.join(RELATIVE_KEYS)}), not {absolute}")
        if REFERENCE_MOMENT + self.step.delta() == REFERENCE_MOMENT:
            raise ValueError('step must move the date (e.g. {"days": 1})')
        return self


class Dependency(_Model):
    """One source table whose arrivals trigger the target, and how its partition maps to the target's
    (one partition, or with ``TargetRange`` several)."""

    table_name: Annotated[str, table_name_field("TableName")] = Field(alias="TableName")
    field_column: Annotated[str, identifier_field("FieldColumn")] = Field(alias="FieldColumn")
    usage: Usage = Field(alias="Usage")
    date_expression: str = Field(alias="DateExpression")
    relativedelta_attributes: RelativeDeltaAttributes = Field(default_factory=RelativeDeltaAttributes)
    target_range: TargetRange | None = Field(default=None, alias="TargetRange")

    @field_validator("date_expression")
    @classmethod
    def _date_expression(cls, value: str) -> str:
        return check_round_trip(value, "DateExpression")


class Step(_Model):
    """One SQL statement of the target's transformation: inline ``sql``, else ``sql_file``."""

    db: Annotated[str, identifier_field("db")]
    sql: str = ""
    sql_file: str = ""
    info: str = ""

    @field_validator("sql_file")
    @classmethod
    def _sql_file(cls, value: str) -> str:
        if value and not SQL_FILE_PATTERN.fullmatch(value):
            raise ValueError(
                f"{value!r} must be a relative path of a .sql file under athena_queries/<team>/ "
                "(letters, digits, '_', '-', '/' between folders; no '..')"
            )
        return value

    @model_validator(mode="after")
    def _has_sql(self) -> Step:
        if not self.sql.strip() and not self.sql_file:
            raise ValueError("a step needs 'sql' or 'sql_file'")
        return self


class DateSubstitution(_Model):
    """A ``$token`` replaced in the steps' SQL by the destination date shifted and formatted."""

    token: str
    format: str
    relativedelta_attributes: RelativeDeltaAttributes = Field(default_factory=RelativeDeltaAttributes)

    @field_validator("token")
    @classmethod
    def _token(cls, value: str) -> str:
        if not TOKEN_PATTERN.fullmatch(value):
            raise ValueError(f"{value!r} must be '$' then a letter or '_', then letters, digits or '_'")
        return value

    @field_validator("format")
    @classmethod
    def _format(cls, value: str) -> str:
        return check_substitution_format(value, "format")


class DependencyItem(_Model):
    """An item of the ``dependencies`` table: how one target dataset is rebuilt, and from what."""

    dataset: Annotated[str, table_name_field("dataset")]
    dependencies: list[Dependency] = Field(min_length=1, max_length=MAX_SOURCES)
    partition_column: PartitionColumn = Field(alias="partitionColumn")
    partition_python_mask: PartitionMask = Field(alias="partitionPythonMask")
    steps: list[Step] = Field(min_length=1)
    date_substitutions: list[DateSubstitution] = Field(default_factory=list)
    trigger_mode: TriggerMode = Field(default="any", alias="triggerMode")
    scratch_tables: Annotated[tuple[str, ...], table_names_field("scratchTables")] = Field(
        default=(), alias="scratchTables"
    )
    checks: Checks = ()  # quality rules each run's new version of ``dataset`` must pass before its commit

    @field_validator("dependencies")
    @classmethod
    def _distinct_sources(cls, value: list[Dependency], info: ValidationInfo) -> list[Dependency]:
        problems: list[str] = []
        seen: set[str] = set()
        for dependency in value:
            if dependency.table_name == info.data.get("dataset"):
                problems.append(f"{dependency.table_name} cannot depend on itself")
            if dependency.table_name in seen:
                problems.append(f"{dependency.table_name} is listed twice")
            seen.add(dependency.table_name)
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_validator("date_substitutions")
    @classmethod
    def _distinct_tokens(cls, value: list[DateSubstitution]) -> list[DateSubstitution]:
        tokens = [substitution.token for substitution in value]
        repeated = sorted({token for token in tokens if tokens.count(token) > 1})
        if repeated:
            raise ValueError(f"{', '.join(repeated)} defined more than once")
        return value

    @field_validator("scratch_tables")
    @classmethod
    def _distinct_scratch_tables(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"{', '.join(repeated)} listed more than once")
        return names

    @model_validator(mode="after")
    def _what_it_will_do(self) -> DependencyItem:
        problems = item_problems(self)
        if problems:
            raise PydanticCustomError("item_problems", "{problems}", {"problems": problems})
        return self

    @property
    def source_tables(self) -> tuple[str, ...]:
        return tuple(dependency.table_name for dependency in self.dependencies)

    @property
    def writable_tables(self) -> tuple[str, ...]:
        """What its steps may write: the dataset and its declared scratch tables."""
        return (self.dataset, *self.scratch_tables)

    def dependency_on(self, source_table: str) -> Dependency:
        source = normalise_table_name(source_table, "source table")
        for dependency in self.dependencies:
            if dependency.table_name == source:
                return dependency
        raise InvalidInputError(
            f"{self.dataset} does not depend on {source}; its sources are {', '.join(self.source_tables)}"
        )

    @model_serializer(mode="wrap")
    def _stored(self, serialize: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Items written before scratchTables and checks existed stay as they were: the fields are stored only when set.
        data: dict[str, Any] = serialize(self)
        if not self.scratch_tables:
            data.pop("scratchTables", None)
            data.pop("scratch_tables", None)
        if not self.checks:
            data.pop("checks", None)
        return data


def item_problems(item: DependencyItem) -> list[str]:
    """What the item would do wrong on some arrival, each as ``field.path: problem``.

    Shifts are tried on sampled dates (``lakeline.dependencies.dates.SHIFT_MOMENTS``); inline SQL is
    checked with sample token values (``sql_file`` steps are checked when resolved). ``$environment``
    is known only at run time, so a step using it has its written tables checked then.
    """
    problems: list[str] = []
    for index, dependency in enumerate(item.dependencies):
        problem = shift_problem(
            dependency.date_expression, dependency.relativedelta_attributes, item.partition_python_mask, partition=True
        )
        if problem:
            problems.append(f"dependencies[{index}].relativedelta_attributes: {problem}")
        elif dependency.target_range is not None and dependency.usage == "append":
            # Each partition of the range is built from all of its sources whenever one of them
            # arrives: appended, a window would take its days' rows once per day that arrives.
            problems.append(f"dependencies[{index}].TargetRange: needs Usage overwrite (each partition is rebuilt)")
        elif dependency.target_range is not None:
            reach = dependency.target_range
            try:
                furthest = reach.step.times(reach.count - 1)
            except ValueError:
                problem = f"{reach.count} partitions {reach.step.to_item()} apart reach too far"
            else:
                problem = shift_problem(
                    item.partition_python_mask, furthest, item.partition_python_mask, partition=True
                )
            if problem:
                problems.append(f"dependencies[{index}].TargetRange: {problem}")
    for index, substitution in enumerate(item.date_substitutions):
        problem = shift_problem(
            item.partition_python_mask, substitution.relativedelta_attributes, substitution.format, partition=False
        )
        if problem:
            problems.append(f"date_substitutions[{index}].relativedelta_attributes: {problem}")
    size = worst_case_plan_bytes(item)
    if size > MAX_PLAN_BYTES:
        problems.append(f"steps: {plan_size_problem(size)}")
    samples = sample_token_values(item)
    for index, step in enumerate(item.steps):
        if not step.sql.strip():
            continue
        missing = undefined_tokens(step.sql, samples)
        if missing:
            problems.append(f"steps[{index}].sql: {undefined_token_problem(missing)}")
            continue
        writable = None if "$environment" in step.sql else item.writable_tables
        problem = step_problem(substitute_tokens(step.sql, samples), step.db, writable)
        if problem:
            problems.append(f"steps[{index}].sql: {problem}")
    return problems


def worst_case_plan_bytes(item: DependencyItem, resolved_sql: list[str] | None = None) -> int:
    """The most bytes a run plan of ``item`` takes in its state machine's input, as JSON: its steps' SQL twice
    (inline, or ``resolved_sql`` once its ``sql_file`` steps are read), its checks, and the frame around them."""
    sql = resolved_sql if resolved_sql is not None else [step.sql for step in item.steps]
    checks = [check.model_dump() for check in item.checks]
    return 2 * len(json.dumps(sql).encode()) + len(json.dumps(checks).encode()) + PLAN_FRAME_BYTES


def plan_size_problem(size: int) -> str:
    return (
        f"a run's plan would take up to {size:,} bytes of its state machine's input, over the {MAX_PLAN_BYTES:,} a "
        f"plan may take (Step Functions refuses 256 KiB): shorten the steps' SQL or the checks, or split the target"
    )


def undefined_token_problem(tokens: list[str]) -> str:
    return (
        f"no value for {', '.join(tokens)}; define {'them' if len(tokens) > 1 else 'it'} in date_substitutions "
        f"(built-in: {', '.join(BUILTIN_TOKENS)}; write $$ for a literal $)"
    )


def sample_token_values(item: DependencyItem) -> dict[str, str]:
    """A value for every token a step of ``item`` may use, as at some partition (for checks only)."""
    sample = REFERENCE_MOMENT.strftime(item.partition_python_mask)
    values = builtin_token_values(item.dataset, item.partition_column, sample, "")
    values.update({s.token: REFERENCE_MOMENT.strftime(s.format) for s in item.date_substitutions})
    return values


class DependencyEdge(_Model):
    """An item of ``dependencies-by-table``: one source → target pair, with what routing needs.

    Keyed by ``source_table`` (partition key) and ``target_dataset`` (sort key), so one Query lists
    what a finished table triggers, each write touches only its own pair (idempotent, and two
    targets of the same source never overwrite each other), and routing needs no second read.
    """

    source_table: Annotated[str, table_name_field("source_table")]
    target_dataset: Annotated[str, table_name_field("target_dataset")]
    dependency: Dependency
    partition_column: PartitionColumn = Field(alias="partitionColumn")
    partition_python_mask: PartitionMask = Field(alias="partitionPythonMask")
    trigger_mode: TriggerMode = Field(default="any", alias="triggerMode")
    sources: Annotated[tuple[str, ...], table_names_field("sources")] = Field(min_length=1, max_length=MAX_SOURCES)

    @model_validator(mode="after")
    def _consistent(self) -> DependencyEdge:
        if self.dependency.table_name != self.source_table:
            raise ValueError(
                f"dependency.TableName {self.dependency.table_name} differs from source_table {self.source_table}"
            )
        if self.source_table not in self.sources:
            raise ValueError(f"sources must include the source_table {self.source_table}")
        problem = shift_problem(
            self.dependency.date_expression,
            self.dependency.relativedelta_attributes,
            self.partition_python_mask,
            partition=True,
        )
        if problem:
            raise ValueError(f"dependency.relativedelta_attributes: {problem}")
        return self

    @property
    def key(self) -> tuple[str, str]:
        return self.source_table, self.target_dataset


@dataclass(frozen=True)
class InvalidEdge:
    """A stored dependencies-by-table item that does not validate: its target cannot be routed, the others can."""

    source_table: str
    target_dataset: str
    problem: str


def edges_of(item: DependencyItem) -> list[DependencyEdge]:
    """The dependencies-by-table items of one dependency item: one per source."""
    return [
        DependencyEdge(
            source_table=dependency.table_name,
            target_dataset=item.dataset,
            dependency=dependency,
            partition_column=item.partition_column,
            partition_python_mask=item.partition_python_mask,
            trigger_mode=item.trigger_mode,
            sources=item.source_tables,
        )
        for dependency in item.dependencies
    ]


def _relativedelta_wording(detail: Mapping[str, Any]) -> str | None:
    location = tuple(detail["loc"])
    if detail["type"] == "extra_forbidden" and len(location) >= 2 and location[-2] == "relativedelta_attributes":
        return (
            "unknown relativedelta attribute; use one of "
            f"{', '.join(RELATIVE_KEYS)} (relative) or {', '.join(ABSOLUTE_KEYS)} (absolute)"
        )
    return None


def problems_of(error: pydantic.ValidationError) -> list[str]:
    """Every problem of an item, ``field.path: problem``, the item's own checks included."""
    return validation_problems(error, wording=_relativedelta_wording, whole="item")


def parse_dependency_item(data: Any, what: str = "dependency item") -> DependencyItem:
    """Validate an item (from a file, DynamoDB or a stream image); raise listing every problem."""
    if not isinstance(data, Mapping):
        raise DependencyItemError(what, [f"item: must be a JSON object, got {type(data).__name__}"])
    if what == "dependency item" and isinstance(data.get("dataset"), str):
        what = f"dependency item {data['dataset']}"
    try:
        return DependencyItem.model_validate(dict(data))
    except pydantic.ValidationError as error:
        raise DependencyItemError(what, problems_of(error)) from error


def parse_dependency_edge(data: Any) -> DependencyEdge:
    """Validate a dependencies-by-table item as read back."""
    if not isinstance(data, Mapping):
        raise DependencyItemError("dependencies-by-table item", ["item: must be an object"])
    try:
        return DependencyEdge.model_validate(dict(data))
    except pydantic.ValidationError as error:
        what = f"dependencies-by-table item {data.get('source_table')!r} → {data.get('target_dataset')!r}"
        raise DependencyItemError(what, problems_of(error)) from error
