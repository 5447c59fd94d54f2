"""Template assertions over the synthesized stacks (in-process, offline)."""

from __future__ import annotations

import functools
import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from stacks.app import build_app

STATEFUL_LOGICAL_IDS = {
    "DataKey17AFBB84": "AWS::KMS::Key",
    "RawBucket0C3EE094": "AWS::S3::Bucket",
    "StageBucketAE822047": "AWS::S3::Bucket",
    "AnalyticsBucket39EAAEEA": "AWS::S3::Bucket",
    "ArtifactsBucket2AAC5544": "AWS::S3::Bucket",
    "AthenaResultsBucket879938FA": "AWS::S3::Bucket",
    "LineageArchiveBucket387E84C7": "AWS::S3::Bucket",
    "DependenciesTable6103D99F": "AWS::DynamoDB::Table",
    "DependenciesByTable6CF9B5D6": "AWS::DynamoDB::Table",
    "PipelineStateTable01717011": "AWS::DynamoDB::Table",
    "LineageTableED19B650": "AWS::DynamoDB::Table",
    "LineageDatabase": "AWS::Glue::Database",
    "LineageArchiveTable": "AWS::Glue::Table",
    "OpenLineageEventsTable": "AWS::Glue::Table",
}
OPENLINEAGE_ENVIRONMENT = {"OPENLINEAGE_URL": "https://marquez.example.com", "OPENLINEAGE_API_KEY": "key-1"}


def synth(engine: str, **context: Any) -> tuple[Template, Template]:
    app = cdk.App(context={"environment": "dev", "engine": engine, **context})
    storage, pipeline = build_app(app)
    return Template.from_stack(storage), Template.from_stack(pipeline)


@functools.cache
def synthesized(engine: str) -> tuple[Template, Template]:
    """``synth(engine)`` once per test session, for the modules that only read its templates (a synth costs
    seconds); a test that changes what the stacks are made from calls ``synth`` itself."""
    return synth(engine)


@pytest.fixture(scope="module")
def athena_templates() -> tuple[Template, Template]:
    return synthesized("athena")


@pytest.fixture(scope="module")
def spark_templates() -> tuple[Template, Template]:
    """The spark engine, with an OpenLineage transport configured the standard way."""
    return synth("spark", openlineage_environment=OPENLINEAGE_ENVIRONMENT)


def resources(template: Template, kind: str) -> dict[str, Any]:
    return dict(template.find_resources(kind))


def test_stateful_resources_keep_their_logical_ids_and_are_retained(
    athena_templates: tuple[Template, Template],
) -> None:
    storage, _ = athena_templates
    found = storage.to_json()["Resources"]
    for logical_id, kind in STATEFUL_LOGICAL_IDS.items():
        assert logical_id in found, f"{logical_id} was renamed: CloudFormation would replace it and lose its data"
        assert found[logical_id]["Type"] == kind
        assert found[logical_id]["DeletionPolicy"] == "Retain"
        assert found[logical_id]["UpdateReplacePolicy"] == "Retain"


def test_buckets_block_public_access_enforce_tls_and_encrypt(athena_templates: tuple[Template, Template]) -> None:
    storage, _ = athena_templates
    buckets = resources(storage, "AWS::S3::Bucket")
    assert len(buckets) == 7
    for bucket in buckets.values():
        block = bucket["Properties"]["PublicAccessBlockConfiguration"]
        assert block == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }
        assert bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    policies = resources(storage, "AWS::S3::BucketPolicy")
    assert len(policies) == 7
    for policy in policies.values():
        denies = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
        assert any(s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in denies)
    kms_encrypted = [
        b
        for b in buckets.values()
        if b["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"][
            "SSEAlgorithm"
        ]
        == "aws:kms"
    ]
    assert len(kms_encrypted) == 6, "every data bucket uses the data key; only the access-log bucket cannot"


def test_raw_bucket_sends_events_to_eventbridge(athena_templates: tuple[Template, Template]) -> None:
    storage, _ = athena_templates
    storage.has_resource_properties(
        "Custom::S3BucketNotifications",
        {"NotificationConfiguration": {"EventBridgeConfiguration": {}}, "BucketName": {"Ref": "RawBucket0C3EE094"}},
    )


