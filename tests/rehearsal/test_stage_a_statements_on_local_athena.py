"""A stage A plan, as the deployed router made it from an S3 arrival, run statement by statement on the
local Athena endpoint, in the state machine's order (#20): the raw partition is registered, the CTAS
writes the run's parquet file, the temp table is dropped, and the stage partition published in Glue
holds the arrival's rows. (The file is named to run after ``test_stage_a_router``, which counts the
executions of the stage A state machine.)"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lakeline.local.rehearsal.athena import LocalAthena
from lakeline.local.rehearsal.deploy import Deployment
from lakeline.local.rehearsal.functions import FunctionHost
from tests.rehearsal.test_local_athena import OPEN_CSV, rows, succeeded
from tests.rehearsal.test_stage_a_router import bucket

pytestmark = pytest.mark.spark

RAW_DATABASE, STAGE_DATABASE = "athena_rehearsal_raw_dev", "athena_rehearsal_dev"
KEY = "athena/rehearsal/orders/date=20240301/orders.csv"
COLUMNS = [{"Name": "order_id", "Type": "bigint"}, {"Name": "item", "Type": "string"}]


def _tables(deployment: Deployment) -> None:
    """The raw (CSV with a header line) and stage (Parquet) tables of athena/rehearsal/orders in Glue."""
    glue = deployment.client("glue")
    raw = {
        "Columns": COLUMNS,
        "Location": f"s3://{bucket(deployment, 'raw')}/athena/rehearsal/orders/",
        "InputFormat": "org.apache.hadoop.mapred.TextInputFormat",
        "OutputFormat": "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        "SerdeInfo": {"SerializationLibrary": OPEN_CSV, "Parameters": {"separatorChar": ","}},
    }
    stage = {
        "Columns": COLUMNS,
        "Location": f"s3://{bucket(deployment, 'stage')}/athena/rehearsal/orders/",
        "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
        "OutputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
        "SerdeInfo": {"SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"},
    }
    for database, descriptor, parameters in (
        (RAW_DATABASE, raw, {"skip.header.line.count": "1", "classification": "csv"}),
        (STAGE_DATABASE, stage, {"classification": "parquet"}),
    ):
        glue.create_database(DatabaseInput={"Name": database})
        glue.create_table(
            DatabaseName=database,
            TableInput={
                "Name": "orders",
                "TableType": "EXTERNAL_TABLE",
                "Parameters": parameters,
                "PartitionKeys": [{"Name": "date", "Type": "string"}],
                "StorageDescriptor": descriptor,
            },
        )


def _plan(deployment: Deployment) -> dict[str, Any]:
    sfn = deployment.client("stepfunctions")
    machine = deployment.outputs["Lakeline-dev-Pipeline"]["StageAStateMachineArn"]
    for execution in sfn.list_executions(stateMachineArn=machine)["executions"]:
        started = json.loads(sfn.describe_execution(executionArn=execution["executionArn"])["input"])
        if started["plan"]["raw_key"] == KEY:
            plan: dict[str, Any] = started["plan"]
            return plan
    raise AssertionError(f"no stage A execution for {KEY}")


def test_the_router_s_stage_a_statements_run_in_order_publish_the_arrival_s_rows(
    deployment: Deployment, functions: FunctionHost, local_athena: LocalAthena
) -> None:
    s3 = deployment.client("s3")
    _tables(deployment)
    s3.put_object(Bucket=bucket(deployment, "raw"), Key=KEY, Body=b"order_id,item\n7,tea\n8,jam\n")
    routed = [
        result for name, event, result in functions.invocations if "-StageARouter" in name and KEY in json.dumps(event)
    ]
    assert routed == [{"batchItemFailures": []}], routed
    plan = _plan(deployment)

    # Where the state machine's Athena tasks put their results: the deployed results bucket.
    output = f"s3://{bucket(deployment, 'athenaresults')}/athena/"
    for statement in plan["statements"]:
        execution = succeeded(deployment, statement, output=output)
        assert execution["ResultConfiguration"]["OutputLocation"].startswith(output)

    glue = deployment.client("glue")
    (raw_partition,) = glue.get_partitions(DatabaseName=RAW_DATABASE, TableName="orders")["Partitions"]
    assert raw_partition["StorageDescriptor"]["Location"] == plan["raw_partition_location"]
    (stage_partition,) = glue.get_partitions(DatabaseName=STAGE_DATABASE, TableName="orders")["Partitions"]
    assert stage_partition["Values"] == ["20240301"]
    assert stage_partition["StorageDescriptor"]["Location"] == plan["target_location"]
    with pytest.raises(glue.exceptions.EntityNotFoundException):
        glue.get_table(DatabaseName=STAGE_DATABASE, Name=plan["temp_table"])
    stage_bucket = bucket(deployment, "stage")
    written = s3.list_objects_v2(
        Bucket=stage_bucket, Prefix=plan["target_location"].removeprefix(f"s3://{stage_bucket}/")
    )
    files = [item["Key"] for item in written["Contents"]]
    assert len(files) == plan["bucket_count"] and all(key.endswith(".parquet") for key in files), files
    select = f"SELECT order_id, item FROM {STAGE_DATABASE}.orders WHERE date = '20240301' ORDER BY order_id"
    found = succeeded(deployment, select, output=output)
    assert rows(deployment, found) == [["order_id", "item"], ["7", "tea"], ["8", "jam"]]
