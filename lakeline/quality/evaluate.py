"""Running checks on a version through any ``Engine``, and the verdict: blocked if a ``block`` rule failed.

One query per rule, plus one for the failing rows of a row-level rule that failed. What the engines
return is read the same way whatever they are (Athena gives every value as text, Spark as Python
values): the metric as a float, the sample's values as text. A statement the engine refuses is not a
failed check: its ``QueryError`` is raised, with a note naming the rule, for the caller to retry or park.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from lakeline.engines.base import QueryResult
from lakeline.quality.checks import Check
from lakeline.quality.rules import ColumnCount, RowCountMatch, Severity, is_row_level
from lakeline.quality.sql import SAMPLE_ROWS, TableRef, compile_rule

SampleRow = dict[str, str | None]


class Queries(Protocol):
    """What checks need of an engine: its queries (an ``Engine``, or ``lakeline check``'s SQL connection)."""

    def execute(self, sql: str, *, database: str | None = None) -> QueryResult: ...


@dataclass(frozen=True)
class CheckResult:
    rule: str
    severity: Severity
    passed: bool
    metric: float | None
    sample: tuple[SampleRow, ...] = ()  # failing rows, up to the limit, if the rule judges rows and failed
    note: str = ""  # why there is no metric, when the rule could not be measured


@dataclass(frozen=True)
class QualityReport:
    table: str
    results: tuple[CheckResult, ...]

    @property
    def blocked(self) -> bool:
        """Whether the version must not be published: a ``block`` rule failed."""
        return any(not result.passed and result.severity == "block" for result in self.results)

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        return tuple(result for result in self.results if not result.passed)

    @property
    def summary(self) -> str:
        """One line for ``status`` and a run's summary: ``2/3 passed; failed: RowCount > 10 (warn)``."""
        line = f"{len(self.results) - len(self.failed)}/{len(self.results)} passed"
        if self.failed:
            line += "; failed: " + ", ".join(f"{result.rule} ({result.severity})" for result in self.failed)
        return line


def evaluate(
    checks: Sequence[Check],
    engine: Queries,
    table: TableRef,
    reference: TableRef | None = None,
    *,
    sample_rows: int = SAMPLE_ROWS,
) -> QualityReport:
    """Run ``checks`` on ``table`` (the new version); ``reference`` is the published version, if there is one."""
    return QualityReport(str(table), tuple(_check(check, engine, table, reference, sample_rows) for check in checks))


def _check(check: Check, engine: Queries, table: TableRef, reference: TableRef | None, limit: int) -> CheckResult:
    rule = check.parsed
    if isinstance(rule, RowCountMatch) and reference is None:
        return CheckResult(check.rule, check.severity, True, None, note="no published version to compare with")
    compiled = compile_rule(rule, table, reference, limit=limit)
    result = _run(engine, compiled.metric_sql(), table, check)
    if isinstance(rule, ColumnCount):
        count = len([column for column in result.columns if column not in compiled.not_counted])
        return CheckResult(check.rule, check.severity, rule.condition.holds(count), float(count))
    if len(result.rows) != 1:
        note = f"the query returned {len(result.rows)} rows; it must return one value"
        return CheckResult(check.rule, check.severity, False, None, note=note)
    metric, passed = result.rows[0][0], int(result.rows[0][1]) == 1
    sample: tuple[SampleRow, ...] = ()
    sample_sql = compiled.sample_sql()
    if not passed and is_row_level(rule) and sample_sql is not None:
        rows = _run(engine, sample_sql, table, check)
        sample = tuple(dict(zip(rows.columns, (_text(value) for value in row), strict=True)) for row in rows.rows)
    return CheckResult(check.rule, check.severity, passed, _number(metric), sample)


def _run(engine: Queries, sql: str, table: TableRef, check: Check) -> QueryResult:
    try:
        return engine.execute(sql, database=table.database)
    except Exception as error:
        error.add_note(f"while checking rule {check.rule!r} on {table}")
        raise


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
