"""A local Athena endpoint: the moto server's Athena API, with each query run on embedded Spark (#20).

moto's Athena records a query and answers SUCCEEDED without running it. ``install_local_athena`` makes
the moto server of this process run every ``StartQueryExecution`` on Lakeline's ``SparkEngine``
(Athena-dialect SQL translated for Spark), against the state of the moto deployment, as Athena runs
against the Glue Data Catalog and S3:

- Catalog: Glue (moto's) is the truth. Before a query, each table it names is made in Spark's metastore
  as Glue has it (columns, partition keys, location, format, partitions), under a Spark database named
  ``<database_prefix><glue database>``, so it cannot meet the tables other users of the same Spark
  session keep under the same names. Unqualified names take the ``QueryExecutionContext`` database,
  else ``default``, as Athena does. After the query, what it changed in Spark (CTAS, CREATE, DROP,
  ALTER TABLE ... PARTITION, SET LOCATION, INSERT's new partitions, CREATE / DROP DATABASE) is written
  back to Glue, so the deployed functions see it.
- Storage: Spark here cannot read ``s3://``. Each ``s3://bucket/key`` is a file under ``<mirror>/bucket/
  key``; statements get ``file://`` URIs instead. Before a query the objects of the buckets it touches
  are brought from moto's S3 into the mirror; after it, files it wrote are put into moto's S3 and
  objects whose files it removed are deleted (Spark's hidden files — ``_SUCCESS``, ``.crc``,
  ``_temporary`` — stay local).
- API: ``StartQueryExecution`` answers at once (QUEUED); one worker thread runs the queries in order
  (RUNNING, then SUCCEEDED / FAILED with the engine's one-line reason as ``StateChangeReason`` and in
  ``AthenaError``), as Athena does, so no HTTP request waits on Spark and a queued query can be stopped.
  Results are written as Athena writes them (``<output>/<id>.csv`` for queries, ``.txt`` for DDL) and
  served by ``GetQueryResults`` (header row first for a SELECT, ``MaxResults`` / ``NextToken`` pages).
  ``StopQueryExecution`` cancels a query that has not finished.

Gaps against real Athena, said plainly:
- Spark semantics, not Trino's: functions, integer division (``7 / 2`` is 3.5 here), NULL handling of CSV
  (an empty field is NULL here, an empty string with OpenCSVSerde in Athena), result types (inferred from
  Spark's). Spark runs in ANSI mode (``spark_semantics.ATHENA``): an invalid cast, an overflow and a
  division by zero fail, as in Trino (a double divided by zero too, which is Infinity in Trino).
- Refused as Athena refuses them (``athena_refusals``): INSERT INTO a bucketed table, a CTAS into a
  location that holds objects, more than 100 partitions written by one statement; a query string over
  262,144 bytes (refused when started, as Athena does).
- ``"$path"`` is read through Spark's ``input_file_name()``, its values mapped back to s3://; a query's
  columns are headed as Athena heads them (``$path``, ``_col<i>`` for an expression without an alias).
- ``DESCRIBE``, ``SHOW CREATE TABLE``, ``SHOW PARTITIONS``, ``SHOW COLUMNS`` and ``SHOW DATABASES`` are
  answered from Glue in Athena's shapes; ``DESCRIBE EXTENDED | FORMATTED`` and other ``SHOW``s are refused.
- Formats: Parquet, ORC, JSON (OpenX and Hive JSON SerDes, not OpenX's ``mapping.*``) and CSV (OpenCSVSerde,
  LazySimpleSerDe, ``skip.header.line.count`` of 0 or 1) only, text gzip-compressed by its ``.gz`` name; a
  table ``STORED AS INPUTFORMAT 'org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat'`` reads the files its
  manifests list in its SerDe's format, as Athena does (``lakeline.engines.symlink``). A
  ``CREATE TABLE`` is written into Glue as Athena writes it (any SerDe: Athena checks none) and read as
  above. Views, Iceberg, workgroup settings other than the output location and ``DataScannedInBytes`` are
  not emulated. A table whose Glue entry changed is rebuilt in Spark.
- Partition projection: ``date`` projections with a ``storage.location.template`` only; the partitions are
  the template's folders that hold objects, within the projection's range (Athena computes every value of
  the range and reads the folders that exist, which comes to the same rows).
- A query is cancelled only while queued; one that runs finishes (its effects stay) and reports CANCELLED.
- A three-part column reference (``db.table.column``) is not rewritten; ``ExecutionParameters`` are refused.
- ``default`` always exists, as in Athena's catalog; any other database must be in Glue.
- The mirror's path should need no URL escaping: ``"$path"`` comparisons match Spark's file URIs as text.
- Workgroups are moto's: one the deployment did not create is refused at ``StartQueryExecution``.
- ``ClientRequestToken`` as Athena honours it: a start with a token already used gets the query that token
  started (not a second run) if its request is the same, else ``InvalidRequestException`` (kept while the
  endpoint runs; Athena's window is not documented).
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import hashlib
import json
import logging
import os
import queue
import re
import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from lakeline.engines.athena import glue_delimiter, glue_format, glue_quote
from lakeline.engines.base import QueryError, QueryResult
from lakeline.engines.spark import SparkEngine
from lakeline.engines.spark_semantics import ATHENA
from lakeline.engines.symlink import SYMLINK_INPUT_FORMAT, SymlinkTable, reader
from lakeline.engines.translate import translate_statement
from lakeline.errors import LakelineError
from lakeline.local.rehearsal import timings
from lakeline.local.rehearsal.athena_caller import (
    Needed,
    authorize,
    caller_of,
    changing,
    glue_table,
    reading,
    result_file,
    writing,
)
from lakeline.local.rehearsal.athena_refusals import refusal
from lakeline.local.rehearsal.executions import query_ended
from lakeline.names import ddl_name, string_literal

logger = logging.getLogger(__name__)

DEFAULT_DATABASE = "default"
DEFAULT_PREFIX = "athena_local__"
PARTITIONS_PER_STATEMENT = 100
MAX_QUERY_BYTES = 262_144  # Athena's quota on a query string (its StartQueryExecution refuses a longer one)
TABLE_NAME = r"(?P<name>[`\"]?[A-Za-z0-9_]+[`\"]?(?:\.[`\"]?[A-Za-z0-9_]+[`\"]?)?)"
# Statements sqlglot only knows as opaque commands: the table they name is rewritten by hand.
COMMAND_TABLE = re.compile(r"^(?P<verb>MSCK\s+REPAIR\s+TABLE)\s+" + TABLE_NAME + r"\s*$", re.IGNORECASE)
# ``DESCRIBE``, ``SHOW CREATE TABLE``, ``SHOW PARTITIONS`` and ``SHOW COLUMNS`` of one table: answered from
# Glue, Athena's catalog, as Athena (Hive's DDL) answers them; Spark's answers differ in shape (or Spark has
# no such statement) and name its prefixed databases.
DESCRIBE = re.compile(r"^DESCRIBE\s+" + TABLE_NAME + r"$", re.IGNORECASE)
SHOW_CREATE_TABLE = re.compile(r"^SHOW\s+CREATE\s+TABLE\s+" + TABLE_NAME + r"$", re.IGNORECASE)
SHOW_PARTITIONS = re.compile(r"^SHOW\s+PARTITIONS\s+" + TABLE_NAME + r"$", re.IGNORECASE)
SHOW_COLUMNS = re.compile(r"^SHOW\s+COLUMNS\s+(?:IN|FROM)\s+" + TABLE_NAME + r"$", re.IGNORECASE)
# Athena's ``SHOW DATABASES | SCHEMAS [LIKE 'regular expression']``: answered from Glue (Spark's databases
# here are prefixed, and the catalog is Glue's).
SHOW_DATABASES = re.compile(r"^SHOW\s+(?:DATABASES|SCHEMAS)(?:\s+LIKE\s+'(?P<pattern>[^']*)')?$", re.IGNORECASE)
S3_URI = re.compile(r"^s3a?://(?P<bucket>[^/]+)/?(?P<key>.*)$")
NO_OUTPUT = (
    "No output location provided. An output location is required either through the Workgroup result "
    "configuration setting or as an API input."
)

PARQUET = {
    "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    "OutputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
    "SerdeInfo": {
        "SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
        "Parameters": {"serialization.format": "1"},
    },
}
ORC = {
    "InputFormat": "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
    "OutputFormat": "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
    "SerdeInfo": {"SerializationLibrary": "org.apache.hadoop.hive.ql.io.orc.OrcSerde", "Parameters": {}},
}
TEXT_FORMATS = {
    "InputFormat": "org.apache.hadoop.mapred.TextInputFormat",
    "OutputFormat": "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
}
LAZY_SIMPLE = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
JSON_SERDE = "org.openx.data.jsonserde.JsonSerDe"


class LocalAthenaError(LakelineError):
    """A query the local endpoint cannot run as Athena would (its reason becomes the FAILED reason)."""


# --- the API's side: executions and the moto patches -------------------------------------------------

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = "QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"
FINAL = frozenset({SUCCEEDED, FAILED, CANCELLED})


@dataclass
class Outcome:
    """What a finished query left for ``GetQueryExecution`` and ``GetQueryResults``."""

    statement_type: str = "DML"
    reason: str = ""
    columns: list[tuple[str, str]] = field(default_factory=list)  # (name, Athena type)
    rows: list[list[str | None]] = field(default_factory=list)  # header row first for a query
    queued_ms: int = 0
    engine_ms: int = 0


_execution_class: Any = None


def _local_execution_class() -> Any:
    """moto's ``Execution`` with a status of its own: moto's advances to SUCCEEDED whenever it is read."""
    global _execution_class
    if _execution_class is None:
        from moto.athena.models import Execution

        class LocalExecution(Execution):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                self.local_status = QUEUED
                self.outcome = Outcome()
                self.submitted = time.time()

            @property
            def status(self) -> str:
                return str(self.local_status)

            @status.setter
            def status(self, value: str) -> None:
                # An end state is final: StopQueryExecution cancels only what has not finished, and a
                # cancelled query that was running already does not become SUCCEEDED when it ends.
                if self.local_status in FINAL:
                    return
                self.local_status = value
                if value == CANCELLED and not self.outcome.reason:
                    self.outcome.reason = "Query was cancelled by the user"
                if value in FINAL:
                    self.end_time = time.time()
                    query_ended(self.id)  # the Athena task waiting on it asks now

        _execution_class = LocalExecution
    return _execution_class


_installed = threading.Lock()
_callers = threading.local()  # who signs the StartQueryExecution being handled in this thread
_patched = False
_current: LocalAthena | None = None


def install_local_athena(engine: SparkEngine, mirror: Path, *, database_prefix: str = DEFAULT_PREFIX) -> LocalAthena:
    """Make the moto Athena of this process run queries on ``engine`` (see the module's docstring).

    ``mirror``: a folder for the local copies of S3 objects (``<mirror>/<bucket>/<key>``);
    ``database_prefix``: what Spark database names start with (Glue database ``X`` is ``<prefix>X``).
    Call it in the process that runs the moto server; the patches are applied once, a later call
    replaces the endpoint. ``LocalAthena.stop`` ends its worker and gives moto's own behaviour back."""
    global _patched, _current
    with _installed:
        if not _patched:
            _patch_moto()
            _patched = True
        if _current is not None:
            _current.stop()
        _current = LocalAthena(engine, mirror, database_prefix)
        return _current


def _patch_moto() -> None:
    from moto.athena.models import AthenaBackend
    from moto.athena.responses import AthenaResponse

    original_start = AthenaBackend.start_query_execution
    original_response_start = AthenaResponse.start_query_execution

    def response_start_query_execution(self: Any) -> Any:
        _callers.current = caller_of(self.headers)  # the backend's call below runs in this thread
        _callers.token = self._get_param("ClientRequestToken")
        try:
            return original_response_start(self)
        finally:
            _callers.current = _callers.token = None

    original_get = AthenaBackend.get_query_execution
    original_response = AthenaResponse.get_query_execution
    original_results = AthenaResponse.get_query_results

    def start_query_execution(
        self: Any,
        query: str,
        context: Any,
        config: Any,
        workgroup: str,
        execution_parameters: list[str] | None,
    ) -> str:
        if len(query.encode()) > MAX_QUERY_BYTES:
            # Athena refuses it at once (its quota, which botocore's model states but does not check).
            from moto.core.exceptions import JsonRESTError

            raise JsonRESTError(
                "InvalidRequestException",
                f"the query string is {len(query.encode())} bytes; Athena takes at most {MAX_QUERY_BYTES}",
            )
        local = _current
        if local is None:
            return str(original_start(self, query, context, config, workgroup, execution_parameters))
        token = getattr(_callers, "token", None)
        request = json.dumps([query, context, config, workgroup, execution_parameters], sort_keys=True, default=str)
        with local.tokens_lock:  # two starts with one token at once make one query, as in Athena
            if token:
                started = local.tokens.get((self.account_id, self.region_name, token))
                if started is not None:
                    # Athena's idempotency: the same token and request are the query already started.
                    known, query_id = started
                    if known != request:
                        from moto.core.exceptions import JsonRESTError

                        raise JsonRESTError("InvalidRequestException", "Idempotent parameters do not match")
                    return query_id
            group = self.work_groups.get(workgroup or "primary")
            execution = _local_execution_class()(query, context or {}, dict(config or {}), group, execution_parameters)
            execution.config = _result_configuration(config, group, execution.id, query)
            execution.caller = getattr(_callers, "current", None)
            self.executions[execution.id] = execution
            if token:
                local.tokens[(self.account_id, self.region_name, token)] = (request, str(execution.id))
        local.submit(self, execution)
        return str(execution.id)

    def get_query_execution(self: Any, exec_id: str) -> Any:
        execution = self.executions[exec_id]
        if isinstance(execution, _local_execution_class()):
            return execution
        return original_get(self, exec_id)

    def get_query_results(self: Any, exec_id: str) -> Any:
        from moto.athena.exceptions import QueryStillRunning
        from moto.athena.models import QueryResults

        execution = self.executions.get(exec_id)
        if not isinstance(execution, _local_execution_class()):
            return original_backend_results(self, exec_id)
        if execution.status != SUCCEEDED:
            raise QueryStillRunning(current_status=execution.status)
        outcome = execution.outcome
        rows = [{"Data": [{} if value is None else {"VarCharValue": value} for value in row]} for row in outcome.rows]
        return QueryResults(rows=rows, column_info=[_column_info(name, kind) for name, kind in outcome.columns])

    def response_get_query_execution(self: Any) -> Any:
        execution = self.athena_backend.executions.get(self._get_param("QueryExecutionId"))
        if not isinstance(execution, _local_execution_class()):
            return original_response(self)
        return json.dumps({"QueryExecution": _described(execution)})

    def response_get_query_results(self: Any) -> Any:
        exec_id = self._get_param("QueryExecutionId")
        if not isinstance(self.athena_backend.executions.get(exec_id), _local_execution_class()):
            return original_results(self)
        result = self.athena_backend.get_query_results(exec_id).to_dict()
        rows = result["ResultSet"]["Rows"]
        start = int(self._get_param("NextToken") or 0)
        size = int(self._get_param("MaxResults") or 1000)
        result["ResultSet"]["Rows"] = rows[start : start + size]
        if start + size < len(rows):
            result["NextToken"] = str(start + size)
        result["UpdateCount"] = 0
        return json.dumps(result)

    original_backend_results = AthenaBackend.get_query_results
    setattr(AthenaBackend, "start_query_execution", start_query_execution)  # noqa: B010
    setattr(AthenaBackend, "get_query_execution", get_query_execution)  # noqa: B010
    setattr(AthenaBackend, "get_query_results", get_query_results)  # noqa: B010
    # moto's response leaves out StateChangeReason, AthenaError and real statistics.
    setattr(AthenaResponse, "get_query_execution", response_get_query_execution)  # noqa: B010
    setattr(AthenaResponse, "get_query_results", response_get_query_results)  # noqa: B010
    setattr(AthenaResponse, "start_query_execution", response_start_query_execution)  # noqa: B010


def _result_configuration(config: Any, workgroup: Any, exec_id: str, query: str) -> dict[str, Any]:
    """Athena's: the caller's output location, else the workgroup's; the file is ``<id>.csv`` for a
    query and ``<id>.txt`` for DDL."""
    configured = dict(config or {})
    output = configured.get("OutputLocation")
    if not output and workgroup is not None:
        output = (workgroup.configuration or {}).get("ResultConfiguration", {}).get("OutputLocation")
    if output:
        suffix = "txt" if _statement_type(query) != "DML" else "csv"
        configured["OutputLocation"] = f"{output.rstrip('/')}/{exec_id}.{suffix}"
    return configured


def _read_now(bucket: Any, key: str, item: Any) -> tuple[Any, bytes]:
    """The content of ``key`` (moto's ``FakeKey`` ``item``, listed a moment ago) and the key it was read from. A
    key overwritten or deleted by another request since the listing has its buffer closed by moto (``ValueError``):
    its current version is read instead; ``(None, b"")`` if it is gone."""
    from moto.s3.models import FakeKey

    for _ in range(5):
        try:
            return item, item.value
        except ValueError:
            item = bucket.keys.get(key)
            if not isinstance(item, FakeKey):  # gone, or a delete marker
                return None, b""
    return item, item.value


def _statement_type(query: str) -> str:
    first = query.lstrip(" \t\r\n(").split(None, 1)[0].upper() if query.strip() else ""
    if first in {"SHOW", "DESCRIBE", "EXPLAIN"}:
        return "UTILITY"
    if first in {"CREATE", "ALTER", "DROP", "MSCK"}:
        return "DDL"
    return "DML"


def _column_info(name: str, kind: str) -> dict[str, Any]:
    base, _, rest = kind.partition("(")
    precision, scale = 0, 0
    if base == "decimal" and rest:
        numbers = rest.rstrip(")").split(",")
        precision, scale = int(numbers[0]), int(numbers[1]) if len(numbers) > 1 else 0
    return {
        "CatalogName": "hive",
        "SchemaName": "",
        "TableName": "",
        "Name": name,
        "Label": name,
        "Type": base,
        "Precision": precision,
        "Scale": scale,
        "Nullable": "UNKNOWN",
        "CaseSensitive": base in {"varchar", "char"},
    }


def _described(execution: Any) -> dict[str, Any]:
    outcome: Outcome = execution.outcome
    status: dict[str, Any] = {"State": execution.status, "SubmissionDateTime": execution.start_time}
    if execution.status in FINAL:
        status["CompletionDateTime"] = execution.end_time
    if outcome.reason:
        status["StateChangeReason"] = outcome.reason
        if execution.status == FAILED:
            status["AthenaError"] = {"ErrorCategory": 2, "Retryable": False, "ErrorMessage": outcome.reason}
    total = int(((execution.end_time if execution.status in FINAL else time.time()) - execution.submitted) * 1000)
    described: dict[str, Any] = {
        "QueryExecutionId": execution.id,
        "Query": execution.query,
        "StatementType": _statement_type(execution.query),
        "ResultConfiguration": execution.config,
        "QueryExecutionContext": execution.context,
        "Status": status,
        "Statistics": {
            "EngineExecutionTimeInMillis": outcome.engine_ms,
            "DataScannedInBytes": 0,
            "TotalExecutionTimeInMillis": max(total, 0),
            "QueryQueueTimeInMillis": outcome.queued_ms,
            "ServicePreProcessingTimeInMillis": 0,
            "QueryPlanningTimeInMillis": 0,
            "ServiceProcessingTimeInMillis": 0,
            "ResultReuseInformation": {"ReusedPreviousResult": False},
        },
        "WorkGroup": execution.workgroup.name if execution.workgroup else "primary",
        "EngineVersion": {"SelectedEngineVersion": "AUTO", "EffectiveEngineVersion": "Athena engine version 3"},
    }
    if execution.execution_parameters is not None:
        described["ExecutionParameters"] = execution.execution_parameters
    return described


# --- the statement: which tables it reads and changes, rewritten for Spark ----------------------------


@dataclass
class Statement:
    """One Athena statement as the local endpoint runs it."""

    sql: str  # for Spark: prefixed databases, file: locations
    tables: set[tuple[str, str]]  # every (Glue database, table) it names
    changes: set[tuple[str, str]]  # the tables it may create, drop or alter
    databases: set[str]  # every Glue database it names
    creates_database: str | None = None
    drops_database: str | None = None
    locations: list[str] = field(default_factory=list)  # the s3:// URIs it names
    is_query: bool = False
    defines: dict[str, Any] | None = None  # CREATE TABLE without AS: the Glue TableInput Athena makes of it
    if_not_exists: bool = False
    kind: str = "query"  # query, ctas, create, insert, drop, alter[_partition], add/drop_partition (``_needed``)
    writes_to: str | None = None  # a CTAS's location (s3://)


def _ctas_location(tree: exp.Create) -> str | None:
    properties = tree.args.get("properties")
    for prop in properties.expressions if properties else []:
        if prop.name.lower() == "external_location" and isinstance(prop.args.get("value"), exp.Literal):
            return str(prop.args["value"].this)
    return None


def _kind(tree: exp.Expr) -> str:
    if isinstance(tree, exp.Create):
        if str(tree.args.get("kind") or "").upper() != "TABLE":
            return "alter"  # a view: its definition is a Glue table
        return "ctas" if isinstance(tree.expression, exp.Query) else "create"
    if isinstance(tree, exp.Alter):
        actions = tree.args.get("actions") or []
        if any(isinstance(action, exp.AddPartition) for action in actions):
            return "add_partition"
        if any(isinstance(action, exp.DropPartition) for action in actions):
            return "drop_partition"
        return "alter_partition" if tree.find(exp.Partition) else "alter"
    for kind, node in (("insert", exp.Insert), ("drop", exp.Drop), ("query", exp.Query)):
        if isinstance(tree, node):
            return kind
    return "alter"  # anything else changes the table's definition


STORED_AS: dict[str, dict[str, Any]] = {
    "PARQUET": PARQUET,
    "ORC": ORC,
    "TEXTFILE": {**TEXT_FORMATS, "SerdeInfo": {"SerializationLibrary": LAZY_SIMPLE, "Parameters": {}}},
}
# ROW FORMAT DELIMITED's clauses → LazySimpleSerDe's parameters, as Athena writes them into Glue.
DELIMITED = {
    "fields": ("field.delim", "serialization.format"),
    "escaped": ("escape.delim",),
    "collection_items": ("collection.delim",),
    "map_keys": ("mapkey.delim",),
    "lines": ("line.delim",),
    "null": ("serialization.null.format",),
}


def _literal(node: Any, what: str) -> str:
    if not isinstance(node, exp.Literal):
        raise LocalAthenaError(f"{what} must be a string literal, got {node.sql('athena') if node else None}")
    return str(node.this)


def _glue_columns(schema: Any) -> list[dict[str, str]]:
    return [
        {"Name": column.name.lower(), "Type": _glue_type(column.args["kind"].sql("hive"))}
        for column in (schema.expressions if isinstance(schema, exp.Schema) else [])
        if isinstance(column, exp.ColumnDef) and column.args.get("kind") is not None
    ]


def _defined_table(tree: exp.Create, name: str) -> dict[str, Any]:
    """The Glue ``TableInput`` Athena makes of ``CREATE [EXTERNAL] TABLE ... (columns) [PARTITIONED BY]
    [CLUSTERED BY] [ROW FORMAT ...] [STORED AS ...] [LOCATION] [TBLPROPERTIES]``: Athena's DDL only
    writes the catalog, so any SerDe is accepted here, as there, and read as ``_using`` reads it."""
    stored: dict[str, Any] = STORED_AS["TEXTFILE"]
    serde: dict[str, Any] | None = None
    parameters: dict[str, str] = {}
    descriptor: dict[str, Any] = {"Columns": _glue_columns(tree.this), "Compressed": False}
    partition_keys: list[dict[str, str]] = []
    properties = tree.args.get("properties")
    for prop in properties.expressions if properties else []:
        if isinstance(prop, exp.ExternalProperty):
            parameters["EXTERNAL"] = "TRUE"
        elif isinstance(prop, exp.PartitionedByProperty):
            partition_keys = _glue_columns(prop.this)
        elif isinstance(prop, exp.RowFormatSerdeProperty):
            listed = prop.args.get("serde_properties")
            serde = {
                "SerializationLibrary": _literal(prop.this, "ROW FORMAT SERDE"),
                "Parameters": {
                    _literal(item.this, "a SerDe property"): _literal(item.args.get("value"), "a SerDe property")
                    for item in (listed.expressions if listed else [])
                },
            }
        elif isinstance(prop, exp.RowFormatDelimitedProperty):
            delimited: dict[str, str] = {}
            for clause, keys in DELIMITED.items():
                if prop.args.get(clause) is not None:
                    value = _literal(prop.args[clause], f"ROW FORMAT DELIMITED {clause}")
                    delimited.update(dict.fromkeys(keys, value))
            serde = {"SerializationLibrary": LAZY_SIMPLE, "Parameters": delimited}
        elif isinstance(prop, exp.FileFormatProperty) and isinstance(prop.this, exp.InputOutputFormat):
            stored = {
                "InputFormat": _literal(prop.this.args.get("input_format"), "INPUTFORMAT"),
                "OutputFormat": _literal(prop.this.args.get("output_format"), "OUTPUTFORMAT"),
                "SerdeInfo": STORED_AS["TEXTFILE"]["SerdeInfo"],
            }
        elif isinstance(prop, exp.FileFormatProperty):
            kind = prop.this.name.upper()
            if kind not in STORED_AS:
                raise LocalAthenaError(
                    f"table {name}: STORED AS {kind} is not supported by the local Athena endpoint "
                    f"(use one of {', '.join(sorted(STORED_AS))})"
                )
            stored = STORED_AS[kind]
        elif isinstance(prop, exp.LocationProperty):
            descriptor["Location"] = _literal(prop.this, "LOCATION")
        elif isinstance(prop, exp.ClusteredByProperty):
            descriptor["BucketColumns"] = [column.name.lower() for column in prop.expressions]
            descriptor["NumberOfBuckets"] = int(_literal(prop.args.get("buckets"), "INTO ... BUCKETS"))
        elif isinstance(prop, exp.SchemaCommentProperty):
            parameters["comment"] = _literal(prop.this, "COMMENT")
        elif isinstance(prop, exp.Property) and isinstance(prop.this, exp.Literal):
            parameters[prop.name] = _literal(prop.args.get("value"), f"TBLPROPERTIES {prop.name!r}")
        else:
            raise LocalAthenaError(f"table {name}: {prop.sql('athena')} is not supported by the local Athena endpoint")
    descriptor.update(json.loads(json.dumps(stored)))
    if serde is not None:
        descriptor["SerdeInfo"] = serde
    return {
        "Name": name.split(".")[-1],
        "TableType": "EXTERNAL_TABLE",
        "Parameters": parameters,
        "PartitionKeys": partition_keys,
        "StorageDescriptor": descriptor,
    }


def _glue_type(hive: str) -> str:
    """A type as Glue spells it (``decimal(24,2)``, ``struct<x:int>``), from sqlglot's Hive SQL of it."""
    return re.sub(r"\s*([,:<>()])\s*", r"\1", hive.replace("`", "")).lower()


def _unquoted(name: str) -> str:
    return name.strip("`\"'").lower()


class Rewriter:
    """Glue names ↔ Spark names, and s3:// ↔ the mirror's file: URIs."""

    def __init__(self, mirror: Path, prefix: str) -> None:
        self.mirror = mirror.resolve()
        self.prefix = prefix
        root = re.escape(self.mirror.as_posix())
        self._local = re.compile(rf"file:(?://)?{root}/")

    def spark_database(self, database: str) -> str:
        return f"{self.prefix}{database}"

    def local_uri(self, uri: str) -> str:
        """``s3://bucket/key`` as the file: URI Spark reads and names files with (``file:///...``)."""
        found = S3_URI.match(uri)
        if found is None:
            return uri
        return f"file://{self.mirror.as_posix()}/{found.group('bucket')}/{found.group('key')}"

    def s3_text(self, text: str) -> str:
        """``text`` with the mirror's URIs as s3:// and Spark database names as Glue's."""
        return self._local.sub("s3://", text).replace(self.prefix, "")

    def statement(self, sql: str, context_database: str | None, *, ctas_root: str = "") -> Statement:
        """``sql`` rewritten for Spark; ``ctas_root``: where a CTAS without a location writes (s3://)."""
        text = sql.strip().rstrip(";").strip()
        default = (context_database or DEFAULT_DATABASE).lower()
        command = COMMAND_TABLE.match(text)
        if command is not None:
            parts = [_unquoted(part) for part in command.group("name").split(".")]
            database, table = (parts[0], parts[1]) if len(parts) == 2 else (default, parts[0])
            changes = {(database, table)} if command.group("verb").upper().startswith("MSCK") else set()
            rewritten = f"{command.group('verb')} {ddl_name(self.spark_database(database), table)}"
            kind = "add_partition" if changes else "query"  # MSCK REPAIR TABLE adds the partitions it finds
            return Statement(rewritten, {(database, table)}, changes, {database}, kind=kind)
        try:
            parsed = sqlglot.parse(text, read="athena")
        except ParseError as error:
            raise LocalAthenaError(f"cannot parse statement: {str(error).splitlines()[0]}") from error
        if len(parsed) != 1 or parsed[0] is None or isinstance(parsed[0], exp.Command):
            raise LocalAthenaError(f"statement is not supported by the local Athena endpoint: {text[:80]}")
        tree = parsed[0]
        kind = str(tree.args.get("kind") or "").upper()
        if isinstance(tree, exp.Create | exp.Drop) and kind in {"DATABASE", "SCHEMA"}:
            return self._database_statement(tree, kind)
        ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        targets = list(tree.args.get("tables") or []) if isinstance(tree, exp.Drop) else []
        if isinstance(tree.this, exp.Expression) and isinstance(tree, exp.Create | exp.Alter | exp.Insert):
            targets.append(tree.this.find(exp.Table))
        statement = Statement("", set(), set(), set())
        for node in list(tree.find_all(exp.Table)):
            if not node.name or (not node.db and node.name.lower() in ctes):
                continue
            database, table = (node.db or default).lower(), node.name.lower()
            statement.tables.add((database, table))
            statement.databases.add(database)
            if any(node is target for target in targets):
                statement.changes.add((database, table))
            node.set("catalog", None)
            node.set("db", exp.to_identifier(self.spark_database(database), quoted=True))
        if isinstance(tree, exp.Create) and isinstance(tree.expression, exp.Query) and kind == "TABLE":
            self._place_ctas(tree, ctas_root)
            statement.writes_to = _ctas_location(tree)
        if isinstance(tree, exp.Create) and kind == "TABLE" and tree.expression is None:
            ((database, table),) = statement.changes
            statement.defines = _defined_table(tree, f"{database}.{table}")  # before the URIs become local
            statement.if_not_exists = bool(tree.args.get("exists"))
        for literal in list(tree.find_all(exp.Literal)):
            if literal.is_string and S3_URI.match(literal.this):
                statement.locations.append(literal.this)
                literal.replace(exp.Literal.string(self.local_uri(literal.this)))
        statement.sql = tree.sql("athena")
        statement.is_query = isinstance(tree, exp.Query)
        statement.kind = _kind(tree)
        return statement

    def _database_statement(self, tree: exp.Create | exp.Drop, kind: str) -> Statement:
        node = tree.this if isinstance(tree.this, exp.Table) else tree.find(exp.Table)
        if node is None:
            raise LocalAthenaError(f"{kind} statement names no database")
        database = node.name.lower()
        node.set("this", exp.to_identifier(self.spark_database(database), quoted=True))
        create = isinstance(tree, exp.Create)
        return Statement(
            tree.sql("athena"),
            set(),
            set(),
            {database},
            creates_database=database if create else None,
            drops_database=None if create else database,
        )

    @staticmethod
    def _place_ctas(tree: exp.Create, place: str) -> None:
        """A CTAS without ``external_location`` writes under the output location (``tables/<id>/``), as
        Athena's does: the table is external here too, and its files stay when it is dropped."""
        properties = tree.args.get("properties")
        names = {prop.name.lower() for prop in properties.expressions} if properties else set()
        if "external_location" in names or not place:
            return
        prop = exp.Property(this=exp.to_identifier("external_location"), value=exp.Literal.string(place))
        if properties is None:
            tree.set("properties", exp.Properties(expressions=[prop]))
        else:
            properties.append("expressions", prop)


# --- the endpoint ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mirrored:
    """An object as last brought into or out of the mirror: its S3 ETag and its file's stat."""

    etag: str
    mtime_ns: int
    size: int


class LocalAthena:
    """Runs the queries started on moto's Athena, one at a time, on a worker thread."""

    def __init__(self, engine: SparkEngine, mirror: Path, database_prefix: str) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", database_prefix):
            raise LocalAthenaError(f"database prefix {database_prefix!r} must be a lowercase identifier")
        mirror.mkdir(parents=True, exist_ok=True)
        self.engine = engine
        self.names = Rewriter(mirror, database_prefix)
        self.mirror = self.names.mirror
        self._queue: queue.Queue[tuple[Any, Any] | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._starting = threading.Lock()  # not the query lock: a start must not wait for a running query
        self._lock = threading.Lock()  # one query at a time: the metastore, the mirror and their records
        self._catalog: dict[tuple[str, str], str | None] = {}  # Glue fingerprint each Spark table was made from
        self._objects: dict[tuple[str, str], Mirrored] = {}
        self.tokens_lock = threading.Lock()
        self.tokens: dict[tuple[str, str, str], tuple[str, str]] = {}
        """Each ``ClientRequestToken`` started with (account, region, token) → (the request, its query id)."""
        self.executed: list[tuple[str, str]] = []
        """(the query as started, the statement Spark ran) of each query that reached Spark, in order."""

    # -- the worker

    def submit(self, backend: Any, execution: Any) -> None:
        with self._starting:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name="local-athena", daemon=True)
                self._worker.start()
        self._queue.put((backend, execution))

    def stop(self) -> None:
        """End the worker after the queries already started; moto's own Athena answers from then on."""
        global _current
        if self._worker is not None and self._worker.is_alive():
            self._queue.put(None)
            self._worker.join()
        if _current is self:
            _current = None

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            backend, execution = item
            if execution.status == CANCELLED:
                continue
            try:
                self.run(backend, execution)
            except Exception as error:  # the worker must outlive any query; the query reports why
                logger.exception("local Athena query %s", execution.id)
                execution.outcome.reason = f"local Athena endpoint error: {type(error).__name__}: {error}"
                execution.status = FAILED

    # -- one query

    def run(self, backend: Any, execution: Any) -> None:
        """Run ``execution`` to its end state (under the lock: one query at a time)."""
        with self._lock:
            started = time.time()
            execution.outcome.queued_ms = int((started - execution.submitted) * 1000)
            timings.record("athena: queued", started - execution.submitted, execution.id)
            execution.status = RUNNING
            try:
                with self.engine.imposed(ATHENA):  # Trino's semantics, where Spark's differ (#36)
                    outcome = self._run(backend, execution)
            except (QueryError, LakelineError) as error:
                reason = getattr(error, "reason", "") or str(error)
                execution.outcome.reason = self.names.s3_text(reason.splitlines()[0] if reason else "failed")
                execution.outcome.engine_ms = int((time.time() - started) * 1000)
                execution.status = FAILED
                return
            outcome.queued_ms = execution.outcome.queued_ms
            outcome.engine_ms = int((time.time() - started) * 1000)
            execution.outcome = outcome
            execution.status = SUCCEEDED

    def _run(self, backend: Any, execution: Any) -> Outcome:
        from moto.glue.models import glue_backends
        from moto.s3.models import s3_backends

        glue = glue_backends[backend.account_id][backend.region_name]
        s3 = s3_backends[backend.account_id]["aws"]
        output = execution.config.get("OutputLocation")
        if not output:
            raise LocalAthenaError(NO_OUTPUT)
        if execution.execution_parameters:
            raise LocalAthenaError("ExecutionParameters are not supported by the local Athena endpoint")
        text = execution.query.strip().rstrip(";").strip()
        shown = SHOW_DATABASES.match(text)
        if shown is not None:
            return self._show_databases(glue, s3, backend, execution, output, shown.group("pattern"))
        context = (execution.context or {}).get("Database")
        for pattern, answer in (
            (DESCRIBE, _described_table),
            (SHOW_CREATE_TABLE, _create_table_statement),
            (SHOW_PARTITIONS, _listed_partitions),
            (SHOW_COLUMNS, _listed_columns),
        ):
            named = pattern.match(text)
            if named is not None:
                return self._from_glue(glue, s3, backend, execution, output, named.group("name"), answer)
        if re.match(r"DESCRIBE\b", text, re.IGNORECASE):
            raise LocalAthenaError(
                f"statement is not supported by the local Athena endpoint: {text[:80]} (DESCRIBE [db.]table is)"
            )
        root = output.rsplit("/", 1)[0]
        statement = self.names.statement(execution.query, context, ctas_root=f"{root}/tables/{execution.id}/")
        began = time.monotonic()
        caller = getattr(execution, "caller", None)
        if caller is not None and _iam_enforced():
            needed = _needed(glue, statement, backend.region_name, backend.account_id, output)
            authorize(backend.account_id, backend.region_name, caller, needed)
        buckets = self._sync_catalog(glue, statement)
        if statement.defines is not None:
            # As Athena's, a table's DDL only writes the catalog (Spark's Hive DDL would need the SerDe's
            # class): the table is made in Spark from Glue before the next query that names it.
            self._define(glue, statement, statement.defines)
            outcome = Outcome(statement_type=_statement_type(execution.query))
            self._put_results(s3, output, outcome)
            return outcome
        buckets |= {bucket for bucket in (_bucket(uri) for uri in statement.locations) if bucket}
        buckets |= _listed_buckets(glue, s3, statement)
        for bucket in sorted(buckets):
            self._pull(s3, bucket)
        self._project_partitions(glue, statement)
        refused = refusal(statement.kind, statement.sql, statement.changes, statement.writes_to, glue, s3, self.engine)
        if refused:
            raise LocalAthenaError(refused)
        self.executed.append((execution.query, statement.sql))
        ready = time.monotonic()
        failure: LakelineError | None = None
        result = QueryResult(query_id=execution.id)
        # A symlink table's manifests name s3:// files: Spark reads them from the mirror.
        outside, self.engine.symlink_target = self.engine.symlink_target, self.names.local_uri
        try:
            result = self.engine.execute(statement.sql)
        except LakelineError as error:  # QueryFailed, or a statement the translation refuses
            failure = error
        except Exception:
            for key in statement.changes:  # unknown state: made again from Glue next time
                self._catalog.pop(key, None)
            raise
        finally:
            self.engine.symlink_target = outside
        ran = time.monotonic()
        # What ran changed files and the metastore even when it failed part way.
        written = self._write_back(glue, statement, succeeded=failure is None)
        for bucket in sorted(buckets | written):
            self._push(s3, bucket)
        timings.record("athena: catalog and mirror in", ready - began, execution.id)
        timings.record("athena: Spark SQL", ran - ready, execution.id)
        logger.debug(
            "local Athena %s: %.3fs catalog and mirror in, %.3fs Spark, %.3fs back: %s",
            execution.id,
            ready - began,
            ran - ready,
            time.monotonic() - ran,
            statement.sql,
        )
        if failure is not None:
            raise failure
        outcome = Outcome(statement_type=_statement_type(execution.query))
        if statement.is_query:
            kinds = self._result_types(statement, result)
            names = _athena_names(execution.query, result.columns)
            outcome.columns = list(zip(names, kinds, strict=True))
            outcome.rows = [list(names)]
        elif outcome.statement_type == "UTILITY":
            # SHOW ... answers rows as text, without a header row (Athena writes them to a .txt file).
            if not result.columns:
                raise LocalAthenaError(f"statement is not supported by the local Athena endpoint: {text[:80]}")
            outcome.columns = [(name, "varchar") for name in result.columns]
        outcome.rows += [[self._text(value) for value in row] for row in result.rows]
        self._put_results(s3, output, outcome)
        timings.record("athena: write back, mirror out, results", time.monotonic() - ran, execution.id)
        return outcome

    def _show_databases(
        self, glue: Any, s3: Any, backend: Any, execution: Any, output: str, pattern: str | None
    ) -> Outcome:
        """``SHOW DATABASES``: Glue's databases (and ``default``, which Athena's catalog always has), those
        whose whole name matches ``pattern`` (a regular expression, as Athena's) if one is given."""
        caller = getattr(execution, "caller", None)
        if caller is not None and _iam_enforced():
            catalog = f"arn:aws:glue:{backend.region_name}:{backend.account_id}:catalog"
            needed = [Needed("glue:GetDatabases", (catalog,), "is not authorized"), result_file(output)]
            authorize(backend.account_id, backend.region_name, caller, needed)
        try:
            matches = re.compile(pattern or ".*", re.IGNORECASE)
        except re.error as error:
            raise LocalAthenaError(f"SHOW DATABASES: LIKE '{pattern}' is not a regular expression: {error}") from None
        names = sorted({DEFAULT_DATABASE, *glue.databases})
        outcome = Outcome(statement_type="UTILITY", columns=[("database_name", "string")])
        outcome.rows = [[name] for name in names if matches.fullmatch(name)]
        self._put_results(s3, output, outcome)
        return outcome

    def _from_glue(
        self,
        glue: Any,
        s3: Any,
        backend: Any,
        execution: Any,
        output: str,
        name: str,
        answer: Any,
    ) -> Outcome:
        """A statement about one table answered from its Glue entry by ``answer`` (database, table, entry)
        → (columns, rows)."""
        parts = [_unquoted(part) for part in name.split(".")]
        context = str((execution.context or {}).get("Database") or DEFAULT_DATABASE).lower()
        database, table = (parts[0], parts[1]) if len(parts) == 2 else (context, parts[0])
        caller = getattr(execution, "caller", None)
        if caller is not None and _iam_enforced():
            arns = glue_table(backend.region_name, backend.account_id, database, table)
            needed = [Needed("glue:GetTable", arns, "is not authorized"), result_file(output)]
            authorize(backend.account_id, backend.region_name, caller, needed)
        found = glue.databases.get(database)
        entry = found.tables.get(table) if found is not None else None
        if entry is None:
            raise LocalAthenaError(f"FAILED: SemanticException [Error 10001]: Table not found {database}.{table}")
        columns, rows = answer(database, table, entry)
        outcome = Outcome(statement_type="UTILITY", columns=columns, rows=rows)
        self._put_results(s3, output, outcome)
        return outcome

    # -- catalog: Glue → Spark before, Spark → Glue after

    def _sync_catalog(self, glue: Any, statement: Statement) -> set[str]:
        """Make Spark's metastore hold each database and table the statement names as Glue has it; the
        buckets their locations are in."""
        buckets: set[str] = set()
        for database in sorted(statement.databases):
            spark_database = self.names.spark_database(database)
            # Athena's catalog always has ``default``; Glue gets it when a statement writes there.
            if database in glue.databases or database == DEFAULT_DATABASE:
                self.engine.session.sql(f"CREATE DATABASE IF NOT EXISTS {ddl_name(spark_database)}")
                continue
            if self.engine.session.catalog.databaseExists(spark_database):
                self.engine.execute(f"DROP DATABASE IF EXISTS {ddl_name(spark_database)} CASCADE")
                for key in [key for key in self._catalog if key[0] == database]:
                    del self._catalog[key]
            if database not in {statement.creates_database, statement.drops_database}:
                # Checked here: the engine writes a CTAS's files before it registers the table.
                raise LocalAthenaError(f"SCHEMA_NOT_FOUND: Schema '{database}' does not exist")
        for database, table in sorted(statement.tables):
            found = glue.databases.get(database)
            entry = found.tables.get(table) if found is not None else None
            fingerprint = _fingerprint(entry)
            if entry is not None:
                buckets |= _table_buckets(entry)
            key = (database, table)
            if key in self._catalog and self._catalog[key] == fingerprint:
                continue
            self._rebuild(database, table, entry)
            self._catalog[key] = fingerprint
        return buckets

    def _project_partitions(self, glue: Any, statement: Statement) -> None:
        """The partitions of each projected table the statement reads, found in the mirror (Glue holds none)."""
        for database, table in sorted(statement.tables - statement.changes):
            found = glue.databases.get(database)
            entry = found.tables.get(table) if found is not None else None
            if entry is None:
                continue
            parameters = _definition(entry).get("Parameters", {})
            if str(parameters.get("projection.enabled", "")).lower() != "true":
                continue
            specs = [
                f"PARTITION ({ddl_name(key)} = {string_literal(value)}) "
                f"LOCATION {string_literal(self.names.local_uri(uri))}"
                for key, value, uri in self._projected(f"{database}.{table}", parameters)
            ]
            name = ddl_name(self.names.spark_database(database), table)
            for start in range(0, len(specs), PARTITIONS_PER_STATEMENT):
                self.engine.session.sql(
                    f"ALTER TABLE {name} ADD IF NOT EXISTS {' '.join(specs[start : start + PARTITIONS_PER_STATEMENT])}"
                )
            if specs:
                self.engine.session.catalog.refreshTable(name)

    def _projected(self, name: str, parameters: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
        """(key, value, s3:// location) of each folder of a ``date`` projection's template in the mirror."""
        keys = {key.split(".")[1] for key in parameters if key.startswith("projection.") and key.count(".") >= 2}
        template = str(parameters.get("storage.location.template", ""))
        if len(keys) != 1 or not template:
            raise LocalAthenaError(
                f"table {name}: only one date projection with a location template is supported locally"
            )
        (key,) = keys
        kind = parameters.get(f"projection.{key}.type")
        date_format = str(parameters.get(f"projection.{key}.format", ""))
        if kind != "date" or date_format != "yyyy-MM-dd":
            raise LocalAthenaError(
                f"table {name}: projection {key} of type {kind} ({date_format}) is not supported locally"
            )
        bounds = [bound.strip() for bound in str(parameters.get(f"projection.{key}.range", "")).split(",")]
        today = datetime.datetime.now(datetime.UTC).date().isoformat()
        ends = [today if bound.upper() == "NOW" else bound for bound in bounds]
        if len(ends) != 2 or not all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", end) for end in ends):
            raise LocalAthenaError(
                f"table {name}: projection range {bounds} is not supported locally (two yyyy-MM-dd dates or NOW)"
            )
        first, last = ends
        placeholder = "${" + key + "}"
        found = S3_URI.match(template)
        if found is None or placeholder not in template:
            raise LocalAthenaError(f"table {name}: storage.location.template {template!r} is not an s3:// template")
        before, after = template.split(placeholder, 1)
        if after.strip("/"):
            raise LocalAthenaError(f"table {name}: {template!r}: only a template ending in its folder is supported")
        parent_uri, _, stem = before.rpartition("/")
        parent = Path(self.names.local_uri(parent_uri + "/").removeprefix("file://"))
        for folder in sorted(parent.glob(f"{stem}*")) if parent.is_dir() else []:
            value = folder.name.removeprefix(stem)
            if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) and first <= value <= last and any(_visible_files(folder)):
                yield key, value, f"{before}{value}/"

    def _define(self, glue: Any, statement: Statement, table_input: dict[str, Any]) -> None:
        """The table of a ``CREATE TABLE`` in Glue, as Athena registers it."""
        ((database, table),) = statement.changes
        if database not in glue.databases:  # ``default``: Athena's catalog always has it
            glue.create_database(database, {"Name": database})
        if table in glue.databases[database].tables:
            if statement.if_not_exists:
                return
            raise LocalAthenaError(f"AlreadyExistsException: Table {database}.{table} already exists")
        glue.create_table(database, table, table_input)
        self._catalog.pop((database, table), None)

    def _rebuild(self, database: str, table: str, entry: Any) -> None:
        """The Spark table made anew from the Glue table ``entry`` (dropped if ``entry`` is None)."""
        spark_database = self.names.spark_database(database)
        name = ddl_name(spark_database, table)
        if not self.engine.session.catalog.databaseExists(spark_database):
            return
        if self.engine.table_exists(spark_database, table):
            # Through the engine, which forgets what it remembered of the table (partitions, schema).
            self.engine.execute(f"DROP TABLE IF EXISTS {name}")
        if entry is None:
            return
        definition = _definition(entry)
        descriptor = definition.get("StorageDescriptor", {})
        columns = [*descriptor.get("Columns", []), *definition.get("PartitionKeys", [])]
        listed = ", ".join(f"{ddl_name(c['Name'].lower())} {c.get('Type', 'string')}" for c in columns)
        if descriptor.get("InputFormat") == SYMLINK_INPUT_FORMAT:
            # Athena reads the files its manifests list with its SerDe; so does the engine (engines.symlink).
            serde = descriptor.get("SerdeInfo", {})
            source, options = reader(
                str(serde.get("SerializationLibrary", "")),
                serde.get("Parameters", {}),
                definition.get("Parameters", {}),
            )
            where = self.names.local_uri(str(descriptor.get("Location", "")))
            self.engine.define_symlink(f"{spark_database}.{table}", SymlinkTable(listed, source, where, options))
            return
        keys = [c["Name"].lower() for c in definition.get("PartitionKeys", [])]
        using = self._using(f"{database}.{table}", definition)
        if not keys:
            # Athena reads an unpartitioned table's folder and its subfolders, all as data. Spark would
            # infer a partition column from a subfolder named k=v (stage A publishes at <root>/lakeline_run=
            # <token>/) and keep it in the table's schema, which was then written back to Glue (#36).
            using = _with_option(using, "recursiveFileLookup", "true")
        partitioned = f" PARTITIONED BY ({', '.join(ddl_name(k) for k in keys)})" if keys else ""
        location = descriptor.get("Location")
        placed = f" LOCATION {string_literal(self.names.local_uri(location))}" if location else ""
        self.engine.session.sql(f"CREATE TABLE {name} ({listed}) {using}{partitioned}{placed}")
        specs = []
        for partition in list(entry.partitions.values()):
            values = partition.partition_input.get("Values", [])
            where = partition.partition_input.get("StorageDescriptor", {}).get("Location")
            spec = ", ".join(f"{ddl_name(k)} = {string_literal(str(v))}" for k, v in zip(keys, values, strict=False))
            specs.append(
                f"PARTITION ({spec})" + (f" LOCATION {string_literal(self.names.local_uri(where))}" if where else "")
            )
        for start in range(0, len(specs), PARTITIONS_PER_STATEMENT):
            chunk = " ".join(specs[start : start + PARTITIONS_PER_STATEMENT])
            self.engine.session.sql(f"ALTER TABLE {name} ADD IF NOT EXISTS {chunk}")

    @staticmethod
    def _using(name: str, definition: dict[str, Any]) -> str:
        """The Spark data source that reads the Glue table's files as its SerDe does."""
        descriptor = definition.get("StorageDescriptor", {})
        serde = descriptor.get("SerdeInfo", {})
        library = str(serde.get("SerializationLibrary", ""))
        kind = glue_format(descriptor) or ("csv" if not library and not descriptor.get("InputFormat") else None)
        if kind in {"parquet", "orc"}:
            return f"USING {kind}"
        if kind == "json":
            parameters = serde.get("Parameters", {})
            renamed = sorted(key for key in parameters if key.startswith("mapping."))
            if renamed:
                raise LocalAthenaError(f"table {name}: SerDe properties {renamed} are not supported locally")
            # Both JSON SerDes fail a query on a line they cannot read (HIVE_CURSOR_ERROR), unless OpenX's
            # ignore.malformed.json makes such a line a row of NULLs, as Spark's PERMISSIVE mode does.
            ignored = str(parameters.get("ignore.malformed.json", "false")).lower() == "true"
            return f"USING json OPTIONS (mode '{'PERMISSIVE' if ignored else 'FAILFAST'}')"
        if kind != "csv":
            raise LocalAthenaError(
                f"table {name}: SerDe {library or descriptor.get('InputFormat')} is not supported locally"
            )
        parameters = serde.get("Parameters", {})
        lazy = not library or "lazysimpleserde" in library.lower()
        options = {"sep": glue_delimiter(descriptor) or ("\u0001" if lazy else ",")}
        quote = glue_quote(descriptor)
        options["quote"] = quote
        escape = parameters.get("escapeChar") or parameters.get("escape.delim")
        if escape:
            options["escape"] = str(escape)
        skip = str(definition.get("Parameters", {}).get("skip.header.line.count", "0"))
        if skip not in {"0", "1"}:
            raise LocalAthenaError(f"table {name}: skip.header.line.count {skip} is not supported locally (0 or 1)")
        options["header"] = "true" if skip == "1" else "false"
        if not lazy:
            # OpenCSVSerde reads every field as a string and casts it to the column's type: a field that
            # does not parse fails the query (HIVE_BAD_DATA), where LazySimpleSerDe reads it as NULL.
            options["mode"] = "FAILFAST"
        listed = ", ".join(f"{key} {string_literal(value)}" for key, value in options.items())
        return f"USING csv OPTIONS ({listed})"

    def _write_back(self, glue: Any, statement: Statement, *, succeeded: bool) -> set[str]:
        """Glue made to hold what the statement changed in Spark; the buckets of the tables it changed."""
        buckets: set[str] = set()
        if not succeeded:
            for key in statement.changes:
                self._catalog.pop(key, None)  # made again from Glue before the next query that names it
            return buckets
        if statement.creates_database and statement.creates_database not in glue.databases:
            glue.create_database(statement.creates_database, {"Name": statement.creates_database})
        if statement.drops_database and statement.drops_database in glue.databases:
            glue.delete_database(statement.drops_database)
        for database, table in sorted(statement.changes):
            spark_database = self.names.spark_database(database)
            entry = glue.databases[database].tables.get(table) if database in glue.databases else None
            if not self.engine.table_exists(spark_database, table):
                if entry is not None:
                    glue.delete_table(database, table)
                self._catalog[(database, table)] = None
                continue
            if not self._external_catalog().tableExists(spark_database, table):
                self.engine.describe_table(spark_database, table)  # registers a CTAS the engine only wrote
            table_input, partitions = self._spark_table(spark_database, table, statement.locations)
            if entry is None:
                if database not in glue.databases:
                    glue.create_database(database, {"Name": database})
                glue.create_table(database, table, table_input)
                entry = glue.get_table(database, table)
            else:
                current = _definition(entry)
                merged = _merged(current, table_input)
                if merged != current:
                    glue.update_table(database, table, merged)
            self._write_partitions(glue, database, table, entry, table_input, partitions)
            buckets |= _table_buckets(entry)
            self._catalog[(database, table)] = _fingerprint(entry)
        return buckets

    def _write_partitions(
        self,
        glue: Any,
        database: str,
        table: str,
        entry: Any,
        table_input: dict[str, Any],
        partitions: dict[tuple[str, ...], str | None],
    ) -> None:
        present = {tuple(p.partition_input.get("Values", [])): p for p in list(entry.partitions.values())}
        descriptor = {k: v for k, v in table_input["StorageDescriptor"].items() if k != "Location"}
        created, updated = [], []
        for values, location in partitions.items():
            found = present.get(values)
            part_input = {
                "Values": list(values),
                "StorageDescriptor": {**descriptor, **({"Location": location} if location else {})},
            }
            if found is None:
                created.append(part_input)
            elif str(found.partition_input.get("StorageDescriptor", {}).get("Location", "")).rstrip("/") != str(
                location or ""
            ).rstrip("/"):
                kept = dict(found.partition_input)
                kept["StorageDescriptor"] = {**kept.get("StorageDescriptor", {}), "Location": location}
                updated.append({"PartitionValueList": list(values), "PartitionInput": kept})
        deleted = [{"Values": list(values)} for values in present if values not in partitions]
        if created:
            glue.batch_create_partition(database, table, created)
        if updated:
            glue.batch_update_partition(database, table, updated)
        if deleted:
            glue.batch_delete_partition(database, table, deleted)

    def _spark_table(
        self, spark_database: str, table: str, named: list[str]
    ) -> tuple[dict[str, Any], dict[tuple[str, ...], str | None]]:
        """The Spark table as a Glue ``TableInput``, and its partitions: values → location (s3://, as
        the statement wrote it when it named it: Spark drops a trailing slash)."""

        def s3_location(option: Any) -> str | None:
            if not option.isDefined():
                return None
            location = self.names.s3_text(option.get().toString())
            return next((uri for uri in named if uri.rstrip("/") == location.rstrip("/")), location)

        session = self.engine.session
        jvm: Any = session.sparkContext._jvm
        catalog = self._external_catalog()
        found = catalog.getTable(spark_database, table)
        convert = jvm.scala.jdk.javaapi.CollectionConverters
        to_json = jvm.com.fasterxml.jackson.databind.ObjectMapper()

        def python(scala: Any) -> Any:
            # One call for a whole Scala collection: iterating one through py4j costs a call per element,
            # and its end an exception that pyspark converts (most of this method's time before).
            return json.loads(to_json.writeValueAsString(convert.asJava(scala)))

        keys = python(found.partitionColumnNames())
        columns: list[dict[str, str]] = []
        partition_keys: list[dict[str, str]] = []
        for spark_field in found.schema().fields():
            column = {"Name": spark_field.name(), "Type": spark_field.dataType().catalogString()}
            (partition_keys if spark_field.name() in keys else columns).append(column)
        storage = found.storage()
        location = s3_location(storage.locationUri())
        provider = str(found.provider().get()).lower() if found.provider().isDefined() else "hive"
        properties = python(storage.properties())
        descriptor: dict[str, Any] = {"Columns": columns, "Compressed": False}
        if location:
            descriptor["Location"] = location
        parameters = {"EXTERNAL": "TRUE"}
        if provider == "parquet":
            descriptor.update(json.loads(json.dumps(PARQUET)))
            parameters["classification"] = "parquet"
            if properties.get("compression"):
                parameters["parquet.compression"] = str(properties["compression"]).upper()
        elif provider == "orc":
            descriptor.update(json.loads(json.dumps(ORC)))
            parameters["classification"] = "orc"
        elif provider == "json":
            descriptor.update({**TEXT_FORMATS, "SerdeInfo": {"SerializationLibrary": JSON_SERDE, "Parameters": {}}})
            parameters["classification"] = "json"
        elif provider == "csv":
            delimiter = str(properties.get("sep", properties.get("delimiter", ",")))
            serde = {"SerializationLibrary": LAZY_SIMPLE, "Parameters": {"field.delim": delimiter}}
            descriptor.update({**TEXT_FORMATS, "SerdeInfo": serde})
            parameters["classification"] = "csv"
            if str(properties.get("header", "false")).lower() == "true":
                parameters["skip.header.line.count"] = "1"
        else:
            option = storage.serde()
            descriptor.update(
                {
                    "InputFormat": str(storage.inputFormat().get()) if storage.inputFormat().isDefined() else "",
                    "OutputFormat": str(storage.outputFormat().get()) if storage.outputFormat().isDefined() else "",
                    "SerdeInfo": {
                        "SerializationLibrary": str(option.get()) if option.isDefined() else LAZY_SIMPLE,
                        "Parameters": {str(k): str(v) for k, v in properties.items()},
                    },
                }
            )
            table_properties = python(found.properties())
            parameters.update({str(k): str(v) for k, v in table_properties.items() if not str(k).startswith("spark.")})
        bucketing = found.bucketSpec()
        if bucketing.isDefined():
            descriptor["NumberOfBuckets"] = int(bucketing.get().numBuckets())
            descriptor["BucketColumns"] = [str(c) for c in python(bucketing.get().bucketColumnNames())]
        table_input = {
            "Name": table,
            "TableType": "EXTERNAL_TABLE",
            "Parameters": parameters,
            "PartitionKeys": partition_keys,
            "StorageDescriptor": descriptor,
        }
        partitions: dict[tuple[str, ...], str | None] = {}
        if keys:
            for partition in convert.asJava(catalog.listPartitions(spark_database, table, jvm.scala.Option.empty())):
                spec = python(partition.spec())
                partitions[tuple(str(spec[key]) for key in keys)] = s3_location(partition.storage().locationUri())
        return table_input, partitions

    def _external_catalog(self) -> Any:
        return self.engine.session._jsparkSession.sharedState().externalCatalog()

    # -- storage: moto's S3 ↔ the mirror

    def _file(self, bucket: str, key: str) -> Path:
        return self.mirror / bucket / key

    def _pull(self, s3: Any, bucket: str) -> None:
        """Bring the bucket's objects that changed in moto's S3 into the mirror; remove what S3 lost."""
        from moto.s3.models import FakeKey

        found = s3.buckets.get(bucket)
        objects = {}
        if found is not None:
            objects = {k: v for k, v in found.keys.items() if isinstance(v, FakeKey) and not k.endswith("/")}
        for key, item in objects.items():
            path = self._file(bucket, key)
            known = self._objects.get((bucket, key))
            if known is not None and known.etag == item.etag and _same_file(path, known):
                continue
            item, value = _read_now(found, key, item)
            if item is None:  # deleted since the listing: S3 lost it, as the removal below does next time
                continue
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(value)
            except OSError as error:  # a key that is also a "folder" of other keys: no file can hold both
                logger.warning("local Athena cannot mirror s3://%s/%s: %s", bucket, key, error)
                continue
            stat = path.stat()
            self._objects[(bucket, key)] = Mirrored(item.etag, stat.st_mtime_ns, stat.st_size)
        for gone in [k for k in self._objects if k[0] == bucket and k[1] not in objects]:
            with contextlib.suppress(FileNotFoundError):
                self._file(*gone).unlink()
            del self._objects[gone]
        _prune(self.mirror / bucket, {self._file(b, k) for b, k in self._objects if b == bucket})

    def _push(self, s3: Any, bucket: str) -> None:
        """Put the files a query wrote into moto's S3; delete the objects whose files it removed."""
        from moto.s3.models import FakeKey

        root = self.mirror / bucket
        seen: set[str] = set()
        for path in _visible_files(root):
            key = path.relative_to(root).as_posix()
            seen.add(key)
            known = self._objects.get((bucket, key))
            if known is not None and _same_file(path, known):
                continue
            stat = path.stat()
            try:
                stored = s3.put_object(bucket, key, path.read_bytes())
            except Exception as error:  # no such bucket: Athena fails to write there as well
                raise LocalAthenaError(f"cannot write s3://{bucket}/{key}: {type(error).__name__}") from error
            self._objects[(bucket, key)] = Mirrored(stored.etag, stat.st_mtime_ns, stat.st_size)
        for bucket_key in [k for k in self._objects if k[0] == bucket and k[1] not in seen]:
            if self._file(*bucket_key).exists():
                continue  # a hidden file from S3, left as it is
            known = self._objects.pop(bucket_key)
            found = s3.buckets.get(bucket)
            current = found.keys.get(bucket_key[1]) if found is not None else None
            if isinstance(current, FakeKey) and current.etag == known.etag:  # not replaced meanwhile
                s3.delete_object(bucket, bucket_key[1])

    # -- results

    def _result_types(self, statement: Statement, result: QueryResult) -> list[str]:
        """Athena's type names for the result's columns, from the schema Spark gives the query."""
        try:
            schema = self.engine.session.sql(translate_statement(statement.sql).sql).schema
            kinds = [_athena_type(field.dataType.simpleString()) for field in schema.fields]
        except Exception:  # the rows' own values say as much as can be said
            kinds = []
        if len(kinds) != len(result.columns):
            kinds = [_value_type([row[i] for row in result.rows]) for i in range(len(result.columns))]
        return kinds

    def _text(self, value: Any) -> str | None:
        text = _athena_text(value)
        return None if text is None else self.names.s3_text(text) if text.startswith("file:") else text

    def _put_results(self, s3: Any, output: str, outcome: Outcome) -> None:
        found = S3_URI.match(output)
        if found is None:
            raise LocalAthenaError(f"output location {output} is not an s3:// location")
        if outcome.statement_type == "DML":
            lines = [
                ",".join("" if v is None else '"' + v.replace('"', '""') + '"' for v in row) for row in outcome.rows
            ]
        else:
            lines = ["\t".join("" if v is None else v for v in row) for row in outcome.rows]
        body = "".join(f"{line}\n" for line in lines).encode()
        try:
            s3.put_object(found.group("bucket"), found.group("key"), body)
        except Exception as error:
            raise LocalAthenaError(f"Unable to write the query results to {output}: {type(error).__name__}") from error


# --- helpers ----------------------------------------------------------------------------------------------


def _iam_enforced() -> bool:
    from moto import settings

    return bool(settings.INITIAL_NO_AUTH_ACTION_COUNT == 0)


def _needed(glue: Any, statement: Statement, region: str, account: str, output: str) -> list[Needed]:
    """What the statement makes Athena do with its caller's credentials (``athena_caller``)."""
    needed: list[Needed] = []
    changes = {
        "ctas": ("glue:CreateTable",),
        "create": ("glue:CreateTable",),
        "drop": ("glue:GetTable", "glue:DeleteTable"),
        "alter": ("glue:GetTable", "glue:UpdateTable"),
        "alter_partition": ("glue:GetTable", "glue:UpdatePartition"),
        "add_partition": ("glue:GetTable", "glue:BatchCreatePartition"),
        "drop_partition": ("glue:GetTable", "glue:BatchDeletePartition"),
        "insert": ("glue:GetTable",),
    }.get(statement.kind, ())
    for database, table in sorted(statement.tables):
        found = glue.databases.get(database)
        entry = found.tables.get(table) if found is not None else None
        definition = _definition(entry) if entry is not None else {}
        location = definition.get("StorageDescriptor", {}).get("Location")
        partitioned = bool(definition.get("PartitionKeys"))
        if (database, table) in statement.changes:
            # A table that is not there is only looked up (DROP TABLE IF EXISTS of a missing one).
            actions = changes if entry is not None or statement.kind in ("ctas", "create") else ("glue:GetTable",)
            if statement.kind == "insert" and partitioned:
                actions = (*actions, "glue:BatchCreatePartition")
            needed += changing(region, account, database, table, actions)
            if statement.kind == "insert" and location:
                needed.append(writing(location))
        elif entry is not None:
            # A projected table's partitions are computed, not read from Glue.
            projected = definition.get("Parameters", {}).get("projection.enabled") == "true"
            elsewhere = _partitions_outside(entry, location) if partitioned and not projected else set()
            needed += reading(region, account, database, table, location, partitioned and not projected, elsewhere)
    if statement.kind == "ctas" and statement.writes_to:
        needed.append(writing(statement.writes_to))
    needed.append(result_file(output))
    return needed


def _partitions_outside(entry: Any, location: str | None) -> set[str]:
    """The locations of the table's partitions that are not under its own ``location``: a partition may be
    anywhere (``ADD PARTITION ... LOCATION``), and Athena reads it there with the caller's credentials."""
    folder = location.rstrip("/") + "/" if location else None
    found = {
        str(p.partition_input.get("StorageDescriptor", {}).get("Location") or "") for p in entry.partitions.values()
    }
    return {uri for uri in found if uri and (folder is None or not (uri.rstrip("/") + "/").startswith(folder))}


def _athena_names(query: str, spark_names: list[str]) -> list[str]:
    """A query's column names as Athena gives them: an expression without an alias is ``_col<i>`` (Spark
    names it by its text, ``count(1)``) and ``"$path"`` is ``$path`` (Spark's ``input_file_name()``).
    Spark's names where the select list cannot be matched to them (a ``*``)."""
    try:
        tree = sqlglot.parse_one(query, read="athena")
    except ParseError:
        return spark_names
    while isinstance(tree, exp.SetOperation):
        tree = tree.left
    if not isinstance(tree, exp.Select):
        return spark_names
    selected = tree.expressions
    starred = any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star) for e in selected)
    if starred or len(selected) != len(spark_names):
        return spark_names
    names = []
    for index, (expression, spark_name) in enumerate(zip(selected, spark_names, strict=True)):
        if isinstance(expression, exp.Alias):
            names.append(spark_name)
        elif isinstance(expression, exp.Column):
            names.append("$path" if expression.name == "$path" else spark_name)
        else:
            names.append(f"_col{index}")
    return names


