"""The quality function (``lambdas/quality``, #41) against moto: the plan the stage A router makes for a table with
checks, its version's manifest and report beside the run, the checks' queries in the workgroup, a warn that
passes the task and a block that fails it. moto runs no SQL: the rules' one fused query (both are counted
rules) gets a canned row of ``(metric, passed)`` for each, a sample query its rows, so what is tested is the
function's calls and what it does with the answers (the SQL itself runs on Spark in
tests/reliability/test_quality_gates.py and on the local Athena in tests/rehearsal)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.athena.models import QueryResults, athena_backends
from moto.core import DEFAULT_ACCOUNT_ID

from lambdas.quality import handler as quality
from stage_end.quality import QualityBlocked, report_location
from tests.handlers.settings_file import use_table_settings
from tests.handlers.test_stage_a_handlers import REGION, aws, clear_caches, plan_for  # noqa: F401  (aws: a fixture)
from tests.lambda_context import LambdaContextStub

CONTEXT = LambdaContextStub()
STAGE = ("engineering_mysql_dev", "customers")
CHECKS = [
    {"rule": 'IsComplete "customer_id"', "severity": "block"},
    {"rule": "RowCount > 10", "severity": "warn"},
]
FUSED = ("metric_0", "passed_0", "metric_1", "passed_1")  # both rules measured by one query


@pytest.fixture
def checked(
    aws: dict[str, Any],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[dict[str, Any]]:
    """The stage A fixture with checks on the table (in the router's settings file, as the code asset has it), a
    workgroup for the quality function, and the stage table stored as Parquet (what the router's CTAS makes)."""
    use_table_settings(monkeypatch, tmp_path, {".".join(STAGE): {"bucket_count": 3, "checks": CHECKS}})
    monkeypatch.setenv("ATHENA_WORKGROUP", "lakeline")
    athena = boto3.client("athena", region_name=REGION)
    athena.create_work_group(Name="lakeline", Configuration={"ResultConfiguration": {"OutputLocation": "s3://r/"}})
    clear_caches()
    quality.runtime.cache_clear()
    plan = plan_for(aws)
    glue = boto3.client("glue", region_name=REGION)
    if STAGE[0] not in {d["Name"] for d in glue.get_databases()["DatabaseList"]}:
        glue.create_database(DatabaseInput={"Name": STAGE[0]})
    parquet = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
    descriptor = {
        "Columns": [{"Name": "customer_id", "Type": "bigint"}, {"Name": "name", "Type": "string"}],
        "SerdeInfo": {"SerializationLibrary": parquet},
        "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    }
    partition_keys = [{"Name": "date", "Type": "string"}]
    table: Any = {"Name": STAGE[1], "StorageDescriptor": descriptor, "PartitionKeys": partition_keys}
    try:
        glue.update_table(DatabaseName=STAGE[0], TableInput=table)
    except glue.exceptions.EntityNotFoundException:
        glue.create_table(DatabaseName=STAGE[0], TableInput=table)
    written = plan["target_location"].removeprefix("s3://stage-bucket/") + "part-00000.parquet"
    boto3.client("s3", region_name=REGION).put_object(Bucket="stage-bucket", Key=written, Body=b"x")
    yield {**aws, "plan": plan, "athena": athena, "written": written}
    quality.runtime.cache_clear()


def answers(*rows: tuple[str | None, ...], columns: tuple[str, ...] = ("metric", "passed")) -> None:
    """The next queries' results, in order: moto hands one to each query it runs, DDL too (``ddl``)."""
    info = [{"Name": c, "Type": "varchar", "CatalogName": "c", "SchemaName": "s", "TableName": "t"} for c in columns]
    header = {"Data": [{"VarCharValue": c} for c in columns]}
    for row in rows:
        data = [header, {"Data": [{"VarCharValue": v} if v is not None else {} for v in row]}]
        athena_backends[DEFAULT_ACCOUNT_ID][REGION].query_results_queue.append(
            QueryResults(rows=data, column_info=info)
        )


def ddl() -> None:
    """A DROP or CREATE's (empty) turn in moto's queue of results."""
    athena_backends[DEFAULT_ACCOUNT_ID][REGION].query_results_queue.append(QueryResults(rows=[], column_info=[]))


def queries(athena: Any) -> list[dict[str, Any]]:
    ids = athena.list_query_executions(WorkGroup="lakeline")["QueryExecutionIds"]
    return [athena.get_query_execution(QueryExecutionId=i)["QueryExecution"] for i in ids]


def report(plan: dict[str, Any]) -> dict[str, Any]:
    key = report_location(plan["target_location"]).removeprefix("s3://stage-bucket/")
    body = boto3.client("s3", region_name=REGION).get_object(Bucket="stage-bucket", Key=key)["Body"].read()
    return dict(json.loads(body))


def test_the_router_puts_the_tables_checks_in_the_plan(checked: dict[str, Any]) -> None:
    gate = checked["plan"]["quality"]
    assert gate["rules"] == CHECKS
    assert (gate["database"], gate["table"], gate["partition"]) == (*STAGE, {"date": "20220120"})


def test_a_failed_warn_rule_passes_the_task_and_the_report_is_kept_beside_the_run(checked: dict[str, Any]) -> None:
    plan = checked["plan"]
    ddl()  # the temp table's DROP (a retried step's leftover)
    ddl()  # and its CREATE
    answers(("1.0", "1", "1", "0"), columns=FUSED)  # every customer_id present; one row, not more than 10
    ddl()
    result = quality.handler({"stage": "A", "plan": plan}, CONTEXT)
    table = "engineering_mysql_dev.customers (date=20220120)"
    assert result == {"table": table, "checks": 2, "warned": ["RowCount > 10"]}
    kept = report(plan)
    assert kept["blocked"] is False
    assert [(r["rule"], r["passed"], r["metric"]) for r in kept["results"]] == [
        ('IsComplete "customer_id"', True, 1.0),
        ("RowCount > 10", False, 1.0),
    ]
    # The temp table over the version's manifest, made in the workgroup, in the stage database, and dropped.
    ran = queries(checked["athena"])
    temp = f"{plan['quality']['quality_table']}"
    made = [q for q in ran if q["Query"].upper().startswith("CREATE") and temp in q["Query"]]
    dropped = [q for q in ran if q["Query"].upper().startswith("DROP") and temp in q["Query"]]
    assert len(made) == 1 and len(dropped) == 2  # before (a retried step's leftover) and after
    assert len(ran) == 4, "and the two rules' one query"
    assert all(q["QueryExecutionContext"]["Database"] == STAGE[0] for q in ran)
    manifest = [
        o["Key"]
        for o in boto3.client("s3", region_name=REGION).list_objects_v2(Bucket="stage-bucket")["Contents"]
        if o["Key"].endswith("manifest") and "quality" not in o["Key"]
    ]
    body = "".join(
        boto3.client("s3", region_name=REGION).get_object(Bucket="stage-bucket", Key=k)["Body"].read().decode()
        for k in manifest
    )
    assert f"s3://stage-bucket/{checked['written']}" in body


def test_a_failed_block_rule_fails_the_task_with_the_rule_and_its_rows(checked: dict[str, Any]) -> None:
    plan = checked["plan"]
    # customer_id NULL in half the rows; its failing row; the warn rule's answer.
    ddl()
    ddl()
    answers(("0.5", "0", "2", "0"), columns=FUSED)
    answers((None, "ann"), columns=("customer_id", "name"))
    ddl()
    with pytest.raises(QualityBlocked) as blocked:
        quality.handler({"stage": "A", "plan": plan}, CONTEXT)
    message = str(blocked.value)
    assert "rule 'IsComplete \"customer_id\"' failed (metric 0.5)" in message
    assert '"name":"ann"' in message
    kept = report(plan)
    assert kept["blocked"] is True
    assert kept["results"][0]["sample"] == [{"customer_id": None, "name": "ann"}]


def test_a_plan_without_checks_is_refused(checked: dict[str, Any]) -> None:
    with pytest.raises(Exception, match="has no checks"):
        quality.handler({"stage": "A", "plan": {**checked["plan"], "quality": None}}, CONTEXT)
