"""Failures kept across local runs until something resolves them (``lakeline.project.unresolved``)."""

from __future__ import annotations

from pathlib import Path

from lakeline.project.unresolved import carry_unresolved, load_unresolved, resolved_by

STAGE_A = "shop/pos/sales/day=1/a.csv, shop/pos/sales/day=1/b.csv: [CAST_INVALID_INPUT] ..."
STAGE_B = "shop_reports_dev.daily/day=2024-03-01: step 1 of 1 failed: [TABLE_OR_VIEW_NOT_FOUND] x"
UNROUTED = "shop_pos_dev.sales/day=2024-03-01 → shop_reports_dev.weekly: not routed: invalid item"


def test_each_kind_of_failure_is_resolved_by_what_rebuilds_its_subject() -> None:
    assert resolved_by(STAGE_A, {"shop/pos/sales/day=1/a.csv", "shop/pos/sales/day=1/b.csv"}, set())
    assert not resolved_by(STAGE_A, {"shop/pos/sales/day=1/a.csv"}, set())
    assert resolved_by(STAGE_B, set(), {"shop_reports_dev.daily/day=2024-03-01"})
    assert not resolved_by(STAGE_B, set(), {"shop_reports_dev.daily/day=2024-03-02"})
    assert resolved_by(UNROUTED, set(), {"shop_reports_dev.weekly/day=2024-03-02"})
    assert not resolved_by(UNROUTED, set(), {"shop_reports_dev.weekly_x/day=2024-03-02"})


def test_a_failure_stays_open_across_clean_runs_until_its_target_is_built(tmp_path: Path) -> None:
    assert carry_unresolved(tmp_path, [STAGE_B], set(), set()) == []  # this run's own
    assert load_unresolved(tmp_path) == [STAGE_B]
    # A clean run of duplicates builds nothing: the failure is still open, and said so.
    assert carry_unresolved(tmp_path, [], {"other.csv"}, set()) == [STAGE_B]
    assert carry_unresolved(tmp_path, [], set(), {"shop_reports_dev.daily/day=2024-03-01"}) == []
    assert load_unresolved(tmp_path) == []
    assert not (tmp_path / "state" / "unresolved.json").exists()
