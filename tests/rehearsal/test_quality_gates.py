"""Quality gates as deployed (#41): the synthesized state machines' quality task (a Lambda running the checks on
the local Athena, IAM enforced), between the writes and the commit, in both stages.

``retail_shop_dev.checked_orders`` carries two ``block`` checks in the app's table settings (``CHECKED_TABLE_
SETTINGS``); its target ``retail_reports_dev.checked_daily`` carries one in its dependency item.

1. a good file: stage A passes its checks and publishes, stage B builds the target (its check passes);
2. a bad file in the same partition (a NULL id, an id already published): the stage A execution fails at the
   quality task, the partition keeps its version, the arrival is parked with the rules and failing rows, and no
   stage B run starts;
3. the fixed file under the same key: published, and the target's run blocked by the target's own check (a day
   of three orders): the target keeps its version.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.executions import ExecutionHost
from lakeline.runtimes.deployed.local_aws.functions import FunctionHost
from lambdas.table_settings import TABLE_SETTINGS_FILE, DeployedTableSettings, read_table_settings
from tests.rehearsal.support import (
    CHECKED_TABLE_SETTINGS,
    archived_events,
    bucket,
    create_report_table,
    create_source_tables,
    daily_item,
    executions_named,
    output,
    parked,
    put_item,
    query,
    stage_b_runs,
    writing,
)

pytestmark = pytest.mark.spark

DAY = "20240501"
KEY = f"retail/shop/checked_orders/date={DAY}/"
ITEM = {
    **daily_item(
        "retail_reports_dev.checked_daily",
        "overwrite",
        [
            {
                "db": "retail_shop_dev",
                "sql": "INSERT INTO retail_reports_dev.checked_daily "
                "SELECT count(*), '$day' FROM checked_orders WHERE \"date\" = '$day'",
            }
        ],
        source="retail_shop_dev.checked_orders",
    ),
    "checks": [{"rule": 'ColumnValues "orders" < 3'}],
}


@pytest.fixture(scope="module")
def checked(deployment: Deployment, executions: ExecutionHost) -> Iterator[None]:
    create_source_tables(deployment, "retail/shop/checked_orders", [("order_id", "bigint"), ("amount", "double")])
    create_report_table(deployment, "checked_daily", "orders BIGINT")
    put_item(deployment, ITEM)
    yield
    # The deployment is shared with the other rehearsal modules, which count its tables and what is parked: the
    # tables, the item and the messages this module parked go (the arrival's fixed file was published after).
    executions.wait()
    glue = deployment.client("glue")
    for database, table in (
        ("retail_shop_raw_dev", "checked_orders"),
        ("retail_shop_dev", "checked_orders"),
        ("retail_reports_dev", "checked_daily"),
    ):
        glue.delete_table(DatabaseName=database, Name=table)
    key = {"dataset": {"S": "retail_reports_dev.checked_daily"}}
    deployment.client("dynamodb").delete_item(TableName=output(deployment, "DependenciesTable"), Key=key)
    for queue in ("StageADeadLetterQueueUrl", "StageBDeadLetterQueueUrl"):
        _forget_parked(deployment, queue, "checked_")


def _forget_parked(deployment: Deployment, queue: str, naming: str) -> None:
    """Delete the messages of ``queue`` whose body names ``naming``; the others are made visible again."""
    sqs, url = deployment.client("sqs"), output(deployment, queue)
    others: list[str] = []
    while received := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30).get(
        "Messages", []
    ):
        for message in received:
            if naming in message["Body"]:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            else:
                others.append(message["ReceiptHandle"])
    for receipt in others:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=receipt, VisibilityTimeout=0)


def send(deployment: Deployment, executions: ExecutionHost, name: str, body: bytes) -> None:
    deployment.client("s3").put_object(Bucket=bucket(deployment, "raw"), Key=KEY + name, Body=body)
    executions.wait()


def stage_a_states(deployment: Deployment, executions: ExecutionHost) -> list[tuple[str, list[str]]]:
    runs = executions_named(deployment, "StageAStateMachineArn", "shop-checked_orders")
    return [(run["status"], executions.records[run["executionArn"]].states()) for run in runs]


def orders(deployment: Deployment) -> list[list[str]]:
    return sorted(query(deployment, f"SELECT order_id FROM retail_shop_dev.checked_orders WHERE date = '{DAY}'"))


def daily(deployment: Deployment) -> list[list[str]]:
    return query(deployment, "SELECT orders, date FROM retail_reports_dev.checked_daily")


def test_the_routers_read_the_checks_from_their_code_asset_not_their_environment(functions: FunctionHost) -> None:
    """The table settings, checks included, are in the routers' code asset (``lambdas.table_settings``), which Lambda
    does not bound at 4 KB as it bounds their environment; the gates below are planned from there."""
    routers = [environment.function for name, environment in functions.environments.items() if "Router" in name]
    assert len(routers) == 2
    for router in routers:
        assert not {"TABLE_SETTINGS", "DEFAULT_TABLE_SETTINGS", "TABLE_SETTINGS_FILE"} & set(router.environment)
        bundled = read_table_settings((router.code / "lambdas" / TABLE_SETTINGS_FILE).read_text())
        assert bundled.tables == DeployedTableSettings.model_validate({"tables": CHECKED_TABLE_SETTINGS}).tables


def test_a_bad_version_is_blocked_in_either_stage_and_readers_keep_the_previous_one(
    deployment: Deployment, executions: ExecutionHost, checked: None
) -> None:
    send(deployment, executions, "a.csv", b"order_id,amount\n1,10.5\n2,4.5\n")
    [(status, states)] = stage_a_states(deployment, executions)
    assert status == "SUCCEEDED" and "RunPlanQuality" in states, states
    assert states.index("RunPlanQuality") < states.index("RunPlanCommit")
    assert orders(deployment) == [["1"], ["2"]]
    assert [r["status"] for r in writing(executions, stage_b_runs(deployment, executions, "checked_daily"))] == [
        "SUCCEEDED"
    ]
    assert daily(deployment) == [["2", DAY]]

    # 2. a NULL id and id 1 again: blocked by both rules.
    send(deployment, executions, "b.csv", b"order_id,amount\n,1.0\n1,2.0\n")
    runs = stage_a_states(deployment, executions)
    failed = [states for status, states in runs if status == "FAILED"]
    assert len(failed) == 1 and failed[0][-2:] == ["RunPlanQuality", "StageARecord"], failed
    assert "RunPlanCommit" not in failed[0]
    assert orders(deployment) == [["1"], ["2"]], "readers still see the previous version"
    reason = parked(deployment)[KEY + "b.csv"]
    # The function's error, as the failure function words a function's: its type once, then its message.
    assert reason.startswith(
        "quality failed: QualityBlocked: quality checks blocked retail_shop_dev.checked_orders (date=20240501): "
    )
    assert """rule 'IsComplete "order_id"' failed""" in reason and """rule 'IsUnique "order_id"' failed""" in reason
    assert '"order_id":null' in reason
    assert len(writing(executions, stage_b_runs(deployment, executions, "checked_daily"))) == 1, "no target run"
    tables = deployment.client("glue").get_tables(DatabaseName="retail_shop_dev")["TableList"]
    assert [table["Name"] for table in tables if table["Name"].startswith("lakeline_tmp")] == []
    # Where users look (#41): the checks' OpenLineage run of each version, from the post-update and the failure
    # functions (their results on the dataset they read), and the blocked arrival's tree ends in DQ_CHECK_FAIL.
    checks = checks_ends(deployment, "stage_a.retail_shop_dev.checked_orders.quality")
    assert ("COMPLETE", [True, True]) in checks and ("FAIL", [False, False]) in checks, checks
    assert "retail_shop_dev.checked_orders" in refused_datasets(deployment)

    # 3. the fixed file under the same key: published; the target's day of three orders is blocked by its check.
    send(deployment, executions, "b.csv", b"order_id,amount\n3,1.0\n")
    assert orders(deployment) == [["1"], ["2"], ["3"]]
    runs_b = writing(executions, stage_b_runs(deployment, executions, "checked_daily"))
    assert sorted(r["status"] for r in runs_b) == ["FAILED", "SUCCEEDED"]
    assert daily(deployment) == [["2", DAY]], "the target keeps its version"
    (reason_b,) = [r for body, r in parked(deployment, "StageBDeadLetterQueueUrl").items() if "checked_daily" in body]
    assert reason_b.startswith(
        "quality failed: QualityBlocked: quality checks blocked retail_reports_dev.checked_daily (date=20240501): "
    )
    assert """rule 'ColumnValues "orders" < 3' failed (metric 0), failing rows: [{"orders":"3"}]""" in reason_b
    checks_b = checks_ends(deployment, "stage_b.retail_reports_dev.checked_daily.quality")
    assert ("COMPLETE", [True]) in checks_b and ("FAIL", [False]) in checks_b, checks_b
    assert "retail_reports_dev.checked_daily" in refused_datasets(deployment)


def checks_ends(deployment: Deployment, job: str) -> list[tuple[str, list[bool]]]:
    """The end events of ``job`` (a checks' run) the functions archived: state, each assertion's success."""
    return [
        (
            event["eventType"],
            [a["success"] for a in event["inputs"][0]["inputFacets"]["dataQualityAssertions"]["assertions"]],
        )
        for event in archived_events(deployment, job)
        if event["eventType"] != "START"
    ]


def refused_datasets(deployment: Deployment) -> set[str]:
    """The datasets of the deployed lineage table's DQ_CHECK_FAIL nodes."""
    dynamodb = deployment.client("dynamodb")
    (table,) = [name for name in dynamodb.list_tables()["TableNames"] if "Lineage" in name]
    pages = dynamodb.get_paginator("scan").paginate(TableName=table)
    items = [item for page in pages for item in page["Items"]]
    return {item["dataset"]["S"] for item in items if item["action_taken"]["S"] == "DQ_CHECK_FAIL"}
