"""The SQL settings the engines run with (#36): the spark engine's are those of the Spark that the
deployed Glue job runs, whichever Glue version a deployment chooses."""

from __future__ import annotations

import pytest

from lakeline.engines.spark_semantics import ATHENA, DEPLOYED_SPARK, SPARK_3_SETTINGS, deployed_spark
from lakeline.errors import ConfigError
from lakeline.lineage.openlineage.producer import GLUE_SPARK_VERSIONS, glue_spark_version
from stacks.config import LakelineConfig


def test_the_spark_engine_runs_as_the_glue_version_deployed_by_default() -> None:
    spark = glue_spark_version(LakelineConfig().glue_version)
    assert spark is not None and deployed_spark(spark) == DEPLOYED_SPARK
    assert dict(DEPLOYED_SPARK.settings)["spark.sql.ansi.enabled"] == "false"


@pytest.mark.parametrize("glue_version", sorted(GLUE_SPARK_VERSIONS))
def test_every_glue_version_runs_a_spark_with_ansi_mode_off(glue_version: str) -> None:
    assert deployed_spark(GLUE_SPARK_VERSIONS[glue_version]).settings == SPARK_3_SETTINGS


def test_athena_fails_what_trino_fails_and_a_spark_4_keeps_its_own_defaults() -> None:
    assert dict(ATHENA.settings)["spark.sql.ansi.enabled"] == "true"
    assert deployed_spark("4.0.1").settings == ()
    with pytest.raises(ConfigError, match="not a version number"):
        deployed_spark("latest")
