"""The archive's Glue table and the UNNEST query on Athena (pyathena against moto's Athena)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws, settings
from moto.athena.models import QueryResults, athena_backends
from moto.core import DEFAULT_ACCOUNT_ID
from typer.testing import CliRunner

from lakeline.cli import app
from lakeline.errors import ConfigError
from lakeline.lineage.records.archive_table import crawler_input, glue_table_input
from lakeline.lineage.records.query import AthenaTarget, load_query, query_athena
from tests.handlers.test_lineage_support import REGION

COLUMNS = ["record_id", "root_id", "status", "action_taken", "recordedAt", "storage_location"]


@pytest.fixture
def aws() -> Iterator[None]:
    if settings.TEST_SERVER_MODE:  # pragma: no cover - the suite runs in-process
        pytest.skip("canned Athena results are set on the in-process backend")
    with mock_aws():
        boto3.client("s3", region_name=REGION).create_bucket(Bucket="athena-results")
        yield


def can_results(rows: list[list[str]]) -> None:
    # ColumnInfo as Athena returns it for this query (Trino types, precision of a varchar is its bound).
    column_info = [
        {"CatalogName": "hive", "SchemaName": "", "TableName": "", "Name": name, "Label": name,
         "Type": "timestamp" if name == "recordedAt" else "varchar",
         "Precision": 3 if name == "recordedAt" else 2147483647, "Scale": 0,
         "Nullable": "UNKNOWN", "CaseSensitive": name != "recordedAt"}
        for name in COLUMNS
    ]  # fmt: skip
    data = [{"Data": [{"VarCharValue": value} for value in row]} for row in [COLUMNS, *rows]]
    athena_backends[DEFAULT_ACCOUNT_ID][REGION].query_results_queue.append(
        QueryResults(rows=data, column_info=column_info)
    )


def test_the_glue_table_and_the_optional_crawler_are_accepted_by_glue(aws: None) -> None:
    glue = boto3.client("glue", region_name=REGION)
    glue.create_database(DatabaseInput={"Name": "lineage"})
    glue.create_table(DatabaseName="lineage", TableInput=glue_table_input("lineage_archive", "s3://archive/lineage/"))
    table = glue.get_table(DatabaseName="lineage", Name="lineage_archive")["Table"]
    assert table["Parameters"]["projection.dt.range"] == "2020-01-01,NOW"
    assert [c["Name"] for c in table["StorageDescriptor"]["Columns"]] == ["record_id", "root_id", "status", "lineage"]
    glue.create_crawler(
        **crawler_input("lineage-daily", "arn:aws:iam::123456789012:role/c", "lineage", "s3://archive/lineage/")
    )
    assert glue.get_crawler(Name="lineage-daily")["Crawler"]["Schedule"]["ScheduleExpression"] == "cron(0 1 * * ? *)"


def test_the_query_runs_through_pyathena_on_the_bound_table(aws: None) -> None:
    can_results([["c1", "root-1", "complete", "RAW_DATA_INPUT", "2026-11-22 09:00:00.000", "s3://lake/raw"]])
    target = AthenaTarget(
        s3_staging_dir="s3://athena-results/q/", region_name=REGION, database="audit", table="archive"
    )
    result = query_athena(load_query(), target)
    assert result.columns == COLUMNS
    assert [row[:4] for row in result.rows] == [("c1", "root-1", "complete", "RAW_DATA_INPUT")]
    athena = boto3.client("athena", region_name=REGION)
    execution = athena.get_query_execution(QueryExecutionId=result.query_id)["QueryExecution"]
    assert 'FROM "audit"."archive" CROSS JOIN UNNEST(lineage) WITH ORDINALITY' in execution["Query"]
    assert execution["QueryExecutionContext"]["Database"] == "audit"


def test_athena_needs_somewhere_to_put_results(aws: None) -> None:
    with pytest.raises(ConfigError, match="result location"):
        query_athena("SELECT 1", AthenaTarget(region_name=REGION))


def test_the_cli_query_on_athena_prints_the_rows(aws: None) -> None:
    can_results([["c9", "root-9", "unterminated", "PROFILE_COMPLETE", "2026-11-22 09:00:00.000", "s3://lake/p"]])
    result = CliRunner().invoke(
        app,
        ["lineage", "query", "--engine", "athena", "--s3-staging-dir", "s3://athena-results/q/",
         "--region", REGION, "--database", "audit", "--table", "archive", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert (row["record_id"], row["status"]) == ("c9", "unterminated")
    bad = CliRunner().invoke(app, ["lineage", "query", "--engine", "athena", "--region", REGION, "--table", "Bad-Name"])
    assert bad.exit_code == 2 and "is not a valid name" in bad.stderr
