"""What the stage functions that emit OpenLineage events need: their settings and their grants.

Each function in ``OPENLINEAGE_HANDLERS`` (the stages' post-update and failure functions) gets the OpenLineage
layer from ``LakelineFunction`` and, from ``StageEvents.attach``:

- ``OPENLINEAGE_EVENTS_LOCATION``: ``s3://<lineage archive bucket>/openlineage/``, where every event is kept
  (the Glue table ``openlineage_events`` reads it), with ``s3:PutObject`` on that folder only;
- ``OPENLINEAGE_NAMESPACE`` (``lakeline-<environment>``), ``OPENLINEAGE_DATASET_NAMESPACE`` (Athena's, for the
  region), ``OPENLINEAGE_GLUE_CATALOG`` (``arn:aws:glue:<region>:<account>``: the tables' ``symlinks``) and
  ``PIPELINE_ENGINE`` (``athena`` or ``spark``) with ``PIPELINE_ENGINE_VERSION`` (the Spark of the Glue job's
  Glue version, or Athena's engine version: the functions run neither engine, so cannot ask it);
- the deployment's ``openlineage_environment`` (a transport configured the standard OpenLineage way), and when
  that transport is (or includes) Amazon DataZone, ``datazone:PostLineageEvent`` on each domain it names, in the
  deployment's account (and the transport's region, else the stack's); no DataZone grant otherwise;
- ``glue:GetTable`` on the pipeline's catalog databases and tables, for the schemas behind column lineage.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from lakeline.lineage.openlineage.archive import EVENTS_FOLDER
from lakeline.lineage.openlineage.config import athena_dataset_namespace, environment_transport
from lakeline.lineage.openlineage.datazone import datazone_domains
from stacks.config import (
    OPENLINEAGE_DATASET_NAMESPACE,
    OPENLINEAGE_EVENTS_LOCATION,
    OPENLINEAGE_GLUE_CATALOG,
    OPENLINEAGE_NAMESPACE,
    PIPELINE_ENGINE,
    PIPELINE_ENGINE_VERSION,
    LakelineConfig,
)
from stacks.constructs.functions import OPENLINEAGE_HANDLERS, LakelineFunction
from stacks.constructs.statements import StatementRunner
from stacks.storage_refs import StorageImports

# Describing a table is all column lineage reads (lakeline.engines.athena.AthenaEngine.describe_table).
CATALOG_LINEAGE_ACTIONS = ["glue:GetTable"]
# All the DataZone transport calls (openlineage-python's AmazonDataZoneTransport).
DATAZONE_LINEAGE_ACTIONS = ["datazone:PostLineageEvent"]


def job_namespace(environment: str) -> str:
    return f"lakeline-{environment}"


class StageEvents:
    """The settings and grants shared by the stage functions that emit OpenLineage events."""

    def __init__(
        self, scope: Construct, *, config: LakelineConfig, storage: StorageImports, statements: StatementRunner
    ) -> None:
        self.archive = storage.bucket("LineageArchive")
        self.catalog_resources = statements.grants.catalog_resources
        self.environment: dict[str, str] = {
            **config.openlineage_environment,
            OPENLINEAGE_EVENTS_LOCATION: f"s3://{self.archive.bucket_name}/{EVENTS_FOLDER}",
            OPENLINEAGE_NAMESPACE: job_namespace(config.environment),
            OPENLINEAGE_DATASET_NAMESPACE: athena_dataset_namespace(Stack.of(scope).region),
            OPENLINEAGE_GLUE_CATALOG: f"arn:{Stack.of(scope).partition}:glue:{Stack.of(scope).region}:"
            f"{Stack.of(scope).account}",
            PIPELINE_ENGINE: config.engine,
            PIPELINE_ENGINE_VERSION: config.engine_version,
        }
        stack = Stack.of(scope)
        self.datazone_domains = [
            f"arn:{stack.partition}:datazone:{region or stack.region}:{stack.account}:domain/{domain}"
            for domain, region in datazone_domains(environment_transport(config.openlineage_environment))
        ]

    def attach(self, function: LakelineFunction) -> None:
        if function.handler_package not in OPENLINEAGE_HANDLERS:
            raise ValueError(
                f"{function.handler_package} does not get the OpenLineage layer: add it to OPENLINEAGE_HANDLERS"
            )
        for key, value in self.environment.items():
            function.function.add_environment(key, value)
        self.archive.grant_put(function.function, f"{EVENTS_FOLDER}*")
        function.function.add_to_role_policy(
            iam.PolicyStatement(actions=CATALOG_LINEAGE_ACTIONS, resources=self.catalog_resources)
        )
        if self.datazone_domains:
            function.function.add_to_role_policy(
                iam.PolicyStatement(actions=DATAZONE_LINEAGE_ACTIONS, resources=self.datazone_domains)
            )
