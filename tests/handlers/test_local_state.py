"""The local runtime keeps the pipeline-state table in the workspace between runs (moto's server)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeline.commits import PartitionCommits, commit_key
from lakeline.commits.applied import published_ids
from lakeline.runtimes.embedded.cloud import LINEAGE_TABLE_NAME, LocalCloud
from lakeline.storage import LocalObjectStore, local_root


@pytest.fixture
def cloud() -> Iterator[LocalCloud]:
    started = LocalCloud.start()
    try:
        yield started
    finally:
        started.stop()


def test_partition_states_survive_a_restart_but_a_stopped_runs_lease_does_not(
    cloud: LocalCloud, tmp_path: Path
) -> None:
    commits = PartitionCommits(cloud.dynamodb, cloud.names.pipeline_state, lists=LocalObjectStore())
    root = local_root(tmp_path / "ws" / "t" / "date=1")

    def run(owner: str) -> str:
        return f"{root}lakeline_run=20220120t000000000000_{owner[-1] * 10}/"

    key = commit_key("db.t", "date=1")
    done = commits.begin(key, "r1", run("r1"), root, ["a"])
    assert done is not None
    commits.commit(done, publish=True, files=1, applied=["a"])
    commits.finish(done, "unused", "unused")
    # A second run was stopped while it held the partition (Ctrl-C), with an arrival waiting behind it.
    assert commits.begin(key, "r2", run("r2"), root, ["b"])
    assert commits.begin(key, "r3", run("r3"), root, ["c"]) is None
    state_file = tmp_path / "state" / "pipeline-state.json"
    assert cloud.save_pipeline_state(state_file) == 1
    assert json.loads(state_file.read_text())[0]["lease_owner"] == {"S": "r2"}

    for item in cloud.dynamodb.scan(TableName=cloud.names.pipeline_state)["Items"]:
        cloud.dynamodb.delete_item(
            TableName=cloud.names.pipeline_state, Key={"target_partition": item["target_partition"]}
        )
    assert cloud.restore_pipeline_state(state_file, json.loads(state_file.read_text())) == 1
    restored = commits.read(key)
    assert (restored.version, restored.published) == (1, run("r1"))
    assert published_ids(restored, commits.lists) == {"a"}
    assert restored.lease_owner is None and restored.pending == {"b", "c"}
    # The next arrival of the partition takes it at once, with what waited.
    lease = commits.begin(key, "r4", run("r4"), root, ["d"])
    assert lease is not None and lease.pending == ("b", "c", "d")


def test_the_lineage_table_survives_a_restart_and_what_its_ttl_removed_does_not(
    cloud: LocalCloud, tmp_path: Path
) -> None:
    """Before (#36): each run started with an empty lineage table, so the trace of a tree a later run added
    to (a late file's target under another source's arrival) archived it without its earlier nodes."""
    now = int(time.time())
    for node, expiry in (("kept", now + 3600), ("expired", now - 1)):
        record = {"root_id": "root", "node_id": node, "parent_id": "root", "action_taken": "RAW_DATA_INPUT"}
        item = {name: {"S": value} for name, value in record.items()}
        item |= {"storage_location": {"S": f"s3://raw/{node}.csv"}, "ttl_expiry": {"N": str(expiry)}}
        cloud.dynamodb.put_item(TableName=LINEAGE_TABLE_NAME, Item=item)
    state_file = tmp_path / "state" / "pipeline-state.json"
    cloud.save_pipeline_state(state_file)
    for item in cloud.dynamodb.scan(TableName=LINEAGE_TABLE_NAME)["Items"]:
        cloud.dynamodb.delete_item(
            TableName=LINEAGE_TABLE_NAME, Key={"root_id": item["root_id"], "node_id": item["node_id"]}
        )

    cloud.restore_pipeline_state(state_file, json.loads(state_file.read_text()))
    restored = cloud.dynamodb.scan(TableName=LINEAGE_TABLE_NAME)["Items"]
    assert [item["node_id"]["S"] for item in restored] == ["kept"]
