"""State machine pieces both stages use: retries of transient errors, logging and tracing, and the
failure path that records what failed before the execution fails."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from lakeline.lambda_support import FailedStep

TRANSIENT_ERRORS = [
    "Athena.TooManyRequestsException",
    "Athena.InternalServerException",
    "Athena.AmazonAthenaException",
    "Glue.ConcurrentRunsExceededException",
    "Glue.ThrottlingException",
    "Lambda.TooManyRequestsException",
    "Lambda.ServiceException",
    "States.Timeout",
]
# How long one SQL task (an Athena statement, a Glue job run) may take.
SQL_TIMEOUT = Duration.hours(2)


def add_retry(state: sfn.TaskStateBase) -> None:
    state.add_retry(
        errors=TRANSIENT_ERRORS,
        interval=Duration.seconds(5),
        max_attempts=4,
        backoff_rate=2.0,
        jitter_strategy=sfn.JitterType.FULL,
    )


def logged_state_machine(
    scope: Construct, construct_id: str, definition: sfn.IChainable, *, key: kms.IKey, **kwargs: Any
) -> sfn.StateMachine:
    # Execution data (statements, messages, partition values) is logged: encrypted with the data key.
    log_group = logs.LogGroup(scope, f"{construct_id}Logs", retention=logs.RetentionDays.ONE_MONTH, encryption_key=key)
    machine = sfn.StateMachine(
        scope,
        construct_id,
        definition_body=sfn.DefinitionBody.from_chainable(definition),
        tracing_enabled=True,
        timeout=Duration.hours(6),
        logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=True),
        **kwargs,
    )
    return machine


def failure_recorder(
    scope: Construct, construct_id: str, function: lambda_.IFunction, payload: dict[str, str]
) -> sfn.Chain:
    """Invoke the stage's failure function with ``payload`` (plus the error and the execution id), then
    fail the execution with the original error, so SQS retries the message and finally dead-letters it."""
    record = tasks.LambdaInvoke(
        scope,
        f"{construct_id}Record",
        lambda_function=function,
        payload=sfn.TaskInput.from_object(
            {**payload, "error.$": "$.error", "failed_step.$": "$.failed_step", "execution_id.$": "$$.Execution.Id"}
        ),
        result_path="$.failure",
    )
    add_retry(record)
    failed = sfn.Fail(scope, f"{construct_id}Failed", error_path="$.error.Error", cause_path="$.error.Cause")
    return record.next(failed)


def failure_marker(scope: Construct, construct_id: str, step: FailedStep) -> sfn.Pass:
    """Mark the step that failed (``$.failed_step``, which the failure handlers read)."""
    return sfn.Pass(scope, construct_id, result=sfn.Result.from_string(step), result_path="$.failed_step")
