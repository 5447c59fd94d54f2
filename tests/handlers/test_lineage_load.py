"""Loading lineage records into the moto table: write calls, duplicates, throttling, partial failures."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from lakeline.aws.retry import Backoff
from lakeline.lineage.records.load import LineageLoader
from lakeline.lineage.records.table import LOADED_AT, TRACE_BUCKET
from lakeline.lineage.records.writer import send_records
from tests.handlers.test_lineage_support import (
    REGION,
    TABLE,
    CallCounter,
    LambdaContext,
    Unprocessed,
    chain_records,
    client_error,
    create_queue,
    create_table,
    send_bodies,
    sqs_event,
    table_items,
)

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


class Sleeps:
    def __init__(self) -> None:
        self.seconds: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        create_table(client)
        yield client


def loader(client: Any, sleeps: Sleeps | None = None, attempts: int = 5) -> LineageLoader:
    backoff = Backoff(attempts=attempts, sleep=sleeps or Sleeps(), jitter=lambda: 1.0)
    return LineageLoader(client, TABLE, backoff=backoff, clock_ms=lambda: 1_795_000_000_000)


def pairs(records: list[Any], prefix: str = "m") -> list[tuple[str, Any]]:
    return [(f"{prefix}{i}", record) for i, record in enumerate(records)]


@pytest.mark.parametrize("count", [1, 25, 26, 100, 1000])
def test_n_records_take_at_most_ceil_n_over_25_write_calls(dynamodb: Any, count: int) -> None:
    counter = CallCounter(dynamodb, "dynamodb")
    records = chain_records("root-a", ["RAW_DATA_INPUT", "CALCULATION_COMPLETE"], now=NOW, fan_out=max(count - 1, 1))
    records += chain_records("root-b", ["RAW_DATA_INPUT"], now=NOW)
    report = loader(dynamodb).load(pairs(records[:count]))
    assert report.write_calls == counter.calls["BatchWriteItem"] == math.ceil(count / 25)
    assert not report.failed
    stored = table_items(dynamodb, "root-a") + table_items(dynamodb, "root-b")
    assert len(stored) == count
    assert all(item[LOADED_AT] == {"N": "1795000000000"} for item in stored)
    # One item per root carries the trace-index flag.
    flagged = [item for item in stored if TRACE_BUCKET in item]
    assert len(flagged) == len({item["root_id"]["S"] for item in stored})
    assert flagged[0][TRACE_BUCKET]["S"].startswith("2026-11-18#")


def test_duplicate_keys_in_a_batch_collapse_into_one_item(dynamodb: Any) -> None:
    counter = CallCounter(dynamodb, "dynamodb")
    records = chain_records("root-d", ["RAW_DATA_INPUT", "CALCULATION_COMPLETE"], now=NOW, fan_out=24)
    batch = pairs(records) + pairs(records[:10], prefix="again")  # redelivered twins in the same batch
    report = loader(dynamodb).load(batch)
    assert report.items == 25 and report.write_calls == counter.calls["BatchWriteItem"] == 1
    assert not report.failed
    assert len(table_items(dynamodb, "root-d")) == 25


def test_unprocessed_items_are_retried_with_backoff_until_written(dynamodb: Any) -> None:
    sleeps = Sleeps()
    # First call: DynamoDB leaves 7 of 25 unprocessed; second call: 2 of those 7; then all go through.
    unprocessed = Unprocessed(dynamodb, lambda call, requests: {1: list(range(7)), 2: [0, 1]}.get(call, []))
    records = chain_records("root-u", ["RAW_DATA_INPUT", "CALCULATION_COMPLETE"], now=NOW, fan_out=24)
    report = loader(dynamodb, sleeps).load(pairs(records))
    assert not report.failed
    assert report.write_calls == unprocessed.call == 3 and report.retries == 2
    assert sleeps.seconds == [0.05, 0.1]  # jitter pinned to its maximum: base, 2 * base
    assert len(table_items(dynamodb, "root-u")) == 25


def test_items_still_unprocessed_after_the_last_attempt_fail_only_their_messages(dynamodb: Any) -> None:
    records = chain_records("root-x", ["RAW_DATA_INPUT", "CALCULATION_COMPLETE"], now=NOW, fan_out=29)
    stuck = records[3].node_id

    def hold_stuck(call: int, requests: list[dict[str, Any]]) -> list[int]:
        return [i for i, r in enumerate(requests) if r["PutRequest"]["Item"]["node_id"]["S"] == stuck]

    Unprocessed(dynamodb, hold_stuck)
    batch = [*pairs(records), ("twin-of-3", records[3])]
    report = loader(dynamodb, attempts=3).load(batch)
    assert set(report.failed) == {"m3", "twin-of-3"}
    assert "UnprocessedItems after 3 attempts" in report.failed["m3"]
    assert {item["node_id"]["S"] for item in table_items(dynamodb, "root-x")} == {
        r.node_id for r in records if r.node_id != stuck
    }


def test_a_throttled_call_is_repeated(dynamodb: Any) -> None:
    counter = CallCounter(dynamodb, "dynamodb")
    throttled = iter([True, True])

    def throttle(**_: Any) -> Any:
        if next(throttled, False):
            return client_error("ProvisionedThroughputExceededException", "slow down")
        return None

    dynamodb.meta.events.register("before-call.dynamodb.BatchWriteItem", throttle)
    sleeps = Sleeps()
    records = chain_records("root-t", ["RAW_DATA_INPUT"], now=NOW, fan_out=10)
    report = loader(dynamodb, sleeps).load(pairs(records))
    assert not report.failed and report.write_calls == counter.calls["BatchWriteItem"] == 3
    assert len(sleeps.seconds) == 2
    assert len(table_items(dynamodb, "root-t")) == 10


def test_an_item_dynamodb_refuses_is_isolated_and_its_neighbours_are_written(dynamodb: Any) -> None:
    records = chain_records("root-v", ["RAW_DATA_INPUT", "CALCULATION_COMPLETE"], now=NOW, fan_out=24)
    bad = records[17].node_id

    def refuse(params: dict[str, Any], **_: Any) -> Any:
        body = params["body"].decode() if isinstance(params["body"], bytes) else params["body"]
        return client_error("ValidationException", "Item size has exceeded the maximum") if bad in body else None

    dynamodb.meta.events.register("before-call.dynamodb.BatchWriteItem", refuse)
    report = loader(dynamodb).load(pairs(records))
    assert list(report.failed) == ["m17"] and "ValidationException" in report.failed["m17"]
    assert len(table_items(dynamodb, "root-v")) == 24
    assert report.write_calls <= 1 + 2 * math.ceil(math.log2(25))  # bisection, not one call per item


# -- the Lambda handler, on a real SQS event ----------------------------------------------------------


DEAD_LETTERS = "lineage-dlq"


@pytest.fixture
def load_handler(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from lambdas.lineage_load import handler

    sqs = boto3.client("sqs", region_name=REGION)
    monkeypatch.setenv("LINEAGE_TABLE_NAME", TABLE)
    monkeypatch.setenv("LINEAGE_DEAD_LETTER_QUEUE_URL", create_queue(sqs, DEAD_LETTERS))
    for cached in (handler.loader, handler.environment, handler.sqs):
        cached.cache_clear()
    yield handler
    for cached in (handler.loader, handler.environment, handler.sqs):
        cached.cache_clear()


def parked(sqs: Any) -> dict[str, str]:
    """What reached the lineage DLQ: body -> the reason it was parked with."""
    queue = sqs.get_queue_url(QueueName=DEAD_LETTERS)["QueueUrl"]
    letters: dict[str, str] = {}
    while batch := sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, MessageAttributeNames=["All"]).get(
        "Messages", []
    ):
        for letter in batch:
            letters[letter["Body"]] = letter["MessageAttributes"]["lakeline_reason"]["StringValue"]
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=letter["ReceiptHandle"])
    return letters


def test_handler_parks_invalid_messages_with_their_reason_and_writes_their_neighbours(
    load_handler: Any, dynamodb: Any
) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    queue = create_queue(sqs, "lineage")
    records = chain_records("root-h", ["RAW_DATA_INPUT", "CALCULATION_COMPLETE"], now=NOW, fan_out=7)
    send_records(sqs, queue, records)
    good = records[0].to_message()
    bad = [
        "not json at all",
        json.dumps({**good, "storage_location": "no scheme"}),
        json.dumps({k: v for k, v in good.items() if k != "parent_id"}),
    ]
    send_bodies(sqs, queue, bad)
    event = sqs_event(sqs, queue, expected=11)
    response = load_handler.handler(event, LambdaContext())
    # Issue 17: they were reported for redelivery, retried three times and dead-lettered without a reason.
    assert response["batchItemFailures"] == []
    letters = parked(sqs)
    assert set(letters) == set(bad)
    assert "invalid lineage record" in letters[bad[0]]
    assert "storage_location: 'no scheme' is not a storage location" in letters[bad[1]]
    assert "parent_id: required field is missing" in letters[bad[2]]
    assert {item["node_id"]["S"] for item in table_items(dynamodb, "root-h")} == {r.node_id for r in records}

    # SQS redelivers the same batch: the same nodes are overwritten, none added.
    response = load_handler.handler(event, LambdaContext())
    assert response["batchItemFailures"] == []
    assert len(table_items(dynamodb, "root-h")) == len(records)


def test_a_second_parent_for_a_node_is_parked_and_the_first_edge_kept(load_handler: Any, dynamodb: Any) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    queue = create_queue(sqs, "lineage")
    first, second, third = chain_records("root-p", ["RAW_DATA_INPUT", "STEP_A", "STEP_B"], now=NOW)
    # Two messages give node "shared" two different parents, in one batch and across batches.
    shared = [record.model_copy(update={"node_id": "shared"}) for record in (second, third)]
    send_records(sqs, queue, [first, shared[0], shared[1], shared[0]])
    response = load_handler.handler(sqs_event(sqs, queue, expected=4), LambdaContext())
    assert response["batchItemFailures"] == []
    stored = {item["node_id"]["S"]: item["parent_id"]["S"] for item in table_items(dynamodb, "root-p")}
    assert stored == {first.node_id: "root-p", "shared": second.parent_id}
    [(body, reason)] = parked(sqs).items()
    assert json.loads(body)["parent_id"] == third.parent_id
    assert f"node 'shared' of root 'root-p' already has parent {second.parent_id!r} in an earlier message" in reason

    # In a later batch, the stored edge stands and the conflicting record is parked again.
    send_records(sqs, queue, [shared[1], shared[0]])
    response = load_handler.handler(sqs_event(sqs, queue, expected=2), LambdaContext())
    assert response["batchItemFailures"] == []
    assert {item["node_id"]["S"]: item["parent_id"]["S"] for item in table_items(dynamodb, "root-p")} == stored
    [reason] = parked(sqs).values()
    assert f"already has parent {second.parent_id!r} in the lineage table" in reason


def test_handler_reports_messages_whose_writes_kept_failing(
    load_handler: Any, dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    queue = create_queue(sqs, "lineage")
    records = chain_records("root-k", ["RAW_DATA_INPUT", "CALCULATION_COMPLETE"], now=NOW, fan_out=4)
    send_records(sqs, queue, records)
    stuck = records[-1].node_id

    def hold_stuck(call: int, requests: list[dict[str, Any]]) -> list[int]:
        return [i for i, r in enumerate(requests) if r["PutRequest"]["Item"]["node_id"]["S"] == stuck]

    # The handler makes its own client from the default session: hook the session before it does.
    monkeypatch.setenv("LINEAGE_WRITE_ATTEMPTS", "2")
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # restored after the test, hooks and all
    boto3.setup_default_session(region_name=REGION)
    assert boto3.DEFAULT_SESSION is not None
    Unprocessed(boto3.DEFAULT_SESSION, hold_stuck)
    event = sqs_event(sqs, queue, expected=5)
    response = load_handler.handler(event, LambdaContext())
    [failure] = response["batchItemFailures"]
    [stuck_message] = [r for r in event["Records"] if json.loads(r["body"])["node_id"] == stuck]
    assert failure["itemIdentifier"] == stuck_message["messageId"]
    assert len(table_items(dynamodb, "root-k")) == 4
