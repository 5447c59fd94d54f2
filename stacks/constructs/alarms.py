"""Alarms on failed or timed-out state machine executions and on function errors.

Every failed run fails its execution, so ``ExecutionsFailed`` also fires for a failure that parked its
input in a DLQ (whose own alarm fires too). It is the only signal of a failure that parks nothing: one
after the publish (the post-update task), one of the failure path itself, and a run that lost its lease.
A function's ``Errors`` alarm also counts an error that a retry then got past. An aborted or timed-out execution
ends outside its Catch (its run is ended by ``lambdas/stranded_run``): alarmed as well, with any other ``metrics``
given (what the sweep of stranded partitions finds). Throttling is alarmed too (#40): a function's ``Throttles`` (an
invocation refused for concurrency; SQS redelivers it, a retry budget absorbs it, but sustained it parks arrivals)
and a state machine's ``ExecutionThrottled`` (a ``StartExecution`` refused by Step Functions' quota). A version a
quality check blocked (#41) fails its execution too; ``QualityBlockedVersions`` says which failures were the checks'
verdict (both stages, both engines: ``lakeline.quality.metrics``), so the data's owners are told apart from a broken
run."""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from lakeline.quality import metrics as quality_metrics
from stacks.constructs.functions import LakelineFunction

ALARM_PERIOD = Duration.minutes(5)


def quality_blocked_versions(period: Duration = ALARM_PERIOD) -> cloudwatch.Metric:
    """The versions a failed ``block`` rule kept from being published, as the failure functions emit them."""
    return cloudwatch.Metric(
        namespace=quality_metrics.METRICS_NAMESPACE,
        metric_name=quality_metrics.BLOCKED_VERSIONS,
        dimensions_map=dict(quality_metrics.DIMENSIONS),
        statistic="Sum",
        period=period,
    )


class FailureAlarms(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        topic: sns.ITopic,
        state_machines: dict[str, sfn.StateMachine],
        functions: Iterable[LakelineFunction],
        metrics: dict[str, tuple[cloudwatch.Metric, str]] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.action = actions.SnsAction(topic)
        for name, machine in state_machines.items():
            self._alarm(
                machine.metric_failed(period=ALARM_PERIOD), f"{name}ExecutionsFailed", f"{name}: an execution failed"
            )
            self._alarm(
                machine.metric_timed_out(period=ALARM_PERIOD),
                f"{name}ExecutionsTimedOut",
                f"{name}: an execution timed out",
            )
            self._alarm(
                machine.metric_aborted(period=ALARM_PERIOD),
                f"{name}ExecutionsAborted",
                f"{name}: an execution was aborted",
            )
            self._alarm(
                machine.metric_throttled(period=ALARM_PERIOD),
                f"{name}ExecutionThrottled",
                f"{name}: Step Functions throttled the machine's executions or state transitions (its quota)",
            )
        for function in functions:
            # Named by the function's place in the stack (StageA/Router → StageARouterErrors): unique and stable.
            place = "".join(function.node.path.split("/")[1:])
            self._alarm(
                function.function.metric_errors(period=ALARM_PERIOD),
                f"{place}Errors",
                f"{function.node.path}: the function raised an error",
            )
            self._alarm(
                function.function.metric_throttles(period=ALARM_PERIOD),
                f"{place}Throttles",
                f"{function.node.path}: invocations were refused for concurrency (the account's or the queue's)",
            )

        self._alarm(
            quality_blocked_versions(),
            quality_metrics.BLOCKED_VERSIONS,
            "a quality check blocked a version: nothing was published, the input is parked with the failed rules",
        )
        for construct_id, (metric, description) in (metrics or {}).items():
            self._alarm(metric, construct_id, description)

    def _alarm(self, metric: cloudwatch.Metric, construct_id: str, description: str) -> None:
        """One occurrence in five minutes is one too many: each is a failure nothing else reports."""
        alarm = metric.create_alarm(
            self,
            construct_id,
            alarm_description=f"{description} (see its logs or execution history, and the DLQs)",
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(self.action)
