"""``lakeline status`` over pipeline-state items (``lakeline.operations.status``): partitions, runs in
flight, waiting arrivals and the ``all`` targets that lack sources."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from lakeline.operations.status import local_status, read_items

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
