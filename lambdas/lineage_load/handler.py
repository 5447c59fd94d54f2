"""Lineage queue -> lineage table.

Each message body is one standard lineage record. Every message is validated alone; the valid ones are
written together, 25 items per call, and only the messages whose items could not be written are
reported back for redelivery. A message that can never be loaded (not a valid record, or a node's
second parent) is parked in the lineage queue's DLQ at once with the reason, not retried.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from lakeline.aws.clients import AwsClients
from lakeline.aws.retry import Backoff
from lakeline.aws.sqs import dead_letter
from lakeline.aws.sqs_batches import BufferedSqsBatchProcessor
from lakeline.errors import InvalidInputError
from lakeline.lambda_support import load_environment
from lakeline.lineage.records.load import LineageLoader
from lakeline.lineage.records.model import LineageRecord, parse_record
from lambdas.environments import LineageLoadEnvironment
from lambdas.observability import observability

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

logger, tracer, metrics = observability("lakeline-lineage", metrics_service="lineage-load")


@cache
def environment() -> LineageLoadEnvironment:
    return load_environment(LineageLoadEnvironment, os.environ)


@cache
def loader() -> LineageLoader:
    return LineageLoader(
        AwsClients().dynamodb, environment().table_name, backoff=Backoff(attempts=environment().write_attempts)
    )


@cache
def sqs() -> SQSClient:
    return AwsClients().sqs


def park(body: str, reason: str) -> None:
    """Send a message that can never be loaded to the DLQ with why; it is then done with."""
    logger.warning("lineage message parked", extra={"reason": reason})
    metrics.add_metric(name="ParkedLineageMessages", unit=MetricUnit.Count, value=1)
    dead_letter(sqs(), environment().dead_letter_queue_url, body, reason, "lineage-load")


def parse_message(record: SQSRecord) -> LineageRecord | None:
    """The message's record, or ``None`` once an invalid message is parked (it is not retried)."""
    try:
        return parse_record(record.body)
    except InvalidInputError as error:
        park(record.body, str(error))
        return None


def load_batch(results: Sequence[tuple[str, LineageRecord | None]]) -> Mapping[str, str]:
    records = [(message_id, record) for message_id, record in results if record is not None]
    report = loader().load(records)
    metrics.add_metric(name="LineageRecordsLoaded", unit=MetricUnit.Count, value=report.records)
    metrics.add_metric(name="LineageWriteRetries", unit=MetricUnit.Count, value=report.retries)
    by_id = dict(records)
    for message_id, reason in report.rejected.items():
        park(json.dumps(by_id[message_id].to_message()), reason)
    logger.info(
        "lineage records loaded",
        extra={
            "records": report.records,
            "items": report.items,
            "write_calls": report.write_calls,
            "retries": report.retries,
            "failed_messages": len(report.failed),
            "rejected_messages": len(report.rejected),
        },
    )
    return report.failed


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    processor = BufferedSqsBatchProcessor(flush=load_batch)
    return dict(
        process_partial_response(event=event, record_handler=parse_message, processor=processor, context=context)
    )
