"""Runs that end outside their Catch, and partitions stranded behind an expired lease, on moto (#39): the
status-change function ends such a run as the failure path does, once; the sweep starts the follow-up of
arrivals that wait behind a lease nobody holds, and never takes a live run's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from lakeline.commits import Lease, PartitionCommits
from lakeline.commits.batch import BatchRef, read_batch
from lakeline.commits.stranded import CURSOR_KEY, SweepLimits, sweep_stranded
from lakeline.partitions import new_run_token
from lakeline.storage import S3ObjectStore
from lambdas.stage_a_failure import handler as failure
from lambdas.stranded_run import handler as stranded_run
from lambdas.stranded_sweep import handler as stranded_sweep
from stage_a.arrivals import pending_arrival
from stage_end.waiting import stage_of
from tests.handlers.test_stage_a_handlers import (
    CONTEXT,
    REGION,
    dead_letters,
    eventbridge_arrival,
    executions,
    partition_state,
    queued,
    router,
    sqs_event,
    without_lists,
)
from tests.handlers.test_stage_a_handlers import aws as stage_a_aws

KEY = "engineering/mysql/customers/date=20220120/file.csv"
STAGE_B_MACHINE = f"arn:aws:states:{REGION}:123456789012:stateMachine:stage-b"


@pytest.fixture
def aws(stage_a_aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    monkeypatch.setenv("STAGE_A_STATE_MACHINE_ARN", stage_a_aws["machine"])
    monkeypatch.setenv("STAGE_B_STATE_MACHINE_ARN", STAGE_B_MACHINE)
    monkeypatch.setenv("STAGE_B_FOLLOW_UP_QUEUE_URL", stage_a_aws["queue_b"])  # no stage B run ends here
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")
    for cached in (stranded_run.environment, stranded_run.runtime, stranded_run.aws, stranded_sweep.dependencies):
        cached.cache_clear()
    yield stage_a_aws
    for cached in (stranded_run.environment, stranded_run.runtime, stranded_run.aws, stranded_sweep.dependencies):
        cached.cache_clear()


stage_a_aws = pytest.fixture(stage_a_aws.__wrapped__)  # type: ignore[attr-defined]


def status_change(aws: dict[str, Any], arn: str, status: str, **detail: str) -> dict[str, Any]:
    """Step Functions' event for an execution that ended (as EventBridge delivers it)."""
    return {
        "version": "0",
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "resources": [arn],
        "detail": {"executionArn": arn, "stateMachineArn": aws["machine"], "status": status, "input": None, **detail},
    }


