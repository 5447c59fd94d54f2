"""``lakeline check`` (#41): a table's checks run on demand over what is published, on either runtime.

The checks are the project's: a stage table's in its table settings (``tables_settings``, else
``default_table``), a target's in its dependency item. They run through the same ``evaluate`` as the quality
step, on what readers see (the table, or one partition of it), not on a new version: ``RowCountMatch`` compares
a new version with the published one, so here it has nothing to compare and passes with a note.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from lakeline.dependencies.model import DependencyItem
from lakeline.engines.base import QueryResult
from lakeline.errors import InvalidInputError
from lakeline.names import check_identifier
from lakeline.quality.checks import Check
from lakeline.quality.evaluate import QualityReport, evaluate
from lakeline.quality.sql import TableRef
from lakeline.settings import TableSettings


def checks_of(
    table: str, settings: Mapping[str, TableSettings], default: TableSettings, items: Iterable[DependencyItem]
) -> tuple[Check, ...]:
    """``table``'s checks: its dependency item's if it is a target, else its table settings'."""
    for item in items:
        if item.dataset == table:
            return tuple(item.checks)
    return tuple(settings.get(table, default).checks)


def parse_partition(values: Iterable[str]) -> dict[str, str]:
    """``k=v`` options, one per partition column, as ``{k: v}``."""
    partition: dict[str, str] = {}
    for value in values:
        column, equals, text = value.partition("=")
        if not equals or not column:
            raise InvalidInputError(f"--partition {value!r}: expected column=value")
        if column in partition:
            raise InvalidInputError(f"--partition {column} given twice")
        partition[check_identifier(column, "partition column")] = text
    return partition


class Statements:
    """``evaluate``'s engine over a connection that runs one statement (the rules' names are qualified)."""

    def __init__(self, run: Callable[[str], QueryResult]) -> None:
        self._run = run

    def execute(self, sql: str, *, database: str | None = None) -> QueryResult:
        return self._run(sql)


def run_checks(
    checks: tuple[Check, ...], table: str, partition: Mapping[str, str], run: Callable[[str], QueryResult]
) -> QualityReport:
    """Run ``checks`` over ``table`` as published (``partition`` of it, if given)."""
    database, _, name = table.partition(".")
    ref = TableRef.of(database, name, partition)  # checks the names and the values
    report = evaluate(checks, Statements(run), ref)
    where = " and ".join(f"{column}={value}" for column, value in partition.items())
    return QualityReport(table + (f" ({where})" if where else ""), report.results)
