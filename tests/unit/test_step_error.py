"""The reason a failure function parks a run's input with says why the task failed first (#20): a
``.sync`` task's cause is the whole query execution or job run, whose query text or arguments come
before the reason and would push it past the 1000 characters a parked reason keeps."""

from __future__ import annotations

import json

from lakeline.lambda_support import StepError


def test_an_athena_task_s_reason_is_the_query_s_state_change_reason() -> None:
    cause = {
        "QueryExecution": {
            "QueryExecutionId": "q-1",
            "Query": "CREATE TABLE t AS SELECT " + "x, " * 500 + "1",
            "Status": {
                "State": "FAILED",
                "StateChangeReason": "TABLE_NOT_FOUND: line 1:8: Table 'db.t' does not exist",
            },
        }
    }
    described = StepError(Error="States.TaskFailed", Cause=json.dumps(cause)).described()
    assert (
        described
        == "States.TaskFailed: Athena query q-1 FAILED: TABLE_NOT_FOUND: line 1:8: Table 'db.t' does not exist"
    )


def test_a_glue_task_s_reason_is_the_job_run_s_error_message() -> None:
    cause = {"Id": "jr_1", "JobName": "stage", "Arguments": {"--plan": "{" + "x" * 3000 + "}"}, "JobRunState": "FAILED"}
    cause["ErrorMessage"] = "AnalysisException: cannot resolve price"
    described = StepError(Error="States.TaskFailed", Cause=json.dumps(cause)).described()
    assert described == "States.TaskFailed: Glue job run jr_1 of stage FAILED: AnalysisException: cannot resolve price"


def test_a_function_s_error_and_any_other_cause_are_kept() -> None:
    function = json.dumps({"errorType": "LeaseLost", "errorMessage": "run r no longer holds the lease"})
    assert (
        StepError(Error="LeaseLost", Cause=function).described()
        == "LeaseLost: run r no longer holds the lease"  # the type said once
    )
    other = json.dumps({"errorType": "KeyError", "errorMessage": "'plan'"})
    assert StepError(Error="States.TaskFailed", Cause=other).described() == "States.TaskFailed: KeyError: 'plan'"
    assert (
        StepError(Error="Lambda.AWSLambdaException", Cause="throttled").described()
        == "Lambda.AWSLambdaException: throttled"
    )
    assert StepError(Error="X", Cause="[1, 2]").described() == "X: [1, 2]"
