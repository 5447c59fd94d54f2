"""Column lineage from Spark's analyzed logical plan, read as JSON through py4j; no extra JVM jar.

This is the Ushas idea done from the outside: after analysis every attribute carries an ``exprId`` that is
unique in the plan, and every expression names the attributes it reads by those ids. Walking the plan
bottom up, each node's output attributes get the dependencies of the expressions that compute them,
found by matching ids against the node's children's outputs (``Alias`` makes a new id, an
``AttributeReference`` passes one on). Relations (``LogicalRelation``, ``HiveTableRelation``) start the
chains with IDENTITY edges to their table's columns.

The JSON is ``TreeNode.toJSON``: a tree flattened in pre-order, each node with ``num-children``; a field
naming a child holds its index; an expression or plan held in a field (a projection list, a join
condition, a subquery's plan) is itself a flattened list.

Classification matches ``lineage.columns.sql`` so that both sources can be compared: Filter FILTER, Join JOIN,
Aggregate grouping GROUP_BY, Sort SORT, Distinct GROUP_BY (all columns), window partition and order
WINDOW, CASE/IF conditions CONDITIONAL, aggregate functions AGGREGATION, casts keep their subtype.

Where the two sources differ, by construction:
- ``INSERT INTO t (a, b)``: Spark fills t's other columns with NULL, so the plan has them (no inputs);
  the SQL text only has the listed ones.
- A view: Spark's plan goes through it to its tables; the SQL path treats a catalogued view as a table.
- GROUPING SETS / ROLLUP / CUBE (an ``Expand`` node) and ``ExistenceJoin`` are refused here, with a
  ``PlanLineageError``; the SQL path handles them as plain groupings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlglot

from lakeline.errors import LakelineError
from lakeline.lineage.columns.model import (
    NO_DEPENDENCIES,
    Dependencies,
    ExpressionNode,
    OutputColumn,
    SourceField,
    StatementLineage,
    Subtype,
    as_indirect,
    as_value,
    identity_of,
    into_field,
    union,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class PlanLineageError(LakelineError):
    """The analyzed plan holds something this reader cannot follow; no lineage is returned."""


MASKING_EXPRESSIONS = frozenset(
    {"Sha1", "Sha2", "Md5", "Crc32", "XxHash64", "Murmur3Hash", "Count", "HyperLogLogPlusPlus", "CountIf"}
)
CAST_EXPRESSIONS = frozenset({"Cast", "AnsiCast", "TryCast", "UpCast"})
PASS_THROUGH_PLANS = frozenset(
    {
        "SubqueryAlias",
        "View",
        "ResolvedHint",
        "RepartitionByExpression",
        "Repartition",
        "RebalancePartitions",
        "GlobalLimit",
        "LocalLimit",
        "Limit",
        "Offset",
        "Tail",
        "Sample",
        "Deduplicate",
        "Subquery",
    }
)
SPARK_POSITION_GENERATORS = frozenset({"PosExplode"})
SUBQUERY_EXPRESSIONS = frozenset({"ScalarSubquery", "ListQuery", "Exists", "LateralSubquery"})
LEFT_ONLY_JOINS = ("LeftSemi", "LeftAnti")


@dataclass
class PlanNode:
    """One node of a ``toJSON`` tree: short class name, its raw fields, its children in order."""

    kind: str
    fields: dict[str, Any]
    children: list[PlanNode]

    def child(self, name: str) -> PlanNode:
        value = self.fields.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return self.children[value]
        if isinstance(value, list) and value and isinstance(value[0], dict):
            return unflatten(value)
        raise PlanLineageError(f"{self.kind} has no tree in field {name!r}")

    def optional_child(self, name: str) -> PlanNode | None:
        value = self.fields.get(name)
        if value is None or value == []:
            return None
        return self.child(name)

    def child_list(self, name: str) -> list[PlanNode]:
        """A ``Seq`` field: each element a flattened tree, or the index of a child."""
        items = self.fields.get(name) or []
        result = []
        for item in items:
            if isinstance(item, int) and not isinstance(item, bool):
                result.append(self.children[item])
            elif isinstance(item, list) and item:
                result.append(unflatten(item))
        return result


def unflatten(nodes: list[dict[str, Any]]) -> PlanNode:
    position = 0

    def build() -> PlanNode:
        nonlocal position
        raw = nodes[position]
        position += 1
        children = [build() for _ in range(int(raw.get("num-children", 0)))]
        return PlanNode(str(raw["class"]).rsplit(".", 1)[-1], raw, children)

    root = build()
    if position != len(nodes):
        raise PlanLineageError(f"plan JSON has {len(nodes) - position} nodes outside its tree")
    return root


def _expr_id(node: PlanNode) -> int:
    value = node.fields.get("exprId")
    if not isinstance(value, dict) or "id" not in value:
        raise PlanLineageError(f"{node.kind} has no exprId")
    return int(value["id"])


def _table_identifier(catalog_table: Any) -> str:
    identifier = catalog_table.get("identifier", {}) if isinstance(catalog_table, dict) else {}
    database, table = identifier.get("database"), identifier.get("table")
    if not database or not table:
        raise PlanLineageError("relation without a catalog table: only catalog tables have a name")
    return f"{str(database).lower()}.{str(table).lower()}"


@dataclass(frozen=True)
class Attribute:
    name: str
    expr_id: int
    dependencies: Dependencies
    expression: str | None = None
    node: ExpressionNode | None = None
    """The attribute's expression chain (Ushas's tree): ``name#id``, the Alias computing it, its inputs."""


