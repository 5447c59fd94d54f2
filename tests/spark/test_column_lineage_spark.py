"""Column lineage from Spark's analyzed plan agrees with the lineage read from the SQL text.

Both paths run on the same statements and the same tables: the SQL path resolves names against the
Spark catalog (``SparkEngine.describe_table``), the plan path asks Spark to analyze the translated
statement and matches exprIds. For every output column the (input, DIRECT/INDIRECT, subtype) sets must
be equal, and so must the dataset-wide ones. Columns with no input at all (literals, COUNT(*)) are left
out of the comparison: for ``INSERT INTO t (a, b)`` Spark also fills the columns not listed, with NULL.
"""

from __future__ import annotations

import pytest

from lakeline.engines.spark import SparkEngine
from lakeline.lineage.columns.model import StatementLineage
from lakeline.lineage.columns.spark import (
    PlanLineageError,
    analyzed_plan_json,
    dataframe_plan_json,
    lineage_from_plan_json,
    spark_column_lineage,
)
from lakeline.lineage.columns.sql import column_lineage

pytestmark = pytest.mark.spark

DB = "cl_test_db"

TABLES = [
    f"CREATE TABLE {DB}.orders (order_id BIGINT, customer_id BIGINT, amount DOUBLE, status STRING, `date` DATE,"
    " dt STRING) USING parquet PARTITIONED BY (dt)",
    f"CREATE TABLE {DB}.customers (customer_id BIGINT, name STRING, region STRING, email STRING) USING parquet",
    f"CREATE TABLE {DB}.products (product_id BIGINT, product_name STRING, category STRING) USING parquet",
    f"CREATE TABLE {DB}.order_items (order_id BIGINT, product_id BIGINT, quantity INT, price DOUBLE) USING parquet",
    f"CREATE TABLE {DB}.customer_totals (customer_id BIGINT, region STRING, total_amount DOUBLE,"
    " order_count BIGINT, dt STRING) USING parquet PARTITIONED BY (dt)",
    f"CREATE TABLE {DB}.flags (customer_id BIGINT, flag STRING) USING parquet",
    # A Hive-format table, read through a HiveTableRelation rather than a LogicalRelation.
    f"CREATE TABLE {DB}.raw_orders (order_id STRING, amount STRING) PARTITIONED BY (dt STRING) STORED AS TEXTFILE",
]

STATEMENTS = {
    "join_aggregate_insert_positional": f"""
        INSERT INTO {DB}.customer_totals
        SELECT o.customer_id, c.region, SUM(o.amount), COUNT(*), o.dt
        FROM {DB}.orders o JOIN {DB}.customers c ON o.customer_id = c.customer_id
        WHERE o.status = 'paid'
        GROUP BY o.customer_id, c.region, o.dt""",
    "window_functions": f"""
        SELECT order_id,
               ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY "date" DESC) AS rn,
               SUM(amount) OVER (PARTITION BY customer_id) AS customer_total
        FROM {DB}.orders""",
    "case_if_coalesce": f"""
        SELECT CASE WHEN status = 'paid' THEN amount WHEN status = 'void' THEN 0 ELSE -amount END AS signed,
               IF(amount > 100, 'large', status) AS size,
               COALESCE(status, CAST(order_id AS VARCHAR)) AS label
        FROM {DB}.orders""",
    "cte_and_having": f"""
        WITH paid AS (SELECT customer_id, amount FROM {DB}.orders WHERE status = 'paid')
        SELECT customer_id, SUM(amount) AS total FROM paid GROUP BY customer_id HAVING COUNT(*) > 1""",
    "union_all_insert": f"""
        INSERT INTO {DB}.flags
        SELECT customer_id, 'vip' FROM {DB}.customers WHERE region = 'eu'
        UNION ALL
        SELECT customer_id, status FROM {DB}.orders""",
    "scalar_and_in_subqueries": f"""
        SELECT c.name,
               (SELECT MAX(o.amount) FROM {DB}.orders o WHERE o.customer_id = c.customer_id) AS max_amount
        FROM {DB}.customers c
        WHERE c.customer_id IN (SELECT customer_id FROM {DB}.orders WHERE amount > 10)""",
    "join_using_and_star": f"""
        SELECT * FROM {DB}.customers LEFT JOIN {DB}.orders USING (customer_id) ORDER BY amount""",
    "ctas_three_way_join": f"""
        CREATE TABLE {DB}.product_sales WITH (format = 'PARQUET') AS
        SELECT p.category, SUM(i.quantity * i.price) AS revenue, COUNT(DISTINCT o.customer_id) AS buyers
        FROM {DB}.order_items i
        JOIN {DB}.products p ON i.product_id = p.product_id
        JOIN {DB}.orders o ON o.order_id = i.order_id
        GROUP BY p.category""",
    "distinct_nested_subquery": f"""
        SELECT DISTINCT big FROM (SELECT amount * 2 AS big, status FROM (SELECT * FROM {DB}.orders) x) y
        WHERE status <> 'void'""",
    "insert_column_list": f"""
        INSERT INTO {DB}.flags (flag, customer_id) SELECT name, customer_id FROM {DB}.customers""",
    "stage_a_style_bucketed_ctas_from_hive_table": f"""
        CREATE TABLE {DB}.orders_bucketed
        WITH (format = 'PARQUET', bucketed_by = ARRAY['order_id'], bucket_count = 2, partitioned_by = ARRAY['dt'])
        AS SELECT CAST(order_id AS BIGINT) AS order_id, CAST(amount AS DOUBLE) AS amount, dt
        FROM {DB}.raw_orders WHERE dt = '20240120'""",
}


