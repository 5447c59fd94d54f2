"""The one interface every SQL statement goes through, whatever runs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from lakeline.errors import LakelineError

DEFAULT_DATABASE = "default"
"""The database an unqualified table name is in when a statement runs without one (Athena's and Spark's)."""


@dataclass(frozen=True)
class Column:
    name: str
    type: str


@dataclass(frozen=True)
class TableSchema:
    database: str
    table: str
    columns: tuple[Column, ...]
    partition_columns: tuple[Column, ...] = ()
    location: str | None = None
    format: str | None = None  # how its files are read: csv, json, parquet, orc, ...
    delimiter: str | None = None  # the field delimiter of a csv table
    quote: str = '"'  # the quote character of a csv table ("": fields are never quoted)
    multiline_fields: bool = False  # whether a csv table's reader reads quoted fields across lines

    @property
    def column_names(self) -> list[str]:
        return [column.name for column in self.columns]

    @property
    def partition_names(self) -> list[str]:
        return [column.name for column in self.partition_columns]


@dataclass(frozen=True)
class QueryResult:
    query_id: str
    columns: list[str] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    """The columns' types as the engine names them (Spark's ``simpleString``), where it gives them."""


class QueryError(LakelineError):
    """A statement did not succeed. Carries the engine's query id and reason."""

    def __init__(self, message: str, *, sql: str, query_id: str | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.sql = sql
        self.query_id = query_id
        self.reason = reason


class QueryFailed(QueryError):
    """The engine ran the statement and reported failure (Athena FAILED, a Spark exception)."""


class QueryCancelled(QueryError):
    """The statement was cancelled (Athena CANCELLED); never retried automatically."""


class QueryTimedOut(QueryError):
    """The statement did not finish within the allowed time; it was asked to stop."""


class TableNotFound(LakelineError):
    def __init__(self, database: str, table: str) -> None:
        super().__init__(f"table {database}.{table} does not exist")
        self.database = database
        self.table = table


class Engine(Protocol):
    """Runs Athena-dialect SQL. Implementations translate when their own dialect differs."""

    name: str

    def execute(self, sql: str, *, database: str | None = None) -> QueryResult:
        """Run one statement to completion; raise a ``QueryError`` subclass if it does not succeed."""
        ...

    def describe_table(self, database: str, table: str) -> TableSchema:
        """Columns, partition columns and location of a table; ``TableNotFound`` if it is missing."""
        ...
