"""Glue's transforms of choice types and nested data, with the column names Glue gives their output.

``ResolveChoice``: ``cast:T`` and ``project:T`` keep a column's name and value; ``make_struct`` wraps its
choices in one struct (a TRANSFORMATION); ``make_cols`` splits it into ``name_type`` columns, one per
type found at run time (``frames.split_column`` resolves them); ``match_catalog`` casts to the catalog's
types. ``Relationalize`` flattens structs into ``a.b`` columns and moves every array into a table of its
own, ``{root}_{path}``, with ``id`` (the row's key, as the parent's ``path`` column holds it), ``index``
and the elements as ``{path}.val`` (or ``{path}.val.{field}``). The element types come from the catalog
column an array is read from (``array<struct<...>>``); when they are not known, the tables are named and
their columns reported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from lakeline.glue_scanner.catalog import GlueCatalog
from lakeline.glue_scanner.column_exprs import Problem, Site
from lakeline.glue_scanner.datasets import is_catalog_table
from lakeline.glue_scanner.frames import Frame, merge_problems, opaque_frame
from lakeline.lineage.columns.model import (
    NO_DEPENDENCIES,
    Dependencies,
    OutputColumn,
    Subtype,
    as_value,
)

# Types --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NestedType:
    kind: str
    """``struct``, ``array`` or a scalar type name."""
    fields: tuple[tuple[str, NestedType], ...] = ()
    element: NestedType | None = None


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for character in text:
        if character == "<":
            depth += 1
        elif character == ">":
            depth -= 1
        if character == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += character
    return [*parts, current] if current else parts


def parse_type(text: str) -> NestedType:
    """A Hive type string of the catalog: ``array<struct<type:string,value:string>>``."""
    text = text.strip()
    match = re.fullmatch(r"(array|struct|map)<(.*)>", text, re.IGNORECASE | re.DOTALL)
    if match is None:
        return NestedType(text.lower())
    kind, inner = match.group(1).lower(), match.group(2)
    if kind == "array":
        return NestedType("array", element=parse_type(inner))
    if kind == "map":
        return NestedType("map")
    fields = []
    for part in _split_top_level(inner):
        name, _, type_text = part.partition(":")
        fields.append((name.strip().strip("`"), parse_type(type_text)))
    return NestedType("struct", tuple(fields))


def column_type(frame_column: OutputColumn, catalog: GlueCatalog) -> NestedType | None:
    """The catalog type of a column read unchanged from a catalog table, if it is one."""
    edges = list(frame_column.dependencies)
    if len(edges) != 1 or edges[0].transformation.subtype is not Subtype.IDENTITY:
        return None
    dataset, name = edges[0].source.dataset, edges[0].source.field
    if not is_catalog_table(dataset) or "." not in dataset:
        return None
    schema = catalog.schema_or_none(*dataset.split(".", 1))
    if schema is None:
        return None
    found = next((c for c in (*schema.columns, *schema.partition_columns) if c.name.lower() == name.lower()), None)
    return parse_type(found.type) if found is not None else None


# ResolveChoice ------------------------------------------------------------------------------------


def resolve_choice(frame: Frame, specs: Sequence[tuple[str, str]], choice: str | None, site: Site) -> Frame:
    """``resolveChoice(specs=[(column, action)])`` or ``choice=action`` for every column."""
    actions = [(name, action) for name, action in specs]
    if choice is not None:
        actions.extend((column.name, choice) for column in frame.columns)
    columns = list(frame.columns)
    splits = list(frame.splits)
    problems: list[Problem] = []
    for name, action in actions:
        mode = action.split(":", 1)[0].strip().lower()
        index = next((i for i, c in enumerate(columns) if c.name.lower() == name.lower()), None)
        if index is None:
            if not frame.is_open:
                problems.append(site.problem(f"resolveChoice names column {name!r}, which is not in the frame"))
            continue
        column = columns[index]
        if mode == "make_struct":
            columns[index] = OutputColumn(column.name, as_value(column.dependencies, Subtype.TRANSFORMATION))
        elif mode == "make_cols":
            splits.append(column)
            if choice is None:
                del columns[index]  # named in specs: the column is known to hold a choice
        elif mode not in ("cast", "project", "match_catalog"):
            problems.append(site.problem(f"resolveChoice action {action!r} is not one Glue has"))
    if choice is not None and choice.lower() == "make_cols":
        problems.append(
            site.problem("resolveChoice(choice='make_cols'): columns whose type varies become <name>_<type> columns")
        )
    return replace(
        frame, columns=tuple(columns), splits=tuple(splits), problems=merge_problems(frame.problems, problems)
    )


# Relationalize ------------------------------------------------------------------------------------


def _flatten(prefix: str, nested: NestedType, deps: Dependencies) -> tuple[list[OutputColumn], list[str]]:
    """Columns of one value flattened as Relationalize does, and the arrays under it (their paths)."""
    if nested.kind == "struct":
        columns: list[OutputColumn] = []
        arrays: list[str] = []
        for name, field_type in nested.fields:
            more, nested_arrays = _flatten(f"{prefix}.{name}", field_type, deps)
            columns.extend(more)
            arrays.extend(nested_arrays)
        return columns, arrays
    if nested.kind == "array":
        # The parent keeps a key into the child table: a generated value, from no input.
        return [OutputColumn(prefix, NO_DEPENDENCIES)], [prefix]
    return [OutputColumn(prefix, deps)], []


def relationalize(frame: Frame, root: str, catalog: GlueCatalog, site: Site) -> dict[str, Frame]:
    """Every frame of the collection Relationalize returns, by its name."""
    tables: dict[str, Frame] = {}
    root_columns: list[OutputColumn] = []
    children: list[tuple[str, NestedType, Dependencies]] = []
    problems: list[Problem] = []
    for column in frame.columns:
        nested = column_type(column, catalog)
        if nested is None:
            root_columns.append(column)
            continue
        flat, arrays = _flatten(column.name, nested, column.dependencies)
        root_columns.extend(flat)
        for path in arrays:
            children.append((path, _type_at(nested, path.split(".")[1:]), column.dependencies))
    if frame.is_open:
        problems.append(site.problem("relationalize of a frame whose columns are not all known"))
    tables[root] = replace(frame, columns=tuple(root_columns), problems=merge_problems(frame.problems, problems))
    while children:
        path, array_type, deps = children.pop(0)
        name = f"{root}_{path}"
        element = array_type.element or NestedType("string")
        columns = [OutputColumn("id", NO_DEPENDENCIES), OutputColumn("index", NO_DEPENDENCIES)]
        flat, arrays = _flatten(f"{path}.val", element, deps)
        columns.extend(flat)
        for nested_path in arrays:
            children.append((nested_path, _type_at(element, nested_path.split(".")[2:]), deps))
        tables[name] = replace(frame, columns=tuple(columns), open_groups=(), hidden=frozenset())
    return tables


def _type_at(nested: NestedType, path: list[str]) -> NestedType:
    current = nested
    for part in path:
        current = dict(current.fields).get(part, NestedType("string"))
    return current


def unknown_relationalized(frame: Frame, name: str, site: Site) -> Frame:
    problem = site.problem(f"relationalize: table {name!r} is not among the arrays the catalog types show")
    return opaque_frame(problem, inputs=frame.inputs, dynamic=True)
