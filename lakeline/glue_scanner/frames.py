"""DynamicFrames and DataFrames as the script analysis sees them: where each column comes from.

A ``Frame`` lists its known columns with their dependencies (``lineage.columns.model``), the dataset-wide
INDIRECT inputs (joins, filters, groupings), and the datasets it reads. A source whose columns are not
known (an S3 path with no catalog table, a table missing from the catalog) leaves the frame *open*:
a column the script names is then taken to come from that source under the same name, which is what
Spark does with it. Two open sources side by side (a join) make such a name ambiguous, and that is
reported, not guessed. Sources read together (a union, several paths) form one group and all feed it.

Every operation returns a new frame; problems met on the way travel with the frame and are reported
if it reaches a sink.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from lakeline.engines.base import TableSchema
from lakeline.glue_scanner.column_exprs import (
    Alias,
    Bound,
    Call,
    Cast,
    ColExpr,
    Lit,
    Opaque,
    Over,
    Problem,
    Ref,
    Site,
    Star,
    When,
    name_of,
    unquote,
)
from lakeline.lineage.columns.model import (
    NO_DEPENDENCIES,
    Dependencies,
    OutputColumn,
    Subtype,
    as_indirect,
    as_value,
    identity_of,
    union,
)

UNIDENTIFIED = ""
"""An open group member for a source that could not be identified (its problem says why)."""


@dataclass(frozen=True)
class Frame:
    columns: tuple[OutputColumn, ...] = ()
    dataset: Dependencies = NO_DEPENDENCIES
    inputs: frozenset[str] = frozenset()
    open_groups: tuple[tuple[str, ...], ...] = ()
    """Sources whose columns are not all known; a group's members all feed the same columns."""
    hidden: frozenset[str] = frozenset()
    """Lower-cased names dropped or renamed away from an open frame: no longer passed through."""
    qualifiers: tuple[tuple[str, Frame], ...] = ()
    """Frame aliases (``df.alias("o")``) that qualified names (``o.id``) resolve against."""
    problems: tuple[Problem, ...] = ()
    dynamic: bool = False
    """A Glue DynamicFrame rather than a Spark DataFrame (some methods differ)."""
    splits: tuple[OutputColumn, ...] = ()
    """Columns ``resolveChoice`` ``make_cols`` splits into ``name_type`` columns, one per type seen at run time."""

    @property
    def is_open(self) -> bool:
        return bool(self.open_groups)

    def column_names(self) -> list[str]:
        return [column.name for column in self.columns]

    def with_problems(self, problems: Iterable[Problem]) -> Frame:
        return replace(self, problems=merge_problems(self.problems, problems))


def merge_problems(*groups: Iterable[Problem]) -> tuple[Problem, ...]:
    seen: dict[Problem, None] = {}
    for group in groups:
        for problem in group:
            seen.setdefault(problem)
    return tuple(seen)


def source_frame(dataset: str, schema: TableSchema | None, *, dynamic: bool) -> Frame:
    """A frame reading ``dataset``; its columns come from ``schema`` when it is known."""
    if schema is None:
        return Frame(inputs=frozenset({dataset}), open_groups=((dataset,),), dynamic=dynamic)
    columns = tuple(
        OutputColumn(column.name, identity_of(dataset, column.name))
        for column in (*schema.columns, *schema.partition_columns)
    )
    return Frame(columns=columns, inputs=frozenset({dataset}), dynamic=dynamic)


def sources_frame(sources: Sequence[tuple[str, TableSchema | None]], *, dynamic: bool) -> Frame:
    """Several paths read as one frame: each column comes from all of them."""
    if len(sources) == 1:
        return source_frame(*sources[0], dynamic=dynamic)
    frames = [source_frame(dataset, schema, dynamic=dynamic) for dataset, schema in sources]
    if all(not frame.is_open for frame in frames) and len({tuple(f.column_names()) for f in frames}) == 1:
        result = frames[0]
        for frame in frames[1:]:
            result = union_frames(result, frame, by_name=False, site=Site(0))
        return result
    datasets = tuple(dataset for dataset, _ in sources)
    return Frame(inputs=frozenset(datasets), open_groups=(datasets,), dynamic=dynamic)


