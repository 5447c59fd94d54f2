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
