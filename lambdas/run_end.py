"""How both stages' post-update and failure functions end a leased run (``lakeline.partitions.LeasedRunEnd``),
built from their shared environment (``SettleEnvironment``)."""

from __future__ import annotations

from lakeline.aws.clients import AwsClients
from lakeline.commits import PartitionCommits
from lakeline.commits.slots import RunSlots
from lakeline.lambda_support import SettleEnvironment
from lakeline.partitions import LeasedRunEnd, no_follow_up_delay
from lakeline.storage import ObjectStore
from stage_a.plan import follow_up_window


def leased_run_end(
    aws: AwsClients, environment: SettleEnvironment, store: ObjectStore, stage: str, stage_queue_url: str
) -> LeasedRunEnd:
    """The end of stage ``stage``'s (``a`` or ``b``) runs: follow-ups queued on ``stage_queue_url`` (stage A's after
    a window while their partition still receives files), slots given back (``lakeline.commits.slots``)."""
    table = environment.pipeline_state_table
    # Stage A only: its waiting entries carry their files' upload times, which tell a burst still arriving.
    delay = follow_up_window(environment.follow_up_window_seconds) if stage == "a" else no_follow_up_delay
    return LeasedRunEnd(
        PartitionCommits(aws.dynamodb, table),
        store,
        aws.sqs,
        stage_queue_url,
        environment.superseded_grace_seconds,
        RunSlots(aws.dynamodb, table, stage),
        delay,
    )
