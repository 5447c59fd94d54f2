"""Small pieces every Lambda handler shares: typed environment (dead-lettering and starting executions
are AWS plumbing: ``lakeline.aws``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TypeVar

import pydantic
from pydantic import BaseModel, Field

from lakeline.commits import DEFAULT_GRACE_SECONDS
from lakeline.commits.slots import DEFAULT_RUNS_IN_FLIGHT
from lakeline.errors import ConfigError, field_path, validation_problems
from lakeline.settings import PipelineSettings, TableSettings

_ModelT = TypeVar("_ModelT", bound=BaseModel)


def load_environment(model: type[_ModelT], environ: Mapping[str, str]) -> _ModelT:
    """Fill ``model`` from environment variables: a field's alias, else its name in upper case.

    Structured settings (per-table storage, lists) are passed by the CDK constructs as JSON.
    """
    values: dict[str, object] = {}
    for name, field in model.model_fields.items():
        variable = field.alias or name.upper()
        key = field.alias or name  # what model_validate reads the field by
        raw = environ.get(variable)
        if raw is None:
            continue
        if field.annotation is not str and raw.lstrip().startswith(("{", "[")):  # a str is taken as written
            try:
                values[key] = json.loads(raw)
            except json.JSONDecodeError as error:
                raise ConfigError(f"Lambda environment {variable} is not valid JSON: {error}") from error
        else:
            values[key] = raw
    try:
        return model.model_validate(values)
    except pydantic.ValidationError as error:
        problems = "; ".join(validation_problems(error, path=lambda location: field_path(location).upper()))
        raise ConfigError(f"Lambda environment is incomplete or invalid: {problems}") from error


class RouterEnvironment(BaseModel):
    """What both routers read: the state machine they start, their DLQ, where tables are written. How each table is
    written (its settings, with its quality checks) is not here but in the code asset (``lambdas.table_settings``):
    Lambda bounds a function's environment at 4 KB."""

    state_machine_arn: str
    dead_letter_queue_url: str
    pipeline_state_table: str
    stage_bucket: str
    raw_bucket: str = "unused"
    pipeline_environment: str | None = None
    runs_in_flight: int = Field(default=DEFAULT_RUNS_IN_FLIGHT, ge=1)  # the stage's executions at once
    # A file of table settings read in place of the code asset's: never set by the stacks; for a test's settings.
    table_settings_file: str | None = None

    def pipeline_settings(self, default_table: TableSettings, tables: Mapping[str, TableSettings]) -> PipelineSettings:
        """The pipeline's settings with the deployed table settings (``default_table``, ``tables`` keyed
        'database.table')."""
        return PipelineSettings(
            raw_root=f"s3://{self.raw_bucket}/",
            stage_root=f"s3://{self.stage_bucket}/",
            environment=self.pipeline_environment,
            default_table=default_table,
            tables=dict(tables),
        )


class SettleEnvironment(BaseModel):
    """What ending a leased run needs: the partition states and how long superseded versions are kept.
    A follow-up run is queued on the stage's follow-up queue (``STAGE_A_FOLLOW_UP_QUEUE_URL``,
    ``STAGE_B_FOLLOW_UP_QUEUE_URL``), whose router starts it; a stage A follow-up of a partition that is still
    receiving files waits ``follow_up_window_seconds`` first (``stage_a.arrivals.follow_up_window``)."""

    pipeline_state_table: str
    superseded_grace_seconds: float = Field(default=DEFAULT_GRACE_SECONDS, ge=0)
    follow_up_window_seconds: int = Field(default=30, ge=0, le=900)  # SQS's longest DelaySeconds


class StepError(BaseModel):
    """The error a Step Functions Catch puts in the state (``$.error``)."""

    Error: str = "Unknown"
    Cause: str = ""

    def described(self) -> str:
        """``Error: why``: what made the task fail, said first. A ``.sync`` task's cause is the whole
        query execution or job run (its query text or arguments, the plan, ahead of the reason), which a
        parked reason cut at 1000 characters would lose; a function's is its error type and message."""
        reason = task_failure_reason(self.Cause)
        # A function's cause names its error type already (the Catch's Error is that type): said once.
        return reason if reason.startswith(f"{self.Error}: ") else f"{self.Error}: {reason}"


def task_failure_reason(cause: str) -> str:
    """The reason in a task's cause: an Athena query's state change reason, a Glue job run's error
    message, a Lambda function's error; else the cause as it is."""
    try:
        found = json.loads(cause)
    except ValueError:
        return cause
    if not isinstance(found, dict):
        return cause
    query = found.get("QueryExecution")
    if isinstance(query, dict):
        status = query.get("Status", {})
        return (
            f"Athena query {query.get('QueryExecutionId', '?')} {status.get('State', 'FAILED')}: "
            f"{status.get('StateChangeReason', '(no reason given)')}"
        )
    if "JobRunState" in found:
        return (
            f"Glue job run {found.get('Id', '?')} of {found.get('JobName', '?')} {found['JobRunState']}: "
            f"{found.get('ErrorMessage', '(no error message)')}"
        )
    if "errorMessage" in found:
        return f"{found.get('errorType', 'Error')}: {found['errorMessage']}"
    return cause
