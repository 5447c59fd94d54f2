"""The OpenLineage events table: its one definition (Glue, Athena DDL, Spark) against real events, and
the column lineage query bound to a table and an output."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlglot
from openlineage.client.event_v2 import RunState

from lakeline.catalog_json import CatalogFile
from lakeline.errors import InvalidInputError
from lakeline.lineage.openlineage.config import OpenLineageSettings, RunReference
from lakeline.lineage.openlineage.events import event_to_dict, run_event, sql_step_run
from lakeline.lineage.openlineage.table import (
    COLUMN_LINEAGE_QUERY,
    EVENT_COLUMNS,
    Array,
    FieldType,
    StringMap,
    Struct,
    bind_column_lineage_query,
    events_athena_ddl,
    events_columns,
    events_glue_table_input,
    events_spark_ddl,
)

DATA = Path(__file__).parent / "data"
AT = datetime(2024, 1, 20, 6, 30, tzinfo=UTC)
SQL = (
    "INSERT INTO mart.customer_totals SELECT o.customer_id, c.region, SUM(o.amount), COUNT(*), o.dt "
    "FROM sales.orders o JOIN sales.customers c ON o.customer_id = c.customer_id "
    "WHERE o.status = 'paid' GROUP BY o.customer_id, c.region, o.dt"
)


def real_events() -> list[dict[str, Any]]:
    """A COMPLETE and a FAIL event with every facet Lakeline fills (parent with root, engine, SQL, error)."""
    settings = OpenLineageSettings(
        namespace="lakeline-dev",
        dataset_namespace="awsathena://athena.eu-west-1.amazonaws.com",
        parent=RunReference("lakeline-dev", "stage_b.mart.customer_totals", "01930000-0000-7000-8000-000000000001"),
        root=RunReference("lakeline-dev", "pipeline", "01930000-0000-7000-8000-000000000002"),
    )
    step = sql_step_run(
        SQL,
        catalog=CatalogFile.load(DATA / "column_lineage_catalog.json"),
        job_name="stage_b.mart.customer_totals.step1",
        run_id="01930000-0000-7000-8000-000000000003",
        settings=settings,
        engine="athena",
        engine_version="3",
    )
    return [
        event_to_dict(run_event(step, RunState.COMPLETE, at=AT)),
        event_to_dict(run_event(step, RunState.FAIL, at=AT, error="boom", stack_trace="Traceback ...")),
    ]


def missing_fields(kind: FieldType, value: Any, path: str) -> set[str]:
    """Fields of ``kind`` that ``value`` lacks, and values of another type than declared."""
    if isinstance(kind, Struct):
        assert isinstance(value, dict), f"{path} is {value!r}, not an object"
        found: set[str] = set()
        for name, field in kind.fields:
            if name not in value:
                found.add(f"{path}.{name}")
            else:
                found |= missing_fields(field, value[name], f"{path}.{name}")
        return found
    if isinstance(kind, Array):
        assert isinstance(value, list), f"{path} is {value!r}, not an array"
        return {name for item in value for name in missing_fields(kind.element, item, f"{path}[]")}
    if isinstance(kind, StringMap):
        assert isinstance(value, dict), f"{path} is {value!r}, not an object"
        return {name for item in value.values() for name in missing_fields(kind.value, item, f"{path}{{}}")}
    assert isinstance(value, bool if kind == "boolean" else str), f"{path} is {value!r}, not {kind}"
    return set()


def test_every_declared_field_is_one_that_lakeline_events_carry() -> None:
    events = real_events()
    missing = [missing_fields(Struct(EVENT_COLUMNS), event, "event") for event in events]
    assert set.intersection(*missing) == set()
    # What only some events carry: the error on FAIL.
    assert missing[0] == {"event.run.facets.errorMessage"}
    assert missing[1] == set()


def test_glue_and_athena_types_are_lowercase_and_spark_keeps_the_events_names() -> None:
    columns = dict(events_columns())
    assert list(columns) == ["eventtype", "eventtime", "producer", "schemaurl", "run", "job", "inputs", "outputs"]
    assert columns["run"].startswith("struct<runid:string,facets:struct<parent:struct<run:struct<runid:string>")
    assert "errormessage:struct<message:string,programminglanguage:string,stacktrace:string>" in columns["run"]
    assert "sql:struct<query:string,dialect:string>" in columns["job"]
    lineage = (
        "columnlineage:struct<fields:map<string,struct<inputfields:array<struct<namespace:string,name:string,"
        "field:string,transformations:array<struct<type:string,subtype:string,masking:boolean>>>>>>,"
    )
    assert lineage in columns["outputs"]
    assert all(kind == kind.lower() for kind in columns.values())
    spark = dict(events_columns(lowercase=False))
    assert "eventType" in spark and "columnLineage:struct<fields:map<string,struct<inputFields:" in spark["outputs"]


def test_glue_definition_projects_dt_partitions_of_the_events_folder() -> None:
    table = events_glue_table_input("s3://archive-bucket/openlineage")
    assert table["Name"] == "openlineage_events"
    parameters = table["Parameters"]
    assert parameters["projection.enabled"] == "true"
    assert parameters["projection.dt.type"] == "date"
    assert parameters["storage.location.template"] == "s3://archive-bucket/openlineage/dt=${dt}/"
    assert table["PartitionKeys"] == [{"Name": "dt", "Type": "string"}]
    descriptor = table["StorageDescriptor"]
    assert descriptor["Location"] == "s3://archive-bucket/openlineage/"
    assert descriptor["SerdeInfo"]["SerializationLibrary"] == "org.openx.data.jsonserde.JsonSerDe"
    assert [c["Name"] for c in descriptor["Columns"]] == [name for name, _ in events_columns()]
    with pytest.raises(InvalidInputError):
        events_glue_table_input("s3://archive-bucket/openlineage/", table="Events; DROP")
    with pytest.raises(ValueError, match="must be s3://"):
        events_glue_table_input("archive-bucket/openlineage/")


def test_athena_and_spark_ddl_are_the_same_table() -> None:
    ddl = events_athena_ddl("lineage", "openlineage_events", "s3://archive-bucket/openlineage/")
    assert ddl.startswith("CREATE EXTERNAL TABLE IF NOT EXISTS `lineage`.`openlineage_events` (\n  `eventtype` string,")
    assert "PARTITIONED BY (`dt` string)" in ddl
    assert "'storage.location.template'='s3://archive-bucket/openlineage/dt=${dt}/'" in ddl
    sqlglot.parse_one(ddl, read="athena")  # valid Athena DDL as far as sqlglot can tell
    spark = events_spark_ddl("db", "events", "file:///tmp/events")
    assert spark.startswith("CREATE TABLE `db`.`events` (`eventType` string, `eventTime` string,")
    assert spark.endswith("USING json PARTITIONED BY (`dt`) LOCATION 'file:///tmp/events/'")


def test_the_column_lineage_query_is_bound_to_a_table_and_an_output() -> None:
    sql = COLUMN_LINEAGE_QUERY.read_text()
    bound = bind_column_lineage_query(sql, "mart.customer_totals", database="audit", table="events_v2")
    assert 'FROM "audit"."events_v2" CROSS JOIN UNNEST(outputs)' in bound
    assert "REPLACE(written.name, 'AwsDataCatalog.', '') = 'mart.customer_totals'" in bound
    assert "?" not in bound.split("*/")[-1]
    with pytest.raises(InvalidInputError, match="output dataset"):
        bind_column_lineage_query(sql, "mart.t' OR '1'='1", database="audit")
    with pytest.raises(InvalidInputError, match=r"database\.table"):
        bind_column_lineage_query(sql, "customer_totals", database="audit")
    with pytest.raises(InvalidInputError, match="events database"):
        bind_column_lineage_query(sql, "mart.customer_totals", database="Audit")
    with pytest.raises(InvalidInputError, match="has 0 '\\?' for one value"):
        bind_column_lineage_query("SELECT 1 FROM openlineage_events", "mart.customer_totals", database="audit")
