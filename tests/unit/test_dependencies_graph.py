"""Cycle checks: walking upstream from the new item's sources, and whole-graph checks for backfill."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pytest

from lakeline.dependencies.graph import (
    DependencyCycleError,
    check_no_cycle,
    datasets_in_cycles,
    find_cycle,
)


class Lookups:
    """An upstream lookup over a dict that records which datasets were asked for, level by level."""

    def __init__(self, needs: Mapping[str, Collection[str]]) -> None:
        self.needs = needs
        self.batches: list[list[str]] = []

    def __call__(self, datasets: Collection[str]) -> dict[str, Collection[str]]:
        self.batches.append(sorted(datasets))
        return {name: self.needs[name] for name in datasets if name in self.needs}


def test_two_datasets_needing_each_other() -> None:
    existing = Lookups({"db.b": ["db.a"]})
    assert find_cycle("db.a", ["db.b"], existing) == ["db.a", "db.b", "db.a"]
    with pytest.raises(DependencyCycleError, match=r"db\.a needs db\.b needs db\.a"):
        check_no_cycle("db.a", ["db.b"], existing)


def test_longer_cycle_is_reported_in_needs_order() -> None:
    existing = Lookups({"db.b": ["db.c", "db.x"], "db.c": ["db.d"], "db.d": ["db.a"], "db.x": []})
    assert find_cycle("db.a", ["db.b"], existing) == ["db.a", "db.b", "db.c", "db.d", "db.a"]
    assert existing.batches == [["db.b"], ["db.c", "db.x"], ["db.d"]]  # one batched lookup per level


def test_self_dependency_and_no_cycle() -> None:
    assert find_cycle("db.a", ["db.a"], Lookups({})) == ["db.a", "db.a"]
    diamond = Lookups({"db.b": ["db.d"], "db.c": ["db.d"], "db.d": []})
    assert find_cycle("db.a", ["db.b", "db.c"], diamond) is None
    # each dataset is looked up once even when reached twice
    assert diamond.batches == [["db.b", "db.c"], ["db.d"]]
    check_no_cycle("db.a", ["db.b", "db.c"], diamond)


def test_whole_graph_cycles() -> None:
    needs = {
        "db.a": ["db.b"],
        "db.b": ["db.c"],
        "db.c": ["db.a"],
        "db.d": ["db.a"],  # downstream of a cycle, not on it
        "db.e": ["db.f"],
        "db.f": ["db.e"],
        "db.g": [],
    }
    cycles = datasets_in_cycles(needs)
    assert sorted(cycles) == ["db.a", "db.b", "db.c", "db.e", "db.f"]
    assert cycles["db.a"] == ["db.a", "db.b", "db.c", "db.a"]
    assert cycles["db.f"] == ["db.f", "db.e", "db.f"]
    assert datasets_in_cycles({"db.a": ["db.b"], "db.b": []}) == {}
