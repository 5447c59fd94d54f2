"""Stage B: queue B → router → the stage B state machine (steps, drop, swap) → post-update, which
routes the finished partition onwards to queue B again (B→B chains)."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from stacks.constructs.functions import LakelineFunction
from stacks.constructs.openlineage import StageEvents
from stacks.constructs.queues import DeadLetterQueue, QueueWithDeadLetters
from stacks.constructs.statements import StatementRunner
from stacks.constructs.workflow import add_retry, failure_recorder, logged_state_machine
from stacks.storage_refs import StorageImports


def routing_environment(
    storage: StorageImports, queue_b: QueueWithDeadLetters, lineage_queue: QueueWithDeadLetters
) -> dict[str, str]:
    """What a post-update function needs to record lineage and route a finished partition onwards."""
    return {
        "LINEAGE_QUEUE_URL": lineage_queue.queue.queue_url,
        "DEPENDENCIES_TABLE": storage.table_name("Dependencies"),
        "DEPENDENCIES_BY_TABLE_TABLE": storage.table_name("DependenciesByTable"),
        "PIPELINE_STATE_TABLE": storage.table_name("PipelineState"),
        "STAGE_B_QUEUE_URL": queue_b.queue.queue_url,
        "STAGE_B_DEAD_LETTER_QUEUE_URL": queue_b.dead_letter_queue.queue_url,
    }


def grant_routing(
    function: LakelineFunction,
    storage: StorageImports,
    queue_b: QueueWithDeadLetters,
    lineage_queue: QueueWithDeadLetters,
) -> None:
    lineage_queue.queue.grant_send_messages(function.function)
    storage.table("Dependencies").grant_read_data(function.function)
    storage.table("DependenciesByTable").grant_read_data(function.function)
    storage.table("PipelineState").grant_read_write_data(function.function)
    queue_b.queue.grant_send_messages(function.function)
    queue_b.dead_letter_queue.grant_send_messages(function.function)  # targets that cannot be routed


def commit_function(scope: Construct, storage: StorageImports, buckets: tuple[str, ...]) -> LakelineFunction:
    """The stage's partition-commit function: carries files between run prefixes of ``buckets`` and
    commits partition versions in the pipeline-state table."""
    function = LakelineFunction(
        scope,
        "Commit",
        handler_package="partition_commit",
        description="Commit a run's prefix as its partition's next version (compare-and-swap under its lease)",
        timeout=Duration.minutes(5),
        environment={"PIPELINE_STATE_TABLE": storage.table_name("PipelineState")},
    )
    storage.table("PipelineState").grant_read_write_data(function.function)
    for bucket in buckets:
        storage.bucket(bucket).grant_read_write(function.function)
    return function


def grant_partition_state(
    function: LakelineFunction, storage: StorageImports, stage_queue: QueueWithDeadLetters, variable: str
) -> None:
    """What a function that ends a leased run needs: the partition states, and the stage's own queue
    (``variable``) to queue a follow-up run on."""
    function.function.add_environment("PIPELINE_STATE_TABLE", storage.table_name("PipelineState"))
    function.function.add_environment(variable, stage_queue.queue.queue_url)
    storage.table("PipelineState").grant_read_write_data(function.function)
    stage_queue.queue.grant_send_messages(function.function)


class StageB(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        storage: StorageImports,
        statements: StatementRunner,
        queue_b: QueueWithDeadLetters,
        lineage_queue: QueueWithDeadLetters,
        stage_events: StageEvents,
        pipeline_environment: str,
        table_settings: dict[str, Any],
        default_table_settings: dict[str, Any],
        router_max_concurrency: int,
    ) -> None:
        super().__init__(scope, construct_id)
        failure = LakelineFunction(
            self,
            "Failure",
            handler_package="stage_b_failure",
            description="Stage B failure: remove partial output, record the failed step",
            environment={
                "LINEAGE_QUEUE_URL": lineage_queue.queue.queue_url,
                "DEAD_LETTER_QUEUE_URL": queue_b.dead_letter_queue.queue_url,
            },
        )
        lineage_queue.queue.grant_send_messages(failure.function)
        queue_b.dead_letter_queue.grant_send_messages(failure.function)
        grant_partition_state(failure, storage, queue_b, "STAGE_B_QUEUE_URL")
        for bucket in ("Stage", "Analytics"):
            storage.bucket(bucket).grant_read(failure.function)
            storage.bucket(bucket).grant_delete(failure.function)
        stage_events.attach(failure)
        post_update = LakelineFunction(
            self,
            "PostUpdate",
            handler_package="stage_b_post_update",
            description="Stage B after the swap: clean up, record appends, route onwards",
            timeout=Duration.minutes(5),
            environment=routing_environment(storage, queue_b, lineage_queue),
        )
        for bucket in ("Stage", "Analytics"):
            storage.bucket(bucket).grant_read(post_update.function)
            storage.bucket(bucket).grant_delete(post_update.function)
        grant_routing(post_update, storage, queue_b, lineage_queue)
        stage_events.attach(post_update)

        commit = commit_function(self, storage, ("Stage", "Analytics"))
        on_failure = failure_recorder(self, "StageB", failure.function, {"plan.$": "$.plan"})
        run_steps = statements.steps_runner(self, "RunSteps", commit=commit.function, on_failure=on_failure)
        finish = tasks.LambdaInvoke(
            self,
            "PostUpdateTask",
            lambda_function=post_update.function,
            payload=sfn.TaskInput.from_object(
                {"message.$": "$.message", "plan.$": "$.plan", "execution_id.$": "$$.Execution.Id"}
            ),
            result_selector={"result.$": "$.Payload"},
            result_path="$.post_update",
        )
        add_retry(finish)
        # The post-update handlers are idempotent (cleanup, deterministic lineage nodes, deduplicated
        # messages), so a failed invocation is retried before the execution fails.
        finish.add_retry(errors=["States.TaskFailed"], interval=Duration.seconds(10), max_attempts=2, backoff_rate=2.0)
        definition = run_steps.next(finish).next(sfn.Succeed(self, "StageBDone"))
        self.state_machine = logged_state_machine(self, "StateMachine", definition)
        statements.grant_plan(self.state_machine.role)

        router = LakelineFunction(
            self,
            "Router",
            handler_package="stage_b_router",
            description="Queue B: take the target partition's lease, plan, start one execution per run",
            environment={
                "STATE_MACHINE_ARN": self.state_machine.state_machine_arn,
                "DEAD_LETTER_QUEUE_URL": queue_b.dead_letter_queue.queue_url,
                "PIPELINE_STATE_TABLE": storage.table_name("PipelineState"),
                "DEPENDENCIES_TABLE": storage.table_name("Dependencies"),
                "ARTIFACTS_BUCKET": storage.bucket("Artifacts").bucket_name,
                "STAGE_BUCKET": storage.bucket("Stage").bucket_name,
                "PIPELINE_ENVIRONMENT": pipeline_environment,
                "TABLE_SETTINGS": json.dumps(table_settings, sort_keys=True),
                "DEFAULT_TABLE_SETTINGS": json.dumps(default_table_settings, sort_keys=True),
            },
        )
        self.state_machine.grant_start_execution(router.function)
        queue_b.dead_letter_queue.grant_send_messages(router.function)
        storage.table("Dependencies").grant_read_data(router.function)
        storage.table("PipelineState").grant_read_write_data(router.function)
        storage.bucket("Artifacts").grant_read(router.function)
        statements.grant_catalog_read(router.function)
        router.function.add_event_source(
            sources.SqsEventSource(
                queue_b.queue,
                batch_size=10,
                max_batching_window=Duration.seconds(5),
                report_batch_item_failures=True,
                max_concurrency=router_max_concurrency,
            )
        )
        self.router = router


class DependenciesStream(Construct):
    """The dependencies table's stream → dependencies-by-table, with bisection and an on-failure DLQ."""

    def __init__(
        self, scope: Construct, construct_id: str, *, storage: StorageImports, alarm_topic: sns.ITopic
    ) -> None:
        super().__init__(scope, construct_id)
        self.failures = DeadLetterQueue(self, "Failures", key=storage.key, alarm_topic=alarm_topic)
        function = LakelineFunction(
            self,
            "Function",
            handler_package="dependencies_by_table",
            description="dependencies stream: keep dependencies-by-table in step, refuse cycles",
            environment={
                "DEPENDENCIES_TABLE": storage.table_name("Dependencies"),
                "DEPENDENCIES_BY_TABLE_TABLE": storage.table_name("DependenciesByTable"),
            },
        )
        storage.table("Dependencies").grant_read_data(function.function)
        storage.table("Dependencies").grant_stream_read(function.function)
        storage.table("DependenciesByTable").grant_read_write_data(function.function)
        function.function.add_event_source(
            sources.DynamoEventSource(
                storage.table("Dependencies"),
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=100,
                bisect_batch_on_error=True,
                retry_attempts=3,
                report_batch_item_failures=True,
                on_failure=sources.SqsDlq(self.failures.queue),
            )
        )
        self.function = function
