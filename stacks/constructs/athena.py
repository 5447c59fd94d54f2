"""The Athena workgroup every statement runs in, with its result location and encryption enforced,
and named queries for the SQL users run by hand (the lineage archive queries)."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import aws_athena as athena
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.constructs.functions import REPO_ROOT


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
