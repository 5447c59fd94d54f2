"""What stage A and stage B are both made of: queue → router → state machine (the engine's writes, the
partition commit and the catalog swap, the post-update function) → done, or the failure path that records
what failed before the execution fails. Each stage construct adds only what differs: its queue's source,
its functions' settings and grants, the engine fragment, the models its input follows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from lakeline.commits.applied import APPLIED_FOLDER
from lakeline.lambda_support import RouterEnvironment, SettleEnvironment
from lakeline.run_order import PUBLISHING, FailedStep, RunOrder, StepKind
from lakeline.storage import RUN_PREFIX
from lambdas.environments import CommitEnvironment, QualityEnvironment
from stacks.config import LakelineConfig
from stacks.constructs.engines import WriteExits
from stacks.constructs.functions import LakelineFunction
from stacks.constructs.openlineage import StageEvents
from stacks.constructs.queues import QueueWithDeadLetters
from stacks.constructs.statements import StatementRunner
from stacks.constructs.workflow import add_retry, failure_marker, failure_recorder, logged_state_machine
from stacks.contracts import InputPath, handler_environment, variable
from stacks.storage_refs import StorageImports
from stage_b.onward import RoutingEnvironment

APPLIED_KEYS = f"*/{RUN_PREFIX}*/{APPLIED_FOLDER}{'?' * 16}"
"""The lists of what each published version holds (``lakeline.commits.applied``), beside the versions: a router
reads its partition's to plan a run."""


FOLLOW_UP_CONCURRENCY = 2
"""Routers taking follow-ups at once (SQS's least ``MaximumConcurrency``): a follow-up is planned and started in
well under a second, and the run slots bound the runs anyway."""


@dataclass(frozen=True)
class RouterSettings:
    """What both routers are configured with: the environment's suffix and how many run at once (how tables are
    written travels in the code asset: ``stacks.constructs.functions.SharedLambdaCode``)."""

    pipeline_environment: str
    max_concurrency: int
    runs_in_flight: int  # the stage's executions at once (lakeline.commits.slots)

    @classmethod
    def from_config(cls, config: LakelineConfig) -> RouterSettings:
        return cls(
            pipeline_environment=config.environment,
            max_concurrency=config.router_max_concurrency,
            runs_in_flight=config.runs_in_flight,
        )


EngineFragment = Callable[[Construct, str, WriteExits], sfn.State]
"""``EngineSteps.stage_a`` or ``EngineSteps.stage_b``."""


def routing_environment(
    storage: StorageImports, queue_b: QueueWithDeadLetters, lineage_queue: QueueWithDeadLetters
) -> dict[str, str]:
    """What a post-update function needs to record lineage and route a finished partition onwards."""
    return handler_environment(
        RoutingEnvironment,
        lineage_queue_url=lineage_queue.queue.queue_url,
        dependencies_table=storage.table_name("Dependencies"),
        dependencies_by_table_table=storage.table_name("DependenciesByTable"),
        pipeline_state_table=storage.table_name("PipelineState"),
        stage_b_queue_url=queue_b.queue.queue_url,
        stage_b_dead_letter_queue_url=queue_b.dead_letter_queue.queue_url,
    )


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


def grant_partition_state(
    function: LakelineFunction, storage: StorageImports, stage_queue: QueueWithDeadLetters, queue_variable: str
) -> None:
    """What a function that ends a leased run needs: the partition states, and the stage's follow-up queue
    (``queue_variable``) to queue a follow-up run on."""
    function.function.add_environment(
        variable(SettleEnvironment, "pipeline_state_table"), storage.table_name("PipelineState")
    )
    function.function.add_environment(queue_variable, stage_queue.follow_ups.queue_url)
    storage.table("PipelineState").grant_read_write_data(function.function)
    stage_queue.follow_ups.grant_send_messages(function.function)


