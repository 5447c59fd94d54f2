"""The stateless pipeline: queues, functions, state machines, schedules. Safe to destroy and redeploy;
all data lives in the storage stack."""

from __future__ import annotations

from typing import Any

from aws_cdk import Annotations, CfnOutput, Duration, Stack
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from stacks.config import LakelineConfig
from stacks.constructs.alarms import FailureAlarms
from stacks.constructs.artifacts import QueryArtifacts
from stacks.constructs.dashboard import PipelineDashboard
from stacks.constructs.functions import LakelineFunction, SharedLambdaCode
from stacks.constructs.lineage import Lineage
from stacks.constructs.openlineage import StageEvents
from stacks.constructs.queues import DeadLetterQueue, QueueWithDeadLetters
from stacks.constructs.stage import RouterSettings
from stacks.constructs.stage_a import StageA
from stacks.constructs.stage_b import DependenciesStream, StageB
from stacks.constructs.statements import StatementRunner
from stacks.constructs.stranded import StrandedRuns
from stacks.constructs.workflow import execution_logs
from stacks.storage_refs import StorageImports
from stacks.storage_stack import StorageStack


class PipelineStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: LakelineConfig, storage: StorageStack, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        refs = StorageImports(
            self,
            "Storage",
            storage_stack_name=storage.stack_name,
            table_indexes=storage.table_indexes(),
            lineage_database=storage.lineage_database_name,
            lineage_archive_table=storage.lineage_archive_table_name,
        )
        SharedLambdaCode(
            self,
            "SharedLambdaCode",
            powertools_layer_parameter=config.powertools_layer_parameter,
            log_key=refs.key,
            table_settings=config.table_settings,
            default_table_settings=config.default_table_settings,
        )
        self.storage = refs
        self.alarm_topic = sns.Topic(
            self, "Alarms", display_name="Lakeline alarms", master_key=refs.key, enforce_ssl=True
        )
        if config.alarm_email:
            self.alarm_topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
        else:
            # Every alarm (parked arrivals, failed runs, stranded partitions) goes to this topic: said at synth,
            # not found out when nobody heard of a parked file (#40).
            Annotations.of(self).add_warning_v2(
                "lakeline:alarms-unheard",
                "no alarm_email: the alarm topic has no subscriber, so no one hears of parked arrivals or failed "
                "runs; deploy with -c alarm_email=<address> or subscribe to the topic (output AlarmTopicArn)",
            )
        CfnOutput(self, "AlarmTopicArn", value=self.alarm_topic.topic_arn, description="where every alarm goes")
        self.statements = StatementRunner(self, "Statements", config=config, storage=refs)
        self.queue_b = QueueWithDeadLetters(
            self,
            "QueueB",
            key=refs.key,
            alarm_topic=self.alarm_topic,
            visibility_timeout=Duration.minutes(6),
            follow_ups=True,
        )
        self.lineage = Lineage(
            self,
            "Lineage",
            storage=refs,
            alarm_topic=self.alarm_topic,
            ttl_hours=config.lineage_ttl_hours,
            trace_schedule=config.trace_schedule,
            trace_settle_seconds=config.trace_settle_seconds,
        )
        # The stages' post-update and failure functions emit OpenLineage events into the archive bucket.
        self.stage_events = StageEvents(self, config=config, storage=refs, statements=self.statements)
        router_settings = RouterSettings.from_config(config)
        self.stage_a = StageA(
            self,
            "StageA",
            storage=refs,
            statements=self.statements,
            alarm_topic=self.alarm_topic,
            queue_b=self.queue_b,
            lineage_queue=self.lineage.queue,
            stage_events=self.stage_events,
            router_settings=router_settings,
        )
        self.stage_b = StageB(
            self,
            "StageB",
            storage=refs,
            statements=self.statements,
            queue_b=self.queue_b,
            lineage_queue=self.lineage.queue,
            stage_events=self.stage_events,
            router_settings=router_settings,
        )
        self.dependencies_stream = DependenciesStream(
            self, "DependenciesStream", storage=refs, alarm_topic=self.alarm_topic
        )
        self.artifacts = QueryArtifacts(self, "QueryArtifacts", bucket=refs.bucket("Artifacts"))
        state_machines = {"StageA": self.stage_a.state_machine, "StageB": self.stage_b.state_machine}
        self.stranded = StrandedRuns(
            self,
            "Stranded",
            storage=refs,
            statements=self.statements,
            stage_events=self.stage_events,
            alarm_topic=self.alarm_topic,
            queue_a=self.stage_a.queue,
            queue_b=self.queue_b,
            lineage_queue=self.lineage.queue,
            state_machines=state_machines,
        )
        functions = [node for node in self.node.find_all() if isinstance(node, LakelineFunction)]
        FailureAlarms(
            self,
            "FailureAlarms",
            topic=self.alarm_topic,
            state_machines=state_machines,
            functions=functions,
            metrics={
                "StrandedPartitions": (
                    self.stranded.stranded_partitions,
                    "the sweep found arrivals waiting behind a lease nobody holds (a run ended with nothing to end it)",
                )
            },
        )
        nodes = self.node.find_all()
        self.dashboard = PipelineDashboard(
            self,
            "Dashboard",
            state_machines={name: (machine, execution_logs(machine)) for name, machine in state_machines.items()},
            arrivals=self.stage_a.queue.queue,
            # Named by their place in the stack (StageA/Queue → StageA/Queue), as the alarms name functions.
            queues={
                **{_place(q): q.queue for q in nodes if isinstance(q, QueueWithDeadLetters)},
                **{
                    f"{_place(q)}/FollowUps": q.follow_up_queue
                    for q in nodes
                    if isinstance(q, QueueWithDeadLetters) and q.follow_up_queue is not None
                },
            },
            dead_letter_queues={_place(q): q.queue for q in nodes if isinstance(q, DeadLetterQueue)},
            functions=functions,
            workgroup=self.statements.workgroup.name,
        )
        # What `lakeline status|reprocess|dlq --stack <this stack>` read (lakeline.operations).
        for name, value in {
            "PipelineStateTable": refs.table_name("PipelineState"),
            "DependenciesTable": refs.table_name("Dependencies"),
            "DependenciesByTableTable": refs.table_name("DependenciesByTable"),
            "StageAQueueUrl": self.stage_a.queue.queue.queue_url,
            "StageADeadLetterQueueUrl": self.stage_a.queue.dead_letter_queue.queue_url,
            "StageBQueueUrl": self.queue_b.queue.queue_url,
            "StageAFollowUpQueueUrl": self.stage_a.queue.follow_ups.queue_url,
            "StageBFollowUpQueueUrl": self.queue_b.follow_ups.queue_url,
            "StageBDeadLetterQueueUrl": self.queue_b.dead_letter_queue.queue_url,
            "LineageDeadLetterQueueUrl": self.lineage.queue.dead_letter_queue.queue_url,
            "DependenciesStreamDeadLetterQueueUrl": self.dependencies_stream.failures.queue.queue_url,
            "StageAStateMachineArn": self.stage_a.state_machine.state_machine_arn,
            "StageBStateMachineArn": self.stage_b.state_machine.state_machine_arn,
            "RawBucket": refs.bucket("Raw").bucket_name,  # `reprocess --raw` re-sends its objects
        }.items():
            CfnOutput(self, name, value=value, description="read by lakeline status --stack")


def _place(construct: Construct) -> str:
    """A construct's path in its stack, e.g. ``StageA/Queue``: unique and readable."""
    return construct.node.path.split("/", 1)[1]
