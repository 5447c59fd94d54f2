"""Which stage B step failed, from what the state machine's Catch hands the failure function (#21):
``steps[<index>] failed: `` before an Athena step's cause (the Map iteration's Fail state), a
``StageBStepFailed`` message in a Glue job run's ``ErrorMessage``."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from lakeline.lambda_support import StepError
from stage_b.failures import STEP_CAUSE_FORMAT, failed_query_times, failed_step_index
from stage_end.stage_b import StageBFailure

QUERY = json.dumps({"QueryExecution": {"QueryExecutionId": "q", "Status": {"StateChangeReason": "steps[7] ( no"}}})


def test_an_athena_iteration_s_index_is_read_and_taken_off_the_cause() -> None:
    cause = STEP_CAUSE_FORMAT.format(2, QUERY)
    index, error = failed_step_index(StepError(Error="States.TaskFailed", Cause=cause), "steps")
    assert (index, error) == (2, StepError(Error="States.TaskFailed", Cause=QUERY))


def test_a_cause_without_the_iteration_s_index_names_no_step() -> None:
    """The DROP after the steps also fails as ``steps``; a step's own text is not read as an index."""
    for cause in (QUERY, "see steps[3] failed: later", ""):
        error = StepError(Error="States.TaskFailed", Cause=cause)
        assert failed_step_index(error, "steps") == (None, error)


def test_a_glue_job_run_s_error_message_names_the_step_stage_b_step_failed_names() -> None:
    message = "Error Category: QUERY_ERROR; StageBStepFailed: stage B a.b {'d': '1'}: steps[1] (x) failed: steps[9] ("
    error = StepError(Error="States.TaskFailed", Cause=json.dumps({"JobRunState": "FAILED", "ErrorMessage": message}))
    assert failed_step_index(error, "spark") == (1, error)
    for cause in (json.dumps({"JobRunState": "FAILED", "ErrorMessage": "reconcile failed"}), "not json", "[]"):
        other = StepError(Error="States.TaskFailed", Cause=cause)
        assert failed_step_index(other, "spark") == (None, other)


@pytest.mark.parametrize("failed_step", ["reconcile", "commit", "publish", "post_update"])
def test_other_failures_name_no_step_whatever_their_cause_says(failed_step: str) -> None:
    error = StepError(Error="X", Cause=STEP_CAUSE_FORMAT.format(0, "y"))
    assert failed_step_index(error, failed_step) == (None, error)


def test_the_failure_input_carries_the_index_as_a_typed_field() -> None:
    request = StageBFailure.model_validate(
        {"plan": {}, "error": {"Error": "States.TaskFailed", "Cause": STEP_CAUSE_FORMAT.format(0, QUERY)}}
    )
    assert (request.failed_step, request.failed_index, request.error.Cause) == ("steps", 0, QUERY)
    given = StageBFailure.model_validate({"plan": {}, "error": {"Cause": "c"}, "failed_index": 3})
    assert given.failed_index == 3
    with pytest.raises(ValueError):
        StageBFailure.model_validate({"plan": {}, "error": {}, "failed_index": -1})


def test_the_failed_step_s_times_are_its_query_s() -> None:
    status = {"SubmissionDateTime": 1705730400000, "CompletionDateTime": "2024-01-20T06:01:00Z"}
    cause = json.dumps({"QueryExecution": {"Status": status}})
    started, ended = failed_query_times(StepError(Cause=cause)) or (None, None)
    assert (started, ended) == (datetime(2024, 1, 20, 6, 0, tzinfo=UTC), datetime(2024, 1, 20, 6, 1, tzinfo=UTC))
    backwards = json.dumps({"QueryExecution": {"Status": {**status, "CompletionDateTime": "2024-01-20T05:00:00Z"}}})
    for other in ("", "{}", json.dumps({"QueryExecution": {"Status": {"State": "FAILED"}}}), backwards):
        assert failed_query_times(StepError(Cause=other)) is None
