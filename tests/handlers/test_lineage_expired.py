"""Items removed by TTL before a trace archived them are archived from the table's stream.

Stream records come from moto's own stream of the lineage table (a real DeleteItem), shaped as
Lambda delivers them; the TTL service's ``userIdentity`` is added, as DynamoDB adds it to the
records of its TTL deletions (moto does not expire items by itself).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from lakeline.aws.retry import NO_WAIT
from lakeline.lineage.records.archive import S3ArchiveStore, expired_object_key, read_root_lines
from lakeline.lineage.records.compact import compact_archive
from lakeline.lineage.records.load import LineageLoader
from lakeline.lineage.records.table import epoch_millis, key_item, traced_marker_key
from lakeline.lineage.records.trace import TraceMessage, trace_root
from tests.handlers.test_lineage_support import (
    REGION,
    TABLE,
    LambdaContext,
    chain_records,
    client_error,
    create_table,
)

BUCKET = "lineage-archive"
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
LOADED = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any, Any]]:
    from lambdas.lineage_expired import handler

    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        s3 = boto3.client("s3", region_name=REGION)
        create_table(dynamodb)
        s3.create_bucket(Bucket=BUCKET)
        monkeypatch.setenv("LINEAGE_TABLE_NAME", TABLE)
        monkeypatch.setenv("ARCHIVE_BUCKET", BUCKET)
        handler.dependencies.cache_clear()
        yield dynamodb, s3, handler
        handler.dependencies.cache_clear()


def load(
    dynamodb: Any, root: str, moment: datetime, actions: tuple[str, ...] = ("RAW_DATA_INPUT", "CALCULATION_COMPLETE")
) -> list[Any]:
    records = chain_records(root, list(actions), now=moment, fan_out=2)
    loader = LineageLoader(dynamodb, TABLE, backoff=NO_WAIT, clock_ms=lambda: epoch_millis(moment))
    assert not loader.load([(f"m{i}", r) for i, r in enumerate(records)]).failed
    return records


def stream_event(dynamodb: Any, deletions: list[tuple[dict[str, str], bool]]) -> dict[str, Any]:
    """Delete items, read their REMOVE records from the table's stream, wrap them as Lambda does."""
    for key, _ in deletions:
        dynamodb.delete_item(TableName=TABLE, Key=key_item(key))
    arn = dynamodb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    [shard] = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")
    removals = [
        r for r in streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"] if r["eventName"] == "REMOVE"
    ]
    removals = removals[-len(deletions) :]
    records = []
    for (_, by_ttl), removal in zip(deletions, removals, strict=True):
        record = json.loads(json.dumps(removal, default=lambda moment: moment.timestamp()))
        record["eventSourceARN"] = arn
        if by_ttl:
            record["userIdentity"] = TTL_IDENTITY
        records.append(record)
    return {"Records": records}


def node_key(record: Any) -> dict[str, str]:
    return {"root_id": record.root_id, "node_id": record.node_id}


ROOTS = ("root-new", "root-old")


def test_ttl_removals_of_unarchived_items_are_archived_and_nothing_else(aws: tuple[Any, Any, Any]) -> None:
    dynamodb, s3, handler = aws
    never_traced = load(dynamodb, "root-new", LOADED)
    traced = load(dynamodb, "root-old", LOADED)
    store = S3ArchiveStore(s3, BUCKET)
    trace_root(dynamodb, TABLE, TraceMessage(root_id="root-old"), store, clock=lambda: LOADED + timedelta(hours=16))
    late = load(dynamodb, "root-old", LOADED + timedelta(hours=20), ("RERUN_INPUT",))[-1:]  # loaded after the trace
    # TTL removes a node of each kind; a user deletes another node.
    event = stream_event(
        dynamodb,
        [
            (node_key(never_traced[0]), True),
            (node_key(traced[0]), True),
            (node_key(late[0]), True),
            (node_key(never_traced[1]), False),
        ],
    )
    response = handler.handler(event, LambdaContext())
    assert response == {"batchItemFailures": []}
    removed_on = datetime.fromtimestamp(event["Records"][0]["dynamodb"]["ApproximateCreationDateTime"], tz=UTC).date()
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="_staged/")["Contents"])
    assert [key for key in keys if "expired-" in key] == sorted(
        [
            "_staged/" + expired_object_key(removed_on, "root-new", never_traced[0].node_id),
            "_staged/" + expired_object_key(removed_on, "root-old", late[0].node_id),
        ]
    )
    assert len(keys) == 3  # and the trace of root-old
    compact_archive(store)
    [line] = read_root_lines(store, "root-new")
    assert (line.record_id, line.status) == (never_traced[0].node_id, "expired")
    assert line.nodes()[0].storage_location == never_traced[0].storage_location
    assert line.lineage[-1]["action_taken"] == "DATA_COMPACTION"

    folded = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"])
    lines = {(line.record_id, line.status) for root in ROOTS for line in read_root_lines(store, root)}

    # The stream delivers the batch again: the same objects are staged, and folded into the same lines.
    handler.handler(event, LambdaContext())
    compact_archive(store)
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]) == folded
    again = [(line.record_id, line.status) for root in ROOTS for line in read_root_lines(store, root)]
    assert sorted(again) == sorted(lines) and len(again) == len(lines)
    # Weeks later the trace's own bookkeeping item expires: it is not lineage, nothing is archived.
    handler.handler(stream_event(dynamodb, [(traced_marker_key("root-old"), True)]), LambdaContext())
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]) == folded


def test_a_record_whose_archive_write_fails_is_reported_alone(
    aws: tuple[Any, Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    dynamodb, s3, handler = aws
    records = load(dynamodb, "root-f", LOADED)
    event = stream_event(dynamodb, [(node_key(record), True) for record in records])
    failing = records[1].node_id

    def refuse(params: dict[str, Any], **_: Any) -> Any:
        if params["url_path"].endswith(expired_object_key(LOADED.date(), "root-f", failing).split("/")[-1]):
            return client_error("InternalError", "try again", status=500)
        return None

    # The handler makes its clients from the default session: hook the session before it does.
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    boto3.setup_default_session(region_name=REGION)
    assert boto3.DEFAULT_SESSION is not None
    boto3.DEFAULT_SESSION.events.register("before-call.s3.PutObject", refuse)
    handler.dependencies.cache_clear()
    for record in event["Records"]:  # removed the day they were loaded
        record["dynamodb"]["ApproximateCreationDateTime"] = LOADED.timestamp()
    response = handler.handler(event, LambdaContext())
    [failed] = [r for r in event["Records"] if r["dynamodb"]["Keys"]["node_id"]["S"] == failing]
    assert response == {"batchItemFailures": [{"itemIdentifier": failed["dynamodb"]["SequenceNumber"]}]}
    store = S3ArchiveStore(s3, BUCKET)
    compact_archive(store)
    archived = {line.record_id for line in read_root_lines(store, "root-f")}
    assert archived == {r.node_id for r in records} - {failing}