def started(aws: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    router.handler(sqs_event(eventbridge_arrival(KEY)), CONTEXT)
    (execution,) = executions(aws)
    arn = execution["executionArn"]
    return arn, json.loads(aws["sfn"].describe_execution(executionArn=arn)["input"])["plan"]


def test_an_aborted_run_ends_its_lease_and_parks_its_arrival_once(aws: dict[str, Any]) -> None:
    """Before: nothing ran; the lease stayed held 3 h and the arrival was in no queue."""
    arn, plan = started(aws)
    s3 = boto3.client("s3", region_name=REGION)
    partial = plan["target_location"].removeprefix("s3://stage-bucket/") + "part-00000.parquet"
    s3.put_object(Bucket="stage-bucket", Key=partial, Body=b"x")  # the CTAS was under way
    aws["sfn"].stop_execution(executionArn=arn)
    event = status_change(aws, arn, "ABORTED")
    report = stranded_run.handler(event, CONTEXT)
    # The partial file, the manifest naming the files the run read and its batch (every leased run has both).
    assert report["ended"] is True and report["parked"] == [KEY] and report["partial_objects_deleted"] == 3
    assert "lease_owner" not in partition_state(plan["lease"]["key"])
    (parked,) = dead_letters(aws)
    assert parked["MessageAttributes"]["lakeline_reason"]["StringValue"].startswith("ctas failed: States.Aborted")
    # Delivered again: the run is ended already, nothing is parked twice.
    assert stranded_run.handler(event, CONTEXT)["ended"] is False
    assert dead_letters(aws) == []


def test_a_run_whose_catch_ran_the_failure_function_is_not_ended_twice(aws: dict[str, Any]) -> None:
    arn, plan = started(aws)
    error = {"Error": "Athena.QueryFailed", "Cause": "HIVE_BAD_DATA"}
    assert failure.handler({"plan": plan, "error": error}, CONTEXT)["parked"] == [KEY]
    report = stranded_run.handler(status_change(aws, arn, "FAILED", error="Athena.QueryFailed"), CONTEXT)
    assert report["ended"] is False
    assert len(dead_letters(aws)) == 1  # the failure function's only


def test_a_timed_out_run_hands_what_waits_to_a_follow_up(aws: dict[str, Any]) -> None:
    arn, plan = started(aws)
    later = "engineering/mysql/customers/date=20220120/file2.csv"
    router.handler(sqs_event(eventbridge_arrival(later)), CONTEXT)  # waits behind the run
    report = stranded_run.handler(status_change(aws, arn, "TIMED_OUT"), CONTEXT)
    assert report["parked"] == [KEY] and report["ended"] is True
    (follow_up,) = queued(aws, "follow_ups_a")
    lease = Lease.from_dict(follow_up["lakeline_follow_up"])
    # The follow-up names its lease; what it takes is what waits in the partition's state (re-read on resume).
    state = partition_state(plan["lease"]["key"])
    assert state["lease_owner"]["S"] == lease.owner
    assert [pending_arrival(entry).key for entry in state["pending"]["SS"]] == [later]


def test_a_run_aborted_after_its_commit_keeps_its_version(aws: dict[str, Any]) -> None:
    from lambdas.partition_commit import handler as commit

    arn, plan = started(aws)
    s3 = boto3.client("s3", region_name=REGION)
    written = plan["target_location"].removeprefix("s3://stage-bucket/") + "part-00000.parquet"
    s3.put_object(Bucket="stage-bucket", Key=written, Body=b"x")
    commit.handler({"plan": plan}, CONTEXT)
    report = stranded_run.handler(status_change(aws, arn, "ABORTED"), CONTEXT)
    assert report["ended"] is True and report["partial_objects_deleted"] == 0
    state = partition_state(plan["lease"]["key"])
    assert "lease_owner" not in state and state["version"]["N"] == "1"
    kept = [o["Key"] for o in s3.list_objects_v2(Bucket="stage-bucket")["Contents"]]
    # The version's files, and beside them its list of what it holds (lakeline.commits.applied), the manifest of
    # the files its run read (stage_a.manifest) and its batch (lakeline.commits.batch), kept with the version.
    assert without_lists(kept) == [written] and len(kept) == 4
    assert sum("/applied/" in key for key in kept) == 1 and sum(key.endswith("/manifest") for key in kept) == 1
    assert sum("/batch/" in key for key in kept) == 1


def test_an_event_of_another_state_machine_is_refused_by_name(aws: dict[str, Any]) -> None:
    event = status_change(aws, "arn:aws:states:us-east-1:123456789012:execution:other:x", "ABORTED")
    event["detail"]["stateMachineArn"] = "arn:aws:states:us-east-1:123456789012:stateMachine:other"
    with pytest.raises(ValueError, match="stateMachine:other is not a stage state machine"):
        stranded_run.handler(event, CONTEXT)


def commits(clock: list[float]) -> PartitionCommits:
    return PartitionCommits(
        boto3.client("dynamodb", region_name=REGION), "pipeline-state", lease_seconds=600, clock=lambda: clock[0]
    )


def waiting_behind(store: PartitionCommits, day: str) -> str:
    """A partition whose run took its lease, with a second arrival waiting behind it; its key."""
    key = f"commit#engineering_mysql_dev.customers/date={day}"
    root = f"s3://stage-bucket/engineering/mysql/customers/date={day}/"
    first = eventbridge_arrival(f"engineering/mysql/customers/date={day}/a.csv")
    second = eventbridge_arrival(f"engineering/mysql/customers/date={day}/b.csv")
    entry = json.dumps([second["detail"]["object"]["key"], "01", "2022-01-20T10:15:00+00:00", 1, "raw-bucket"])
    owner = new_run_token()
    assert store.begin(key, owner, f"{root}lakeline_run={owner}/", root, [json.dumps(first)]) is not None
    assert store.begin(key, new_run_token(), root, root, [entry]) is None
    return key


def test_the_sweep_starts_the_follow_up_of_an_expired_lease_and_leaves_a_live_one(aws: dict[str, Any]) -> None:
    clock = [1_000_000.0]
    store = commits(clock)
    expired = waiting_behind(store, "20220101")
    clock[0] += 700  # past the first lease
    live = waiting_behind(store, "20220102")
    sent: list[Lease] = []
    report = sweep_stranded(store, new_run_token, sent.append)
    assert report.stranded == [expired] and [lease.key for lease in sent] == [expired] and report.finished
    assert store.read(expired).lease_owner == sent[0].owner and len(sent[0].pending) == 2
    assert store.read(live).lease_owner != sent[0].owner
    # Swept again at once: the follow-up's lease is live, nothing is started twice.
    assert sweep_stranded(store, new_run_token, sent.append).stranded == [] and len(sent) == 1


def test_the_sweep_does_bounded_work_and_the_next_one_goes_on_from_there(aws: dict[str, Any]) -> None:
    clock = [1_000_000.0]
    store = commits(clock)
    keys = {waiting_behind(store, f"202201{day:02d}") for day in range(1, 6)}
    clock[0] += 700
    sent: list[Lease] = []
    first = sweep_stranded(store, new_run_token, sent.append, SweepLimits(max_items=100, max_starts=2))
    assert len(first.started) == 2 and not first.finished
    kept = store.client.get_item(TableName="pipeline-state", Key={"target_partition": {"S": CURSOR_KEY}})
    assert "Item" in kept  # where it stopped
    while len(sent) < 5:
        sweep_stranded(store, new_run_token, sent.append, SweepLimits(max_items=100, max_starts=2))
    assert {lease.key for lease in sent} == keys and len(sent) == 5


def test_the_sweep_function_queues_each_follow_up_on_its_stages_queue(aws: dict[str, Any]) -> None:
    _, plan = started(aws)
    router.handler(sqs_event(eventbridge_arrival("engineering/mysql/customers/date=20220120/b.csv")), CONTEXT)
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    key = plan["lease"]["key"]
    dynamodb.update_item(  # the run died with nothing to end it, long ago
        TableName="pipeline-state",
        Key={"target_partition": {"S": key}},
        UpdateExpression="SET lease_expires = :past",
        ExpressionAttributeValues={":past": {"N": "1"}},
    )
    report = stranded_sweep.handler({"source": "aws.events", "detail-type": "Scheduled Event"}, CONTEXT)
    assert report["stranded"] == [key] and report["started"] == [key]
    (follow_up,) = queued(aws, "follow_ups_a")
    router.handler(sqs_event(follow_up), CONTEXT)  # the router starts it as any follow-up
    assert len(executions(aws)) == 2


def test_a_run_that_died_with_its_batch_taken_and_nothing_else_waiting_is_swept_and_its_batch_run_again(
    aws: dict[str, Any],
) -> None:
    """Its batch left ``pending`` when it was planned (#39): the sweep finds the partition by the item's note of the
    batch, queues the follow-up on stage A's queue, and the follow-up takes the batch over."""
    arn, plan = started(aws)
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    key = plan["lease"]["key"]
    dynamodb.update_item(
        TableName="pipeline-state",
        Key={"target_partition": {"S": key}},
        UpdateExpression="SET lease_expires = :past",
        ExpressionAttributeValues={":past": {"N": "1"}},
    )
    assert "pending" not in dynamodb.get_item(TableName="pipeline-state", Key={"target_partition": {"S": key}})["Item"]
    report = stranded_sweep.handler({"source": "aws.events", "detail-type": "Scheduled Event"}, CONTEXT)
    assert report["stranded"] == [key] and report["started"] == [key]
    (follow_up,) = queued(aws, "follow_ups_a")
    router.handler(sqs_event(follow_up), CONTEXT)
    (second,) = [
        json.loads(aws["sfn"].describe_execution(executionArn=execution["executionArn"])["input"])
        for execution in executions(aws)
        if execution["executionArn"] != arn
    ]
    batch = read_batch(
        S3ObjectStore(boto3.client("s3", region_name=REGION)),
        BatchRef(**second["plan"]["batch"]),
        second["plan"]["target_location"],
    )
    assert [pending_arrival(entry).key for entry in batch.pending] == [plan["raw_key"]]


def test_a_stranded_partition_whose_entries_name_no_stage_is_refused_by_name_and_left_alone(
    aws: dict[str, Any],
) -> None:
    clock = [1_000_000.0]
    store = commits(clock)
    key = "commit#engineering_mysql_dev.customers/date=20220103"
    root = "s3://stage-bucket/engineering/mysql/customers/date=20220103/"
    assert store.begin(key, new_run_token(), root, root, ["not an arrival"]) is not None
    clock[0] += 700
    report = sweep_stranded(store, new_run_token, pytest.fail, check=lambda state: stage_of(min(state.pending)))
    assert report.stranded == [key] and "'not an arrival' is neither a stage A arrival" in report.refused[key]
    assert store.read(key).lease_expires == 1_000_600.0  # not taken for a run nobody would start
