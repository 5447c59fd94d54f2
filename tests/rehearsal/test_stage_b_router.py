"""The stage B router as deployed: a finished partition's message on queue B runs the bundled router,
which reads the dependency item from the deployed table, the step's SQL file from the artifacts bucket
(where the deployment put athena_queries/) and the catalog, and starts one stage B execution (#20)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from boto3.dynamodb.types import TypeSerializer

from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.functions import FunctionHost

ITEMS = Path(__file__).parents[2] / "examples" / "demo" / "dependencies.json"
SOURCE, TARGET = "engineering_mysql_dev.customers", "engineering_analytics_dev.customers_by_country"


def _ensure_table(glue: Any, name: str, columns: list[tuple[str, str]], location: str) -> None:
    database, table = name.split(".")
    with contextlib.suppress(glue.exceptions.AlreadyExistsException):
        glue.create_database(DatabaseInput={"Name": database})
    with contextlib.suppress(glue.exceptions.AlreadyExistsException):
        glue.create_table(
            DatabaseName=database,
            TableInput={
                "Name": table,
                "StorageDescriptor": {"Columns": [{"Name": n, "Type": t} for n, t in columns], "Location": location},
                "PartitionKeys": [{"Name": "date", "Type": "string"}],
            },
        )


def test_a_message_on_queue_b_starts_one_stage_b_execution_with_the_deployed_sql(
    deployment: Deployment, functions: FunctionHost
) -> None:
    outputs = deployment.outputs["Lakeline-dev-Pipeline"]
    serializer = TypeSerializer()
    item = json.loads(ITEMS.read_text())[0]
    deployment.client("dynamodb").put_item(
        TableName=outputs["DependenciesTable"], Item={k: serializer.serialize(v) for k, v in item.items()}
    )
    glue = deployment.client("glue")
    _ensure_table(glue, SOURCE, [("customer_id", "bigint"), ("country", "string"), ("lifetime_value", "double")],
                  "s3://stage/engineering/mysql/customers/")  # fmt: skip
    _ensure_table(glue, TARGET, [("country", "string"), ("customers", "bigint"), ("lifetime_value", "double")],
                  "s3://analytics/customers_by_country/")  # fmt: skip
    message = {
        "target_dataset": TARGET,
        "partition": {"date": "20220120"},
        "trigger": {"table": SOURCE, "partition": {"date": "20220120"}, "run": "20220120t000000000000_0123456789"},
        "usage": "overwrite",
    }
    deployment.client("sqs").send_message(QueueUrl=outputs["StageBQueueUrl"], MessageBody=json.dumps(message))
    functions.settle()  # the queue's pollers deliver apart from the send
    runs = [result for name, _, result in functions.invocations if "-StageBRouter" in name]
    assert runs and runs[-1] == {"batchItemFailures": []}, runs[-1:]
    sfn = deployment.client("stepfunctions")
    plans = [
        json.loads(sfn.describe_execution(executionArn=execution["executionArn"])["input"])["plan"]
        for execution in sfn.list_executions(stateMachineArn=outputs["StageBStateMachineArn"])["executions"]
    ]
    (plan,) = [plan for plan in plans if plan["target_table"] == "customers_by_country"]
    (step,) = plan["steps"]
    assert step["db"] == "engineering_analytics_dev"
    assert "WHERE \"date\" = '20220120'" in step["sql"] and "$day" not in step["sql"]
