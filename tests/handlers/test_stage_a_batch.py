"""A stage A run's batch is an object its plan names (#39, ``lakeline.commits.batch``), read back by every function
that ends the run, as deployed: the commit takes exactly those entries out of ``pending`` (once, however often it
is retried), the failure path parks them and deletes the object only after it has ended the run's lease, and a
plan from before the objects (its batch inline) is still ended as it was."""

from __future__ import annotations

import copy
import json
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from lakeline.commits import Lease, PartitionCommits
from lakeline.commits.batch import BatchRef, RunBatch, read_batch
from lakeline.errors import InvalidInputError
from lakeline.storage import S3ObjectStore, manifest_prefix
from lambdas.partition_commit import handler as commit
from lambdas.stage_a_failure import handler as failure
from lambdas.stage_a_post_update import handler as post_update
from stage_a.arrivals import pending_arrival
from tests.handlers.test_stage_a_handlers import (
    CONTEXT,
    REGION,
    aws,
    dead_letters,
    eventbridge_arrival,
    executions,
    partition_state,
    plan_for,
    queued,
    router,
    sqs_event,
)

__all__ = ["aws"]  # the fixture

KEY = "engineering/mysql/customers/date=20220120/file.csv"
LATER = "engineering/mysql/customers/date=20220120/file2.csv"
OTHER = "engineering/mysql/customers/date=20220120/file3.csv"
ERROR = {"Error": "Athena.QueryFailed", "Cause": "HIVE_BAD_DATA: broken.parquet"}


def store() -> S3ObjectStore:
    return S3ObjectStore(boto3.client("s3", region_name=REGION))


def batch_of(plan: dict[str, Any]) -> RunBatch:
    return read_batch(store(), BatchRef(**plan["batch"]), plan["target_location"])


def pending_keys(plan: dict[str, Any]) -> list[str]:
    state = partition_state(plan["lease"]["key"])
    return sorted(pending_arrival(entry).key for entry in state.get("pending", {}).get("SS", []))


def taken_batch(plan: dict[str, Any]) -> str | None:
    """Where the partition's item says the batch its run took out of ``pending`` is."""
    return partition_state(plan["lease"]["key"]).get("taken_batch", {}).get("S")


def batch_key(plan: dict[str, Any]) -> str:
    return str(plan["batch"]["location"]).removeprefix("s3://stage-bucket/")


def test_a_retried_commit_takes_its_batch_out_of_pending_once(aws: dict[str, Any]) -> None:
    plan = plan_for(aws)
    router.handler(sqs_event(eventbridge_arrival(LATER)), CONTEXT)  # waits behind the run: not in its batch
    batch = batch_of(plan)
    assert [pending_arrival(entry).key for entry in batch.pending] == [KEY]
    assert batch.applied == (f"{KEY}@0062E99A88DC407460",)
    # Taken out of ``pending`` when it was planned: the item notes where it is.
    assert pending_keys(plan) == [LATER] and taken_batch(plan) == plan["batch"]["location"]
    first = commit.handler({"plan": plan}, CONTEXT)
    again = commit.handler({"plan": plan}, CONTEXT)
    assert first == again and first["version"] == 1
    assert pending_keys(plan) == [LATER] and taken_batch(plan) is None


def test_a_plan_naming_a_batch_not_its_own_is_refused_before_anything_is_committed(aws: dict[str, Any]) -> None:
    plan = plan_for(aws)
    s3 = boto3.client("s3", region_name=REGION)
    text = s3.get_object(Bucket="stage-bucket", Key=batch_key(plan))["Body"].read()
    # The same object under another run's manifests, and the run's own with another count.
    token = plan["run_token"]
    another = plan["target_location"].replace(token, token[:-1] + ("a" if token[-1] != "a" else "b"))
    other = f"{manifest_prefix(another)}batch/{batch_key(plan)[-16:]}"
    s3.put_object(Bucket="stage-bucket", Key=other.removeprefix("s3://stage-bucket/"), Body=text)
    for batch, refusal in (
        ({**plan["batch"], "location": other}, "is not the batch of the run"),
        ({**plan["batch"], "count": 2}, "takes 1 entries, not 2"),
    ):
        with pytest.raises(InvalidInputError, match=refusal):
            commit.handler({"plan": {**plan, "batch": batch}}, CONTEXT)
    assert taken_batch(plan) == plan["batch"]["location"]
    assert partition_state(plan["lease"]["key"])["version"]["N"] == "0"


