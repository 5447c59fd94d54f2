"""The Athena workgroup every statement runs in, with its result location and encryption enforced,
named queries for the SQL users run by hand (the lineage archive queries), and the Step Functions
tasks that run one statement, or a list of them, in it (native ``athena:startQueryExecution.sync``)."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration, Stack
from aws_cdk import aws_athena as athena
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from lakeline.lambda_support import FailedStep
from stacks.constructs.bundling import REPO_ROOT
from stacks.constructs.workflow import SQL_TIMEOUT, failure_marker


class AthenaWorkgroup(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        results_bucket: s3.IBucket,
        key: kms.IKey,
        named_query_database: str,
        named_query_folder: Path = REPO_ROOT / "athena_queries" / "lineage",
    ) -> None:
        super().__init__(scope, construct_id)
        self.name = name
        self.results_bucket = results_bucket
        self.output_location = f"s3://{results_bucket.bucket_name}/athena/"
        self.workgroup = athena.CfnWorkGroup(
            self,
            "WorkGroup",
            name=name,
            description="Lakeline stage A and stage B statements",
            recursive_delete_option=True,
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                enforce_work_group_configuration=True,
                publish_cloud_watch_metrics_enabled=True,
                engine_version=athena.CfnWorkGroup.EngineVersionProperty(selected_engine_version="AUTO"),
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=self.output_location,
                    encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                        encryption_option="SSE_KMS", kms_key=key.key_arn
                    ),
                ),
            ),
        )
        for sql_file in sorted(named_query_folder.glob("*.sql")):
            query = athena.CfnNamedQuery(
                self,
                f"Query-{sql_file.stem}",
                name=f"lakeline-{sql_file.stem.replace('_', '-')}",
                database=named_query_database,
                query_string=sql_file.read_text(),
                work_group=name,
                description=f"athena_queries/lineage/{sql_file.name}",
            )
            query.node.add_dependency(self.workgroup)

    def grant_get(self, grantee: iam.IGrantable) -> None:
        """``athena:GetWorkGroup``, which running a statement in the workgroup needs, and
        ``athena:StopQueryExecution``: Step Functions stops a query whose task timed out (CDK's task
        grants starting and polling only), so it does not keep running and billing."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["athena:GetWorkGroup", "athena:StopQueryExecution"],
                resources=[Stack.of(self).format_arn(service="athena", resource="workgroup", resource_name=self.name)],
            )
        )

    def statement(
        self,
        scope: Construct,
        construct_id: str,
        sql_path: str,
        *,
        database_path: str | None = None,
        result_selector: dict[str, str] | None = None,
    ) -> tasks.AthenaStartQueryExecution:
        """One statement from the state at ``sql_path``; the workgroup enforces the result location.

        The statements Lakeline writes name their tables in full (``db.table``) and need no query context.
        A statement a user writes (a stage B step) runs in the database at ``database_path``, as the local
        runner runs it (``engine.execute(step.sql, database=step.db)``): its unqualified table names
        resolve in its ``db``, not in Athena's ``default``. ``result_selector``: what of the finished query
        execution becomes the task's output (else it is discarded and the state passes its input on)."""
        context = (
            tasks.QueryExecutionContext(database_name=sfn.JsonPath.string_at(database_path))
            if database_path is not None
            else None
        )
        task = tasks.AthenaStartQueryExecution(
            scope,
            construct_id,
            query_string=sfn.JsonPath.string_at(sql_path),
            integration_pattern=sfn.IntegrationPattern.RUN_JOB,
            query_execution_context=context,
            work_group=self.name,
            # Naming the (workgroup-enforced) result location scopes the task's generated S3 grants to the
            # results bucket; without it CDK grants s3:GetObject/PutObject/CreateBucket on every resource.
            result_configuration=tasks.ResultConfiguration(
                output_location=s3.Location(bucket_name=self.results_bucket.bucket_name, object_key="athena")
            ),
            result_selector=result_selector,
            # No ResultPath is "$": the selected result is the state's output (the interpreter of the
            # rehearsal, aws-local-stepfunctions 3.0.0, mishandles an explicit "$").
            result_path=None if result_selector else sfn.JsonPath.DISCARD,
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

    def statements(
        self, scope: Construct, construct_id: str, items_path: str, on_failure: sfn.IChainable, step: FailedStep
    ) -> sfn.Map:
        """Each statement of the list at ``items_path``, in order; on failure mark ``step`` and go on."""
        statement = self.statement(scope, f"{construct_id}Statement", "$.statement")
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
            failure_marker(scope, f"{construct_id}Failed", step).next(on_failure), result_path="$.error"
        )
        return statements
