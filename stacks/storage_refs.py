"""The storage stack's contract with the stacks that use it: explicit, named exports.

Explicit export names (instead of CDK's automatic cross-stack references) keep the contract readable
and stable: the pipeline stack can be changed or redeployed without CloudFormation refusing to update
an export that is in use, and policy resources get predictable names (see ``stacks/nag.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import CfnOutput, Fn, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

BUCKETS = ("Raw", "Stage", "Analytics", "Artifacts", "AthenaResults", "LineageArchive")
TABLES = ("Dependencies", "DependenciesByTable", "PipelineState", "Lineage")


def export_name(stack_name: str, name: str) -> str:
    return f"{stack_name}-{name}"


def export(stack: Stack, name: str, value: str) -> None:
    CfnOutput(stack, f"Export{name}", value=value, export_name=export_name(stack.stack_name, name))


def imported(stack_name: str, name: str) -> str:
    return Fn.import_value(export_name(stack_name, name))


@dataclass
class ImportedTable:
    table: dynamodb.ITable
    name: str


class StorageImports(Construct):
    """The storage stack's buckets, key and tables, imported by export name into another stack."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        storage_stack_name: str,
        table_indexes: dict[str, tuple[list[str], list[str]]],
        lineage_database: str,
        lineage_archive_table: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.stack_name = storage_stack_name
        self.key = kms.Key.from_key_arn(self, "DataKey", imported(storage_stack_name, "DataKeyArn"))
        self.buckets: dict[str, s3.IBucket] = {
            name: s3.Bucket.from_bucket_attributes(
                self,
                f"{name}Bucket",
                bucket_arn=imported(storage_stack_name, f"{name}BucketArn"),
                bucket_name=imported(storage_stack_name, f"{name}BucketName"),
                encryption_key=self.key,
            )
            for name in BUCKETS
        }
        self.tables: dict[str, dynamodb.ITable] = {}
        for name in TABLES:
            global_indexes, local_indexes = table_indexes.get(name, ([], []))
            self.tables[name] = dynamodb.Table.from_table_attributes(
                self,
                f"{name}Table",
                table_arn=imported(storage_stack_name, f"{name}TableArn"),
                table_stream_arn=imported(storage_stack_name, f"{name}TableStreamArn")
                if name in ("Dependencies", "Lineage")
                else None,
                encryption_key=self.key,
                global_indexes=global_indexes or None,
                local_indexes=local_indexes or None,
            )
        self.lineage_database = lineage_database
        self.lineage_archive_table = lineage_archive_table

    def bucket(self, name: str) -> s3.IBucket:
        return self.buckets[name]

    def table(self, name: str) -> dynamodb.ITable:
        return self.tables[name]

    def table_name(self, name: str) -> str:
        return imported(self.stack_name, f"{name}TableName")
