"""Stage B: queue B → router → the stage B state machine (steps, drop, swap) → post-update, which
routes the finished partition onwards to queue B again (B→B chains)."""

from __future__ import annotations

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sns as sns
from constructs import Construct

from lakeline.run_order import STAGE_B
from lambdas.environments import (
    DependenciesStreamEnvironment,
    StageBFailureEnvironment,
    StageBPostUpdateEnvironment,
    StageBRouterEnvironment,
)
from stacks.constructs.functions import LakelineFunction
from stacks.constructs.openlineage import StageEvents
from stacks.constructs.queues import DeadLetterQueue, QueueWithDeadLetters
from stacks.constructs.stage import (
    APPLIED_KEYS,
    RouterSettings,
    StageWorkflow,
    grant_partition_state,
    post_update_function,
)
from stacks.constructs.statements import StatementRunner
from stacks.contracts import STAGE_B_MESSAGE, STAGE_B_PLAN, handler_environment, variable
from stacks.storage_refs import StorageImports


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
        router_settings: RouterSettings,
    ) -> None:
        super().__init__(scope, construct_id)
        failure = LakelineFunction(
            self,
            "Failure",
            handler_package="stage_b_failure",
            description="Stage B failure: remove partial output, record the failed step",
            environment=handler_environment(
                StageBFailureEnvironment,
                lineage_queue_url=lineage_queue.queue.queue_url,
                dead_letter_queue_url=queue_b.dead_letter_queue.queue_url,
            ),
        )
        lineage_queue.queue.grant_send_messages(failure.function)
        queue_b.dead_letter_queue.grant_send_messages(failure.function)
        grant_partition_state(
            failure, storage, queue_b, variable(StageBFailureEnvironment, "stage_b_follow_up_queue_url")
        )
        for bucket in ("Stage", "Analytics"):
            storage.bucket(bucket).grant_read(failure.function)
            storage.bucket(bucket).grant_delete(failure.function)
        statements.grants.grant_delete_guard(failure.function)
        statements.grants.grant_drop_quality_tables(failure.function)
        stage_events.attach(failure)
        post_update = post_update_function(
            self,
            "stage_b_post_update",
            "Stage B after the swap: clean up, record appends, route onwards",
            storage=storage,
            statements=statements,
            queue_b=queue_b,
            lineage_queue=lineage_queue,
            stage_queue=queue_b,
            queue_variable=variable(StageBPostUpdateEnvironment, "stage_b_follow_up_queue_url"),
            stage_events=stage_events,
            buckets=("Stage", "Analytics"),
        )

        plan = STAGE_B_PLAN
        post_update_payload = {"message.$": str(STAGE_B_MESSAGE), "plan.$": str(plan)}
        step_times = statements.engine.stage_b_step_times
        if step_times is not None:  # a Glue job run keeps no step's times: there the replay dates the steps
            post_update_payload["step_times.$"] = step_times
        workflow = StageWorkflow(
            self,
            name="StageB",
            run_id="RunSteps",
            storage=storage,
            statements=statements,
            order=STAGE_B,
            engine_fragment=statements.engine.stage_b,
            plan=plan,
            commit_buckets=("Stage", "Analytics"),
            failure=failure,
            failure_payload={"plan.$": str(plan)},
            post_update=post_update,
            post_update_payload=post_update_payload,
        )
        self.state_machine = workflow.state_machine

        def grant_router(router: LakelineFunction) -> None:
            storage.table("Dependencies").grant_read_data(router.function)
            storage.table("PipelineState").grant_read_write_data(router.function)
            storage.bucket("Artifacts").grant_read(router.function)
            statements.grants.grant_catalog_read(router.function)
            for bucket in ("Stage", "Analytics"):  # where targets are; their lists of what they applied
                storage.bucket(bucket).grant_read(router.function, APPLIED_KEYS)
            # A message whose target partition is full goes back to queue B (lambdas/router.py send_back), a
            # follow-up that finds no free run slot to the follow-up queue.
            queue_b.queue.grant_send_messages(router.function)
            queue_b.follow_ups.grant_send_messages(router.function)

        self.router = workflow.router(
            handler_package="stage_b_router",
            description="Queue B: take the target partition's lease, plan, start one execution per run",
            queue=queue_b,
            settings=router_settings,
            stage_environment=handler_environment(
                StageBRouterEnvironment,
                dependencies_table=storage.table_name("Dependencies"),
                artifacts_bucket=storage.bucket("Artifacts").bucket_name,
                stage_b_queue_url=queue_b.queue.queue_url,
                stage_b_follow_up_queue_url=queue_b.follow_ups.queue_url,
            ),
            grant=grant_router,
        )


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
            environment=handler_environment(
                DependenciesStreamEnvironment,
                dependencies_table=storage.table_name("Dependencies"),
                by_table_table=storage.table_name("DependenciesByTable"),
                failure_queue_url=self.failures.queue.queue_url,
            ),
        )
        # The function parks a refused item's record there itself; Lambda's on_failure sends only what it retried.
        self.failures.queue.grant_send_messages(function.function)
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
