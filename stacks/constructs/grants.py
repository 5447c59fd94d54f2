"""What the pipeline's roles may do in the catalog and the stage data: reading and changing the Glue
Data Catalog of this environment's databases, and everything running a stage's statements touches."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from stacks.constructs.athena import AthenaWorkgroup
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
DELETE_GUARD_ACTIONS = ["glue:GetTable", "glue:GetPartition"]
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


class PipelineGrants:
    """Grants on this environment's catalog (``catalog_resources``), its data buckets and key, and the
    workgroup; the resources are named by ``scope``'s stack."""

    def __init__(
        self, scope: Construct, *, environment: str, storage: StorageImports, workgroup: AthenaWorkgroup
    ) -> None:
        self.storage = storage
        self.workgroup = workgroup
        stack = Stack.of(scope)
        suffix = f"_{environment}"
        # Pipeline databases all end in the environment suffix (<team>_<dataset>[_raw]_<env>).
        self.catalog_resources = [
            stack.format_arn(service="glue", resource="catalog"),
            stack.format_arn(service="glue", resource="database", resource_name=f"*{suffix}"),
            stack.format_arn(service="glue", resource="table", resource_name=f"*{suffix}/*"),
        ]

    def grant_catalog_read(self, grantee: iam.IGrantable) -> None:
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=CATALOG_ACTIONS, resources=self.catalog_resources)
        )

    def grant_delete_guard(self, grantee: iam.IGrantable) -> None:
        """A function that deletes run prefixes first asks the catalog where the table and the partition
        point (``lakeline.catalog_locations``): a prefix the catalog points at is never deleted."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=DELETE_GUARD_ACTIONS, resources=self.catalog_resources)
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
        self.workgroup.grant_get(role)
