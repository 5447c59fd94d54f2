"""The nightly schedule: roots loaded since the last run, found through the trace index, never a scan."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from lakeline.aws.retry import NO_WAIT
from lakeline.lineage.records.load import LineageLoader
from lakeline.lineage.records.schedule import ScheduleSettings, last_until, save_until, schedule_traces
from lakeline.lineage.records.table import LINEAGE_TABLE, epoch_millis
from tests.handlers.test_lineage_support import (
    REGION,
    TABLE,
    CallCounter,
    LambdaContext,
    chain_records,
    create_queue,
    create_table,
)

DAY1 = datetime(2026, 11, 21, 15, 0, tzinfo=UTC)


@pytest.fixture
def aws() -> Iterator[tuple[Any, Any, str]]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        create_table(dynamodb)
        yield dynamodb, sqs, create_queue(sqs, "trace")


def load_at(dynamodb: Any, moment: datetime, *roots: str) -> None:
    records = [
        r
        for root in roots
        for r in chain_records(root, ["RAW_DATA_INPUT", "CALCULATION_COMPLETE"], now=moment, fan_out=30)
    ]
    loader = LineageLoader(dynamodb, TABLE, backoff=NO_WAIT, clock_ms=lambda: epoch_millis(moment))
    assert not loader.load([(f"m{i}", r) for i, r in enumerate(records)]).failed


def queued(sqs: Any, queue: str) -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = []
    while messages := sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", []):
        for message in messages:
            bodies.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    return sorted(bodies, key=lambda body: body["root_id"])


def test_each_run_queues_the_roots_loaded_since_the_previous_one(aws: tuple[Any, Any, str]) -> None:
    dynamodb, sqs, queue = aws
    counter = CallCounter(dynamodb, "dynamodb")
    load_at(dynamodb, DAY1, "root-a", "root-b")
    load_at(dynamodb, DAY1 + timedelta(hours=5), "root-a")  # more steps of root-a, another batch
    night1 = datetime(2026, 11, 22, 1, 0, tzinfo=UTC)
    first = schedule_traces(dynamodb, TABLE, sqs, queue, now=night1, backoff=NO_WAIT)
    assert first.roots == ["root-a", "root-b"] and first.state_saved
    assert queued(sqs, queue) == [
        {"root_id": "root-a", "trace_date": "2026-11-22"},
        {"root_id": "root-b", "trace_date": "2026-11-22"},
    ]
    # The first run looks back two days: three days' shards, one Query page each; nothing scanned.
    assert counter.calls["Query"] == first.queries == 3 * LINEAGE_TABLE.trace_bucket_shards
    assert counter.calls["Scan"] == 0

    load_at(dynamodb, night1 + timedelta(hours=10), "root-c")
    load_at(dynamodb, night1 + timedelta(hours=23, minutes=59), "root-d")  # inside the settle window
    night2 = night1 + timedelta(days=1)
    second = schedule_traces(dynamodb, TABLE, sqs, queue, now=night2, backoff=NO_WAIT)
    assert second.roots == ["root-c"] and second.since_ms == first.until_ms
    assert queued(sqs, queue) == [{"root_id": "root-c", "trace_date": "2026-11-23"}]

    third = schedule_traces(dynamodb, TABLE, sqs, queue, now=night2 + timedelta(days=1), backoff=NO_WAIT)
    assert third.roots == ["root-d"]
    assert counter.calls["Scan"] == 0


def test_a_run_that_finds_its_window_moved_does_not_move_it_back(aws: tuple[Any, Any, str]) -> None:
    dynamodb, sqs, queue = aws
    load_at(dynamodb, DAY1, "root-a")
    night = datetime(2026, 11, 22, 1, 0, tzinfo=UTC)
    assert schedule_traces(dynamodb, TABLE, sqs, queue, now=night, backoff=NO_WAIT).state_saved
    later = schedule_traces(dynamodb, TABLE, sqs, queue, now=night + timedelta(hours=1), backoff=NO_WAIT)
    assert later.state_saved and later.roots == []
    # A run that read the window before `later` moved it must not overwrite it.
    assert not save_until(dynamodb, TABLE, previous=epoch_millis(night - timedelta(minutes=2)), until_ms=1)
    assert last_until(dynamodb, TABLE) == later.until_ms


def test_catch_up_is_bounded(aws: tuple[Any, Any, str]) -> None:
    dynamodb, sqs, queue = aws
    settings = ScheduleSettings(first_run_lookback=timedelta(days=400), max_catch_up=timedelta(days=3))
    result = schedule_traces(dynamodb, TABLE, sqs, queue, now=DAY1, settings=settings, backoff=NO_WAIT)
    assert result.queries == 4 * LINEAGE_TABLE.trace_bucket_shards  # three days back and today, not 400


def test_the_schedule_function_uses_the_events_time(aws: tuple[Any, Any, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from lambdas.lineage_schedule import handler

    dynamodb, sqs, queue = aws
    load_at(dynamodb, DAY1, "root-e")
    monkeypatch.setenv("LINEAGE_TABLE_NAME", TABLE)
    monkeypatch.setenv("TRACE_QUEUE_URL", queue)
    handler.dependencies.cache_clear()
    event = {
        "version": "0",
        "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": "2026-11-22T01:00:00Z",
        "region": REGION,
        "resources": [f"arn:aws:events:{REGION}:123456789012:rule/lineage-nightly"],
        "detail": {},
    }
    try:
        summary = handler.handler(event, LambdaContext())
    finally:
        handler.dependencies.cache_clear()
    assert summary["trace_date"] == "2026-11-22" and summary["roots"] == 1
    assert queued(sqs, queue) == [{"root_id": "root-e", "trace_date": "2026-11-22"}]
