"""The nightly schedule: find the roots loaded since the last run and queue one trace each.

No scan: for every day between the last run and now, one Query per ``trace-index`` shard reads the
flagged items loaded in that window (see ``lakeline.lineage.records.table``). The window ends ``settle``
before now, so items whose index entry is still propagating are left for the next run rather than
missed. The end of the window is saved in the schedule item only after every trace message was
sent (and only if no other run moved it meanwhile): a run that fails half-way is simply repeated,
and tracing a root twice rewrites the same archive object.

Each message carries the run's date, which becomes the archive partition ``dt`` of the trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from lakeline.aws.retry import Backoff
from lakeline.aws.sqs import json_body, send_messages
from lakeline.lineage.records.table import (
    LAST_UNTIL,
    LINEAGE_TABLE,
    LOADED_AT,
    SCHEDULE_KEY,
    TRACE_BUCKET,
    LineageTableSpec,
    epoch_millis,
    from_epoch_millis,
    key_item,
    number_value,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient


@dataclass(frozen=True)
class ScheduleSettings:
    settle: timedelta = timedelta(minutes=2)
    first_run_lookback: timedelta = timedelta(days=2)
    max_catch_up: timedelta = timedelta(days=14)


@dataclass(frozen=True)
class ScheduleResult:
    trace_date: date
    since_ms: int
    until_ms: int
    roots: list[str]
    queries: int
    state_saved: bool


def days_between(since_ms: int, until_ms: int) -> list[date]:
    first, last = from_epoch_millis(since_ms).date(), from_epoch_millis(until_ms).date()
    return [first + timedelta(days=offset) for offset in range((last - first).days + 1)]


def roots_loaded_between(
    dynamodb: DynamoDBClient,
    table_name: str,
    since_ms: int,
    until_ms: int,
    *,
    spec: LineageTableSpec = LINEAGE_TABLE,
) -> tuple[list[str], int]:
    """Distinct roots with an item loaded in ``(since_ms, until_ms]``, and how many Query pages it took."""
    roots: dict[str, None] = {}
    queries = 0
    paginator = dynamodb.get_paginator("query")
    for day in days_between(since_ms + 1, until_ms):
        for shard in range(spec.trace_bucket_shards):
            pages = paginator.paginate(
                TableName=table_name,
                IndexName=spec.trace_index.name,
                KeyConditionExpression="#b = :b AND #l BETWEEN :since AND :until",
                ExpressionAttributeNames={"#b": TRACE_BUCKET, "#l": LOADED_AT},
                ExpressionAttributeValues={
                    ":b": {"S": f"{day.isoformat()}#{shard}"},
                    ":since": number_value(since_ms + 1),
                    ":until": number_value(until_ms),
                },
            )
            for page in pages:
                queries += 1
                for item in page.get("Items", []):
                    roots[item["root_id"]["S"]] = None
    return sorted(roots), queries


def last_until(dynamodb: DynamoDBClient, table_name: str) -> int | None:
    response = dynamodb.get_item(TableName=table_name, Key=key_item(SCHEDULE_KEY), ConsistentRead=True)
    value = response.get("Item", {}).get(LAST_UNTIL, {}).get("N")
    return int(value) if value is not None else None


def save_until(dynamodb: DynamoDBClient, table_name: str, previous: int | None, until_ms: int) -> bool:
    """Move the window's end to ``until_ms`` unless another run moved it since we read it."""
    item = key_item(SCHEDULE_KEY)
    item[LAST_UNTIL] = number_value(until_ms)
    try:
        if previous is None:
            dynamodb.put_item(
                TableName=table_name,
                Item=item,
                ConditionExpression="attribute_not_exists(#u)",
                ExpressionAttributeNames={"#u": LAST_UNTIL},
            )
        else:
            dynamodb.put_item(
                TableName=table_name,
                Item=item,
                ConditionExpression="#u = :previous",
                ExpressionAttributeNames={"#u": LAST_UNTIL},
                ExpressionAttributeValues={":previous": number_value(previous)},
            )
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            return False
        raise
    return True


def schedule_traces(
    dynamodb: DynamoDBClient,
    table_name: str,
    sqs: SQSClient,
    trace_queue_url: str,
    *,
    now: datetime,
    settings: ScheduleSettings | None = None,
    spec: LineageTableSpec = LINEAGE_TABLE,
    backoff: Backoff | None = None,
) -> ScheduleResult:
    settings = settings or ScheduleSettings()
    until_ms = epoch_millis(now - settings.settle)
    previous = last_until(dynamodb, table_name)
    since_ms = previous if previous is not None else epoch_millis(now - settings.first_run_lookback)
    since_ms = max(since_ms, until_ms - int(settings.max_catch_up.total_seconds() * 1000))
    trace_date = now.date()
    if since_ms >= until_ms:
        return ScheduleResult(trace_date, since_ms, until_ms, [], 0, state_saved=False)
    roots, queries = roots_loaded_between(dynamodb, table_name, since_ms, until_ms, spec=spec)
    bodies = [json_body({"root_id": root, "trace_date": trace_date.isoformat()}) for root in roots]
    send_messages(sqs, trace_queue_url, bodies, backoff=backoff)
    saved = save_until(dynamodb, table_name, previous, until_ms)
    return ScheduleResult(trace_date, since_ms, until_ms, roots, queries, state_saved=saved)
