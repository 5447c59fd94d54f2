"""What both stages' routers are made of (their handlers differ in what a queue message is and how a
run is planned): the environment, the settings it describes, the Glue catalog, the partition commits
and the Step Functions and SQS clients."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from lakeline.aws.clients import AwsClients
from lakeline.commits import PartitionCommits, PartitionFull
from lakeline.commits.slots import NoRunSlot, RunSlots
from lakeline.engines.athena import AthenaEngine
from lakeline.lambda_support import RouterEnvironment
from lakeline.settings import PipelineSettings
from lakeline.storage import SchemeObjectStore
from lambdas.table_settings import deployed_table_settings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef
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
    tables = deployed_table_settings(environment.table_settings_file)
    return RouterRuntime(
        environment,
        aws,
        environment.pipeline_settings(tables.default, tables.tables),
        AthenaEngine(aws.athena, glue=aws.glue),
        # A plan reads what the partition's published version holds (lakeline.commits.applied).
        PartitionCommits(aws.dynamodb, environment.pipeline_state_table, lists=SchemeObjectStore(aws.s3)),
        aws.stepfunctions,
        aws.sqs,
        RunSlots(aws.dynamodb, environment.pipeline_state_table, stage, limit=environment.runs_in_flight),
    )


PARTITION_FULL_DELAY_SECONDS = 120
"""How long an arrival or message first waits in its queue when as many wait in its partition's item as the item may
hold (``PartitionFull``): about a run's time, after which its run's follow-up has taken a batch of them."""
NO_SLOT_DELAY_SECONDS = 60
"""How long a run's message first waits in its queue when as many of its stage's runs are in flight as it allows
(``NoRunSlot``): it keeps its partition's lease meanwhile, so what arrives for the partition waits behind it."""
MAX_PARTITION_FULL_DELAY_SECONDS = 900  # SQS's longest DelaySeconds
MAX_NO_SLOT_DELAY_SECONDS = 300  # a run waiting for a slot holds its partition: it comes back at least this often
WAITS_ATTRIBUTE = "lakeline-waits"
"""The message attribute counting how many times a record was sent back to wait: a record sent back is a new message,
whose receive count starts again, so the count travels with it."""


def times_waited(record: SQSRecord) -> int:
    """How many times ``record`` was sent back to wait before (0: never, or an attribute not ours)."""
    attributes = record.raw_event.get("messageAttributes") or {}
    value = (attributes.get(WAITS_ATTRIBUTE) or {}).get("stringValue")
    return int(value) if isinstance(value, str) and value.isdigit() else 0


def wait_seconds(reason: PartitionFull | NoRunSlot, waited: int, body: str) -> int:
    """How long a record waits after ``waited`` earlier waits: the first wait's delay, doubled each time up to the
    reason's longest, then spread over its last quarter by the body. Records of a burst that found their partition
    full together so come back spread out, fewer times each, instead of every two minutes all at once (#39: 5,466
    send-backs in 44 minutes for a burst of 2,000 files with a fixed delay)."""
    first, longest = (
        (NO_SLOT_DELAY_SECONDS, MAX_NO_SLOT_DELAY_SECONDS)
        if isinstance(reason, NoRunSlot)
        else (PARTITION_FULL_DELAY_SECONDS, MAX_PARTITION_FULL_DELAY_SECONDS)
    )
    delay: int = min(longest, first << min(waited, 10))
    spread = zlib.crc32(body.encode()) % (delay // 4 + 1)
    return delay - spread


def send_back(sqs: SQSClient, queue_url: str, body: str, *, delay_seconds: int = 0, waited: int = 0) -> None:
    """Send a record's body back to its queue as a new message (this one is then let go): its receive count stays
    as it was, so waiting never parks it in the DLQ, and a body sent twice (a crash between) is recorded once.
    ``waited``: how many times it has been sent back to wait (``WAITS_ATTRIBUTE``)."""
    attributes: dict[str, MessageAttributeValueTypeDef] = (
        {WAITS_ATTRIBUTE: {"DataType": "Number", "StringValue": str(waited)}} if waited else {}
    )
    sqs.send_message(QueueUrl=queue_url, MessageBody=body, DelaySeconds=delay_seconds, MessageAttributes=attributes)


def send_back_to_wait(sqs: SQSClient, queue_url: str, record: SQSRecord, reason: PartitionFull | NoRunSlot) -> int:
    """Send ``record`` back to its queue (``send_back``) for as long as ``reason`` and its earlier waits call for
    (``wait_seconds``); the delay."""
    waited = times_waited(record)
    delay = wait_seconds(reason, waited, record.body)
    send_back(sqs, queue_url, record.body, delay_seconds=delay, waited=waited + 1)
    return delay
