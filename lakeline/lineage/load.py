"""Load lineage records into the table with as few write calls as DynamoDB allows.

- Records with the same key (``root_id``, ``node_id``) in one batch collapse into one item, the last
  one winning: ``BatchWriteItem`` refuses a request that names a key twice, and a redelivered step
  is the same node anyway. Every message that carried the key shares the item's fate.
- Items go out 25 per ``BatchWriteItem`` call, so ``n`` records take at most ``ceil(n / 25)`` calls
  when DynamoDB takes everything at once.
- ``UnprocessedItems`` are sent again, alone, with backoff; a throttled call is repeated with
  backoff. Each attempt restamps ``loaded_at``, so it never predates the write that stored the item.
- A call refused for its content (not throttling) is split in halves until the item at fault is
  alone; only that item fails, its neighbours are written.

What still fails after the last attempt is reported per message id, for partial batch responses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from lakeline.lineage.backoff import Backoff, is_retryable
from lakeline.lineage.records import LineageRecord
from lakeline.lineage.table import LINEAGE_TABLE, LineageTableSpec, epoch_millis, record_item, trace_bucket

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import WriteRequestTypeDef

MAX_BATCH_WRITE_ITEMS = 25
Key = tuple[str, str]


def utc_now_ms() -> int:
    return epoch_millis(datetime.now(UTC))


@dataclass
class LoadReport:
    records: int = 0
    items: int = 0
    write_calls: int = 0
    retries: int = 0
    failed: dict[str, str] = field(default_factory=dict)  # message id -> why


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
        pending: dict[Key, _Pending] = {}
        for message_id, record in records:
            key = (record.root_id, record.node_id)
            if key in pending:
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
