"""The AWS Glue for Spark job of the ``spark`` engine: ``lakeline/glue_jobs/stage_job.py`` with Lakeline's
library, run against the Glue Data Catalog, with its role and its security configuration."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_assets as assets
from constructs import Construct
from packaging.utils import canonicalize_name

from stacks.config import LakelineConfig
from stacks.constructs.bundling import CODE_EXCLUDES, REPO_ROOT
from stacks.constructs.grants import PipelineGrants
from stacks.constructs.workflow import SQL_TIMEOUT
from stacks.nag import acknowledge
from stacks.storage_refs import StorageImports

SPARK_DISTRIBUTIONS = (
    "sqlglot",
    "pydantic",
    "pydantic_core",
    "annotated-types",
    "typing-inspection",
    "typing_extensions",
    "python-dateutil",
)
"""What the job's library imports beyond what Glue 5.0 provides, with what pydantic needs at its versions."""


def pinned_modules(constraints: Path) -> str:
    """``--additional-python-modules``: each of ``SPARK_DISTRIBUTIONS`` at the version the project is tested with
    (``constraints.txt``), so a job start installs what the tests ran, not whatever is newest that day (#40)."""
    pins: dict[str, str] = {}
    for line in constraints.read_text().splitlines():
        name, _, version = line.split("#", 1)[0].strip().partition("==")
        if version:
            pins[canonicalize_name(name)] = version.strip()
    missing = [name for name in SPARK_DISTRIBUTIONS if canonicalize_name(name) not in pins]
    if missing:
        raise ValueError(f"{constraints} pins no version of {', '.join(missing)}, which the Spark job installs")
    return ",".join(f"{name}=={pins[canonicalize_name(name)]}" for name in SPARK_DISTRIBUTIONS)


SPARK_MODULES = pinned_modules(REPO_ROOT / "constraints.txt")


class SparkJob:
    """The job and what it is made of, created directly in ``scope`` (ids ``SparkJob...``) rather than in
    a construct of its own: the deployed resources keep the logical ids they had in ``StatementRunner``."""

    def __init__(
        self, scope: Construct, *, config: LakelineConfig, storage: StorageImports, grants: PipelineGrants
    ) -> None:
        script = assets.Asset(scope, "SparkJobScript", path=str(REPO_ROOT / "lakeline" / "glue_jobs" / "stage_job.py"))
        library = assets.Asset(
            scope,
            "SparkJobLibrary",
            path=str(REPO_ROOT),
            exclude=[pattern for pattern in CODE_EXCLUDES if "lambdas" not in pattern],
        )
        role = iam.Role(
            scope,
            "SparkJobRole",
            assumed_by=iam.ServicePrincipal("glue.amazonaws.com"),
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AWSGlueServiceRole")],
        )
        script.grant_read(role)
        library.grant_read(role)
        grants.grant_plan(role)
        storage.key.grant_encrypt_decrypt(role)
        # The security configuration below encrypts the job's CloudWatch logs with the data key: Glue
        # associates the key with the job's log groups as this role.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:AssociateKmsKey"],
                resources=[
                    Stack.of(scope).format_arn(
                        service="logs",
                        resource="log-group",
                        resource_name="/aws-glue/*",
                        arn_format=ArnFormat.COLON_RESOURCE_NAME,
                    )
                ],
            )
        )
        security = glue.CfnSecurityConfiguration(
            scope,
            "SparkJobSecurity",
            name=f"lakeline-spark-{config.environment}",
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
        self.role = role
        # The job's continuous logs go to a group of ours rather than one Glue creates on first run, so they expire
        # (the app's log_retention_days) and are encrypted with the data key from the start (#40). Named under
        # /aws-glue/, where AWSGlueServiceRole and the key association above allow the job to write.
        self.log_group = logs.LogGroup(
            scope,
            "SparkJobLogs",
            log_group_name=f"/aws-glue/jobs/lakeline-{config.environment}",
            encryption_key=storage.key,
        )
        self.job = glue.CfnJob(
            scope,
            "SparkJob",
            role=role.role_arn,
            glue_version=config.glue_version,
            worker_type="G.1X",
            number_of_workers=config.glue_workers,
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
                "--continuous-log-logGroup": self.log_group.log_group_name,
                "--job-language": "python",
            },
            timeout=int(SQL_TIMEOUT.to_minutes()),
        )

    @property
    def name(self) -> str:
        return self.job.ref
