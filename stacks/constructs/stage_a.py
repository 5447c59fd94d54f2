"""Stage A: raw bucket arrivals (EventBridge) → queue A → router → the stage A state machine.

The state machine runs each statement of the router's plan as a native ``athena:startQueryExecution.sync``
task (no Lambda polls Athena), or, with the spark engine, the whole plan as one
``glue:startJobRun.sync`` task. A failed CTAS is caught: the temp table is dropped, the failure Lambda
removes the partial output and the execution fails with the error, so the message is retried by SQS
and finally dead-lettered.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from constructs import Construct

from lakeline.commits.batch import BATCH_FOLDER
from lakeline.run_order import STAGE_A
from lakeline.storage import MANIFEST_OBJECT, RUN_PREFIX
from lambdas.environments import StageAFailureEnvironment, StageAPostUpdateEnvironment, StageARouterEnvironment
from stacks.constructs.functions import LakelineFunction
from stacks.constructs.openlineage import StageEvents
from stacks.constructs.queues import EVENT_MAX_AGE, EVENT_RETRIES, QueueWithDeadLetters
from stacks.constructs.stage import (
    APPLIED_KEYS,
    RouterSettings,
    StageWorkflow,
    grant_partition_state,
    post_update_function,
)
from stacks.constructs.statements import StatementRunner
from stacks.contracts import STAGE_A_PLAN, handler_environment, variable
from stacks.storage_refs import StorageImports
from stage_a.by_name import MARKER as BY_NAME_MARKER

MANIFEST_KEYS = f"*/{RUN_PREFIX}*/{'?' * 16}/{MANIFEST_OBJECT}"


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
        router_settings: RouterSettings,
    ) -> None:
        super().__init__(scope, construct_id)

        self.queue = QueueWithDeadLetters(
            self,
            "QueueA",
            key=storage.key,
            alarm_topic=alarm_topic,
            visibility_timeout=Duration.minutes(6),
            follow_ups=True,
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
        # An event EventBridge cannot deliver (queue A refusing it, a key it may not use) is retried for a day,
        # then parked in queue A's dead-letter queue, from which `lakeline dlq redrive` sends it to queue A (#40).
        rule.add_target(
            targets.SqsQueue(
                self.queue.queue,
                dead_letter_queue=self.queue.dead_letter_queue,
                retry_attempts=EVENT_RETRIES,
                max_event_age=EVENT_MAX_AGE,
            )
        )

        failure = LakelineFunction(
            self,
            "Failure",
            handler_package="stage_a_failure",
            description="Stage A failure: remove a failed run's output, end its lease, dead-letter its arrivals",
            environment=handler_environment(
                StageAFailureEnvironment,
                stage_a_dead_letter_queue_url=self.queue.dead_letter_queue.queue_url,
                lineage_queue_url=lineage_queue.queue.queue_url,
            ),
        )
        self.queue.dead_letter_queue.grant_send_messages(failure.function)
        # After a failed post-update, the published run's lineage records (lambdas/stage_a_failure).
        lineage_queue.queue.grant_send_messages(failure.function)
        grant_partition_state(
            failure, storage, self.queue, variable(StageAFailureEnvironment, "stage_a_follow_up_queue_url")
        )
        storage.bucket("Stage").grant_read_write(failure.function)
        storage.bucket("Stage").grant_delete(failure.function)
        statements.grants.grant_delete_guard(failure.function)
        statements.grants.grant_drop_quality_tables(failure.function)
        stage_events.attach(failure)
        post_update = post_update_function(
            self,
            "stage_a_post_update",
            "Stage A after the swap: end the lease or queue the follow-up, sweep, route to stage B",
            storage=storage,
            statements=statements,
            queue_b=queue_b,
            lineage_queue=lineage_queue,
            stage_queue=self.queue,
            queue_variable=variable(StageAPostUpdateEnvironment, "stage_a_follow_up_queue_url"),
            stage_events=stage_events,
            buckets=("Stage",),
        )

        plan = STAGE_A_PLAN
        workflow = StageWorkflow(
            self,
            name="StageA",
            run_id="RunPlan",
            storage=storage,
            statements=statements,
            order=STAGE_A,
            engine_fragment=statements.engine.stage_a,
            plan=plan,
            commit_buckets=("Stage",),
            failure=failure,
            failure_payload={"plan.$": str(plan), "arrival.$": "$.arrival"},
            post_update=post_update,
            post_update_payload={"plan.$": str(plan)},
        )
        self.state_machine = workflow.state_machine

        def grant_router(router: LakelineFunction) -> None:
            storage.table("PipelineState").grant_read_write_data(router.function)
            statements.grants.grant_catalog_read(router.function)
            # The contract check at the door reads each arriving file (a CSV's lines, a Parquet footer).
            storage.bucket("Raw").grant_read(router.function)
            storage.key.grant_decrypt(router.function)
            # A CSV file with its columns in another order, or a JSON file with keys in another case, is
            # loaded through a copy in the table's order and spelling, which the router writes next to
            # it (stage_a.by_name): only such copies may be written.
            storage.bucket("Raw").grant_put(router.function, f"*{BY_NAME_MARKER}.*")  # with the bucket key
            # A record it has no time left for goes back to queue A (lambdas/stage_a_router RECORD_BUDGET_MS), a
            # follow-up that finds no free run slot to the follow-up queue.
            self.queue.queue.grant_send_messages(router.function)
            self.queue.follow_ups.grant_send_messages(router.function)
            statements.grants.grant_add_columns(router.function)
            # A compaction's or a rewrite's plan lists the files it reads in a manifest (stage_a.manifest),
            # <run prefix>/<16-character digest>/manifest under a partition: only those may be written.
            storage.bucket("Stage").grant_put(router.function, MANIFEST_KEYS)
            # And every leased plan its batch, which its input names instead of listing it (lakeline.commits.batch).
            batches = f"*/{RUN_PREFIX}*/{BATCH_FOLDER}{'?' * 16}"
            storage.bucket("Stage").grant_put(router.function, batches)
            # Its entries leave the partition's item when it is planned (#39): a redelivery plans from it again, and a
            # follow-up takes over the batch of a run that ended without ending it, so the router reads batches too.
            storage.bucket("Stage").grant_read(router.function, batches)
            # And reads the list of what its partition's published version holds (lakeline.commits.applied).
            storage.bucket("Stage").grant_read(router.function, APPLIED_KEYS)

        self.router = workflow.router(
            handler_package="stage_a_router",
            description="Queue A: validate arrivals, take the partition's lease, plan, start one execution per run",
            queue=self.queue,
            settings=router_settings,
            stage_environment=handler_environment(
                StageARouterEnvironment,
                raw_bucket=storage.bucket("Raw").bucket_name,
                stage_a_queue_url=self.queue.queue.queue_url,
                stage_a_follow_up_queue_url=self.queue.follow_ups.queue_url,
            ),
            grant=grant_router,
        )
