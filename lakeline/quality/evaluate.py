"""Running checks on a version through any ``Engine``, and the verdict: blocked if a ``block`` rule failed.

The rules measured by counting rows (IsComplete, ColumnValues, RowCount) share one scan (``sql.fuse``:
one statement, or a few if they are many and long); every other rule has its own query; and a row-level
rule that failed one more for its failing rows. Five typical rules (IsComplete, IsUnique, ColumnValues,
RowCount, CustomSql) are three statements. What the engines return is read the same way whatever they
are (Athena gives every value as text, Spark as Python values): the metric as a float, the sample's
values as text. A statement the engine refuses is not a failed check: its ``QueryError`` is raised, with
a note naming the rules it was checking, for the caller to retry or park.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from lakeline.engines.base import QueryResult
from lakeline.quality.checks import Check
from lakeline.quality.rules import ColumnCount, RowCountMatch, Severity, is_row_level
from lakeline.quality.sql import SAMPLE_ROWS, Compiled, TableRef, compile_rule, fuse, row_tally

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
    fused: bool = True,
) -> QualityReport:
    """Run ``checks`` on ``table`` (the new version); ``reference`` is the published version, if there is one.
    ``fused=False``: a statement per rule, what the fused statements are tested against."""
    compiled: dict[int, Compiled] = {}
    for position, check in enumerate(checks):
        if not (isinstance(check.parsed, RowCountMatch) and reference is None):
            compiled[position] = compile_rule(check.parsed, table, reference, limit=sample_rows)
    measured: dict[int, QueryResult] = {}
    together = [(position, checks[position].parsed) for position in compiled if row_tally(checks[position].parsed)]
    for statement in fuse(together, table) if fused else ():
        result = _run(engine, statement.sql(), table, [checks[position] for position in statement.positions])
        for k, position in enumerate(statement.positions):
            rows = [row[2 * k : 2 * k + 2] for row in result.rows]
            measured[position] = QueryResult(result.query_id, result.columns[2 * k : 2 * k + 2], rows)
    results = []
    for position, check in enumerate(checks):
        if position not in compiled:
            results.append(
                CheckResult(check.rule, check.severity, True, None, note="no published version to compare with")
            )
            continue
        result = measured[position] if position in measured else _metric(engine, compiled[position], table, check)
        results.append(_check(check, compiled[position], result, engine, table))
    return QualityReport(str(table), tuple(results))


def _check(check: Check, compiled: Compiled, result: QueryResult, engine: Queries, table: TableRef) -> CheckResult:
    """``check``'s result from its metric query's ``result`` (and its failing rows, if it judges rows and failed)."""
    rule = check.parsed
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
        rows = _run(engine, sample_sql, table, [check])
        sample = tuple(dict(zip(rows.columns, (_text(value) for value in row), strict=True)) for row in rows.rows)
    return CheckResult(check.rule, check.severity, passed, _number(metric), sample)


def _metric(engine: Queries, compiled: Compiled, table: TableRef, check: Check) -> QueryResult:
    """The rule's own metric query's result (a rule not measured with others)."""
    return _run(engine, compiled.metric_sql(), table, [check])


def _run(engine: Queries, sql: str, table: TableRef, checks: Sequence[Check]) -> QueryResult:
    try:
        return engine.execute(sql, database=table.database)
    except Exception as error:
        rules = ", ".join(repr(check.rule) for check in checks)
        error.add_note(f"while checking rule{'s' if len(checks) > 1 else ''} {rules} on {table}")
        raise


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
