"""Where a stage's SQL runs: the Athena workgroup (every deployment has one: the catalog swaps run there
whatever the engine), the grants on the catalog and the data, and the deployment's ``EngineSteps`` strategy,
with the Glue for Spark job when the engine is ``spark``."""

from __future__ import annotations

from constructs import Construct

from stacks.config import LakelineConfig
from stacks.constructs.athena import AthenaWorkgroup
from stacks.constructs.engines import AthenaEngineSteps, EngineSteps, SparkEngineSteps
from stacks.constructs.glue_job import SparkJob
from stacks.constructs.grants import PipelineGrants
from stacks.storage_refs import StorageImports


class StatementRunner(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: LakelineConfig, storage: StorageImports) -> None:
        super().__init__(scope, construct_id)
        self.workgroup = AthenaWorkgroup(
            self,
            "Athena",
            name=f"lakeline-{config.environment}",
            results_bucket=storage.bucket("AthenaResults"),
            key=storage.key,
            scan_cutoff_bytes=config.athena_scan_cutoff_gb * 1000**3 or None,
            named_query_database=storage.lineage_database,
        )
        self.grants = PipelineGrants(self, environment=config.environment, storage=storage, workgroup=self.workgroup)
        self.spark_job: SparkJob | None = None
        self.engine: EngineSteps
        if config.engine == "spark":
            self.spark_job = SparkJob(self, config=config, storage=storage, grants=self.grants)
            self.engine = SparkEngineSteps(self.spark_job)
        else:
            self.engine = AthenaEngineSteps(self.workgroup)
