"""A failure in AWS never disappears (#20, defects 5 and 6), asserted on the synthesized templates: every
task of a stage's state machine, the post-update after the publish included, has a Catch into the failure
path (which ends the lease, parks the input in the DLQ and records the failure), a timed-out query can be
stopped, failed or timed-out executions and function errors raise alarms, and execution logs (which carry
SQL and data values) are encrypted with the data key."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest
from aws_cdk.assertions import Template

from tests.infrastructure.test_stacks import (
    as_list,
    functions_by_handler,
    resources,
    state_machine_definition,
    synthesized,
)


@pytest.fixture(scope="module", params=["athena", "spark"])
def pipeline(request: pytest.FixtureRequest) -> Template:
    return synthesized(request.param)[1]


@pytest.mark.parametrize("stage", ["StageA", "StageB"])
def test_every_task_has_a_catch(pipeline: Template, stage: str) -> None:
    states = state_machine_definition(pipeline, stage)["States"]
    uncaught = sorted(
        name
        for name, state in states.items()
        if state["Type"] in ("Task", "Map")
        and "Catch" not in state
        and not name.endswith("Record")  # the failure path's own record: it fails the execution (alarmed)
    )
    assert uncaught == []


@pytest.mark.parametrize("stage", ["StageA", "StageB"])
def test_a_failed_post_update_is_caught_after_its_retries_into_the_failure_path_marked_post_update(
    pipeline: Template, stage: str
) -> None:
    """#20, defect 5: the post-update runs after the publish and had no Catch, so a failure past its
    retries parked nothing. Its Catch marks the step ``post_update`` (the failure functions then delete
    nothing and park the input for a redrive, which repeats the post-update) and keeps the input (the
    plan, the arrival or message) for the failure function beside the error; the execution still fails."""
    states = state_machine_definition(pipeline, stage)["States"]
    task = states["PostUpdateTask"]
    assert ["States.TaskFailed"] in [retry["ErrorEquals"] for retry in task["Retry"]]  # retried first
    (catch,) = task["Catch"]
    assert catch["ErrorEquals"] == ["States.ALL"] and catch["ResultPath"] == "$.error"
    marker = states[catch["Next"]]
    assert marker["Type"] == "Pass" and marker["Result"] == "post_update" and marker["ResultPath"] == "$.failed_step"
    record = states[marker["Next"]]
    assert marker["Next"] == f"{stage}Record"
    assert record["Parameters"]["Payload"]["failed_step.$"] == "$.failed_step"
    assert record["Parameters"]["Payload"]["plan.$"] == "$.plan"
    assert states[record["Next"]]["Type"] == "Fail"  # alarmed as every failed execution
    assert task["Next"] == f"{stage}Done"


@pytest.mark.parametrize("stage", ["stage_a", "stage_b"])
def test_the_failure_functions_take_post_update_as_a_failed_step(stage: str) -> None:
    """What the Catch marks must be a step the failure handler accepts (an unknown one fails its input check)."""
    import importlib
    import typing

    ends = importlib.import_module(f"stage_end.{stage}")
    failure = ends.StageAFailure if stage == "stage_a" else ends.StageBFailure
    assert "post_update" in typing.get_args(failure.model_fields["failed_step"].annotation)
    assert failure.model_validate({"plan": {}, "error": {}, "failed_step": "post_update"}).failed_step == "post_update"
    # One FailedStep type for both stages; each failure model still refuses the other stage's own step.
    other = "steps" if stage == "stage_a" else "ctas"
    with pytest.raises(pydantic.ValidationError, match=f"'{other}' is not a step of stage"):
        failure.model_validate({"plan": {}, "error": {}, "failed_step": other})


def test_a_timed_out_query_can_be_stopped(pipeline: Template) -> None:
    machines = resources(pipeline, "AWS::StepFunctions::StateMachine")
    if "athena:startQueryExecution.sync" not in json.dumps(machines):
        pytest.skip("the spark engine runs no Athena task")
    for name, machine in machines.items():
        role = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
        actions = {
            action.lower()
            for policy in resources(pipeline, "AWS::IAM::Policy").values()
            if {"Ref": role} in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
            for action in as_list(statement["Action"])
        }
        assert "athena:stopqueryexecution" in actions, name


def alarmed(pipeline: Template) -> list[dict[str, Any]]:
    return [alarm["Properties"] for alarm in resources(pipeline, "AWS::CloudWatch::Alarm").values()]


@pytest.mark.parametrize("metric", ["ExecutionsFailed", "ExecutionsTimedOut"])
def test_each_state_machine_alarms_on_failed_and_timed_out_executions(pipeline: Template, metric: str) -> None:
    machines = set(resources(pipeline, "AWS::StepFunctions::StateMachine"))
    watched = {
        dimension["Value"]["Ref"]
        for alarm in alarmed(pipeline)
        if alarm.get("MetricName") == metric and alarm.get("Namespace") == "AWS/States"
        for dimension in alarm["Dimensions"]
    }
    assert watched == machines
    assert all(a["AlarmActions"] for a in alarmed(pipeline) if a.get("Namespace") == "AWS/States")


def test_each_function_alarms_on_errors(pipeline: Template) -> None:
    functions = {
        name
        for name, f in resources(pipeline, "AWS::Lambda::Function").items()
        if f["Properties"]["Handler"].startswith("lambdas.")
    }
    watched = {
        dimension["Value"]["Ref"]
        for alarm in alarmed(pipeline)
        if alarm.get("MetricName") == "Errors" and alarm.get("Namespace") == "AWS/Lambda"
        for dimension in alarm["Dimensions"]
    }
    assert functions and functions <= watched
    assert len(functions_by_handler(pipeline)) >= 10


def rendered(value: Any) -> str:
    """A template string with its ``Fn::Join`` and ``Ref`` spelled out (``${AWS::Region}``), to compare."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return "${" + str(value["Ref"]) + "}"
    separator, parts = value["Fn::Join"]
    return str(separator).join(rendered(part) for part in parts)


@pytest.mark.parametrize("engine", ["athena", "spark"])
def test_execution_logs_are_encrypted_with_the_data_key(engine: str) -> None:
    storage, pipeline = synthesized(engine)
    # The data key: the storage stack's one KMS key, which the pipeline stack imports by its export.
    (data_key,) = resources(storage, "AWS::KMS::Key")
    (export,) = [
        output["Export"]["Name"]
        for output in storage.to_json()["Outputs"].values()
        if output["Value"] == {"Fn::GetAtt": [data_key, "Arn"]}
    ]
    groups = resources(pipeline, "AWS::Logs::LogGroup")
    machines = resources(pipeline, "AWS::StepFunctions::StateMachine")
    assert len(machines) == 2
    for name, machine in machines.items():
        (destination,) = machine["Properties"]["LoggingConfiguration"]["Destinations"]
        group = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
        assert groups[group]["Properties"].get("KmsKeyId") == {"Fn::ImportValue": export}, name
    # CloudWatch Logs refuses a key whose policy does not let its service use it for the log group.
    logs_statements = [
        statement
        for statement in resources(storage, "AWS::KMS::Key")[data_key]["Properties"]["KeyPolicy"]["Statement"]
        if statement["Effect"] == "Allow"
        and "logs.${AWS::Region}.amazonaws.com"
        in [rendered(s) for s in as_list(statement["Principal"].get("Service", []))]
    ]
    assert logs_statements, "the data key's policy does not let CloudWatch Logs use it"
    for statement in logs_statements:
        assert {"kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"} <= set(as_list(statement["Action"]))
        context = statement["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"]
        assert rendered(context) == "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:*"
