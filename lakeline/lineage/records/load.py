"""Load lineage records into the table with as few write calls as DynamoDB allows.

- Records with the same key (``root_id``, ``node_id``) in one batch collapse into one item, the last
  one winning: ``BatchWriteItem`` refuses a request that names a key twice, and a redelivered step
  is the same node anyway. Every message that carried the key shares the item's fate.
- A node has one parent (the record model, the lineage table's item and the trace's tree all say so), so
  a record naming another parent for a node already recorded is not a redelivery but a conflict: it is
  rejected with the reason (the caller parks it), and the node keeps its first parent. Conflicts within
  a batch are found in the batch; with stored nodes, by one ``BatchGetItem`` per 100 keys before the
  writes (two conflicting records loaded at the same moment by two invocations are not caught).
- Items go out 25 per ``BatchWriteItem`` call, so ``n`` records take at most ``ceil(n / 25)`` calls
  when DynamoDB takes everything at once.
- ``UnprocessedItems`` are sent again, alone, with backoff; a throttled call is repeated with
  backoff. Each attempt restamps ``loaded_at``, so it never predates the write that stored the item.
- A call refused for its content (not throttling) is split in halves until the item at fault is
  alone; only that item fails, its neighbours are written.

What still fails after the last attempt is reported per message id, for partial batch responses; what
was rejected (a conflict) is reported apart, since sending it again can never succeed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from lakeline.aws.retry import Backoff, is_retryable
from lakeline.errors import LakelineError
from lakeline.lineage.records.model import LineageRecord
from lakeline.lineage.records.table import LINEAGE_TABLE, LineageTableSpec, epoch_millis, record_item, trace_bucket

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import KeysAndAttributesTypeDef, WriteRequestTypeDef

MAX_BATCH_WRITE_ITEMS = 25
MAX_BATCH_GET_KEYS = 100
Key = tuple[str, str]


def utc_now_ms() -> int:
    return epoch_millis(datetime.now(UTC))


@dataclass
class LoadReport:
    records: int = 0
    items: int = 0
    write_calls: int = 0
    retries: int = 0
    failed: dict[str, str] = field(default_factory=dict)  # message id -> why (worth retrying)
    rejected: dict[str, str] = field(default_factory=dict)  # message id -> why (never worth retrying)


@dataclass
class _Pending:
    record: LineageRecord
    message_ids: list[str]
    flagged: bool = False


class LineageLoader:
    def __init__(
        self,
        dynamodb: DynamoDBClient,
        table_name: str,
        *,
        spec: LineageTableSpec = LINEAGE_TABLE,
        backoff: Backoff | None = None,
        clock_ms: Callable[[], int] = utc_now_ms,
    ) -> None:
        self._dynamodb = dynamodb
        self._table = table_name
        self._spec = spec
        self._backoff = backoff or Backoff()
        self._clock_ms = clock_ms

    def load(self, records: Sequence[tuple[str, LineageRecord]]) -> LoadReport:
        """Write ``(message id, record)`` pairs; return what was done and which messages failed."""
        report = LoadReport(records=len(records))
        by_key: dict[Key, list[tuple[str, LineageRecord]]] = {}
        for message_id, record in records:
            by_key.setdefault((record.root_id, record.node_id), []).append((message_id, record))
        stored = self._stored_parents(list(by_key), report)
        pending: dict[Key, _Pending] = {}
        for key, entries in by_key.items():
            # The node's parent is the stored one, else the first this batch gives it.
            parent, where = (
                (stored[key], "the lineage table") if key in stored else (entries[0][1].parent_id, "an earlier message")
            )
            for message_id, record in entries:
                if record.parent_id != parent:
                    report.rejected[message_id] = _conflict(record, parent, where)
                elif key in pending:
                    pending[key].record = record
                    pending[key].message_ids.append(message_id)
                else:
                    pending[key] = _Pending(record, [message_id])
        flagged_roots: set[str] = set()
        for (root_id, _), entry in pending.items():
            if root_id not in flagged_roots:
                entry.flagged = True
                flagged_roots.add(root_id)
        report.items = len(pending)
        keys = list(pending)
        for start in range(0, len(keys), MAX_BATCH_WRITE_ITEMS):
            self._write(keys[start : start + MAX_BATCH_WRITE_ITEMS], pending, report)
        return report

    def _stored_parents(self, keys: Sequence[Key], report: LoadReport) -> dict[Key, str]:
        """The parent of every key already in the table (one BatchGetItem per 100 keys)."""
        parents: dict[Key, str] = {}
        for start in range(0, len(keys), MAX_BATCH_GET_KEYS):
            request: KeysAndAttributesTypeDef = {
                "Keys": [
                    {"root_id": {"S": root}, "node_id": {"S": node}}
                    for root, node in keys[start : start + MAX_BATCH_GET_KEYS]
                ],
                "ProjectionExpression": "root_id, node_id, parent_id",
                "ConsistentRead": True,
            }
            retry = 0
            while request["Keys"]:
                response = self._dynamodb.batch_get_item(RequestItems={self._table: request})
                for item in response.get("Responses", {}).get(self._table, []):
                    parents[(item["root_id"]["S"], item["node_id"]["S"])] = item["parent_id"]["S"]
                left = response.get("UnprocessedKeys", {}).get(self._table)
                if not left:
                    break
                retry += 1
                if retry >= self._backoff.attempts:
                    raise LakelineError(f"lineage table: keys still unprocessed after {retry} BatchGetItem attempts")
                report.retries += 1
                self._backoff.wait(retry)
                request = {**request, "Keys": left["Keys"]}
        return parents

    def _requests(self, keys: Sequence[Key], pending: dict[Key, _Pending]) -> list[WriteRequestTypeDef]:
        loaded_at = self._clock_ms()
        requests: list[WriteRequestTypeDef] = []
        for key in keys:
            entry = pending[key]
            bucket = (
                trace_bucket(entry.record.root_id, loaded_at, self._spec.trace_bucket_shards) if entry.flagged else None
            )
            requests.append({"PutRequest": {"Item": record_item(entry.record, loaded_at_ms=loaded_at, bucket=bucket)}})
        return requests

    def _fail(self, keys: Sequence[Key], pending: dict[Key, _Pending], reason: str, report: LoadReport) -> None:
        for key in keys:
            for message_id in pending[key].message_ids:
                report.failed[message_id] = reason

    def _write(self, keys: Sequence[Key], pending: dict[Key, _Pending], report: LoadReport) -> None:
        remaining = list(keys)
        retry = 0
        while remaining:
            report.write_calls += 1
            try:
                response = self._dynamodb.batch_write_item(
                    RequestItems={self._table: self._requests(remaining, pending)}
                )
            except ClientError as error:
                code = error.response.get("Error", {}).get("Code", "error")
                if not is_retryable(error):
                    if len(remaining) > 1:
                        middle = len(remaining) // 2
                        self._write(remaining[:middle], pending, report)
                        self._write(remaining[middle:], pending, report)
                    else:
                        self._fail(remaining, pending, f"DynamoDB refused the item: {error}", report)
                    return
                unprocessed_keys = remaining
                why = f"throttled ({code})"
            else:
                unprocessed = response.get("UnprocessedItems", {}).get(self._table, [])
                unprocessed_keys = [
                    (request["PutRequest"]["Item"]["root_id"]["S"], request["PutRequest"]["Item"]["node_id"]["S"])
                    for request in unprocessed
                    if "PutRequest" in request
                ]
                why = "left in UnprocessedItems"
            if not unprocessed_keys:
                return
            retry += 1
            if retry >= self._backoff.attempts:
                self._fail(
                    unprocessed_keys, pending, f"still {why} after {retry} attempts; will be redelivered", report
                )
                return
            report.retries += 1
            self._backoff.wait(retry)
            remaining = unprocessed_keys


def _conflict(record: LineageRecord, parent_id: str, where: str) -> str:
    return (
        f"node {record.node_id!r} of root {record.root_id!r} already has parent {parent_id!r} in {where}; "
        f"this record names parent {record.parent_id!r} (a node has one parent: give the other edge its own node_id)"
    )
