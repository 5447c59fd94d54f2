"""What the lake keeps, who hears of throttling and what the roles may touch (#40), read from the synthesized
templates: lifecycle rules on every bucket, one log retention everywhere, throttle alarms and the dashboard, and
no S3 grant on every bucket (CDK's Athena task grants its reads on ``"*"``)."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Template

from stacks.config import LakelineConfig
from stacks.nag import flatten_reference
from stacks.storage_stack import StorageStack
from tests.infrastructure.test_stacks import as_list, resources, synthesized

DERIVED = ("StageBucket", "AnalyticsBucket", "AthenaResultsBucket")
ENGINES = ("athena", "spark")


def lifecycle(storage: Template) -> dict[str, list[dict[str, Any]]]:
    """Each bucket's lifecycle rules, by the bucket's construct id."""
    return {
        name[: -len("XXXXXXXX")]: bucket["Properties"].get("LifecycleConfiguration", {}).get("Rules", [])
        for name, bucket in resources(storage, "AWS::S3::Bucket").items()
    }


def storage_template(**context: Any) -> Template:
    """The storage stack alone (no functions to bundle: fast) with ``context``."""
    app = cdk.App()
    return Template.from_stack(StorageStack(app, "Storage", config=LakelineConfig.from_context(context)))


def test_every_bucket_aborts_unfinished_uploads() -> None:
    """The commits carry files by multipart copy: a carry cut off leaves parts that bill until aborted."""
    buckets = lifecycle(synthesized("athena")[0])
    assert len(buckets) == 7
    for name, rules in buckets.items():
        aborts = [
            rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"]
            for rule in rules
            if rule.get("AbortIncompleteMultipartUpload")
        ]
        assert aborts == [1], f"{name}: {rules}"


def test_old_versions_and_bare_delete_markers_go() -> None:
    """Every commit rewrites a partition into a new prefix and the sweep deletes the old one: in the derived
    buckets that leaves a noncurrent copy per version, kept 3 days (30 in the others); the delete markers the
    sweep leaves are removed once no version is behind them."""
    buckets = lifecycle(synthesized("athena")[0])
    for name, rules in buckets.items():
        if name == "AccessLogsBucket":
            continue
        kept = [
            rule["NoncurrentVersionExpiration"]["NoncurrentDays"]
            for rule in rules
            if "NoncurrentVersionExpiration" in rule
        ]
        assert kept == [3 if name in DERIVED else 30], f"{name}: {rules}"
        assert any(rule.get("ExpiredObjectDeleteMarker") is True for rule in rules), f"{name}: {rules}"


def test_query_results_expire() -> None:
    rules = lifecycle(synthesized("athena")[0])["AthenaResultsBucket"]
    assert [rule["ExpirationInDays"] for rule in rules if "ExpirationInDays" in rule] == [7]


def test_what_the_buckets_keep_is_configurable() -> None:
    buckets = lifecycle(
        storage_template(derived_noncurrent_days=5, noncurrent_days=60, incomplete_upload_days=2, athena_results_days=1)
    )
    stage, raw, results = buckets["StageBucket"], buckets["RawBucket"], buckets["AthenaResultsBucket"]
    assert [
        r["NoncurrentVersionExpiration"]["NoncurrentDays"] for r in stage if "NoncurrentVersionExpiration" in r
    ] == [5]
    assert [r["NoncurrentVersionExpiration"]["NoncurrentDays"] for r in raw if "NoncurrentVersionExpiration" in r] == [
        60
    ]
    assert [r["ExpirationInDays"] for r in results if "ExpirationInDays" in r] == [1]
    assert all(
        rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"] == 2
        for rules in buckets.values()
        for rule in rules
        if "AbortIncompleteMultipartUpload" in rule
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_every_log_group_keeps_the_one_retention(engine: str) -> None:
    groups = [
        group for template in synthesized(engine) for group in resources(template, "AWS::Logs::LogGroup").values()
    ]
    assert {group["Properties"]["RetentionInDays"] for group in groups} == {LakelineConfig().log_retention_days}


def test_the_log_retention_applies_to_every_log_group_of_the_app() -> None:
    from stacks.app import LogRetention

    app = cdk.App()
    stack = cdk.Stack(app, "Logs")
    logs.LogGroup(stack, "Mine", retention=logs.RetentionDays.TWO_YEARS)
    logs.LogGroup(stack, "Default")
    cdk.Aspects.of(app).add(LogRetention(LakelineConfig.from_context({"log_retention_days": 7}).log_retention_days))
    groups = resources(Template.from_stack(stack), "AWS::Logs::LogGroup").values()
    assert [group["Properties"]["RetentionInDays"] for group in groups] == [7, 7]


def test_the_glue_job_logs_to_a_group_that_expires_and_is_encrypted() -> None:
    """Glue would create its continuous log group on the first run, kept for ever (#40)."""
    _, pipeline = synthesized("spark")
    job = next(iter(resources(pipeline, "AWS::Glue::Job").values()))
    named = job["Properties"]["DefaultArguments"]["--continuous-log-logGroup"]
    groups = resources(pipeline, "AWS::Logs::LogGroup")
    (group,) = [g for name, g in groups.items() if named == {"Ref": name}]
    assert group["Properties"]["LogGroupName"] == "/aws-glue/jobs/lakeline-dev"
    assert "KmsKeyId" in group["Properties"] and group["Properties"]["RetentionInDays"] == 30


def alarms(pipeline: Template) -> list[dict[str, Any]]:
    return [alarm["Properties"] for alarm in resources(pipeline, "AWS::CloudWatch::Alarm").values()]


@pytest.mark.parametrize("engine", ENGINES)
def test_throttling_raises_an_alarm_on_the_topic(engine: str) -> None:
    """A function refused for concurrency, a state machine throttled by Step Functions' quota (#40)."""
    _, pipeline = synthesized(engine)
    found = alarms(pipeline)
    topic = next(iter(resources(pipeline, "AWS::SNS::Topic")))
    functions = {
        name
        for name, f in resources(pipeline, "AWS::Lambda::Function").items()
        if f["Properties"]["Handler"].startswith("lambdas.")
    }
    throttles = {
        alarm["Dimensions"][0]["Value"]["Ref"]
        for alarm in found
        if alarm["MetricName"] == "Throttles" and alarm["AlarmActions"] == [{"Ref": topic}]
    }
    assert throttles == functions
    machines = {name for name in resources(pipeline, "AWS::StepFunctions::StateMachine")}
    throttled = {
        alarm["Dimensions"][0]["Value"]["Ref"]
        for alarm in found
        if alarm["MetricName"] == "ExecutionThrottled" and alarm["AlarmActions"] == [{"Ref": topic}]
    }
    assert throttled == machines and len(machines) == 2


@pytest.mark.parametrize("engine", ENGINES)
def test_the_dashboard_shows_executions_queues_throttles_and_errors(engine: str) -> None:
    _, pipeline = synthesized(engine)
    (dashboard,) = resources(pipeline, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in (
        "ExecutionsStarted",
        "ExecutionsFailed",
        "ExecutionsAborted",
        "ExecutionThrottled",
        "NumberOfMessagesSent",
        "ProcessedBytes",
        "StageAThrottledTasks",
        "StageBThrottledTasks",
        "Errors",
        "Throttles",
    ):
        assert f'\\"{metric}\\"' in body, metric
    # Every queue's depth and every dead-letter queue's: each queue appears in the body by its logical id.
    for name in resources(pipeline, "AWS::SQS::Queue"):
        assert name in body, f"{name} is not on the dashboard"
    for name, function in resources(pipeline, "AWS::Lambda::Function").items():
        if function["Properties"]["Handler"].startswith("lambdas."):
            assert name in body, f"{name} is not on the dashboard"


@pytest.mark.parametrize("engine", ENGINES)
def test_the_engines_throttled_tasks_are_counted_from_the_execution_logs(engine: str) -> None:
    """Athena and Glue publish no throttle metric: the stage's execution log records each refused task."""
    _, pipeline = synthesized(engine)
    filters = resources(pipeline, "AWS::Logs::MetricFilter")
    assert len(filters) == 2
    for metric_filter in filters.values():
        pattern = metric_filter["Properties"]["FilterPattern"]
        assert '$.type = "TaskFailed"' in pattern
        for error in ("Athena.TooManyRequestsException", "Glue.ConcurrentRunsExceededException"):
            assert f'$.details.error = "{error}"' in pattern


def s3_statements(template: Template) -> list[tuple[str, dict[str, Any]]]:
    return [
        (name, statement)
        for name, policy in resources(template, "AWS::IAM::Policy").items()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement.get("Effect") == "Allow" and any(a.startswith("s3:") for a in as_list(statement["Action"]))
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_no_role_may_touch_every_bucket(engine: str) -> None:
    """A stage B step is a team's SQL, run by Athena as the state machine's role: with CDK's ``s3:GetObject`` on
    ``"*"`` it could read any bucket of the account that its own policy does not guard (#40)."""
    for template in synthesized(engine):
        for name, statement in s3_statements(template):
            assert "*" not in as_list(statement["Resource"]), f"{name}: {statement['Action']} on every bucket"


@pytest.mark.parametrize("engine", ENGINES)
def test_the_athena_tasks_read_only_the_buckets_their_statements_read(engine: str) -> None:
    _, pipeline = synthesized(engine)
    checked = 0
    for name, statement in s3_statements(pipeline):
        if "StateMachineRole" in name and "s3:CreateBucket" in as_list(statement["Action"]):
            named = {flatten_reference(resource).split("-")[-1] for resource in as_list(statement["Resource"])}
            assert named == {
                f"{b}BucketArn{s}" for b in ("Raw", "Stage", "Analytics", "AthenaResults") for s in ("", "/*")
            }
            checked += 1
    assert checked == 2


@pytest.mark.parametrize("engine", ENGINES)
def test_no_grant_names_a_json_path(engine: str) -> None:
    """CDK builds ``database/$.db`` from a task's JSON-path query context: an ARN of nothing, left out."""
    _, pipeline = synthesized(engine)
    for name, policy in resources(pipeline, "AWS::IAM::Policy").items():
        assert "/$." not in json.dumps(policy["Properties"]["PolicyDocument"]), name


@pytest.mark.parametrize("engine", ENGINES)
def test_only_the_post_updates_may_delete_glue_table_versions_and_only_this_environment_s(engine: str) -> None:
    """They prune an unpartitioned table's old versions after its publish (``lakeline.catalog_versions``)."""
    _, pipeline = synthesized(engine)
    granted = sorted(
        name
        for name, policy in resources(pipeline, "AWS::IAM::Policy").items()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if "glue:DeleteTableVersion" in as_list(statement["Action"])
        and [flatten_reference(resource).rsplit(":", 1)[-1] for resource in as_list(statement["Resource"])]
        == ["catalog", "database/*_dev", "table/*_dev/*"]
        and {"glue:GetTableVersions", "glue:GetTable"} <= set(as_list(statement["Action"]))
    )
    assert [name.split("PostUpdate")[0] for name in granted] == ["StageA", "StageB"], granted
    everywhere = [
        name
        for name, policy in resources(pipeline, "AWS::IAM::Policy").items()
        if "glue:DeleteTableVersion" in json.dumps(policy)
    ]
    assert sorted(everywhere) == granted


@pytest.mark.parametrize("engine", ENGINES)
def test_the_failure_functions_may_delete_only_run_temp_tables(engine: str) -> None:
    """They drop a failed run's quality table (``stage_end.runtime.drop_quality_table``): ``lakeline_tmp_*`` of
    this environment's databases, never a published table."""
    _, pipeline = synthesized(engine)
    granted = sorted(
        name
        for name, policy in resources(pipeline, "AWS::IAM::Policy").items()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if as_list(statement["Action"]) == ["glue:DeleteTable"]
        and [flatten_reference(resource).rsplit(":", 1)[-1] for resource in as_list(statement["Resource"])]
        == ["catalog", "database/*_dev", "table/*_dev/lakeline_tmp_*"]
    )
    assert [name.split("Function")[0] for name in granted] == ["StageAFailure", "StageBFailure", "StrandedRunEnd"]