Answer = tuple[list[tuple[str, str]], list[list[str | None]]]


def _definition(entry: Any) -> dict[str, Any]:
    """The Glue table's current version (moto keeps every version of a table)."""
    found: dict[str, Any] = entry.get_version(str(entry._current_version))
    return found


def _listed_partitions(database: str, table: str, entry: Any) -> Answer:
    """``SHOW PARTITIONS``: each partition as ``key=value[/key=value]``, as Athena lists them."""
    keys = [str(column["Name"]) for column in _definition(entry).get("PartitionKeys", [])]
    if not keys:
        raise LocalAthenaError(f"FAILED: SemanticException Table {table} is not a partitioned table")
    listed = sorted(
        "/".join(f"{key}={value}" for key, value in zip(keys, p.partition_input.get("Values", []), strict=False))
        for p in list(entry.partitions.values())
    )
    return [("partition", "string")], [[name] for name in listed]


def _listed_columns(database: str, table: str, entry: Any) -> Answer:
    """``SHOW COLUMNS``: the column names, the partition columns last."""
    definition = _definition(entry)
    columns = [*definition.get("StorageDescriptor", {}).get("Columns", []), *definition.get("PartitionKeys", [])]
    return [("field", "string")], [[str(column["Name"])] for column in columns]


def _described_table(database: str, table: str, entry: Any) -> Answer:
    """``DESCRIBE``'s answer as Athena gives it (Hive's): each column, the partition columns last, then
    for a partitioned table a ``# Partition Information`` section naming them again."""
    definition = _definition(entry)
    descriptor = definition.get("StorageDescriptor", {})
    keys = definition.get("PartitionKeys", [])

    def row(column: dict[str, Any]) -> list[str | None]:
        return [str(column["Name"]), str(column.get("Type", "string")), str(column.get("Comment", ""))]

    rows = [row(column) for column in [*descriptor.get("Columns", []), *keys]]
    if keys:
        rows += [["", "", ""], ["# Partition Information", "", ""], ["# col_name", "data_type", "comment"]]
        rows += [["", "", ""], *(row(column) for column in keys)]
    return [("col_name", "string"), ("data_type", "string"), ("comment", "string")], rows


