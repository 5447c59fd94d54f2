"""Deployment configuration from CDK context: the OpenLineage variables of the stage functions."""

from __future__ import annotations

from typing import Any

import pytest

from lakeline.errors import ConfigError
from stacks.config import STACK_OPENLINEAGE_VARIABLES, LakelineConfig


def test_without_openlineage_environment_events_only_go_to_the_archive() -> None:
    assert LakelineConfig.from_context({}).openlineage_environment == {}


def test_standard_openlineage_variables_are_passed_through() -> None:
    variables = {
        "OPENLINEAGE_URL": "https://marquez.example.com",
        "OPENLINEAGE_API_KEY": "key-1",
        "OPENLINEAGE_ENDPOINT": "api/v1/lineage",
        "OPENLINEAGE__TRANSPORT__TYPE": "http",
        "OPENLINEAGE_DISABLED": "false",
        "OPENLINEAGE_PARENT_ID": "airflow/nightly/01930000-0000-7000-8000-000000000001",
    }
    assert LakelineConfig.from_context({"openlineage_environment": variables}).openlineage_environment == variables


def test_openlineage_environment_may_come_as_json_text_from_the_command_line() -> None:
    config = LakelineConfig.from_context({"openlineage_environment": '{"OPENLINEAGE_URL": "http://marquez:5000"}'})
    assert config.openlineage_environment == {"OPENLINEAGE_URL": "http://marquez:5000"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"AWS_REGION": "eu-west-1"}, "key 'AWS_REGION' is not an OpenLineage variable"),
        ({"openlineage_url": "http://x"}, "key 'openlineage_url' is not an OpenLineage variable"),
        ({"OPENLINEAGE": "x"}, "key 'OPENLINEAGE' is not an OpenLineage variable"),
        ({"OPENLINEAGE-URL": "x"}, "key 'OPENLINEAGE-URL' is not an OpenLineage variable"),
        ({"OPENLINEAGE_NAMESPACE": "mine"}, "key 'OPENLINEAGE_NAMESPACE' is set by the stack"),
        ({"OPENLINEAGE_EVENTS_LOCATION": "s3://elsewhere/"}, "key 'OPENLINEAGE_EVENTS_LOCATION' is set by the stack"),
        ({"OPENLINEAGE_DATASET_NAMESPACE": "x"}, "key 'OPENLINEAGE_DATASET_NAMESPACE' is set by the stack"),
        ({"PIPELINE_ENGINE": "spark"}, "key 'PIPELINE_ENGINE' is not an OpenLineage variable"),
        ({"OPENLINEAGE_DISABLED": True}, "key 'OPENLINEAGE_DISABLED' must be a string, got bool"),
        ({"OPENLINEAGE__TRANSPORT__TIMEOUT": 5}, "key 'OPENLINEAGE__TRANSPORT__TIMEOUT' must be a string, got int"),
        ({"OPENLINEAGE__TRANSPORT": {"type": "http"}}, "must be a string, got dict"),
        (["OPENLINEAGE_URL"], "must be an object of variables, got list"),
        ("OPENLINEAGE_URL=http://x", "is not a JSON object"),
    ],
)
def test_openlineage_environment_is_refused_with_the_key_named(value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        LakelineConfig.from_context({"openlineage_environment": value})


def test_every_variable_the_stack_sets_is_reserved() -> None:
    assert {"OPENLINEAGE_EVENTS_LOCATION", "OPENLINEAGE_NAMESPACE", "OPENLINEAGE_DATASET_NAMESPACE"} < (
        STACK_OPENLINEAGE_VARIABLES
    )
    for name in STACK_OPENLINEAGE_VARIABLES:
        with pytest.raises(ConfigError, match=name):
            LakelineConfig.from_context({"openlineage_environment": {name: "x"}})


def test_the_trace_settle_time_defaults_to_two_minutes_and_is_bounded() -> None:
    assert LakelineConfig.from_context({}).trace_settle_seconds == 120
    assert LakelineConfig.from_context({"trace_settle_seconds": "0"}).trace_settle_seconds == 0
    for value in (-1, 86_401):
        with pytest.raises(ConfigError, match="trace_settle_seconds"):
            LakelineConfig.from_context({"trace_settle_seconds": value})


def test_the_schedule_function_waits_the_settle_time_the_context_gives() -> None:
    import aws_cdk as cdk
    from aws_cdk.assertions import Match, Template

    from stacks.app import build_app

    app = cdk.App(context={"environment": "dev", "trace_settle_seconds": "0"})
    build_app(app)
    pipeline = next(
        stack for stack in app.node.children if isinstance(stack, cdk.Stack) and "Pipeline" in stack.stack_name
    )
    Template.from_stack(pipeline).has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": Match.string_like_regexp("lineage_schedule"),
            "Environment": {"Variables": Match.object_like({"TRACE_SETTLE_SECONDS": "0"})},
        },
    )


