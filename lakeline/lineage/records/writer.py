"""What a pipeline step calls to record lineage: build the standard records and queue them.

    writer = LineageWriter(sqs_client, lineage_queue_url)
    raw = writer.step(root_id=run, parent_id=run, action_taken="RAW_DATA_INPUT",
                      storage_locations=["s3://raw/team/ds/table/date=20220120/file.csv"])
    writer.step(root_id=run, parent_id=raw[0].node_id, action_taken="STAGE_A_COMPLETE",
                storage_locations=[stage_partition_location], dataset="team_ds.table")

The first step of a run names the run itself (``root_id``) as its parent; later steps name the node
they read from. Node ids are deterministic (see ``lakeline.lineage.records.model``), so a step that is run
again after a failure describes the same nodes. Sending retries what SQS did not accept; if some
records still cannot be queued, ``QueueSendError`` says which.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from lakeline.aws.retry import Backoff
from lakeline.aws.sqs import SendReport, json_body, send_messages
from lakeline.lineage.records.model import (
    DEFAULT_TTL,
    LineageRecord,
    LineageRequest,
    build_records,
    build_requests_records,
    parse_request,
)

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


def utc_now() -> datetime:
    return datetime.now(UTC)


def send_records(
    sqs: SQSClient, queue_url: str, records: Sequence[LineageRecord], *, backoff: Backoff | None = None
) -> SendReport:
    """Queue standard records, one message each (the load function's input)."""
    return send_messages(sqs, queue_url, [json_body(record.to_message()) for record in records], backoff=backoff)


class LineageWriter:
    def __init__(
        self,
        sqs: SQSClient,
        queue_url: str,
        *,
        ttl: timedelta = DEFAULT_TTL,
        clock: Callable[[], datetime] = utc_now,
        backoff: Backoff | None = None,
    ) -> None:
        self._sqs = sqs
        self._queue_url = queue_url
        self._ttl = ttl
        self._clock = clock
        self._backoff = backoff or Backoff()

    def record(self, request: Mapping[str, Any] | LineageRequest) -> list[LineageRecord]:
        """Validate one request in the seed's input shape, queue its records, and return them."""
        records = build_records(parse_request(request), now=self._clock(), ttl=self._ttl)
        send_records(self._sqs, self._queue_url, records, backoff=self._backoff)
        return records

    def record_many(self, requests: Sequence[Mapping[str, Any] | LineageRequest]) -> list[LineageRecord]:
        """Several requests at once: all are validated before anything is sent."""
        records = build_requests_records(requests, now=self._clock(), ttl=self._ttl)
        send_records(self._sqs, self._queue_url, records, backoff=self._backoff)
        return records

    def step(
        self,
        *,
        root_id: str,
        parent_id: str,
        action_taken: str,
        storage_locations: Sequence[str],
        run_id: str | None = None,
        job_name: str | None = None,
        dataset: str | None = None,
        version: str | None = None,
    ) -> list[LineageRecord]:
        """One step and the locations it wrote; returns the records (their node ids come next)."""
        request: dict[str, Any] = {
            "root_id": root_id,
            "parent_id": parent_id,
            "action_taken": action_taken,
            "records": [{"storage_location": location} for location in storage_locations],
            "run_id": run_id,
            "job_name": job_name,
            "dataset": dataset,
            "version": version,
        }
        return self.record(request)
