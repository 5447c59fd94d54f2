"""How a stage's SQL runs in the cloud, per deployment engine.

``athena``: one native ``athena:startQueryExecution.sync`` task per statement, in the workgroup.
``spark``: one ``glue:startJobRun.sync`` task running ``lakeline/glue_jobs/stage_job.py``, Lakeline's
Spark engine on AWS Glue for Spark against the Glue Data Catalog.
"""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as assets
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from stacks.config import LakelineConfig
from stacks.constructs.athena import AthenaWorkgroup
from stacks.constructs.functions import CODE_EXCLUDES, REPO_ROOT
from stacks.constructs.workflow import add_retry
from stacks.nag import acknowledge
from stacks.storage_refs import StorageImports

CATALOG_ACTIONS = [
    "glue:GetDatabase",
    "glue:GetDatabases",
    "glue:GetTable",
    "glue:GetTables",
    "glue:GetPartition",
    "glue:GetPartitions",
    "glue:BatchGetPartition",
]
CATALOG_WRITE_ACTIONS = [
    "glue:CreateTable",
    "glue:DeleteTable",
    "glue:UpdateTable",
    "glue:CreatePartition",
    "glue:BatchCreatePartition",
    "glue:UpdatePartition",
    "glue:DeletePartition",
    "glue:BatchDeletePartition",
]
SQL_TIMEOUT = Duration.hours(2)
SPARK_MODULES = "sqlglot==30.30.0,pydantic>=2.7,python-dateutil>=2.9"


