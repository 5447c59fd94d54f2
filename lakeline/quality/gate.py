"""A run's quality gate as its plan carries it: the table's checks and where the new version is read.

The stage A router puts the table's checks (its settings) and the stage B router the target's (its dependency
item) into the plan; ``None`` when there are none, and the state machine goes from the writes to the commit
without the quality task. The checks travel as plain ``{"rule", "severity"}`` objects (a plan is JSON in a
state machine's input), parsed again when they run; they are bounded per table (``checks.MAX_CHECKS_BYTES``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lakeline.names import check_identifier
from lakeline.quality.checks import Check, parse_checks

QUALITY_TABLE_SUFFIX = "_quality"


@dataclass(frozen=True)
class QualityGate:
    """``rules``: the checks; ``database``.``table``: the table whose partition ``partition`` the run writes (its
    schema gives the new version's columns, its published partition is RowCountMatch's reference);
    ``quality_table``: the temp table over the new version's files, made and dropped by the quality step."""

    rules: tuple[dict[str, str], ...]
    database: str
    table: str
    quality_table: str
    partition: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls, checks: Sequence[Check], *, database: str, table: str, temp_table: str, partition: Mapping[str, str]
    ) -> QualityGate | None:
        """The gate of a run writing ``partition`` of ``database.table`` through ``temp_table``; ``None``
        without checks."""
        if not checks:
            return None
        return cls(
            rules=tuple(check.model_dump() for check in checks),
            database=check_identifier(database, "database"),
            table=check_identifier(table, "table"),
            quality_table=check_identifier(f"{temp_table}{QUALITY_TABLE_SUFFIX}", "quality table"),
            partition=dict(partition),
        )

    @property
    def checks(self) -> tuple[Check, ...]:
        return parse_checks(list(self.rules))

    def to_dict(self) -> dict[str, Any]:
        return {
            "rules": [dict(rule) for rule in self.rules],
            "database": self.database,
            "table": self.table,
            "quality_table": self.quality_table,
            "partition": dict(self.partition),
        }
