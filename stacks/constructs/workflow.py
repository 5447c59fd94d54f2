"""State machine pieces both stages use: retries of transient errors, logging and tracing, and the
failure path that records what failed before the execution fails."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from lakeline.run_order import FailedStep

TRANSIENT_ERRORS = [
    "Athena.InternalServerException",
    "Athena.AmazonAthenaException",
    "Lambda.ServiceException",
    "States.Timeout",
]
THROTTLED = [
    "Athena.TooManyRequestsException",
    "Glue.ConcurrentRunsExceededException",
    "Glue.ThrottlingException",
    "Lambda.TooManyRequestsException",
]
"""What a service answers when it is at its quota (Athena's active queries, a Glue job's concurrent runs,
Lambda's concurrency): the task waits and tries again (``add_throttling_retry``)."""
THROTTLED_RETRIES = 20
THROTTLED_FIRST_WAIT = Duration.seconds(30)
THROTTLED_LONGEST_WAIT = Duration.minutes(5)
# How long one SQL task (an Athena statement, a Glue job run) may take.
SQL_TIMEOUT = Duration.hours(2)


def add_throttling_retry(state: sfn.TaskStateBase, also: Sequence[str] = ()) -> None:
    """Throttling is retried for up to about 80 minutes (20 retries, waits growing 1.5x from 30 s to at most 5
    minutes, full jitter: about 40 minutes on average): a backfill that holds Athena, Glue or Lambda at its quota
    for that long delays runs instead of failing them and parking what they took in bulk (#39). Listed first,
    so a throttled call uses this budget and not the transient errors' (each retrier counts its own attempts).
    ``also``: the error names a task's own function raises when its service throttles it."""
    state.add_retry(
        errors=[*THROTTLED, *also],
        interval=THROTTLED_FIRST_WAIT,
        max_attempts=THROTTLED_RETRIES,
        backoff_rate=1.5,
        max_delay=THROTTLED_LONGEST_WAIT,
        jitter_strategy=sfn.JitterType.FULL,
    )


def add_retry(state: sfn.TaskStateBase, throttled: Sequence[str] = ()) -> None:
    add_throttling_retry(state, throttled)
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
    # Kept for the app's log_retention_days (stacks/app.py LogRetention).
    log_group = logs.LogGroup(scope, f"{construct_id}Logs", encryption_key=key)
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


def execution_logs(machine: sfn.StateMachine) -> logs.LogGroup:
    """The log group ``logged_state_machine`` made for ``machine`` (its executions' events)."""
    scope = machine.node.scope
    assert scope is not None, "a state machine always has a scope"
    found = scope.node.find_child(f"{machine.node.id}Logs")
    if not isinstance(found, logs.LogGroup):
        raise TypeError(f"{machine.node.path} was not made by logged_state_machine")
    return found


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