def opaque_frame(problem: Problem, *, inputs: Iterable[str] = (), dynamic: bool = False) -> Frame:
    """A frame whose columns cannot be known; ``problem`` says why."""
    return Frame(inputs=frozenset(inputs), open_groups=((UNIDENTIFIED,),), problems=(problem,), dynamic=dynamic)


# Resolving names and expressions ------------------------------------------------------------------


def _matching(columns: Iterable[OutputColumn], key: str) -> list[OutputColumn]:
    return [column for column in columns if column.name.lower() == key]


def resolve_name(frame: Frame, name: str, site: Site) -> tuple[Dependencies, tuple[Problem, ...]]:
    """Where column ``name`` of ``frame`` comes from."""
    plain = unquote(name)
    if "`" not in name and "." in name and not _matching(frame.columns, plain.lower()):
        qualifier, rest = name.split(".", 1)
        for alias, aliased in frame.qualifiers:
            if alias.lower() == qualifier.lower():
                return resolve_name(aliased, rest, site)
        # A struct field: its value is part of the struct column's.
        return resolve_name(frame, qualifier, site)
    key = plain.lower()
    matches = _matching(frame.columns, key)
    if len(matches) == 1:
        return matches[0].dependencies, ()
    if matches:
        deps = union(*(column.dependencies for column in matches))
        return deps, (site.problem(f"column {plain!r} is ambiguous: {len(matches)} columns have that name"),)
    split = split_column(frame, key)
    if split is not None:
        return split.dependencies, ()
    if key in frame.hidden or not frame.open_groups:
        known = ", ".join(frame.column_names()) or "none"
        return NO_DEPENDENCIES, (site.problem(f"column {plain!r} is not in the frame (its columns: {known})"),)
    if len(frame.open_groups) > 1:
        sources = " or ".join(
            "/".join(member for member in group if member) or "an unidentified source" for group in frame.open_groups
        )
        return NO_DEPENDENCIES, (site.problem(f"column {plain!r} could come from {sources}: columns not known"),)
    return union(*(identity_of(member, plain) for member in frame.open_groups[0] if member)), ()


def expression_dependencies(frame: Frame, expression: ColExpr, site: Site) -> tuple[Dependencies, tuple[Problem, ...]]:
    """Dependencies of a column expression evaluated over ``frame``."""
    problems: list[Problem] = []

    def walk(node: ColExpr) -> Dependencies:
        if isinstance(node, Ref):
            deps, found = resolve_name(frame, node.name, site)
            problems.extend(found)
            return deps
        if isinstance(node, Bound):
            problems.extend(node.problems)
            return node.dependencies
        if isinstance(node, Lit | Star):
            return NO_DEPENDENCIES
        if isinstance(node, Alias | Cast):
            # A cast changes a type, not a value: it keeps the subtype of what it casts.
            return walk(node.child)
        if isinstance(node, Call):
            return as_value(union(*(walk(arg) for arg in node.args)), node.subtype, masking=node.masking)
        if isinstance(node, When):
            values = union(*(walk(value) for value in node.values))
            conditions = union(*(walk(condition) for condition in node.conditions))
            return union(as_value(values, Subtype.TRANSFORMATION), as_indirect(conditions, Subtype.CONDITIONAL))
        if isinstance(node, Over):
            window = union(*(walk(key) for key in node.spec))
            return union(walk(node.child), as_indirect(window, Subtype.WINDOW))
        if isinstance(node, Opaque):
            problems.append(node.problem)
            return NO_DEPENDENCIES
        raise TypeError(f"unexpected column expression {node!r}")

    result = walk(expression)
    return result, tuple(problems)


GLUE_TYPE_NAMES = frozenset(
    [
        "byte",
        "short",
        "int",
        "integer",
        "long",
        "bigint",
        "float",
        "double",
        "decimal",
        "string",
        "boolean",
        "date",
        "timestamp",
        "binary",
        "struct",
        "array",
        "map",
        "null",
    ]
)


def split_column(frame: Frame, key: str) -> OutputColumn | None:
    """The column ``make_cols`` split into ``key`` (``price_long`` of ``price``), if it did."""
    base, _, type_name = key.rpartition("_")
    if type_name not in GLUE_TYPE_NAMES:
        return None
    return next((column for column in frame.splits if column.name.lower() == base), None)


