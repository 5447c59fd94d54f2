"""Uploads ``athena_queries/`` to ``artifacts/athena_queries/`` in the artifacts bucket, where stage B
reads the ``sql_file`` of dependency steps."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as deployment
from constructs import Construct

from stacks.constructs.bundling import REPO_ROOT
from stacks.constructs.functions import BASIC_EXECUTION_ROLE
from stacks.nag import acknowledge
from stage_b.artifacts import ARTIFACTS_PREFIX


class QueryArtifacts(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, bucket: s3.IBucket) -> None:
        super().__init__(scope, construct_id)
        self.deployment = deployment.BucketDeployment(
            self,
            "Upload",
            sources=[deployment.Source.asset(str(REPO_ROOT / "athena_queries"))],
            destination_bucket=bucket,
            destination_key_prefix=f"{ARTIFACTS_PREFIX}/",
            prune=True,
            retain_on_delete=False,
            server_side_encryption=deployment.ServerSideEncryption.AWS_KMS,
            server_side_encryption_aws_kms_key_id=bucket.encryption_key.key_id if bucket.encryption_key else None,
        )
        # BucketDeployment's handler is a CDK-managed singleton function at the stack's root.
        for child in Stack.of(self).node.children:
            if child.node.id.startswith("Custom::CDKBucketDeployment"):
                acknowledge(
                    child,
                    {
                        BASIC_EXECUTION_ROLE: "CDK's BucketDeployment handler only writes its logs with this policy.",
                        "AwsSolutions-L1": "CDK manages the BucketDeployment handler's runtime.",
                    },
                )
