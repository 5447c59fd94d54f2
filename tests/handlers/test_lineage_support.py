"""Shared setup for the lineage handler tests (no tests here): moto resources, real event shapes.

Events are built the way Lambda builds them: SQS records from messages really received from a moto
queue, stream records from a moto table's stream. Faults are injected with botocore event hooks on
moto-backed clients, never by replacing a client.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3

from lakeline.lineage.records.model import LineageRecord, build_records
from lakeline.lineage.records.table import LINEAGE_TABLE

REGION = "us-east-1"
TABLE = "lineage"


@dataclass
class LambdaContext:
    """The attributes of the Lambda runtime's context object that Powertools reads."""

    function_name: str = "lineage-test"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = f"arn:aws:lambda:{REGION}:123456789012:function:lineage-test"
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"


def create_table(dynamodb: Any, name: str = TABLE) -> None:
    dynamodb.create_table(**LINEAGE_TABLE.create_table_kwargs(name))
    dynamodb.update_time_to_live(**LINEAGE_TABLE.time_to_live_kwargs(name))


def create_queue(sqs: Any, name: str) -> str:
    return str(sqs.create_queue(QueueName=name)["QueueUrl"])


def sqs_event(sqs: Any, queue_url: str, *, expected: int) -> dict[str, Any]:
    """Receive ``expected`` messages from a moto queue and wrap them as Lambda's SQS event."""
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    messages: list[dict[str, Any]] = []
    while len(messages) < expected:
        batch = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"], VisibilityTimeout=300
        ).get("Messages", [])
        if not batch:
            break
        messages.extend(batch)
    assert len(messages) == expected, f"received {len(messages)} messages, expected {expected}"
    return {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": message["Attributes"],
                "messageAttributes": {},
                "md5OfBody": message["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": REGION,
            }
            for message in messages
        ]
    }


def send_bodies(sqs: Any, queue_url: str, bodies: list[str]) -> None:
    for body in bodies:
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)


def chain_records(
    root_id: str, actions: list[str], *, now: datetime | None = None, fan_out: int = 1
) -> list[LineageRecord]:
    """A run: a chain of steps, the last one writing ``fan_out`` outputs."""
    now = now or datetime.now(UTC)
    records: list[LineageRecord] = []
    parent = root_id
    for position, action in enumerate(actions):
        last = position == len(actions) - 1
        outputs = [
            {"storage_location": f"s3://lake/{root_id}/{action.lower()}/{i}"} for i in range(fan_out if last else 1)
        ]
        step = build_records(
            {"root_id": root_id, "parent_id": parent, "action_taken": action, "records": outputs},
            now=now + timedelta(seconds=position),
        )
        records.extend(step)
        parent = step[0].node_id
    return records


class CallCounter:
    """Counts API calls of a client by operation name (a ``before-parameter-build`` hook: it runs for
    every call, also those a fault hook answers before they are sent)."""

    def __init__(self, client: Any, service: str) -> None:
        self.calls: Counter[str] = Counter()
        client.meta.events.register(f"before-parameter-build.{service}", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1


class Unprocessed:
    """Make DynamoDB leave items unprocessed: they are taken out of the request before it is sent
    (so they are really not written) and handed back in ``UnprocessedItems``, as DynamoDB does when
    a partition is throttled. ``pick`` chooses, per call, which put requests to hold back. Hooks go on
    a client, or on a boto3 session (for the clients a handler creates from it afterwards)."""

    def __init__(self, client: Any, pick: Callable[[int, list[dict[str, Any]]], list[int]]) -> None:
        events = client.events if isinstance(client, boto3.Session) else client.meta.events
        self.pick = pick
        self.call = 0
        self.held: list[dict[str, Any]] = []
        self.table = ""
        self.hold_all = False
        events.register("before-parameter-build.dynamodb.BatchWriteItem", self._hold)
        events.register("before-call.dynamodb.BatchWriteItem", self._answer_alone)
        events.register("after-call.dynamodb.BatchWriteItem", self._return)

    def _hold(self, params: dict[str, Any], **_: Any) -> None:
        self.call += 1
        [(table, requests)] = params["RequestItems"].items()
        chosen = set(self.pick(self.call, requests))
        self.table = table
        self.held = [copy.deepcopy(r) for i, r in enumerate(requests) if i in chosen]
        self.hold_all = len(self.held) == len(requests)
        if not self.hold_all:
            params["RequestItems"][table] = [r for i, r in enumerate(requests) if i not in chosen]

    def _answer_alone(self, **_: Any) -> Any:
        # Nothing left to send: answer as DynamoDB would, everything unprocessed, without writing.
        if self.hold_all:
            return Response(200, {}), {"UnprocessedItems": {}, "ResponseMetadata": {}}
        return None

    def _return(self, parsed: dict[str, Any], **_: Any) -> None:
        if self.held:
            parsed.setdefault("UnprocessedItems", {})[self.table] = self.held


@dataclass
class Response:
    """The two attributes of an HTTP response botocore reads after a ``before-call`` answer."""

    status_code: int
    headers: dict[str, str]


def client_error(code: str, message: str, status: int = 400) -> tuple[Any, dict[str, Any]]:
    """A ``before-call`` response that makes botocore raise ClientError(code) without sending."""
    return Response(status, {}), {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {}}


def table_items(dynamodb: Any, root_id: str, table: str = TABLE) -> list[dict[str, Any]]:
    paginator = dynamodb.get_paginator("query")
    items: list[dict[str, Any]] = []
    for page in paginator.paginate(
        TableName=table,
        KeyConditionExpression="root_id = :r",
        ExpressionAttributeValues={":r": {"S": root_id}},
    ):
        items.extend(page["Items"])
    return items


def default_session_client(service: str) -> Any:
    return boto3.client(service, region_name=REGION)
