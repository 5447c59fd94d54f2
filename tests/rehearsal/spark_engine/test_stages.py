"""The stages as deployed with the Spark engine, end to end: an S3 arrival goes through the EventBridge
rule and queue A to the bundled router, which starts the synthesized stage A machine; its Glue job task
runs the job's script from the cloud assembly on the session's Spark as the job's role; stage A's
post-update routes the partition to stage B, whose Glue job runs the item's step (#20). Nothing here
calls the repository's stage code directly."""

from __future__ import annotations

import json
from typing import Any

import pytest
from boto3.dynamodb.types import TypeSerializer

from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.executions import ExecutionHost
from lakeline.runtimes.deployed.local_aws.glue import LocalGlue
from stacks.constructs.workflow import THROTTLED_RETRIES
from tests.rehearsal.support import (
    archived_events,
    bucket,
    create_table,
    executions_named,
    life_cycles,
    output,
    parked,
    query,
    without,
)
from tests.rehearsal.test_quality_gates import checks_ends

pytestmark = pytest.mark.spark

ORDERS = [("order_id", "string"), ("amount", "bigint")]
KEY = "sparkco/shop/orders/date=20240301/orders.csv"


def daily_item(dataset: str, steps: list[dict[str, str]]) -> dict[str, Any]:
    """A dependency item of ``dataset``, one partition a day, fed by sparkco_shop_dev.orders's same day."""
    return {
        "dataset": dataset,
        "dependencies": [
            {
                "TableName": "sparkco_shop_dev.orders",
                "FieldColumn": "date",
                "Usage": "overwrite",
                "DateExpression": "%Y%m%d",
                "relativedelta_attributes": {"days": 0},
            }
        ],
        "partitionColumn": "date",
        "partitionPythonMask": "%Y%m%d",
        "steps": steps,
        "date_substitutions": [{"token": "$day", "format": "%Y%m%d", "relativedelta_attributes": {"days": 0}}],
    }


PER_DAY = daily_item(
    "sparkco_reports_dev.orders_per_day",
    [
        {
            "db": "sparkco_shop_dev",
            "info": "orders and revenue of the day; the source is named without its database",
            "sql": "INSERT INTO sparkco_reports_dev.orders_per_day "
            "SELECT count(*), sum(amount), '$day' FROM orders WHERE \"date\" = '$day'",
        }
    ],
)
SUMMARY = daily_item(
    "sparkco_reports_dev.order_summary",
    [
        {
            "db": "sparkco_shop_dev",
            "info": "the day's orders",
            "sql": "INSERT INTO sparkco_reports_dev.order_summary SELECT 'orders', count(*), '$day' FROM orders "
            "WHERE \"date\" = '$day'",
        },
        {
            "db": "sparkco_shop_dev",
            "info": "the day's revenue; names a column the table does not have",
            "sql": "INSERT INTO sparkco_reports_dev.order_summary SELECT 'revenue', sum(price), '$day' FROM orders "
            "WHERE \"date\" = '$day'",
        },
    ],
)


@pytest.fixture(scope="module")
def lake(deployment: Deployment, executions: ExecutionHost) -> None:
    """The raw and stage tables of sparkco/shop/orders, and a report fed by the stage table."""
    create_table(
        deployment,
        "sparkco_shop_raw_dev.orders",
        ORDERS,
        f"s3://{bucket(deployment, 'raw')}/sparkco/shop/orders/",
        csv=True,
    )
    create_table(
        deployment, "sparkco_shop_dev.orders", ORDERS, f"s3://{bucket(deployment, 'stage')}/sparkco/shop/orders/"
    )
    query(deployment, "CREATE DATABASE IF NOT EXISTS sparkco_reports_dev")
    create_report_table(deployment, "orders_per_day", "orders BIGINT, revenue BIGINT")
    put_item(deployment, PER_DAY)


