"""Partition version tokens (``lakeline.commits.versions``) and a partition's versions read back from archived
nodes (``lakeline.lineage.records.versions``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from harness.versions_archive import DAILY, ORDERS, arrival_nodes, partition_of
from lakeline.commits.versions import VersionRef, parse_version, planned_version, published_version, version_token
from lakeline.errors import InvalidInputError
from lakeline.lineage.records.model import build_records
from lakeline.lineage.records.versions import VersionNotFound, answer, archived_partitions, partition_versions

RUN = "20220120t101500123456_1a2b3c4d5e"


def test_a_token_is_the_commit_number_and_the_run_and_a_user_may_name_it_by_its_number() -> None:
    assert version_token(3, RUN) == f"v3.{RUN}"
    assert parse_version("3") == parse_version("v3") == VersionRef(3)
    assert parse_version(f"v3.{RUN}") == VersionRef(3, RUN)
    assert VersionRef(3).matches(f"v3.{RUN}") and not VersionRef(3, "20220120t101500123456_ffffffffff").matches(
        f"v3.{RUN}"
    )
    assert not VersionRef(3).matches(f"v33.{RUN}")
    for bad in ("", "0", "v", "three", f"v3.{RUN}x", "-1"):
        with pytest.raises(InvalidInputError):
            parse_version(bad)
    with pytest.raises(InvalidInputError):
        version_token(0, RUN)


def test_a_leased_run_names_the_version_after_its_lease_s_and_a_run_that_commits_nothing_none() -> None:
    assert planned_version({"version": 2}, RUN, writes=True) == f"v3.{RUN}"
    assert planned_version({}, RUN, writes=True) == f"v1.{RUN}"  # the partition's first version
    assert planned_version({"version": 2}, RUN, writes=False) is None
    assert planned_version(None, RUN, writes=True) is None
    assert published_version({"version": 2}, RUN) == f"v2.{RUN}"
    assert published_version({"version": 0}, RUN) is None


def test_a_record_keeps_a_version_token_and_refuses_other_text() -> None:
    request = {"root_id": "r", "parent_id": "r", "action_taken": "STAGE_A_COMPLETE", "storage_location": "s3://b/k/"}
    now = datetime(2026, 11, 29, tzinfo=UTC)
    [record] = build_records({**request, "version": f"v1.{RUN}"}, now=now)
    assert record.to_message()["version"] == f"v1.{RUN}"
    assert "version" not in build_records(request, now=now)[0].to_message()
    with pytest.raises(InvalidInputError, match="version"):
        build_records({**request, "version": "latest"}, now=now)


def test_versions_of_a_partition_their_inputs_raw_files_and_neighbours() -> None:
    nodes = [node for version in (1, 2, 3) for node in arrival_nodes(7, version)]
    nodes += arrival_nodes(8, 1)  # another partition
    versions = partition_versions(nodes, DAILY, partition_of(7))
    assert [v.number for v in versions] == [1, 2, 3]
    middle = answer(versions, DAILY, partition_of(7), VersionRef(2))
    assert (middle.before, middle.after) == (versions[0], versions[2])
    [read] = middle.version.inputs
    assert (read.dataset, read.version) == (ORDERS, partition_versions(nodes, ORDERS, partition_of(7))[1].token)
    assert middle.version.raw_files == [f"s3://raw/sales/orders/{partition_of(7)}/file-2.csv"]
    assert answer(versions, DAILY, partition_of(7), None).version == versions[2]  # the newest by default
    with pytest.raises(VersionNotFound, match="has v1"):
        answer(versions, DAILY, partition_of(7), VersionRef(4))
    with pytest.raises(VersionNotFound) as missing:
        answer(partition_versions(nodes, DAILY, partition_of(9)), DAILY, partition_of(9), None)
    assert missing.value.partition_missing
    assert archived_partitions(nodes, DAILY) == [partition_of(7), partition_of(8)]
    # A tree whose raw file expired before it was archived: the version is still there, without raw files.
    orphaned = [node for node in arrival_nodes(7, 4) if node.action_taken != "RAW_DATA_INPUT"]
    [fourth] = partition_versions(nodes + orphaned, ORDERS, partition_of(7))[3:]
    assert fourth.number == 4 and fourth.raw_files == [] and fourth.inputs == []


def test_query_parameters_fill_the_question_marks_in_the_order_of_the_text() -> None:
    """``lineage query --parameter`` binds in order: a ``?`` in a subquery between two others is the second."""
    from lakeline.lineage.records.query import bind_parameters

    sql = "SELECT x FROM t WHERE a = ? AND c IN (SELECT y FROM u WHERE z = ?) AND d = ?"
    bound = bind_parameters(sql, "query", {"1": "one", "2": "two", "3": "three"}).sql("athena")
    assert bound == "SELECT x FROM t WHERE a = 'one' AND c IN (SELECT y FROM u WHERE z = 'two') AND d = 'three'"