def post_update_function(
    scope: Construct,
    handler_package: str,
    description: str,
    *,
    storage: StorageImports,
    statements: StatementRunner,
    queue_b: QueueWithDeadLetters,
    lineage_queue: QueueWithDeadLetters,
    stage_queue: QueueWithDeadLetters,
    queue_variable: str,
    stage_events: StageEvents,
    buckets: tuple[str, ...],
) -> LakelineFunction:
    """A stage's post-update function (``handler_package``): after a run's publish it sweeps the superseded versions
    in ``buckets``, prunes old table versions, routes the partition onwards (``grant_routing``), ends the run's lease
    or queues its follow-up on ``stage_queue`` (``grant_partition_state``) and sends its OpenLineage events."""
    function = LakelineFunction(
        scope,
        "PostUpdate",
        handler_package=handler_package,
        description=description,
        timeout=Duration.minutes(5),
        environment=routing_environment(storage, queue_b, lineage_queue),
    )
    for bucket in buckets:
        storage.bucket(bucket).grant_read(function.function)
        storage.bucket(bucket).grant_delete(function.function)
    statements.grants.grant_delete_guard(function.function)
    statements.grants.grant_prune_versions(function.function)
    grant_routing(function, storage, queue_b, lineage_queue)
    grant_partition_state(function, storage, stage_queue, queue_variable)
    stage_events.attach(function)
    return function


def commit_function(scope: Construct, storage: StorageImports, buckets: tuple[str, ...]) -> LakelineFunction:
    """The stage's partition-commit function: carries files between run prefixes of ``buckets`` and
    commits partition versions in the pipeline-state table."""
    function = LakelineFunction(
        scope,
        "Commit",
        handler_package="partition_commit",
        description="Commit a run's prefix as its partition's next version (compare-and-swap under its lease)",
        timeout=Duration.minutes(5),
        environment=handler_environment(CommitEnvironment, pipeline_state_table=storage.table_name("PipelineState")),
    )
    storage.table("PipelineState").grant_read_write_data(function.function)
    for bucket in buckets:
        storage.bucket(bucket).grant_read_write(function.function)
    return function


ATHENA_QUERY_ACTIONS = ["athena:StartQueryExecution", "athena:GetQueryExecution", "athena:GetQueryResults"]


def quality_function(scope: Construct, statements: StatementRunner) -> LakelineFunction:
    """The function that checks a run's new version on Athena (``lambdas/quality``): it runs statements as the
    state machine's Athena tasks do (``grant_plan``), in the workgroup."""
    function = LakelineFunction(
        scope,
        "Quality",
        handler_package="quality",
        description="Run a table's quality checks on a run's new version before its commit (#41)",
        timeout=Duration.minutes(15),
        environment=handler_environment(QualityEnvironment, athena_workgroup=statements.workgroup.name),
    )
    role = function.function.role
    assert role is not None
    statements.grants.grant_plan(role)
    workgroup = Stack.of(scope).format_arn(
        service="athena", resource="workgroup", resource_name=statements.workgroup.name
    )
    role.add_to_principal_policy(iam.PolicyStatement(actions=ATHENA_QUERY_ACTIONS, resources=[workgroup]))
    return function


def quality_step(
    scope: Construct,
    construct_id: str,
    step: FailedStep,
    *,
    order: RunOrder,
    plan: InputPath,
    statements: StatementRunner,
    function: lambda_.IFunction | None,
    on_failure: sfn.IChainable,
) -> sfn.Chain:
    """The quality checks (``EngineSteps.quality``), skipped when the plan has none: state machines are static,
    and a Choice costs no task, where a task told "no checks" would cost an invocation per run."""
    task = statements.engine.quality(scope, construct_id, order=order, plan=plan, function=function)
    task.add_catch(failure_marker(scope, f"{construct_id}QualityFailed", step).next(on_failure), result_path="$.error")
    checked = sfn.Pass(scope, f"{construct_id}Checked")
    has_checks = sfn.Choice(scope, f"{construct_id}HasChecks")
    has_checks.when(sfn.Condition.is_null(plan("quality")), checked).otherwise(task)
    task.next(checked)
    return sfn.Chain.custom(has_checks, [checked], checked)


