"""The lineage table: its definition (shared with the CDK stack and the tests) and its items.

Key schema, indexes and TTL are the seed's: partition key ``root_id``, sort key ``node_id``, TTL on
``ttl_expiry``, GSI ``node-index`` (by node), LSI ``action-index`` (by root and action). The stream
carries old images so that items deleted by TTL can still be archived.

Finding the roots recorded since the last trace without a scan: the sparse GSI ``trace-index``.
Within each load batch, the first item of each root also gets ``trace_bucket`` =
``"<YYYY-MM-DD>#<shard>"`` (the UTC day it was loaded, and ``crc32(root_id) % shards``); every item
gets ``loaded_at`` (epoch milliseconds of the write). Only items with a ``trace_bucket`` are in the
index, keyed by ``trace_bucket`` and sorted by ``loaded_at``, so the nightly schedule runs one Query
per shard per day, ``trace_bucket = :b AND loaded_at BETWEEN :since AND :until``, and reads about
one key per root per load batch, however many nodes the roots hold. Shards keep one day's writes
off a single index partition. The flag rides on an item the batch writes anyway: no extra write calls.

Bookkeeping items use keys that no lineage id can take (ids never start with ``_``):

- ``(root_id, "_traced#<root_id>")``: when the root was last archived (``traced_at``), read by the TTL
  stream catcher to tell archived items from ones that expired first;
- ``("_schedule", "_schedule#trace")``: up to when the schedule has enumerated (``last_until``).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

from lakeline.aws.dynamodb import item_values
from lakeline.lineage.records.model import LineageRecord
from lakeline.lineage.records.tree import LineageNode

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

AttributeType = Literal["S", "N"]
Projection = Literal["ALL", "KEYS_ONLY"]

LOADED_AT = "loaded_at"
TRACE_BUCKET = "trace_bucket"
TRACED_AT = "traced_at"
LAST_UNTIL = "last_until"
SCHEDULE_KEY = {"root_id": "_schedule", "node_id": "_schedule#trace"}


@dataclass(frozen=True)
class KeyAttribute:
    name: str
    type: AttributeType = "S"


@dataclass(frozen=True)
class SecondaryIndex:
    name: str
    partition_key: KeyAttribute
    sort_key: KeyAttribute | None = None
    projection: Projection = "ALL"

    def key_schema(self) -> list[dict[str, str]]:
        schema = [{"AttributeName": self.partition_key.name, "KeyType": "HASH"}]
        if self.sort_key:
            schema.append({"AttributeName": self.sort_key.name, "KeyType": "RANGE"})
        return schema

    def describe(self) -> dict[str, Any]:
        return {
            "IndexName": self.name,
            "KeySchema": self.key_schema(),
            "Projection": {"ProjectionType": self.projection},
        }


@dataclass(frozen=True)
class LineageTableSpec:
    """Everything about the table that infrastructure, logic and tests must agree on."""

    partition_key: KeyAttribute = KeyAttribute("root_id")
    sort_key: KeyAttribute = KeyAttribute("node_id")
    ttl_attribute: str = "ttl_expiry"
    node_index: SecondaryIndex = SecondaryIndex("node-index", KeyAttribute("node_id"))
    trace_index: SecondaryIndex = SecondaryIndex(
        "trace-index", KeyAttribute(TRACE_BUCKET), KeyAttribute(LOADED_AT, "N"), projection="KEYS_ONLY"
    )
    action_index: SecondaryIndex = SecondaryIndex("action-index", KeyAttribute("root_id"), KeyAttribute("action_taken"))
    stream_view_type: Literal["OLD_IMAGE", "NEW_AND_OLD_IMAGES"] = "OLD_IMAGE"
    trace_bucket_shards: int = 8

    @property
    def global_indexes(self) -> tuple[SecondaryIndex, ...]:
        return (self.node_index, self.trace_index)

    @property
    def local_indexes(self) -> tuple[SecondaryIndex, ...]:
        return (self.action_index,)

    def attribute_definitions(self) -> list[dict[str, str]]:
        keys: dict[str, str] = {}
        for index in (*self.global_indexes, *self.local_indexes):
            for key in (index.partition_key, index.sort_key):
                if key:
                    keys[key.name] = key.type
        keys[self.partition_key.name] = self.partition_key.type
        keys[self.sort_key.name] = self.sort_key.type
        return [{"AttributeName": name, "AttributeType": kind} for name, kind in sorted(keys.items())]

    def create_table_kwargs(self, table_name: str) -> dict[str, Any]:
        """``CreateTable`` arguments (on-demand billing); TTL is set apart with ``UpdateTimeToLive``."""
        return {
            "TableName": table_name,
            "KeySchema": [
                {"AttributeName": self.partition_key.name, "KeyType": "HASH"},
                {"AttributeName": self.sort_key.name, "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": self.attribute_definitions(),
            "GlobalSecondaryIndexes": [index.describe() for index in self.global_indexes],
            "LocalSecondaryIndexes": [index.describe() for index in self.local_indexes],
            "BillingMode": "PAY_PER_REQUEST",
            "StreamSpecification": {"StreamEnabled": True, "StreamViewType": self.stream_view_type},
        }

    def time_to_live_kwargs(self, table_name: str) -> dict[str, Any]:
        return {
            "TableName": table_name,
            "TimeToLiveSpecification": {"Enabled": True, "AttributeName": self.ttl_attribute},
        }


LINEAGE_TABLE = LineageTableSpec()


def epoch_millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def from_epoch_millis(millis: int) -> datetime:
    return datetime.fromtimestamp(millis / 1000, tz=UTC)


def trace_bucket(root_id: str, loaded_at_ms: int, shards: int) -> str:
    """The ``trace-index`` partition of a root's flagged item (see the module docstring)."""
    day = from_epoch_millis(loaded_at_ms).date().isoformat()
    return f"{day}#{zlib.crc32(root_id.encode()) % shards}"


