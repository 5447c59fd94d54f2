"""AthenaEngine: statements run in an Athena workgroup through boto3.

Waiting follows awswrangler's Athena module: poll with a growing delay, retry throttled calls with
backoff, raise typed errors for FAILED and CANCELLED, and stop the query on timeout so a cancelled or
stuck query can never make the caller loop forever.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.exceptions import ClientError

from lakeline.aws.retry import Backoff, call_retrying
from lakeline.engines.base import (
    Column,
    QueryCancelled,
    QueryFailed,
    QueryResult,
    QueryTimedOut,
    TableNotFound,
    TableSchema,
)

if TYPE_CHECKING:
    from mypy_boto3_athena import AthenaClient
    from mypy_boto3_glue import GlueClient

logger = logging.getLogger(__name__)

THROTTLING_CODES = frozenset({"ThrottlingException", "TooManyRequestsException", "Throttling", "RequestLimitExceeded"})
_T = TypeVar("_T")


def athena_throttled(error: ClientError) -> bool:
    """Whether Athena refused the call for its quota (the engine retries it; past that, callers name it)."""
    return error.response.get("Error", {}).get("Code", "") in THROTTLING_CODES


def _note_throttled(error: ClientError, retry: int) -> None:
    logger.warning("Athena throttled (%s); retry %d", error.response.get("Error", {}).get("Code"), retry)


@dataclass(frozen=True)
class AthenaSettings:
    workgroup: str = "primary"
    catalog: str = "AwsDataCatalog"
    output_location: str | None = None
    timeout_seconds: float = 1800.0
    poll_initial_seconds: float = 0.2
    poll_max_seconds: float = 5.0
    max_throttle_retries: int = 8


DEADLINE_GRACE_SECONDS = 30.0


class AthenaEngine:
    name = "athena"

    def __init__(
        self,
        client: AthenaClient,
        settings: AthenaSettings | None = None,
        *,
        glue: GlueClient | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        deadline: float | None = None,
    ) -> None:
        """``deadline``: a ``clock`` time past which a query is stopped (``QueryTimedOut``) once it has waited
        ``DEADLINE_GRACE_SECONDS``, whatever ``settings.timeout_seconds`` leaves: set from a function's own timeout, so
        it fails cleanly, its cleanup done, before it is killed."""
        self._deadline = deadline
        self._athena = client
        self._glue = glue
        self.settings = settings or AthenaSettings()
        self._sleep = sleep
        self._clock = clock
        self._throttle_backoff = Backoff(
            attempts=self.settings.max_throttle_retries + 1,
            base_seconds=0.1,
            cap_seconds=self.settings.poll_max_seconds,
            sleep=sleep,
        )

    def _call(self, operation: Callable[..., _T], **kwargs: Any) -> _T:
        """Call an Athena API, retrying throttling with exponential backoff and jitter (on top of the
        client's own retries: a burst of queries can outlast them)."""
        return call_retrying(
            lambda: operation(**kwargs), self._throttle_backoff, retryable=athena_throttled, on_retry=_note_throttled
        )

    def start(self, sql: str, *, database: str | None = None) -> str:
        kwargs: dict[str, Any] = {"QueryString": sql, "WorkGroup": self.settings.workgroup}
        context: dict[str, str] = {"Catalog": self.settings.catalog}
        if database:
            context["Database"] = database
        kwargs["QueryExecutionContext"] = context
        if self.settings.output_location:
            kwargs["ResultConfiguration"] = {"OutputLocation": self.settings.output_location}
        response = self._call(self._athena.start_query_execution, **kwargs)
        return response["QueryExecutionId"]

    def wait(self, query_id: str, *, sql: str = "") -> dict[str, Any]:
        """Wait until the query ends; return its execution on success, raise otherwise."""
        deadline = self._clock() + self.settings.timeout_seconds
        within = f"in {self.settings.timeout_seconds:.0f}s"
        if self._deadline is not None and self._deadline < deadline:
            # Even past the deadline a query has ``DEADLINE_GRACE_SECONDS``: the cleanup after a stopped check (a
            # DROP TABLE) still runs, and the caller's budget after the deadline covers two such waits.
            deadline = min(deadline, max(self._deadline, self._clock() + DEADLINE_GRACE_SECONDS))
            within = "before the function's own timeout"
        delay = self.settings.poll_initial_seconds
        while True:
            execution = self._call(self._athena.get_query_execution, QueryExecutionId=query_id)
            status = execution["QueryExecution"]["Status"]
            state = status["State"]
            reason = status.get("StateChangeReason", "")
            if state == "SUCCEEDED":
                return dict(execution["QueryExecution"])
            if state == "FAILED":
                error_type = status.get("AthenaError", {}).get("ErrorType", "")
                raise QueryFailed(
                    f"Athena query {query_id} failed: {reason or 'no reason given'}"
                    + (f" (error type {error_type})" if error_type else ""),
                    sql=sql,
                    query_id=query_id,
                    reason=reason,
                )
            if state == "CANCELLED":
                raise QueryCancelled(
                    f"Athena query {query_id} was cancelled: {reason or 'no reason given'}",
                    sql=sql,
                    query_id=query_id,
                    reason=reason,
                )
            if self._clock() >= deadline:
                self._call(self._athena.stop_query_execution, QueryExecutionId=query_id)
                raise QueryTimedOut(
                    f"Athena query {query_id} did not finish {within} (last state {state}); it was stopped",
                    sql=sql,
                    query_id=query_id,
                )
            self._sleep(delay)
            delay = min(delay * 2, self.settings.poll_max_seconds)

    def results(self, query_id: str) -> QueryResult:
        columns: list[str] = []
        rows: list[tuple[Any, ...]] = []
        paginator = self._athena.get_paginator("get_query_results")
        first_page = True
        for page in paginator.paginate(QueryExecutionId=query_id):
            result_set = page["ResultSet"]
            if not columns:
                columns = [c["Name"] for c in result_set.get("ResultSetMetadata", {}).get("ColumnInfo", [])]
            page_rows = result_set.get("Rows", [])
            if first_page and page_rows and columns:
                # The first row of a SELECT's first page repeats the column names.
                header = [cell.get("VarCharValue") for cell in page_rows[0]["Data"]]
                if header == columns:
                    page_rows = page_rows[1:]
            first_page = False
            rows.extend(tuple(cell.get("VarCharValue") for cell in row["Data"]) for row in page_rows)
        return QueryResult(query_id=query_id, columns=columns, rows=rows)

    def execute(self, sql: str, *, database: str | None = None) -> QueryResult:
        query_id = self.start(sql, database=database)
        execution = self.wait(query_id, sql=sql)
        if execution.get("StatementType") == "DDL":
            return QueryResult(query_id=query_id)
        return self.results(query_id)

    def describe_table(self, database: str, table: str) -> TableSchema:
        """Read the table from the Glue Data Catalog, which is Athena's catalog."""
        if self._glue is None:
            raise RuntimeError("AthenaEngine needs a Glue client to describe tables")
        try:
            response = self._call(self._glue.get_table, DatabaseName=database, Name=table)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "EntityNotFoundException":
                raise TableNotFound(database, table) from error
            raise
        found = response["Table"]
        descriptor = found.get("StorageDescriptor", {})
        location = descriptor.get("Location")
        return TableSchema(
            database=database,
            table=table,
            columns=tuple(Column(c["Name"], c.get("Type", "string")) for c in descriptor.get("Columns", [])),
            partition_columns=tuple(Column(c["Name"], c.get("Type", "string")) for c in found.get("PartitionKeys", [])),
            location=location.rstrip("/") + "/" if location else None,
            format=glue_format(descriptor),
            delimiter=glue_delimiter(descriptor),
            quote=glue_quote(descriptor),
        )

    def add_columns(self, database: str, table: str, columns: tuple[Column, ...]) -> None:
        """Add the columns the Glue table lacks of ``columns``, after its own. The update names the
        version it read, so two routers adding at once do not lose one's change: the loser fails its
        record, and its retry finds the columns there."""
        if self._glue is None:
            raise RuntimeError("AthenaEngine needs a Glue client to change tables")
        try:
            found = self._call(self._glue.get_table, DatabaseName=database, Name=table)["Table"]
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "EntityNotFoundException":
                raise TableNotFound(database, table) from error
            raise
        descriptor: dict[str, Any] = dict(found.get("StorageDescriptor", {}))
        present = {column["Name"].lower() for column in descriptor.get("Columns", [])}
        missing = [column for column in columns if column.name.lower() not in present]
        if not missing:
            return
        descriptor["Columns"] = [
            *descriptor.get("Columns", []),
            *({"Name": column.name, "Type": column.type} for column in missing),
        ]
        table_input: dict[str, Any] = {key: found[key] for key in GLUE_TABLE_INPUT if key in found}  # type: ignore[literal-required]
        table_input["StorageDescriptor"] = descriptor
        version = {"VersionId": found["VersionId"]} if found.get("VersionId") else {}
        self._call(self._glue.update_table, DatabaseName=database, TableInput=table_input, **version)


GLUE_TABLE_INPUT = (
    "Name",
    "Description",
    "Owner",
    "Retention",
    "PartitionKeys",
    "ViewOriginalText",
    "ViewExpandedText",
    "TableType",
    "Parameters",
    "TargetTable",
)


def glue_format(descriptor: Mapping[str, Any]) -> str | None:
    """The format of a Glue table's files, from its SerDe and input format."""
    serde = str(descriptor.get("SerdeInfo", {}).get("SerializationLibrary", "")).lower()
    text = f"{serde} {str(descriptor.get('InputFormat', '')).lower()}"
    for marker, name in (("parquet", "parquet"), ("orc", "orc"), ("json", "json"), ("avro", "avro")):
        if marker in text:
            return name
    if "opencsvserde" in serde or "lazysimpleserde" in serde or "textinputformat" in text:
        return "csv"
    return None


def glue_delimiter(descriptor: Mapping[str, Any]) -> str | None:
    parameters = descriptor.get("SerdeInfo", {}).get("Parameters", {})
    value = parameters.get("separatorChar") or parameters.get("field.delim")
    return str(value) if value else None


def glue_quote(descriptor: Mapping[str, Any]) -> str:
    """OpenCSVSerde reads quoted fields (quoteChar, default ``"``); LazySimpleSerDe never does."""
    serde = descriptor.get("SerdeInfo", {})
    if "lazysimpleserde" in str(serde.get("SerializationLibrary", "")).lower():
        return ""
    return str(serde.get("Parameters", {}).get("quoteChar", '"'))


def pyathena_statement(connection: Any, sql: str) -> QueryResult:
    """A statement through a pyathena connection: its columns and rows as pyathena types them (none for DDL).
    One cursor per statement: a cursor holds one query's state."""
    from pyathena.error import DatabaseError

    cursor = connection.cursor()
    try:
        cursor.execute(sql)
        if not cursor.description:
            return QueryResult(str(cursor.query_id))
        columns = [str(column[0]) for column in cursor.description]
        return QueryResult(str(cursor.query_id), columns, list(cursor.fetchall()))
    except DatabaseError as error:
        raise QueryFailed(f"Athena statement failed: {error}", sql=sql) from error
