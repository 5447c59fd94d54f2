"""The model of a quality rule: which DQDL rule type, on what, against which condition.

Rules are parsed from DQDL text (``lakeline.quality.dqdl``) and compiled to SQL (``lakeline.quality.sql``);
this module only says what a parsed rule is. Conditions keep DQDL's meaning, which is not always SQL's:
``between a and b`` excludes both ends (Glue compares ``a < value < b``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

Severity = Literal["block", "warn"]
"""``block``: a failed rule keeps the version from being published; ``warn``: it is published and reported."""

ConditionOperator = Literal["=", "!=", ">", ">=", "<", "<=", "between", "not between", "in", "not in"]

NUMBER_COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}
"""DQDL's comparison operators, on numbers."""

Operand = Decimal | str | None
"""A condition's operand: a number, a quoted string, or ``NULL`` (``None``)."""


@dataclass(frozen=True)
class Condition:
    """A DQDL expression such as ``>= 0.9``, ``between 1 and 10`` or ``in ["a", "b", NULL]``."""

    operator: ConditionOperator
    operands: tuple[Operand, ...]

    def holds(self, value: float) -> bool:
        """Whether a numeric ``value`` meets the condition, as Glue decides it (numeric operands only)."""
        numbers = [float(operand) for operand in self.operands if isinstance(operand, Decimal)]
        match self.operator:
            case "=" | "!=" | ">" | ">=" | "<" | "<=":
                return NUMBER_COMPARISONS[self.operator](value, numbers[0])
            case "between":
                return numbers[0] < value < numbers[1]
            case "not between":
                return not numbers[0] < value < numbers[1]
            case "in":
                return value in numbers
            case "not in":
                return value not in numbers


@dataclass(frozen=True)
class IsComplete:
    """Every value of ``column`` is non-NULL. Metric: the share of non-NULL values."""

    column: str


@dataclass(frozen=True)
class IsUnique:
    """Every value of ``column`` occurs once. Metric: the share of rows whose value occurs once (a NULL never does)."""

    column: str


@dataclass(frozen=True)
class ColumnValues:
    """Each value of ``column`` meets ``condition``; with ``threshold``, the share of values that do meets it.
    Metric: that share."""

    column: str
    condition: Condition
    threshold: Condition | None = None


@dataclass(frozen=True)
class RowCount:
    """The number of rows meets ``condition``. Metric: the row count."""

    condition: Condition


@dataclass(frozen=True)
class RowCountMatch:
    """The row count over the reference's (in Lakeline: the partition's published version) meets ``condition``.
    ``reference`` is the alias as written. Metric: the ratio."""

    reference: str
    condition: Condition


@dataclass(frozen=True)
class ColumnCount:
    """The number of data columns meets ``condition``. Metric: that number."""

    condition: Condition


@dataclass(frozen=True)
class CustomSql:
    """A SELECT over ``primary``: with ``condition``, its single value must meet it (metric: the value);
    without, the rows it returns pass and the others fail (metric: the share that pass)."""

    sql: str
    condition: Condition | None = None


Rule = IsComplete | IsUnique | ColumnValues | RowCount | RowCountMatch | ColumnCount | CustomSql


def is_row_level(rule: Rule) -> bool:
    """Whether the rule judges each row, so that its failing rows can be shown."""
    return isinstance(rule, IsComplete | IsUnique | ColumnValues) or (
        isinstance(rule, CustomSql) and rule.condition is None
    )
