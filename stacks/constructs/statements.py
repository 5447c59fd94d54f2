"""Where a stage's SQL runs: the Athena workgroup (every deployment has one: the catalog swaps run there
whatever the engine), the grants on the catalog and the data, and the deployment's ``Engine`` strategy,
with the Glue for Spark job when the engine is ``spark``."""

from __future__ import annotations

from collections.abc import Callable

from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from stacks.config import LakelineConfig
from stacks.constructs.athena import AthenaWorkgroup
from stacks.constructs.engines import AthenaEngine, Engine, SparkEngine
from stacks.constructs.glue_job import SparkJob
from stacks.constructs.grants import PipelineGrants
from stacks.constructs.workflow import add_retry, failure_marker
from stacks.contracts import STAGE_A_PLAN, STAGE_B_PLAN, InputPath
from stacks.storage_refs import StorageImports


class StatementRunner(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: LakelineConfig, storage: StorageImports) -> None:
        super().__init__(scope, construct_id)
        self.workgroup = AthenaWorkgroup(
            self,
            "Athena",
            name=f"lakeline-{config.environment}",
            results_bucket=storage.bucket("AthenaResults"),
            key=storage.key,
            named_query_database=storage.lineage_database,
        )
        self.grants = PipelineGrants(self, environment=config.environment, storage=storage, workgroup=self.workgroup)
        self.spark_job: SparkJob | None = None
        self.engine: Engine
        if config.engine == "spark":
            self.spark_job = SparkJob(self, config=config, storage=storage, grants=self.grants)
            self.engine = SparkEngine(self.spark_job)
        else:
            self.engine = AthenaEngine(self.workgroup)

    # Until the stage constructs share one workflow piece (stacks.constructs.stage), the runners and grants
    # they call are kept here, delegating to the engine and to PipelineGrants.
    @property
    def catalog_resources(self) -> list[str]:
        return self.grants.catalog_resources

    def grant_catalog_read(self, grantee: iam.IGrantable) -> None:
        self.grants.grant_catalog_read(grantee)

    def grant_add_columns(self, grantee: iam.IGrantable) -> None:
        self.grants.grant_add_columns(grantee)

    def grant_plan(self, role: iam.IRole) -> None:
        self.grants.grant_plan(role)

    def plan_runner(
        self, scope: Construct, construct_id: str, *, commit: lambda_.IFunction, on_failure: sfn.IChainable
    ) -> sfn.Chain:
        return self._runner(scope, construct_id, STAGE_A_PLAN, self.engine.stage_a, commit, on_failure)

    def steps_runner(
        self, scope: Construct, construct_id: str, *, commit: lambda_.IFunction, on_failure: sfn.IChainable
    ) -> sfn.Chain:
        return self._runner(scope, construct_id, STAGE_B_PLAN, self.engine.stage_b, commit, on_failure)

    def _runner(
        self,
        scope: Construct,
        construct_id: str,
        plan: InputPath,
        fragment: Callable[..., sfn.State],
        commit: lambda_.IFunction,
        on_failure: sfn.IChainable,
    ) -> sfn.Chain:
        done = sfn.Pass(scope, f"{construct_id}Written")
        published = self._commit_and_publish(scope, construct_id, plan, commit, on_failure).next(done)
        start = fragment(scope, construct_id, publish=published, done=done, on_failure=on_failure)
        return sfn.Chain.custom(start, [done], done)

    def _commit_and_publish(
        self,
        scope: Construct,
        construct_id: str,
        plan: InputPath,
        commit: lambda_.IFunction,
        on_failure: sfn.IChainable,
    ) -> sfn.Chain:
        """The partition commit (``lambdas/partition_commit``: the run's prefix becomes the partition's
        next version, compare-and-swap under the run's lease), then the catalog swap to it."""
        task = tasks.LambdaInvoke(
            scope,
            f"{construct_id}Commit",
            lambda_function=commit,
            payload=sfn.TaskInput.from_object({"plan.$": str(plan), "execution_id.$": "$$.Execution.Id"}),
            result_selector={"version.$": "$.Payload.version", "files.$": "$.Payload.files"},
            result_path="$.commit",
        )
        add_retry(task)
        task.add_catch(
            failure_marker(scope, f"{construct_id}CommitFailed", "commit").next(on_failure), result_path="$.error"
        )
        publish = self.workgroup.statements(scope, f"{construct_id}Publish", plan("publish"), on_failure, "publish")
        return sfn.Chain.start(task).next(publish)
