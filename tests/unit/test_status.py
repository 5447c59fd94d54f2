"""``lakeline status`` over pipeline-state items (``lakeline.operations.status``): partitions, runs in
flight, waiting arrivals and the ``all`` targets that lack sources."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lakeline.commits import PartitionCommits, commit_key
from lakeline.operations.status import local_status, read_items, store_reader
from lakeline.quality.evaluate import CheckResult, QualityReport
from lambdas.partition_commit.handler import LeasedPlan, commit_plan
from stage_end.quality import report_location, report_to_json

NOW = datetime(2026, 11, 23, 12, tzinfo=UTC)
ITEMS = [
    {
        "target_partition": {"S": "commit#shop_pos_dev.sales/day=2024-03-02"},
        "version": {"N": "2"},
        "files": {"N": "3"},
        "published_at": {"N": str(datetime(2026, 11, 23, 11, tzinfo=UTC).timestamp())},
        "pending": {"SS": ['{"key": "a"}', '{"key": "b"}']},
        "lease_owner": {"S": "20261123t110000_x"},
        "lease_expires": {"N": str(NOW.timestamp() + 60)},
    },
    {
        "target_partition": {"S": "commit#shop_pos_dev.stores/"},
        "version": {"N": "1"},
        "files": {"N": "1"},
        "lease_owner": {"S": "20261101t000000_old"},
        "lease_expires": {"N": str(NOW.timestamp() - 60)},  # expired: nothing in flight
    },
    {"target_partition": {"S": "shop_reports_dev.daily/day=2024-03-02"}, "arrived_sources": {"SS": ["a.x"]}},
    {
        "target_partition": {"S": "shop_reports_dev.daily/day=2024-03-01"},
        "arrived_sources": {"SS": ["a.x", "b.y"]},
        "completed_by": {"S": "b.y/day=2024-03-01"},
    },
    {"target_partition": {"S": "applied#shop_reports_dev.daily/day=1#m"}, "applied_at": {"S": "x"}},  # ledger
]


def test_partitions_runs_in_flight_and_targets_waiting_for_sources() -> None:
    partitions, waiting = read_items(ITEMS, lambda target: frozenset({"a.x", "b.y"}), NOW)
    assert [(p.table, p.partition, p.version, p.files, p.waiting, p.run_in_flight) for p in partitions] == [
        ("shop_pos_dev.sales", "day=2024-03-02", 2, 3, 2, "20261123t110000_x"),
        ("shop_pos_dev.stores", "", 1, 1, 0, None),
    ]
    assert partitions[0].published_at == "2026-11-23 11:00:00"
    (target,) = waiting
    assert (target.target_partition, target.arrived, target.missing) == (
        "shop_reports_dev.daily/day=2024-03-02",
        ("a.x",),
        ("b.y",),
    )


def test_a_workspace_reports_its_last_run_failures_and_quarantine(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "pipeline-state.json").write_text(json.dumps(ITEMS))
    (tmp_path / "summary.json").write_text(
        json.dumps({"stage_a_runs": 2, "stage_b_runs": 1, "seconds": 12.5, "failures": ["k.csv: boom"]})
    )
    record = tmp_path / "quarantine" / "shop" / "pos" / "sales" / "day=1" / "bad.csv.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"reason": "header lacks column amount"}))
    status = local_status(tmp_path, lambda target: frozenset(), NOW)
    assert status.last_run is not None and "2 stage A and 1 stage B runs in 12.5s" in status.last_run
    assert status.dead_letters == {"quarantine": 1}
    assert status.failures == [
        "failed k.csv: boom",
        "quarantined shop/pos/sales/day=1/bad.csv: header lacks column amount",
    ]
    assert len(status.partitions) == 2


def test_a_version_published_without_checks_shows_the_last_checked_versions_named(commits: PartitionCommits) -> None:
    """The commit function keeps the summary of the checks a run passed in the partition's item; a later version
    published without checks (the table's checks removed, a compaction then) leaves it, and ``status`` says whose
    it is. The checked version's own report is read first while it is there."""
    store, root = commits.lists, "s3://stage/db/t/date=20220120/"
    assert store is not None
    gate = {"rules": [{"rule": "RowCount > 0", "severity": "block"}], "database": "db", "table": "t"}
    report = QualityReport("db.t (date=20220120)", (CheckResult("RowCount > 0", "block", True, 3.0),))

    def run(owner: str, quality: dict[str, Any] | None) -> None:
        target = f"{root}lakeline_run=20220120t00000000000{owner[-1]}_{uuid.uuid5(uuid.NAMESPACE_URL, owner).hex[:10]}/"
        lease = commits.begin(commit_key("db.t", "date=20220120"), owner, target, root, [owner])
        assert lease is not None
        if quality is not None:  # what the quality step leaves beside the run
            store.write_text(report_location(target), report_to_json(report))
        plan = LeasedPlan(lease=lease.to_dict(), target_location=target, applied=[owner], quality=quality)
        commit_plan(plan, commits, store)
        commits.finish(lease, f"{owner}-next", f"{root}x/")

    def checks_column(read: bool = True) -> str | None:
        items = commits.client.scan(TableName=commits.table_name)["Items"]
        (partition,), _ = read_items(items, lambda target: frozenset(), NOW, store_reader(store) if read else None)
        return partition.quality

    run("r1", gate)
    assert checks_column() == checks_column(read=False) == "1/1 passed"
    run("r2", None)
    assert checks_column() == "1/1 passed (version 1, the last checked)"
    run("r3", gate)
    assert checks_column() == "1/1 passed"
