"""The seed's UNNEST query, translated for Spark, over an archive written by the real trace code."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest
from moto import mock_aws

from lakeline.aws.retry import NO_WAIT
from lakeline.engines.translate import athena_to_spark
from lakeline.lineage.records.archive import LocalArchiveStore, bucket_object_key
from lakeline.lineage.records.compact import compact_archive
from lakeline.lineage.records.expired import archive_expired
from lakeline.lineage.records.load import LineageLoader
from lakeline.lineage.records.model import LineageRecord, build_records
from lakeline.lineage.records.query import load_query, query_local_archive
from lakeline.lineage.records.table import LINEAGE_TABLE, epoch_millis
from lakeline.lineage.records.trace import TraceMessage, trace_root

if TYPE_CHECKING:
    from lakeline.engines.spark import SparkEngine

pytestmark = pytest.mark.spark

TABLE = "lineage"
RECORDED = datetime(2026, 11, 22, 9, 30, tzinfo=UTC)
TRACED = datetime(2026, 11, 23, 1, 0, tzinfo=UTC)


def step(root: str, parent: str, action: str, location: str, offset: int) -> LineageRecord:
    [record] = build_records(
        {"root_id": root, "parent_id": parent, "action_taken": action, "storage_location": location},
        now=RECORDED + timedelta(minutes=offset),
    )
    return record


def write_archive(folder: Path) -> tuple[list[LineageRecord], LineageRecord]:
    """Load two runs into a moto lineage table, trace them into ``folder``, archive one TTL removal."""
    raw = step("run-a", "run-a", "RAW_DATA_INPUT", "s3://raw/a.csv", 0)
    dq = step("run-a", raw.node_id, "DQ_CHECK_PASS", "s3://stage/a", 1)
    done = step("run-a", dq.node_id, "CALCULATION_COMPLETE", "s3://enriched/a", 2)
    stopped = step("run-b", "run-b", "RAW_DATA_INPUT", "s3://raw/b.csv", 3)
    late = step("run-b", stopped.node_id, "PROFILE_COMPLETE", "s3://stage/b", 4)
    store = LocalArchiveStore(folder)
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(**LINEAGE_TABLE.create_table_kwargs(TABLE))
        loader = LineageLoader(dynamodb, TABLE, backoff=NO_WAIT, clock_ms=lambda: epoch_millis(RECORDED))
        assert not loader.load([(str(i), r) for i, r in enumerate([raw, dq, done, stopped])]).failed
        for root in ("run-a", "run-b"):
            trace_root(dynamodb, TABLE, TraceMessage(root_id=root), store, clock=lambda: TRACED)
        # A step loaded after the trace and removed by TTL before the next one.
        image = {**late.to_message(), "loaded_at": epoch_millis(TRACED + timedelta(hours=1))}
        assert archive_expired(image, TRACED + timedelta(days=1), store, lambda _root: epoch_millis(TRACED))
    return [raw, dq, done, stopped], late


def test_the_unnest_query_reads_the_archive_back(spark_engine: SparkEngine, tmp_path: Path) -> None:
    folder = tmp_path / "lineage-archive"
    (raw, dq, done, stopped), late = write_archive(folder)
    sql = load_query()
    assert "LATERAL VIEW POSEXPLODE(lineage)" in athena_to_spark(sql)  # what Spark actually runs
    database = f"lineage_q_{uuid.uuid4().hex[:8]}"
    # Staged by the trace and the TTL catcher: outside the table's day folders, Spark reads none of it.
    assert query_local_archive(spark_engine, folder, sql, database=database).rows == []
    compact_archive(LocalArchiveStore(folder))
    result = query_local_archive(spark_engine, folder, sql, database=database)
    assert result.columns == ["record_id", "root_id", "status", "action_taken", "recordedAt", "storage_location"]

    def at(record: LineageRecord) -> datetime:
        return datetime.fromtimestamp(record.recorded_at, tz=UTC).replace(tzinfo=None)

    traced = TRACED.replace(tzinfo=None)
    removed = traced + timedelta(days=1)
    archive = folder.resolve().as_uri()
    expired_key = bucket_object_key(removed.date(), "run-b")
    object_a, object_b = (f"{archive}/{bucket_object_key(TRACED.date(), root)}" for root in ("run-a", "run-b"))
    run_a = [
        (done.node_id, "run-a", "complete", "RAW_DATA_INPUT", at(raw), "s3://raw/a.csv"),
        (done.node_id, "run-a", "complete", "DQ_CHECK_PASS", at(dq), "s3://stage/a"),
        (done.node_id, "run-a", "complete", "CALCULATION_COMPLETE", at(done), "s3://enriched/a"),
        (done.node_id, "run-a", "complete", "DATA_COMPACTION", traced, object_a),
    ]
    run_b = {
        stopped.node_id: [
            (stopped.node_id, "run-b", "unterminated", "RAW_DATA_INPUT", at(stopped), "s3://raw/b.csv"),
            (stopped.node_id, "run-b", "unterminated", "DATA_COMPACTION", traced,
             object_b),
        ],
        late.node_id: [
            (late.node_id, "run-b", "expired", "PROFILE_COMPLETE", at(late), "s3://stage/b"),
            (late.node_id, "run-b", "expired", "DATA_COMPACTION", removed, f"{archive}/{expired_key}"),
        ],
    }  # fmt: skip
    assert result.rows == run_a + [row for record_id in sorted(run_b) for row in run_b[record_id]]
    partitions = spark_engine.session.sql(f"SHOW PARTITIONS {database}.lineage_archive").collect()
    assert sorted(row[0] for row in partitions) == ["dt=2026-11-23", "dt=2026-11-24"]
