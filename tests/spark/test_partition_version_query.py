"""``athena_queries/lineage/partition_version.sql`` on Spark over an archive written by the trace's own code: the
same answer as ``lakeline lineage show --table --partition`` (``lakeline.lineage.records.versions``), and lines
archived before versions existed (no ``version`` key) still read."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness.versions_archive import DAILY, ORDERS, partition_of, write_history
from lakeline.commits.versions import parse_version
from lakeline.errors import InvalidInputError
from lakeline.lineage.records.archive import LocalArchiveStore
from lakeline.lineage.records.query import VERSION_QUERY, bind_version_query, query_local_archive
from lakeline.lineage.records.versions import answer, archive_nodes, partition_versions

if TYPE_CHECKING:
    from lakeline.engines.base import QueryResult
    from lakeline.engines.spark import SparkEngine

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("versions") / "lineage-archive"
    # Partition 0 archived before #43 (no versions in its lines); partitions 1 and 2 with three versions each.
    write_history(LocalArchiveStore(folder), partitions=3, versions=3, legacy=1)
    return folder


def query(engine: SparkEngine, folder: Path, table: str, partition: str, version: str = "") -> QueryResult:
    database = f"lineage_v_{uuid.uuid4().hex[:8]}"
    sql = bind_version_query(VERSION_QUERY.read_text(), table, partition, version, database=database)
    return query_local_archive(engine, folder, sql, database=database)


def test_the_query_and_lineage_show_give_the_same_version_inputs_raw_files_and_neighbours(
    spark_engine: SparkEngine, archive: Path
) -> None:
    nodes = archive_nodes(LocalArchiveStore(archive))
    partition = partition_of(1)
    for table in (ORDERS, DAILY):
        versions = partition_versions(nodes, table, partition)
        assert [v.number for v in versions] == [1, 2, 3]
        for asked in ("", "2", "v1", versions[1].token):
            shown = answer(versions, table, partition, parse_version(asked) if asked else None)
            result = query(spark_engine, archive, table, partition, asked)
            rows = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
            assert {row["version"] for row in rows} == {shown.version.token}, asked
            row = rows[0]
            assert row["version_before"] == (shown.before.token if shown.before else None)
            assert row["version_after"] == (shown.after.token if shown.after else None)
            assert row["location"] == shown.version.location and row["run_id"] == shown.version.run_id
            assert sorted(r["raw_file"] for r in rows) == shown.version.raw_files
            inputs = sorted({(r["input_dataset"], r["input_version"], r["input_location"]) for r in rows})
            expected = sorted((i.dataset, i.version, i.location) for i in shown.version.inputs) or [(None, None, None)]
            assert inputs == expected
    # daily's version 2 was built from orders' version 2 of the same arrival; orders' from a raw file.
    [daily] = [r for r in query(spark_engine, archive, DAILY, partition, "2").rows]
    assert (
        dict(zip(query(spark_engine, archive, DAILY, partition, "2").columns, daily, strict=True))["input_version"]
        == partition_versions(nodes, ORDERS, partition)[1].token
    )


def test_lines_archived_before_versions_read_as_no_version(spark_engine: SparkEngine, archive: Path) -> None:
    assert query(spark_engine, archive, ORDERS, partition_of(0)).rows == []
    assert partition_versions(archive_nodes(LocalArchiveStore(archive)), ORDERS, partition_of(0)) == []
    assert query(spark_engine, archive, ORDERS, partition_of(2), "9").rows == []


def test_the_parameters_are_checked_before_they_become_literals() -> None:
    sql = VERSION_QUERY.read_text()
    bound = bind_version_query(sql, ORDERS, "date=20220101/hour=01", "v2")
    assert "'sales.orders'" in bound and "'date=20220101/hour=01'" in bound and "'v2'" in bound
    assert "?" not in bound.split("*/")[-1]
    for table, partition, version in (
        ("sales.orders' OR '1'='1", "date=1", ""),
        (ORDERS, "date=1' OR '1'='1", ""),
        (ORDERS, "date", ""),
        (ORDERS, "date=1", "2' OR '1'='1"),
    ):
        with pytest.raises(InvalidInputError):
            bind_version_query(sql, table, partition, version)
