"""How both stages' post-update and failure functions end a leased run (``lakeline.partitions.LeasedRunEnd``),
built from their shared environment (``SettleEnvironment``)."""

from __future__ import annotations

from lakeline.aws.clients import AwsClients
from lakeline.commits import PartitionCommits
from lakeline.commits.slots import RunSlots
from lakeline.lambda_support import SettleEnvironment
from lakeline.partitions import LeasedRunEnd
from lakeline.storage import ObjectStore


def leased_run_end(
    aws: AwsClients, environment: SettleEnvironment, store: ObjectStore, stage: str, stage_queue_url: str
) -> LeasedRunEnd:
    """The end of stage ``stage``'s (``a`` or ``b``) runs: follow-ups queued on ``stage_queue_url``, slots given
    back (``lakeline.commits.slots``)."""
    table = environment.pipeline_state_table
    return LeasedRunEnd(
        PartitionCommits(aws.dynamodb, table),
        store,
        aws.sqs,
        stage_queue_url,
        environment.superseded_grace_seconds,
        RunSlots(aws.dynamodb, table, stage),
    )