def test_the_failure_path_parks_the_batch_once_and_deletes_it_after_ending_the_lease(aws: dict[str, Any]) -> None:
    plan = plan_for(aws)
    result = failure.handler({"plan": plan, "error": ERROR}, CONTEXT)
    assert result["parked"] == [KEY] and result["partial_objects_deleted"] == 2  # its manifest and its batch
    assert "lease_owner" not in partition_state(plan["lease"]["key"]) and pending_keys(plan) == []
    # Retried (the Lambda's own retry): the batch is gone with the run, whose lease was ended: nothing more.
    again = failure.handler({"plan": plan, "error": ERROR}, CONTEXT)
    assert again["parked"] == [] and len(dead_letters(aws)) == 1


def test_a_failure_path_that_dies_before_ending_the_lease_finds_the_batch_on_its_retry(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's manifests (its batch among them) are deleted only once its lease is ended: a retry after a crash
    between the two still parks the run's arrival."""
    plan = plan_for(aws)
    ending = PartitionCommits.commit

    def dies_once(self: PartitionCommits, lease: Lease, **kwargs: Any) -> Any:
        monkeypatch.setattr(PartitionCommits, "commit", ending)
        raise RuntimeError("the function timed out")

    monkeypatch.setattr(PartitionCommits, "commit", dies_once)
    with pytest.raises(RuntimeError, match="timed out"):
        failure.handler({"plan": plan, "error": ERROR}, CONTEXT)
    assert batch_of(plan).pending  # still there
    result = failure.handler({"plan": plan, "error": ERROR}, CONTEXT)
    assert result["parked"] == [KEY] and pending_keys(plan) == []


def test_a_batch_deleted_while_its_run_holds_the_lease_parks_what_the_run_knows_and_frees_the_partition(
    aws: dict[str, Any],
) -> None:
    """The batch left ``pending`` when it was planned, so its object was the only record of its arrivals: the run
    ends all the same, parks the arrival it knows with what to do, and the arrivals behind it run."""
    plan = plan_for(aws)
    (first,) = executions(aws)
    started = json.loads(aws["sfn"].describe_execution(executionArn=first["executionArn"])["input"])
    router.handler(sqs_event(eventbridge_arrival(LATER)), CONTEXT)
    boto3.client("s3", region_name=REGION).delete_object(Bucket="stage-bucket", Key=batch_key(plan))
    result = failure.handler({"plan": plan, "arrival": started["arrival"], "error": ERROR}, CONTEXT)
    assert result["parked"] == [KEY] and taken_batch(plan) is None
    (parked,) = dead_letters(aws)
    assert "cannot be named" in json.dumps(parked) and "upload the files of" in json.dumps(parked)
    assert pending_keys(plan) == [LATER]
    (follow_up,) = queued(aws, "follow_ups_a")
    router.handler(sqs_event(follow_up), CONTEXT)
    (second,) = [e for e in executions(aws) if e["executionArn"] != first["executionArn"]]
    follow_plan = json.loads(aws["sfn"].describe_execution(executionArn=second["executionArn"])["input"])["plan"]
    assert [pending_arrival(entry).key for entry in batch_of(follow_plan).pending] == [LATER]


def test_a_plan_in_flight_from_before_the_batch_objects_is_committed_and_ended_as_it_was(
    aws: dict[str, Any],
) -> None:
    plan = plan_for(aws)
    batch = batch_of(plan)
    inline = copy.deepcopy(plan)
    del inline["batch"]
    inline["applied"], inline["lease"]["pending"] = list(batch.applied), list(batch.pending)
    boto3.client("s3", region_name=REGION).delete_object(Bucket="stage-bucket", Key=batch_key(plan))
    assert commit.handler({"plan": inline}, CONTEXT)["version"] == 1
    assert pending_keys(plan) == []
    ended = post_update.handler({"plan": inline}, CONTEXT)
    assert ended["follow_up"] is None and "lease_owner" not in partition_state(plan["lease"]["key"])


def test_a_router_that_dies_between_taking_the_batch_and_starting_the_run_starts_that_batch_on_redelivery(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch leaves ``pending`` before the execution starts (#39): the record's redelivery finds it taken by
    its run and starts the run with it, once."""
    import stage_a.start

    starting = stage_a.start.start_execution_once
    monkeypatch.setattr(stage_a.start, "start_execution_once", dies_once(monkeypatch, starting))
    event = sqs_event(eventbridge_arrival(KEY))
    with pytest.raises(BatchProcessingError):  # the record comes back
        router.handler(event, CONTEXT)
    assert executions(aws) == [] and pending_keys({"lease": {"key": key_of(aws)}}) == []
    assert router.handler(event, CONTEXT)["batchItemFailures"] == []
    (execution,) = executions(aws)
    plan = json.loads(aws["sfn"].describe_execution(executionArn=execution["executionArn"])["input"])["plan"]
    assert [pending_arrival(entry).key for entry in batch_of(plan).pending] == [KEY]
    assert taken_batch(plan) == plan["batch"]["location"]


def key_of(aws: dict[str, Any]) -> str:
    """The key of the only partition item in the pipeline-state table."""
    items = boto3.client("dynamodb", region_name=REGION).scan(TableName="pipeline-state")["Items"]
    (key,) = [item["target_partition"]["S"] for item in items if item["target_partition"]["S"].startswith("commit#")]
    return key


def test_a_redelivery_that_takes_a_batch_after_its_run_s_commit_leaves_it_to_the_follow_up(
    aws: dict[str, Any],
) -> None:
    """The run's own arrival delivered again between its commit and its end re-takes the lease (its run token is
    fixed by the arrival) and takes what waits then; its start is a duplicate. The run's end does not release the
    partition while that batch is taken: its follow-up takes the batch over and loads it."""
    plan = plan_for(aws)
    (first,) = executions(aws)
    router.handler(sqs_event(eventbridge_arrival(LATER)), CONTEXT)
    assert commit.handler({"plan": plan}, CONTEXT)["version"] == 1
    router.handler(sqs_event(eventbridge_arrival(KEY)), CONTEXT)  # the redelivery
    assert len(executions(aws)) == 1 and pending_keys(plan) == [] and taken_batch(plan) is not None
    ended = post_update.handler({"plan": plan}, CONTEXT)
    assert ended["follow_up"] is not None
    (follow_up,) = queued(aws, "follow_ups_a")
    router.handler(sqs_event(follow_up), CONTEXT)
    (second,) = [e for e in executions(aws) if e["executionArn"] != first["executionArn"]]
    follow_plan = json.loads(aws["sfn"].describe_execution(executionArn=second["executionArn"])["input"])["plan"]
    # The redelivered arrival came back with it; its rows are in version 1 already, so only LATER's are added.
    taken = batch_of(follow_plan)
    assert sorted(pending_arrival(entry).key for entry in taken.pending) == [KEY, LATER]
    assert [applied.rsplit("@", 1)[0] for applied in taken.applied] == [LATER]
    assert taken_batch(plan) == follow_plan["batch"]["location"]  # the follow-up's own batch now
    assert commit.handler({"plan": follow_plan}, CONTEXT)["version"] == 2
    assert post_update.handler({"plan": follow_plan}, CONTEXT)["follow_up"] is None
    assert "lease_owner" not in partition_state(plan["lease"]["key"]) and taken_batch(plan) is None


def test_the_run_s_own_arrival_delivered_again_before_its_commit_waits_for_no_second_run(
    aws: dict[str, Any],
) -> None:
    """A record back after ``NoRunSlot``, or SQS's own redelivery, records the arrival again after its run's batch
    took it: the router takes it out again, so no follow-up runs for it."""
    plan = plan_for(aws)
    router.handler(sqs_event(eventbridge_arrival(KEY)), CONTEXT)  # the redelivery, while the run works
    assert pending_keys(plan) == [] and len(executions(aws)) == 1
    commit.handler({"plan": plan}, CONTEXT)
    assert post_update.handler({"plan": plan}, CONTEXT)["follow_up"] is None


def test_a_taken_batch_is_planned_whole_when_batches_are_cut_smaller_since(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release that lowers ``MAX_RUN_ARRIVALS`` while a batch is taken (its run waiting for a slot, or its router
    died before the start): the batch is planned as it was taken, none of it cut off and lost."""
    import stage_a.plan
    import stage_a.start

    plan = plan_for(aws)
    for key in (LATER, OTHER):
        router.handler(sqs_event(eventbridge_arrival(key)), CONTEXT)
    commit.handler({"plan": plan}, CONTEXT)
    post_update.handler({"plan": plan}, CONTEXT)
    (follow_up,) = queued(aws, "follow_ups_a")
    starting = stage_a.start.start_execution_once
    monkeypatch.setattr(stage_a.start, "start_execution_once", dies_once(monkeypatch, starting))
    with pytest.raises(BatchProcessingError):
        router.handler(sqs_event(follow_up), CONTEXT)  # took LATER and OTHER, then died
    monkeypatch.setattr(stage_a.plan, "MAX_RUN_ARRIVALS", 1)
    router.handler(sqs_event(follow_up), CONTEXT)
    follow_plans = [
        json.loads(aws["sfn"].describe_execution(executionArn=e["executionArn"])["input"])["plan"]
        for e in executions(aws)
    ]
    (follow_plan,) = [p for p in follow_plans if p["run_token"] != plan["run_token"]]
    assert sorted(pending_arrival(entry).key for entry in batch_of(follow_plan).pending) == [LATER, OTHER]


def dies_once(monkeypatch: pytest.MonkeyPatch, starting: Any) -> Any:
    """``start_execution_once`` that dies (the function timed out) the first time, then starts as ``starting``."""
    import stage_a.start

    def start(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(stage_a.start, "start_execution_once", starting)
        raise RuntimeError("the function timed out")

    return start


def test_a_batch_to_take_over_whose_object_is_gone_is_reported_and_the_partition_s_other_arrivals_run(
    aws: dict[str, Any],
) -> None:
    """A run that ended without ending its batch, whose object was then deleted by hand: the run that takes the
    partition next parks a notice naming the batch in queue A's DLQ, ends the batch's note, and loads the rest."""
    plan = plan_for(aws)
    router.handler(sqs_event(eventbridge_arrival(LATER)), CONTEXT)
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    dynamodb.update_item(  # the run died with nothing to end it, long ago
        TableName="pipeline-state",
        Key={"target_partition": {"S": plan["lease"]["key"]}},
        UpdateExpression="SET lease_expires = :past",
        ExpressionAttributeValues={":past": {"N": "1"}},
    )
    boto3.client("s3", region_name=REGION).delete_object(Bucket="stage-bucket", Key=batch_key(plan))
    router.handler(sqs_event(eventbridge_arrival(OTHER)), CONTEXT)
    (notice,) = dead_letters(aws)
    assert "cannot be named" in json.dumps(notice) and plan["batch"]["location"] in json.dumps(notice)
    follow_plans = [
        json.loads(aws["sfn"].describe_execution(executionArn=e["executionArn"])["input"])["plan"]
        for e in executions(aws)
    ]
    (second,) = [p for p in follow_plans if p["run_token"] != plan["run_token"]]
    assert sorted(pending_arrival(entry).key for entry in batch_of(second).pending) == [LATER, OTHER]
    assert taken_batch(plan) == second["batch"]["location"]
