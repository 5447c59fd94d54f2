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

from lakeline.run_order import FailedStep
from stacks.constructs.bundling import REPO_ROOT
from stacks.constructs.workflow import SQL_TIMEOUT, add_throttling_retry, failure_marker


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
        scan_cutoff_bytes: int | None = None,
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
                bytes_scanned_cutoff_per_query=scan_cutoff_bytes,
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
        index_path: str | None = None,
    ) -> tasks.AthenaStartQueryExecution:
        """One statement from the state at ``sql_path``; the workgroup enforces the result location.

        The statements Lakeline writes name their tables in full (``db.table``) and need no query context.
        A statement a user writes (a stage B step) runs in the database at ``database_path``, as the local
        runner runs it (``engine.execute(step.sql, database=step.db)``): its unqualified table names
        resolve in its ``db``, not in Athena's ``default``. ``result_selector``: what of the finished query
        execution becomes the task's output (else it is discarded and the state passes its input on).
        ``index_path``: where a Map iteration's index is (``$$.Map.Item.Index`` by its ItemSelector), when the task
        runs in one (``client_request_token``)."""
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
            client_request_token=client_request_token(construct_id, index_path),
            # Naming the (workgroup-enforced) result location scopes the task's generated S3 writes to the results
            # prefix; its reads CDK grants on every resource whatever is named here, which PipelineGrants narrows
            # to Lakeline's buckets (grants.ConfineAthenaTaskGrants).
            result_configuration=tasks.ResultConfiguration(
                output_location=s3.Location(bucket_name=self.results_bucket.bucket_name, object_key="athena")
            ),
            result_selector=result_selector,
            # No ResultPath is "$": the selected result is the state's output (the interpreter of the
            # rehearsal, aws-local-stepfunctions 3.0.0, mishandles an explicit "$").
            result_path=None if result_selector else sfn.JsonPath.DISCARD,
            task_timeout=sfn.Timeout.duration(SQL_TIMEOUT),
        )
        add_throttling_retry(task)
        task.add_retry(
            errors=["Athena.InternalServerException", "Athena.AmazonAthenaException"],
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
        statement = self.statement(scope, f"{construct_id}Statement", "$.statement", index_path="$.index")
        statements = sfn.Map(
            scope,
            construct_id,
            items_path=items_path,
            max_concurrency=1,
            item_selector={"statement.$": "$$.Map.Item.Value", "index.$": "$$.Map.Item.Index"},
            result_path=sfn.JsonPath.DISCARD,
        )
        statements.item_processor(statement)
        statements.add_catch(
            failure_marker(scope, f"{construct_id}Failed", step).next(on_failure), result_path="$.error"
        )
        return statements


def client_request_token(state: str, index_path: str | None) -> str:
    """The ``ClientRequestToken`` of the task ``state``: the SHA-256 (64 hex characters; Athena takes 32 to 128) of
    the execution's id, the state's name and, in a Map, the iteration's index. A start the task repeats (its Retry
    after an API error, when the query may have been created all the same) gets the query already started instead
    of a second one running the same write. Its Retry takes no error a query that ran ends with (a failed query is
    ``States.TaskFailed``), and no Athena task is on a loop, so the token never brings back an ended query
    (``tests/infrastructure/test_query_tokens.py``). Not ``$$.State.RetryCount``: a new token per attempt would start
    the query again after an error that left it created."""
    template = f"{{}}/{state}/{{}}" if index_path else f"{{}}/{state}"
    values = [sfn.JsonPath.execution_id, *([sfn.JsonPath.string_at(index_path)] if index_path else [])]
    return sfn.JsonPath.hash(sfn.JsonPath.format(template, *values), "SHA-256")
