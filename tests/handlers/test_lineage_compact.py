"""The hourly compaction function on moto's S3: every staged day folded, and no bucket started too late."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from lakeline.lineage.records.archive import S3ArchiveStore, read_root_lines, staging_store
from lakeline.lineage.records.trace import archive_tree
from lakeline.lineage.records.tree import LineageNode, build_tree
from tests.handlers.test_lineage_support import REGION, LambdaContext

BUCKET = "lineage-archive"
DAYS = (date(2026, 11, 22), date(2026, 11, 23))


@dataclass
class TimedContext(LambdaContext):
    remaining_ms: int = 900_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name=REGION)
        client.create_bucket(Bucket=BUCKET)
        monkeypatch.setenv("ARCHIVE_BUCKET", BUCKET)
        monkeypatch.setenv("ARCHIVE_PREFIX", "archive/")
        from lambdas.lineage_compact import handler

        handler.dependencies.cache_clear()
        yield client
        handler.dependencies.cache_clear()


def stage_roots(store: S3ArchiveStore, count: int) -> None:
    for day in DAYS:
        for n in range(count):
            root = f"root-{n}"
            raw = LineageNode(root, f"{root}-raw", root, "RAW_DATA_INPUT", "s3://r/f", 1, None, None, None, None, None)
            done = LineageNode(root, f"{root}-a", raw.node_id, "STAGE_A_COMPLETE", "s3://s/", 2, None, None, None, None)
            at = datetime.combine(day, datetime.min.time(), UTC)
            archive_tree(build_tree(root, [raw, done]), store, day, archived_at=at, action="DATA_COMPACTION")


def test_the_function_folds_every_staged_day(s3: Any) -> None:
    from lambdas.lineage_compact import handler

    store = S3ArchiveStore(s3, BUCKET, "archive/")
    stage_roots(store, 20)
    summary = handler.handler({"source": "aws.events"}, TimedContext())
    assert summary["days"] == [day.isoformat() for day in DAYS]
    assert summary["staged"] == 40 and 0 < summary["written"] <= 16
    assert staging_store(store).keys() == []
    assert all(len(read_root_lines(store, f"root-{n}", day)) == 1 for n in range(20) for day in DAYS)


def test_the_function_starts_nothing_in_its_last_minutes(s3: Any) -> None:
    from lambdas.lineage_compact import handler

    store = S3ArchiveStore(s3, BUCKET, "archive/")
    stage_roots(store, 3)
    summary = handler.handler({"source": "aws.events"}, TimedContext(remaining_ms=60_000))
    assert summary == {"days": [], "staged": 0, "written": 0}
    assert len(staging_store(store).keys("dt=")) == 6  # left for the next run
