"""Lineage queue -> lineage table.

Each message body is one standard lineage record. Powertools parses and validates every message
(a malformed one fails alone); the valid ones are written together, 25 items per call, and only the
messages whose items could not be written are reported back for redelivery.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.batch import process_partial_response
from aws_lambda_powertools.utilities.parser.models import SqsRecordModel
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field, Json

from lakeline.lineage.backoff import Backoff
from lakeline.lineage.batching import BufferedSqsBatchProcessor
from lakeline.lineage.load import LineageLoader
from lakeline.lineage.records import LineageRecord

logger = Logger(service="lakeline-lineage")
tracer = Tracer(service="lakeline-lineage")


class Environment(BaseModel):
    model_config = ConfigDict(extra="ignore")

    table_name: str = Field(alias="LINEAGE_TABLE_NAME", min_length=1)
    write_attempts: int = Field(default=8, alias="LINEAGE_WRITE_ATTEMPTS", ge=1)


class LineageMessage(SqsRecordModel):
    body: Json[LineageRecord]


@cache
def loader() -> LineageLoader:
    environment = Environment.model_validate(dict(os.environ))
    return LineageLoader(
        boto3.client("dynamodb"), environment.table_name, backoff=Backoff(attempts=environment.write_attempts)
    )


def parse_message(record: LineageMessage) -> LineageRecord:
    return record.body


def write_batch(records: Sequence[tuple[str, Any]]) -> Mapping[str, str]:
    report = loader().load(records)
    logger.info(
        "lineage records loaded",
        extra={
            "records": report.records,
            "items": report.items,
            "write_calls": report.write_calls,
            "retries": report.retries,
            "failed_messages": len(report.failed),
        },
    )
    return report.failed


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    processor = BufferedSqsBatchProcessor(flush=write_batch, model=LineageMessage)
    return dict(
        process_partial_response(event=event, record_handler=parse_message, processor=processor, context=context)
    )