@dataclass(frozen=True)
class PlanRelation:
    outputs: tuple[Attribute, ...]
    dataset: Dependencies = NO_DEPENDENCIES


@dataclass
class _Env:
    attributes: dict[int, Attribute]
    outer: _Env | None = None

    def lookup(self, expr_id: int, name: str) -> Attribute:
        env: _Env | None = self
        while env is not None:
            if expr_id in env.attributes:
                return env.attributes[expr_id]
            env = env.outer
        raise PlanLineageError(f"attribute {name}#{expr_id} is not produced by any child of its node")


def _env(relations: list[PlanRelation], outer: _Env | None) -> _Env:
    return _Env({a.expr_id: a for r in relations for a in r.outputs}, outer)


def _node(
    label: str, expression: str | None, refs: list[ExpressionNode], dependencies: Dependencies | None = None
) -> ExpressionNode:
    unique: dict[int, ExpressionNode] = {}
    for ref in refs:
        unique.setdefault(id(ref), ref)
    return ExpressionNode(label, expression, None, tuple(unique.values()), dependencies)


# Operators Spark prints between their operands (``(a#0 + 1)``), as in its own plan strings.
INFIX = {
    "Add": "+",
    "Subtract": "-",
    "Multiply": "*",
    "Divide": "/",
    "Remainder": "%",
    "EqualTo": "=",
    "EqualNullSafe": "<=>",
    "LessThan": "<",
    "LessThanOrEqual": "<=",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
    "And": "AND",
    "Or": "OR",
}


def _data_type(node: PlanNode) -> str:
    kind = node.fields.get("dataType")
    return str(kind.get("type") if isinstance(kind, dict) else kind)


def render(node: PlanNode) -> str:
    """A short text of an expression, in Spark's ``name#id`` style, for trees and messages."""
    kind, children = node.kind, node.children
    if kind == "AttributeReference":
        return f"{node.fields.get('name')}#{_expr_id(node)}"
    if kind == "OuterReference":
        return f"outer({render(node.child('e'))})"
    if kind == "Alias":
        return f"{render(children[0])} AS {node.fields.get('name')}#{_expr_id(node)}"
    if kind == "Literal":
        value = node.fields.get("value")
        return "null" if value is None else repr(value) if _data_type(node) == "string" else str(value)
    if kind in SUBQUERY_EXPRESSIONS:
        return f"{kind.lower()}(...)"
    if kind in CAST_EXPRESSIONS and children:
        return f"cast({render(children[0])} as {_data_type(node)})"
    if kind == "GetStructField" and children:
        return f"{render(children[0])}.{node.fields.get('name') or node.fields.get('ordinal')}"
    if kind in INFIX and len(children) == 2:
        return f"({render(children[0])} {INFIX[kind]} {render(children[1])})"
    return f"{kind.lower()}({', '.join(render(child) for child in children)})"


