"""The scale tier, stage B (#39): a backlog of 2,000 messages for one target partition, sent through queue B and
driven to the end with the real router, planning and commit code on moto (``tests/scale/stage_b_cloud.py``).

Every message is applied exactly once, in a bounded number of runs, with every state machine input, every SQS
message and the partition's pipeline-state item under a quarter of its quota -- while the backlog is redelivered
under a run in flight, after it applied, and a run dies between its commit and its hand-over (the stranded sweep
ends it). The partition's item has room for only some of the backlog (``MAX_PENDING_BYTES``): the rest is sent back
to wait in queue B, and comes back as runs take their batches.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from harness.faults import context, drain_messages, send_bodies
from lakeline.commits import Lease
from lakeline.commits.applied import published_ids
from stage_b.messages import StageBMessage
from stage_b.plan import MAX_RUN_MESSAGES, StageBPlan
from tests.scale.stage_b_cloud import RUN_SECONDS, TargetCloud, message, target_cloud
from tests.scale.test_state_item import DYNAMODB_ITEM_LIMIT, item_bytes

BACKLOG = 2_000
THROUGH_THE_ROUTER = 200  # the backlog's first messages, sent through queue B (more would take minutes on moto)
STEP_FUNCTIONS_QUARTER = 256 * 1024 // 4
SQS_QUARTER = 256 * 1024 // 4
OVERWRITE = "overwrite"
REDELIVERED = 20  # messages of a batch delivered again (SQS's at-least-once)


def backlog() -> list[StageBMessage]:
    """2,000 new versions of 200 hourly source partitions, ten each (late files), for an ``overwrite`` target's
    year: each run rebuilds the partition from what all of them wrote, so one run takes a batch of any of them. (An
    ``append`` run takes one contribution's messages only: such a backlog takes at least a run per source.)"""
    return [message(source, version, OVERWRITE) for version in range(10) for source in range(BACKLOG // 10)]


def taken_bodies(plan: StageBPlan) -> list[str]:
    assert plan.lease is not None
    return sorted(Lease.from_dict(plan.lease).pending)


def redeliver(cloud: TargetCloud, bodies: list[str]) -> None:
    """SQS delivers these bodies again, as new receives of queue B's messages."""
    send_bodies(cloud.sqs, cloud.queue_url, bodies)
    cloud.drain()


def one_run(cloud: TargetCloud) -> StageBPlan:
    (execution,) = cloud.started()
    return cloud.take(execution)


def expire_lease(cloud: TargetCloud) -> None:
    """The dead run's lease expires (nothing renews it)."""
    key = cloud.state().key
    cloud.commits.client.update_item(
        TableName=cloud.commits.table_name,
        Key={cloud.commits.key_attribute: {"S": key}},
        UpdateExpression="SET lease_expires = :past",
        ExpressionAttributeValues={":past": {"N": "0"}},
    )


def sweep(cloud: TargetCloud, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The scheduled stranded sweep (``lambdas/stranded_sweep``), as deployed: it queues the follow-up."""
    from lambdas.stranded_sweep import handler as stranded_sweep

    monkeypatch.setenv("MAX_ITEMS", "100")
    stranded_sweep.dependencies.cache_clear()
    try:
        summary: dict[str, Any] = stranded_sweep.handler({}, context("stranded-sweep"))
    finally:
        stranded_sweep.dependencies.cache_clear()
    return summary


def pipeline_item(cloud: TargetCloud) -> dict[str, Any]:
    key = cloud.state().key
    found = cloud.commits.client.get_item(
        TableName=cloud.commits.table_name, Key={cloud.commits.key_attribute: {"S": key}}
    )
    return dict(found["Item"])


def test_a_backlog_of_2000_messages_is_applied_exactly_once_in_bounded_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    sent = backlog()
    expected = {m.deduplication_id() for m in sent}
    assert len(expected) == BACKLOG
    with target_cloud(monkeypatch, OVERWRITE) as cloud:
        # The backlog's first messages through queue B: the first starts a run, as many as the item has room for
        # wait in it, the router sends the rest back to wait in queue B. The rest of the backlog waits as the
        # router records it (``TargetCloud.wait``), behind them.
        cloud.send(sent[:THROUGH_THE_ROUTER])
        assert cloud.delayed() > 0, "the backlog overflows the partition's item"
        cloud.wait(sent[THROUGH_THE_ROUTER:])
        assert cloud.held_back

        # The first run took the first message alone (the router started it before the rest were recorded).
        cloud.finish(one_run(cloud))
        cloud.advance(RUN_SECONDS)
        cloud.drain()
        cloud.wait([])

        # A redelivery of messages a run in flight has taken: they wait in the partition's state, not run twice.
        batch = one_run(cloud)
        assert len(taken_bodies(batch)) > REDELIVERED
        redeliver(cloud, taken_bodies(batch)[:REDELIVERED])
        assert cloud.started() == [], "no second run while one holds the partition"
        cloud.finish(batch)
        cloud.advance(RUN_SECONDS)
        cloud.drain()
        cloud.wait([])

        # Its follow-up takes the next batch; then the batch before, already applied, comes again; and the
        # follow-up dies after its commit, before its hand-over: its lease stays held, nothing follows it.
        second = one_run(cloud)
        redeliver(cloud, taken_bodies(batch)[-REDELIVERED:])
        cloud.finish(second, hand_over=False)
        cloud.advance(RUN_SECONDS)
        cloud.drain()
        assert second.lease is not None
        assert cloud.started() == [] and cloud.state().lease_owner == second.lease["owner"]
        assert cloud.state().pending, "messages wait behind the dead run"

        # Its lease expires; the stranded sweep hands the partition to a follow-up, which the router starts.
        expire_lease(cloud)
        summary = sweep(cloud, monkeypatch)
        assert summary["stranded"] == [cloud.state().key] and summary["started"] == summary["stranded"], summary
        cloud.drain()
        cloud.run_to_the_end(max_runs=2 * BACKLOG // MAX_RUN_MESSAGES)

        final = cloud.state()
        assert final.pending == frozenset() and final.lease_owner is None
        assert cloud.delayed() == 0 and cloud.held_back == []
        assert drain_messages(cloud.sqs, cloud.dead_letters_url) == [], "nothing parked"
        # Exactly once: every run committed (the dead one too), each id in one run's batch, all published.
        applied = Counter(identity for plan in cloud.plans for identity in plan.applied)
        assert set(applied) == expected and max(applied.values()) == 1, applied.most_common(3)
        assert published_ids(final, cloud.store) == expected

        runs = len(cloud.plans)
        assert BACKLOG / MAX_RUN_MESSAGES <= runs <= 2 * BACKLOG / MAX_RUN_MESSAGES, runs
        assert all(len(plan.message_ids) <= MAX_RUN_MESSAGES for plan in cloud.plans)
        assert max(cloud.input_bytes) < STEP_FUNCTIONS_QUARTER, max(cloud.input_bytes)
        assert max(cloud.body_bytes) < SQS_QUARTER, max(cloud.body_bytes)
        size = item_bytes(pipeline_item(cloud))
        assert size < DYNAMODB_ITEM_LIMIT // 4, size
        print(
            f"{runs} runs; largest input {max(cloud.input_bytes):,} B, SQS message {max(cloud.body_bytes):,} B "
            f"of {len(cloud.body_bytes):,} delivered; item {size:,} B"
        )
