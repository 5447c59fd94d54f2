"""What both stages' failure functions are made of (their handlers differ in what a run took and where
it is parked): the run's end after a failure, the objects it wrote, the DLQ client, the FAIL events and
the lineage writer, built from one environment."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from lakeline.aws.clients import AwsClients
from lakeline.catalog_locations import GlueLocations
from lakeline.commits import PartitionCommits
from lakeline.engines.athena import AthenaEngine
from lakeline.lineage.records.writer import LineageWriter
from lakeline.partitions import LeasedRunEnd
from lakeline.storage import SchemeObjectStore
from lambdas.environments import FailureEnvironment
from stage_lineage.steps import StepEvents

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

EnvironmentT = TypeVar("EnvironmentT", bound=FailureEnvironment)


@dataclass(frozen=True)
class FailureRuntime(Generic[EnvironmentT]):
    environment: EnvironmentT
    aws: AwsClients
    store: SchemeObjectStore
    runs: LeasedRunEnd
    sqs: SQSClient
    events: StepEvents
    """The failed run's OpenLineage events; their column lineage is read from the Glue catalog."""
    lineage: LineageWriter


def failure_runtime(environment: EnvironmentT, stage_queue_url: str) -> FailureRuntime[EnvironmentT]:
    """The clients and services of a failure function; ``stage_queue_url`` is the stage's own queue,
    where a follow-up run for what arrived meanwhile is queued."""
    aws = AwsClients()
    store = SchemeObjectStore(aws.s3, GlueLocations(aws.glue))
    commits = PartitionCommits(aws.dynamodb, environment.pipeline_state_table)
    return FailureRuntime(
        environment,
        aws,
        store,
        LeasedRunEnd(commits, store, aws.sqs, stage_queue_url, environment.superseded_grace_seconds),
        aws.sqs,
        StepEvents.in_lambda(os.environ, s3=aws.s3, catalog=AthenaEngine(aws.athena, glue=aws.glue)),
        LineageWriter(aws.sqs, environment.lineage_queue_url),
    )
