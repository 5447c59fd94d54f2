"""Trace one root: read its nodes, rebuild the tree, stage its archive lines, note when.

The seed's trace walked from each terminus record up to the root, queried terminus actions apart
from the rest, crashed on a missing parent, looped forever on a cycle and left out runs that never
reached a terminus. Here every node is read in one paginated, strongly consistent Query, the tree is
built in linear time (``lakeline.lineage.records.tree``), and every node is archived with a status.

The lines are staged (``archive_tree``); the compaction folds them into the day's archive objects. After
they are staged, the root's ``_traced`` item records ``traced_at``: the time the Query
started. Anything loaded before that moment was read and archived; the TTL stream catcher uses it
to archive only what expired unarchived. The item keeps the latest time (a late redelivered trace
cannot move it back) and outlives the nodes (``marker_retention``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict

from lakeline.lineage.records.archive import (
    DEFAULT_TRACE_ACTION,
    ArchiveStore,
    archive_body,
    bucket_object_key,
    staged_trace_key,
    staging_store,
)
from lakeline.lineage.records.model import DEFAULT_TERMINAL_ACTIONS, LineageId, LineageRecord
from lakeline.lineage.records.table import (
    TRACED_AT,
    epoch_millis,
    is_bookkeeping,
    item_node,
    key_item,
    number_value,
    traced_marker_key,
)
from lakeline.lineage.records.tree import LineageNode, LineageTree, build_tree
from lakeline.lineage.records.writer import utc_now

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class TraceMessage(BaseModel):
    """A trace queue message: the seed's ``{"root_id": ...}`` plus the date the trace belongs to."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    root_id: LineageId
    trace_date: date | None = None


@dataclass(frozen=True)
class TraceSettings:
    terminal_actions: frozenset[str] = DEFAULT_TERMINAL_ACTIONS
    trace_action: str = DEFAULT_TRACE_ACTION
    marker_retention: timedelta = timedelta(days=14)


@dataclass(frozen=True)
class TraceResult:
    root_id: str
    trace_date: date
    nodes: int
    lines: int
    statuses: dict[str, int]
    key: str | None
    location: str | None


def read_root_nodes(dynamodb: DynamoDBClient, table_name: str, root_id: str) -> list[LineageNode]:
    """Every node of a root, in ``node_id`` order, read consistently (bookkeeping items left out)."""
    nodes: list[LineageNode] = []
    paginator = dynamodb.get_paginator("query")
    pages = paginator.paginate(
        TableName=table_name,
        KeyConditionExpression="root_id = :root",
        ExpressionAttributeValues={":root": {"S": root_id}},
        ConsistentRead=True,
    )
    for page in pages:
        for item in page.get("Items", []):
            if not is_bookkeeping(item["node_id"].get("S", "")):
                nodes.append(item_node(item))
    return nodes


def archive_tree(
    tree: LineageTree, store: ArchiveStore, trace_date: date, *, archived_at: datetime, action: str
) -> tuple[str, str] | None:
    """Stage the tree's lines for the compaction (``lakeline.lineage.records.compact``): the staged key and the
    archive object the lines will be in (what their archive step names); ``None`` if the tree is empty."""
    if not tree.lines:
        return None
    location = store.location(bucket_object_key(trace_date, tree.root_id))
    key = staged_trace_key(trace_date, tree.root_id, archived_at)
    staging_store(store).put(key, archive_body(tree, location=location, action=action, archived_at=archived_at))
    return key, location


def mark_traced(
    dynamodb: DynamoDBClient, table_name: str, root_id: str, traced_at: datetime, retention: timedelta
) -> None:
    item = key_item(traced_marker_key(root_id))
    item[TRACED_AT] = number_value(epoch_millis(traced_at))
    item["ttl_expiry"] = number_value(int((traced_at + retention).timestamp()))
    try:
        dynamodb.put_item(
            TableName=table_name,
            Item=item,
            ConditionExpression="attribute_not_exists(#t) OR #t < :t",
            ExpressionAttributeNames={"#t": TRACED_AT},
            ExpressionAttributeValues={":t": item[TRACED_AT]},
        )
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
            raise


def traced_at(dynamodb: DynamoDBClient, table_name: str, root_id: str) -> int | None:
    """Epoch milliseconds of the root's last archived trace, if any."""
    response = dynamodb.get_item(TableName=table_name, Key=key_item(traced_marker_key(root_id)), ConsistentRead=True)
    value = response.get("Item", {}).get(TRACED_AT, {}).get("N")
    return int(value) if value is not None else None


def trace_records(
    root_id: str,
    records: Iterable[LineageRecord | LineageNode],
    store: ArchiveStore,
    trace_date: date,
    *,
    archived_at: datetime,
    settings: TraceSettings | None = None,
) -> TraceResult:
    """Trace records held in memory (the embedded runtime has no lineage table) into ``store``."""
    settings = settings or TraceSettings()
    nodes = [item if isinstance(item, LineageNode) else LineageNode.from_record(item) for item in records]
    return _archive_nodes(root_id, nodes, store, trace_date, archived_at=archived_at, settings=settings)


def _archive_nodes(
    root_id: str,
    nodes: Iterable[LineageNode],
    store: ArchiveStore,
    trace_date: date,
    *,
    archived_at: datetime,
    settings: TraceSettings,
) -> TraceResult:
    """Build the root's tree from its nodes and archive it; the result's ``key`` is ``None`` when nothing was
    written (an empty tree)."""
    tree = build_tree(root_id, nodes, settings.terminal_actions)
    written = archive_tree(tree, store, trace_date, archived_at=archived_at, action=settings.trace_action)
    return TraceResult(
        root_id=root_id,
        trace_date=trace_date,
        nodes=len(tree.nodes),
        lines=len(tree.lines),
        statuses=tree.status_counts(),
        key=written[0] if written else None,
        location=written[1] if written else None,
    )


def trace_root(
    dynamodb: DynamoDBClient,
    table_name: str,
    message: TraceMessage,
    store: ArchiveStore,
    *,
    settings: TraceSettings | None = None,
    clock: Callable[[], datetime] = utc_now,
) -> TraceResult:
    settings = settings or TraceSettings()
    started = clock()
    trace_date = message.trace_date or started.date()
    nodes = read_root_nodes(dynamodb, table_name, message.root_id)
    result = _archive_nodes(message.root_id, nodes, store, trace_date, archived_at=started, settings=settings)
    if result.key is not None:
        mark_traced(dynamodb, table_name, message.root_id, started, settings.marker_retention)
    return result
