"""From a source arrival to a target partition, and from a target partition to runnable SQL steps.

- destination partition: the dependency's ``FieldColumn`` value of the arrival, parsed with its
  ``DateExpression``, plus its ``relativedelta_attributes``, formatted with the target's
  ``partitionPythonMask``. Other partition levels of the source (``region=eu/date=...``) are ignored.
- substitutions: the destination partition value parsed back with ``partitionPythonMask``, plus each
  substitution's ``relativedelta_attributes``, formatted with its own ``format``.
- steps: inline ``sql`` wins; otherwise ``sql_file`` is read from ``athena_queries/<team>/``. Every
  ``$token`` (the substitutions and the built-ins) must have a value, and each step must be one
  statement writing only the item's tables, checked here for ``sql_file`` steps too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakeline.dependencies.dates import (
    format_partition_date,
    format_substitution,
    parse_date,
    shift,
)
from lakeline.dependencies.model import Dependency, DependencyItem, undefined_token_problem
from lakeline.dependencies.statements import step_problem
from lakeline.dependencies.tokens import builtin_token_values, substitute_tokens, undefined_tokens
from lakeline.errors import InvalidInputError
from lakeline.names import check_identifier, check_partition_value

SqlFileReader = Callable[[str], str]


def check_partition(partition: Mapping[str, str], what: str = "partition") -> dict[str, str]:
    """A checked partition spec: identifier columns, safe values, order kept."""
    checked: dict[str, str] = {}
    for column, value in partition.items():
        check_identifier(column, f"{what} column")
        checked[column] = check_partition_value(value, f"{what} {column!r}")
    return checked


def partition_path(partition: Mapping[str, str]) -> str:
    """``col=value/col2=value2``, the partition as it appears in a location."""
    return "/".join(f"{column}={value}" for column, value in partition.items())


def destination_partitions(
    dependency: Dependency,
    partition_column: str,
    partition_python_mask: str,
    source_partition: Mapping[str, str],
) -> list[dict[str, str]]:
    """Every target partition ``{partitionColumn: value}`` one source partition arrival feeds: its date
    shifted by the dependency's ``relativedelta_attributes`` and, with a ``TargetRange``, the moments
    each ``step`` on from that shifted date itself (not from the partition value, which a coarser mask
    rounds), in order and each once."""
    source = check_partition(source_partition, f"{dependency.table_name} partition")
    if dependency.field_column not in source:
        levels = ", ".join(source) or "none (the table is not partitioned)"
        raise InvalidInputError(
            f"{dependency.table_name} arrival has no partition column {dependency.field_column!r} "
            f"(FieldColumn); its partition columns are: {levels}"
        )
    arrived = parse_date(
        source[dependency.field_column],
        dependency.date_expression,
        f"{dependency.table_name} partition {dependency.field_column}",
    )
    target = shift(arrived, dependency.relativedelta_attributes, f"{dependency.table_name} relativedelta")
    reach = dependency.target_range
    values = []
    for index in range(reach.count if reach else 1):
        try:
            moment = target + reach.step.delta() * index if reach else target
        except (OverflowError, ValueError) as error:
            what = f"{dependency.table_name} TargetRange: partition {index + 1}"
            raise InvalidInputError(f"{what} is out of range") from error
        values.append(format_partition_date(moment, partition_python_mask, f"partition {partition_column!r}"))
    return [{partition_column: value} for value in dict.fromkeys(values)]


def substitution_values(item: DependencyItem, destination: Mapping[str, str]) -> dict[str, str]:
    """``{token: value}`` for the item's date substitutions at one destination partition."""
    if item.partition_column not in destination:
        raise InvalidInputError(
            f"destination partition {partition_path(destination)!r} of {item.dataset} has no "
            f"{item.partition_column!r} (partitionColumn)"
        )
    reference = parse_date(destination[item.partition_column], item.partition_python_mask, f"{item.dataset} partition")
    return {
        substitution.token: format_substitution(
            shift(reference, substitution.relativedelta_attributes, f"date_substitutions {substitution.token}"),
            substitution.format,
            f"date_substitutions {substitution.token}",
        )
        for substitution in item.date_substitutions
    }


def team_sql_reader(queries_root: Path, team: str) -> SqlFileReader:
    """Read ``sql_file`` names from ``<queries_root>/<team>/`` (the artifacts' athena_queries layout)."""
    check_identifier(team, "team")
    folder = queries_root / team

    def read(name: str) -> str:
        path = folder / name
        try:
            return path.read_text(encoding="utf-8")
        except OSError as error:
            raise InvalidInputError(f"sql_file {name!r}: cannot read {path}: {error.strerror}") from error

    return read


@dataclass(frozen=True)
class ResolvedStep:
    db: str
    info: str
    sql: str


@dataclass(frozen=True)
class ResolvedTarget:
    dataset: str
    partition: dict[str, str]
    steps: tuple[ResolvedStep, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "partition": dict(self.partition),
            "steps": [{"db": step.db, "info": step.info, "sql": step.sql} for step in self.steps],
        }


def resolve_steps(
    item: DependencyItem,
    destination: Mapping[str, str],
    read_sql_file: SqlFileReader,
    extra_values: Mapping[str, str] | None = None,
) -> ResolvedTarget:
    """Every step's SQL with every ``$token`` substituted; a token left over, or a step that is not one
    statement writing only the item's tables, is an error naming the step."""
    values = {**(extra_values or {}), **substitution_values(item, destination)}
    steps: list[ResolvedStep] = []
    for index, step in enumerate(item.steps):
        label = f"{item.dataset} steps[{index}] ({step.info or step.sql_file or step.db})"
        text = step.sql if step.sql.strip() else read_sql_file(step.sql_file)
        left = undefined_tokens(text, values)
        if left:
            raise InvalidInputError(f"{label}: {undefined_token_problem(left)}")
        sql = substitute_tokens(text, values)
        problem = step_problem(sql, step.db, item.writable_tables)
        if problem:
            raise InvalidInputError(f"{label}: {problem}")
        steps.append(ResolvedStep(step.db, step.info, sql))
    return ResolvedTarget(item.dataset, dict(destination), tuple(steps))


def resolve_arrival(
    item: DependencyItem,
    source_table: str,
    source_partition: Mapping[str, str],
    read_sql_file: SqlFileReader,
    environment: str = "",
) -> list[ResolvedTarget]:
    """What ``lakeline deps resolve`` prints: each target partition one arrival feeds (one, or with a
    ``TargetRange`` several) and its SQL, with the built-in tokens a run provides."""
    dependency = item.dependency_on(source_table)
    resolved = []
    for destination in destination_partitions(
        dependency, item.partition_column, item.partition_python_mask, source_partition
    ):
        builtins = builtin_token_values(
            item.dataset, item.partition_column, destination[item.partition_column], environment
        )
        resolved.append(resolve_steps(item, destination, read_sql_file, builtins))
    return resolved
