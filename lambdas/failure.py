"""The clients of both stages' failure functions (``stage_end.runtime.FailureRuntime``): the run's end
after a failure, the objects it wrote, the DLQ client and the stage's DLQ, the FAIL events and the
lineage writer, built from one environment."""

from __future__ import annotations

import os

from lakeline.aws.clients import AwsClients
from lakeline.catalog_locations import GlueLocations, GlueTables
from lakeline.engines.athena import AthenaEngine
from lakeline.lineage.records.writer import LineageWriter
from lakeline.storage import SchemeObjectStore
from lambdas.environments import FailureEnvironment
from lambdas.run_end import leased_run_end
from stage_end.runtime import FailureRuntime
from stage_lineage.steps import StepEvents


def failure_runtime(
    environment: FailureEnvironment, stage: str, stage_queue_url: str, dead_letter_queue_url: str
) -> FailureRuntime:
    """The clients and services of a failure function of ``stage`` (``a`` or ``b``); ``stage_queue_url`` is the
    stage's own queue,
    where a follow-up run for what arrived meanwhile is queued, ``dead_letter_queue_url`` its DLQ."""
    aws = AwsClients()
    store = SchemeObjectStore(aws.s3, GlueLocations(aws.glue))
    return FailureRuntime(
        store,
        leased_run_end(aws, environment, store, stage, stage_queue_url),
        aws.sqs,
        dead_letter_queue_url,
        StepEvents.in_lambda(os.environ, s3=aws.s3, catalog=AthenaEngine(aws.athena, glue=aws.glue)),
        LineageWriter(aws.sqs, environment.lineage_queue_url),
        GlueTables(aws.glue),
    )