@pytest.mark.parametrize(
    ("context", "version"),
    [
        ({}, "Athena engine version 3"),
        ({"engine": "spark"}, "3.5.4"),
        ({"engine": "spark", "glue_version": "4.0"}, "3.3.0"),
    ],
)
def test_the_deployed_engine_version_is_the_one_the_steps_run_on(context: dict[str, Any], version: str) -> None:
    assert LakelineConfig.from_context(context).engine_version == version


def test_a_glue_version_without_a_known_spark_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"glue_version='9\.9' must be a Glue version with Spark"):
        LakelineConfig.from_context({"engine": "spark", "glue_version": "9.9"})


def _pipeline(context: dict[str, Any]) -> Any:
    import aws_cdk as cdk

    from stacks.app import build_app

    app = cdk.App(context={"environment": "dev", **context})
    _, pipeline = build_app(app)
    return pipeline


def test_a_scan_cutoff_per_query_is_set_on_the_workgroup_and_can_be_lifted() -> None:
    """A stage B step that scans a whole table by mistake is cancelled at the cutoff, not billed in full (#40)."""
    from aws_cdk.assertions import Template

    def cutoff(context: dict[str, Any]) -> Any:
        (group,) = Template.from_stack(_pipeline(context)).find_resources("AWS::Athena::WorkGroup").values()
        return group["Properties"]["WorkGroupConfiguration"].get("BytesScannedCutoffPerQuery")

    assert cutoff({}) == 1000 * 1000**3
    assert cutoff({"athena_scan_cutoff_gb": "50"}) == 50 * 1000**3
    assert cutoff({"athena_scan_cutoff_gb": "0"}) is None
    with pytest.raises(ConfigError, match="athena_scan_cutoff_gb"):
        LakelineConfig.from_context({"athena_scan_cutoff_gb": -1})


def test_a_deployment_whose_alarms_reach_no_one_is_warned_at_synth() -> None:
    from aws_cdk.assertions import Annotations, Match

    unheard = Match.string_like_regexp("alarm topic has no subscriber")
    Annotations.from_stack(_pipeline({})).has_warning("*", unheard)
    Annotations.from_stack(_pipeline({"alarm_email": "ops@example.com"})).has_no_warning("*", unheard)


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"derived_noncurrent_days": 0}, "derived_noncurrent_days=0 must be a whole number of days, 1 or more"),
        ({"noncurrent_days": "a week"}, "noncurrent_days='a week' must be a whole number of days"),
        ({"incomplete_upload_days": 1.5}, "incomplete_upload_days=1.5 must be a whole number of days, 1 or more"),
        ({"athena_results_days": -3}, "athena_results_days=-3 must be a whole number of days, 1 or more"),
        ({"log_retention_days": 10}, "log_retention_days=10 must be one of CloudWatch's: 1, 3, 5, 7, 14, 30"),
    ],
)
def test_what_the_lake_keeps_is_refused_with_the_key_named(context: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        LakelineConfig.from_context(context)


def test_what_the_lake_keeps_comes_from_context_as_cdk_passes_it() -> None:
    """``-c key=value`` arrives as text."""
    config = LakelineConfig.from_context({"derived_noncurrent_days": "5", "log_retention_days": "90"})
    assert (config.derived_noncurrent_days, config.log_retention_days) == (5, 90)
    assert (LakelineConfig().noncurrent_days, LakelineConfig().incomplete_upload_days) == (30, 1)
