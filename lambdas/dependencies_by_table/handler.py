"""Lambda on the ``dependencies`` table stream (NEW_AND_OLD_IMAGES) → ``dependencies-by-table``.

Every record of the batch is applied on its own (Powertools batch processing). An item that can never be
applied (it does not validate, or it would close a dependency cycle) is parked by the function itself in the
stream's failure queue, with its key, sequence number and reason, and its record is done: the records behind
it on the shard go on. Any other error (throttling, a missing grant) fails only its record, which Lambda
retries from there and, once its retries are spent, sends to the same queue (``on_failure``).
"""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from boto3.dynamodb.types import TypeDeserializer
from pydantic import BaseModel, ConfigDict, Field, field_validator

from lakeline.aws.clients import AwsClients
from lakeline.dependencies.store import DependencyStore
from lakeline.dependencies.sync import RefusedChange, apply_stream_change, park_refused
from lakeline.errors import InvalidInputError
from lakeline.lambda_support import load_environment
from lambdas.environments import DependenciesStreamEnvironment
from lambdas.observability import observability

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

logger, tracer, metrics = observability("dependencies-by-table")
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)
_deserializer = TypeDeserializer()


class DependencyStreamRecord(BaseModel):
    """One stream record, images decoded from DynamoDB JSON (numbers as Decimal)."""

    model_config = ConfigDict(frozen=True)

    event_name: Literal["INSERT", "MODIFY", "REMOVE"] = Field(alias="eventName")
    sequence_number: str
    keys: dict[str, Any] | None = None
    old_image: dict[str, Any] | None = None
    new_image: dict[str, Any] | None = None

    @field_validator("keys", "old_image", "new_image", mode="before")
    @classmethod
    def _decode(cls, value: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        return {key: _deserializer.deserialize(attribute) for key, attribute in value.items()}

    @property
    def dataset(self) -> str | None:
        """The item's key as stored (not normalised: a refused key is named as written)."""
        key = (self.keys or {}).get("dataset")
        return key if isinstance(key, str) else None

    @classmethod
    def from_event_record(cls, record: dict[str, Any]) -> DependencyStreamRecord:
        change = record.get("dynamodb", {})
        return cls.model_validate(
            {
                "eventName": record.get("eventName"),
                "sequence_number": change.get("SequenceNumber", ""),
                "keys": change.get("Keys"),
                "old_image": change.get("OldImage"),
                "new_image": change.get("NewImage"),
            }
        )


@cache
def _environment() -> DependenciesStreamEnvironment:
    return load_environment(DependenciesStreamEnvironment, os.environ)


@cache
def _store() -> DependencyStore:
    """Configuration and client, made once per execution environment (at the first invocation)."""
    environment = _environment()
    return DependencyStore(AwsClients().dynamodb, environment.dependencies_table, environment.by_table_table)


@cache
def _sqs() -> SQSClient:
    return AwsClients().sqs


@tracer.capture_method
def record_handler(record: DynamoDBRecord) -> None:
    """Apply one record; raising marks it (only it) as failed in the partial batch response."""
    where = {"sequence_number": record.dynamodb.sequence_number if record.dynamodb else None}
    try:
        change = DependencyStreamRecord.from_event_record(record.raw_event)
        where["event_name"] = change.event_name
        try:
            result = apply_stream_change(_store(), change.event_name, change.old_image, change.new_image)
        except InvalidInputError as error:  # the item's own fault: retrying would refuse it again
            refused = RefusedChange(change.dataset, change.event_name, change.sequence_number, str(error))
            park_refused(_sqs(), _environment().failure_queue_url, refused)
            logger.error(
                "dependency item refused", extra={**where, "dataset": refused.dataset, "reason": refused.reason}
            )
            metrics.add_metric(name="RefusedDependencyItems", unit=MetricUnit.Count, value=1)
            return
        metrics.add_metric(name="RoutingItemsWritten", unit=MetricUnit.Count, value=len(result.puts))
        metrics.add_metric(name="RoutingItemsDeleted", unit=MetricUnit.Count, value=len(result.deletes))
    except Exception:
        logger.exception("dependencies-by-table update failed", extra=where)
        raise
    logger.info(
        "dependencies-by-table updated",
        extra={
            **where,
            "dataset": result.dataset,
            "written": [edge.source_table for edge in result.puts],
            "deleted": [source for source, _ in result.deletes],
        },
    )


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
