"""What the pipeline's roles may do in the catalog and the stage data: reading and changing the Glue
Data Catalog of this environment's databases, and everything running a stage's statements touches."""

from __future__ import annotations

import json
from typing import Any

import jsii
from aws_cdk import AspectPriority, Aspects, IAspect, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct, IConstruct

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
VERSION_PRUNE_ACTIONS = ["glue:GetTable", "glue:GetTableVersions", "glue:DeleteTableVersion"]
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


PLAN_BUCKETS = ("Raw", "Stage", "Analytics", "AthenaResults")
"""The buckets a stage's statements read (``grant_plan``): the only ones its Athena tasks may touch."""
ATHENA_TASK_READS = frozenset({"s3:CreateBucket", "s3:ListBucket", "s3:GetBucketLocation", "s3:GetObject"})
"""What CDK's ``athena:startQueryExecution.sync`` task always grants on ``"*"`` (whatever result location it names)."""


@jsii.implements(IAspect)
class ConfineAthenaTaskGrants:
    """Least privilege where CDK's Athena task grants on every resource (#40). Athena reads and writes S3 and the
    catalog as the state machine's role, so the task's ``s3:GetObject``/``ListBucket`` on ``"*"`` let a stage B step
    (SQL from a team's dependency item: ``CREATE EXTERNAL TABLE ... LOCATION 's3://another-bucket/'`` and an insert
    from it) copy data out of any bucket its own policy does not guard. Here that statement is narrowed to
    ``buckets`` (bucket and objects), and the catalog ARNs CDK builds from a JSON path (``database/$.db``: name no
    resource, grant nothing) are dropped. Applied to the machine's policy before the app's other aspects read it."""

    def __init__(self, buckets: list[str]) -> None:
        self.buckets = buckets

    def visit(self, node: IConstruct) -> None:
        if not isinstance(node, iam.CfnPolicy):
            return
        stack = Stack.of(node)
        document = stack.resolve(node.policy_document)
        resources = stack.resolve([resource for bucket in self.buckets for resource in (bucket, f"{bucket}/*")])
        statements: list[dict[str, Any]] = []
        for statement in document.get("Statement", []):
            actions = _as_list(statement.get("Action"))
            reads = [action for action in actions if action in ATHENA_TASK_READS]
            if statement.get("Effect") != "Allow":
                statements.append(statement)
            elif statement.get("Resource") == "*" and reads:
                # With @aws-cdk/aws-iam:minimizePolicies the reads share one statement with other actions on "*"
                # (X-Ray, log delivery, Lake Formation, which have no resource of their own): split them out.
                others = [action for action in actions if action not in ATHENA_TASK_READS]
                if others:
                    statements.append({**statement, "Action": others})
                statements.append({"Action": reads, "Effect": "Allow", "Resource": resources})
            elif actions and all(action.startswith("glue:") for action in actions):
                kept = [r for r in _as_list(statement.get("Resource")) if "/$." not in json.dumps(r)]
                statements.append({**statement, "Resource": kept or statement["Resource"]})
            else:
                statements.append(statement)
        node.policy_document = {**document, "Statement": statements}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


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
        self._stack, self._suffix = stack, suffix
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

    def grant_drop_quality_tables(self, grantee: iam.IGrantable) -> None:
        """A failure function drops the failed run's quality table (``stage_end.runtime.drop_quality_table``): only
        the run temp tables' names (``lakeline_tmp_*``), never a published table."""
        catalog, database, _ = self.catalog_resources
        temp_tables = self._stack.format_arn(
            service="glue", resource="table", resource_name=f"*{self._suffix}/lakeline_tmp_*"
        )
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=["glue:DeleteTable"], resources=[catalog, database, temp_tables])
        )

    def grant_prune_versions(self, grantee: iam.IGrantable) -> None:
        """A post-update deletes the old Glue versions of an unpartitioned table it published
        (``lakeline.catalog_versions``)."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=VERSION_PRUNE_ACTIONS, resources=self.catalog_resources)
        )

    def grant_add_columns(self, grantee: iam.IGrantable) -> None:
        """``schema_evolution: add-columns``: the stage A router adds a file's new columns to its tables."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=["glue:UpdateTable"], resources=self.catalog_resources)
        )

    def confine_athena_tasks(self, machine: sfn.StateMachine) -> None:
        """``machine``'s Athena tasks may read only Lakeline's buckets (``ConfineAthenaTaskGrants``)."""
        buckets = [self.storage.bucket(name).bucket_arn for name in PLAN_BUCKETS]
        Aspects.of(machine).add(ConfineAthenaTaskGrants(buckets), priority=AspectPriority.MUTATING)

    def grant_plan(self, role: iam.IRole) -> None:
        """What running stage statements needs: the catalog, the raw data, the stage data, the results."""
        storage = self.storage
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=[*CATALOG_ACTIONS, *CATALOG_WRITE_ACTIONS], resources=self.catalog_resources)
        )
        raw, *written = PLAN_BUCKETS
        storage.bucket(raw).grant_read(role)
        for bucket in written:
            storage.bucket(bucket).grant_read_write(role)
        storage.key.grant_encrypt_decrypt(role)
        self.workgroup.grant_get(role)
