"""Validation and quoting of the names and values that end up inside SQL.

SQL is never built from unchecked text: every database, table, column name and partition value passes
through here first. Names are lowercase identifiers; partition values come from a small safe alphabet
that cannot close a string literal, start a comment or walk out of an S3 prefix.
"""

from __future__ import annotations

import re

from lakeline.errors import InvalidInputError

METRICS_NAMESPACE = "Lakeline"
"""The CloudWatch namespace of every function's metrics (the stacks set it as POWERTOOLS_METRICS_NAMESPACE)."""

IDENTIFIER_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,127}$")
# Field names inside a column (struct fields): identifiers in any case, kept as the data spells them
# because JSON is read case-sensitively.
FIELD_NAME_PATTERN = re.compile(IDENTIFIER_PATTERN.pattern, re.IGNORECASE)
PARTITION_VALUE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-.:]{0,127}$")


def _check_name(value: str, what: str, pattern: re.Pattern[str], letters: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise InvalidInputError(
            f"{what} {value!r} is not a valid name: use {letters}, digits and '_', "
            "starting with a letter, at most 128 characters"
        )
    return value


def check_identifier(value: str, what: str) -> str:
    """Return ``value`` if it is a lowercase identifier, else raise naming ``what`` was wrong."""
    return _check_name(value, what, IDENTIFIER_PATTERN, "lowercase letters")


def check_field_name(value: str, what: str) -> str:
    """Return ``value`` if it is an identifier in any case (a nested field name), else raise naming ``what``."""
    return _check_name(value, what, FIELD_NAME_PATTERN, "letters")


def check_partition_value(value: str, what: str) -> str:
    """Return ``value`` if it is a safe partition value, else raise naming ``what`` was wrong."""
    if not isinstance(value, str) or not PARTITION_VALUE_PATTERN.fullmatch(value) or ".." in value:
        raise InvalidInputError(
            f"{what} value {value!r} is not allowed: partition values use letters, digits and "
            "'_', '-', '.', ':' (no '..'), start with a letter or digit, at most 128 characters"
        )
    return value


def check_qualified_table(value: str, what: str = "table") -> tuple[str, str]:
    """Split ``database.table`` into its two checked parts."""
    parts = value.split(".") if isinstance(value, str) else []
    if len(parts) != 2:
        raise InvalidInputError(f"{what} {value!r} must be written database.table")
    return check_identifier(parts[0], f"{what} database"), check_identifier(parts[1], f"{what} name")


def ddl_name(*parts: str) -> str:
    """Hive-DDL quoting (Athena DDL and Spark SQL): `db`.`table`. Parts must already be checked."""
    return ".".join(f"`{check_identifier(part, 'name')}`" for part in parts)


def dml_name(*parts: str) -> str:
    """Trino/Athena DML quoting: "db"."table". Parts must already be checked."""
    return ".".join(f'"{check_identifier(part, "name")}"' for part in parts)


def string_literal(value: str) -> str:
    """A single-quoted SQL string literal of a value that cannot contain a quote."""
    if "'" in value or "\\" in value:
        raise InvalidInputError(f"value {value!r} cannot be used as a SQL literal")
    return f"'{value}'"
