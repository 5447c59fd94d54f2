"""Dependency items held in memory, for local runs from JSON files (the cloud reads DynamoDB)."""

from __future__ import annotations

from collections.abc import Iterable

from lakeline.dependencies.graph import cycle_problems
from lakeline.dependencies.model import DependencyEdge, DependencyItem, edges_of, normalise_table_name
from lakeline.errors import InvalidInputError


class LocalDependencies:
    def __init__(self, items: Iterable[DependencyItem]) -> None:
        self._items: dict[str, DependencyItem] = {}
        for item in items:
            if item.dataset in self._items:
                raise InvalidInputError(f"{item.dataset} has more than one dependency item")
            self._items[item.dataset] = item
        cycles = cycle_problems({d: i.source_tables for d, i in self._items.items()})
        if cycles:
            raise InvalidInputError("; ".join(cycles))
        self._edges: dict[str, list[DependencyEdge]] = {}
        for item in self._items.values():
            for edge in edges_of(item):
                self._edges.setdefault(edge.source_table, []).append(edge)

    def get_item(self, dataset: str) -> DependencyItem | None:
        return self._items.get(normalise_table_name(dataset, "dataset"))

    def edges_from(self, source_table: str) -> list[DependencyEdge]:
        return list(self._edges.get(normalise_table_name(source_table, "table"), []))

    @property
    def items(self) -> list[DependencyItem]:
        return list(self._items.values())