def _struct_path(node: PlanNode) -> tuple[PlanNode, str]:
    """``s.info.city``: the node under nested ``GetStructField``s, and the path of field names."""
    path: list[str] = []
    while node.kind == "GetStructField" and node.children:
        path.append(str(node.fields.get("name") or node.fields.get("ordinal")).lower())
        node = node.children[0]
    return node, ".".join(reversed(path))


@dataclass
class _PlanWalker:
    inputs: set[str] = field(default_factory=set)
    ctes: dict[int, PlanRelation] = field(default_factory=dict)

    def plan(self, node: PlanNode, outer: _Env | None = None) -> PlanRelation:
        kind = node.kind
        if kind == "LogicalRelation":
            return self._relation(_table_identifier(node.fields.get("catalogTable")), node.child_list("output"))
        if kind == "HiveTableRelation":
            table_name = _table_identifier(node.fields.get("tableMeta"))
            columns = [*node.child_list("dataCols"), *node.child_list("partitionCols")]
            return self._relation(table_name, columns)
        if kind in ("LocalRelation", "OneRowRelation", "Range"):
            outputs = tuple(
                Attribute(name, expr_id, NO_DEPENDENCIES, None, ExpressionNode(f"{name}#{expr_id}", kind))
                for name, expr_id in ((str(a.fields.get("name")), _expr_id(a)) for a in node.child_list("output"))
            )
            return PlanRelation(outputs)
        if kind in PASS_THROUGH_PLANS:
            return self.plan(node.children[0], outer)
        if kind in ("Filter", "Sort", "Distinct"):
            return self._shaping(node, outer)
        if kind == "Project":
            child = self.plan(node.children[0], outer)
            env = _env([child], outer)
            return PlanRelation(self._named(node.child_list("projectList"), env), child.dataset)
        if kind == "Aggregate":
            child = self.plan(node.children[0], outer)
            env = _env([child], outer)
            grouping = union(*(self.expr(e, env) for e in node.child_list("groupingExpressions")))
            outputs = self._named(node.child_list("aggregateExpressions"), env)
            return PlanRelation(outputs, union(child.dataset, as_indirect(grouping, Subtype.GROUP_BY)))
        if kind == "Window":
            child = self.plan(node.children[0], outer)
            env = _env([child], outer)
            windows = self._named(node.child_list("windowExpressions"), env)
            return PlanRelation((*child.outputs, *windows), child.dataset)
        if kind == "Join":
            return self._join(node, outer)
        if kind == "Union":
            return self._union(node, outer)
        if kind in ("Intersect", "Except"):
            left, right = (self.plan(side, outer) for side in node.children)
            right_values = union(*(a.dependencies for a in right.outputs))
            kept = union(left.dataset, right.dataset, as_indirect(right_values, Subtype.FILTER))
            return PlanRelation(left.outputs, kept)
        if kind == "WithCTE":
            for cte_plan in node.child_list("cteDefs"):
                self.plan(cte_plan, outer)
            return self.plan(node.child("plan"), outer)
        if kind == "CTERelationDef":
            relation = self.plan(node.children[0], outer)
            self.ctes[int(node.fields["id"])] = relation
            return relation
        if kind == "CTERelationRef":
            cte_id = int(node.fields["cteId"])
            if cte_id not in self.ctes:
                raise PlanLineageError(f"CTE {cte_id} is referenced before its definition")
            definition = self.ctes[cte_id]
            references = node.child_list("output")
            outputs = tuple(
                Attribute(
                    name,
                    expr_id,
                    source.dependencies,
                    source.expression,
                    _node(f"{name}#{expr_id}", "CTE", [source.node] if source.node else []),
                )
                for name, expr_id, source in (
                    (str(ref.fields.get("name")), _expr_id(ref), source)
                    for ref, source in zip(references, definition.outputs, strict=True)
                )
            )
            return PlanRelation(outputs, definition.dataset)
        if kind == "Generate":
            child = self.plan(node.children[0], outer)
            env = _env([child], outer)
            generator = node.child("generator")
            generated = as_value(self.expr(generator, env), Subtype.TRANSFORMATION)
            refs = self._referenced(generator, env)
            produced = node.child_list("generatorOutput")
            generated_outputs: list[Attribute] = []
            for index, attribute in enumerate(produced):
                name, expr_id = str(attribute.fields.get("name")), _expr_id(attribute)
                # posexplode's first column is the element's position: computed from the array, like its
                # values (see lineage.columns.sql.POSITION), but no value of it, as its expression says.
                is_position = index == 0 and generator.kind in SPARK_POSITION_GENERATORS and len(produced) > 1
                what = f"position in {render(generator)}" if is_position else render(generator)
                chain = _node(f"{name}#{expr_id}", what, refs, generated)
                generated_outputs.append(Attribute(name, expr_id, generated, None, chain))
            return PlanRelation((*child.outputs, *generated_outputs), child.dataset)
        raise PlanLineageError(f"plan node {kind} is not supported for column lineage")

    def _relation(self, dataset: str, attributes: list[PlanNode]) -> PlanRelation:
        self.inputs.add(dataset)
        outputs = []
        for attribute in attributes:
            name = str(attribute.fields.get("name")).lower()
            expr_id = _expr_id(attribute)
            leaf = ExpressionNode(f"{name}#{expr_id}", None, SourceField(dataset, name))
            outputs.append(Attribute(name, expr_id, identity_of(dataset, name), None, leaf))
        return PlanRelation(tuple(outputs))

    def _shaping(self, node: PlanNode, outer: _Env | None) -> PlanRelation:
        child = self.plan(node.children[0], outer)
        env = _env([child], outer)
        if node.kind == "Filter":
            shaped = as_indirect(self.expr(node.child("condition"), env), Subtype.FILTER)
        elif node.kind == "Sort":
            order = union(*(self.expr(e, env) for e in node.child_list("order")))
            shaped = as_indirect(order, Subtype.SORT)
        else:
            shaped = as_indirect(union(*(a.dependencies for a in child.outputs)), Subtype.GROUP_BY)
        return PlanRelation(child.outputs, union(child.dataset, shaped))

    def _named(self, expressions: list[PlanNode], env: _Env) -> tuple[Attribute, ...]:
        outputs = []
        for expression in expressions:
            if expression.kind not in ("Alias", "AttributeReference"):
                raise PlanLineageError(f"output expression {expression.kind} has no name")
            name = str(expression.fields.get("name")).lower()
            expr_id = _expr_id(expression)
            if expression.kind == "AttributeReference":
                passed = env.lookup(expr_id, name)
                outputs.append(Attribute(name, expr_id, passed.dependencies, render(expression), passed.node))
                continue
            dependencies = self.expr(expression, env)
            node = _node(f"{name}#{expr_id}", render(expression), self._referenced(expression, env), dependencies)
            outputs.append(Attribute(name, expr_id, dependencies, render(expression), node))
        return tuple(outputs)

    def _referenced(self, node: PlanNode, env: _Env) -> list[ExpressionNode]:
        """The expression nodes of the attributes an expression reads (not those inside its subqueries)."""
        if node.kind == "AttributeReference":
            found = env.lookup(_expr_id(node), str(node.fields.get("name"))).node
            return [found] if found is not None else []
        if node.kind == "OuterReference":
            return self._referenced(node.child("e"), env)
        if node.kind == "GetStructField":
            base, path = _struct_path(node)
            if base.kind == "AttributeReference":
                attribute = env.lookup(_expr_id(base), str(base.fields.get("name")))
                source = attribute.node.source if attribute.node else None
                if source is not None:
                    leaf = SourceField(source.dataset, f"{source.field}.{path}")
                    return [ExpressionNode(f"{render(base)}.{path}", None, leaf)]
            return self._referenced(base, env)
        if node.kind in SUBQUERY_EXPRESSIONS:
            return []
        return [ref for child in node.children for ref in self._referenced(child, env)]

    def _join(self, node: PlanNode, outer: _Env | None) -> PlanRelation:
        left = self.plan(node.child("left"), outer)
        right = self.plan(node.child("right"), outer)
        join_type = node.fields.get("joinType") or {}
        type_name = str(join_type.get("object") or join_type.get("product-class") or "").rsplit(".", 1)[-1]
        condition = node.optional_child("condition")
        keys = self.expr(condition, _env([left, right], outer)) if condition is not None else NO_DEPENDENCIES
        dataset = union(left.dataset, right.dataset, as_indirect(keys, Subtype.JOIN))
        if type_name.rstrip("$") in LEFT_ONLY_JOINS:
            return PlanRelation(left.outputs, dataset)
        if type_name.startswith("ExistenceJoin"):
            raise PlanLineageError("ExistenceJoin is not supported for column lineage")
        return PlanRelation((*left.outputs, *right.outputs), dataset)

    def _union(self, node: PlanNode, outer: _Env | None) -> PlanRelation:
        branches = [self.plan(child, outer) for child in node.children]
        first = branches[0]
        for branch in branches[1:]:
            if len(branch.outputs) != len(first.outputs):
                raise PlanLineageError("UNION branches have different numbers of columns")
        outputs = tuple(
            Attribute(
                attribute.name,
                attribute.expr_id,
                union(*(branch.outputs[index].dependencies for branch in branches)),
                attribute.expression,
                _node(
                    f"{attribute.name}#{attribute.expr_id}",
                    "Union",
                    [found for branch in branches if (found := branch.outputs[index].node) is not None],
                ),
            )
            for index, attribute in enumerate(first.outputs)
        )
        return PlanRelation(outputs, union(*(branch.dataset for branch in branches)))

    def _struct_field(self, node: PlanNode, env: _Env) -> Dependencies:
        """Nested ``GetStructField``s over an attribute: an unchanged struct gives its leaf field."""
        base, path = _struct_path(node)
        dependencies = self.expr(base, env)
        if base.kind != "AttributeReference":
            return as_value(dependencies, Subtype.TRANSFORMATION)
        return into_field(dependencies, path)

    def expr(self, node: PlanNode, env: _Env) -> Dependencies:
        kind = node.kind
        if kind == "AttributeReference":
            return env.lookup(_expr_id(node), str(node.fields.get("name"))).dependencies
        if kind == "GetStructField":
            return self._struct_field(node, env)
        if kind == "OuterReference":
            return self.expr(node.child("e"), env)
        if kind == "Literal":
            return NO_DEPENDENCIES
        if kind == "Alias" or kind in CAST_EXPRESSIONS or kind == "SortOrder":
            return self.expr(node.children[0], env)
        if kind in SUBQUERY_EXPRESSIONS:
            relation = self.plan(node.child("plan"), env)
            values = union(*(a.dependencies for a in relation.outputs))
            if kind == "Exists":
                values = as_value(values, Subtype.TRANSFORMATION)
            return union(values, relation.dataset)
        if kind == "AggregateExpression":
            function = node.child("aggregateFunction")
            arguments = union(*(self.expr(child, env) for child in function.children))
            value = as_value(arguments, Subtype.AGGREGATION, masking=function.kind in MASKING_EXPRESSIONS)
            condition = node.optional_child("filter")
            if condition is not None:
                value = union(value, as_indirect(self.expr(condition, env), Subtype.CONDITIONAL))
            return value
        if kind == "WindowExpression":
            function, specification = node.children[0], node.children[1]
            window = union(*(self.expr(child, env) for child in specification.children))
            return union(self.expr(function, env), as_indirect(window, Subtype.WINDOW))
        if kind == "CaseWhen":
            # Children are (condition, value) pairs, then the ELSE value if there is one.
            case_conditions: list[Dependencies] = []
            case_values: list[Dependencies] = []
            for index, branch in enumerate(node.children):
                is_else = index == len(node.children) - 1 and len(node.children) % 2 == 1
                target = case_values if is_else or index % 2 == 1 else case_conditions
                target.append(self.expr(branch, env))
            return union(
                as_value(union(*case_values), Subtype.TRANSFORMATION),
                as_indirect(union(*case_conditions), Subtype.CONDITIONAL),
            )
        if kind == "If":
            condition, *branches = node.children
            return union(
                as_value(union(*(self.expr(b, env) for b in branches)), Subtype.TRANSFORMATION),
                as_indirect(self.expr(condition, env), Subtype.CONDITIONAL),
            )
        children = union(*(self.expr(child, env) for child in node.children))
        return as_value(children, Subtype.TRANSFORMATION, masking=kind in MASKING_EXPRESSIONS)


