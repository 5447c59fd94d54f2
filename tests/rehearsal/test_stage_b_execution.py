"""Stage B as deployed, end to end: a dependency item put into the deployed table, an arrival of its
source, stage A's post-update sending the finished partition to queue B, the bundled stage B router
starting the synthesized stage B machine, and its step, written as users write steps (unqualified
table names, resolved in the step's ``db``), run on the local Athena (#20)."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from typing import Any

import pytest

from lakeline.operations.dead_letters import redrive
from lakeline.runtimes.deployed.local_aws.athena import LocalAthena
from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.executions import ExecutionHost
from lakeline.runtimes.deployed.local_aws.functions import FunctionHost
from tests.rehearsal.support import (
    archived_events,
    bucket,
    create_report_table,
    create_source_tables,
    daily_item,
    executions_named,
    life_cycles,
    output,
    parked,
    put_item,
    query,
    stage_b_runs,
    writing,
)

pytestmark = pytest.mark.spark

ORDERS = [("order_id", "bigint"), ("amount", "double")]


ITEM = daily_item(
    "retail_reports_dev.orders_per_day",
    "overwrite",
    [
        {
            "db": "retail_shop_dev",
            "info": "orders and revenue of the day; the source is named without its database",
            "sql": "INSERT INTO retail_reports_dev.orders_per_day "
            "SELECT count(*), sum(amount), '$day' FROM orders WHERE \"date\" = '$day'",
        }
    ],
)


@pytest.fixture(scope="module")
def reports(deployment: Deployment, executions: ExecutionHost) -> None:
    create_source_tables(deployment, "retail/shop/orders", ORDERS)
    query(deployment, "CREATE DATABASE IF NOT EXISTS retail_reports_dev")
    create_report_table(deployment, "orders_per_day", "orders BIGINT, revenue DOUBLE")
    put_item(deployment, ITEM)


def test_a_finished_stage_a_partition_runs_the_stage_b_step_in_its_db(
    deployment: Deployment, executions: ExecutionHost, reports: None
) -> None:
    deployment.client("s3").put_object(
        Bucket=bucket(deployment, "raw"),
        Key="retail/shop/orders/date=20240301/orders.csv",
        Body=b"order_id,amount\n1,10.5\n2,4.5\n3,5\n",
    )
    executions.wait()
    (stage_a,) = executions_named(deployment, "StageAStateMachineArn", "shop-orders")
    assert stage_a["status"] == "SUCCEEDED", executions.records[stage_a["executionArn"]]
    runs = stage_b_runs(deployment, executions, "orders_per_day")
    (stage_b,) = writing(executions, runs)
    record = executions.records[stage_b["executionArn"]]
    assert stage_b["status"] == "SUCCEEDED", record
    (step,) = [task for task in record.tasks if task.state == "RunStepsStep"]
    assert step.input["QueryExecutionContext"] == {"Database": "retail_shop_dev"}
    rows = query(deployment, "SELECT orders, revenue FROM retail_reports_dev.orders_per_day WHERE date = '20240301'")
    assert rows == [["3", "20.0"]]


SUMMARY = daily_item(
    "retail_reports_dev.order_summary",
    "overwrite",
    [
        {
            "db": "retail_shop_dev",
            "info": "the day's orders",
            "sql": "INSERT INTO retail_reports_dev.order_summary SELECT 'orders', count(*), '$day' FROM orders "
            "WHERE \"date\" = '$day'",
        },
        {
            "db": "retail_shop_dev",
            "info": "the day's revenue; names a column the table does not have",
            "sql": "INSERT INTO retail_reports_dev.order_summary SELECT 'revenue', sum(price), '$day' FROM orders "
            "WHERE \"date\" = '$day'",
        },
    ],
)


def test_a_failing_second_step_fails_the_run_publishes_nothing_and_parks_the_message(
    deployment: Deployment, executions: ExecutionHost, reports: None
) -> None:
    create_report_table(deployment, "order_summary", "measure STRING, amount DOUBLE")
    put_item(deployment, SUMMARY)
    deployment.client("s3").put_object(
        Bucket=bucket(deployment, "raw"),
        Key="retail/shop/orders/date=20240302/orders.csv",
        Body=b"order_id,amount\n7,1.5\n",
    )
    executions.wait()
    (run,) = stage_b_runs(deployment, executions, "order_summary")
    record = executions.records[run["executionArn"]]
    assert run["status"] == "FAILED", record
    steps = [task for task in record.tasks if task.state == "RunStepsStep"]
    assert [step.error for step in steps] == [None, "States.TaskFailed"]
    assert record.states()[-1] == "StageBRecord"
    (reason,) = [r for body, r in parked(deployment, "StageBDeadLetterQueueUrl").items() if "order_summary" in body]
    assert reason.startswith("steps failed: States.TaskFailed: ") and "price" in reason
    assert query(deployment, "SELECT count(*) FROM retail_reports_dev.order_summary") == [["0"]]


def test_after_fixing_the_item_a_dlq_redrive_runs_both_steps(
    deployment: Deployment, executions: ExecutionHost, reports: None
) -> None:
    fixed = json.loads(json.dumps(SUMMARY))
    fixed["steps"][1]["sql"] = fixed["steps"][1]["sql"].replace("sum(price)", "sum(amount)")
    put_item(deployment, fixed)
    waiting = parked(deployment, "StageBDeadLetterQueueUrl")  # with what other tests parked
    sent, kept = redrive(
        deployment.client("sqs"), output(deployment, "StageBDeadLetterQueueUrl"), output(deployment, "StageBQueueUrl")
    )
    assert sent + len(kept) == len(waiting)
    assert not [letter for letter in kept if "order_summary" in letter.body]
    executions.wait()
    runs = stage_b_runs(deployment, executions, "order_summary")
    statuses = [(run["status"], executions.records[str(run["executionArn"])].states()) for run in runs]
    assert len(writing(executions, runs)) == 2 and sorted(s for s, _ in statuses)[0] == "FAILED", statuses
    rows = query(deployment, "SELECT measure, amount FROM retail_reports_dev.order_summary ORDER BY 1")
    assert rows == [["orders", "1.0"], ["revenue", "1.5"]]
    assert not [body for body in parked(deployment, "StageBDeadLetterQueueUrl") if "order_summary" in body]


def test_the_steps_writing_the_target_ran_as_athena_runs_them_where_the_plan_before_36_is_refused(
    deployment: Deployment, executions: ExecutionHost, local_athena: LocalAthena, reports: None
) -> None:
    """The two-step item above ran on the local Athena, which refuses INSERT INTO a bucketed table as
    Athena does: its first step's CTAS is not bucketed, the second inserts into it. The plan before #36
    (the same CTAS bucketed, then the same INSERT) fails there, as it failed on every run in AWS."""
    ran = [query for query, _ in local_athena.executed if "lakeline_tmp_order_summary_" in query]
    ctas = [q for q in ran if q.startswith("CREATE TABLE")][-1]
    insert = [q for q in ran if q.startswith("INSERT INTO") and q.split()[2] in ctas][-1]
    assert "bucketed_by" not in ctas and "revenue" in insert
    temp = insert.split()[2]  # "retail_reports_dev"."lakeline_tmp_order_summary_<run>"
    before = temp.replace("lakeline_tmp_", "lakeline_before_36_")
    location = f"s3://{bucket(deployment, 'analytics')}/before-36/order_summary/"
    old_ctas = re.sub(r"external_location = '[^']*'", f"external_location = '{location}'", ctas)
    bucketed = ", bucketed_by = ARRAY['measure'], bucket_count = 1) AS SELECT"
    old_ctas = old_ctas.replace(temp, before).replace(") AS SELECT", bucketed, 1)
    assert final_state(deployment, old_ctas, "retail_shop_dev")["State"] == "SUCCEEDED", old_ctas
    refused = final_state(deployment, insert.replace(temp, before), "retail_shop_dev")
    assert refused["State"] == "FAILED"
    assert refused["StateChangeReason"].startswith("NOT_SUPPORTED: Inserting into a bucketed table is not supported")
    query(deployment, f"DROP TABLE {before}")


def final_state(deployment: Deployment, sql: str, database: str) -> dict[str, Any]:
    athena = deployment.client("athena")
    query_id = athena.start_query_execution(
        QueryString=sql, WorkGroup="lakeline-dev", QueryExecutionContext={"Database": database}
    )["QueryExecutionId"]
    while True:
        status: dict[str, Any] = athena.get_query_execution(QueryExecutionId=query_id)["QueryExecution"]["Status"]
        if status["State"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            return status
        time.sleep(0.05)


ORDER_LOG = daily_item(
    "retail_reports_dev.order_log",
    "append",
    [
        {
            "db": "retail_shop_dev",
            "info": "each order of the day, appended",
            "sql": "INSERT INTO retail_reports_dev.order_log SELECT order_id, amount, '$day' FROM orders "
            "WHERE \"date\" = '$day'",
        }
    ],
)


def test_an_append_message_delivered_twice_appends_its_rows_once(
    deployment: Deployment, functions: FunctionHost, executions: ExecutionHost, reports: None
) -> None:
    """#20's sixth defect said the append ledger is never read in AWS: what keeps a redelivered append
    from adding its rows again there is the partition's commit, which holds the ids of the messages its
    version applied. Here the same queue B message arrives twice, as SQS may deliver it."""
    create_report_table(deployment, "order_log", "order_id BIGINT, amount DOUBLE")
    put_item(deployment, ORDER_LOG)
    message = json.dumps(
        {
            "target_dataset": ORDER_LOG["dataset"],
            "partition": {"date": "20240301"},
            "trigger": {
                "table": "retail_shop_dev.orders",
                "partition": {"date": "20240301"},
                "run": "20240301t000000000000_0123456789",
            },
            "usage": "append",
        }
    )
    sqs = deployment.client("sqs")
    for _ in range(2):
        sqs.send_message(QueueUrl=output(deployment, "StageBQueueUrl"), MessageBody=message)
        executions.wait()
    delivered = [
        record
        for name, event, _ in functions.invocations
        if "-StageBRouter" in name
        for record in (event or {}).get("Records", [])
        if record["body"] == message
    ]
    assert len(delivered) == 2  # both deliveries reached the deployed router (and no other was needed)
    runs = stage_b_runs(deployment, executions, "order_log")
    assert runs and {run["status"] for run in runs} == {"SUCCEEDED"}, [
        executions.records[str(r["executionArn"])] for r in runs
    ]
    rows = query(deployment, "SELECT order_id FROM retail_reports_dev.order_log WHERE date = '20240301' ORDER BY 1")
    assert rows == [["1"], ["2"], ["3"]]


SHARED = daily_item(
    "retail_reports_dev.shared_orders",
    "overwrite",
    [
        {
            "db": "retail_shop_dev",
            "info": "the day's orders, into a table in a bucket the stacks do not grant",
            "sql": "INSERT INTO retail_reports_dev.shared_orders SELECT count(*), '$day' FROM orders "
            "WHERE \"date\" = '$day'",
        }
    ],
)


def test_a_target_in_a_bucket_the_stacks_do_not_grant_fails_its_step_as_athena_would(
    deployment: Deployment, executions: ExecutionHost, reports: None
) -> None:
    """Athena writes a step's rows with the state machine role's credentials (``athena_caller``): a target
    table a team put in a bucket of its own, which the stacks grant nothing on, fails the step with Athena's
    reason (before, the local Athena wrote there whatever the role). The failure function may not list that
    bucket either: the run still ends and its message is parked, the files it could not delete named in the
    reason (before, the failure function failed too and nothing was parked)."""
    shared = "lakeline-rehearsal-team-shared"
    deployment.client("s3").create_bucket(Bucket=shared)
    query(
        deployment,
        "CREATE EXTERNAL TABLE retail_reports_dev.shared_orders (orders BIGINT) PARTITIONED BY (`date` STRING) "
        f"STORED AS PARQUET LOCATION 's3://{shared}/orders/'",
    )
    put_item(deployment, SHARED)
    deployment.client("s3").put_object(
        Bucket=bucket(deployment, "raw"),
        Key="retail/shop/orders/date=20240305/orders.csv",
        Body=b"order_id,amount\n9,2.5\n",
    )
    executions.wait()
    (run,) = stage_b_runs(deployment, executions, "shared_orders")
    assert run["status"] == "FAILED", executions.records[run["executionArn"]]
    letters = parked(deployment, "StageBDeadLetterQueueUrl")
    (reason,) = [r for body, r in letters.items() if "shared_orders" in body] or [str(letters)]
    assert f"Access denied when writing to location: s3://{shared}/orders/" in reason, reason
    assert "its files under s3://" in reason and "were left: " in reason, reason
    assert "Contents" not in deployment.client("s3").list_objects_v2(Bucket=shared)


def order_step(measure: str, value: str, info: str) -> dict[str, str]:
    return {
        "db": "retail_shop_dev",
        "info": info,
        "sql": f"INSERT INTO retail_reports_dev.{{table}} SELECT '{measure}', {value}, '$day' FROM orders "
        "WHERE \"date\" = '$day'",
    }


def three_steps(table: str, middle: str) -> dict[str, Any]:
    steps = [
        order_step("orders", "count(*)", "the day's orders"),
        order_step("revenue", middle, "the day's revenue"),
        order_step("largest", "max(amount)", "the day's largest order"),
    ]
    for step in steps:
        step["sql"] = step["sql"].format(table=table)
    return daily_item(f"retail_reports_dev.{table}", "overwrite", steps)


def test_a_three_step_run_failing_in_its_middle_step_tells_each_step_s_life_cycle(
    deployment: Deployment, executions: ExecutionHost, reports: None
) -> None:
    """#21, as deployed: the synthesized stage B machine on the ASL interpreter runs three steps, the second
    failing, and another item's three steps that succeed. Before, the failure function got no step index:
    the failed run's events were its START and FAIL alone; and every step of the run that succeeded was
    dated at the run's planning time, before the execution had started."""
    create_report_table(deployment, "order_steps", "measure STRING, amount DOUBLE")
    create_report_table(deployment, "order_totals", "measure STRING, amount DOUBLE")
    put_item(deployment, three_steps("order_steps", "sum(price)"))  # no such column: the second step fails
    put_item(deployment, three_steps("order_totals", "sum(amount)"))
    deployment.client("s3").put_object(
        Bucket=bucket(deployment, "raw"),
        Key="retail/shop/orders/date=20240306/orders.csv",
        Body=b"order_id,amount\n11,3.5\n12,6.5\n",
    )
    executions.wait()

    (failed_run,) = stage_b_runs(deployment, executions, "order_steps")
    assert failed_run["status"] == "FAILED", executions.records[failed_run["executionArn"]]
    job = "stage_b.retail_reports_dev.order_steps"
    told = life_cycles(archived_events(deployment, job), job)
    assert {run: [state for state, _ in events] for run, events in told.items()} == {
        "run": ["START", "FAIL"],
        ".step0": ["START", "COMPLETE"],
        ".step1": ["START", "FAIL"],
        ".step2": ["ABORT"],
    }, told
    # A valid order: in time order each run's events are as above (a step ends no earlier than it starts),
    # and every step's events lie within the execution's START and FAIL.
    (_, started), (_, ended) = told["run"]
    assert all(started <= at <= ended for events in told.values() for _, at in events), told
    # The failed step is dated by its query (its cause holds the QueryExecution): within the execution.
    assert failed_run["startDate"] <= told[".step1"][0][1] < ended, (failed_run["startDate"], told)
    (fail,) = [
        e for e in archived_events(deployment, job) if e["job"]["name"] == f"{job}.step1" and e["eventType"] == "FAIL"
    ]
    reason = fail["run"]["facets"]["errorMessage"]["message"]
    assert reason.startswith("steps failed: States.TaskFailed: Athena query ") and "price" in reason, reason

    runs = writing(executions, stage_b_runs(deployment, executions, "order_totals"))
    (done,) = runs
    assert done["status"] == "SUCCEEDED", executions.records[done["executionArn"]]
    stopped = deployment.client("stepfunctions").describe_execution(executionArn=done["executionArn"])["stopDate"]
    job = "stage_b.retail_reports_dev.order_totals"
    events = archived_events(deployment, job)
    steps = {
        (e["job"]["name"].removeprefix(job), e["eventType"]): datetime.fromisoformat(e["eventTime"]) for e in events
    }
    assert sorted(steps) == sorted(
        [("", "START"), ("", "COMPLETE")] + [(f".step{i}", t) for i in range(3) for t in ("START", "COMPLETE")]
    )
    planned = steps[("", "START")]
    times = [steps[(f".step{i}", t)] for i in range(3) for t in ("START", "COMPLETE")]
    # Each step's START and COMPLETE are its query's submission and completion: within the execution, in
    # the order the steps ran, none at the planning time.
    assert done["startDate"] <= times[0] and times[-1] <= stopped, (done["startDate"], times, stopped)
    assert times == sorted(times) and planned < times[0], (planned, times)
    assert times[-1] <= steps[("", "COMPLETE")]
