"""Queue B → stage B: plan each message (dependency item, catalog, SQL files) and start one execution.

The execution name is the message id, so a redelivered message cannot run twice; a message that can
never succeed (invalid, no dependency item, an unknown token) goes to the DLQ with its reason.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError as PydanticValidationError

from lakeline.dependencies.store import DependencyStore
from lakeline.engines.athena import AthenaEngine
from lakeline.errors import ValidationError
from lakeline.lambda_support import RouterEnvironment, dead_letter, load_environment, start_execution_once
from lakeline.partitions import new_run_token
from lakeline.settings import PipelineSettings
from stage_b.artifacts import s3_sql_reader
from stage_b.messages import StageBMessage
from stage_b.plan import plan_stage_b
from stage_b.process import team_of

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_stepfunctions import SFNClient

logger = Logger(service="stage-b-router")
tracer = Tracer(service="stage-b-router")
processor = BatchProcessor(event_type=EventType.SQS)


class StageBRouterEnvironment(RouterEnvironment):
    dependencies_table: str
    artifacts_bucket: str


@dataclass(frozen=True)
class Runtime:
    environment: StageBRouterEnvironment
    settings: PipelineSettings
    dependencies: DependencyStore
    catalog: AthenaEngine
    s3: S3Client
    sfn: SFNClient
    sqs: SQSClient


@cache
def runtime() -> Runtime:
    environment = load_environment(StageBRouterEnvironment, os.environ)
    settings = environment.pipeline_settings()
    return Runtime(
        environment=environment,
        settings=settings,
        dependencies=DependencyStore(boto3.client("dynamodb"), environment.dependencies_table),
        catalog=AthenaEngine(boto3.client("athena"), glue=boto3.client("glue")),
        s3=boto3.client("s3"),
        sfn=boto3.client("stepfunctions"),
        sqs=boto3.client("sqs"),
    )


def start(message: StageBMessage, run: Runtime) -> str:
    item = run.dependencies.get_item(message.target_dataset)
    if item is None:
        raise ValidationError(f"no dependency item for {message.target_dataset}")
    database, table = message.target_dataset.split(".")
    schema = run.catalog.describe_table(database, table)
    reader = s3_sql_reader(run.s3, run.environment.artifacts_bucket, team_of(database))
    name = message.deduplication_id()
    plan = plan_stage_b(message, item, schema, run.settings, reader, run_token=new_run_token(unique=name))
    payload = json.dumps({"message": message.model_dump(mode="json"), "plan": plan.to_dict()})
    started, duplicate = start_execution_once(run.sfn, run.environment.state_machine_arn, name, payload)
    if duplicate:
        logger.info("message already started; redelivery ignored", extra={"execution": started})
    return started


def handle_record(record: SQSRecord) -> None:
    run = runtime()
    try:
        message = StageBMessage.model_validate_json(record.body)
        name = start(message, run)
    except (PydanticValidationError, ValidationError) as error:
        logger.warning("stage B message rejected", extra={"reason": str(error)})
        dead_letter(run.sqs, run.environment.dead_letter_queue_url, record.body, str(error), "stage-b-router")
        return
    logger.info("stage B started", extra={"target": message.node, "execution": name})


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(event=event, record_handler=handle_record, processor=processor, context=context)