def create_report_table(deployment: Deployment, table: str, columns: str) -> None:
    query(
        deployment,
        f"CREATE EXTERNAL TABLE sparkco_reports_dev.{table} ({columns}) PARTITIONED BY (`date` STRING) "
        f"STORED AS PARQUET LOCATION 's3://{bucket(deployment, 'analytics')}/sparkco/reports/{table}/'",
    )


def put_item(deployment: Deployment, item: dict[str, Any]) -> None:
    serializer = TypeSerializer()
    deployment.client("dynamodb").put_item(
        TableName=output(deployment, "DependenciesTable"),
        Item={key: serializer.serialize(value) for key, value in item.items()},
    )


def stage_b_runs(deployment: Deployment, executions: ExecutionHost, table: str) -> list[dict[str, Any]]:
    found = deployment.client("stepfunctions").list_executions(
        stateMachineArn=output(deployment, "StageBStateMachineArn")
    )["executions"]
    return [run for run in found if executions.records[run["executionArn"]].input["plan"]["target_table"] == table]


def test_an_arrival_runs_the_glue_jobs_of_stage_a_and_stage_b(
    deployment: Deployment, executions: ExecutionHost, local_glue: LocalGlue, lake: None
) -> None:
    deployment.client("s3").put_object(
        Bucket=bucket(deployment, "raw"), Key=KEY, Body=b"order_id,amount\nO1,10\nO2,32\n"
    )
    executions.wait()
    (stage_a,) = executions_named(deployment, "StageAStateMachineArn", "shop-orders")
    record = executions.records[stage_a["executionArn"]]
    assert stage_a["status"] == "SUCCEEDED", (record, local_glue.logs)
    assert record.states() == [
        "RunPlanSpark",
        "RunPlanCommit",
        "RunPlanPublishStatement",
        "RunPlanPublishStatement",
        "PostUpdateTask",
    ]
    (job,) = [task for task in record.tasks if task.resource == "arn:aws:states:::glue:startJobRun.sync"]
    assert job.output["JobRunState"] == "SUCCEEDED"
    assert json.loads(job.input["Arguments"]["--plan"])["raw_key"] == KEY  # the plan arrived as valid JSON
    # The script from the asset ran as __main__: its main() printed the job's result.
    assert '"table": "sparkco_shop_dev.orders"' in local_glue.logs[job.output["Id"]]
    rows = query(deployment, "SELECT order_id, amount FROM sparkco_shop_dev.orders WHERE date = '20240301' ORDER BY 1")
    assert rows == [["O1", "10"], ["O2", "32"]]
    (stage_b,) = stage_b_runs(deployment, executions, "orders_per_day")
    record_b = executions.records[stage_b["executionArn"]]
    assert stage_b["status"] == "SUCCEEDED", (record_b, local_glue.logs)
    assert record_b.states()[0] == "RunStepsSpark" and record_b.states()[-1] == "PostUpdateTask"
    rows = query(deployment, "SELECT orders, revenue FROM sparkco_reports_dev.orders_per_day WHERE date = '20240301'")
    assert rows == [["2", "42"]]