def _create_table_statement(database: str, table: str, entry: Any) -> Answer:
    """``SHOW CREATE TABLE``'s answer as Athena gives it: the table's Hive DDL from Glue, one row a line."""
    definition = _definition(entry)
    if definition.get("TableType") == "VIRTUAL_VIEW":
        raise LocalAthenaError(f"{database}.{table} is a view: use SHOW CREATE VIEW")
    descriptor = definition.get("StorageDescriptor", {})
    serde = descriptor.get("SerdeInfo", {})

    def listed(columns: list[dict[str, Any]]) -> list[str]:
        lines = []
        for column in columns:
            comment = f" COMMENT {string_literal(str(column['Comment']))}" if column.get("Comment") else ""
            lines.append(f"  {ddl_name(str(column['Name']))} {column.get('Type', 'string')}{comment}")
        return [f"{line}, " for line in lines[:-1]] + lines[-1:]

    def pairs(parameters: dict[str, Any]) -> list[str]:
        lines = [f"  {string_literal(str(k))}={string_literal(str(v))}" for k, v in sorted(parameters.items())]
        return [f"{line}, " for line in lines[:-1]] + lines[-1:]

    external = "EXTERNAL " if definition.get("TableType", "EXTERNAL_TABLE") == "EXTERNAL_TABLE" else ""
    columns = listed(descriptor.get("Columns", []))
    lines = [
        f"CREATE {external}TABLE {ddl_name(database, table)}(",
        *columns[:-1],
        f"{columns[-1]})" if columns else ")",
    ]
    keys = definition.get("PartitionKeys", [])
    if keys:
        partition_lines = listed(keys)
        lines += ["PARTITIONED BY ( ", *partition_lines[:-1], f"{partition_lines[-1]})"]
    if descriptor.get("BucketColumns"):
        bucketed = ", ".join(ddl_name(str(c)) for c in descriptor["BucketColumns"])
        lines += ["CLUSTERED BY ( ", f"  {bucketed}) ", f"INTO {int(descriptor.get('NumberOfBuckets', 1))} BUCKETS"]
    if serde.get("SerializationLibrary"):
        lines += ["ROW FORMAT SERDE ", f"  {string_literal(str(serde['SerializationLibrary']))} "]
    if serde.get("Parameters"):
        serde_lines = pairs(serde["Parameters"])
        lines += ["WITH SERDEPROPERTIES ( ", *serde_lines[:-1], f"{serde_lines[-1]}) "]
    if descriptor.get("InputFormat") or descriptor.get("OutputFormat"):
        lines += [
            "STORED AS INPUTFORMAT ",
            f"  {string_literal(str(descriptor.get('InputFormat', '')))} ",
            "OUTPUTFORMAT ",
            f"  {string_literal(str(descriptor.get('OutputFormat', '')))}",
        ]
    if descriptor.get("Location"):
        lines += ["LOCATION", f"  {string_literal(str(descriptor['Location']))}"]
    parameters = {k: v for k, v in definition.get("Parameters", {}).items() if k != "EXTERNAL"}
    if parameters:
        property_lines = pairs(parameters)
        lines += ["TBLPROPERTIES (", *property_lines[:-1], f"{property_lines[-1]})"]
    return [("createtab_stmt", "string")], [[line] for line in lines]