WRITE_COMMANDS = frozenset(
    {
        "InsertIntoHadoopFsRelationCommand",
        "InsertIntoHiveTable",
        "CreateDataSourceTableAsSelectCommand",
        "CreateHiveTableAsSelectCommand",
        "OptimizedCreateHiveTableAsSelectCommand",
    }
)


def _output_names(node: PlanNode, count: int) -> list[str] | None:
    names = node.fields.get("outputColumnNames")
    if isinstance(names, str) and names.startswith("[") and names.endswith("]"):
        parsed = [name.strip().lower() for name in names[1:-1].split(",") if name.strip()]
        if len(parsed) == count:
            return parsed
    return None


def _top_node(name: str, attribute: Attribute) -> ExpressionNode | None:
    """The output's chain starts at the output itself; Ushas prints the attribute under it (``c#2 +- c#2``)."""
    if attribute.node is None:
        return None
    return ExpressionNode(name, attribute.expression, None, (attribute.node,))


def lineage_from_plan(plan: PlanNode, sql: str = "") -> StatementLineage:
    """Column lineage of an analyzed plan: a query, or a command writing a query's rows to a table."""
    walker = _PlanWalker()
    target: str | None = None
    query = plan
    names: list[str] | None = None
    if plan.kind in WRITE_COMMANDS:
        target = _table_identifier(
            plan.fields.get("catalogTable") or plan.fields.get("table") or plan.fields.get("tableDesc")
        )
        query = plan.child("query")
    relation = walker.plan(query)
    if target is not None:
        names = _output_names(plan, len(relation.outputs))
    columns = tuple(
        OutputColumn(name, attribute.dependencies, attribute.expression, _top_node(name, attribute))
        for name, attribute in zip(names or [a.name for a in relation.outputs], relation.outputs, strict=True)
    )
    return StatementLineage(target, columns, relation.dataset, tuple(sorted(walker.inputs)), sql)