def test_a_failing_job_takes_its_catch_publishes_nothing_and_parks_the_message(
    deployment: Deployment, executions: ExecutionHost, local_glue: LocalGlue, lake: None
) -> None:
    create_report_table(deployment, "order_summary", "measure STRING, amount BIGINT")
    put_item(deployment, SUMMARY)
    message = {
        "target_dataset": SUMMARY["dataset"],
        "partition": {"date": "20240301"},
        "trigger": {"table": "sparkco_shop_dev.orders", "partition": {"date": "20240301"}, "run": "r1"},
        "usage": "overwrite",
    }
    deployment.client("sqs").send_message(
        QueueUrl=output(deployment, "StageBQueueUrl"), MessageBody=json.dumps(message)
    )
    executions.wait()
    (run,) = stage_b_runs(deployment, executions, "order_summary")
    record = executions.records[run["executionArn"]]
    assert run["status"] == "FAILED", record
    assert record.states() == ["RunStepsSpark", "StageBRecord"]  # the Catch: no commit, no publish
    failed = json.loads(record.tasks[0].cause or "")
    assert record.tasks[0].error == "States.TaskFailed" and failed["JobRunState"] == "FAILED"
    assert "price" in failed["ErrorMessage"], failed["ErrorMessage"]
    (reason,) = [r for body, r in parked(deployment, "StageBDeadLetterQueueUrl").items() if "order_summary" in body]
    # The reason says why first: the job run's error message, not the JobRun (whose Arguments, the whole
    # plan, came before its ErrorMessage and pushed it past the 1000 characters a reason keeps).
    assert reason.startswith("spark failed: States.TaskFailed: Glue job run ") and " FAILED: " in reason
    assert "price" in reason
    assert query(deployment, "SELECT count(*) FROM sparkco_reports_dev.order_summary") == [["0"]]
    # #21: the failure function reads the failed step from the job run's ErrorMessage (StageBStepFailed's
    # message names it); before, the run's START and FAIL were its only OpenLineage events.
    job = "stage_b.sparkco_reports_dev.order_summary"
    told = life_cycles(archived_events(deployment, job), job)
    assert {run: [state for state, _ in events] for run, events in told.items()} == {
        "run": ["START", "FAIL"],
        ".step0": ["START", "COMPLETE"],
        ".step1": ["START", "FAIL"],
    }, told


def stage_b_message(deployment: Deployment, item: dict[str, Any], day: str) -> None:
    message = {
        "target_dataset": item["dataset"],
        "partition": {"date": day},
        "trigger": {"table": "sparkco_shop_dev.orders", "partition": {"date": day}, "run": "r1"},
        "usage": "overwrite",
    }
    deployment.client("sqs").send_message(
        QueueUrl=output(deployment, "StageBQueueUrl"), MessageBody=json.dumps(message)
    )


def test_a_machine_role_without_glue_start_job_run_is_refused_and_takes_the_catch(
    deployment: Deployment, executions: ExecutionHost, local_glue: LocalGlue, lake: None
) -> None:
    """The task starts the run signed as the machine's role: without ``glue:StartJobRun`` Glue refuses it,
    as AWS does, and the definition's Catch parks the message."""
    iam = deployment.client("iam")
    machine = deployment.client("stepfunctions").describe_state_machine(
        stateMachineArn=output(deployment, "StageBStateMachineArn")
    )
    role = machine["roleArn"].rsplit("/", 1)[-1]
    policies = {
        name: iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"]
        for name in iam.list_role_policies(RoleName=role)["PolicyNames"]
    }
    runs_before = len(local_glue.logs)
    try:
        for name, document in policies.items():
            stripped = without(document, "glue:StartJobRun")
            iam.put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=json.dumps(stripped))
        stage_b_message(deployment, PER_DAY, "20240305")
        executions.wait()
    finally:
        for name, document in policies.items():
            iam.put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=json.dumps(document))
    (run,) = [
        r
        for r in stage_b_runs(deployment, executions, "orders_per_day")
        if executions.records[r["executionArn"]].input["plan"]["partition"] == {"date": "20240305"}
    ]
    record = executions.records[run["executionArn"]]
    assert record.states() == ["RunStepsSpark", "StageBRecord"]
    assert record.tasks[0].error == "Glue.AccessDeniedException", record.tasks[0]
    assert len(local_glue.logs) == runs_before  # no run was started
    reasons = [r for body, r in parked(deployment, "StageBDeadLetterQueueUrl").items() if "20240305" in body]
    assert [r.split(":")[0:2] for r in reasons] == [["spark failed", " Glue.AccessDeniedException"]]


