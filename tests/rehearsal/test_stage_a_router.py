"""The stage A router as deployed: its bundled asset (not the repository's sources), with the environment
its template gives it, invoked by the SQS event source mapping of queue A with what the EventBridge rule
delivered from an S3 arrival (#20), which its pollers deliver apart from the put (``FunctionHost.settle`` waits for
them). The state machine it starts is not run yet: that is the next part."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.functions import FunctionHost
from tests.rehearsal.support import bucket, parked

COLUMNS = [("customer_id", "bigint"), ("name", "string")]


def router_runs(functions: FunctionHost) -> list[Any]:
    return [result for name, _, result in functions.invocations if "-StageARouter" in name]


def test_a_key_that_is_not_a_raw_key_is_parked_with_its_reason(deployment: Deployment, functions: FunctionHost) -> None:
    deployment.client("s3").put_object(Bucket=bucket(deployment, "raw"), Key="badkey.csv", Body=b"x\n")
    functions.settle()
    assert parked(deployment)["badkey.csv"].startswith("raw object key 'badkey.csv' rejected: expected <team>/")
    assert router_runs(functions)[-1] == {"batchItemFailures": []}


def test_an_arrival_for_a_table_not_in_the_catalog_is_parked_naming_it(
    deployment: Deployment, functions: FunctionHost
) -> None:
    key = "sales/pos/orders/date=20240301/a.csv"
    deployment.client("s3").put_object(Bucket=bucket(deployment, "raw"), Key=key, Body=b"id\n1\n")
    functions.settle()
    assert parked(deployment)[key] == f"{key}: no raw table sales_pos_raw_dev.orders in the catalog"


@pytest.fixture(scope="module")
def customers(deployment: Deployment) -> str:
    """The raw and stage tables of engineering/mysql/customers, created in the Glue catalog as a team does."""
    glue = deployment.client("glue")
    for database, kind in (("engineering_mysql_raw_dev", "raw"), ("engineering_mysql_dev", "stage")):
        glue.create_database(DatabaseInput={"Name": database})
        glue.create_table(
            DatabaseName=database,
            TableInput={
                "Name": "customers",
                "StorageDescriptor": {
                    "Columns": [{"Name": n, "Type": t} for n, t in COLUMNS],
                    "Location": f"s3://{bucket(deployment, kind)}/engineering/mysql/customers/",
                },
                "PartitionKeys": [{"Name": "date", "Type": "string"}],
            },
        )
    return "engineering/mysql/customers/date=20220120/customers.csv"


def test_an_arrival_of_a_catalogued_table_starts_one_stage_a_execution_with_its_plan(
    deployment: Deployment, functions: FunctionHost, customers: str
) -> None:
    deployment.client("s3").put_object(
        Bucket=bucket(deployment, "raw"), Key=customers, Body=b"customer_id,name\n1,ada\n2,alan\n"
    )
    functions.settle()
    assert router_runs(functions)[-1] == {"batchItemFailures": []}, functions.invocations[-1]
    assert customers not in parked(deployment)
    sfn = deployment.client("stepfunctions")
    machine = deployment.outputs["Lakeline-dev-Pipeline"]["StageAStateMachineArn"]
    executions = [
        e
        for e in sfn.list_executions(stateMachineArn=machine)["executions"]
        if e["name"].startswith("mysql-customers-")
    ]
    assert len(executions) == 1
    started = json.loads(sfn.describe_execution(executionArn=executions[0]["executionArn"])["input"])
    assert started["plan"]["raw_key"] == customers
    assert started["plan"]["target_database"] == "engineering_mysql_dev"
    assert "CREATE TABLE" in started["plan"]["ctas"] and started["plan"]["lease"]
