"""How a stage's writes run in the cloud, one strategy per deployment engine behind ``EngineSteps``.

``AthenaEngineSteps``: one native ``athena:startQueryExecution.sync`` task per statement, in the workgroup.
``SparkEngineSteps``: one ``glue:startJobRun.sync`` task running ``lakeline/glue_jobs/stage_job.py``, Lakeline's
Spark engine on AWS Glue for Spark against the Glue Data Catalog, which runs the plan's statements itself.

Each strategy gives a stage's state machine the fragment that writes a run's new partition version: it
starts at the state returned and ends in ``publish`` (the commit and the catalog swap, the same for both
engines: ``stacks.constructs.stage``) or, when the run wrote nothing, in ``done``. On failure it marks
``$.failed_step`` and goes to ``on_failure``. The JSON paths come from the plans (``stacks.contracts``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import partial

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from lakeline.run_order import STAGE_A, STAGE_B, EngineName, FailedStep, RunOrder
from stacks.constructs.athena import AthenaWorkgroup
from stacks.constructs.glue_job import SparkJob
from stacks.constructs.workflow import SQL_TIMEOUT, add_retry, add_throttling_retry, failure_marker
from stacks.contracts import STAGE_A_PLAN, STAGE_B_PLAN, STAGE_B_STEP, InputPath
from stage_b.failures import STEP_CAUSE_FORMAT

STEP_TIMES = "$.step_times"
"""Where the Athena engine keeps a stage B run's step times (``stage_b.failures.StepTime``, one per step)."""


@dataclass(frozen=True)
class WriteExits:
    """Where a stage's write fragment goes on: ``publish`` once it wrote the run's new version, ``done`` when the run
    had nothing to write, ``on_failure`` once it marked ``$.failed_step``."""

    publish: sfn.IChainable
    done: sfn.State
    on_failure: sfn.IChainable


class EngineSteps(ABC):
    """The Step Functions fragments that run a stage A plan and a stage B plan: the engine's writes of the stage's
    run order (``lakeline.run_order``), each failure marked with the name the order gives its step."""

    name: EngineName

    stage_b_step_times: str | None = None
    """The path of the stage B steps' times in the state, when the engine's fragment keeps them."""

    @abstractmethod
    def stage_a(self, scope: Construct, construct_id: str, exits: WriteExits) -> sfn.State:
        """Run a stage A plan: point the partition at its committed version, then (unless the run has
        nothing new) register the raw partition, CTAS into the run's prefix, drop the temp table."""

    @abstractmethod
    def stage_b(self, scope: Construct, construct_id: str, exits: WriteExits) -> sfn.State:
        """Run a stage B plan: point the partition at its committed version, its steps in order, the
        DROP of the temp table (also on failure)."""

    @abstractmethod
    def quality(
        self,
        scope: Construct,
        construct_id: str,
        *,
        order: RunOrder,
        plan: InputPath,
        function: lambda_.IFunction | None,
    ) -> sfn.TaskStateBase:
        """The quality checks of the run's new version on the engine (``stage_end.quality.run_quality``), a task
        that fails (``QualityBlocked``) when a ``block`` rule failed. ``function``: the quality function, on an
        engine that checks through one."""

    @staticmethod
    def unless_nothing_new(
        scope: Construct, construct_id: str, *, write: sfn.IChainable, done: sfn.State
    ) -> sfn.Choice:
        """Stage A: ``write`` unless the plan's mode is ``none`` (the run has nothing new to write)."""
        writes = sfn.Choice(scope, f"{construct_id}HasNewData")
        writes.when(sfn.Condition.string_equals(STAGE_A_PLAN("mode"), "none"), done)
        writes.otherwise(write)
        return writes

    @staticmethod
    def if_temp_table(scope: Construct, construct_id: str, *, write: sfn.IChainable, done: sfn.State) -> sfn.Choice:
        """Stage B: ``write`` if the plan writes through a temp table (a step writes the target)."""
        has_temp = sfn.Choice(scope, f"{construct_id}HasTemp")
        has_temp.when(sfn.Condition.is_string(STAGE_B_PLAN("drop_temp")), write)
        has_temp.otherwise(done)
        return has_temp


