"""The lineage walk over one qualified query (``lineage.columns.sql`` parses and qualifies it): each relation
(table, CTE, recursive CTE, derived table, parenthesized join, UNNEST, LATERAL VIEW) maps its column names to
dependencies, and each expression combines the dependencies of the columns it reads (``lineage.columns.model``
has the DIRECT/INDIRECT rules), recording its expression chain (``ExpressionNode``) on the way."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from sqlglot import exp

from lakeline.engines.base import Column, TableSchema
from lakeline.lineage.columns.model import (
    NO_DEPENDENCIES,
    Dependencies,
    ExpressionNode,
    OutputColumn,
    RelationLineage,
    SourceField,
    Subtype,
    as_indirect,
    as_value,
    identity_of,
    into_field,
    union,
)
from lakeline.lineage.columns.writes import statement_error

# Functions whose result hides the input's value (OpenLineage ``masking``).
MASKING_FUNCTIONS: tuple[type[exp.Expr], ...] = (
    exp.MD5,
    exp.MD5Digest,
    exp.SHA,
    exp.SHA1Digest,
    exp.SHA2,
    exp.SHA2Digest,
    exp.StandardHash,
    exp.FarmFingerprint,
    exp.Count,
    exp.CountIf,
    exp.ApproxDistinct,
    exp.Hll,
)
# Generators whose first output column is the element's position, not a value of the array.
POSITION_GENERATORS: tuple[type[exp.Expr], ...] = (exp.Posexplode, exp.PosexplodeOuter)
# A position (posexplode's pos, WITH ORDINALITY, WITH OFFSET) is computed from the array, its length and
# order, but holds none of its elements: DIRECT TRANSFORMATION of the array column, never IDENTITY. It is
# what OpenLineage's Spark integration reports for every output of a generator (its GenerateVisitor), so
# events from SQL text and from Spark plans agree. INDIRECT would say the array only picks rows or
# branches, and no INDIRECT subtype (JOIN, FILTER, ...) is what a position is.
POSITION = Subtype.TRANSFORMATION

# Marks left on a SELECT before ``qualify`` rewrites its USING joins: which side a USING column's value
# comes from. Inner and LEFT joins keep the left value, RIGHT the right one, FULL a COALESCE of all.
_USING_META = "lakeline_using"
# Mark on a generator in a SELECT list without aliases of its own, which Spark names pos, col, key, value.
_UNALIASED_META = "lakeline_unaliased"
# A recursive CTE's lineage grows with each pass over its recursive part; it stops growing within a
# few passes (each pass can only add inputs the CTE already has), this bounds it regardless.
_RECURSION_PASSES = 16


def mark_using_joins(query: exp.Expr) -> None:
    for select in query.find_all(exp.Select):
        rules: dict[str, str] = {}
        for join in select.args.get("joins") or []:
            side = (join.side or "").upper()
            for identifier in join.args.get("using") or []:
                name = identifier.name.lower()
                if side == "FULL" or rules.get(name) == "all":
                    rules[name] = "all"
                elif side == "RIGHT":
                    rules[name] = "last"
                else:
                    rules.setdefault(name, "first")
        if rules:
            select.meta[_USING_META] = rules


def mark_unaliased_generators(query: exp.Expr) -> None:
    # Before qualify, which names such a projection _col_N like any other.
    for select in query.find_all(exp.Select):
        for projection in select.expressions:
            if isinstance(projection, exp.Explode):
                projection.meta[_UNALIASED_META] = True


def schema_columns(schema: TableSchema) -> list[Column]:
    return [*schema.columns, *schema.partition_columns]


def _label(relation: str | None, name: str) -> str:
    return f"{relation}.{name}" if relation else name


def _source_column(dataset: str, name: str) -> OutputColumn:
    source = SourceField(dataset, name)
    dependencies = identity_of(dataset, name)
    return OutputColumn(name, dependencies, None, ExpressionNode(str(source), source=source, dependencies=dependencies))


def unique_nodes(nodes: Sequence[ExpressionNode]) -> tuple[ExpressionNode, ...]:
    seen: dict[int, ExpressionNode] = {}
    for node in nodes:
        seen.setdefault(id(node), node)
    return tuple(seen.values())


@dataclass
class _Scope:
    """The relations one SELECT can see, by alias, and the scope around it (correlated subqueries)."""

    sources: dict[str, dict[str, OutputColumn]] = field(default_factory=dict)
    outer: _Scope | None = None
    using: dict[str, str] = field(default_factory=dict)
    projections: dict[str, OutputColumn] | None = None

    def resolve(self, column: exp.Column, sql: str) -> OutputColumn:
        name = column.name.lower()
        table = column.table.lower()
        if not table:
            # Only ORDER BY (and similar) may name an output column without a table after qualify.
            scope: _Scope | None = self
            while scope is not None:
                if scope.projections is not None and name in scope.projections:
                    return scope.projections[name]
                scope = scope.outer
            raise statement_error(f"column {name!r} cannot be resolved", sql)
        scope = self
        while scope is not None:
            if table in scope.sources:
                columns = scope.sources[table]
                if name not in columns:
                    raise statement_error(f"relation {table!r} has no column {name!r}", sql)
                return columns[name]
            scope = scope.outer
        raise statement_error(f"column {table}.{name} refers to an unknown relation", sql)


def _struct_path(node: exp.Dot) -> tuple[exp.Expr, str]:
    parts: list[str] = []
    base: exp.Expr = node
    while isinstance(base, exp.Dot):
        parts.append(base.expression.name.lower())
        base = base.this
    return base, ".".join(reversed(parts))


def _join_tree(source: exp.Expr) -> tuple[list[exp.Expr], list[exp.Join]]:
    """A parenthesized join ``((a JOIN b ON ...) JOIN c ON ...)`` as its relations and joins; anything else
    as itself. sqlglot hangs each level's joins on the node of that level (the unaliased parentheses, or
    the first table inside them), so every level is collected, innermost first."""
    levels: list[exp.Expr] = []
    inner = source
    while isinstance(inner, exp.Subquery) and not inner.alias and isinstance(inner.this, exp.Subquery | exp.Table):
        levels.append(inner)
        inner = inner.this
    if not levels:
        return [source], []
    levels.append(inner)
    sources, nested = [inner], []
    for level in reversed(levels):
        for join in level.args.get("joins") or []:
            more, more_joins = _join_tree(join.this)
            sources += more
            nested += [*more_joins, join]
    if not nested and not isinstance(inner, exp.Table):
        return [source], []  # parentheses around a query, not a join
    return sources, nested


class Walker:
    """Computes the lineage of one qualified query."""

    def __init__(self, schemas: dict[tuple[str, str], TableSchema], sql: str) -> None:
        self.schemas = schemas
        self.sql = sql
        self.inputs: set[str] = set()

    # Relations -----------------------------------------------------------------------------------

    def query(
        self, node: exp.Expr, ctes: dict[str, RelationLineage], outer: _Scope | None, label: str | None
    ) -> RelationLineage:
        with_ = node.args.get("with_")
        if isinstance(with_, exp.With):
            ctes = dict(ctes)
            for cte in with_.expressions:
                name = cte.alias_or_name.lower()
                if with_.args.get("recursive") and name in {
                    t.name.lower() for t in cte.this.find_all(exp.Table) if not t.db
                }:
                    ctes[name] = self._recursive(cte, name, ctes, outer)
                else:
                    ctes[name] = self._renamed(self.query(cte.this, ctes, outer, name), cte.args.get("alias"))
        if isinstance(node, exp.Subquery):
            return self.query(node.this, ctes, outer, label)
        if isinstance(node, exp.Select):
            return self._select(node, ctes, outer, label)
        if isinstance(node, exp.SetOperation):
            return self._set_operation(node, ctes, outer, label)
        if isinstance(node, exp.Values):
            return RelationLineage(self._value_columns(node, label))
        raise statement_error(f"unsupported query form {type(node).__name__}", self.sql)

    def _recursive(
        self, cte: exp.CTE, name: str, ctes: dict[str, RelationLineage], outer: _Scope | None
    ) -> RelationLineage:
        body = cte.this
        if not isinstance(body, exp.Union):
            raise statement_error(f"recursive CTE {name!r} must be an anchor UNION [ALL] a recursive part", self.sql)
        alias = cte.args.get("alias")
        anchor = self._renamed(self.query(body.left, ctes, outer, name), alias)
        current = anchor
        for _ in range(_RECURSION_PASSES):
            step = self._renamed(self.query(body.right, {**ctes, name: current}, outer, name), alias)
            if len(step.columns) != len(anchor.columns):
                raise statement_error(f"recursive CTE {name!r}: its parts have different numbers of columns", self.sql)
            combined = self._combine(anchor, step, name, "UNION ALL (recursive)")
            if [c.dependencies for c in combined.columns] == [c.dependencies for c in current.columns] and (
                combined.dataset == current.dataset
            ):
                return combined
            current = combined
        return current

    def _combine(self, left: RelationLineage, right: RelationLineage, label: str | None, how: str) -> RelationLineage:
        columns = []
        for a, b in zip(left.columns, right.columns, strict=True):
            dependencies = union(a.dependencies, b.dependencies)
            children = unique_nodes([n for n in (a.node, b.node) if n])
            node = ExpressionNode(_label(label, a.name), how, children=children, dependencies=dependencies)
            columns.append(OutputColumn(a.name, dependencies, a.expression, node))
        return RelationLineage(tuple(columns), union(left.dataset, right.dataset))

    def _renamed(self, relation: RelationLineage, alias: exp.Expr | None) -> RelationLineage:
        names = [column.name.lower() for column in alias.columns] if isinstance(alias, exp.TableAlias) else []
        if not names:
            return relation
        if len(names) != len(relation.columns):
            raise statement_error(
                f"alias lists {len(names)} columns but its query has {len(relation.columns)}", self.sql
            )
        return RelationLineage(
            tuple(
                OutputColumn(name, column.dependencies, column.expression, column.node)
                for name, column in zip(names, relation.columns, strict=True)
            ),
            relation.dataset,
        )

    def _value_columns(self, values: exp.Values, label: str | None) -> tuple[OutputColumn, ...]:
        alias = values.args.get("alias")
        names = [column.name.lower() for column in alias.columns] if isinstance(alias, exp.TableAlias) else []
        rows = values.expressions
        first = rows[0].expressions if rows and isinstance(rows[0], exp.Tuple) else list(rows[:1])
        names = names or [f"_col_{index}" for index in range(len(first))]
        return tuple(
            OutputColumn(name, NO_DEPENDENCIES, None, ExpressionNode(_label(label, name), "VALUES")) for name in names
        )

    def _set_operation(
        self, node: exp.SetOperation, ctes: dict[str, RelationLineage], outer: _Scope | None, label: str | None
    ) -> RelationLineage:
        left = self.query(node.left, ctes, outer, label)
        right = self.query(node.right, ctes, outer, label)
        if len(left.columns) != len(right.columns):
            raise statement_error(
                f"{type(node).__name__.upper()} sides have {len(left.columns)} and {len(right.columns)} columns",
                self.sql,
            )
        if isinstance(node, exp.Union):
            distinct = bool(node.args.get("distinct"))
            combined = self._combine(left, right, label, "UNION" if distinct else "UNION ALL")
            columns, dataset = combined.columns, combined.dataset
            if distinct:
                # UNION without ALL removes duplicates: every column decides which rows remain.
                every = union(*(column.dependencies for column in columns))
                dataset = union(dataset, as_indirect(every, Subtype.GROUP_BY))
        else:
            # INTERSECT / EXCEPT: the right side only decides which left rows stay.
            columns = left.columns
            right_values = union(*(c.dependencies for c in right.columns))
            dataset = union(left.dataset, right.dataset, as_indirect(right_values, Subtype.FILTER))
        order = node.args.get("order")
        if order is not None:
            scope = _Scope(projections={column.name: column for column in columns}, outer=outer)
            dataset = union(dataset, as_indirect(self.expr(order, scope, ctes, []), Subtype.SORT))
        return RelationLineage(columns, dataset)

    def _source(self, source: exp.Expr, ctes: dict[str, RelationLineage], scope: _Scope) -> tuple[str, RelationLineage]:
        alias = source.alias_or_name.lower()
        if isinstance(source, exp.Table) and not isinstance(source.this, exp.Func):
            if not source.db and source.name.lower() in ctes:
                relation = self._renamed(ctes[source.name.lower()], source.args.get("alias"))
                return alias, relation
            database, table = source.db.lower(), source.name.lower()
            schema = self.schemas[(database, table)]
            dataset = f"{database}.{table}"
            self.inputs.add(dataset)
            columns = tuple(_source_column(dataset, column.name) for column in schema_columns(schema))
            return alias, self._renamed(RelationLineage(columns), source.args.get("alias"))
        if isinstance(source, exp.Subquery):
            relation = self.query(source.this, ctes, scope.outer, alias)
            return alias, self._renamed(relation, source.args.get("alias"))
        if isinstance(source, exp.Unnest):
            return alias, self._unnest(source, source.expressions, alias, ctes, scope)
        if isinstance(source, exp.Lateral):
            return alias, self._unnest(source, [source.this], alias, ctes, scope)
        if isinstance(source, exp.Values):
            return alias, RelationLineage(self._value_columns(source, alias))
        raise statement_error(f"unsupported FROM item {source.sql()[:60]!r}", self.sql)

    def _unnest(
        self,
        source: exp.Expr,
        expressions: Sequence[exp.Expr],
        label: str,
        ctes: dict[str, RelationLineage],
        scope: _Scope,
    ) -> RelationLineage:
        alias = source.args.get("alias")
        names = [column.name.lower() for column in alias.columns] if isinstance(alias, exp.TableAlias) else []
        offset = source.args.get("offset")
        if isinstance(offset, exp.Identifier):
            names.append(offset.name.lower())  # UNNEST ... WITH ORDINALITY AS t(x, n): sqlglot keeps n apart
        if not names:
            raise statement_error(f"{source.sql()[:60]!r} needs column aliases, e.g. AS t(x)", self.sql)
        refs: list[ExpressionNode] = []
        parts = [as_value(self.expr(item, scope, ctes, refs), Subtype.TRANSFORMATION) for item in expressions]
        generator = expressions[0] if len(expressions) == 1 else None
        # The element's position (WITH ORDINALITY, WITH OFFSET, posexplode): see POSITION.
        position: str | None = None
        if isinstance(generator, POSITION_GENERATORS) and len(names) > 1:
            position = names[0]
        elif (offset or source.args.get("ordinality")) and len(names) > 1:
            position = names[-1]
        value_names = [name for name in names if name != position]
        text = " ".join(source.sql(copy=False).split())[:80]
        children = unique_nodes(refs)
        if len(parts) == len(value_names):
            values = dict(zip(value_names, parts, strict=True))
        else:
            # One array of rows or a map spread over several columns: each comes from all of it.
            values = {name: union(*parts) for name in value_names}
        columns = []
        for name in names:
            if name == position:
                dependencies = as_value(union(*parts), POSITION)
                node = ExpressionNode(_label(label, name), f"position in {text}", None, children, dependencies)
            else:
                dependencies = values[name]
                node = ExpressionNode(_label(label, name), text, None, children, dependencies)
            columns.append(OutputColumn(name, dependencies, None, node))
        return RelationLineage(tuple(columns))

    def _select(
        self, node: exp.Select, ctes: dict[str, RelationLineage], outer: _Scope | None, label: str | None
    ) -> RelationLineage:
        scope = _Scope(outer=outer, using=dict(node.meta.get(_USING_META, {})))
        dataset: list[Dependencies] = []
        from_ = node.args.get("from_")
        joins: list[exp.Join] = []
        sources: list[exp.Expr] = []
        for item in ([from_.this] if from_ is not None else []) + [join.this for join in node.args.get("joins") or []]:
            more, nested = _join_tree(item)
            sources += more
            joins += nested
        joins += node.args.get("joins") or []
        for source in sources:
            alias, relation = self._source(source, ctes, scope)
            scope.sources[alias] = {column.name: column for column in relation.columns}
            dataset.append(relation.dataset)
        for lateral in node.args.get("laterals") or []:
            alias, relation = self._source(lateral, ctes, scope)
            scope.sources[alias] = {column.name: column for column in relation.columns}
        for join in joins:
            condition = join.args.get("on")
            if condition is not None:
                dataset.append(as_indirect(self.expr(condition, scope, ctes, []), Subtype.JOIN))

        columns: list[OutputColumn] = []
        for projection in node.expressions:
            columns += self._projection(projection, scope, ctes, label)
        scope.projections = {column.name: column for column in columns}

        for key, subtype in (
            ("where", Subtype.FILTER),
            ("group", Subtype.GROUP_BY),
            ("having", Subtype.FILTER),
            ("qualify", Subtype.FILTER),
            ("order", Subtype.SORT),
        ):
            clause = node.args.get(key)
            if clause is not None:
                dataset.append(as_indirect(self.expr(clause, scope, ctes, []), subtype))
        if node.args.get("distinct"):
            dataset.append(as_indirect(union(*(c.dependencies for c in columns)), Subtype.GROUP_BY))
        return RelationLineage(tuple(columns), union(*dataset))

    def _projection(
        self, projection: exp.Expr, scope: _Scope, ctes: dict[str, RelationLineage], label: str | None
    ) -> list[OutputColumn]:
        refs: list[ExpressionNode] = []
        text = projection.sql(copy=False)  # the generic generator does not change the tree
        generator = projection.this if isinstance(projection, exp.Alias | exp.Aliases) else None
        names: list[str] = []
        if isinstance(projection, exp.Aliases):
            # posexplode(a) AS (pos, value), explode(map) AS (k, v): one generator, several columns.
            names = [identifier.name.lower() for identifier in projection.expressions]
        elif isinstance(generator, exp.Explode) and generator.meta.get(_UNALIASED_META):
            names = self._generator_names(generator, scope)
        if generator is not None and names:
            value = as_value(self.expr(generator, scope, ctes, refs), Subtype.TRANSFORMATION)
            position = names[0] if isinstance(generator, POSITION_GENERATORS) and len(names) > 1 else None
            columns = []
            for name in names:
                dependencies = as_value(value, POSITION) if name == position else value
                what = f"position in {text}" if name == position else text
                node = ExpressionNode(_label(label, name), what, None, unique_nodes(refs), dependencies)
                columns.append(OutputColumn(name, dependencies, text, node))
            return columns
        dependencies = self.expr(projection, scope, ctes, refs)
        name = projection.alias_or_name.lower()
        node = ExpressionNode(_label(label, name), text, None, unique_nodes(refs), dependencies)
        return [OutputColumn(name, dependencies, text, node)]

    def _generator_names(self, generator: exp.Explode, scope: _Scope) -> list[str]:
        """Spark's names for the columns of an unaliased explode or posexplode: [pos,] col for an array,
        [pos,] key, value for a map (known from the catalog type of the column it explodes)."""
        names = ["pos"] if isinstance(generator, POSITION_GENERATORS) else []
        argument = generator.this
        source = scope.resolve(argument, self.sql).node if isinstance(argument, exp.Column) else None
        field = source.source if source is not None else None
        glue_type = ""
        if field is not None:
            database, table = field.dataset.split(".", 1)
            schema = self.schemas.get((database, table))
            types = {column.name: column.type for column in schema_columns(schema)} if schema else {}
            glue_type = types.get(field.field, "")
        return [*names, *(["key", "value"] if glue_type.lower().startswith("map<") else ["col"])]

    # Expressions ---------------------------------------------------------------------------------

    def expr(
        self, node: exp.Expr, scope: _Scope, ctes: dict[str, RelationLineage], refs: list[ExpressionNode]
    ) -> Dependencies:
        """Dependencies of ``node``; the expression nodes of the columns it reads are added to ``refs``."""
        if isinstance(node, exp.Column):
            column = scope.resolve(node, self.sql)
            if column.node is not None:
                refs.append(column.node)
            return column.dependencies
        if isinstance(node, exp.Dot):
            return self._field(node, scope, ctes, refs)
        if isinstance(node, (exp.Literal, exp.Null, exp.Boolean, exp.Star, exp.DataType, exp.Identifier)):
            return NO_DEPENDENCIES
        if isinstance(node, (exp.Alias, exp.Paren, exp.Cast)):
            return self.expr(node.this, scope, ctes, refs)
        if isinstance(node, (exp.Subquery, exp.Exists)):
            relation = self.query(node.this, ctes, scope, "subquery")
            refs.extend(column.node for column in relation.columns if column.node is not None)
            values = union(*(column.dependencies for column in relation.columns))
            if isinstance(node, exp.Exists):
                values = as_value(values, Subtype.TRANSFORMATION)
            # A scalar subquery's value, plus whatever decided which row it came from.
            return union(values, relation.dataset)
        if isinstance(node, exp.Window):
            value = self.expr(node.this, scope, ctes, refs)
            keys = [*(node.args.get("partition_by") or [])]
            order = node.args.get("order")
            if order is not None:
                keys.append(order)
            window = union(*(self.expr(key, scope, ctes, refs) for key in keys))
            return union(value, as_indirect(window, Subtype.WINDOW))
        if isinstance(node, exp.Filter):
            # agg(x) FILTER (WHERE c): c picks the rows the aggregate sees.
            value = self.expr(node.this, scope, ctes, refs)
            condition = self.expr(node.expression, scope, ctes, refs)
            return union(value, as_indirect(condition, Subtype.CONDITIONAL))
        if isinstance(node, exp.Case):
            return self._case(node, scope, ctes, refs)
        if isinstance(node, exp.If):
            condition = self.expr(node.this, scope, ctes, refs)
            branches = union(
                *(self.expr(node.args[key], scope, ctes, refs) for key in ("true", "false") if node.args.get(key))
            )
            return union(as_value(branches, Subtype.TRANSFORMATION), as_indirect(condition, Subtype.CONDITIONAL))
        if isinstance(node, exp.Coalesce):
            using = self._using_column(node, scope, refs)
            if using is not None:
                return using
        children = union(*(self.expr(child, scope, ctes, refs) for child in node.iter_expressions()))
        subtype = Subtype.AGGREGATION if isinstance(node, exp.AggFunc) else Subtype.TRANSFORMATION
        return as_value(children, subtype, masking=isinstance(node, MASKING_FUNCTIONS))

    def _field(
        self, node: exp.Dot, scope: _Scope, ctes: dict[str, RelationLineage], refs: list[ExpressionNode]
    ) -> Dependencies:
        base, path = _struct_path(node)
        if not isinstance(base, exp.Column):
            # A field of a computed struct: whatever the struct comes from.
            return as_value(self.expr(base, scope, ctes, refs), Subtype.TRANSFORMATION)
        column = scope.resolve(base, self.sql)
        dependencies = into_field(column.dependencies, path)
        parent = column.node
        if parent is not None and parent.source is not None:
            leaf = SourceField(parent.source.dataset, f"{parent.source.field}.{path}")
            refs.append(ExpressionNode(str(leaf), source=leaf))
        elif parent is not None:
            refs.append(ExpressionNode(f"{parent.label}.{path}", f"field {path}", children=(parent,)))
        return dependencies

    def _case(
        self, node: exp.Case, scope: _Scope, ctes: dict[str, RelationLineage], refs: list[ExpressionNode]
    ) -> Dependencies:
        conditions: list[Dependencies] = []
        values: list[Dependencies] = []
        if node.this is not None:
            conditions.append(self.expr(node.this, scope, ctes, refs))
        for branch in node.args.get("ifs") or []:
            conditions.append(self.expr(branch.this, scope, ctes, refs))
            values.append(self.expr(branch.args["true"], scope, ctes, refs))
        default = node.args.get("default")
        if default is not None:
            values.append(self.expr(default, scope, ctes, refs))
        return union(
            as_value(union(*values), Subtype.TRANSFORMATION),
            as_indirect(union(*conditions), Subtype.CONDITIONAL),
        )

    def _using_column(self, node: exp.Coalesce, scope: _Scope, refs: list[ExpressionNode]) -> Dependencies | None:
        arguments = [node.this, *node.expressions]
        if not all(isinstance(argument, exp.Column) for argument in arguments):
            return None
        names = {argument.name.lower() for argument in arguments}
        tables = [argument.table.lower() for argument in arguments]
        if len(names) != 1 or len(set(tables)) != len(tables) or not all(t in scope.sources for t in tables):
            return None
        rule = scope.using.get(names.pop())
        if rule is None:
            return None
        chosen = arguments[:1] if rule == "first" else arguments[-1:] if rule == "last" else arguments
        resolved = [scope.resolve(argument, self.sql) for argument in chosen]
        refs.extend(column.node for column in resolved if column.node is not None)
        if rule != "all":
            return resolved[0].dependencies
        return as_value(union(*(column.dependencies for column in resolved)), Subtype.TRANSFORMATION)


@lru_cache(maxsize=512)
def glue_type(data_type: exp.DataType | None) -> str:
    """A type as Glue writes it (``bigint``, ``struct<city:string>``); ``""`` when it is not known."""
    if data_type is None or data_type.is_type(exp.DataType.Type.UNKNOWN, exp.DataType.Type.NULL):
        return ""
    return data_type.sql("hive").lower().replace(": ", ":").replace(", ", ",")
