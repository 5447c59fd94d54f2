"""A partition's pipeline-state item stays the same size whatever its history (#39).

Before, the item kept the id of every arrival the partition ever loaded (``applied``): ~90 bytes each with a
70-character key, so an hourly feed into a monthly partition, or any unpartitioned table, passed DynamoDB's
400 KB after ~4,000 files and no commit of the partition could ever be written again. The ids are now kept in a
list beside the published version (``lakeline.commits.applied``) and the item holds where it is.
"""

from __future__ import annotations

from typing import Any

import pytest

from lakeline.commits.applied import published_ids
from lakeline.partitions import new_run_token, run_location
from stage_a.plan import arrival_id
from tests.scale.burst import burst_cloud, burst_key, expected_ids, sequencer

LIFE = 100_000  # arrivals over the partition's life (burst_key names up to 99,999)
HISTORY_RUNS = 10
LAST = 100  # the arrivals the test sends through the router at the end
DYNAMODB_ITEM_LIMIT = 400 * 1024


def attribute_bytes(value: dict[str, Any]) -> int:
    """An attribute value's size as DynamoDB counts it (strings and numbers by their length, sets and maps by
    their members')."""
    (kind, content), *_ = value.items()
    if kind in {"S", "N", "B"}:
        return len(str(content).encode())
    if kind in {"SS", "NS"}:
        return sum(len(member.encode()) for member in content)
    if kind == "M":
        return sum(len(name.encode()) + attribute_bytes(member) for name, member in content.items())
    if kind == "L":
        return sum(attribute_bytes(member) for member in content)
    return 1  # BOOL, NULL


def item_bytes(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + attribute_bytes(value) for name, value in item.items())


def test_a_partition_that_loaded_100000_arrivals_keeps_the_item_it_had_after_its_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with burst_cloud(monkeypatch) as burst:
        assert burst.commits is not None and burst.store is not None
        commits = burst.commits

        def item() -> dict[str, Any]:
            key = commits.partitions()[0].key
            found = commits.client.get_item(TableName=commits.table_name, Key={"target_partition": {"S": key}})
            return dict(found["Item"])

        burst.send([0])
        burst.run_to_the_end()
        after_the_first = item_bytes(item())

        # Its history: runs of the real commit protocol, each loading ~10,000 arrivals (what their SQL read is not
        # what this measures; the router's door check of 100,000 files on moto would take an hour).
        state = commits.partitions()[0]
        assert state.root is not None
        history = list(range(1, LIFE - LAST))
        for run in range(HISTORY_RUNS):
            token = new_run_token(unique=f"history-{run}")
            lease = commits.begin(state.key, token, run_location(state.root, token), state.root)
            assert lease is not None
            ids = [arrival_id(burst_key(i), sequencer(i)) for i in history[run::HISTORY_RUNS]]
            commits.commit(lease, publish=True, files=1, applied=ids)
            commits.finish(lease, new_run_token(), run_location(state.root, new_run_token()))

        # Its last arrivals go through the router, the planning and the commit as any other.
        burst.send(range(LIFE - LAST, LIFE))
        burst.run_to_the_end()

        final = commits.read(state.key)
        assert final.pending == frozenset() and final.lease_owner is None
        assert published_ids(final, burst.store) == expected_ids(LIFE)
        size = item_bytes(item())
        # What grows is ``retired`` (one entry per version published within the sweep's grace period, here all
        # of the test's), not what the partition holds.
        assert size < after_the_first + HISTORY_RUNS * 250, (after_the_first, size)
        assert size < DYNAMODB_ITEM_LIMIT // 40, size
        print(f"item after the first arrival: {after_the_first} B; after {LIFE:,}: {size} B")