# Operations ---------------------------------------------------------------------------------------


def select(frame: Frame, items: Sequence[ColExpr], site: Site) -> Frame:
    columns: list[OutputColumn] = []
    problems: list[Problem] = []
    keep_open = False
    for item in items:
        if isinstance(item, Star):
            source = frame
            if item.qualifier:
                aliased = [f for alias, f in frame.qualifiers if alias.lower() == item.qualifier.lower()]
                if not aliased:
                    problems.append(site.problem(f"{item.qualifier}.* names no frame alias"))
                    continue
                source = aliased[0]
            columns.extend(source.columns)
            if source.is_open:
                keep_open = True
            continue
        deps, found = expression_dependencies(frame, item, site)
        problems.extend(found)
        columns.append(OutputColumn(name_of(item), deps))
    return replace(
        frame,
        columns=tuple(columns),
        open_groups=frame.open_groups if keep_open else (),
        hidden=frame.hidden if keep_open else frozenset(),
        qualifiers=(),
        problems=merge_problems(frame.problems, problems),
    )


def with_column(frame: Frame, name: str, expression: ColExpr, site: Site) -> Frame:
    deps, problems = expression_dependencies(frame, expression, site)
    column = OutputColumn(name, deps)
    key = name.lower()
    if _matching(frame.columns, key):
        columns = tuple(column if c.name.lower() == key else c for c in frame.columns)
    else:
        columns = (*frame.columns, column)
    return replace(
        frame,
        columns=columns,
        hidden=frame.hidden - {key},
        problems=merge_problems(frame.problems, problems),
    )


def rename(frame: Frame, old: str, new: str, site: Site) -> Frame:
    key = old.lower()
    if _matching(frame.columns, key):
        columns = tuple(OutputColumn(new, c.dependencies) if c.name.lower() == key else c for c in frame.columns)
        return replace(frame, columns=columns)
    if not frame.is_open or key in frame.hidden:
        return frame  # Spark ignores renaming a column that is not there
    deps, problems = resolve_name(frame, old, site)
    return replace(
        frame,
        columns=(*frame.columns, OutputColumn(new, deps)),
        hidden=(frame.hidden | {key}) - {new.lower()},
        problems=merge_problems(frame.problems, problems),
    )


def drop(frame: Frame, names: Iterable[str]) -> Frame:
    keys = {name.lower() for name in names}
    columns = tuple(c for c in frame.columns if c.name.lower() not in keys)
    return replace(frame, columns=columns, hidden=frame.hidden | keys if frame.is_open else frame.hidden)


def indirect(frame: Frame, expressions: Sequence[ColExpr], subtype: Subtype, site: Site) -> Frame:
    """Rows kept, grouped or ordered by ``expressions``: INDIRECT inputs of the whole frame."""
    problems: list[Problem] = []
    parts = []
    for expression in expressions:
        deps, found = expression_dependencies(frame, expression, site)
        parts.append(deps)
        problems.extend(found)
    return replace(
        frame,
        dataset=union(frame.dataset, as_indirect(union(*parts), subtype)),
        problems=merge_problems(frame.problems, problems),
    )


def all_columns(frame: Frame) -> list[ColExpr]:
    return [Ref(name) for name in frame.column_names()]


def with_alias(frame: Frame, alias: str) -> Frame:
    return replace(frame, qualifiers=((alias, replace(frame, qualifiers=())),))


def _side_by_side(left: Frame, right: Frame) -> Frame:
    return Frame(
        columns=(*left.columns, *right.columns),
        dataset=union(left.dataset, right.dataset),
        inputs=left.inputs | right.inputs,
        open_groups=(*left.open_groups, *right.open_groups),
        hidden=left.hidden | right.hidden,
        qualifiers=(*left.qualifiers, *right.qualifiers),
        problems=merge_problems(left.problems, right.problems),
        dynamic=left.dynamic,
    )


_LEFT_ONLY = {"semi", "leftsemi", "left_semi", "anti", "leftanti", "left_anti"}
_RIGHT = {"right", "rightouter", "right_outer"}
_FULL = {"full", "outer", "fullouter", "full_outer"}


