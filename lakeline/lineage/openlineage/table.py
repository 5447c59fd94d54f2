"""The table over the stored OpenLineage events: one definition for Glue (CDK), Athena DDL and local Spark.

The stage functions keep every RunEvent they emit as one JSON line per object
(``<archive bucket>/openlineage/dt=YYYY-MM-DD/<runId>.<EVENTTYPE>.json``, see ``archive``). The table
``openlineage_events`` reads them with the OpenX JSON SerDe and partition projection on ``dt``, exactly like
the lineage archive's table (``archive_table``), so Athena finds new days without a crawler.

Its columns are the parts of a RunEvent that Lakeline fills (``openlineage_events.run_event``): the run with
its ``parent`` (and ``root``), ``processing_engine`` and ``errorMessage`` facets; the job with its ``sql`` and
``jobType`` facets; inputs with their ``schema``; outputs with ``schema`` and ``columnLineage``, whose
``fields`` is a map from output column to its input fields and their transformations. Keys the table does
not name (``_producer``, ``_schemaURL``, ...) are skipped by the reader.

Struct fields are lowercase in the Glue/Athena type (Hive lowercases them; the SerDe matches keys
case-insensitively); Spark's JSON reader matches keys as written, so its table keeps the events' camelCase
(``runId``, ``inputFields``) and queries still name them in lowercase, as Spark resolves names case-insensitively.

``athena_queries/lineage/openlineage_column_lineage.sql`` lists an output table's column lineage from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakeline.lineage.records.archive_table import LINEAGE_DATABASE, PROJECTION_START, JsonTable
from lakeline.lineage.records.query import QUERY_FOLDER, bind_parameters, point_table_at
from lakeline.names import check_identifier, check_qualified_table

if TYPE_CHECKING:
    from lakeline.engines.spark import SparkEngine

DEFAULT_EVENTS_TABLE = "openlineage_events"
COLUMN_LINEAGE_QUERY = QUERY_FOLDER / "openlineage_column_lineage.sql"


@dataclass(frozen=True)
class Struct:
    fields: tuple[tuple[str, FieldType], ...]


@dataclass(frozen=True)
class Array:
    element: FieldType


@dataclass(frozen=True)
class StringMap:
    """A JSON object whose keys are data (column names), not field names."""

    value: FieldType


FieldType = str | Struct | Array | StringMap


def render_type(kind: FieldType, *, lowercase: bool) -> str:
    """The Hive type (Glue, Athena DDL, Spark DDL) of ``kind``; struct field names lowercased or as written."""
    if isinstance(kind, str):
        return kind
    if isinstance(kind, Array):
        return f"array<{render_type(kind.element, lowercase=lowercase)}>"
    if isinstance(kind, StringMap):
        return f"map<string,{render_type(kind.value, lowercase=lowercase)}>"
    fields = ",".join(
        f"{name.lower() if lowercase else name}:{render_type(field, lowercase=lowercase)}"
        for name, field in kind.fields
    )
    return f"struct<{fields}>"


def _strings(*names: str) -> Struct:
    return Struct(tuple((name, "string") for name in names))


TRANSFORMATION = Struct((("type", "string"), ("subtype", "string"), ("masking", "boolean")))
INPUT_FIELD = Struct(
    (("namespace", "string"), ("name", "string"), ("field", "string"), ("transformations", Array(TRANSFORMATION)))
)
RUN_OF_JOB = Struct((("run", _strings("runId")), ("job", _strings("namespace", "name"))))
PARENT = Struct((*RUN_OF_JOB.fields, ("root", RUN_OF_JOB)))
SCHEMA = Struct((("fields", Array(_strings("name", "type"))),))
COLUMN_LINEAGE = Struct(
    (
        ("fields", StringMap(Struct((("inputFields", Array(INPUT_FIELD)),)))),
        ("dataset", Array(INPUT_FIELD)),
    )
)
RUN = Struct(
    (
        ("runId", "string"),
        (
            "facets",
            Struct(
                (
                    ("parent", PARENT),
                    ("processing_engine", _strings("name", "version")),
                    ("errorMessage", _strings("message", "programmingLanguage", "stackTrace")),
                )
            ),
        ),
    )
)
JOB = Struct(
    (
        ("namespace", "string"),
        ("name", "string"),
        (
            "facets",
            Struct(
                (
                    ("sql", _strings("query", "dialect")),
                    ("jobType", _strings("processingType", "integration", "jobType")),
                )
            ),
        ),
    )
)
INPUT = Struct((("namespace", "string"), ("name", "string"), ("facets", Struct((("schema", SCHEMA),)))))
OUTPUT = Struct(
    (
        ("namespace", "string"),
        ("name", "string"),
        ("facets", Struct((("schema", SCHEMA), ("columnLineage", COLUMN_LINEAGE)))),
    )
)
EVENT_COLUMNS: tuple[tuple[str, FieldType], ...] = (
    ("eventType", "string"),
    ("eventTime", "string"),  # ISO 8601 with its offset: from_iso8601_timestamp(eventtime) in Athena
    ("producer", "string"),
    ("schemaURL", "string"),
    ("run", RUN),
    ("job", JOB),
    ("inputs", Array(INPUT)),
    ("outputs", Array(OUTPUT)),
)


def events_columns(*, lowercase: bool = True) -> list[tuple[str, str]]:
    """(name, Hive type) of each column; lowercase for Glue and Athena, as the events write them for Spark."""
    return [
        (name.lower() if lowercase else name, render_type(kind, lowercase=lowercase)) for name, kind in EVENT_COLUMNS
    ]


EVENTS_TABLE = JsonTable(
    "events",
    "Lakeline OpenLineage RunEvents of stage A and stage B steps: one JSON object per event",
    events_columns,
)


def events_glue_table_input(
    location: str, *, table: str = DEFAULT_EVENTS_TABLE, start: str = PROJECTION_START
) -> dict[str, Any]:
    """``TableInput`` for Glue ``CreateTable`` (and the CDK ``CfnTable``) over the events folder."""
    return EVENTS_TABLE.glue_table_input(table, location, start=start)


events_athena_ddl = EVENTS_TABLE.athena_ddl
events_spark_ddl = EVENTS_TABLE.spark_ddl


def register_local_events(
    engine: SparkEngine, events_dir: Path, database: str, table: str = DEFAULT_EVENTS_TABLE
) -> None:
    """(Re)create the Spark table over a local events folder and pick up its ``dt=`` partitions."""
    EVENTS_TABLE.register_local(engine, events_dir, database, table)


def bind_column_lineage_query(
    sql: str, output_dataset: str, *, database: str, table: str = DEFAULT_EVENTS_TABLE
) -> str:
    """The column lineage query for ``output_dataset`` (``database.table``) over ``database.table``: the
    query's ``?`` (Athena's execution parameter) becomes the checked name, its events table is qualified."""
    check_qualified_table(output_dataset, "output dataset")
    check_identifier(database, "events database")
    check_identifier(table, "events table")
    statement = bind_parameters(sql, "column lineage query", {"the output dataset": output_dataset})
    point_table_at(statement, (LINEAGE_DATABASE, DEFAULT_EVENTS_TABLE), database, table)
    return statement.sql("athena")
