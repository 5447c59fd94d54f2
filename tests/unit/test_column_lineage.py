"""Column lineage from SQL text: the table of statements in data/column_lineage_cases.yaml, and errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lakeline.catalog_json import CatalogFile
from lakeline.errors import ValidationError
from lakeline.lineage.column_model import (
    Dependencies,
    Edge,
    SourceField,
    Subtype,
    Transformation,
    TransformationType,
    as_indirect,
    as_value,
    compose,
)
from lakeline.lineage.column_sql import SqlColumnLineage, column_lineage

DATA = Path(__file__).parent / "data"
CASES: list[dict[str, Any]] = yaml.safe_load((DATA / "column_lineage_cases.yaml").read_text())
REQUIRED_CATEGORIES = {
    "insert_column_list",
    "insert_positional_with_partition",
    "ctas_with_properties",
    "cte_chain",
    "nested_subquery",
    "select_star",
    "table_star_with_join_on",
    "union_all",
    "join_using_inner",
    "join_on_with_filter",
    "group_by_having",
    "window_partition_order",
    "case_when",
    "if_function",
    "coalesce",
    "scalar_subquery_correlated",
    "quoted_identifiers",
    "where_filter_only",
    "unqualified_multi_table",
}


@pytest.fixture(scope="module")
def catalog() -> CatalogFile:
    return CatalogFile.load(DATA / "column_lineage_catalog.json")


def _edges(dependencies: Dependencies) -> list[str]:
    return sorted(
        f"{edge.source} {edge.transformation.type.value} {edge.transformation.subtype.value}"
        + (" masking" if edge.transformation.masking else "")
        for edge in dependencies
    )


def test_the_table_covers_every_category() -> None:
    ids = [case["id"] for case in CASES]
    assert len(ids) == len(set(ids))
    assert len(CASES) >= 30
    assert set(ids) >= REQUIRED_CATEGORIES
    assert {case["dialect"] for case in CASES} == {"athena", "spark"}


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_statement_lineage(case: dict[str, Any], catalog: CatalogFile) -> None:
    (lineage,) = column_lineage(case["sql"], catalog, dialect=case["dialect"], default_database="sales")
    assert lineage.target == case["target"]
    assert list(lineage.inputs) == case["inputs"]
    assert [column.name for column in lineage.columns] == list(case["columns"])
    for column in lineage.columns:
        assert _edges(column.dependencies) == sorted(case["columns"][column.name]), column.name
    assert _edges(lineage.dataset) == sorted(case["dataset"])


def test_conditions_and_keys_are_never_direct(catalog: CatalogFile) -> None:
    sql = """
        SELECT c.region, SUM(o.amount) AS total
        FROM sales.orders o JOIN sales.customers c ON o.customer_id = c.customer_id
        WHERE o.status = 'paid' GROUP BY c.region ORDER BY total
    """
    (lineage,) = column_lineage(sql, catalog)
    direct = {
        str(edge.source)
        for column in lineage.columns
        for edge in column.dependencies
        if edge.transformation.type is TransformationType.DIRECT
    }
    assert direct == {"sales.customers.region", "sales.orders.amount"}
    assert {edge.transformation.type for edge in lineage.dataset} == {TransformationType.INDIRECT}


def test_a_created_table_is_visible_to_later_statements(catalog: CatalogFile) -> None:
    sql = """
        CREATE TABLE mart.tmp AS SELECT customer_id, amount * 2 AS doubled FROM sales.orders;
        INSERT INTO mart.customer_flags SELECT customer_id, CAST(doubled AS varchar) FROM mart.tmp;
        DROP TABLE mart.tmp;
    """
    first, second = column_lineage(sql, catalog)
    assert first.target == "mart.tmp"
    assert second.inputs == ("mart.tmp",)
    assert second.edges()["flag"] == {("mart.tmp.doubled", "DIRECT", "IDENTITY")}


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT x FROM sales.nowhere", "sales.nowhere is not in the catalog"),
        ("SELECT nope FROM sales.orders", "nope"),
        ("SELECT customer_id FROM sales.orders JOIN sales.customers ON 1 = 1", "customer_id"),
        ("INSERT INTO mart.daily_sales SELECT amount FROM sales.orders", "takes 3 columns"),
        ("INSERT INTO mart.daily_sales (day, revenue) SELECT amount FROM sales.orders", "takes 2 columns"),
        ("SELECT FROM WHERE", "cannot parse"),
        ("SELECT a FROM (SELECT 1 AS a) x UNION ALL SELECT 1, 2", "sides have 1 and 2 columns"),
    ],
)
def test_bad_statements_are_refused_with_a_reason(sql: str, message: str, catalog: CatalogFile) -> None:
    with pytest.raises(ValidationError, match=message):
        column_lineage(sql, catalog)


def test_a_table_without_database_needs_a_default(catalog: CatalogFile) -> None:
    with pytest.raises(ValidationError, match="'customers' has no database"):
        column_lineage("SELECT name FROM customers", catalog)


def test_unknown_dialect_is_refused(catalog: CatalogFile) -> None:
    with pytest.raises(ValidationError, match="dialect 'mysql'"):
        SqlColumnLineage(catalog, dialect="mysql")


def test_statements_without_rows_are_skipped(catalog: CatalogFile) -> None:
    sql = "DROP TABLE IF EXISTS mart.tmp; ALTER TABLE sales.orders ADD PARTITION (dt = '1') LOCATION 's3://x/'"
    assert column_lineage(sql, catalog) == []


def _edge(kind: TransformationType, subtype: Subtype, masking: bool = False) -> Edge:
    return Edge(SourceField("db.t", "c"), Transformation(kind, subtype, masking))


def test_composition_rules() -> None:
    direct, indirect = TransformationType.DIRECT, TransformationType.INDIRECT
    identity = Transformation(direct, Subtype.IDENTITY)
    aggregation = Transformation(direct, Subtype.AGGREGATION)
    masked = Transformation(direct, Subtype.TRANSFORMATION, masking=True)
    window = Transformation(indirect, Subtype.WINDOW)
    assert compose(identity, aggregation) == aggregation
    assert compose(aggregation, identity) == aggregation
    assert compose(identity, masked) == masked
    assert compose(aggregation, window) == window
    assert compose(Transformation(indirect, Subtype.FILTER), aggregation) == Transformation(indirect, Subtype.FILTER)
    (edge,) = as_value({_edge(direct, Subtype.IDENTITY)}, Subtype.TRANSFORMATION, masking=True)
    assert edge.transformation == masked
    (edge,) = as_indirect({_edge(direct, Subtype.AGGREGATION)}, Subtype.JOIN)
    assert edge.transformation == Transformation(indirect, Subtype.JOIN)
    with pytest.raises(ValueError, match="cannot have subtype"):
        Transformation(direct, Subtype.FILTER)