def _listed_buckets(glue: Any, s3: Any, statement: Statement) -> set[str]:
    """The buckets of the files the manifests of the symlink tables ``statement`` names list (mirrored
    before it runs, as those of the tables' own locations are)."""
    buckets: set[str] = set()
    for database, table in statement.tables:
        found = glue.databases.get(database)
        entry = found.tables.get(table) if found is not None else None
        descriptor = _definition(entry).get("StorageDescriptor", {}) if entry is not None else {}
        where = S3_URI.match(str(descriptor.get("Location", "")))
        if descriptor.get("InputFormat") != SYMLINK_INPUT_FORMAT or where is None:
            continue
        objects = s3.buckets.get(where.group("bucket"))
        for key, item in list(objects.keys.items()) if objects is not None else []:
            if key.startswith(where.group("key")) and not key.endswith("/"):
                listed = (_bucket(line.strip()) for line in item.value.decode().splitlines())
                buckets |= {bucket for bucket in listed if bucket}
    return buckets


def _bucket(uri: str | None) -> str | None:
    found = S3_URI.match(uri or "")
    return found.group("bucket") if found else None


def _table_buckets(entry: Any) -> set[str]:
    definition = _definition(entry)
    locations = [definition.get("StorageDescriptor", {}).get("Location")]
    locations += [
        p.partition_input.get("StorageDescriptor", {}).get("Location") for p in list(entry.partitions.values())
    ]
    return {bucket for bucket in (_bucket(location) for location in locations) if bucket}