class StatementRunner(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: LakelineConfig, storage: StorageImports) -> None:
        super().__init__(scope, construct_id)
        self.config = config
        self.storage = storage
        stack = Stack.of(self)
        suffix = f"_{config.environment}"
        # Pipeline databases all end in the environment suffix (<team>_<dataset>[_raw]_<env>).
        self.catalog_resources = [
            stack.format_arn(service="glue", resource="catalog"),
            stack.format_arn(service="glue", resource="database", resource_name=f"*{suffix}"),
            stack.format_arn(service="glue", resource="table", resource_name=f"*{suffix}/*"),
        ]
        self.workgroup = AthenaWorkgroup(
            self,
            "Athena",
            name=f"lakeline-{config.environment}",
            results_bucket=storage.bucket("AthenaResults"),
            key=storage.key,
            named_query_database=storage.lineage_database,
        )
        self.glue_job: glue.CfnJob | None = None
        if config.engine == "spark":
            self.glue_job = self._glue_job()

    def grant_catalog_read(self, grantee: iam.IGrantable) -> None:
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=CATALOG_ACTIONS, resources=self.catalog_resources)
        )

    def grant_add_columns(self, grantee: iam.IGrantable) -> None:
        """``schema_evolution: add-columns``: the stage A router adds a file's new columns to its tables."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=["glue:UpdateTable"], resources=self.catalog_resources)
        )

    def grant_plan(self, role: iam.IRole) -> None:
        """What running stage statements needs: the catalog, the raw data, the stage data, the results."""
        storage = self.storage
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=[*CATALOG_ACTIONS, *CATALOG_WRITE_ACTIONS], resources=self.catalog_resources)
        )
        storage.bucket("Raw").grant_read(role)
        storage.bucket("Stage").grant_read_write(role)
        storage.bucket("Analytics").grant_read_write(role)
        storage.bucket("AthenaResults").grant_read_write(role)
        storage.key.grant_encrypt_decrypt(role)
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["athena:GetWorkGroup"],
                resources=[
                    Stack.of(self).format_arn(service="athena", resource="workgroup", resource_name=self.workgroup.name)
                ],
            )
        )

    def athena_statement(self, scope: Construct, construct_id: str, sql_path: str) -> tasks.AthenaStartQueryExecution:
        """One statement from the state at ``sql_path``. Statements name their tables in full
        (``db.table``), so no query context is set; the workgroup enforces the result location."""
        task = tasks.AthenaStartQueryExecution(
            scope,
            construct_id,
            query_string=sfn.JsonPath.string_at(sql_path),
            integration_pattern=sfn.IntegrationPattern.RUN_JOB,
            work_group=self.workgroup.name,
            # Naming the (workgroup-enforced) result location scopes the task's generated S3 grants to the
            # results bucket; without it CDK grants s3:GetObject/PutObject/CreateBucket on every resource.
            result_configuration=tasks.ResultConfiguration(
                output_location=s3.Location(
                    bucket_name=self.storage.bucket("AthenaResults").bucket_name, object_key="athena"
                )
            ),
            result_path=sfn.JsonPath.DISCARD,
            task_timeout=sfn.Timeout.duration(SQL_TIMEOUT),
        )
        task.add_retry(
            errors=[
                "Athena.TooManyRequestsException",
                "Athena.InternalServerException",
                "Athena.AmazonAthenaException",
            ],
            interval=Duration.seconds(10),
            max_attempts=5,
            backoff_rate=2.0,
            jitter_strategy=sfn.JitterType.FULL,
        )
        return task

    def _failure_marker(self, scope: Construct, construct_id: str, step: str) -> sfn.Pass:
        return sfn.Pass(scope, construct_id, result=sfn.Result.from_string(step), result_path="$.failed_step")

    def plan_runner(
        self, scope: Construct, construct_id: str, *, commit: lambda_.IFunction, on_failure: sfn.IChainable
    ) -> sfn.Chain:
        """Run a stage A plan (``$.plan``): point the partition at its committed version, then (unless
        the run has nothing new) register, CTAS, drop, commit, swap. On failure mark ``$.failed_step``
        and go to ``on_failure``."""
        done = sfn.Pass(scope, f"{construct_id}Written")
        published = self._commit_and_publish(scope, construct_id, commit, on_failure).next(done)
        writes = sfn.Choice(scope, f"{construct_id}HasNewData")
        writes.when(sfn.Condition.string_equals("$.plan.mode", "none"), done)
        if self.glue_job is not None:
            # The job runs the reconcile, register, CTAS and drop itself.
            run = self._spark_run(scope, construct_id, "stage_a")
            run.add_catch(
                self._failure_marker(scope, f"{construct_id}SparkFailed", "spark").next(on_failure),
                result_path="$.error",
            )
            writes.otherwise(published)
            run.next(writes)
            return sfn.Chain.custom(run, [done], done)

        reconcile = self._statements(scope, f"{construct_id}Reconcile", "$.plan.reconcile", on_failure, "reconcile")
        register = self.athena_statement(scope, f"{construct_id}RegisterRaw", "$.plan.register_raw")
        ctas = self.athena_statement(scope, f"{construct_id}Ctas", "$.plan.ctas")
        drop = self.athena_statement(scope, f"{construct_id}DropTemp", "$.plan.drop_temp")
        drop_after_failure = self.athena_statement(scope, f"{construct_id}DropTempAfterFailure", "$.plan.drop_temp")
        ctas_failed = self._failure_marker(scope, f"{construct_id}CtasFailed", "ctas")
        # The temp table is dropped on the failure path too; if even that fails, the failure is still recorded.
        drop_after_failure.add_catch(ctas_failed, result_path="$.drop_error")
        drop_after_failure.next(ctas_failed)
        ctas_failed.next(on_failure)
        ctas.add_catch(drop_after_failure, result_path="$.error")
        ctas.next(drop).next(published)
        has_raw_partition = sfn.Choice(scope, f"{construct_id}IsPartitioned")
        has_raw_partition.when(sfn.Condition.is_string("$.plan.register_raw"), register.next(ctas))
        has_raw_partition.otherwise(ctas)
        writes.otherwise(has_raw_partition)
        reconcile.next(writes)
        return sfn.Chain.custom(reconcile, [done], done)

    def steps_runner(
        self, scope: Construct, construct_id: str, *, commit: lambda_.IFunction, on_failure: sfn.IChainable
    ) -> sfn.Chain:
        """Run a stage B plan (``$.plan``): point the partition at its committed version, its steps in
        order, the DROP of the temp table (also on failure), then commit and swap. On failure mark
        ``$.failed_step`` and go to ``on_failure``."""
        done = sfn.Pass(scope, f"{construct_id}Written")
        published = self._commit_and_publish(scope, construct_id, commit, on_failure).next(done)
        if self.glue_job is not None:
            # The job runs the reconcile, the steps and the drop itself.
            run = self._spark_run(scope, construct_id, "stage_b")
            run.add_catch(
                self._failure_marker(scope, f"{construct_id}SparkFailed", "spark").next(on_failure),
                result_path="$.error",
            )
            wrote = sfn.Choice(scope, f"{construct_id}HasTemp")
            wrote.when(sfn.Condition.is_string("$.plan.drop_temp"), published)
            wrote.otherwise(done)
            run.next(wrote)
            return sfn.Chain.custom(run, [done], done)

        reconcile = self._statements(scope, f"{construct_id}Reconcile", "$.plan.reconcile", on_failure, "reconcile")
        step = self.athena_statement(scope, f"{construct_id}Step", "$.sql")
        steps = sfn.Map(
            scope,
            f"{construct_id}Steps",
            items_path="$.plan.steps",
            max_concurrency=1,
            item_selector={"sql.$": "$$.Map.Item.Value.sql"},
            result_path=sfn.JsonPath.DISCARD,
        )
        steps.item_processor(step)
        steps_failed = self._failure_marker(scope, f"{construct_id}StepFailed", "steps")
        drop_after_failure = self.athena_statement(scope, f"{construct_id}DropTempAfterFailure", "$.plan.drop_temp")
        drop_after_failure.add_catch(steps_failed, result_path="$.drop_error")
        drop_after_failure.next(steps_failed)
        steps_failed.next(on_failure)
        has_temp_after_failure = sfn.Choice(scope, f"{construct_id}HasTempAfterFailure")
        has_temp_after_failure.when(sfn.Condition.is_string("$.plan.drop_temp"), drop_after_failure)
        has_temp_after_failure.otherwise(steps_failed)
        steps.add_catch(has_temp_after_failure, result_path="$.error")

        drop = self.athena_statement(scope, f"{construct_id}DropTemp", "$.plan.drop_temp")
        drop.next(published)
        has_temp = sfn.Choice(scope, f"{construct_id}HasTemp")
        has_temp.when(sfn.Condition.is_string("$.plan.drop_temp"), drop)
        has_temp.otherwise(done)
        reconcile.next(steps).next(has_temp)
        return sfn.Chain.custom(reconcile, [done], done)

    def _commit_and_publish(
        self, scope: Construct, construct_id: str, commit: lambda_.IFunction, on_failure: sfn.IChainable
    ) -> sfn.Chain:
        """The partition commit (``lambdas/partition_commit``: the run's prefix becomes the partition's
        next version, compare-and-swap under the run's lease), then the catalog swap to it."""
        task = tasks.LambdaInvoke(
            scope,
            f"{construct_id}Commit",
            lambda_function=commit,
            payload=sfn.TaskInput.from_object({"plan.$": "$.plan", "execution_id.$": "$$.Execution.Id"}),
            result_selector={"version.$": "$.Payload.version", "files.$": "$.Payload.files"},
            result_path="$.commit",
        )
        add_retry(task)
        task.add_catch(
            self._failure_marker(scope, f"{construct_id}CommitFailed", "commit").next(on_failure),
            result_path="$.error",
        )
        publish = self._statements(scope, f"{construct_id}Publish", "$.plan.publish", on_failure, "publish")
        return sfn.Chain.start(task).next(publish)

    def _statements(
        self, scope: Construct, construct_id: str, items_path: str, on_failure: sfn.IChainable, step: str
    ) -> sfn.Map:
        """Each statement of the list at ``items_path``, in order; on failure mark ``step`` and go on."""
        statement = self.athena_statement(scope, f"{construct_id}Statement", "$.statement")
        statements = sfn.Map(
            scope,
            construct_id,
            items_path=items_path,
            max_concurrency=1,
            item_selector={"statement.$": "$$.Map.Item.Value"},
            result_path=sfn.JsonPath.DISCARD,
        )
        statements.item_processor(statement)
        statements.add_catch(
            self._failure_marker(scope, f"{construct_id}Failed", step).next(on_failure), result_path="$.error"
        )
        return statements

    def _spark_run(self, scope: Construct, construct_id: str, mode: str) -> tasks.GlueStartJobRun:
        return tasks.GlueStartJobRun(
            scope,
            f"{construct_id}Spark",
            glue_job_name=self.config_job_name,
            integration_pattern=sfn.IntegrationPattern.RUN_JOB,
            arguments=sfn.TaskInput.from_object(
                {"--mode": mode, "--plan": sfn.JsonPath.json_to_string(sfn.JsonPath.object_at("$.plan"))}
            ),
            result_path=sfn.JsonPath.DISCARD,
            task_timeout=sfn.Timeout.duration(SQL_TIMEOUT),
        )

    @property
    def config_job_name(self) -> str:
        assert self.glue_job is not None
        return self.glue_job.ref

    def _glue_job(self) -> glue.CfnJob:
        storage = self.storage
        script = assets.Asset(self, "SparkJobScript", path=str(REPO_ROOT / "lakeline" / "glue_jobs" / "stage_job.py"))
        library = assets.Asset(
            self,
            "SparkJobLibrary",
            path=str(REPO_ROOT),
            exclude=[pattern for pattern in CODE_EXCLUDES if "lambdas" not in pattern],
        )
        role = iam.Role(
            self,
            "SparkJobRole",
            assumed_by=iam.ServicePrincipal("glue.amazonaws.com"),
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AWSGlueServiceRole")],
        )
        script.grant_read(role)
        library.grant_read(role)
        self.grant_plan(role)
        storage.key.grant_encrypt_decrypt(role)
        security = glue.CfnSecurityConfiguration(
            self,
            "SparkJobSecurity",
            name=f"lakeline-spark-{self.config.environment}",
            encryption_configuration=glue.CfnSecurityConfiguration.EncryptionConfigurationProperty(
                cloud_watch_encryption=glue.CfnSecurityConfiguration.CloudWatchEncryptionProperty(
                    cloud_watch_encryption_mode="SSE-KMS", kms_key_arn=storage.key.key_arn
                ),
                job_bookmarks_encryption=glue.CfnSecurityConfiguration.JobBookmarksEncryptionProperty(
                    job_bookmarks_encryption_mode="CSE-KMS", kms_key_arn=storage.key.key_arn
                ),
                s3_encryptions=[
                    glue.CfnSecurityConfiguration.S3EncryptionProperty(
                        s3_encryption_mode="SSE-KMS", kms_key_arn=storage.key.key_arn
                    )
                ],
            ),
        )
        acknowledge(
            role,
            {
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSGlueServiceRole]": (
                    "AWSGlueServiceRole is the documented base role of Glue jobs (logs, metrics, network interfaces)."
                ),
            },
        )
        self.spark_job_role = role
        return glue.CfnJob(
            self,
            "SparkJob",
            role=role.role_arn,
            glue_version=self.config.glue_version,
            worker_type="G.1X",
            number_of_workers=self.config.glue_workers,
            security_configuration=security.ref,
            command=glue.CfnJob.JobCommandProperty(
                name="glueetl", python_version="3", script_location=script.s3_object_url
            ),
            execution_property=glue.CfnJob.ExecutionPropertyProperty(max_concurrent_runs=20),
            default_arguments={
                "--extra-py-files": library.s3_object_url,
                "--additional-python-modules": SPARK_MODULES,
                "--enable-glue-datacatalog": "true",
                "--enable-metrics": "true",
                "--enable-continuous-cloudwatch-log": "true",
                "--job-language": "python",
            },
            timeout=int(SQL_TIMEOUT.to_minutes()),
        )
