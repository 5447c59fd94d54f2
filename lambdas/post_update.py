"""The clients of both stages' post-update functions (``stage_end.runtime.PostUpdateRuntime``): the
partition commits' run end, onward routing to queue B, the lineage writer and the OpenLineage step
events, built from one environment."""

from __future__ import annotations

import os

from lakeline.aws.clients import AwsClients
from lakeline.catalog_locations import GlueLocations
from lakeline.catalog_versions import GlueTableVersions
from lakeline.engines.athena import AthenaEngine
from lakeline.lineage.records.writer import LineageWriter
from lakeline.storage import SchemeObjectStore
from lambdas.environments import PostUpdateEnvironment
from lambdas.run_end import leased_run_end
from stage_b.onward import OnwardRouting
from stage_end.runtime import PostUpdateRuntime
from stage_lineage.steps import StepEvents


def post_update_runtime(environment: PostUpdateEnvironment, stage: str, stage_queue_url: str) -> PostUpdateRuntime:
    """The clients and services of a post-update function of ``stage`` (``a`` or ``b``); ``stage_queue_url`` is
    the stage's own queue, where a follow-up run is queued."""
    aws = AwsClients()
    store = SchemeObjectStore(aws.s3, GlueLocations(aws.glue))
    return PostUpdateRuntime(
        store,
        leased_run_end(aws, environment, store, stage, stage_queue_url),
        OnwardRouting.from_environment(environment, aws.dynamodb, aws.sqs),
        LineageWriter(aws.sqs, environment.lineage_queue_url),
        StepEvents.in_lambda(os.environ, s3=aws.s3, catalog=AthenaEngine(aws.athena, glue=aws.glue)),
        GlueTableVersions(aws.glue),
    )