def join_using(left: Frame, right: Frame, keys: Sequence[str], how: str, site: Site) -> Frame:
    """``left.join(right, ["id"], how)``: each key once, then the other columns of each side."""
    how = how.lower()
    problems: list[Problem] = []
    key_columns = []
    join_deps = []
    lowered = {key.lower() for key in keys}
    for key in keys:
        left_deps, left_problems = resolve_name(left, key, site)
        right_deps, right_problems = resolve_name(right, key, site)
        problems.extend((*left_problems, *right_problems))
        join_deps.append(union(left_deps, right_deps))
        if how in _RIGHT:
            value = right_deps
        elif how in _FULL:
            value = as_value(union(left_deps, right_deps), Subtype.TRANSFORMATION)
        else:
            value = left_deps
        key_columns.append(OutputColumn(key, value))
    dataset = union(left.dataset, right.dataset, as_indirect(union(*join_deps), Subtype.JOIN))
    if how in _LEFT_ONLY:
        return replace(left, dataset=dataset, problems=merge_problems(left.problems, right.problems, problems))
    both = _side_by_side(left, right)
    others = [c for c in (*left.columns, *right.columns) if c.name.lower() not in lowered]
    return replace(
        both,
        columns=(*key_columns, *others),
        dataset=dataset,
        hidden=both.hidden - lowered,
        problems=merge_problems(both.problems, problems),
    )


def join_on(left: Frame, right: Frame, condition: ColExpr | None, how: str, site: Site) -> Frame:
    """``left.join(right, left.id == right.id, how)``: all columns of both sides (or the left's only)."""
    both = _side_by_side(left, right)
    dataset = both.dataset
    problems: tuple[Problem, ...] = ()
    if condition is not None:
        deps, problems = expression_dependencies(both, condition, site)
        dataset = union(dataset, as_indirect(deps, Subtype.JOIN))
    if how.lower() in _LEFT_ONLY:
        return replace(left, dataset=dataset, problems=merge_problems(both.problems, problems))
    return replace(both, dataset=dataset, problems=merge_problems(both.problems, problems))


def glue_join(first: Frame, second: Frame, keys1: Sequence[str], keys2: Sequence[str], site: Site) -> Frame:
    """Glue's ``Join``: every field of both frames, keys included, rows matched on the keys."""
    both = _side_by_side(first, second)
    problems: list[Problem] = []
    parts = []
    for frame, keys in ((first, keys1), (second, keys2)):
        for key in keys:
            deps, found = resolve_name(frame, key, site)
            parts.append(deps)
            problems.extend(found)
    if len(keys1) != len(keys2):
        problems.append(site.problem(f"Join has {len(keys1)} keys on one side and {len(keys2)} on the other"))
    return replace(
        both,
        dataset=union(both.dataset, as_indirect(union(*parts), Subtype.JOIN)),
        problems=merge_problems(both.problems, problems),
        dynamic=True,
    )


def union_frames(left: Frame, right: Frame, *, by_name: bool, site: Site) -> Frame:
    """Rows of both: each column comes from the matching column of each side."""
    problems: list[Problem] = []
    if by_name:
        pairs = []
        for column in left.columns:
            deps, found = resolve_name(right, column.name, site)
            problems.extend(found)
            pairs.append(OutputColumn(column.name, union(column.dependencies, deps)))
        columns = tuple(pairs)
    else:
        if left.is_open or right.is_open:
            problems.append(site.problem("union by position of frames whose columns are not all known"))
        elif len(left.columns) != len(right.columns):
            problems.append(site.problem(f"union of {len(left.columns)} columns with {len(right.columns)} columns"))
        columns = tuple(
            OutputColumn(a.name, union(a.dependencies, b.dependencies))
            for a, b in zip(left.columns, right.columns, strict=False)
        )
    groups: tuple[tuple[str, ...], ...] = ()
    if left.open_groups or right.open_groups:
        # Both sides feed every column: their unknown sources form one group.
        members = tuple(m for frame in (left, right) for group in frame.open_groups for m in group)
        groups = (tuple(dict.fromkeys(members)),)
    return Frame(
        columns=columns,
        dataset=union(left.dataset, right.dataset),
        inputs=left.inputs | right.inputs,
        open_groups=groups,
        hidden=left.hidden & right.hidden,
        problems=merge_problems(left.problems, right.problems, problems),
        dynamic=left.dynamic,
    )


