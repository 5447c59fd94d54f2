"""Tracing roots from the moto table into the moto archive bucket, through the trace function."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from lakeline.aws.retry import NO_WAIT
from lakeline.lineage.records.archive import S3ArchiveStore, bucket_object_key, read_root_lines
from lakeline.lineage.records.compact import compact_day
from lakeline.lineage.records.load import LineageLoader
from lakeline.lineage.records.model import LineageRecord, build_records
from lakeline.lineage.records.table import TRACED_AT, epoch_millis, key_item, traced_marker_key
from lakeline.lineage.records.trace import TraceMessage, trace_root
from tests.handlers.test_lineage_support import (
    REGION,
    TABLE,
    LambdaContext,
    chain_records,
    create_queue,
    create_table,
    send_bodies,
    sqs_event,
)

BUCKET = "lineage-archive"
LOADED = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
TRACED = datetime(2026, 11, 23, 1, 0, tzinfo=UTC)


@pytest.fixture
def aws() -> Iterator[tuple[Any, Any]]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        s3 = boto3.client("s3", region_name=REGION)
        create_table(dynamodb)
        s3.create_bucket(Bucket=BUCKET)
        yield dynamodb, s3


def load(dynamodb: Any, records: list[LineageRecord]) -> None:
    report = LineageLoader(dynamodb, TABLE, backoff=NO_WAIT, clock_ms=lambda: epoch_millis(LOADED)).load(
        [(f"m{i}", r) for i, r in enumerate(records)]
    )
    assert not report.failed


def record(root: str, node: str, parent: str, action: str) -> LineageRecord:
    [built] = build_records(
        {"root_id": root, "parent_id": parent, "action_taken": action,
         "record": {"storage_location": f"s3://lake/{node}", "node_id": node}},
        now=LOADED,
    )  # fmt: skip
    return built


def archived(s3: Any, key: str) -> list[dict[str, Any]]:
    body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    return [json.loads(line) for line in body.decode().splitlines()]


def test_the_trace_function_archives_every_root_of_its_batch(
    aws: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from lambdas.lineage_trace import handler

    dynamodb, s3 = aws
    complete = chain_records(
        "root-ok", ["RAW_DATA_INPUT", "DQ_CHECK_PASS", "CALCULATION_COMPLETE"], now=LOADED, fan_out=3
    )
    broken = [
        record("root-broken", "raw", "root-broken", "RAW_DATA_INPUT"),
        record("root-broken", "stopped", "raw", "PROFILE_COMPLETE"),  # never reached a terminal step
        record("root-broken", "orphan", "expired-parent", "CALCULATION_COMPLETE"),
        record("root-broken", "loop-a", "loop-b", "GLUE_BATCH_SPLIT"),
        record("root-broken", "loop-b", "loop-a", "GLUE_BATCH_SPLIT"),
    ]
    load(dynamodb, complete + broken)
    sqs = boto3.client("sqs", region_name=REGION)
    queue = create_queue(sqs, "trace")
    send_bodies(
        sqs,
        queue,
        [
            json.dumps({"root_id": "root-ok", "trace_date": "2026-11-23"}),
            json.dumps({"root_id": "root-broken", "trace_date": "2026-11-23"}),
            json.dumps({"root_id": "_not a root"}),
        ],
    )
    event = sqs_event(sqs, queue, expected=3)
    monkeypatch.setenv("LINEAGE_TABLE_NAME", TABLE)
    monkeypatch.setenv("ARCHIVE_BUCKET", BUCKET)
    monkeypatch.setenv("ARCHIVE_PREFIX", "lineage")
    handler.dependencies.cache_clear()
    try:
        response = handler.handler(event, LambdaContext())
    finally:
        handler.dependencies.cache_clear()
    [bad] = [r["messageId"] for r in event["Records"] if "_not a root" in r["body"]]
    assert response["batchItemFailures"] == [{"itemIdentifier": bad}]

    # Each root staged (outside the table's day folders) for the compaction, which folds them into buckets.
    staged = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"])
    assert [key.rsplit("-", 1)[0] for key in staged] == [
        "lineage/_staged/dt=2026-11-23/trace-root-broken", "lineage/_staged/dt=2026-11-23/trace-root-ok",
    ]  # fmt: skip
    store = S3ArchiveStore(s3, BUCKET, "lineage")
    compact_day(store, date(2026, 11, 23))
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix="lineage/_staged/")
    ok_key = bucket_object_key(date(2026, 11, 23), "root-ok")
    ok = [line for line in archived(s3, f"lineage/{ok_key}") if line["root_id"] == "root-ok"]
    assert [line["status"] for line in ok] == ["complete"] * 3
    assert [step["action_taken"] for step in ok[0]["lineage"]] == [
        "RAW_DATA_INPUT", "DQ_CHECK_PASS", "CALCULATION_COMPLETE", "DATA_COMPACTION",
    ]  # fmt: skip
    assert ok[0]["lineage"][-1]["storage_location"] == f"s3://{BUCKET}/lineage/{ok_key}"
    broken_lines = {line.record_id: line.status for line in read_root_lines(store, "root-broken")}
    assert broken_lines == {"stopped": "unterminated", "orphan": "missing_parent", "loop-b": "cycle"}
    marker = dynamodb.get_item(TableName=TABLE, Key=key_item(traced_marker_key("root-ok")))["Item"]
    assert TRACED_AT in marker


def test_a_root_of_10000_nodes_is_traced_completely(aws: tuple[Any, Any]) -> None:
    dynamodb, s3 = aws
    root = "root-big"
    records = [record(root, "raw", root, "RAW_DATA_INPUT"), record(root, "split", "raw", "GLUE_BATCH_SPLIT")]
    for branch in range(4999):
        records.append(record(root, f"p{branch}", "split", "PROFILE_COMPLETE"))
        records.append(record(root, f"c{branch}", f"p{branch}", "CALCULATION_COMPLETE"))
    assert len(records) == 10_000
    load(dynamodb, records)
    store = S3ArchiveStore(s3, BUCKET)
    result = trace_root(dynamodb, TABLE, TraceMessage(root_id=root), store, clock=lambda: TRACED)
    assert (result.nodes, result.lines, result.statuses) == (10_000, 4999, {"complete": 4999})
    assert result.key == f"dt=2026-11-23/trace-root-big-{epoch_millis(TRACED):013d}.jsonl"
    assert result.location == store.location(bucket_object_key(date(2026, 11, 23), root))
    compact_day(store, date(2026, 11, 23))
    lines = read_root_lines(store, root)
    assert len(lines) == 4999
    seen = {node.node_id for line in lines for node in line.nodes()}
    assert seen == {r.node_id for r in records}
    assert all([n.node_id for n in line.nodes()][:2] == ["raw", "split"] and len(line.lineage) == 5 for line in lines)


def test_a_redelivered_trace_replaces_the_root_s_lines(aws: tuple[Any, Any]) -> None:
    dynamodb, s3 = aws
    load(dynamodb, chain_records("root-r", ["RAW_DATA_INPUT", "CALCULATION_COMPLETE"], now=LOADED, fan_out=4))
    store = S3ArchiveStore(s3, BUCKET)
    message = TraceMessage(root_id="root-r", trace_date=date(2026, 11, 23))
    first = trace_root(dynamodb, TABLE, message, store, clock=lambda: TRACED)
    compact_day(store, date(2026, 11, 23))  # folded once, then traced again: before and after its compaction
    later = datetime(2026, 11, 23, 1, 7, tzinfo=UTC)
    again = trace_root(dynamodb, TABLE, message, store, clock=lambda: later)
    assert first.location == again.location
    compact_day(store, date(2026, 11, 23))
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert keys == [bucket_object_key(date(2026, 11, 23), "root-r")]
    assert [line["record_id"] for line in archived(s3, keys[0])] == [f"{r}" for r in sorted_leaves(dynamodb)]
    marker = dynamodb.get_item(TableName=TABLE, Key=key_item(traced_marker_key("root-r")))["Item"]
    assert marker[TRACED_AT] == {"N": str(epoch_millis(later))}
    # An older trace finishing late does not move traced_at back.
    trace_root(dynamodb, TABLE, message, store, clock=lambda: TRACED)
    marker = dynamodb.get_item(TableName=TABLE, Key=key_item(traced_marker_key("root-r")))["Item"]
    assert marker[TRACED_AT] == {"N": str(epoch_millis(later))}


def sorted_leaves(dynamodb: Any) -> list[str]:
    items = dynamodb.query(
        TableName=TABLE,
        IndexName="action-index",
        KeyConditionExpression="root_id = :r AND action_taken = :a",
        ExpressionAttributeValues={":r": {"S": "root-r"}, ":a": {"S": "CALCULATION_COMPLETE"}},
    )["Items"]
    return sorted(item["node_id"]["S"] for item in items)


def test_a_root_with_nothing_left_writes_nothing(aws: tuple[Any, Any]) -> None:
    dynamodb, s3 = aws
    result = trace_root(
        dynamodb, TABLE, TraceMessage(root_id="root-gone"), S3ArchiveStore(s3, BUCKET), clock=lambda: TRACED
    )
    assert (result.nodes, result.key) == (0, None)
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)
