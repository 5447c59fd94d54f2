"""A stage B target partition's pipeline-state item stays small whatever its history (#39): 12,000 messages over
its life.

The target is an ``append`` rollup (a year's takings by store and hour, from an hourly source): each source
partition is a *contribution*, whose files a new version of it replaces (``stage_b.plan``). Before, the item kept
``<contribution>|<file>`` for every file of every contribution the partition ever had (``contributions``): with
1,200 hourly partitions of 4 files each it passed DynamoDB's 400 KB (moto refuses the item) and no run could ever
commit the target again. Driven through the real router, planning and commit code on moto
(``tests/scale/stage_b_cloud.py``).
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from lakeline.commits.applied import published_contributions, published_ids
from lakeline.commits.keys import contribution_files
from lakeline.partitions import new_run_token, run_location, settle_run
from tests.scale.stage_b_cloud import FILES_PER_RUN, message, run_files, target_cloud
from tests.scale.test_state_item import DYNAMODB_ITEM_LIMIT, item_bytes

SOURCES = 1_200  # hourly source partitions (50 days) appended into the target's year
VERSIONS = 10  # each loaded ten times over the target's life (late files): 12,000 messages
LAST = 10  # the sources whose last versions go through the router at the end
HOUR = 3_600
QUARTER_OF_THE_QUOTA = 256 * 1024 // 4  # Step Functions' payload quota is 256 KiB


def test_an_append_target_that_took_12000_messages_keeps_a_small_item(monkeypatch: pytest.MonkeyPatch) -> None:
    with target_cloud(monkeypatch) as cloud:
        commits = cloud.commits

        def item() -> dict[str, Any]:
            key = cloud.state().key
            found = commits.client.get_item(TableName=commits.table_name, Key={"target_partition": {"S": key}})
            return dict(found["Item"])

        cloud.send([message(0, 0)])
        cloud.run_to_the_end()
        after_the_first = item_bytes(item())

        # Its history: one append run per source partition (its versions' messages taken together, as a run takes
        # every waiting message of one contribution), with the real commit protocol; what their SQL read is not
        # what this measures. An hour apart, ending now: the sweep after each run deletes what its grace period
        # no longer keeps, as it does in AWS.
        state = cloud.state()
        assert state.root is not None
        history = [index for index in range(SOURCES) if index >= LAST]
        start = time.time() - len(history) * HOUR
        for hour, source in enumerate(history):
            moment = start + hour * HOUR
            at = replace(commits, clock=lambda moment=moment: moment)
            taken = [message(source, version) for version in range(VERSIONS)]
            token = new_run_token(datetime.fromtimestamp(moment, UTC), unique=f"history-{source}")
            lease = at.begin(state.key, token, run_location(state.root, token), state.root)
            assert lease is not None
            at.commit(
                lease,
                publish=True,
                files=FILES_PER_RUN * (source + 1),
                applied=[m.deduplication_id() for m in taken],
                contribution=(taken[0].contribution_key(), run_files(token)),
            )
            settle_run(at, lease, cloud.store, wrote=True, root=state.root)

        # The last sources' versions go through the router, the planning and the commit as any other message.
        last = [message(source, version) for source in range(LAST) for version in range(VERSIONS)]
        cloud.send(last[1:])  # all but the first message's
        cloud.run_to_the_end()

        final = cloud.state()
        assert final.pending == frozenset() and final.lease_owner is None
        expected = {message(s, v).deduplication_id() for s in range(SOURCES) for v in range(VERSIONS)}
        assert published_ids(final, cloud.store) == expected
        # Each contribution holds the files of its last run, and only those: a new version replaced its rows.
        contributions = published_contributions(final, cloud.store)
        for source in (0, LAST - 1, LAST, SOURCES - 1):
            files = contribution_files(contributions, message(source, 0).contribution_key())
            assert len(files) == FILES_PER_RUN, (source, files)
        assert len(contributions) == SOURCES * FILES_PER_RUN

        assert max(cloud.input_bytes) < QUARTER_OF_THE_QUOTA, max(cloud.input_bytes)
        assert all(len(plan.replaces) <= FILES_PER_RUN for plan in cloud.plans)
        size = item_bytes(item())
        # What grows is ``retired`` (one entry per version published within the sweep's grace period).
        assert size < after_the_first + len(history) * 250, (after_the_first, size)
        assert size < DYNAMODB_ITEM_LIMIT // 4, size
        print(f"item after the first message: {after_the_first} B; after {SOURCES * VERSIONS:,}: {size} B")
