"""Which step of a stage B run failed, and when the steps of a finished run ran, from what its state
machine hands the failure and post-update functions (their OpenLineage life cycle, #21).

Athena engine: each step is one iteration of the steps ``Map``; a Map's Catch receives only the Error and
Cause of the iteration that failed, so the iteration, which knows its index (``$$.Map.Item.Index``), fails
itself with the task's Error and ``STEP_CAUSE_FORMAT`` (``steps[<index>] failed: <the task's cause>``) as
its Cause. Each step's task keeps its query's ``SubmissionDateTime`` and ``CompletionDateTime``
(``StepTime``), the Map's output the list of them; a failed Map's output is lost, but the failed step's
cause holds its ``QueryExecution``, with its times.

Spark engine: one Glue job run runs every step; a failed step ends it with ``StageBStepFailed``, whose
message (``... steps[<index>] (<info>) failed: ...``) Glue reports as the run's ``ErrorMessage``, in the
task's cause (the ``JobRun``). The job run gives no step's times.
"""

from __future__ import annotations

import json
import re
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from lakeline.lambda_support import StepError
from lakeline.run_order import FailedStep

STEP_CAUSE_FORMAT = "steps[{}] failed: {}"
"""A ``States.Format`` template: the failed iteration's index, then the task's own cause."""

_ITERATION_CAUSE = re.compile(r"steps\[(\d+)\] failed: ", re.ASCII)
_STEP_FAILED = re.compile(r"steps\[(\d+)\] \(", re.ASCII)  # StageBStepFailed's message (stage_b.run)


class StepTime(BaseModel):
    """When one step's query ran (Athena's ``QueryExecution.Status``: epoch numbers or ISO strings)."""

    model_config = ConfigDict(frozen=True)

    started: datetime
    ended: datetime


def failed_step_index(error: StepError, failed_step: FailedStep) -> tuple[int | None, StepError]:
    """The index of the step that failed, if ``error`` says, and the error as the task gave it (the
    iteration's prefix taken off its cause, so that ``StepError.described`` reads the task's own)."""
    if failed_step == "steps":
        found = _ITERATION_CAUSE.match(error.Cause)
        if found is None:  # not a step's query: the DROP of the temp table after the steps
            return None, error
        return int(found.group(1)), StepError(Error=error.Error, Cause=error.Cause[found.end() :])
    if failed_step == "spark":
        try:
            run = json.loads(error.Cause)
        except ValueError:
            return None, error
        message = run.get("ErrorMessage") if isinstance(run, dict) else None
        found = _STEP_FAILED.search(message) if isinstance(message, str) else None
        return (int(found.group(1)) if found else None), error
    return None, error


def failed_query_times(error: StepError) -> tuple[datetime, datetime] | None:
    """When the failed step's query ran: an Athena task's cause is its ``QueryExecution``."""
    try:
        cause = json.loads(error.Cause)
        status = cause["QueryExecution"]["Status"]
        times = StepTime(started=status["SubmissionDateTime"], ended=status["CompletionDateTime"])
    except (ValueError, KeyError, TypeError):  # not a query's cause, or one without both times
        return None
    return (times.started, times.ended) if times.started <= times.ended else None


def step_times(times: list[StepTime] | None) -> list[tuple[datetime, datetime]] | None:
    """The steps' (start, end) for a replay (``StepEvents.stage_b``), unless a step ends before it starts."""
    if times is None or any(t.ended < t.started for t in times):
        return None
    return [(t.started, t.ended) for t in times]
