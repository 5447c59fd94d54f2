"""The embedded runtime takes a failure after the SQL as the state machines' Catch does (#20).

Deployed, every state after a stage's SQL (the partition commit, the catalog swap, the post-update) has a
Catch into the stage's failure function, which ends the partition's lease and parks the input with its
reason. The embedded runtime (``EventFlow``, what ``lakeline run --embedded`` runs) must do the same: left
to SQS's redelivery alone, a publish that keeps failing parks the message after its last try but leaves
the lease held, so the next file of the partition waits behind a run that is gone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakeline.commits import PartitionCommits, commit_key
from lakeline.engines.spark import SparkEngine
from lakeline.local import event_flow
from lakeline.local.cloud import LocalCloud
from lakeline.local.event_flow import EventFlow
from lakeline.local.handler_caches import reset_handler_caches
from lakeline.local.workspace import Workspace
from lakeline.operations.dead_letters import redrive

ENV = "embcatch"
STAGE = f"eng_shop_{ENV}"
QUERIES = Path(__file__).resolve().parents[2] / "athena_queries"
DAY = "20220301"


def orders_file(workspace: Workspace, part: int) -> str:
    key = f"eng/shop/orders/date={DAY}/part{part}.csv"
    path = workspace.raw_dir / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("id,amount\n" + "".join(f"{part * 100 + i},{i}.5\n" for i in range(3)))
    return key


@pytest.fixture
def flow(spark_engine: SparkEngine, tmp_path: Path) -> Iterator[tuple[EventFlow, LocalCloud, Workspace]]:
    workspace = Workspace.at(tmp_path / "workspace")
    environment = dict(os.environ)
    reset_handler_caches()
    cloud = LocalCloud.start()
    try:
        yield EventFlow(cloud, spark_engine, workspace, workspace.settings(environment=ENV), QUERIES), cloud, workspace
    finally:
        cloud.stop()
        reset_handler_caches()
        os.environ.clear()
        os.environ.update(environment)
        spark_engine.session.sql(f"DROP DATABASE IF EXISTS {STAGE} CASCADE")
        spark_engine.session.sql(f"DROP DATABASE IF EXISTS eng_shop_raw_{ENV} CASCADE")


def parked(cloud: LocalCloud, queue: str) -> list[dict[str, Any]]:
    answer = cloud.sqs.receive_message(
        QueueUrl=cloud.queue_urls[queue], MaxNumberOfMessages=10, MessageAttributeNames=["All"], VisibilityTimeout=0
    )
    return answer.get("Messages", [])


def test_a_publish_that_fails_ends_the_lease_and_parks_the_file_at_once(
    flow: tuple[EventFlow, LocalCloud, Workspace], spark_engine: SparkEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime, cloud, workspace = flow
    published = event_flow.publish_stage_a
    broken = True

    def publish(*args: Any, **kwargs: Any) -> Any:
        if broken:
            raise RuntimeError("the catalog swap broke")
        return published(*args, **kwargs)

    monkeypatch.setattr(event_flow, "publish_stage_a", publish)
    first = orders_file(workspace, 1)
    runtime.arrive(first)
    runtime.run_until_idle()

    (failure,) = runtime.report.failures
    assert first in failure and "the catalog swap broke" in failure
    (message,) = parked(cloud, "queue-a-dlq")
    assert first in message["Body"]
    state = PartitionCommits(cloud.dynamodb, cloud.names.pipeline_state).read(
        commit_key(f"{STAGE}.orders", f"date={DAY}")
    )
    assert state.lease_owner is None, state  # ended by the failure path, not left to expire

    # Fixed: the partition's next file is not held back behind the failed run. The failed run had committed
    # its version (only the catalog swap failed), so the next run builds on it: both files' rows.
    broken = False
    runtime.arrive(orders_file(workspace, 2))
    runtime.run_until_idle()
    assert len(runtime.report.failures) == 1
    count = f"SELECT count(*) FROM {STAGE}.orders WHERE \"date\" = '{DAY}'"
    assert spark_engine.execute(count).rows == [(6,)]
    # The parked message sent back finds its file loaded: nothing doubled, the DLQ empty.
    assert redrive(cloud.sqs, cloud.queue_urls["queue-a-dlq"], cloud.queue_urls["queue-a"])[0] == 1
    runtime.run_until_idle()
    assert len(runtime.report.failures) == 1 and parked(cloud, "queue-a-dlq") == []
    assert spark_engine.execute(count).rows == [(6,)]
