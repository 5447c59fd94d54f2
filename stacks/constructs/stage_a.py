"""Stage A: raw bucket arrivals (EventBridge) → queue A → router → the stage A state machine.

The state machine runs each statement of the router's plan as a native ``athena:startQueryExecution.sync``
task (no Lambda polls Athena), or, with the spark engine, the whole plan as one
``glue:startJobRun.sync`` task. A failed CTAS is caught: the temp table is dropped, the failure Lambda
removes the partial output and the execution fails with the error, so the message is retried by SQS
and finally dead-lettered.
"""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from stacks.constructs.functions import LakelineFunction
from stacks.constructs.openlineage import StageEvents
from stacks.constructs.queues import QueueWithDeadLetters
from stacks.constructs.stage_b import commit_function, grant_partition_state, grant_routing, routing_environment
from stacks.constructs.statements import StatementRunner
from stacks.constructs.workflow import add_retry, failure_recorder, logged_state_machine
from stacks.storage_refs import StorageImports
from stage_a.by_name import MARKER as BY_NAME_MARKER


class StageA(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        storage: StorageImports,
        statements: StatementRunner,
        alarm_topic: Any,
        queue_b: QueueWithDeadLetters,
        lineage_queue: QueueWithDeadLetters,
        stage_events: StageEvents,
        pipeline_environment: str,
        table_settings: dict[str, Any],
        default_table_settings: dict[str, Any],
        router_max_concurrency: int,
    ) -> None:
        super().__init__(scope, construct_id)

        self.queue = QueueWithDeadLetters(
            self, "QueueA", key=storage.key, alarm_topic=alarm_topic, visibility_timeout=Duration.minutes(6)
        )
        rule = events.Rule(
            self,
            "RawArrivals",
            description="Objects created in the raw bucket start stage A",
            event_pattern=events.EventPattern(
                source=["aws.s3"],
                detail_type=["Object Created"],
                detail={"bucket": {"name": [storage.bucket("Raw").bucket_name]}},
            ),
        )
        rule.add_target(targets.SqsQueue(self.queue.queue))

        failure = LakelineFunction(
            self,
            "Failure",
            handler_package="stage_a_failure",
            description="Stage A failure: remove a failed run's output, end its lease, dead-letter its arrivals",
            environment={"STAGE_A_DEAD_LETTER_QUEUE_URL": self.queue.dead_letter_queue.queue_url},
        )
        self.queue.dead_letter_queue.grant_send_messages(failure.function)
        grant_partition_state(failure, storage, self.queue, "STAGE_A_QUEUE_URL")
        storage.bucket("Stage").grant_read_write(failure.function)
        storage.bucket("Stage").grant_delete(failure.function)
        stage_events.attach(failure)
        post_update = LakelineFunction(
            self,
            "PostUpdate",
            handler_package="stage_a_post_update",
            description="Stage A after the swap: end the lease or queue the follow-up, sweep, route to stage B",
            timeout=Duration.minutes(5),
            environment=routing_environment(storage, queue_b, lineage_queue),
        )
        storage.bucket("Stage").grant_read(post_update.function)
        storage.bucket("Stage").grant_delete(post_update.function)
        grant_routing(post_update, storage, queue_b, lineage_queue)
        grant_partition_state(post_update, storage, self.queue, "STAGE_A_QUEUE_URL")
        stage_events.attach(post_update)

        record_failure = failure_recorder(
            self, "StageA", failure.function, {"plan.$": "$.plan", "arrival.$": "$.arrival"}
        )

        commit = commit_function(self, storage, ("Stage",))
        run_plan = statements.plan_runner(self, "RunPlan", commit=commit.function, on_failure=record_failure)
        finish = tasks.LambdaInvoke(
            self,
            "PostUpdateTask",
            lambda_function=post_update.function,
            payload=sfn.TaskInput.from_object({"plan.$": "$.plan", "execution_id.$": "$$.Execution.Id"}),
            result_selector={"result.$": "$.Payload"},
            result_path="$.post_update",
        )
        add_retry(finish)
        # The post-update handlers are idempotent (cleanup, deterministic lineage nodes, deduplicated
        # messages), so a failed invocation is retried before the execution fails.
        finish.add_retry(errors=["States.TaskFailed"], interval=Duration.seconds(10), max_attempts=2, backoff_rate=2.0)
        definition = run_plan.next(finish).next(sfn.Succeed(self, "StageADone"))
        self.state_machine = logged_state_machine(self, "StateMachine", definition)
        statements.grant_plan(self.state_machine.role)

        router = LakelineFunction(
            self,
            "Router",
            handler_package="stage_a_router",
            description="Queue A: validate arrivals, take the partition's lease, plan, start one execution per run",
            environment={
                "STATE_MACHINE_ARN": self.state_machine.state_machine_arn,
                "DEAD_LETTER_QUEUE_URL": self.queue.dead_letter_queue.queue_url,
                "PIPELINE_STATE_TABLE": storage.table_name("PipelineState"),
                "RAW_BUCKET": storage.bucket("Raw").bucket_name,
                "STAGE_BUCKET": storage.bucket("Stage").bucket_name,
                "PIPELINE_ENVIRONMENT": pipeline_environment,
                "TABLE_SETTINGS": json.dumps(table_settings, sort_keys=True),
                "DEFAULT_TABLE_SETTINGS": json.dumps(default_table_settings, sort_keys=True),
            },
        )
        self.state_machine.grant_start_execution(router.function)
        self.queue.dead_letter_queue.grant_send_messages(router.function)
        storage.table("PipelineState").grant_read_write_data(router.function)
        statements.grant_catalog_read(router.function)
        # The contract check at the door reads each arriving file (a CSV's lines, a Parquet footer).
        storage.bucket("Raw").grant_read(router.function)
        storage.key.grant_decrypt(router.function)
        # A CSV file with its columns in another order is loaded through a copy in the table's order,
        # which the router writes next to it (stage_a.by_name): only such copies may be written.
        storage.bucket("Raw").grant_put(router.function, f"*{BY_NAME_MARKER}.csv*")  # with the bucket key
        statements.grant_add_columns(router.function)
        router.function.add_event_source(
            sources.SqsEventSource(
                self.queue.queue,
                batch_size=10,
                max_batching_window=Duration.seconds(5),
                report_batch_item_failures=True,
                max_concurrency=router_max_concurrency,
            )
        )
        self.router = router
