"""Small pieces every Lambda handler shares: typed environment, and dead-lettering with a reason."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel, Field, ValidationError

from lakeline.errors import ConfigError
from lakeline.settings import PipelineSettings, TableSettings

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

ModelT = TypeVar("ModelT", bound=BaseModel)


def load_environment(model: type[ModelT], environ: Mapping[str, str]) -> ModelT:
    """Fill ``model`` from environment variables named after its fields in upper case.

    Structured settings (per-table storage, lists) are passed by the CDK constructs as JSON.
    """
    values: dict[str, object] = {}
    for name in model.model_fields:
        raw = environ.get(name.upper())
        if raw is None:
            continue
        if raw.lstrip().startswith(("{", "[")):
            try:
                values[name] = json.loads(raw)
            except json.JSONDecodeError as error:
                raise ConfigError(f"Lambda environment {name.upper()} is not valid JSON: {error}") from error
        else:
            values[name] = raw
    try:
        return model.model_validate(values)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in error.errors())
        raise ConfigError(f"Lambda environment is incomplete or invalid: {problems}") from error


def dead_letter(sqs: SQSClient, queue_url: str, body: str, reason: str, source: str) -> None:
    """Park a message that can never succeed in the DLQ at once, with why, instead of retrying it."""
    sqs.send_message(
        QueueUrl=queue_url,
        MessageBody=body,
        MessageAttributes={
            "lakeline_reason": {"DataType": "String", "StringValue": reason[:1000]},
            "lakeline_source": {"DataType": "String", "StringValue": source},
        },
    )


class RouterEnvironment(BaseModel):
    """What both routers read: the state machine they start, their DLQ, and how tables are written."""

    state_machine_arn: str
    dead_letter_queue_url: str
    stage_bucket: str
    raw_bucket: str = "unused"
    pipeline_environment: str | None = None
    table_settings: dict[str, TableSettings] = Field(default_factory=dict)
    default_table_settings: TableSettings = TableSettings()

    def pipeline_settings(self) -> PipelineSettings:
        return PipelineSettings(
            raw_root=f"s3://{self.raw_bucket}/",
            stage_root=f"s3://{self.stage_bucket}/",
            environment=self.pipeline_environment,
            default_table=self.default_table_settings,
            tables=self.table_settings,
        )


class StepError(BaseModel):
    """The error a Step Functions Catch puts in the state (``$.error``)."""

    Error: str = "Unknown"
    Cause: str = ""
