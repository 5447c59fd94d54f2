"""The spark engine runs each statement with the deployed Glue job's Spark settings and gives the shared
session its own settings back after it (#36)."""

from __future__ import annotations

import pytest

from lakeline.engines.base import QueryFailed
from lakeline.engines.spark import SparkEngine
from lakeline.engines.spark_semantics import ATHENA

pytestmark = pytest.mark.spark


def test_an_invalid_cast_is_null_as_on_glue_and_the_session_keeps_its_own_setting(spark_engine: SparkEngine) -> None:
    session = spark_engine.session
    before = session.conf.get("spark.sql.ansi.enabled", None)
    assert spark_engine.execute("SELECT CAST('abc' AS INTEGER), 7 / 0").rows == [(None, None)]
    assert session.conf.get("spark.sql.ansi.enabled", None) == before
    with spark_engine.imposed(ATHENA), pytest.raises(QueryFailed, match="CAST_INVALID_INPUT"):
        spark_engine.execute("SELECT CAST('abc' AS INTEGER)")
    assert session.conf.get("spark.sql.ansi.enabled", None) == before


def test_a_division_of_integers_is_an_integer_as_in_trino_and_a_fraction_as_on_glue(
    spark_engine: SparkEngine, tmp_path: object
) -> None:
    """Trino divides two integers to an integer, truncating toward zero (``7 / 2`` is 3, ``-7 / 2`` is -3);
    Spark to a fraction. Columns are typed from the catalog; any operand that is not an integer keeps
    the fraction. Before, the local Athena gave 3.5 where Athena gives 3 (#36)."""
    spark_engine.execute("CREATE DATABASE IF NOT EXISTS semantics_division")
    spark_engine.execute("DROP TABLE IF EXISTS semantics_division.t")
    spark_engine.execute(
        f"CREATE TABLE semantics_division.t (n INT, d BIGINT, x DOUBLE) USING parquet LOCATION '{tmp_path}/division_t'"
    )
    spark_engine.execute("INSERT INTO semantics_division.t VALUES (7, 2, 7.0), (-7, 2, -7.0)")
    query = (
        "SELECT 7 / 2, n / d, x / d, n / 2.0, sum(n) / count(*) FROM semantics_division.t GROUP BY n, d, x ORDER BY n"
    )
    on_glue = spark_engine.execute(query).rows
    assert [tuple(float(value) for value in row[:4]) for row in on_glue] == [
        (3.5, -3.5, -3.5, -3.5),
        (3.5, 3.5, 3.5, 3.5),
    ]
    with spark_engine.imposed(ATHENA):
        on_athena = spark_engine.execute(query).rows
        assert [(row[0], row[1], float(row[2]), float(row[3]), row[4]) for row in on_athena] == [
            (3, -3, -3.5, -3.5, -7),
            (3, 3, 3.5, 3.5, 7),
        ]
        unqualified = spark_engine.execute("SELECT n / d FROM t ORDER BY n", database="semantics_division").rows
        assert unqualified == [(-3,), (3,)]
        with pytest.raises(QueryFailed, match="DIVIDE_BY_ZERO"):
            spark_engine.execute("SELECT n / 0 FROM semantics_division.t")
