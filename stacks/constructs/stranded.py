"""No partition stranded (#39): the end of every run whose execution ends outside its Catch, and the sweep of
partitions whose arrivals wait behind a lease nobody holds any more.

- A rule on Step Functions' "Execution Status Change" events (ABORTED, TIMED_OUT, FAILED) of both stages'
  state machines invokes ``lambdas/stranded_run``, which ends the run as the failure path ends one (an
  execution that went through its Catch finds its run ended already). Deliveries and invocations that fail
  for good land in a DLQ of their own, alarmed.
- A schedule invokes ``lambdas/stranded_sweep``, bounded per invocation, which queues the follow-up of each
  stranded partition on its stage's queue; its ``StrandedPartitions`` metric is alarmed: each one found is a run
  that ended with nothing to end it.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from lakeline.aws.stepfunctions import STATUS_CHANGE
from lambdas.environments import StrandedRunEnvironment, StrandedSweepEnvironment
from stacks.constructs.functions import LakelineFunction
from stacks.constructs.openlineage import StageEvents
from stacks.constructs.queues import EVENT_MAX_AGE, DeadLetterQueue, QueueWithDeadLetters
from stacks.constructs.stage import grant_partition_state
from stacks.constructs.statements import StatementRunner
from stacks.contracts import handler_environment, variable
from stacks.storage_refs import StorageImports
from stage_end.stranded import ENDED_OUTSIDE_CATCH

SWEEP_SCHEDULE = Duration.minutes(15)
"""How often the sweep looks: a stranded partition waits at most this long past its lease."""


class StrandedRuns(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        storage: StorageImports,
        statements: StatementRunner,
        stage_events: StageEvents,
        alarm_topic: sns.ITopic,
        queue_a: QueueWithDeadLetters,
        queue_b: QueueWithDeadLetters,
        lineage_queue: QueueWithDeadLetters,
        state_machines: dict[str, sfn.StateMachine],
    ) -> None:
        super().__init__(scope, construct_id)
        self.failures = DeadLetterQueue(self, "Failures", key=storage.key, alarm_topic=alarm_topic)
        machine_a, machine_b = state_machines["StageA"], state_machines["StageB"]
        self.run_end = LakelineFunction(
            self,
            "RunEnd",
            handler_package="stranded_run",
            description="An execution ended outside its Catch: end its run as a failure (lease, parking, follow-up)",
            timeout=Duration.minutes(5),
            environment=handler_environment(
                StrandedRunEnvironment,
                stage_a_state_machine_arn=machine_a.state_machine_arn,
                stage_b_state_machine_arn=machine_b.state_machine_arn,
                stage_a_dead_letter_queue_url=queue_a.dead_letter_queue.queue_url,
                stage_b_dead_letter_queue_url=queue_b.dead_letter_queue.queue_url,
                lineage_queue_url=lineage_queue.queue.queue_url,
            ),
        )
        # What both stages' failure functions may do, since it ends runs of either.
        function = self.run_end.function
        grant_partition_state(
            self.run_end, storage, queue_a, variable(StrandedRunEnvironment, "stage_a_follow_up_queue_url")
        )
        grant_partition_state(
            self.run_end, storage, queue_b, variable(StrandedRunEnvironment, "stage_b_follow_up_queue_url")
        )
        for queue in (queue_a.dead_letter_queue, queue_b.dead_letter_queue, lineage_queue.queue):
            queue.grant_send_messages(function)
        storage.bucket("Stage").grant_read_write(function)
        storage.bucket("Stage").grant_delete(function)
        storage.bucket("Analytics").grant_read(function)
        storage.bucket("Analytics").grant_delete(function)
        statements.grants.grant_delete_guard(function)
        statements.grants.grant_drop_quality_tables(function)
        stage_events.attach(self.run_end)
        for machine in (machine_a, machine_b):
            machine.grant_execution(function, "states:DescribeExecution")  # the event leaves a large input out
        function.configure_async_invoke(retry_attempts=2, on_failure=destinations.SqsDestination(self.failures.queue))
        self.status_rule = events.Rule(
            self,
            "ExecutionsEnded",
            description="Stage executions that ended outside their Catch (aborted, timed out, failed) end their run",
            event_pattern=events.EventPattern(
                source=["aws.states"],
                detail_type=[STATUS_CHANGE],
                detail={
                    "status": list(ENDED_OUTSIDE_CATCH),
                    "stateMachineArn": [machine_a.state_machine_arn, machine_b.state_machine_arn],
                },
            ),
        )
        self.status_rule.add_target(
            targets.LambdaFunction(
                function, retry_attempts=8, max_event_age=EVENT_MAX_AGE, dead_letter_queue=self.failures.queue
            )
        )

        self.sweep = LakelineFunction(
            self,
            "Sweep",
            handler_package="stranded_sweep",
            description="Scheduled: start the follow-up of arrivals waiting behind an expired or free lease",
            timeout=Duration.minutes(5),
            environment=handler_environment(
                StrandedSweepEnvironment,
                pipeline_state_table=storage.table_name("PipelineState"),
                stage_a_follow_up_queue_url=queue_a.follow_ups.queue_url,
                stage_b_follow_up_queue_url=queue_b.follow_ups.queue_url,
            ),
        )
        storage.table("PipelineState").grant_read_write_data(self.sweep.function)
        for queue in (queue_a.follow_ups, queue_b.follow_ups):
            queue.grant_send_messages(self.sweep.function)
        self.sweep_rule = events.Rule(
            self,
            "SweepSchedule",
            description="Sweep stranded partitions",
            schedule=events.Schedule.rate(SWEEP_SCHEDULE),
            # A sweep not delivered within its period is superseded by the next one; parked, it raises the alarm.
            targets=[
                targets.LambdaFunction(
                    self.sweep.function,
                    retry_attempts=2,
                    max_event_age=SWEEP_SCHEDULE,
                    dead_letter_queue=self.failures.queue,
                )
            ],
        )
        self.stranded_partitions = cloudwatch.Metric(
            namespace="Lakeline",
            metric_name="StrandedPartitions",
            dimensions_map={"service": "stranded-sweep"},
            statistic="Maximum",
            period=Duration.minutes(15),
        )
