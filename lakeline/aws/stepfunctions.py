"""Step Functions: starting an execution exactly once per name."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from botocore.exceptions import ClientError

from lakeline.errors import ConfigError

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

RERUNNABLE_STATES = frozenset({"FAILED", "TIMED_OUT", "ABORTED"})
MAX_EXECUTION_ATTEMPTS = 10
STATUS_CHANGE = "Step Functions Execution Status Change"
"""The EventBridge detail type of an execution's status change (what Step Functions puts on the default bus)."""


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
    for attempt in range(1, MAX_EXECUTION_ATTEMPTS + 1):
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
    raise ConfigError(f"execution {name} failed {MAX_EXECUTION_ATTEMPTS} times; not starting it again")