@pytest.fixture(scope="module")
def engine(spark_engine: SparkEngine) -> SparkEngine:
    spark_engine.session.sql(f"DROP DATABASE IF EXISTS {DB} CASCADE")
    spark_engine.session.sql(f"CREATE DATABASE {DB}")
    for statement in TABLES:
        spark_engine.session.sql(statement)
    return spark_engine


def _comparable(lineage: StatementLineage) -> tuple[dict[str, set[tuple[str, str, str]]], set[tuple[str, str, str]]]:
    return {name: edges for name, edges in lineage.edges().items() if edges}, lineage.dataset_edges()


@pytest.mark.parametrize("name", list(STATEMENTS))
def test_plan_and_sql_lineage_agree(engine: SparkEngine, name: str) -> None:
    sql = STATEMENTS[name]
    (from_sql,) = column_lineage(sql, engine, dialect="athena", default_database=DB)
    from_plan = spark_column_lineage(engine.session, sql, dialect="athena")
    assert from_plan.target == from_sql.target
    assert from_plan.inputs == from_sql.inputs
    columns_plan, dataset_plan = _comparable(from_plan)
    columns_sql, dataset_sql = _comparable(from_sql)
    assert columns_plan == columns_sql
    assert dataset_plan == dataset_sql
    assert columns_sql, "every statement has column lineage to compare"


def test_analysis_does_not_run_the_statement(engine: SparkEngine) -> None:
    lineage = spark_column_lineage(engine.session, STATEMENTS["union_all_insert"])
    assert lineage.target == f"{DB}.flags"
    assert engine.session.sql(f"SELECT COUNT(*) FROM {DB}.flags").collect()[0][0] == 0
    assert not engine.table_exists(DB, "product_sales")


def test_a_dataframe_plan_is_read_the_same_way(engine: SparkEngine) -> None:
    query = f"SELECT region, COUNT(email) AS emails FROM {DB}.customers GROUP BY region"
    frame = engine.session.sql(query)
    from_frame = lineage_from_plan_json(dataframe_plan_json(frame))
    from_parser = lineage_from_plan_json(analyzed_plan_json(engine.session, query))
    assert from_frame.edges() == from_parser.edges()
    assert from_frame.edges()["emails"] == {(f"{DB}.customers.email", "DIRECT", "AGGREGATION")}
    (emails,) = [c for c in from_frame.columns if c.name == "emails"]
    assert {edge.transformation.masking for edge in emails.dependencies} == {True}
    assert emails.expression is not None and "count(email#" in emails.expression


def test_the_ushas_example(engine: SparkEngine) -> None:
    """Ushas's sample: literals only, so no table column feeds c or d, but the plan is followed."""
    query = "SELECT * FROM (SELECT substr(a + 1, 0, 1) AS c, a + 3 AS d FROM (SELECT 1 AS a, 2 AS b))"
    lineage = lineage_from_plan_json(dataframe_plan_json(engine.session.sql(query)))
    assert [column.name for column in lineage.columns] == ["c", "d"]
    assert lineage.edges() == {"c": set(), "d": set()}
    assert lineage.inputs == ()


def test_unanalyzable_statements_are_refused(engine: SparkEngine) -> None:
    with pytest.raises(PlanLineageError, match="cannot analyze"):
        spark_column_lineage(engine.session, f"SELECT nope FROM {DB}.orders")
    with pytest.raises(PlanLineageError, match="not JSON"):
        lineage_from_plan_json("{")