def test_a_job_at_its_concurrency_limit_is_retried_by_the_definition_then_caught(
    deployment: Deployment, executions: ExecutionHost, local_glue: LocalGlue, lake: None
) -> None:
    """``Glue.ConcurrentRunsExceededException`` is retried within the throttling budget (``THROTTLED_RETRIES``,
    no wait here), then the Catch
    parks the message. The job is put at its limit in moto's backend (its ``MaxConcurrentRuns`` 0), as if
    other runs held every slot."""
    from moto.glue.models import glue_backends

    (job,) = glue_backends[deployment.account][deployment.region].jobs.values()
    limit = job.execution_property
    job.execution_property = {"MaxConcurrentRuns": 0}
    try:
        stage_b_message(deployment, PER_DAY, "20240306")
        executions.wait()
    finally:
        job.execution_property = limit
    (run,) = [
        r
        for r in stage_b_runs(deployment, executions, "orders_per_day")
        if executions.records[r["executionArn"]].input["plan"]["partition"] == {"date": "20240306"}
    ]
    record = executions.records[run["executionArn"]]
    attempts = THROTTLED_RETRIES + 1  # the first attempt and the retries
    assert record.states() == ["RunStepsSpark"] * attempts + ["StageBRecord"]
    assert {task.error for task in record.tasks[:attempts]} == {"Glue.ConcurrentRunsExceededException"}
    reasons = [r for body, r in parked(deployment, "StageBDeadLetterQueueUrl").items() if "20240306" in body]
    assert len(reasons) == 1 and reasons[0].startswith("spark failed: Glue.ConcurrentRunsExceededException")


CHECKED = {
    **daily_item(
        "sparkco_reports_dev.orders_checked",
        [
            {
                "db": "sparkco_shop_dev",
                "sql": "INSERT INTO sparkco_reports_dev.orders_checked SELECT count(*), '$day' FROM orders "
                "WHERE \"date\" = '$day'",
            }
        ],
    ),
    "checks": [{"rule": 'ColumnValues "orders" > 5'}],
}


def test_a_blocked_version_fails_the_quality_job_run_and_is_not_published(
    deployment: Deployment, executions: ExecutionHost, local_glue: LocalGlue, lake: None
) -> None:
    """#41 on the Spark engine: after the writes' job run, a second run of the job (``--mode quality_b``) checks
    the new version on Spark; a failed ``block`` rule fails it, and its Catch sends the run to the failure path."""
    create_report_table(deployment, "orders_checked", "orders BIGINT")
    put_item(deployment, CHECKED)
    stage_b_message(deployment, CHECKED, "20240301")
    executions.wait()
    (run,) = stage_b_runs(deployment, executions, "orders_checked")
    record = executions.records[run["executionArn"]]
    assert run["status"] == "FAILED", (record, local_glue.logs)
    assert record.states() == ["RunStepsSpark", "RunStepsQualitySpark", "StageBRecord"]  # no commit
    quality = record.tasks[1]
    rules = [{"rule": 'ColumnValues "orders" > 5', "severity": "block"}]  # the item's, its severity made explicit
    assert json.loads(quality.input["Arguments"]["--plan"])["quality"]["rules"] == rules
    assert quality.input["Arguments"]["--mode"] == "quality_b"
    (reason,) = [r for body, r in parked(deployment, "StageBDeadLetterQueueUrl").items() if "orders_checked" in body]
    assert reason.startswith("quality failed: States.TaskFailed: Glue job run ") and " FAILED: " in reason
    assert """rule 'ColumnValues "orders" > 5' failed (metric 0), failing rows: [{"orders":"2"}]""" in reason
    assert query(deployment, "SELECT count(*) FROM sparkco_reports_dev.orders_checked") == [["0"]]
    # The failure function, where both engines' runs end, read the Glue job run's report: the checks' OpenLineage
    # run FAILs with each rule's result on the target (#41).
    assert checks_ends(deployment, "stage_b.sparkco_reports_dev.orders_checked.quality") == [("FAIL", [False])]