def aggregate(frame: Frame, keys: Sequence[ColExpr], aggregates: Sequence[ColExpr], site: Site) -> Frame:
    """``groupBy(keys).agg(aggregates)``: the keys, then one column per aggregate."""
    grouped = indirect(frame, keys, Subtype.GROUP_BY, site)
    result = select(grouped, [*keys, *aggregates], site)
    return replace(result, open_groups=(), hidden=frozenset())


def apply_mapping(frame: Frame, mappings: Sequence[tuple[str, str, str, str]], site: Site) -> Frame:
    """Glue ``ApplyMapping``: only the mapped fields remain; a changed type is a TRANSFORMATION."""
    columns = []
    problems: list[Problem] = []
    for source, source_type, target, target_type in mappings:
        deps, found = resolve_name(frame, source, site)
        problems.extend(found)
        if source_type.strip().lower() != target_type.strip().lower():
            deps = as_value(deps, Subtype.TRANSFORMATION)
        columns.append(OutputColumn(unquote(target), deps))
    return replace(
        frame,
        columns=tuple(columns),
        open_groups=(),
        hidden=frozenset(),
        qualifiers=(),
        problems=merge_problems(frame.problems, problems),
    )


def rename_by_position(frame: Frame, names: Sequence[str], site: Site) -> Frame:
    """``df.toDF("a", "b")``."""
    if frame.is_open or len(names) != len(frame.columns):
        problem = site.problem(f"toDF({', '.join(names)}) renames by position columns that are not all known")
        if frame.is_open:
            return replace(frame, columns=(), problems=merge_problems(frame.problems, [problem]))
        return frame.with_problems([problem])
    columns = tuple(OutputColumn(n, c.dependencies) for n, c in zip(names, frame.columns, strict=True))
    return replace(frame, columns=columns)


# Sinks --------------------------------------------------------------------------------------------


def written_columns(
    frame: Frame, target: TableSchema | None, *, by_position: bool, site: Site
) -> tuple[tuple[OutputColumn, ...], tuple[Problem, ...]]:
    """The columns a sink receives and where each comes from."""
    if by_position:
        if target is None:
            return (), (site.problem("insert by position into a table that is not in the catalog"),)
        names = [c.name for c in (*target.columns, *target.partition_columns)]
        if frame.is_open:
            return (), (site.problem("insert by position of a frame whose columns are not all known"),)
        problems: tuple[Problem, ...] = ()
        if len(names) != len(frame.columns):
            problems = (site.problem(f"inserting {len(frame.columns)} columns into {len(names)}"),)
        zipped = zip(names, frame.columns, strict=False)
        return tuple(OutputColumn(n, c.dependencies) for n, c in zipped), problems
    if not frame.is_open:
        return _with_split_columns(frame, target, site) if frame.splits else (frame.columns, ())
    if target is not None:
        # The catalog knows the target's columns: each is taken from the frame by name.
        columns = []
        found: list[Problem] = []
        for column in (*target.columns, *target.partition_columns):
            deps, problems = resolve_name(frame, column.name, site)
            found.extend(problems)
            columns.append(OutputColumn(column.name, deps))
        return tuple(columns), tuple(found)
    unknown = sorted({member for group in frame.open_groups for member in group if member})
    if not unknown:
        return frame.columns, ()
    message = (
        f"the columns of {', '.join(unknown)} are not known (no catalog schema): "
        "only the columns the script names are traced"
    )
    return frame.columns, (site.problem(message),)


def _with_split_columns(
    frame: Frame, target: TableSchema | None, site: Site
) -> tuple[tuple[OutputColumn, ...], tuple[Problem, ...]]:
    """``make_cols`` columns: the target's ``name_type`` columns when the catalog has them, else reported."""
    if target is None:
        names = ", ".join(c.name for c in frame.splits)
        problem = site.problem(f"make_cols writes {names} as <name>_<type> columns, one per type found at run time")
        return frame.columns, (problem,)
    present = {c.name.lower() for c in frame.columns}
    added = []
    for column in target.columns:
        split = split_column(frame, column.name.lower())
        if column.name.lower() not in present and split is not None:
            added.append(OutputColumn(column.name, split.dependencies))
    return (*frame.columns, *added), ()