class AthenaEngineSteps(EngineSteps):
    """Each statement of the plan as its own Athena task."""

    name: EngineName = "athena"
    stage_b_step_times = STEP_TIMES

    def __init__(self, workgroup: AthenaWorkgroup) -> None:
        self.workgroup = workgroup

    def _reconcile(
        self, scope: Construct, construct_id: str, plan: InputPath, on_failure: sfn.IChainable, step: FailedStep
    ) -> sfn.Map:
        return self.workgroup.statements(scope, f"{construct_id}Reconcile", plan("reconcile"), on_failure, step)

    def stage_a(self, scope: Construct, construct_id: str, exits: WriteExits) -> sfn.State:
        plan, statement = STAGE_A_PLAN, self.workgroup.statement
        step = partial(STAGE_A.write_step, self.name)
        reconcile = self._reconcile(scope, construct_id, plan, exits.on_failure, step("reconcile"))
        register = statement(scope, f"{construct_id}RegisterRaw", plan("register_raw"))
        ctas = statement(scope, f"{construct_id}Ctas", plan("ctas"))
        drop = statement(scope, f"{construct_id}DropTemp", plan("drop_temp"))
        drop_after_failure = statement(scope, f"{construct_id}DropTempAfterFailure", plan("drop_temp"))
        ctas_failed = failure_marker(scope, f"{construct_id}CtasFailed", step("ctas"))
        # The temp table is dropped on the failure path too; if even that fails, the failure is still recorded.
        drop_after_failure.add_catch(ctas_failed, result_path="$.drop_error")
        drop_after_failure.next(
            self._drop_source(scope, f"{construct_id}DropSourceAfterFailure", step("ctas"), then=ctas_failed)
        )
        ctas_failed.next(exits.on_failure)
        ctas.add_catch(drop_after_failure, result_path="$.error")
        ctas.next(drop).next(
            self._drop_source(
                scope, f"{construct_id}DropSource", step("ctas"), then=exits.publish, on_failure=exits.on_failure
            )
        )
        # The run's new files are not committed yet: a failed DROP of the temp table fails the run like its
        # CTAS (the failure function deletes them, ends the lease and parks the arrivals).
        drop.add_catch(
            failure_marker(scope, f"{construct_id}DropTempFailed", step("ctas")).next(exits.on_failure),
            result_path="$.error",
        )
        # Nothing is written before the CTAS: a failed registration of the raw partition only ends the run.
        register.add_catch(
            failure_marker(scope, f"{construct_id}RegisterRawFailed", step("register")).next(exits.on_failure),
            result_path="$.error",
        )
        source = statement(scope, f"{construct_id}SourceTable", f"{STAGE_A_PLAN('source')}.create")
        # Nothing is written before the CTAS: a failed table over the manifest only ends the run.
        source.add_catch(
            failure_marker(scope, f"{construct_id}SourceTableFailed", step("ctas")).next(exits.on_failure),
            result_path="$.error",
        )
        source.next(ctas)
        has_source = sfn.Choice(scope, f"{construct_id}HasSource")
        has_source.when(sfn.Condition.is_null(STAGE_A_PLAN("source")), ctas).otherwise(source)
        checked = self._type_check(
            scope, construct_id, step("type_check"), then=has_source, on_failure=exits.on_failure
        )
        has_raw_partition = sfn.Choice(scope, f"{construct_id}IsPartitioned")
        has_raw_partition.when(sfn.Condition.is_string(plan("register_raw")), register.next(checked))
        has_raw_partition.otherwise(checked)
        reconcile.next(self.unless_nothing_new(scope, construct_id, write=has_raw_partition, done=exits.done))
        return reconcile

    def _drop_source(
        self,
        scope: Construct,
        construct_id: str,
        step: FailedStep,
        *,
        then: sfn.IChainable,
        on_failure: sfn.IChainable | None = None,
    ) -> sfn.Choice:
        """Drop the plan's table over its manifest (``stage_a.manifest``), when it has one, then ``then``.
        After a CTAS that succeeded a failed drop fails the run (``on_failure``, its files not committed);
        after a failed CTAS, the run's own failure is what ``then`` records."""
        paths = STAGE_A_PLAN("source")
        drop = self.workgroup.statement(scope, construct_id, f"{paths}.drop")
        if on_failure is None:
            drop.add_catch(then, result_path="$.drop_error")
        else:
            failed = failure_marker(scope, f"{construct_id}Failed", step).next(on_failure)
            drop.add_catch(failed, result_path="$.error")
        drop.next(then)
        has_source = sfn.Choice(scope, f"{construct_id}IfAny")
        has_source.when(sfn.Condition.is_null(paths), then).otherwise(drop)
        return has_source

    def _type_check(
        self, scope: Construct, construct_id: str, step: FailedStep, *, then: sfn.State, on_failure: sfn.IChainable
    ) -> sfn.Choice:
        """The plan's type check of its CSV or JSON-lines files (``stage_a.type_check``), when it has one, then
        ``then``: make the text table, check (a bad value fails the query, naming file, column and values), drop it
        (also after a failed check). Nothing is written yet, so a failure only ends the run."""
        paths, statement = STAGE_A_PLAN("type_check"), self.workgroup.statement
        create = statement(scope, f"{construct_id}TypeCheckTable", f"{paths}.create")
        check = statement(scope, f"{construct_id}TypeCheck", f"{paths}.check")
        drop = statement(scope, f"{construct_id}TypeCheckDrop", f"{paths}.drop")
        drop_after_failure = statement(scope, f"{construct_id}TypeCheckDropAfterFailure", f"{paths}.drop")
        failed = failure_marker(scope, f"{construct_id}TypeCheckFailed", step)
        failed.next(on_failure)
        drop_after_failure.add_catch(failed, result_path="$.drop_error")
        drop_after_failure.next(failed)
        create.add_catch(failed, result_path="$.error")
        check.add_catch(drop_after_failure, result_path="$.error")
        drop.add_catch(failed, result_path="$.error")
        create.next(check).next(drop).next(then)
        has_check = sfn.Choice(scope, f"{construct_id}HasTypeCheck")
        has_check.when(sfn.Condition.is_null(paths), then)
        has_check.otherwise(create)
        return has_check

    def quality(
        self,
        scope: Construct,
        construct_id: str,
        *,
        order: RunOrder,
        plan: InputPath,
        function: lambda_.IFunction | None,
    ) -> sfn.TaskStateBase:
        # A Lambda task running the checks' queries on Athena one after the other: one query per rule is short,
        # and a Map of Athena tasks would need the rules' compiled SQL in the state (bounded only by the plan's).
        if function is None:
            raise ValueError("the Athena engine checks quality through the quality function")
        task = tasks.LambdaInvoke(
            scope,
            f"{construct_id}Quality",
            lambda_function=function,
            payload=sfn.TaskInput.from_object({"stage": order.stage, "plan.$": str(plan)}),
            result_selector={"checks.$": "$.Payload.checks", "warned.$": "$.Payload.warned"},
            result_path="$.quality",
        )
        # The service's transient errors and Athena's quota (the function's QualityThrottled) only: a blocked
        # version fails the same way again.
        add_retry(task, throttled=["QualityThrottled"])
        return task

    def stage_b(self, scope: Construct, construct_id: str, exits: WriteExits) -> sfn.State:
        plan, statement = STAGE_B_PLAN, self.workgroup.statement
        named = partial(STAGE_B.write_step, self.name)
        reconcile = self._reconcile(scope, construct_id, plan, exits.on_failure, named("reconcile"))
        # In its db, as locally; its output is when its query ran (stage_b.failures.StepTime), for the events.
        step = statement(
            scope,
            f"{construct_id}Step",
            "$.sql",
            database_path="$.db",
            index_path="$.index",
            result_selector={
                "started.$": "$.QueryExecution.Status.SubmissionDateTime",
                "ended.$": "$.QueryExecution.Status.CompletionDateTime",
            },
        )

        # The Map's Catch gets only the failed iteration's Error and Cause: the iteration puts its index
        # before the task's cause, so the failure function knows which step failed (stage_b.failures).
        def failed_at(name: str, cause: str) -> sfn.Pass:
            """The iteration's error, its cause after the step's index (``stage_b.failures``)."""
            at_index = sfn.JsonPath.format(STEP_CAUSE_FORMAT, sfn.JsonPath.string_at("$.index"), cause)
            parameters = {"Error": sfn.JsonPath.string_at("$.error.Error"), "Cause": at_index}
            return sfn.Pass(scope, f"{construct_id}{name}", parameters=parameters)

        step_failed = failed_at("StepFailedAt", sfn.JsonPath.string_at("$.error.Cause"))
        # An error without a Cause (a task's States.Timeout may come so) would make States.Format fail with
        # States.Runtime, which no Catch takes: the error's name stands for its cause then.
        step_failed_uncaused = failed_at("StepFailedAtUncaused", sfn.JsonPath.string_at("$.error.Error"))
        iteration_failed = sfn.Fail(
            scope, f"{construct_id}StepIterationFailed", error_path="$.Error", cause_path="$.Cause"
        )
        step_failed.next(iteration_failed)
        step_failed_uncaused.next(iteration_failed)
        has_cause = sfn.Choice(scope, f"{construct_id}StepFailureHasCause")
        has_cause.when(sfn.Condition.is_present("$.error.Cause"), step_failed).otherwise(step_failed_uncaused)
        step.add_catch(has_cause, result_path="$.error")
        steps = sfn.Map(
            scope,
            f"{construct_id}Steps",
            items_path=plan("steps"),
            max_concurrency=1,
            item_selector={
                "sql.$": STAGE_B_STEP("sql"),
                "db.$": STAGE_B_STEP("db"),
                "index.$": "$$.Map.Item.Index",
            },
            result_path=STEP_TIMES,
        )
        steps.item_processor(step)
        steps_failed = failure_marker(scope, f"{construct_id}StepFailed", named("steps"))
        drop_after_failure = statement(scope, f"{construct_id}DropTempAfterFailure", plan("drop_temp"))
        drop_after_failure.add_catch(steps_failed, result_path="$.drop_error")
        drop_after_failure.next(steps_failed)
        steps_failed.next(exits.on_failure)
        has_temp_after_failure = sfn.Choice(scope, f"{construct_id}HasTempAfterFailure")
        has_temp_after_failure.when(sfn.Condition.is_string(plan("drop_temp")), drop_after_failure)
        has_temp_after_failure.otherwise(steps_failed)
        steps.add_catch(has_temp_after_failure, result_path="$.error")

        drop = statement(scope, f"{construct_id}DropTemp", plan("drop_temp"))
        drop.next(exits.publish)
        # Not committed yet: a failed DROP fails the run like a failed step (its prefix is deleted).
        drop.add_catch(
            failure_marker(scope, f"{construct_id}DropTempFailed", named("steps")).next(exits.on_failure),
            result_path="$.error",
        )
        reconcile.next(steps).next(self.if_temp_table(scope, construct_id, write=drop, done=exits.done))
        return reconcile


