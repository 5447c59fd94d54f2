"""A post-update that fails after the publish, as deployed (#20, defect 5: PostUpdateTask had no Catch,
so such a failure parked nothing and its partition was never routed onwards). The post-update function's
role loses a grant (IAM is enforced), the task fails as AWS fails it, past its retries; its Catch parks
the run's input in its queue's DLQ with the reason, deletes nothing (the run is published) and frees the
partition's lease. With the grant back, a redrive (``lakeline dlq redrive``) starts a run that writes
nothing and repeats the post-update, which routes the published partition onwards, once."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lakeline.commits import PartitionCommits, commit_key
from lakeline.operations.dead_letters import redrive
from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.executions import ExecutionHost
from lakeline.runtimes.deployed.local_aws.functions import FunctionHost
from stage_a.plan import StageAPlan
from stage_lineage.records import STAGE_A_COMPLETE, STAGE_B_COMPLETE, stage_a_root_id
from tests.rehearsal.support import (
    bucket,
    create_report_table,
    create_source_tables,
    daily_item,
    executions_named,
    function_role,
    output,
    parked,
    put_item,
    query,
    refused,
    stage_b_runs,
    writing,
)

pytestmark = pytest.mark.spark

RETURNS = [("return_id", "bigint"), ("refund", "double")]
KEY = "retail/returns/refunds/date=20240310/refunds.csv"
SECOND_KEY = "retail/returns/refunds/date=20240311/refunds.csv"
REFUNDS = "retail_returns_dev.refunds"


@pytest.fixture(scope="module")
def returns(deployment: Deployment, executions: ExecutionHost) -> None:
    """retail/returns/refunds (a dataset of its own: other tests count retail_shop_dev's tables), and a
    B→B chain after it: returns_per_day, then returns_summary from that."""
    create_source_tables(deployment, "retail/returns/refunds", RETURNS)  # REFUNDS is its stage table
    create_report_table(deployment, "returns_per_day", "returns BIGINT, refunded DOUBLE")
    create_report_table(deployment, "returns_summary", "refunded DOUBLE")
    per_day = "INSERT INTO retail_reports_dev.returns_per_day SELECT count(*), sum(refund), '$day' FROM refunds"
    steps = [{"db": "retail_returns_dev", "info": "refunds of the day", "sql": f"{per_day} WHERE \"date\" = '$day'"}]
    put_item(deployment, daily_item("retail_reports_dev.returns_per_day", "overwrite", steps, source=REFUNDS))
    summary = "INSERT INTO retail_reports_dev.returns_summary SELECT refunded, '$day' FROM returns_per_day"
    steps = [{"db": "retail_reports_dev", "info": "the day's total", "sql": f"{summary} WHERE \"date\" = '$day'"}]
    put_item(
        deployment,
        daily_item(
            "retail_reports_dev.returns_summary", "overwrite", steps, source="retail_reports_dev.returns_per_day"
        ),
    )
    executions.wait()


def arrive(deployment: Deployment, key: str, body: bytes) -> None:
    deployment.client("s3").put_object(Bucket=bucket(deployment, "raw"), Key=key, Body=body)


def stage_a_runs(deployment: Deployment, executions: ExecutionHost, key: str) -> list[dict[str, Any]]:
    return [
        run
        for run in executions_named(deployment, "StageAStateMachineArn", "returns-refunds")
        if executions.records[run["executionArn"]].input["plan"]["raw_key"] == key
    ]


def ran_on(deployment: Deployment, executions: ExecutionHost, table: str, day: str) -> list[dict[str, Any]]:
    """The stage B runs of ``table``'s partition ``day`` that ran their steps (repeats only the post-update)."""
    runs = writing(executions, stage_b_runs(deployment, executions, table))
    return [run for run in runs if executions.records[run["executionArn"]].input["plan"]["partition"] == {"date": day}]


def lease_owner(deployment: Deployment, table: str, day: str) -> str | None:
    """Who holds the partition's lease in the deployed pipeline-state table (``None``: it is free)."""
    commits = PartitionCommits(deployment.client("dynamodb"), output(deployment, "PipelineStateTable"))
    return commits.read(commit_key(table, f"date={day}")).lease_owner


def lineage_action(deployment: Deployment, root_id: str, node_id: str) -> str:
    """The action of a node in the deployed lineage table."""
    dynamodb = deployment.client("dynamodb")
    (table,) = [name for name in dynamodb.list_tables()["TableNames"] if "Lineage" in name]
    item = dynamodb.get_item(TableName=table, Key={"root_id": {"S": root_id}, "node_id": {"S": node_id}})["Item"]
    return str(item["action_taken"]["S"])


def test_a_stage_a_post_update_that_fails_parks_its_arrival_deletes_nothing_and_frees_the_partition(
    deployment: Deployment, functions: FunctionHost, executions: ExecutionHost, returns: None
) -> None:
    # Its messages (lineage, then the routing onwards) cannot be sent: it fails before the routing goes out.
    with refused(deployment, function_role(functions, "StageAPostUpdate"), "sqs:SendMessage"):
        arrive(deployment, KEY, b"return_id,refund\n1,2.5\n2,4.0\n")
        executions.wait()
    (run,) = stage_a_runs(deployment, executions, KEY)
    record = executions.records[run["executionArn"]]
    assert run["status"] == "FAILED", record  # still alarmed
    states = record.states()
    assert states.count("PostUpdateTask") == 3 and states[-1] == "StageARecord", states  # retried twice, caught
    reason = parked(deployment)[KEY]
    assert reason.startswith("post_update failed: ") and "sqs:SendMessage" in reason, reason
    # The run is published: its rows stay, and its lease was ended by the failure path, not left to expire.
    assert query(deployment, "SELECT count(*) FROM retail_returns_dev.refunds WHERE date = '20240310'") == [["2"]]
    assert lease_owner(deployment, "retail_returns_dev.refunds", "20240310") is None
    assert not stage_b_runs(deployment, executions, "returns_per_day")  # not routed onwards (yet)


def test_with_the_grant_back_a_redrive_routes_the_published_partition_onwards_once(
    deployment: Deployment, executions: ExecutionHost, returns: None
) -> None:
    waiting = parked(deployment)  # with what other tests parked
    sent, _ = redrive(
        deployment.client("sqs"), output(deployment, "StageADeadLetterQueueUrl"), output(deployment, "StageAQueueUrl")
    )
    assert sent == len(waiting)
    executions.wait()
    assert KEY not in parked(deployment)
    redriven = [executions.records[run["executionArn"]] for run in stage_a_runs(deployment, executions, KEY)]
    assert sorted((r.status, r.input["plan"]["mode"], r.states()[-1]) for r in redriven)[-1] == (
        "SUCCEEDED",
        "none",
        "PostUpdateTask",
    )
    assert [r.states() for r in redriven if r.status == "SUCCEEDED"] == [["PostUpdateTask"]] * (len(redriven) - 1)
    # Routed onwards: the published partition's targets ran, each writing once, down the B→B chain.
    (per_day,) = writing(executions, stage_b_runs(deployment, executions, "returns_per_day"))
    assert per_day["status"] == "SUCCEEDED", executions.records[per_day["executionArn"]]
    (summary,) = writing(executions, stage_b_runs(deployment, executions, "returns_summary"))
    assert summary["status"] == "SUCCEEDED", executions.records[summary["executionArn"]]
    rows = query(deployment, "SELECT returns, refunded FROM retail_reports_dev.returns_per_day WHERE date = '20240310'")
    assert rows == [["2", "6.5"]]
    # The target's run hangs under the run that published the partition, in that run's lineage tree (noted
    # by the failure path), not under a root of its own.
    (publishing,) = [r for r in redriven if r.status == "FAILED"]
    lineage = executions.records[per_day["executionArn"]].input["message"]["lineage"]
    assert lineage["root_id"] == stage_a_root_id(StageAPlan.from_dict(publishing.input["plan"]))
    assert lineage_action(deployment, lineage["root_id"], lineage["parent_id"]) == STAGE_A_COMPLETE
    assert query(deployment, "SELECT refunded FROM retail_reports_dev.returns_summary") == [["6.5"]]
    # Nothing doubled, and the partitions are free.
    assert query(deployment, "SELECT count(*) FROM retail_returns_dev.refunds WHERE date = '20240310'") == [["2"]]
    assert lease_owner(deployment, "retail_returns_dev.refunds", "20240310") is None
    assert lease_owner(deployment, "retail_reports_dev.returns_per_day", "20240310") is None


def test_a_stage_b_post_update_that_fails_parks_its_message_and_a_redrive_routes_it_onwards(
    deployment: Deployment, functions: FunctionHost, executions: ExecutionHost, returns: None
) -> None:
    with refused(deployment, function_role(functions, "StageBPostUpdate"), "sqs:SendMessage"):
        arrive(deployment, SECOND_KEY, b"return_id,refund\n3,1.0\n")
        executions.wait()
    (stage_a,) = stage_a_runs(deployment, executions, SECOND_KEY)
    assert stage_a["status"] == "SUCCEEDED", executions.records[stage_a["executionArn"]]
    (failed,) = ran_on(deployment, executions, "returns_per_day", "20240311")
    record = executions.records[failed["executionArn"]]
    assert failed["status"] == "FAILED" and record.states()[-1] == "StageBRecord", record
    (reason,) = [
        reason
        for body, reason in parked(deployment, "StageBDeadLetterQueueUrl").items()
        if body.startswith("{") and json.loads(body).get("target_dataset") == "retail_reports_dev.returns_per_day"
    ]
    assert reason.startswith("post_update failed: ") and "sqs:SendMessage" in reason, reason
    per_day = "SELECT returns, refunded FROM retail_reports_dev.returns_per_day WHERE date = '20240311'"
    assert query(deployment, per_day) == [["1", "1.0"]]  # published, kept
    assert lease_owner(deployment, "retail_reports_dev.returns_per_day", "20240311") is None
    assert not ran_on(deployment, executions, "returns_summary", "20240311")

    sent, _ = redrive(
        deployment.client("sqs"), output(deployment, "StageBDeadLetterQueueUrl"), output(deployment, "StageBQueueUrl")
    )
    assert sent
    executions.wait()
    assert not [
        body
        for body in parked(deployment, "StageBDeadLetterQueueUrl")
        if body.startswith("{") and json.loads(body).get("target_dataset") == "retail_reports_dev.returns_per_day"
    ]
    (once,) = ran_on(deployment, executions, "returns_per_day", "20240311")
    assert once["executionArn"] == failed["executionArn"]  # the redrive wrote nothing again
    (summary,) = ran_on(deployment, executions, "returns_summary", "20240311")
    assert summary["status"] == "SUCCEEDED", executions.records[summary["executionArn"]]
    # Under the failed run's node in its tree (noted by the failure path), not under a root of its own.
    lineage = executions.records[summary["executionArn"]].input["message"]["lineage"]
    assert lineage["root_id"] == record.input["message"]["lineage"]["root_id"]
    assert lineage_action(deployment, lineage["root_id"], lineage["parent_id"]) == STAGE_B_COMPLETE
    assert query(deployment, per_day) == [["1", "1.0"]]
    rows = query(deployment, "SELECT refunded FROM retail_reports_dev.returns_summary WHERE date = '20240311'")
    assert rows == [["1.0"]]
