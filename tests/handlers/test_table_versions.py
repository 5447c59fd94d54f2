"""Old Glue table versions pruned after an unpartitioned table's publish (``lakeline.catalog_versions``, #40), on
moto's Glue: each publish is an ``UpdateTable`` that archives a version, against a quota of ~100,000 per table."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from lakeline.catalog_versions import VERSIONS_KEPT, GlueTableVersions
from stage_end.runtime import prune_table_versions

DATABASE, TABLE = "shop_dev", "stores"


@pytest.fixture
def glue() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("glue", region_name="us-east-1")
        client.create_database(DatabaseInput={"Name": DATABASE})
        client.create_table(DatabaseName=DATABASE, TableInput=_table(0))
        yield client


def _table(run: int) -> dict[str, Any]:
    return {"Name": TABLE, "StorageDescriptor": {"Location": f"s3://stage/shop/stores/lakeline_run={run}/"}}


def _publish(glue: Any, runs: range) -> None:
    """Each run's publish, as Athena's ``ALTER TABLE ... SET LOCATION`` makes it: an UpdateTable."""
    for run in runs:
        glue.update_table(DatabaseName=DATABASE, TableInput=_table(run))


def _versions(glue: Any) -> list[int]:
    found = glue.get_table_versions(DatabaseName=DATABASE, TableName=TABLE)["TableVersions"]
    return sorted(int(version["VersionId"]) for version in found)


def test_a_publish_keeps_the_newest_versions_and_deletes_the_rest(glue: Any) -> None:
    _publish(glue, range(1, 15))
    assert _versions(glue) == list(range(1, 16))
    deleted = GlueTableVersions(glue).prune(DATABASE, TABLE)
    assert deleted == [str(version) for version in range(1, 16 - VERSIONS_KEPT)]
    assert _versions(glue) == list(range(16 - VERSIONS_KEPT, 16))
    current = glue.get_table(DatabaseName=DATABASE, Name=TABLE)["Table"]
    assert current["StorageDescriptor"]["Location"].endswith("lakeline_run=14/")
    # The next publish adds one version, and its prune deletes one.
    _publish(glue, range(15, 16))
    assert GlueTableVersions(glue).prune(DATABASE, TABLE) == [str(16 - VERSIONS_KEPT)]


def test_a_long_history_is_brought_down_a_bounded_number_at_a_time_oldest_first(glue: Any) -> None:
    _publish(glue, range(1, 8))
    versions = GlueTableVersions(glue, keep=2, most=3)
    assert versions.prune(DATABASE, TABLE) == ["1", "2", "3"]
    assert versions.prune(DATABASE, TABLE) == ["4", "5", "6"]
    assert versions.prune(DATABASE, TABLE) == []
    assert _versions(glue) == [7, 8]


def test_the_current_version_always_stays() -> None:
    with pytest.raises(ValueError, match="keep"):
        GlueTableVersions(boto3.client("glue", region_name="us-east-1"), keep=0)


def test_a_run_end_prunes_only_after_publishing_an_unpartitioned_table(glue: Any) -> None:
    _publish(glue, range(1, 15))
    versions = GlueTableVersions(glue)
    assert prune_table_versions(versions, f"{DATABASE}.{TABLE}", {"date": "20240301"}, wrote=True) == []
    assert prune_table_versions(versions, f"{DATABASE}.{TABLE}", {}, wrote=False) == []
    assert len(_versions(glue)) == 15
    ((level, message, details),) = prune_table_versions(versions, f"{DATABASE}.{TABLE}", {}, wrote=True)
    assert (level, message, details["versions"]) == (
        "info",
        "old Glue table versions pruned",
        ["1", "2", "3", "4", "5"],
    )


def test_a_prune_that_fails_is_noted_and_does_not_fail_the_published_run(glue: Any) -> None:
    """A publish is done when the prune runs: raising would fail the post-update and park the input of a run whose
    version readers already see. Nothing is lost by a prune left for the next publish."""
    ((level, message, details),) = prune_table_versions(GlueTableVersions(glue), f"{DATABASE}.gone", {}, wrote=True)
    assert (level, message) == ("warning", "old Glue table versions not pruned")
    assert "EntityNotFoundException" in details["error"] and details["table"] == f"{DATABASE}.gone"
