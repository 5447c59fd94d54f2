"""The tree ``lakeline lineage tree`` prints for one output column, in the style of the Ushas document.

The column's expression chain comes first: each step is a column where it is computed (a subquery's
or CTE's column in SQL, ``name#exprId`` in Spark's analyzed plan) with its expression, down to table
columns and literals. A table column says how it reaches the output (DIRECT/INDIRECT and subtype) and
is followed further back through stored events of earlier jobs (``ColumnGraph``). The inputs that
shape the whole output (joins, filters, groupings) come last, marked ``[dataset]``.
"""

from __future__ import annotations

from lakeline.lineage.columns.model import (
    NO_DEPENDENCIES,
    Dependencies,
    ExpressionNode,
    OutputColumn,
    SourceField,
    Transformation,
    TransformationType,
    path_transformations,
)
from lakeline.lineage.openlineage.naming import DatasetNaming
from lakeline.lineage.viewer.column_graph import ColumnGraph, FieldLineageTree, FieldRef


def column_tree(
    ref: FieldRef,
    column: OutputColumn,
    graph: ColumnGraph,
    naming: DatasetNaming,
    *,
    indirect: bool = True,
    dataset: Dependencies = NO_DEPENDENCIES,
) -> FieldLineageTree:
    """``ref``'s tree: its expression chain (when the source recorded one), then its dataset-wide inputs."""
    if column.node is None:
        return graph.tree_from(ref, column.dependencies, naming, indirect=indirect, dataset=dataset)
    root = FieldLineageTree(ref)
    top = (column.dependencies, column.node.dependencies)
    for child in column.node.children:
        root.children += _steps(child, top, graph, naming, indirect)
    shaping = graph.tree_from(ref, NO_DEPENDENCIES, naming, indirect=indirect, dataset=dataset)
    root.children += shaping.children
    return root


Chain = tuple[Dependencies | None, ...]
"""The dependencies of the columns on one path of a chain, output first."""


def _steps(
    node: ExpressionNode, chain: Chain, graph: ColumnGraph, naming: DatasetNaming, indirect: bool
) -> list[FieldLineageTree]:
    namespace = naming.namespace
    if node.source is not None:
        sources = _source(node.source, chain, graph, naming, indirect)
        if node.label == str(node.source):
            return sources
        # A Spark attribute of a table: its ``name#id`` first, as Ushas prints it, then the table column.
        return [FieldLineageTree(FieldRef(namespace, "", node.label), step=node.label, children=sources)]
    if not node.children:
        text = f"{node.label} = {node.expression}  [literal]" if node.expression else f"{node.label}  [literal]"
        return [FieldLineageTree(FieldRef(namespace, "", node.label), step=text)]
    below = (*chain, node.dependencies)
    children = [tree for child in node.children for tree in _steps(child, below, graph, naming, indirect)]
    if not children:
        return []  # only INDIRECT inputs below, and they are left out
    text = f"{node.label} = {node.expression}" if node.expression else node.label
    return [FieldLineageTree(FieldRef(namespace, "", node.label), step=text, children=children)]


def _source(
    source: SourceField, chain: Chain, graph: ColumnGraph, naming: DatasetNaming, indirect: bool
) -> list[FieldLineageTree]:
    ref = FieldRef(*naming.of(source.dataset), source.field)
    # The transformations of this path alone, not every one the output has from this source.
    transformations: list[Transformation | None] = [*path_transformations(source, chain)] or [None]
    trees = []
    for transformation in transformations:
        if not indirect and transformation is not None and transformation.type is TransformationType.INDIRECT:
            continue
        trees.append(FieldLineageTree(ref, transformation, children=graph.tree(ref, indirect=indirect).children))
    return trees
