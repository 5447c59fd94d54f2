"""Column lineage as both sources (SQL text, Spark plans) produce it, before it becomes an OpenLineage facet.

Vocabulary and subtypes follow the OpenLineage ColumnLineageDatasetFacet (spec 1-2-0):

- DIRECT: the input's value flows into the output value. IDENTITY (unchanged), TRANSFORMATION (computed
  from it), AGGREGATION (computed from many rows of it).
- INDIRECT: the input decides which rows exist or which branch is taken. JOIN, GROUP_BY, FILTER, SORT
  and WINDOW (partitioning and ordering of a window), CONDITIONAL (CASE/IF conditions).

JOIN, GROUP_BY, FILTER and SORT shape the whole output, so they are kept once per output dataset
(``dataset``), as the spec's dataset-level field allows. WINDOW and CONDITIONAL belong to the one output
column whose expression holds them.

Casts keep the subtype of what they cast: Spark adds implicit casts (an ``int`` inserted into a ``bigint``
column) that the SQL text does not show, and an explicit cast changes a type, not a value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum


class TransformationType(StrEnum):
    DIRECT = "DIRECT"
    INDIRECT = "INDIRECT"


class Subtype(StrEnum):
    IDENTITY = "IDENTITY"
    TRANSFORMATION = "TRANSFORMATION"
    AGGREGATION = "AGGREGATION"
    JOIN = "JOIN"
    GROUP_BY = "GROUP_BY"
    FILTER = "FILTER"
    SORT = "SORT"
    WINDOW = "WINDOW"
    CONDITIONAL = "CONDITIONAL"


DIRECT_SUBTYPES = (Subtype.IDENTITY, Subtype.TRANSFORMATION, Subtype.AGGREGATION)
INDIRECT_SUBTYPES = (
    Subtype.JOIN,
    Subtype.GROUP_BY,
    Subtype.FILTER,
    Subtype.SORT,
    Subtype.WINDOW,
    Subtype.CONDITIONAL,
)
# A DIRECT edge composed through several steps takes the strongest of its subtypes.
_DIRECT_RANK = {subtype: rank for rank, subtype in enumerate(DIRECT_SUBTYPES)}


@dataclass(frozen=True, order=True)
class SourceField:
    """One column of one dataset; ``dataset`` is written ``database.table``."""

    dataset: str
    field: str

    def __str__(self) -> str:
        return f"{self.dataset}.{self.field}"


@dataclass(frozen=True, order=True)
class Transformation:
    type: TransformationType
    subtype: Subtype
    masking: bool = False

    def __post_init__(self) -> None:
        allowed = DIRECT_SUBTYPES if self.type is TransformationType.DIRECT else INDIRECT_SUBTYPES
        if self.subtype not in allowed:
            raise ValueError(f"{self.type} transformation cannot have subtype {self.subtype}")

    def __str__(self) -> str:
        return f"{self.type} {self.subtype}" + (" masking" if self.masking else "")


IDENTITY = Transformation(TransformationType.DIRECT, Subtype.IDENTITY)


@dataclass(frozen=True, order=True)
class Edge:
    source: SourceField
    transformation: Transformation


Dependencies = frozenset[Edge]
NO_DEPENDENCIES: Dependencies = frozenset()


def identity_of(dataset: str, field: str) -> Dependencies:
    return frozenset({Edge(SourceField(dataset, field), IDENTITY)})


def into_field(dependencies: Iterable[Edge], path: str) -> Dependencies:
    """A struct field read from a column (``path`` like ``geo.lat``): an unchanged (IDENTITY) struct gives
    its leaf field; a computed one stays as it is, since which part of it the field comes from is unknown."""
    return frozenset(
        Edge(SourceField(edge.source.dataset, f"{edge.source.field}.{path}"), edge.transformation)
        if edge.transformation.subtype is Subtype.IDENTITY
        else edge
        for edge in dependencies
    )


def compose(outer: Transformation, inner: Transformation) -> Transformation:
    """How an input reaches an output through an intermediate: ``inner`` feeds it, it feeds ``outer``.

    DIRECT after DIRECT stays DIRECT with the stronger subtype (and masks if either masks). An INDIRECT
    step anywhere makes the whole path INDIRECT, named after the step nearest the output: a value that
    only decides a filter is a FILTER input, whatever happened to it before.
    """
    if outer.type is TransformationType.INDIRECT:
        return Transformation(TransformationType.INDIRECT, outer.subtype)
    if inner.type is TransformationType.INDIRECT:
        return inner
    strongest = max(outer.subtype, inner.subtype, key=_DIRECT_RANK.__getitem__)
    return Transformation(TransformationType.DIRECT, strongest, outer.masking or inner.masking)


def as_value(dependencies: Iterable[Edge], subtype: Subtype, *, masking: bool = False) -> Dependencies:
    """Dependencies of an expression that computes its value from ``dependencies`` (a function, an aggregate).

    DIRECT edges become at least ``subtype`` and masking if this step masks; INDIRECT edges stay as they are.
    """
    step = Transformation(TransformationType.DIRECT, subtype, masking)
    return frozenset(Edge(edge.source, compose(step, edge.transformation)) for edge in dependencies)


def as_indirect(dependencies: Iterable[Edge], subtype: Subtype) -> Dependencies:
    """Every input of an expression used as a condition, key or ordering: INDIRECT ``subtype``."""
    step = Transformation(TransformationType.INDIRECT, subtype)
    return frozenset(Edge(edge.source, compose(step, edge.transformation)) for edge in dependencies)


def union(*parts: Iterable[Edge]) -> Dependencies:
    result: set[Edge] = set()
    for part in parts:
        result.update(part)
    return frozenset(result)


@dataclass(frozen=True)
class ExpressionNode:
    """One step of a column's expression chain (the Ushas tree): a column and the expression computing it.

    ``label`` names the column where it is computed (``_q_0.a`` in SQL, ``a#0`` in a Spark plan);
    ``expression`` is that computation (``None`` for a column read as it is from a table); ``source`` is
    set on a catalog table's column, where the chain ends; ``children`` are the columns the expression
    reads. An expression that reads no column (a literal) ends the chain too. ``dependencies`` are the
    column's own, where the source records them: ``lineage tree`` narrows each path's transformation
    with them (see ``path_transformations``).
    """

    label: str
    expression: str | None = None
    source: SourceField | None = None
    children: tuple[ExpressionNode, ...] = ()
    dependencies: Dependencies | None = dataclasses.field(default=None, compare=False)


@dataclass(frozen=True)
class OutputColumn:
    name: str
    dependencies: Dependencies
    expression: str | None = None
    """The SQL (or Spark expression) that computes the column, for display."""
    node: ExpressionNode | None = dataclasses.field(default=None, compare=False)
    """The column's expression chain down to table columns and literals, when the source records it."""


@dataclass(frozen=True)
class RelationLineage:
    """Lineage of one query's result: its columns in order, and what shapes its rows."""

    columns: tuple[OutputColumn, ...]
    dataset: Dependencies = NO_DEPENDENCIES

    @property
    def column_names(self) -> list[str]:
        return [column.name for column in self.columns]


@dataclass(frozen=True)
class StatementLineage:
    """Lineage of one statement: the table it writes (``None`` for a bare query) and where each column comes from."""

    target: str | None
    columns: tuple[OutputColumn, ...]
    dataset: Dependencies
    inputs: tuple[str, ...]
    """Every dataset the statement reads, ``database.table``, sorted."""
    sql: str = ""

    def column(self, name: str) -> OutputColumn:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(f"{self.target or 'query'} has no output column {name!r}")

    def edges(self) -> dict[str, set[tuple[str, str, str]]]:
        """``{output column: {(input 'db.table.col', type, subtype)}}``; the form tests compare."""
        return {column.name: simplify(column.dependencies) for column in self.columns}

    def dataset_edges(self) -> set[tuple[str, str, str]]:
        return simplify(self.dataset)


def simplify(dependencies: Iterable[Edge]) -> set[tuple[str, str, str]]:
    return {
        (str(edge.source), edge.transformation.type.value, edge.transformation.subtype.value) for edge in dependencies
    }


def group_by_source(dependencies: Iterable[Edge]) -> dict[SourceField, list[Transformation]]:
    """Edges gathered per input field, in a stable order: the shape of an OpenLineage ``inputFields`` list."""
    grouped: dict[SourceField, list[Transformation]] = {}
    for edge in sorted(dependencies):
        grouped.setdefault(edge.source, []).append(edge.transformation)
    return grouped


def _reachable(inner: Transformation, result: Transformation) -> bool:
    """Whether some step after ``inner`` can give ``result`` (see ``compose``)."""
    if result.type is TransformationType.INDIRECT:
        return True
    return (
        inner.type is TransformationType.DIRECT
        and _DIRECT_RANK[result.subtype] >= _DIRECT_RANK[inner.subtype]
        and (result.masking or not inner.masking)
    )


def path_transformations(source: SourceField, chain: Sequence[Dependencies | None]) -> list[Transformation]:
    """How ``source`` reaches the top of one path of an expression chain: ``chain`` holds the dependencies of
    the path's columns, output first (``None`` where not recorded).

    The column nearest the source says how it reads the source; each column above either passes that on
    (a UNION, a plain reference, a cast: its dependencies hold the same transformations) or changes it, and
    then only those of its transformations are kept that a step after the ones below can give. An output
    column reading one source on two paths (``name`` and ``upper(name)`` under a UNION) thus shows
    IDENTITY on one path and TRANSFORMATION on the other, not both on each.
    """
    current: set[Transformation] = set()
    for dependencies in reversed(chain):
        if dependencies is None:
            continue
        here = {edge.transformation for edge in dependencies if edge.source == source}
        if not here:
            continue
        if not current:
            current = here
        elif not current <= here:
            current = {r for r in here if any(_reachable(t, r) for t in current)} or here
    return sorted(current)
