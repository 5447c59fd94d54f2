"""The clients of both stages' post-update functions (``stage_end.runtime.PostUpdateRuntime``): the
partition commits' run end, onward routing to queue B, the lineage writer and the OpenLineage step
events, built from one environment."""

from __future__ import annotations

import os

from lakeline.aws.clients import AwsClients
from lakeline.catalog_locations import GlueLocations
from lakeline.commits import PartitionCommits
from lakeline.engines.athena import AthenaEngine
from lakeline.lineage.records.writer import LineageWriter
from lakeline.partitions import LeasedRunEnd
from lakeline.storage import SchemeObjectStore
from lambdas.environments import PostUpdateEnvironment
from stage_b.onward import OnwardRouting
from stage_end.runtime import PostUpdateRuntime
from stage_lineage.steps import StepEvents


def post_update_runtime(environment: PostUpdateEnvironment, stage_queue_url: str) -> PostUpdateRuntime:
    """The clients and services of a post-update function; ``stage_queue_url`` is the stage's own queue,
    where a follow-up run is queued."""
    aws = AwsClients()
    store = SchemeObjectStore(aws.s3, GlueLocations(aws.glue))
    commits = PartitionCommits(aws.dynamodb, environment.pipeline_state_table)
    return PostUpdateRuntime(
        store,
        LeasedRunEnd(commits, store, aws.sqs, stage_queue_url, environment.superseded_grace_seconds),
        OnwardRouting.from_environment(environment, aws.dynamodb, aws.sqs),
        LineageWriter(aws.sqs, environment.lineage_queue_url),
        StepEvents.in_lambda(os.environ, s3=aws.s3, catalog=AthenaEngine(aws.athena, glue=aws.glue)),
    )
