"""Alarms on what fails outside a queue: a state machine execution that failed or timed out (a failure
after the publish, or in the failure path itself, leaves no DLQ entry) and a function that errs."""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from stacks.constructs.functions import LakelineFunction


class FailureAlarms(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        topic: sns.ITopic,
        state_machines: dict[str, sfn.StateMachine],
        functions: Iterable[LakelineFunction],
    ) -> None:
        super().__init__(scope, construct_id)
        action = actions.SnsAction(topic)
        for name, machine in state_machines.items():
            for metric_name, metric in (
                ("Failed", machine.metric_failed(period=Duration.minutes(5))),
                ("TimedOut", machine.metric_timed_out(period=Duration.minutes(5))),
            ):
                alarm = metric.create_alarm(
                    self,
                    f"{name}Executions{metric_name}",
                    alarm_description=f"{name}: an execution {metric_name.lower()} (see its history and the DLQ)",
                    threshold=1,
                    evaluation_periods=1,
                    comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                    treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                )
                alarm.add_alarm_action(action)
        for function in functions:
            # Named by the function's place in the stack (StageA/Router → StageARouterErrors): unique and stable.
            place = "".join(function.node.path.split("/")[1:])
            alarm = function.function.metric_errors(period=Duration.minutes(5)).create_alarm(
                self,
                f"{place}Errors",
                alarm_description=f"{function.node.path}: the function raised an error",
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            alarm.add_alarm_action(action)