def commit_task(
    scope: Construct,
    construct_id: str,
    step: FailedStep,
    *,
    plan: InputPath,
    commit: lambda_.IFunction,
    on_failure: sfn.IChainable,
) -> tasks.LambdaInvoke:
    """The partition commit (``lambdas/partition_commit``: the run's prefix becomes the partition's next version,
    compare-and-swap under the run's lease)."""
    task = tasks.LambdaInvoke(
        scope,
        f"{construct_id}Commit",
        lambda_function=commit,
        payload=sfn.TaskInput.from_object({"plan.$": str(plan), "execution_id.$": "$$.Execution.Id"}),
        result_selector={"version.$": "$.Payload.version", "files.$": "$.Payload.files"},
        result_path="$.commit",
    )
    add_retry(task)
    task.add_catch(failure_marker(scope, f"{construct_id}CommitFailed", step).next(on_failure), result_path="$.error")
    return task


def post_update_task(
    scope: Construct,
    step: FailedStep,
    post_update: lambda_.IFunction,
    payload: dict[str, str],
    on_failure: sfn.IChainable,
) -> tasks.LambdaInvoke:
    """The post-update function (the run's end: lease, sweep, lineage, routing onwards)."""
    task = tasks.LambdaInvoke(
        scope,
        "PostUpdateTask",
        lambda_function=post_update,
        payload=sfn.TaskInput.from_object({**payload, "execution_id.$": "$$.Execution.Id"}),
        result_selector={"result.$": "$.Payload"},
        result_path="$.post_update",
    )
    add_retry(task)
    # The post-update handlers are idempotent (cleanup, deterministic lineage nodes, deduplicated
    # messages), so a failed invocation is retried before the execution fails.
    task.add_retry(errors=["States.TaskFailed"], interval=Duration.seconds(10), max_attempts=2, backoff_rate=2.0)
    # Still failing: the failure function, told the step was the post-update, deletes nothing (the
    # run is published), ends the lease as the post-update would, records the run's lineage and parks
    # the run's input with the reason; its redrive repeats the post-update (the published version's
    # routing included) in a run that writes nothing. The execution still fails (alarmed).
    task.add_catch(failure_marker(scope, "PostUpdateFailed", step).next(on_failure), result_path="$.error")
    return task


def chained(states: list[sfn.IChainable], then: sfn.IChainable) -> sfn.IChainable:
    """``states`` one after the other, then ``then``."""
    if not states:
        return then
    chain = sfn.Chain.start(states[0])
    for state in states[1:]:
        chain = chain.next(state)
    return chain.next(then)