def lineage_from_plan_json(plan_json: str, sql: str = "") -> StatementLineage:
    try:
        nodes = json.loads(plan_json)
    except json.JSONDecodeError as error:
        raise PlanLineageError(f"analyzed plan is not JSON: {error}") from error
    if not isinstance(nodes, list) or not nodes:
        raise PlanLineageError("analyzed plan JSON must be a non-empty list of nodes")
    return lineage_from_plan(unflatten(nodes), sql)


def analyzed_plan_json(session: SparkSession, spark_sql: str) -> str:
    """Parse and analyze ``spark_sql`` in ``session`` without running it; the analyzed plan as JSON.

    The same plan as ``spark.sql(q)._jdf.queryExecution().analyzed()``, but an INSERT or CTAS is not
    executed to get it. Analysis errors surface as Spark's own ``AnalysisException``.
    """
    state = session._jsparkSession.sessionState()
    parsed = state.sqlParser().parsePlan(spark_sql)
    analyzer = state.analyzer()
    analyzed = analyzer.execute(parsed)
    analyzer.checkAnalysis(analyzed)
    return str(analyzed.toJSON())


def dataframe_plan_json(frame: DataFrame) -> str:
    """The analyzed plan of a DataFrame Spark already built (``df._jdf.queryExecution().analyzed()``)."""
    return str(frame._jdf.queryExecution().analyzed().toJSON())


def spark_column_lineage(session: SparkSession, sql: str, *, dialect: str = "athena") -> StatementLineage:
    """Column lineage of one statement as Spark resolves it; Athena SQL is translated as SparkEngine does."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    from lakeline.engines.translate import athena_to_spark
    from lakeline.lineage.columns.sql import sqlglot_dialect

    if dialect == "athena":
        spark_sql = athena_to_spark(sql)
    elif dialect == "spark":
        spark_sql = sql
    else:
        spark_sql = sqlglot.transpile(sql, read=sqlglot_dialect(dialect), write="spark")[0]
    try:
        plan_json = analyzed_plan_json(session, spark_sql)
    except (PySparkException, Py4JJavaError) as error:
        lines = str(error).strip().splitlines()
        raise PlanLineageError(f"Spark cannot analyze the statement: {lines[0] if lines else error}") from error
    return lineage_from_plan_json(plan_json, sql)
