"""What both stages' routers are made of (their handlers differ in what a queue message is and how a
run is planned): the environment, the settings it describes, the Glue catalog, the partition commits
and the Step Functions and SQS clients."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from lakeline.aws.clients import AwsClients
from lakeline.commits import PartitionCommits, PartitionFull
from lakeline.commits.slots import NoRunSlot, RunSlots
from lakeline.engines.athena import AthenaEngine
from lakeline.lambda_support import RouterEnvironment
from lakeline.settings import PipelineSettings
from lakeline.storage import SchemeObjectStore

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_stepfunctions import SFNClient

EnvironmentT = TypeVar("EnvironmentT", bound=RouterEnvironment)


@dataclass(frozen=True)
class RouterRuntime(Generic[EnvironmentT]):
    environment: EnvironmentT
    aws: AwsClients
    settings: PipelineSettings
    catalog: AthenaEngine
    commits: PartitionCommits
    sfn: SFNClient
    sqs: SQSClient
    slots: RunSlots  # the stage's runs in flight: a run takes one before its execution starts


def router_runtime(environment: EnvironmentT, stage: str) -> RouterRuntime[EnvironmentT]:
    """The runtime of stage ``stage``'s (``a`` or ``b``) router."""
    aws = AwsClients()
    return RouterRuntime(
        environment,
        aws,
        environment.pipeline_settings(),
        AthenaEngine(aws.athena, glue=aws.glue),
        # A plan reads what the partition's published version holds (lakeline.commits.applied).
        PartitionCommits(aws.dynamodb, environment.pipeline_state_table, lists=SchemeObjectStore(aws.s3)),
        aws.stepfunctions,
        aws.sqs,
        RunSlots(aws.dynamodb, environment.pipeline_state_table, stage, limit=environment.runs_in_flight),
    )


PARTITION_FULL_DELAY_SECONDS = 120
"""How long an arrival or message waits in its queue when as many wait in its partition's item as the item may
hold (``PartitionFull``): about a run's time, after which its run's follow-up has taken a batch of them."""
NO_SLOT_DELAY_SECONDS = 60
"""How long a run's message waits in its queue when as many of its stage's runs are in flight as it allows
(``NoRunSlot``): it keeps its partition's lease meanwhile, so what arrives for the partition waits behind it."""


def send_back(sqs: SQSClient, queue_url: str, body: str, *, delay_seconds: int = 0) -> None:
    """Send a record's body back to its queue as a new message (this one is then let go): its receive count stays
    as it was, so waiting never parks it in the DLQ, and a body sent twice (a crash between) is recorded once."""
    sqs.send_message(QueueUrl=queue_url, MessageBody=body, DelaySeconds=delay_seconds)


def send_back_to_wait(sqs: SQSClient, queue_url: str, body: str, reason: PartitionFull | NoRunSlot) -> None:
    """Send a record back to its queue (``send_back``) for as long as ``reason`` calls for."""
    delay = NO_SLOT_DELAY_SECONDS if isinstance(reason, NoRunSlot) else PARTITION_FULL_DELAY_SECONDS
    send_back(sqs, queue_url, body, delay_seconds=delay)
