"""The pipeline's CloudWatch dashboard (#40): one page that says whether arrivals flow, where they wait and what
throttles them — arrivals, executions per stage, queue and dead-letter depths, the engines' throttled tasks,
Athena's scanned bytes, and the functions' errors and throttles.

Athena and Glue publish no throttling metric of their own: a throttled query start or job run is a task failure
(``Athena.TooManyRequestsException``, ``Glue.ConcurrentRunsExceededException``, ``Glue.ThrottlingException``) that the
state machine retries (``stacks.constructs.workflow.THROTTLED``). Each stage's execution log (level ALL) records
those failures, and a metric filter counts them as ``<stage>ThrottledTasks`` in the ``Lakeline`` namespace."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from stacks.constructs.functions import LakelineFunction
from stacks.constructs.workflow import THROTTLED

NAMESPACE = "Lakeline"
GRAPH_PERIOD = Duration.minutes(5)
WIDTH = 12  # two widgets a row (the grid is 24 wide)


def throttled_tasks(scope: Construct, stage: str, log_group: logs.ILogGroup) -> cloudwatch.Metric:
    """``<stage>ThrottledTasks``: the stage's tasks Athena, Glue or Lambda refused at their quota."""
    failed = logs.FilterPattern.string_value("$.type", "=", "TaskFailed")
    throttled = logs.FilterPattern.any(*(logs.FilterPattern.string_value("$.details.error", "=", e) for e in THROTTLED))
    metric_filter = logs.MetricFilter(
        scope,
        f"{stage}ThrottledTasks",
        log_group=log_group,
        metric_namespace=NAMESPACE,
        metric_name=f"{stage}ThrottledTasks",
        filter_pattern=logs.FilterPattern.all(failed, throttled),
        metric_value="1",
        default_value=0,
    )
    return metric_filter.metric(period=GRAPH_PERIOD, statistic="Sum")


def depths(queues: Mapping[str, sqs.IQueue]) -> list[cloudwatch.IMetric]:
    """The most messages each of ``queues`` held in a period, labelled by its name."""
    return [
        queue.metric_approximate_number_of_messages_visible(period=GRAPH_PERIOD, label=name, statistic="Maximum")
        for name, queue in queues.items()
    ]


class PipelineDashboard(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        state_machines: Mapping[str, tuple[sfn.StateMachine, logs.ILogGroup]],
        arrivals: sqs.IQueue,
        queues: Mapping[str, sqs.IQueue],
        dead_letter_queues: Mapping[str, sqs.IQueue],
        functions: Iterable[LakelineFunction],
        workgroup: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.throttled_tasks = {
            stage: throttled_tasks(self, stage, log_group) for stage, (_, log_group) in state_machines.items()
        }
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", default_interval=Duration.hours(24))
        executions = [
            cloudwatch.GraphWidget(
                title=f"{stage} executions",
                width=WIDTH,
                left=[
                    machine.metric_started(period=GRAPH_PERIOD, label="started"),
                    machine.metric_succeeded(period=GRAPH_PERIOD, label="succeeded"),
                    machine.metric_failed(period=GRAPH_PERIOD, label="failed"),
                    machine.metric_aborted(period=GRAPH_PERIOD, label="aborted"),
                    machine.metric_timed_out(period=GRAPH_PERIOD, label="timed out"),
                    machine.metric_throttled(period=GRAPH_PERIOD, label="throttled"),
                ],
            )
            for stage, (machine, _) in state_machines.items()
        ]
        arrived = cloudwatch.GraphWidget(
            title="Arrivals (raw files and re-sent records into stage A's queue)",
            width=WIDTH,
            left=[arrivals.metric_number_of_messages_sent(period=GRAPH_PERIOD, label="arrivals", statistic="Sum")],
        )
        waiting = cloudwatch.GraphWidget(
            title="Messages waiting (queues)",
            width=WIDTH,
            left=depths(queues),
            right=[
                queue.metric_approximate_age_of_oldest_message(
                    period=GRAPH_PERIOD, label=f"{name} oldest (s)", statistic="Maximum"
                )
                for name, queue in queues.items()
            ],
        )
        parked = cloudwatch.GraphWidget(
            title="Messages parked (dead-letter queues)",
            width=WIDTH,
            left=depths(dead_letter_queues),
        )
        engines = cloudwatch.GraphWidget(
            title="Engine throttling (tasks refused at Athena's, Glue's or Lambda's quota, retried)",
            width=WIDTH,
            left=[metric.with_(label=stage) for stage, metric in self.throttled_tasks.items()],
        )
        scanned = cloudwatch.GraphWidget(
            title="Athena: bytes scanned (what the workgroup bills)",
            width=WIDTH,
            left=[
                cloudwatch.Metric(
                    namespace="AWS/Athena",
                    metric_name="ProcessedBytes",
                    dimensions_map={"WorkGroup": workgroup, "QueryState": "SUCCEEDED", "QueryType": "DML"},
                    period=GRAPH_PERIOD,
                    statistic="Sum",
                    label=workgroup,
                )
            ],
        )
        listed = list(functions)
        errors = cloudwatch.GraphWidget(
            title="Function errors",
            width=WIDTH,
            left=[f.function.metric_errors(period=GRAPH_PERIOD, label=f.node.path.split("/", 1)[1]) for f in listed],
        )
        throttles = cloudwatch.GraphWidget(
            title="Function throttles",
            width=WIDTH,
            left=[f.function.metric_throttles(period=GRAPH_PERIOD, label=f.node.path.split("/", 1)[1]) for f in listed],
        )
        self.dashboard.add_widgets(*executions)
        self.dashboard.add_widgets(arrived, waiting)
        self.dashboard.add_widgets(parked)
        self.dashboard.add_widgets(engines, scanned)
        self.dashboard.add_widgets(errors, throttles)
