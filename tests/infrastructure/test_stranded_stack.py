"""The deployed parts of "no partition stranded" (#39): the status-change rule and its function, the sweep's
schedule, their alarms and grants, and a lease no execution can outlive."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Template

from lakeline.commits import DEFAULT_LEASE_SECONDS
from tests.infrastructure.test_stacks import (
    as_list,
    functions_by_handler,
    resources,
    role_statements,
    state_machine_definition,
    synthesized,
)


def pipeline() -> Template:
    return synthesized("athena")[1]


def function_ref(template: Template, handler: str) -> str:
    (name,) = [
        name
        for name, function in resources(template, "AWS::Lambda::Function").items()
        if function["Properties"]["Handler"] == f"lambdas.{handler}.handler.handler"
    ]
    return name


def rules_targeting(template: Template, handler: str) -> list[dict[str, Any]]:
    name = function_ref(template, handler)
    return [
        rule["Properties"]
        for rule in resources(template, "AWS::Events::Rule").values()
        if any(target["Arn"] == {"Fn::GetAtt": [name, "Arn"]} for target in rule["Properties"].get("Targets", []))
    ]


def machine_names(template: Template) -> set[str]:
    return set(resources(template, "AWS::StepFunctions::StateMachine"))


def test_status_changes_of_both_stage_machines_that_end_outside_a_catch_reach_the_run_end_function() -> None:
    template = pipeline()
    (rule,) = rules_targeting(template, "stranded_run")
    pattern = rule["EventPattern"]
    assert pattern["source"] == ["aws.states"]
    assert pattern["detail-type"] == ["Step Functions Execution Status Change"]
    assert sorted(pattern["detail"]["status"]) == ["ABORTED", "FAILED", "TIMED_OUT"]
    assert {ref["Ref"] for ref in pattern["detail"]["stateMachineArn"]} == machine_names(template)
    (target,) = rule["Targets"]
    assert "DeadLetterConfig" in target and target["RetryPolicy"]["MaximumRetryAttempts"] == 8
    (invoke_config,) = resources(template, "AWS::Lambda::EventInvokeConfig").values()
    assert (
        invoke_config["Properties"]["DestinationConfig"]["OnFailure"]["Destination"]
        == target["DeadLetterConfig"]["Arn"]
    )


def test_the_sweep_runs_on_a_schedule() -> None:
    (rule,) = rules_targeting(pipeline(), "stranded_sweep")
    assert rule["ScheduleExpression"] == "rate(15 minutes)"


def test_eventbridge_may_invoke_both_functions() -> None:
    template = pipeline()
    permissions = resources(template, "AWS::Lambda::Permission").values()
    for handler in ("stranded_run", "stranded_sweep"):
        name = function_ref(template, handler)
        assert any(
            p["Properties"]["Principal"] == "events.amazonaws.com"
            and p["Properties"]["FunctionName"] == {"Fn::GetAtt": [name, "Arn"]}
            for p in permissions
        ), handler


def allowed(template: Template, handler: str) -> set[str]:
    function = functions_by_handler(template)[handler]
    return {action for statement in role_statements(template, function) for action in as_list(statement["Action"])}


def test_the_functions_are_granted_what_ending_a_run_and_sweeping_take() -> None:
    template = pipeline()
    run_end = allowed(template, "stranded_run")
    assert {"states:DescribeExecution", "sqs:SendMessage", "dynamodb:UpdateItem", "s3:DeleteObject*"} <= run_end
    sweep = allowed(template, "stranded_sweep")
    assert {"dynamodb:Scan", "dynamodb:UpdateItem", "dynamodb:PutItem", "sqs:SendMessage"} <= sweep
    assert not any(action.startswith("s3:") for action in sweep)


def test_aborted_and_timed_out_executions_and_stranded_partitions_are_alarmed() -> None:
    alarms = [alarm["Properties"] for alarm in resources(pipeline(), "AWS::CloudWatch::Alarm").values()]
    by_metric: dict[str, int] = {}
    for alarm in alarms:
        by_metric[alarm.get("MetricName", "")] = by_metric.get(alarm.get("MetricName", ""), 0) + 1
    assert by_metric["ExecutionsAborted"] == 2 and by_metric["ExecutionsTimedOut"] == 2
    (stranded,) = [alarm for alarm in alarms if alarm.get("MetricName") == "StrandedPartitions"]
    assert stranded["Namespace"] == "Lakeline" and stranded["Threshold"] == 1
    assert stranded["Dimensions"] == [{"Name": "service", "Value": "stranded-sweep"}]
    assert stranded["AlarmActions"], "to the alarm topic"


def test_no_execution_outlives_its_partitions_lease() -> None:
    """Before: the lease was 3 h under state machines that run up to 6 h; a stage B run still working after 3 h
    lost its lease to the next message and its work at commit."""
    template = pipeline()
    for stage in ("StageA", "StageB"):
        timeout = state_machine_definition(template, stage)["TimeoutSeconds"]
        assert timeout < DEFAULT_LEASE_SECONDS, (stage, timeout, DEFAULT_LEASE_SECONDS)
