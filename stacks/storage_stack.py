"""Everything that holds data: buckets, the KMS key, DynamoDB tables and the Glue catalog.

Stateful resources live here, apart from the compute that uses them, so the pipeline can be torn down
and redeployed without touching data. The stack has termination protection and every resource is
retained when the stack is deleted. Logical ids of these resources are pinned by tests: renaming one
would replace a table or a bucket.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from lakeline.dependencies import tables as dependency_tables
from lakeline.lineage.openlineage import table as events_table
from lakeline.lineage.openlineage.archive import EVENTS_FOLDER
from lakeline.lineage.records.archive import ARCHIVE_PREFIX
from lakeline.lineage.records.archive_table import DEFAULT_TABLE, glue_table_input
from lakeline.lineage.records.table import LINEAGE_TABLE, KeyAttribute
from stacks.config import LakelineConfig
from stacks.constructs.functions import BASIC_EXECUTION_ROLE
from stacks.nag import acknowledge
from stacks.storage_refs import export


def _attribute(key: KeyAttribute) -> dynamodb.Attribute:
    kind = dynamodb.AttributeType.NUMBER if key.type == "N" else dynamodb.AttributeType.STRING
    return dynamodb.Attribute(name=key.name, type=kind)


class StorageStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: LakelineConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, termination_protection=True, **kwargs)
        self.config = config
        self.key = kms.Key(
            self,
            "DataKey",
            description="Lakeline data: buckets, tables, queues and logs",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        # Services that write into Lakeline's encrypted queues and topics need the key: EventBridge
        # (S3 arrivals into queue A, schedules) and CloudWatch alarms (the alarm topic).
        for service in ("events.amazonaws.com", "cloudwatch.amazonaws.com"):
            self.key.add_to_resource_policy(
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal(service)],
                    actions=["kms:GenerateDataKey", "kms:Decrypt"],
                    resources=["*"],
                    conditions={"StringEquals": {"aws:SourceAccount": self.account}},
                )
            )
        # CloudWatch Logs encrypts the Spark engine's Glue job logs with this key (the job's security
        # configuration): the logs service may use a key only where its policy names it, per log group.
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal(f"logs.{self.region}.amazonaws.com")],
                actions=[
                    "kms:Encrypt",
                    "kms:Decrypt",
                    "kms:ReEncryptFrom",
                    "kms:ReEncryptTo",
                    "kms:GenerateDataKey",
                    "kms:GenerateDataKeyWithoutPlaintext",
                    "kms:DescribeKey",
                ],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": (
                            f"arn:{self.partition}:logs:{self.region}:{self.account}:log-group:*"
                        )
                    }
                },
            )
        )
        self.access_logs = s3.Bucket(
            self,
            "AccessLogsBucket",
            # Server access logs cannot be delivered to a KMS-encrypted bucket.
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-logs",
                    expiration=Duration.days(365),
                    abort_incomplete_multipart_upload_after=Duration.days(config.incomplete_upload_days),
                )
            ],
            removal_policy=RemovalPolicy.RETAIN,
        )
        acknowledge(
            self.access_logs,
            {"AwsSolutions-S1": "This is the access log bucket; logging it to itself would loop."},
        )
        self.raw_bucket = self._bucket("RawBucket", event_bridge=True)
        # EventBridge notifications are switched on by a CDK-provided custom resource.
        for child in self.node.children:
            if child.node.id.startswith("BucketNotificationsHandler"):
                acknowledge(
                    child,
                    {
                        BASIC_EXECUTION_ROLE: "CDK's own bucket-notification custom resource, which only "
                        "writes its logs with this policy.",
                    },
                )
        # The stages rewrite these: each commit's superseded version becomes noncurrent when the sweep deletes it.
        self.stage_bucket = self._bucket("StageBucket", derived=True)
        self.analytics_bucket = self._bucket("AnalyticsBucket", derived=True)
        self.artifacts_bucket = self._bucket("ArtifactsBucket")
        self.athena_results_bucket = self._bucket(
            "AthenaResultsBucket", derived=True, expire_days=config.athena_results_days
        )
        self.lineage_archive_bucket = self._bucket("LineageArchiveBucket")

        self.dependencies_table = self._table(
            "DependenciesTable",
            partition_key=_attribute(KeyAttribute(dependency_tables.DEPENDENCIES_KEY)),
            stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        )
        self.dependencies_by_table = self._table(
            "DependenciesByTable",
            partition_key=_attribute(KeyAttribute(dependency_tables.BY_TABLE_PARTITION_KEY)),
            sort_key=_attribute(KeyAttribute(dependency_tables.BY_TABLE_SORT_KEY)),
        )
        self.dependencies_by_table.add_global_secondary_index(
            index_name=dependency_tables.BY_TARGET_INDEX,
            partition_key=_attribute(KeyAttribute(dependency_tables.BY_TABLE_SORT_KEY)),
            sort_key=_attribute(KeyAttribute(dependency_tables.BY_TABLE_PARTITION_KEY)),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
        )
        self.pipeline_state_table = self._table(
            "PipelineStateTable",
            partition_key=_attribute(KeyAttribute(dependency_tables.PIPELINE_STATE_KEY)),
        )
        spec = LINEAGE_TABLE
        self.lineage_table = self._table(
            "LineageTable",
            partition_key=_attribute(spec.partition_key),
            sort_key=_attribute(spec.sort_key),
            stream=dynamodb.StreamViewType(spec.stream_view_type),
            ttl_attribute=spec.ttl_attribute,
        )
        for index in spec.global_indexes:
            self.lineage_table.add_global_secondary_index(
                index_name=index.name,
                partition_key=_attribute(index.partition_key),
                sort_key=_attribute(index.sort_key) if index.sort_key else None,
                projection_type=dynamodb.ProjectionType(index.projection),
            )
        for index in spec.local_indexes:
            assert index.sort_key is not None, "a local index needs a sort key"
            self.lineage_table.add_local_secondary_index(
                index_name=index.name,
                sort_key=_attribute(index.sort_key),
                projection_type=dynamodb.ProjectionType(index.projection),
            )

        self.lineage_database_name = f"lakeline_lineage_{config.environment}"
        self.lineage_database = glue.CfnDatabase(
            self,
            "LineageDatabase",
            catalog_id=self.account,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=self.lineage_database_name, description="Lakeline's archived lineage"
            ),
        )
        self.lineage_database.apply_removal_policy(RemovalPolicy.RETAIN)
        self.lineage_archive_table_name = DEFAULT_TABLE
        # The whole TableInput comes from the one definition the loader and the tests use too.
        self._lineage_glue_table(
            "LineageArchiveTable",
            glue_table_input(
                self.lineage_archive_table_name, f"s3://{self.lineage_archive_bucket.bucket_name}/{ARCHIVE_PREFIX}"
            ),
        )
        # The OpenLineage events the stage functions keep in the same bucket, under openlineage/.
        self.openlineage_events_table_name = events_table.DEFAULT_EVENTS_TABLE
        self._lineage_glue_table(
            "OpenLineageEventsTable",
            events_table.events_glue_table_input(
                f"s3://{self.lineage_archive_bucket.bucket_name}/{EVENTS_FOLDER}",
                table=self.openlineage_events_table_name,
            ),
        )
        self._export_contract()

    def _lineage_glue_table(self, construct_id: str, table_input: dict[str, Any]) -> None:
        """A table of the lineage database, kept when the stack goes, whose whole TableInput is ``table_input``."""
        table = glue.CfnTable(
            self,
            construct_id,
            catalog_id=self.account,
            database_name=self.lineage_database_name,
            table_input=glue.CfnTable.TableInputProperty(name=table_input["Name"]),
        )
        table.add_property_override("TableInput", table_input)
        table.node.add_dependency(self.lineage_database)
        table.apply_removal_policy(RemovalPolicy.RETAIN)

    def _export_contract(self) -> None:
        """Named exports the pipeline stack imports (see ``stacks/storage_refs.py``)."""
        export(self, "DataKeyArn", self.key.key_arn)
        buckets = {
            "Raw": self.raw_bucket,
            "Stage": self.stage_bucket,
            "Analytics": self.analytics_bucket,
            "Artifacts": self.artifacts_bucket,
            "AthenaResults": self.athena_results_bucket,
            "LineageArchive": self.lineage_archive_bucket,
        }
        for name, bucket in buckets.items():
            export(self, f"{name}BucketArn", bucket.bucket_arn)
            export(self, f"{name}BucketName", bucket.bucket_name)
        for name, table in self.tables.items():
            export(self, f"{name}TableArn", table.table_arn)
            export(self, f"{name}TableName", table.table_name)
            if table.table_stream_arn:
                export(self, f"{name}TableStreamArn", table.table_stream_arn)

    @property
    def tables(self) -> dict[str, dynamodb.Table]:
        return {
            "Dependencies": self.dependencies_table,
            "DependenciesByTable": self.dependencies_by_table,
            "PipelineState": self.pipeline_state_table,
            "Lineage": self.lineage_table,
        }

    @staticmethod
    def table_indexes() -> dict[str, tuple[list[str], list[str]]]:
        """Index names per table (global, local), so imported tables grant on their indexes too."""
        return {
            "DependenciesByTable": ([dependency_tables.BY_TARGET_INDEX], []),
            "Lineage": (
                [index.name for index in LINEAGE_TABLE.global_indexes],
                [index.name for index in LINEAGE_TABLE.local_indexes],
            ),
        }

    def _bucket(
        self, construct_id: str, *, event_bridge: bool = False, derived: bool = False, expire_days: int | None = None
    ) -> s3.Bucket:
        """A versioned, encrypted data bucket. Its lifecycle keeps what it costs to what it holds (#40): noncurrent
        versions expire (a few days for ``derived`` buckets, which every commit rewrites), delete markers left with
        no version behind them go, unfinished uploads are aborted; ``expire_days`` expires current objects too."""
        config = self.config
        keep_noncurrent = config.derived_noncurrent_days if derived else config.noncurrent_days
        return s3.Bucket(
            self,
            construct_id,
            encryption=s3.BucketEncryption.KMS,
            encryption_key=self.key,
            bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            event_bridge_enabled=event_bridge,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix=f"{construct_id}/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="old-versions",
                    noncurrent_version_expiration=Duration.days(keep_noncurrent),
                    expired_object_delete_marker=True,
                    abort_incomplete_multipart_upload_after=Duration.days(config.incomplete_upload_days),
                ),
                # S3 takes no delete-marker cleanup in a rule that expires current objects: a rule of its own.
                *([s3.LifecycleRule(id="expire", expiration=Duration.days(expire_days))] if expire_days else []),
            ],
            removal_policy=RemovalPolicy.RETAIN,
        )

    def _table(
        self,
        construct_id: str,
        *,
        partition_key: dynamodb.Attribute,
        sort_key: dynamodb.Attribute | None = None,
        stream: dynamodb.StreamViewType | None = None,
        ttl_attribute: str | None = None,
    ) -> dynamodb.Table:
        return dynamodb.Table(
            self,
            construct_id,
            partition_key=partition_key,
            sort_key=sort_key,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
            encryption_key=self.key,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            stream=stream,
            time_to_live_attribute=ttl_attribute,
            removal_policy=RemovalPolicy.RETAIN,
        )
