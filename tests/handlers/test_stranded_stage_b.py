"""A stage B run whose execution timed out (6 h) outside its Catch, on moto (#39): the status-change function
ends it as stage B's failure path does, and a message that waited behind it is handed to a follow-up on queue B's
follow-up queue; the sweep queues a stranded stage B partition's follow-up there as well."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from lakeline.commits import Lease, PartitionCommits
from lambdas.stage_b_router import handler as router
from lambdas.stranded_run import handler as stranded_run
from lambdas.stranded_sweep import handler as stranded_sweep
from stage_b.messages import SourceArrival, StageBMessage
from tests.handlers.test_stage_a_handlers import sqs_event
from tests.handlers.test_stage_b_handlers import CONTEXT, REGION, message, planned
from tests.handlers.test_stage_b_handlers import aws as stage_b_aws

stage_b_aws = pytest.fixture(stage_b_aws.__wrapped__)  # type: ignore[attr-defined]


@pytest.fixture
def aws(stage_b_aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    queue_a = stage_b_aws["sqs"].create_queue(QueueName="queue-a")["QueueUrl"]
    for name, value in {
        "STAGE_A_STATE_MACHINE_ARN": f"arn:aws:states:{REGION}:123456789012:stateMachine:stage-a",
        "STAGE_B_STATE_MACHINE_ARN": stage_b_aws["machine"],
        "STAGE_A_FOLLOW_UP_QUEUE_URL": queue_a,
        "STAGE_A_DEAD_LETTER_QUEUE_URL": stage_b_aws["sqs"].create_queue(QueueName="queue-a-dlq")["QueueUrl"],
    }.items():
        monkeypatch.setenv(name, value)
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")
    cached = (stranded_run.environment, stranded_run.runtime, stranded_run.aws, stranded_sweep.dependencies)
    for function in cached:
        function.cache_clear()
    yield {**stage_b_aws, "queue_a": queue_a}
    for function in cached:
        function.cache_clear()


def later_message() -> StageBMessage:
    """Another trigger of the same target partition, while its run holds the lease."""
    return message().model_copy(
        update={
            "trigger": SourceArrival(
                table="engineering_mysql_dev.customers",
                partition={"date": "20220120"},
                run="20220120t010000000000_bbbbbbbbbb",
            )
        }
    )


def drained(aws: dict[str, Any], queue: str) -> list[dict[str, Any]]:
    found = aws["sqs"].receive_message(QueueUrl=aws[queue], MaxNumberOfMessages=10, MessageAttributeNames=["All"])
    return list(found.get("Messages", []))


def test_a_timed_out_stage_b_run_parks_its_message_and_hands_what_waits_to_a_follow_up(aws: dict[str, Any]) -> None:
    payload = planned(aws, message())
    router.handler(sqs_event(later_message().model_dump_json()), CONTEXT)  # waits behind the run
    (execution,) = aws["sfn"].list_executions(stateMachineArn=aws["machine"])["executions"]
    event = {
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "detail": {"executionArn": execution["executionArn"], "stateMachineArn": aws["machine"], "status": "TIMED_OUT"},
    }
    report = stranded_run.handler(event, CONTEXT)
    assert report["ended"] is True and report["failed_step"] == "steps"
    (letter,) = drained(aws, "dlq")
    assert StageBMessage.model_validate_json(letter["Body"]) == message()
    assert letter["MessageAttributes"]["lakeline_reason"]["StringValue"].startswith("steps failed: States.Timeout")
    (follow_up,) = drained(aws, "follow_ups_b")
    lease = Lease.from_dict(json.loads(follow_up["Body"])["lakeline_follow_up"])
    assert drained(aws, "queue_a") == []
    assert stranded_run.handler(event, CONTEXT)["ended"] is False  # delivered twice
    commits = PartitionCommits(aws["dynamodb"], "pipeline-state")
    # The follow-up names its lease; what it takes is what waits in the partition's state (re-read on resume).
    state = commits.read(payload["plan"]["lease"]["key"])
    assert state.lease_owner == lease.owner
    assert [StageBMessage.model_validate_json(body) for body in state.pending] == [later_message()]


def test_the_sweep_queues_a_stranded_stage_b_partitions_follow_up_on_queue_b(aws: dict[str, Any]) -> None:
    payload = planned(aws, message())
    key = payload["plan"]["lease"]["key"]
    aws["dynamodb"].update_item(  # its run died with nothing to end it, long ago
        TableName="pipeline-state",
        Key={"target_partition": {"S": key}},
        UpdateExpression="SET lease_expires = :past",
        ExpressionAttributeValues={":past": {"N": "1"}},
    )
    report = stranded_sweep.handler({"detail-type": "Scheduled Event"}, CONTEXT)
    assert report["started"] == [key]
    (follow_up,) = drained(aws, "follow_ups_b")
    assert Lease.from_dict(json.loads(follow_up["Body"])["lakeline_follow_up"]).key == key
    assert drained(aws, "queue_a") == []