class StageWorkflow:
    """A stage's state machine and the router that starts it, built in the stage construct ``stage``, in the
    stage's run order ``order`` (``lakeline.run_order``):

    ``run_id``: the engine's writes of the plan at ``plan`` (``engine_fragment``), the quality checks (skipped
    without checks), commit and publish,
    ``run_id + "Written"``; then ``PostUpdateTask`` (``post_update`` with ``post_update_payload``) and
    ``<name>Done``. Any failure, the post-update's after its retries included, goes through
    ``<name>Record`` (``failure`` with ``failure_payload``) to ``<name>Failed``.
    """

    def __init__(
        self,
        stage: Construct,
        *,
        name: str,
        run_id: str,
        storage: StorageImports,
        statements: StatementRunner,
        order: RunOrder,
        engine_fragment: EngineFragment,
        plan: InputPath,
        commit_buckets: tuple[str, ...],
        failure: LakelineFunction,
        failure_payload: dict[str, str],
        post_update: LakelineFunction,
        post_update_payload: dict[str, str],
    ) -> None:
        self.stage = stage
        self.storage = storage
        self.statements = statements
        commit = commit_function(stage, storage, commit_buckets)
        on_failure = failure_recorder(stage, name, failure.function, failure_payload)
        done = sfn.Pass(stage, f"{run_id}Written")
        # The run order (lakeline.run_order), as the embedded runtime runs it: the engine's writes, then (only
        # when they wrote) the steps that publish them, then the post-update; each step's Catch marks its name.
        checker = quality_function(stage, statements).function if statements.engine.name == "athena" else None
        after_writes: dict[StepKind, Callable[[FailedStep], sfn.IChainable]] = {
            "quality": lambda step: quality_step(
                stage,
                run_id,
                step,
                order=order,
                plan=plan,
                statements=statements,
                function=checker,
                on_failure=on_failure,
            ),
            "commit": lambda step: commit_task(
                stage, run_id, step, plan=plan, commit=commit.function, on_failure=on_failure
            ),
            # The catalog swap to the committed version (Athena, whatever the engine).
            "publish": lambda step: statements.workgroup.statements(
                stage, f"{run_id}Publish", plan("publish"), on_failure, step
            ),
            "post_update": lambda step: post_update_task(
                stage, step, post_update.function, post_update_payload, on_failure
            ),
        }
        steps = [step for step in order.steps(statements.engine.name) if step.kind != "writes"]
        published = chained([after_writes[step.kind](step.name) for step in steps if step.kind in PUBLISHING], done)
        writes = engine_fragment(stage, run_id, WriteExits(publish=published, done=done, on_failure=on_failure))
        finish = [after_writes[step.kind](step.name) for step in steps if step.kind not in PUBLISHING]
        definition = chained([sfn.Chain.custom(writes, [done], done), *finish], sfn.Succeed(stage, f"{name}Done"))
        self.state_machine = logged_state_machine(stage, "StateMachine", definition, key=storage.key)
        statements.grants.grant_plan(self.state_machine.role)
        statements.grants.confine_athena_tasks(self.state_machine)

    def router(
        self,
        *,
        handler_package: str,
        description: str,
        queue: QueueWithDeadLetters,
        settings: RouterSettings,
        stage_environment: dict[str, str],
        grant: Callable[[LakelineFunction], None],
    ) -> LakelineFunction:
        """The router on ``queue``: plans each arrival's run and starts the state machine. Its environment
        is ``RouterEnvironment``'s, with ``stage_environment`` for the stage's own handler; ``grant``
        gives it what its stage reads and writes besides its queue, its DLQ and the state machine."""
        storage = self.storage
        router = LakelineFunction(
            self.stage,
            "Router",
            handler_package=handler_package,
            description=description,
            environment={
                **handler_environment(
                    RouterEnvironment,
                    state_machine_arn=self.state_machine.state_machine_arn,
                    dead_letter_queue_url=queue.dead_letter_queue.queue_url,
                    pipeline_state_table=storage.table_name("PipelineState"),
                ),
                **stage_environment,
                **handler_environment(
                    RouterEnvironment,
                    stage_bucket=storage.bucket("Stage").bucket_name,
                    pipeline_environment=settings.pipeline_environment,
                    runs_in_flight=str(settings.runs_in_flight),
                ),
            },
        )
        self.state_machine.grant_start_execution(router.function)
        # A redelivery finds its execution already started and reads whether it ended
        # (lakeline.aws.stepfunctions.start_execution_once): DescribeExecution on this machine's executions.
        self.state_machine.grant_execution(router.function, "states:DescribeExecution")
        queue.dead_letter_queue.grant_send_messages(router.function)
        grant(router)
        router.function.add_event_source(
            sources.SqsEventSource(
                queue.queue,
                batch_size=10,
                max_batching_window=Duration.seconds(5),
                report_batch_item_failures=True,
                max_concurrency=settings.max_concurrency,
            )
        )
        if queue.follow_up_queue is not None:
            # Its own mapping, so its pollers take follow-ups whatever waits in the stage's queue: a follow-up
            # holds its partition's lease and often the run slot its run handed it. No batching window: none waits.
            router.function.add_event_source(
                sources.SqsEventSource(
                    queue.follow_up_queue,
                    batch_size=10,
                    report_batch_item_failures=True,
                    max_concurrency=FOLLOW_UP_CONCURRENCY,
                )
            )
        return router