def traced_marker_key(root_id: str) -> dict[str, str]:
    return {"root_id": root_id, "node_id": f"_traced#{root_id}"}


def is_bookkeeping(node_id: str) -> bool:
    return node_id.startswith("_")


def string_value(value: str) -> AttributeValueTypeDef:
    return {"S": value}


def number_value(value: int) -> AttributeValueTypeDef:
    return {"N": str(value)}


def key_item(key: Mapping[str, str]) -> dict[str, AttributeValueTypeDef]:
    return {name: string_value(value) for name, value in key.items()}


def record_item(
    record: LineageRecord, *, loaded_at_ms: int, bucket: str | None = None
) -> dict[str, AttributeValueTypeDef]:
    """The DynamoDB item of a record (low-level attribute values; absent optionals left out)."""
    item: dict[str, AttributeValueTypeDef] = {
        "root_id": string_value(record.root_id),
        "node_id": string_value(record.node_id),
        "parent_id": string_value(record.parent_id),
        "action_taken": string_value(record.action_taken),
        "storage_location": string_value(record.storage_location),
        "recordedAt": number_value(record.recorded_at),
        "ttl_expiry": number_value(record.ttl_expiry),
        LOADED_AT: number_value(loaded_at_ms),
    }
    for name in ("run_id", "job_name", "dataset", "version"):
        value = getattr(record, name)
        if value is not None:
            item[name] = string_value(value)
    if bucket is not None:
        item[TRACE_BUCKET] = string_value(bucket)
    return item


def _text(attribute: Mapping[str, Any] | None) -> str | None:
    return attribute.get("S") if attribute is not None else None


def _number(attribute: Mapping[str, Any] | None) -> int | None:
    text = attribute.get("N") if attribute is not None else None
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return int(Decimal(text))


def item_node(item: Mapping[str, Mapping[str, Any]]) -> LineageNode:
    """A node straight from a low-level item (the trace reads whole roots: this path is hot)."""
    get = item.get
    root_id, node_id = _text(get("root_id")), _text(get("node_id"))
    if root_id is None or node_id is None:
        return LineageNode.from_values(item_values(item))  # raises, naming the item
    return LineageNode.from_attributes(root_id, node_id, get, _text, _number)
