"""Lambda's DynamoDB stream pollers, as far as a mapping's error handling goes, which moto lacks.

moto gives a table's new stream records to the mapped function and drops them whatever the function answered:
a failed batch was neither retried nor sent to the mapping's on-failure destination, and the records a function
reported failed (``ReportBatchItemFailures``) were dropped with the rest. Here a shard's records go to the function
as Lambda's poller gives them (the AWS Lambda developer guide, "Configuring partial batch response with DynamoDB
and Lambda" and "Retaining discarded records"):

- in order, in batches of up to the mapping's ``BatchSize``;
- a batch that succeeds is done; one the function failed is retried whole, split in two first with
  ``BisectBatchOnFunctionError``; one whose records it reported failed is retried from the lowest reported sequence
  number (the records before it are done);
- once a batch has failed ``MaximumRetryAttempts`` retries, a record naming it (``DDBStreamBatchInfo``: the
  shard, the first and last sequence numbers, ``RetryAttemptsExhausted``) goes to the ``OnFailure`` destination, as
  Lambda sends it, and the records behind it go on.

Known differences, on purpose: retries follow at once (no backoff); a mapping with unlimited retries (``-1``, the
default) gives up after ``UNLIMITED_RETRIES`` here rather than holding the shard until its records expire (24 hours);
``MaximumRecordAgeInSeconds`` is not read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

UNLIMITED_RETRIES = 10


@dataclass(frozen=True)
class BatchAnswer:
    """What one invocation answered: ``failed_from`` is the index of the first record to retry (``None``: all done);
    ``whole`` is true when the function failed (an error, not a partial batch response)."""

    failed_from: int | None
    whole: bool = False


Invoke = Callable[[list[dict[str, Any]]], BatchAnswer]
"""Give the function these stream records (Lambda's event records) and say how it answered."""


@dataclass(frozen=True)
class StreamMapping:
    """What Lambda's stream poller reads of an event source mapping."""

    function_arn: str
    stream_arn: str
    batch_size: int = 100
    max_retries: int = -1
    bisect: bool = False
    report_item_failures: bool = False
    on_failure: str | None = None  # the destination's ARN

    @classmethod
    def of(cls, mapping: Any) -> StreamMapping:
        """From moto's ``EventSourceMapping`` (CloudFormation's values may arrive as strings)."""
        destination = (mapping.destination_config or {}).get("OnFailure", {}).get("Destination")
        retries = mapping.max_retry_attempts
        return cls(
            function_arn=mapping.function_arn,
            stream_arn=mapping.event_source_arn,
            batch_size=int(mapping.batch_size or 100),
            max_retries=-1 if retries is None else int(retries),
            bisect=str(mapping.bisect_on_error).lower() == "true",
            report_item_failures="ReportBatchItemFailures" in (mapping.function_response_types or []),
            on_failure=destination or None,
        )


def deliver_stream(
    mapping: StreamMapping,
    shard_id: str,
    records: Sequence[dict[str, Any]],
    invoke: Invoke,
    send_failure: Callable[[str, str], None],
) -> None:
    """Give ``records`` (one shard's, in order) to the function as the mapping says; ``send_failure(destination ARN,
    body)`` sends a discarded batch's record to the on-failure destination."""
    retries = UNLIMITED_RETRIES if mapping.max_retries < 0 else mapping.max_retries
    for start in range(0, len(records), mapping.batch_size):
        pending = [(list(records[start : start + mapping.batch_size]), 0)]
        while pending:
            batch, attempt = pending.pop(0)
            outcome = invoke(batch)
            if outcome.failed_from is None:
                continue
            rest = batch[outcome.failed_from :]
            if attempt >= retries:
                if mapping.on_failure:
                    send_failure(mapping.on_failure, failure_record(mapping, shard_id, rest, attempt + 1))
                continue
            if outcome.whole and mapping.bisect and len(rest) > 1:
                half = len(rest) // 2
                pending[:0] = [(rest[:half], attempt + 1), (rest[half:], attempt + 1)]
            else:
                pending.insert(0, (rest, attempt + 1))


def outcome_of(mapping: StreamMapping, records: Sequence[dict[str, Any]], errored: bool, reply: Any) -> BatchAnswer:
    """How Lambda reads an invocation's answer: an error fails the whole batch; with ``ReportBatchItemFailures`` the
    lowest reported sequence number is retried from, and a reply naming none of the batch fails it whole."""
    if errored:
        return BatchAnswer(0, whole=True)
    failures = reply.get("batchItemFailures") if mapping.report_item_failures and isinstance(reply, dict) else None
    if not failures:
        return BatchAnswer(None)
    sequence = [record["dynamodb"]["SequenceNumber"] for record in records]
    reported = [failure.get("itemIdentifier") if isinstance(failure, dict) else None for failure in failures]
    if not all(isinstance(name, str) and name in sequence for name in reported):
        return BatchAnswer(0, whole=True)
    return BatchAnswer(min(sequence.index(name) for name in reported if isinstance(name, str)))


def failure_record(mapping: StreamMapping, shard_id: str, records: Sequence[dict[str, Any]], invokes: int) -> str:
    """The record Lambda sends to a stream mapping's on-failure destination for a discarded batch."""

    def arrival(record: dict[str, Any]) -> str:
        created = record["dynamodb"].get("ApproximateCreationDateTime")
        when = datetime.fromtimestamp(float(created), UTC) if isinstance(created, int | float) else datetime.now(UTC)
        return when.strftime("%Y-%m-%dT%H:%M:%SZ")

    return json.dumps(
        {
            "requestContext": {
                "functionArn": mapping.function_arn,
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": invokes,
            },
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
            "version": "1.0",
            "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "DDBStreamBatchInfo": {
                "shardId": shard_id,
                "startSequenceNumber": records[0]["dynamodb"]["SequenceNumber"],
                "endSequenceNumber": records[-1]["dynamodb"]["SequenceNumber"],
                "approximateArrivalOfFirstRecord": arrival(records[0]),
                "approximateArrivalOfLastRecord": arrival(records[-1]),
                "batchSize": len(records),
                "streamArn": mapping.stream_arn,
            },
        }
    )
