"""Small pieces every Lambda handler shares: typed environment, and dead-lettering with a reason."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from botocore.exceptions import ClientError
from pydantic import BaseModel, Field, ValidationError

from lakeline.commits import DEFAULT_GRACE_SECONDS
from lakeline.errors import ConfigError
from lakeline.settings import PipelineSettings, TableSettings

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_stepfunctions import SFNClient

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
    pipeline_state_table: str
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


class SettleEnvironment(BaseModel):
    """What ending a leased run needs: the partition states and how long superseded versions are kept.
    A follow-up run is queued on the stage's own queue (``STAGE_A_QUEUE_URL``, ``STAGE_B_QUEUE_URL``),
    whose router starts it."""

    pipeline_state_table: str
    superseded_grace_seconds: float = Field(default=DEFAULT_GRACE_SECONDS, ge=0)


class StepError(BaseModel):
    """The error a Step Functions Catch puts in the state (``$.error``)."""

    Error: str = "Unknown"
    Cause: str = ""


RERUNNABLE_STATES = frozenset({"FAILED", "TIMED_OUT", "ABORTED"})
MAX_ATTEMPTS = 10


class ExecutionStart(NamedTuple):
    name: str
    duplicate: bool  # the execution had been started before: not started again
    ended: bool = False  # ...and it has already succeeded (nothing of it runs any more)


def start_execution_once(sfn: SFNClient, state_machine_arn: str, name: str, payload: str) -> ExecutionStart:
    """Start ``name`` unless it already ran or runs; say which it was.

    The name is fixed by the arrival or message, so a redelivery is recognised. A message re-driven
    from the DLQ after a failed execution runs again, as ``<name>-2``, ``<name>-3``, ...: a name whose
    execution failed, timed out or was aborted is not a reason to skip.
    """
    execution_prefix = state_machine_arn.replace(":stateMachine:", ":execution:", 1)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        candidate = name if attempt == 1 else f"{name[:76]}-{attempt}"
        try:
            sfn.start_execution(stateMachineArn=state_machine_arn, name=candidate, input=payload)
            return ExecutionStart(candidate, False)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                raise
        status = sfn.describe_execution(executionArn=f"{execution_prefix}:{candidate}")["status"]
        if status not in RERUNNABLE_STATES:
            return ExecutionStart(candidate, True, ended=status == "SUCCEEDED")
    raise ConfigError(f"execution {name} failed {MAX_ATTEMPTS} times; not starting it again")