class SparkEngineSteps(EngineSteps):
    """The whole plan (reconcile, writes, drop) as one run of the Glue job."""

    name: EngineName = "spark"

    def __init__(self, job: SparkJob) -> None:
        self.job = job

    def _job_run(self, scope: Construct, construct_id: str, mode: str, plan: InputPath) -> tasks.GlueStartJobRun:
        """A run of the Glue job in ``mode`` on the plan at ``plan``."""
        run = tasks.GlueStartJobRun(
            scope,
            construct_id,
            glue_job_name=self.job.name,
            integration_pattern=sfn.IntegrationPattern.RUN_JOB,
            arguments=sfn.TaskInput.from_object(
                {"--mode": mode, "--plan": sfn.JsonPath.json_to_string(sfn.JsonPath.object_at(str(plan)))}
            ),
            result_path=sfn.JsonPath.DISCARD,
            task_timeout=sfn.Timeout.duration(SQL_TIMEOUT),
        )
        add_throttling_retry(run)
        return run

    def quality(
        self,
        scope: Construct,
        construct_id: str,
        *,
        order: RunOrder,
        plan: InputPath,
        function: lambda_.IFunction | None,
    ) -> sfn.TaskStateBase:
        # Checked by Spark, as written: a second run of the job, since the writes' run ends before the step.
        return self._job_run(scope, f"{construct_id}QualitySpark", f"quality_{order.stage.lower()}", plan)

    def _run(
        self, scope: Construct, construct_id: str, order: RunOrder, plan: InputPath, on_failure: sfn.IChainable
    ) -> tasks.GlueStartJobRun:
        (step,) = order.writes[self.name]  # the one job run is all of the stage's writes
        run = self._job_run(scope, f"{construct_id}Spark", f"stage_{order.stage.lower()}", plan)
        # The job admits MaxConcurrentRuns runs at once and the routers start more executions than that: a run
        # Glue refuses for concurrency waits and tries again, within the throttling budget, instead of failing
        # the run and parking what it took. Past that, under sustained overload, the run fails and its input
        # is parked (add_throttling_retry, in _job_run).
        run.add_catch(failure_marker(scope, f"{construct_id}SparkFailed", step).next(on_failure), result_path="$.error")
        return run

    def stage_a(self, scope: Construct, construct_id: str, exits: WriteExits) -> sfn.State:
        run = self._run(scope, construct_id, STAGE_A, STAGE_A_PLAN, exits.on_failure)
        run.next(self.unless_nothing_new(scope, construct_id, write=exits.publish, done=exits.done))
        return run

    def stage_b(self, scope: Construct, construct_id: str, exits: WriteExits) -> sfn.State:
        run = self._run(scope, construct_id, STAGE_B, STAGE_B_PLAN, exits.on_failure)
        run.next(self.if_temp_table(scope, construct_id, write=exits.publish, done=exits.done))
        return run
