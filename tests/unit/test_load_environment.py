"""``load_environment``: every function reads its variables one way (a field's alias, else its name in
upper case); structured settings arrive as JSON, a string is taken as written."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from lakeline.errors import ConfigError
from lakeline.lambda_support import load_environment
from lambdas.environments import LineageTraceEnvironment, StageBRouterEnvironment


def test_aliased_variables_are_read_by_their_alias_and_a_string_is_not_decoded() -> None:
    environment = load_environment(
        LineageTraceEnvironment,
        {"LINEAGE_TABLE_NAME": "lineage", "ARCHIVE_BUCKET": "archive", "ARCHIVE_PREFIX": "[raw]/", "table_name": "x"},
    )
    assert (environment.table_name, environment.archive_prefix) == ("lineage", "[raw]/")


def test_structured_settings_are_json_and_named_fields_upper_case() -> None:
    environment = load_environment(
        StageBRouterEnvironment,
        {
            "STATE_MACHINE_ARN": "arn",
            "DEAD_LETTER_QUEUE_URL": "dlq",
            "PIPELINE_STATE_TABLE": "state",
            "STAGE_BUCKET": "stage",
            "DEPENDENCIES_TABLE": "deps",
            "ARTIFACTS_BUCKET": "artifacts",
            "STAGE_B_QUEUE_URL": "queue-b",
            "STAGE_B_FOLLOW_UP_QUEUE_URL": "queue-b-follow-ups",
            "RUNS_IN_FLIGHT": "4",
        },
    )
    assert (environment.runs_in_flight, environment.dependencies_table) == (4, "deps")
    assert environment.table_settings_file is None  # the table settings are the code asset's (lambdas.table_settings)
    structured = load_environment(Structured, {"SIZES": '{"a_b.c": 4}', "NAMES": '["a", "b"]'})
    assert (structured.sizes, structured.names) == ({"a_b.c": 4}, ["a", "b"])


class Structured(BaseModel):
    sizes: dict[str, int]
    names: list[str]


def test_a_missing_variable_is_named_as_the_function_sees_it() -> None:
    with pytest.raises(ConfigError, match="ARCHIVE_BUCKET: required field is missing"):
        load_environment(LineageTraceEnvironment, {"LINEAGE_TABLE_NAME": "lineage"})