def test_tables_have_the_contracted_keys_streams_ttl_and_indexes(athena_templates: tuple[Template, Template]) -> None:
    storage, _ = athena_templates
    tables = storage.to_json()["Resources"]
    dependencies = tables["DependenciesTable6103D99F"]["Properties"]
    assert dependencies["KeySchema"] == [{"AttributeName": "dataset", "KeyType": "HASH"}]
    assert dependencies["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    by_table = tables["DependenciesByTable6CF9B5D6"]["Properties"]
    assert by_table["KeySchema"] == [
        {"AttributeName": "source_table", "KeyType": "HASH"},
        {"AttributeName": "target_dataset", "KeyType": "RANGE"},
    ]
    lineage = tables["LineageTableED19B650"]["Properties"]
    assert lineage["KeySchema"] == [
        {"AttributeName": "root_id", "KeyType": "HASH"},
        {"AttributeName": "node_id", "KeyType": "RANGE"},
    ]
    assert lineage["TimeToLiveSpecification"] == {"AttributeName": "ttl_expiry", "Enabled": True}
    assert {index["IndexName"] for index in lineage["GlobalSecondaryIndexes"]} >= {"node-index"}
    assert [index["IndexName"] for index in lineage["LocalSecondaryIndexes"]] == ["action-index"]
    assert "StreamSpecification" in lineage
    for table in resources(storage, "AWS::DynamoDB::Table").values():
        assert table["Properties"]["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
        assert table["Properties"]["SSESpecification"]["SSEEnabled"] is True


def test_lineage_archive_table_uses_partition_projection(athena_templates: tuple[Template, Template]) -> None:
    storage, _ = athena_templates
    table = storage.to_json()["Resources"]["LineageArchiveTable"]["Properties"]["TableInput"]
    assert table["Parameters"]["projection.enabled"] == "true"
    assert table["PartitionKeys"] == [{"Name": "dt", "Type": "string"}]


def test_storage_stack_has_termination_protection(athena_templates: tuple[Template, Template]) -> None:
    app = cdk.App(context={"environment": "dev"})
    storage, pipeline = build_app(app)
    assert storage.termination_protection is True
    assert storage in pipeline.dependencies


def state_machine_definition(pipeline: Template, stage: str = "StageA") -> dict[str, Any]:
    (machine,) = [
        m for name, m in resources(pipeline, "AWS::StepFunctions::StateMachine").items() if name.startswith(stage)
    ]
    parts = machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    # Tokens (ARNs, names) only occur inside JSON strings of the definition.
    text = "".join(part if isinstance(part, str) else "TOKEN" for part in parts)
    return dict(json.loads(text))


def test_stage_a_runs_native_athena_sync_tasks_with_retry_and_catch(
    athena_templates: tuple[Template, Template],
) -> None:
    _, pipeline = athena_templates
    states = state_machine_definition(pipeline)["States"]
    athena_tasks = {
        name: s for name, s in states.items() if s.get("Resource", "").endswith("athena:startQueryExecution.sync")
    }
    assert {"RunPlanRegisterRaw", "RunPlanCtas", "RunPlanDropTemp", "RunPlanDropTempAfterFailure"} <= set(athena_tasks)
    for task in athena_tasks.values():
        assert task["Retry"][0]["ErrorEquals"][0] == "Athena.TooManyRequestsException"
        assert task["TimeoutSeconds"] == 7200
    catch = states["RunPlanCtas"]["Catch"][0]
    assert catch["ErrorEquals"] == ["States.ALL"]
    assert catch["Next"] == "RunPlanDropTempAfterFailure"
    # The table over a compaction's manifest (#39), when the plan has one: made before the CTAS, dropped
    # after it, also after its failure.
    assert states["RunPlanDropTempAfterFailure"]["Next"] == "RunPlanDropSourceAfterFailureIfAny"
    after_failure = states["RunPlanDropSourceAfterFailureIfAny"]
    assert after_failure["Choices"][0] == {"Variable": "$.plan.source", "IsNull": True, "Next": "RunPlanCtasFailed"}
    assert after_failure["Default"] == "RunPlanDropSourceAfterFailure"
    assert states["RunPlanDropSourceAfterFailure"]["Next"] == "RunPlanCtasFailed"
    assert states["RunPlanDropSourceAfterFailure"]["Catch"][0]["Next"] == "RunPlanCtasFailed"
    assert states["RunPlanHasSource"]["Default"] == "RunPlanSourceTable"
    assert states["RunPlanSourceTable"]["Next"] == "RunPlanCtas"
    assert states["RunPlanSourceTable"]["Parameters"]["QueryString.$"] == "$.plan.source.create"
    assert states["RunPlanDropSource"]["Parameters"]["QueryString.$"] == "$.plan.source.drop"
    assert states["RunPlanCtasFailed"]["Next"] == "StageARecord"
    assert states["StageARecord"]["Next"] == "StageAFailed"
    publish = states["RunPlanPublish"]
    assert publish["Type"] == "Map"
    assert publish["MaxConcurrency"] == 1
    assert not any("lambda:invoke" in s.get("Resource", "") and "Poll" in name for name, s in states.items())
    # The partition-commit protocol: the committed version first, nothing written when nothing is new,
    # the commit (compare-and-swap under the run's lease) before the swap, its failure recorded.
    assert state_machine_definition(pipeline)["StartAt"] == "RunPlanReconcile"
    assert states["RunPlanReconcile"]["ItemsPath"] == "$.plan.reconcile"
    assert states["RunPlanReconcile"]["Next"] == "RunPlanHasNewData"
    assert states["RunPlanHasNewData"]["Choices"][0] == {
        "Variable": "$.plan.mode",
        "StringEquals": "none",
        "Next": "RunPlanWritten",
    }
    assert states["RunPlanDropTemp"]["Next"] == "RunPlanDropSourceIfAny"
    assert states["RunPlanDropSourceIfAny"]["Choices"][0]["Next"] == "RunPlanHasChecks"
    assert states["RunPlanDropSource"]["Next"] == "RunPlanHasChecks"
    # The quality step (#41) between the writes and the commit: skipped by a Choice when the plan has no checks;
    # a failed check goes to the failure path as the 'quality' step, never to the commit.
    assert_quality_step(states, "RunPlan", "A", "StageARecord")
    assert states["RunPlanCommit"]["Next"] == "RunPlanPublish"
    assert states["RunPlanCommit"]["Parameters"]["Payload"]["plan.$"] == "$.plan"
    assert states["RunPlanCommitFailed"]["Next"] == "StageARecord"
    assert states["RunPlanPublish"]["Next"] == "RunPlanWritten"


def assert_quality_step(states: dict[str, Any], prefix: str, stage: str, record: str) -> None:
    """The quality step (#41) as the Athena engine deploys it: a Choice on the plan's checks, the quality
    function's task with the stage and the plan, its Catch marking the ``quality`` step on the failure path,
    and the commit only after it (or after the Choice skipped it)."""
    has_checks = states[f"{prefix}HasChecks"]
    assert has_checks["Type"] == "Choice"
    assert has_checks["Choices"] == [{"Variable": "$.plan.quality", "IsNull": True, "Next": f"{prefix}Checked"}]
    assert has_checks["Default"] == f"{prefix}Quality"
    task = states[f"{prefix}Quality"]
    assert task["Resource"].endswith(":states:::lambda:invoke")
    assert task["Parameters"]["Payload"] == {"stage": stage, "plan.$": "$.plan"}
    assert task["Next"] == f"{prefix}Checked"
    assert "Athena.TooManyRequestsException" in {e for retry in task["Retry"] for e in retry["ErrorEquals"]}
    (catch,) = task["Catch"]
    assert catch["ErrorEquals"] == ["States.ALL"] and catch["Next"] == f"{prefix}QualityFailed"
    failed = states[f"{prefix}QualityFailed"]
    assert (failed["Result"], failed["ResultPath"], failed["Next"]) == ("quality", "$.failed_step", record)
    assert states[f"{prefix}Checked"]["Next"] == f"{prefix}Commit"


def test_queues_have_dead_letter_queues_alarms_and_partial_batch_failures(
    athena_templates: tuple[Template, Template],
) -> None:
    _, pipeline = athena_templates
    queues = resources(pipeline, "AWS::SQS::Queue")
    work_queues = [q for q in queues.values() if "RedrivePolicy" in q["Properties"]]
    targets = {json.dumps(q["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]) for q in work_queues}
    assert len(work_queues) == 6, "queue A, queue B, their follow-up queues, the lineage queue and the trace queue"
    assert len(targets) == 4, "each with its own dead-letter queue, which a stage's follow-up queue shares"
    for queue in queues.values():
        assert "KmsMasterKeyId" in queue["Properties"]
    alarms = {
        name: alarm
        for name, alarm in resources(pipeline, "AWS::CloudWatch::Alarm").items()
        if alarm["Properties"].get("Namespace") == "AWS/SQS"
    }
    assert len(alarms) == len(queues), "a backlog alarm per work queue, an arrival alarm per dead-letter queue"
    mappings = list(resources(pipeline, "AWS::Lambda::EventSourceMapping").values())
    for mapping in mappings:
        assert mapping["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    streams = [m for m in mappings if "StartingPosition" in m["Properties"]]
    assert len(streams) == 2, "the dependencies stream and the lineage table's stream"
    for stream in streams:
        assert stream["Properties"]["BisectBatchOnFunctionError"] is True
        assert "OnFailure" in stream["Properties"]["DestinationConfig"]


def test_arrivals_rule_matches_object_created_in_the_raw_bucket(athena_templates: tuple[Template, Template]) -> None:
    _, pipeline = athena_templates
    pipeline.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.s3"],
                "detail-type": ["Object Created"],
                "detail": {"bucket": Match.any_value()},
            }
        },
    )


def test_functions_use_shipped_handlers_and_the_powertools_layer(athena_templates: tuple[Template, Template]) -> None:
    _, pipeline = athena_templates
    functions = resources(pipeline, "AWS::Lambda::Function")
    ours = [f for f in functions.values() if f["Properties"]["Handler"].startswith("lambdas.")]
    handlers = {f["Properties"]["Handler"] for f in ours}
    assert {"lambdas.stage_a_router.handler.handler", "lambdas.stage_a_failure.handler.handler"} <= handlers
    for function in ours:
        assert function["Properties"]["TracingConfig"] == {"Mode": "Active"}
        layers = [str(layer.get("Ref", "")) for layer in function["Properties"]["Layers"]]
        assert any(layer.startswith("SsmParameterValue") for layer in layers), "the Powertools layer"


def test_athena_workgroup_enforces_results_and_encryption(athena_templates: tuple[Template, Template]) -> None:
    _, pipeline = athena_templates
    pipeline.has_resource_properties(
        "AWS::Athena::WorkGroup",
        {
            "WorkGroupConfiguration": Match.object_like(
                {
                    "EnforceWorkGroupConfiguration": True,
                    "ResultConfiguration": {
                        "OutputLocation": Match.any_value(),
                        "EncryptionConfiguration": {"EncryptionOption": "SSE_KMS", "KmsKey": Match.any_value()},
                    },
                }
            )
        },
    )


def test_no_iam_statement_allows_every_action(athena_templates: tuple[Template, Template]) -> None:
    for template in athena_templates:
        for policy in resources(template, "AWS::IAM::Policy").values():
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                assert "*" not in actions


def test_spark_engine_runs_the_plan_as_a_glue_job(spark_templates: tuple[Template, Template]) -> None:
    _, pipeline = spark_templates
    states = state_machine_definition(pipeline)["States"]
    assert states["RunPlanSpark"]["Resource"].endswith("glue:startJobRun.sync")
    assert state_machine_definition(pipeline, "StageB")["States"]["RunStepsSpark"]["Resource"].endswith(
        "glue:startJobRun.sync"
    )
    assert not any(s.get("Resource", "").endswith("athena:startQueryExecution.sync") for s in states.values())
    pipeline.has_resource_properties(
        "AWS::Glue::Job",
        {
            "Command": {"Name": "glueetl", "PythonVersion": "3", "ScriptLocation": Match.any_value()},
            "DefaultArguments": Match.object_like({"--enable-glue-datacatalog": "true"}),
            "SecurityConfiguration": Match.any_value(),
        },
    )


def test_stage_b_runs_steps_in_order_drops_the_temp_table_on_failure_and_swaps(
    athena_templates: tuple[Template, Template],
) -> None:
    _, pipeline = athena_templates
    states = state_machine_definition(pipeline, "StageB")["States"]
    assert state_machine_definition(pipeline, "StageB")["StartAt"] == "RunStepsReconcile"
    assert states["RunStepsReconcile"]["Next"] == "RunStepsSteps"
    steps = states["RunStepsSteps"]
    assert steps["Type"] == "Map"
    assert steps["MaxConcurrency"] == 1
    step = steps["ItemProcessor"]["States"]["RunStepsStep"]
    assert step["Resource"].endswith("athena:startQueryExecution.sync")
    assert steps["Catch"][0]["Next"] == "RunStepsHasTempAfterFailure"
    assert states["RunStepsDropTempAfterFailure"]["Next"] == "RunStepsStepFailed"
    assert states["RunStepsStepFailed"]["Next"] == "StageBRecord"
    assert states["RunStepsHasTemp"]["Choices"][0]["Next"] == "RunStepsDropTemp"
    # The run's prefix is committed as the partition's next version before the catalog swap.
    assert states["RunStepsDropTemp"]["Next"] == "RunStepsHasChecks"
    assert_quality_step(states, "RunSteps", "B", "StageBRecord")
    assert states["RunStepsCommit"]["Next"] == "RunStepsPublish"
    assert states["RunStepsCommit"]["Catch"][0]["Next"] == "RunStepsCommitFailed"
    assert states["RunStepsPublish"]["ItemsPath"] == "$.plan.publish"
    assert states["RunStepsPublish"]["Next"] == "RunStepsWritten"
    assert states["RunStepsWritten"]["Next"] == "PostUpdateTask"
    assert states["PostUpdateTask"]["Next"] == "StageBDone"


def test_stage_b_steps_tell_the_failure_function_which_failed_and_the_post_update_when_they_ran(
    athena_templates: tuple[Template, Template], spark_templates: tuple[Template, Template]
) -> None:
    """#21: the Map's Catch gets only the failed iteration's Error and Cause, so the iteration puts its
    index before the task's cause (``stage_b.failures``); the Map keeps each query's times for the replay."""
    _, pipeline = athena_templates
    states = state_machine_definition(pipeline, "StageB")["States"]
    steps = states["RunStepsSteps"]
    assert steps["ItemSelector"]["index.$"] == "$$.Map.Item.Index"
    iteration = steps["ItemProcessor"]["States"]
    step = iteration["RunStepsStep"]
    assert step["ResultSelector"] == {
        "started.$": "$.QueryExecution.Status.SubmissionDateTime",
        "ended.$": "$.QueryExecution.Status.CompletionDateTime",
    }
    assert "ResultPath" not in step and steps["ResultPath"] == "$.step_times"
    assert step["Catch"] == [
        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "RunStepsStepFailureHasCause"}
    ]
    # An error without a Cause must not make States.Format fail (States.Runtime, which no Catch takes).
    has_cause = iteration["RunStepsStepFailureHasCause"]
    assert has_cause["Choices"] == [{"Variable": "$.error.Cause", "IsPresent": True, "Next": "RunStepsStepFailedAt"}]
    assert has_cause["Default"] == "RunStepsStepFailedAtUncaused"
    failed_at = iteration["RunStepsStepFailedAt"]
    assert failed_at["Parameters"] == {
        "Error.$": "$.error.Error",
        "Cause.$": "States.Format('steps[{}] failed: {}', $.index, $.error.Cause)",
    }
    uncaused = iteration["RunStepsStepFailedAtUncaused"]
    assert uncaused["Parameters"]["Cause.$"] == "States.Format('steps[{}] failed: {}', $.index, $.error.Error)"
    fail = {"Type": "Fail", "ErrorPath": "$.Error", "CausePath": "$.Cause"}
    assert iteration[failed_at["Next"]] == iteration[uncaused["Next"]] == fail
    assert states["PostUpdateTask"]["Parameters"]["Payload"]["step_times.$"] == "$.step_times"
    # A Glue job run keeps no step's times: the post-update is not asked for any.
    _, spark = spark_templates
    spark_payload = state_machine_definition(spark, "StageB")["States"]["PostUpdateTask"]["Parameters"]["Payload"]
    assert "step_times.$" not in spark_payload


def test_lineage_load_trace_schedule_and_ttl_catcher(athena_templates: tuple[Template, Template]) -> None:
    _, pipeline = athena_templates
    functions = resources(pipeline, "AWS::Lambda::Function")
    handlers = {f["Properties"]["Handler"] for f in functions.values()}
    for name in (
        "lineage_input", "lineage_load", "lineage_schedule", "lineage_trace", "lineage_expired", "lineage_compact",
    ):  # fmt: skip
        assert f"lambdas.{name}.handler.handler" in handlers
    pipeline.has_resource_properties("AWS::Events::Rule", {"ScheduleExpression": "cron(0 2 * * ? *)"})
    pipeline.has_resource_properties("AWS::Events::Rule", {"ScheduleExpression": "rate(1 hour)"})
    (expired,) = [
        m
        for m in resources(pipeline, "AWS::Lambda::EventSourceMapping").values()
        if "FilterCriteria" in m["Properties"]
    ]
    pattern = json.loads(expired["Properties"]["FilterCriteria"]["Filters"][0]["Pattern"])
    assert pattern == {
        "eventName": ["REMOVE"],
        "userIdentity": {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]},
    }


def test_every_deployed_handler_exists_in_the_repository(athena_templates: tuple[Template, Template]) -> None:
    from stacks.constructs.bundling import REPO_ROOT

    _, pipeline = athena_templates
    for function in resources(pipeline, "AWS::Lambda::Function").values():
        handler = function["Properties"]["Handler"]
        if handler.startswith("lambdas."):
            package = handler.split(".")[1]
            assert (REPO_ROOT / "lambdas" / package / "handler.py").is_file(), handler


def test_query_files_are_uploaded_to_the_artifacts_bucket(athena_templates: tuple[Template, Template]) -> None:
    _, pipeline = athena_templates
    pipeline.has_resource_properties(
        "Custom::CDKBucketDeployment", {"DestinationBucketKeyPrefix": "artifacts/athena_queries/", "Prune": True}
    )


def test_every_deployed_handler_function_is_callable(athena_templates: tuple[Template, Template]) -> None:
    import importlib

    _, pipeline = athena_templates
    for function in resources(pipeline, "AWS::Lambda::Function").values():
        module, _, attribute = function["Properties"]["Handler"].rpartition(".")
        if module.startswith("lambdas."):
            assert callable(getattr(importlib.import_module(module), attribute, None)), function["Properties"][
                "Handler"
            ]


def test_post_update_tasks_retry_their_failures(athena_templates: tuple[Template, Template]) -> None:
    _, pipeline = athena_templates
    for stage in ("StageA", "StageB"):
        retries = state_machine_definition(pipeline, stage)["States"]["PostUpdateTask"]["Retry"]
        assert ["States.TaskFailed"] in [retry["ErrorEquals"] for retry in retries]


# -- OpenLineage events of the stage functions ---------------------------------------------------------------


def test_the_dependencies_stream_function_parks_refused_items_in_its_mappings_failure_queue(
    athena_templates: tuple[Template, Template],
) -> None:
    """The queue the function is told to park in is the one its mapping sends to on failure, and it may send there
    (its messages encrypted with the queue's key)."""
    _, pipeline = athena_templates
    ((name, function),) = [
        (name, f["Properties"])
        for name, f in resources(pipeline, "AWS::Lambda::Function").items()
        if f["Properties"]["Handler"] == "lambdas.dependencies_by_table.handler.handler"
    ]
    (mapping,) = [
        m["Properties"]
        for m in resources(pipeline, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": name}
    ]
    destination = mapping["DestinationConfig"]["OnFailure"]["Destination"]  # {"Fn::GetAtt": [queue, "Arn"]}
    queue = destination["Fn::GetAtt"][0]
    assert function["Environment"]["Variables"]["DEPENDENCIES_STREAM_DEAD_LETTER_QUEUE_URL"] == {"Ref": queue}
    allowed = grants(role_statements(pipeline, function))
    assert ("sqs:SendMessage", json.dumps(destination)) in allowed
    key = json.dumps(resources(pipeline, "AWS::SQS::Queue")[queue]["Properties"]["KmsMasterKeyId"])
    assert {("kms:GenerateDataKey*", key), ("kms:Decrypt", key)} <= allowed


def functions_by_handler(pipeline: Template) -> dict[str, dict[str, Any]]:
    return {
        f["Properties"]["Handler"].split(".")[1]: f["Properties"]
        for f in resources(pipeline, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"].startswith("lambdas.")
    }


def role_statements(pipeline: Template, function: dict[str, Any]) -> list[dict[str, Any]]:
    role = function["Role"]["Fn::GetAtt"][0]
    return [
        statement
        for policy in resources(pipeline, "AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_the_openlineage_layer_is_built_once_for_the_runtime(athena_templates: tuple[Template, Template]) -> None:
    from stacks.constructs.functions import OPENLINEAGE_HANDLERS

    _, pipeline = athena_templates
    layers = {
        name: layer["Properties"]
        for name, layer in resources(pipeline, "AWS::Lambda::LayerVersion").items()
        if name.startswith("SharedLambdaCodeOpenLineageLayer")
    }
    assert len(layers) == 1
    ((name, layer),) = layers.items()
    assert layer["CompatibleRuntimes"] == ["python3.13"]
    for handler, function in functions_by_handler(pipeline).items():
        expected = 2 if handler in OPENLINEAGE_HANDLERS else 1
        assert len(function["Layers"]) == expected, handler
        assert ({"Ref": name} in function["Layers"]) == (handler in OPENLINEAGE_HANDLERS), handler


@pytest.mark.parametrize(("engine", "extra"), [("athena", {}), ("spark", OPENLINEAGE_ENVIRONMENT)])
def test_the_stage_functions_are_told_where_events_go(
    engine: str,
    extra: dict[str, str],
    athena_templates: tuple[Template, Template],
    spark_templates: tuple[Template, Template],
) -> None:
    from stacks.config import STACK_OPENLINEAGE_VARIABLES
    from stacks.constructs.functions import OPENLINEAGE_HANDLERS

    _, pipeline = athena_templates if engine == "athena" else spark_templates
    functions = functions_by_handler(pipeline)
    assert set(functions) >= OPENLINEAGE_HANDLERS
    for handler, function in functions.items():
        variables = function["Environment"]["Variables"]
        if handler not in OPENLINEAGE_HANDLERS:
            assert not [key for key in variables if key.startswith(("OPENLINEAGE", "PIPELINE_ENGINE"))], handler
            continue
        assert variables["OPENLINEAGE_EVENTS_LOCATION"] == {
            "Fn::Join": [
                "",
                ["s3://", {"Fn::ImportValue": "Lakeline-dev-Storage-LineageArchiveBucketName"}, "/openlineage/"],
            ]
        }
        assert variables["OPENLINEAGE_NAMESPACE"] == "lakeline-dev"
        assert variables["OPENLINEAGE_DATASET_NAMESPACE"] == {
            "Fn::Join": ["", ["awsathena://athena.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]
        }
        assert variables["OPENLINEAGE_GLUE_CATALOG"] == {
            "Fn::Join": [
                "",
                ["arn:", {"Ref": "AWS::Partition"}, ":glue:", {"Ref": "AWS::Region"}, ":", {"Ref": "AWS::AccountId"}],
            ]
        }
        assert variables["PIPELINE_ENGINE"] == engine
        # The functions run neither engine: the stack names the Glue job's Spark (Glue 5.0), or Athena's.
        assert variables["PIPELINE_ENGINE_VERSION"] == {"athena": "Athena engine version 3", "spark": "3.5.4"}[engine]
        openlineage = {key: value for key, value in variables.items() if key.startswith("OPENLINEAGE")}
        pipeline = {"PIPELINE_ENGINE", "PIPELINE_ENGINE_VERSION"}
        assert set(openlineage) == (STACK_OPENLINEAGE_VARIABLES - pipeline) | set(extra), handler
        assert {key: variables[key] for key in extra} == extra


def test_stage_functions_may_only_put_events_into_the_archive(athena_templates: tuple[Template, Template]) -> None:
    from stacks.constructs.functions import OPENLINEAGE_HANDLERS

    _, pipeline = athena_templates
    stage_functions = {h: f for h, f in functions_by_handler(pipeline).items() if h in OPENLINEAGE_HANDLERS}
    assert set(stage_functions) == OPENLINEAGE_HANDLERS
    for handler, function in stage_functions.items():
        granted = grants(role_statements(pipeline, function))
        archive = {(action, resource) for action, resource in granted if "LineageArchiveBucket" in resource}
        events = json.dumps(
            {"Fn::Join": ["", [{"Fn::ImportValue": "Lakeline-dev-Storage-LineageArchiveBucketArn"}, "/openlineage/*"]]}
        )
        assert {resource for _, resource in archive} == {events}, handler
        actions = {action for action, _ in archive}
        assert "s3:PutObject" in actions
        assert not [action for action in actions if action.startswith(("s3:Get", "s3:Delete", "s3:List"))]
        catalog = " ".join(resource for action, resource in granted if action == "glue:GetTable")
        assert catalog.count('":catalog"') == 1 and ":database/*_dev" in catalog and ":table/*_dev/*" in catalog


DATAZONE_ENVIRONMENT = {
    # A composite transport: Marquez and DataZone, the way OpenLineage variables configure it.
    "OPENLINEAGE__TRANSPORT": json.dumps(
        {
            "type": "composite",
            "transports": {
                "marquez": {"type": "http", "url": "https://marquez.example.com"},
                "datazone": {"type": "amazon_datazone_api", "domainId": "dzd_abc123", "region": "us-east-1"},
            },
        }
    )
}


def test_only_a_configured_datazone_transport_gets_post_lineage_event_on_its_domain(
    athena_templates: tuple[Template, Template],
) -> None:
    from stacks.constructs.functions import OPENLINEAGE_HANDLERS

    _, plain = athena_templates
    _, pipeline = synth("athena", openlineage_environment=DATAZONE_ENVIRONMENT)
    for template, configured in ((plain, False), (pipeline, True)):
        for handler, function in functions_by_handler(template).items():
            datazone = {(a, r) for a, r in grants(role_statements(template, function)) if a.startswith("datazone:")}
            if not configured or handler not in OPENLINEAGE_HANDLERS:
                assert datazone == set(), handler
                continue
            domain = {
                "Fn::Join": [
                    "",
                    ["arn:", {"Ref": "AWS::Partition"}, ":datazone:us-east-1:", {"Ref": "AWS::AccountId"},
                     ":domain/dzd_abc123"],
                ]
            }  # fmt: skip
            assert datazone == {("datazone:PostLineageEvent", json.dumps(domain))}, handler


def grants(statements: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """Each (action, resource as JSON) the statements allow, however ``minimizePolicies`` groups them."""
    return {
        (action, json.dumps(resource))
        for statement in statements
        if statement.get("Effect", "Allow") == "Allow"
        for action in as_list(statement["Action"])
        for resource in as_list(statement["Resource"])
    }


def test_the_openlineage_events_table_reads_the_archive_folder(athena_templates: tuple[Template, Template]) -> None:
    storage, _ = athena_templates
    table = storage.to_json()["Resources"]["OpenLineageEventsTable"]["Properties"]
    assert table["DatabaseName"] == "lakeline_lineage_dev"
    assert table["TableInput"]["Name"] == "openlineage_events"
    location = table["TableInput"]["StorageDescriptor"]["Location"]
    assert location == {"Fn::Join": ["", ["s3://", {"Ref": "LineageArchiveBucket387E84C7"}, "/openlineage/"]]}
    parameters = table["TableInput"]["Parameters"]
    assert parameters["projection.enabled"] == "true"
    assert parameters["storage.location.template"] == {
        "Fn::Join": ["", ["s3://", {"Ref": "LineageArchiveBucket387E84C7"}, "/openlineage/dt=${dt}/"]]
    }
    columns = {c["Name"]: c["Type"] for c in table["TableInput"]["StorageDescriptor"]["Columns"]}
    assert "columnlineage:struct<fields:map<string,struct<inputfields:array<" in columns["outputs"]


def test_the_column_lineage_query_is_a_named_query_on_the_lineage_database(
    athena_templates: tuple[Template, Template],
) -> None:
    _, pipeline = athena_templates
    # The query names the table unqualified, so it runs as saved, in the lineage database.
    pipeline.has_resource_properties(
        "AWS::Athena::NamedQuery",
        {
            "Name": "lakeline-openlineage-column-lineage",
            "Database": "lakeline_lineage_dev",
            "QueryString": Match.string_like_regexp('FROM "openlineage_events"'),
        },
    )


def test_the_stage_a_router_may_read_arriving_files_add_their_new_columns_and_write_by_name_copies(
    athena_templates: tuple[Template, Template],
) -> None:
    _, pipeline = athena_templates
    statements = role_statements(pipeline, functions_by_handler(pipeline)["stage_a_router"])
    actions = {action for statement in statements for action in as_list(statement["Action"])}
    assert {"s3:GetObject*", "kms:Decrypt", "glue:UpdateTable"} <= actions
    raw_reads = [
        statement
        for statement in statements
        if "s3:GetObject*" in as_list(statement["Action"]) and "RawBucket" in json.dumps(statement["Resource"])
    ]
    assert raw_reads, statements
    # It writes only the copies of CSV and JSON files read by name (stage_a.by_name), with the data key, and, beside
    # run prefixes in the stage bucket, the manifests of what runs read (stage_a.manifest) and each run's batch
    # (lakeline.commits.batch, #39).
    written = sorted(resource for action, resource in grants(statements) if action == "s3:PutObject")
    assert len(written) == 3, written
    (raw,) = [resource for resource in written if "RawBucket" in resource]
    assert raw.count("/*.lakeline-by-name.*") == 1, raw
    stage = sorted(json.loads(resource)["Fn::Join"][1][1] for resource in written if resource != raw)
    assert stage == ["/*/lakeline_run=*/????????????????/manifest", "/*/lakeline_run=*/batch/????????????????"], stage
    assert all("StageBucketArn" in resource for resource in written if resource != raw), written
    assert {"kms:Encrypt", "kms:GenerateDataKey*"} <= actions


def test_the_pipeline_stack_outputs_what_lakeline_status_reads(athena_templates: tuple[Template, Template]) -> None:
    from lakeline.operations.status import LATER_OUTPUTS, STACK_OUTPUTS

    _, pipeline = athena_templates
    outputs = pipeline.to_json()["Outputs"]
    assert {*STACK_OUTPUTS.values(), *LATER_OUTPUTS.values()} <= set(outputs), sorted(outputs)
    assert "Fn::ImportValue" in json.dumps(outputs["RawBucket"]["Value"])  # the storage stack's raw bucket
    assert "Fn::ImportValue" in json.dumps(outputs["PipelineStateTable"]["Value"])
    assert "StateMachine" in json.dumps(outputs["StageAStateMachineArn"]["Value"])
    assert "QueueB" in json.dumps(outputs["StageBDeadLetterQueueUrl"]["Value"])


@pytest.mark.parametrize("stage", ["StageA", "StageB"])
def test_the_quality_task_waits_out_athenas_quota_as_the_athena_tasks_do(
    athena_templates: tuple[Template, Template], stage: str
) -> None:
    """The quality function raises QualityThrottled when Athena stays at its quota past the engine's own
    retries: the task retries it with the throttling budget (#39), not the failure path's parking."""
    _, pipeline = athena_templates
    states = state_machine_definition(pipeline, stage)["States"]
    (quality,) = [state for name, state in states.items() if state.get("Type") == "Task" and name.endswith("Quality")]
    (throttling,) = [retry for retry in quality["Retry"] if "QualityThrottled" in retry["ErrorEquals"]]
    assert "Lambda.TooManyRequestsException" in throttling["ErrorEquals"]
    assert throttling["MaxAttempts"] == 20 and throttling["IntervalSeconds"] == 30
