"""LineageWriter and the input function against a moto queue: batching, retries, clear errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from lakeline.aws.retry import Backoff
from lakeline.aws.sqs import QueueSendError
from lakeline.errors import InvalidInputError
from lakeline.lineage.records.writer import LineageWriter
from tests.handlers.test_lineage_support import REGION, CallCounter, LambdaContext, create_queue

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


@pytest.fixture
def sqs() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("sqs", region_name=REGION)


def drain(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = []
    while True:
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return bodies
        for message in messages:
            bodies.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


def writer(sqs: Any, queue_url: str, attempts: int = 4) -> LineageWriter:
    return LineageWriter(
        sqs,
        queue_url,
        clock=lambda: NOW,
        ttl=timedelta(hours=24),
        backoff=Backoff(attempts=attempts, sleep=lambda _s: None),
    )


def test_a_step_with_25_outputs_is_queued_in_three_batches(sqs: Any) -> None:
    queue = create_queue(sqs, "lineage")
    counter = CallCounter(sqs, "sqs")
    first = writer(sqs, queue).step(
        root_id="run-1", parent_id="run-1", action_taken="RAW_DATA_INPUT", storage_locations=["s3://raw/f.csv"]
    )
    counter.calls.clear()
    records = writer(sqs, queue).step(
        root_id="run-1",
        parent_id=first[0].node_id,
        action_taken="GLUE_BATCH_SPLIT",
        storage_locations=[f"s3://stage/part-{i}" for i in range(25)],
        job_name="lakeline/stage_a",
    )
    assert counter.calls["SendMessageBatch"] == 3
    queued = drain(sqs, queue)
    assert sorted(queued, key=lambda m: m["node_id"]) == sorted(
        [r.to_message() for r in first + records], key=lambda m: m["node_id"]
    )
    assert all(m["recordedAt"] == int(NOW.timestamp()) and m["ttl_expiry"] == m["recordedAt"] + 86400 for m in queued)


def test_entries_sqs_did_not_take_are_sent_again(sqs: Any) -> None:
    queue = create_queue(sqs, "lineage")
    calls = {"n": 0}
    held: list[dict[str, Any]] = []

    def hold(params: dict[str, Any], **_: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 1:  # first call: SQS takes only the first three entries
            held[:] = params["Entries"][3:]
            params["Entries"] = params["Entries"][:3]

    def report(parsed: dict[str, Any], **_: Any) -> None:
        if calls["n"] == 1:
            parsed["Failed"] = [
                {"Id": e["Id"], "SenderFault": False, "Code": "InternalError", "Message": "try again"} for e in held
            ]

    sqs.meta.events.register("before-parameter-build.sqs.SendMessageBatch", hold)
    sqs.meta.events.register("after-call.sqs.SendMessageBatch", report)
    records = writer(sqs, queue).step(
        root_id="run-2",
        parent_id="run-2",
        action_taken="RAW_DATA_INPUT",
        storage_locations=[f"s3://raw/{i}" for i in range(8)],
    )
    assert calls["n"] == 2
    queued = drain(sqs, queue)
    assert sorted(m["node_id"] for m in queued) == sorted(r.node_id for r in records)  # each exactly once


def test_entries_refused_as_malformed_raise_naming_the_entry(sqs: Any) -> None:
    queue = create_queue(sqs, "lineage")

    refused: list[dict[str, Any]] = []

    def refuse(params: dict[str, Any], **_: Any) -> None:
        refused[:] = params["Entries"][1:2]  # SQS refuses the second entry as the sender's fault
        params["Entries"] = params["Entries"][:1]

    def report(parsed: dict[str, Any], **_: Any) -> None:
        parsed["Failed"] = [
            {"Id": e["Id"], "SenderFault": True, "Code": "InvalidMessageContents", "Message": "bad"} for e in refused
        ]

    sqs.meta.events.register("after-call.sqs.SendMessageBatch", report)
    sqs.meta.events.register("before-parameter-build.sqs.SendMessageBatch", refuse)
    with pytest.raises(QueueSendError, match="SQS refused message 1: InvalidMessageContents bad") as caught:
        writer(sqs, queue).step(
            root_id="run-3",
            parent_id="run-3",
            action_taken="RAW_DATA_INPUT",
            storage_locations=["s3://a/1", "s3://a/2"],
        )
    assert len(caught.value.unsent) == 1


def test_an_invalid_request_sends_nothing(sqs: Any) -> None:
    queue = create_queue(sqs, "lineage")
    good = {"root_id": "run-4", "parent_id": "run-4", "action_taken": "RAW", "storage_location": "s3://a/1"}
    with pytest.raises(InvalidInputError, match=r"request 1: .*storage_location"):
        writer(sqs, queue).record_many([good, {**good, "storage_location": "no-scheme"}])
    assert drain(sqs, queue) == []


def test_the_input_function_queues_requests_and_returns_node_ids(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from lambdas.lineage_input import handler

    queue = create_queue(sqs, "lineage")
    monkeypatch.setenv("LINEAGE_QUEUE_URL", queue)
    monkeypatch.setenv("LINEAGE_TTL_HOURS", "48")
    handler.writer.cache_clear()
    try:
        single = handler.handler(
            {"root_id": "run-5", "parent_id": "run-5", "action_taken": "RAW_DATA_INPUT",
             "record": {"storage_location": "s3://raw/x.csv"}},
            LambdaContext(),
        )  # fmt: skip
        batched = handler.handler(
            {"requests": [
                {"root_id": "run-5", "parent_id": single["node_ids"][0], "action_taken": "PROFILE_COMPLETE",
                 "records": [{"storage_location": "s3://stage/a"}, {"storage_location": "s3://stage/b"}]},
            ]},
            LambdaContext(),
        )  # fmt: skip
        with pytest.raises(InvalidInputError, match="action_taken"):
            handler.handler({"root_id": "run-5", "parent_id": "run-5", "storage_location": "s3://a"}, LambdaContext())
    finally:
        handler.writer.cache_clear()
    assert len(single["node_ids"]) == 1 and len(batched["node_ids"]) == 2
    queued = drain(sqs, queue)
    assert sorted(m["node_id"] for m in queued) == sorted(single["node_ids"] + batched["node_ids"])
    assert all(m["ttl_expiry"] - m["recordedAt"] == 48 * 3600 for m in queued)
