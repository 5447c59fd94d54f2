"""The end of a run whose execution ended outside its Catch: aborted by an operator (``StopExecution``), timed out
(the state machine's 6 h), or failed where no Catch takes it (``States.DataLimitExceeded``, a failure of the
failure path itself). Step Functions reports each as an "Execution Status Change" event; the status-change
function (``lambdas/stranded_run``) ends the run here exactly as the failure path ends one
(``fail_stage_a``/``fail_stage_b``): its output deleted unless committed, its lease ended (a follow-up queued for
what waits), its arrivals or messages parked in the stage's DLQ with the reason.

Idempotent: a run whose lease its partition no longer gives to it was ended already (its Catch ran the failure
function, its post-update ended the lease, or this event was delivered before), and nothing more is done.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from lakeline.commits import Lease, PartitionCommits
from lakeline.errors import InvalidInputError, validated
from lakeline.lambda_support import StepError
from lakeline.run_order import FailedStep
from lakeline.storage import same_prefix
from stage_end.runtime import Ended, FailureRuntime
from stage_end.stage_a import StageAFailure, fail_stage_a
from stage_end.stage_b import StageBFailure, fail_stage_b
from stage_end.waiting import Stage

ENDED_OUTSIDE_CATCH = ("ABORTED", "TIMED_OUT", "FAILED")

# What Step Functions says of an execution it ended itself (no error of a state's).
STATUS_ERRORS = {
    "ABORTED": StepError(Error="States.Aborted", Cause="the execution was stopped (StopExecution)"),
    "TIMED_OUT": StepError(Error="States.Timeout", Cause="the execution ran past its state machine's timeout"),
}


class ExecutionStatusChange(BaseModel):
    """The ``detail`` of Step Functions' "Execution Status Change" event (the fields read here)."""

    model_config = ConfigDict(extra="ignore")

    execution_arn: str = Field(alias="executionArn", min_length=1)
    state_machine_arn: str = Field(alias="stateMachineArn", min_length=1)
    status: Literal["ABORTED", "TIMED_OUT", "FAILED"]
    error: str | None = None
    cause: str | None = None

    def step_error(self) -> StepError:
        if self.status in STATUS_ERRORS:
            return STATUS_ERRORS[self.status]
        return StepError(Error=self.error or "States.Runtime", Cause=self.cause or "the execution failed")


def still_held(commits: PartitionCommits, lease: dict[str, Any] | None) -> bool:
    """The run's partition still gives its lease to the run: nothing ended the run yet."""
    if lease is None:
        return False
    taken = Lease.from_dict(lease)
    return commits.read(taken.key).lease_owner == taken.owner


def _failed_step(commits: PartitionCommits, lease: dict[str, Any], write_step: FailedStep) -> FailedStep:
    """Where the run stopped, as far as its end is concerned: after its commit (the partition's version is
    the run's prefix; kept, and the catalog pointed at it by the next run) or before (its output is deleted)."""
    taken = Lease.from_dict(lease)
    published = commits.read(taken.key).published
    return "publish" if published and same_prefix(published, taken.location) else write_step


def end_stranded(
    stage: Stage, execution_input: dict[str, Any], status: ExecutionStatusChange, run: FailureRuntime
) -> Ended:
    """End the run of an execution that ended outside its Catch, as its failure path would have; a run that
    was ended already (or holds no lease: nothing to end) is left as it is."""
    plan = execution_input.get("plan")
    if not isinstance(plan, dict):
        raise InvalidInputError(f"execution {status.execution_arn}: its input has no plan")
    lease = plan.get("lease")
    commits = run.runs.commits
    if not still_held(commits, lease):
        return Ended(
            {"execution": status.execution_arn, "status": status.status, "ended": False},
            "execution ended; its run had ended already",
            {"execution": status.execution_arn, "status": status.status},
        )
    assert lease is not None  # still_held
    common = {"plan": plan, "error": status.step_error(), "execution_id": status.execution_arn}
    if stage == "A":
        request_a = StageAFailure(
            **common, arrival=execution_input.get("arrival"), failed_step=_failed_step(commits, lease, "ctas")
        )
        ended = fail_stage_a(request_a, run)
    else:
        request_b = StageBFailure(**common, failed_step=_failed_step(commits, lease, "steps"))
        ended = fail_stage_b(request_b, run)
    noted = {"execution": status.execution_arn, "status": status.status, "ended": True}
    return replace(ended, report={**ended.report, **noted})


def parse_status_change(detail: Any) -> ExecutionStatusChange:
    return validated(ExecutionStatusChange, detail, "execution status change")