def _fingerprint(entry: Any) -> str | None:
    """What a Glue table is, as one hash: its current definition and its partitions."""
    if entry is None:
        return None
    definition = _definition(entry)
    partitions = [p.partition_input for p in list(entry.partitions.values())]
    text = json.dumps([definition, partitions], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _merged(current: dict[str, Any], spark: dict[str, Any]) -> dict[str, Any]:
    """The Glue table input with what a statement can change in Spark taken from Spark: columns,
    partition keys, location. Its format, parameters and the rest stay as Glue has them."""
    merged: dict[str, Any] = json.loads(json.dumps(current, default=str))
    descriptor = merged.setdefault("StorageDescriptor", {})
    spark_descriptor = spark["StorageDescriptor"]
    if [c["Name"].lower() for c in descriptor.get("Columns", [])] != [c["Name"] for c in spark_descriptor["Columns"]]:
        descriptor["Columns"] = spark_descriptor["Columns"]
    if [c["Name"].lower() for c in merged.get("PartitionKeys", [])] != [c["Name"] for c in spark["PartitionKeys"]]:
        merged["PartitionKeys"] = spark["PartitionKeys"]
    if spark_descriptor.get("Location") and str(descriptor.get("Location", "")).rstrip("/") != spark_descriptor[
        "Location"
    ].rstrip("/"):
        descriptor["Location"] = spark_descriptor["Location"]
    return merged


def _with_option(using: str, key: str, value: str) -> str:
    """``USING <source> [OPTIONS (...)]`` with one option more."""
    option = f"{key} {string_literal(value)}"
    if using.endswith(")") and " OPTIONS (" in using:
        return f"{using[:-1]}, {option})"
    return f"{using} OPTIONS ({option})"


def _same_file(path: Path, known: Mirrored) -> bool:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return False
    return (stat.st_mtime_ns, stat.st_size) == (known.mtime_ns, known.size)


def _hidden(name: str) -> bool:
    """Hadoop's and Hive's hidden files: Spark's ``_SUCCESS``, ``.crc`` files, ``_temporary``."""
    return name.startswith(("_", "."))


def _visible_files(root: Path) -> Iterator[Path]:
    if not root.is_dir():
        return
    for folder, folders, files in os.walk(root):
        folders[:] = [name for name in folders if not _hidden(name)]
        for name in files:
            if not _hidden(name):
                yield Path(folder) / name


def _prune(root: Path, mirrored: set[Path]) -> None:
    """Remove what Spark left in the folders that hold no visible file any more: a prefix whose objects
    were deleted from S3 is empty there, and Spark, which refuses a CTAS into a folder with files (as
    Athena refuses a non-empty location), must find it so, not holding its own ``_SUCCESS`` and ``.crc``
    files. A file mirrored from S3 (``mirrored``, whatever its name) is S3's and stays."""
    if not root.is_dir():
        return
    for folder, _, _ in sorted(os.walk(root), key=lambda walked: -len(Path(walked[0]).parts)):
        path = Path(folder)
        if path == root or any(_visible_files(path)) or not path.is_dir():
            continue
        leftovers = [item for item in path.rglob("*") if item.is_file()]
        if any(item in mirrored for item in leftovers):
            continue
        shutil.rmtree(path, ignore_errors=True)


ATHENA_TYPES = {
    "string": "varchar",
    "int": "integer",
    "bigint": "bigint",
    "smallint": "smallint",
    "tinyint": "tinyint",
    "float": "real",
    "double": "double",
    "boolean": "boolean",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ntz": "timestamp",
    "binary": "varbinary",
    "void": "unknown",
}


def _athena_type(spark_type: str) -> str:
    base = spark_type.split("<", 1)[0].split("(", 1)[0]
    if base == "decimal":
        return spark_type
    if base == "struct":
        return "row"
    if base in {"array", "map"}:
        return base
    return ATHENA_TYPES.get(base, "varchar")


def _value_type(values: Iterable[Any]) -> str:
    for value in values:
        if value is None:
            continue
        if isinstance(value, bool):
            return "boolean"
        if isinstance(value, int):
            return "bigint"
        if isinstance(value, float):
            return "double"
        if isinstance(value, decimal.Decimal):
            return "decimal"
        if isinstance(value, datetime.datetime):
            return "timestamp"
        if isinstance(value, datetime.date):
            return "date"
        return "varchar"
    return "varchar"


def _athena_text(value: Any) -> str | None:
    """A value as Athena writes it in results (Trino's text forms, as far as they are known here)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return " ".join(f"{byte:02x}" for byte in value)
    if hasattr(value, "asDict"):  # a Spark Row: a struct
        return "{" + ", ".join(f"{k}={_athena_text(v)}" for k, v in value.asDict().items()) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_athena_text(k)}={_athena_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(str(_athena_text(v)) for v in value) + "]"
    return str(value)
