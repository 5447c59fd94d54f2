"""OpenLineage events of the deployed pipeline: the real stage A and stage B handlers on moto.

One arrival goes through the stage A router and post-update function, the stage B message it routes
goes through the stage B router and post-update function; the events they keep in the archive bucket
must follow a target column back to the raw column, carry the parent (execution) and root (arrival)
facets, and be re-written, not duplicated, by a retried invocation. A configured HTTP transport (a
real local HTTP server standing in for Marquez) receives the same events.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import boto3
import pytest
from moto import mock_aws

from harness.faults import create_pass_state_machine
from lakeline.dependencies.model import parse_dependency_item
from lakeline.dependencies.store import DependencyStore
from lakeline.dependencies.sync import backfill
from lakeline.dependencies.tables import DependencyTableNames, create_dependency_tables
from lakeline.lineage.openlineage.archive import EventArchive
from lakeline.lineage.openlineage.config import athena_dataset_namespace
from lakeline.lineage.records.archive import S3ArchiveStore
from lakeline.lineage.viewer.column_graph import ColumnGraph, FieldRef, render_tree
from lambdas.stage_a_failure import handler as stage_a_failure
from lambdas.stage_a_post_update import handler as stage_a_post_update
from lambdas.stage_a_router import handler as stage_a_router
from lambdas.stage_b_failure import handler as stage_b_failure
from lambdas.stage_b_post_update import handler as stage_b_post_update
from lambdas.stage_b_router import handler as stage_b_router
from stage_a.plan import StageAPlan
from stage_lineage.records import stage_a_root_id
from tests.handlers.test_stage_a_handlers import eventbridge_arrival, sqs_event
from tests.lambda_context import LambdaContextStub

REGION = "us-east-1"
CONTEXT = LambdaContextStub()
NAMESPACE = athena_dataset_namespace(REGION)
RAW, STAGE, ANALYTICS = "engineering_mysql_raw_dev", "engineering_mysql_dev", "engineering_analytics_dev"
TARGET = f"{ANALYTICS}.daily_customers"
KEY = "engineering/mysql/customers/date=20220120/file.csv"
HANDLERS = (stage_a_router, stage_a_post_update, stage_a_failure, stage_b_router, stage_b_post_update, stage_b_failure)


def _table(glue: Any, database: str, name: str, columns: list[tuple[str, str]], location: str) -> None:
    glue.create_table(
        DatabaseName=database,
        TableInput={
            "Name": name,
            "StorageDescriptor": {"Columns": [{"Name": n, "Type": t} for n, t in columns], "Location": location},
            "PartitionKeys": [{"Name": "date", "Type": "string"}],
        },
    )


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        queues = {
            name: sqs.create_queue(QueueName=name)["QueueUrl"] for name in ("dlq", "queue-a", "queue-b", "lineage")
        }
        sfn = boto3.client("stepfunctions", region_name=REGION)
        machines = {name: create_pass_state_machine(sfn, name) for name in ("stage-a", "stage-b")}
        glue = boto3.client("glue", region_name=REGION)
        for database in (RAW, STAGE, ANALYTICS):
            glue.create_database(DatabaseInput={"Name": database})
        columns = [("customer_id", "bigint"), ("name", "string")]
        _table(glue, RAW, "customers", columns, "s3://raw-bucket/engineering/mysql/customers/")
        _table(glue, STAGE, "customers", columns, "s3://stage-bucket/engineering/mysql/customers/")
        _table(glue, ANALYTICS, "daily_customers", [("id", "bigint")], "s3://analytics-bucket/daily_customers/")
        s3 = boto3.client("s3", region_name=REGION)
        for bucket in ("stage-bucket", "analytics-bucket", "archive-bucket"):
            s3.create_bucket(Bucket=bucket)
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        create_dependency_tables(dynamodb, DependencyTableNames())
        store = DependencyStore(dynamodb)
        sql = f"INSERT INTO {TARGET} SELECT customer_id, '$day' FROM {STAGE}.customers WHERE \"date\" = '$day'"
        store.put_items([parse_dependency_item(dependency_item(sql))])
        backfill(store)
        environment = {
            "DEAD_LETTER_QUEUE_URL": queues["dlq"],
            "RAW_BUCKET": "raw-bucket",
            "STAGE_BUCKET": "stage-bucket",
            "ARTIFACTS_BUCKET": "artifacts-bucket",
            "PIPELINE_ENVIRONMENT": "dev",
            "DEPENDENCIES_TABLE": "dependencies",
            "DEPENDENCIES_BY_TABLE_TABLE": "dependencies-by-table",
            "PIPELINE_STATE_TABLE": "pipeline-state",
            "STAGE_A_QUEUE_URL": queues["queue-a"],
            "STAGE_A_FOLLOW_UP_QUEUE_URL": queues["queue-a"],
            "STAGE_A_DEAD_LETTER_QUEUE_URL": queues["dlq"],
            "STAGE_B_QUEUE_URL": queues["queue-b"],
            "STAGE_B_FOLLOW_UP_QUEUE_URL": queues["queue-b"],
            "STAGE_B_DEAD_LETTER_QUEUE_URL": queues["dlq"],
            "LINEAGE_QUEUE_URL": queues["lineage"],
            "OPENLINEAGE_EVENTS_LOCATION": "s3://archive-bucket/openlineage/",
            "OPENLINEAGE_NAMESPACE": "lakeline-dev",
            "OPENLINEAGE_DATASET_NAMESPACE": NAMESPACE,
            "PIPELINE_ENGINE": "athena",
        }
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        for variable in ("OPENLINEAGE_URL", "OPENLINEAGE_CONFIG", "OPENLINEAGE_PARENT_ID", "OPENLINEAGE_DISABLED"):
            monkeypatch.delenv(variable, raising=False)
        clear_caches()
        before = set(os.environ)
        yield {"sqs": sqs, "sfn": sfn, "s3": s3, "queues": queues, "machines": machines, "monkeypatch": monkeypatch}
        clear_caches()
        # openlineage-python's client copies OPENLINEAGE_URL into OPENLINEAGE__TRANSPORT__... variables itself.
        for name in set(os.environ) - before:
            del os.environ[name]


def clear_caches() -> None:
    for module in HANDLERS:
        module.runtime.cache_clear()


def dependency_item(*sqls: str) -> dict[str, Any]:
    return {
        "dataset": TARGET,
        "dependencies": [
            {
                "TableName": f"{STAGE}.customers",
                "FieldColumn": "date",
                "Usage": "overwrite",
                "DateExpression": "%Y%m%d",
                "relativedelta_attributes": {"days": 0},
            }
        ],
        "partitionColumn": "date",
        "partitionPythonMask": "%Y%m%d",
        "steps": [{"db": ANALYTICS, "sql": sql, "info": f"daily {index}"} for index, sql in enumerate(sqls)],
        "date_substitutions": [{"token": "$day", "format": "%Y%m%d", "relativedelta_attributes": {"days": 0}}],
    }


def execution_input(aws: dict[str, Any], machine: str) -> dict[str, Any]:
    (execution,) = aws["sfn"].list_executions(stateMachineArn=aws["machines"][machine])["executions"]
    return dict(json.loads(aws["sfn"].describe_execution(executionArn=execution["executionArn"])["input"]))


def run_stage_a(aws: dict[str, Any]) -> dict[str, Any]:
    aws["monkeypatch"].setenv("STATE_MACHINE_ARN", aws["machines"]["stage-a"])
    stage_a_router.runtime.cache_clear()
    assert stage_a_router.handler(sqs_event(eventbridge_arrival(KEY)), CONTEXT) == {"batchItemFailures": []}
    payload = execution_input(aws, "stage-a")
    stage_a_post_update.handler({"plan": payload["plan"]}, CONTEXT)
    return payload


def plan_stage_b(aws: dict[str, Any]) -> dict[str, Any]:
    sent = aws["sqs"].receive_message(QueueUrl=aws["queues"]["queue-b"], MaxNumberOfMessages=10)["Messages"]
    (message,) = sent
    aws["monkeypatch"].setenv("STATE_MACHINE_ARN", aws["machines"]["stage-b"])
    stage_b_router.runtime.cache_clear()
    assert stage_b_router.handler(sqs_event(message["Body"]), CONTEXT) == {"batchItemFailures": []}
    return execution_input(aws, "stage-b")


def archived(aws: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    archive = EventArchive(S3ArchiveStore.at(aws["s3"], "s3://archive-bucket/openlineage/"))
    return archive.store.keys(), archive.events()


def lineage_records(aws: dict[str, Any]) -> list[dict[str, Any]]:
    records = []
    while True:
        got = aws["sqs"].receive_message(QueueUrl=aws["queues"]["lineage"], MaxNumberOfMessages=10)
        if not got.get("Messages"):
            return records
        for message in got["Messages"]:
            body = json.loads(message["Body"])
            records.extend(body if isinstance(body, list) else body.get("records", [body]))
            aws["sqs"].delete_message(QueueUrl=aws["queues"]["lineage"], ReceiptHandle=message["ReceiptHandle"])


def test_events_follow_a_column_from_stage_b_back_to_the_raw_column(aws: dict[str, Any]) -> None:
    run_stage_a(aws)
    stage_b = plan_stage_b(aws)
    result = stage_b_post_update.handler({"message": stage_b["message"], "plan": stage_b["plan"]}, CONTEXT)
    assert result["openlineage_events"] == 4
    keys, events = archived(aws)
    # Stage A opened the tree: the root (job pipeline) has its own run; stage B runs inside it.
    assert sorted((e["job"]["name"], e["eventType"]) for e in events) == [
        ("pipeline", "COMPLETE"),
        ("pipeline", "START"),
        ("stage_a", "COMPLETE"),
        ("stage_a", "START"),
        (f"stage_a.{STAGE}.customers", "COMPLETE"),
        (f"stage_a.{STAGE}.customers", "START"),
        (f"stage_b.{TARGET}", "COMPLETE"),
        (f"stage_b.{TARGET}", "START"),
        (f"stage_b.{TARGET}.step0", "COMPLETE"),
        (f"stage_b.{TARGET}.step0", "START"),
    ]
    # One object per event, under the day of its own eventTime: stage A's START is dated when the run
    # was planned, which is the arrival's S3 event time (2022-01-20 here).
    assert sorted(keys) == sorted(f"dt={e['eventTime'][:10]}/{e['run']['runId']}.{e['eventType']}.json" for e in events)
    assert {e["eventTime"][:10] for e in events if e["eventType"] == "START"} >= {"2022-01-20"}

    graph = ColumnGraph.from_events(events)
    tree = render_tree(graph.tree(FieldRef(NAMESPACE, f"AwsDataCatalog.{TARGET}", "id"), indirect=False))
    assert tree.splitlines() == [
        f"{TARGET}.id",
        f"+- {STAGE}.customers.customer_id  DIRECT IDENTITY  [job lakeline-dev/stage_b.{TARGET}.step0]",
        f"   +- {RAW}.customers.customer_id  DIRECT IDENTITY  [job lakeline-dev/stage_a.{STAGE}.customers]",
    ]


def test_the_version_stage_a_wrote_is_the_version_stage_b_read_in_events_and_records(aws: dict[str, Any]) -> None:
    """#43: stage A's output carries the partition version its commit made, the message it routes carries it to
    stage B, whose step names it as its input's version; the lineage records carry the same tokens."""
    run_stage_a(aws)
    stage_b = plan_stage_b(aws)
    stage_b_post_update.handler({"message": stage_b["message"], "plan": stage_b["plan"]}, CONTEXT)
    _, events = archived(aws)
    done = {e["job"]["name"]: e for e in events if e["eventType"] == "COMPLETE" and "sql" in e["job"]["facets"]}
    [written] = done[f"stage_a.{STAGE}.customers"]["outputs"]
    stage_a_version = written["facets"]["version"]["datasetVersion"]
    assert stage_a_version.startswith("v1.")  # the partition's first version
    step = done[f"stage_b.{TARGET}.step0"]
    read = {i["name"].removeprefix("AwsDataCatalog."): i["facets"].get("version") for i in step["inputs"]}
    assert read[f"{STAGE}.customers"]["datasetVersion"] == stage_a_version
    [target] = step["outputs"]
    stage_b_version = target["facets"]["version"]["datasetVersion"]
    assert stage_b_version.startswith("v1.") and stage_b_version != stage_a_version
    versions = {r["dataset"]: r.get("version") for r in lineage_records(aws) if r["action_taken"] != "RAW_DATA_INPUT"}
    assert versions == {f"{STAGE}.customers": stage_a_version, TARGET: stage_b_version}


def test_parent_is_the_execution_and_root_is_the_arrival_named_by_the_lineage_records(aws: dict[str, Any]) -> None:
    stage_a = run_stage_a(aws)
    stage_b = plan_stage_b(aws)
    stage_b_post_update.handler({"message": stage_b["message"], "plan": stage_b["plan"]}, CONTEXT)
    _, events = archived(aws)
    steps = [e for e in events if "sql" in e["job"]["facets"]]
    by_job = {e["job"]["name"]: e for e in steps if e["eventType"] == "COMPLETE"}
    root_id = stage_a_root_id(StageAPlan.from_dict(stage_a["plan"]))
    parents = {}
    for name, event in by_job.items():
        facet = event["run"]["facets"]["parent"]
        root = facet["root"]
        assert (root["run"]["runId"], root["job"]["namespace"], root["job"]["name"]) == (
            root_id,
            "lakeline-dev",
            "pipeline",
        )
        parents[name] = (facet["job"]["name"], facet["run"]["runId"])
        assert event["job"]["namespace"] == "lakeline-dev"
        assert event["job"]["facets"]["sql"]["query"].startswith("INSERT INTO")
        assert event["run"]["facets"]["processing_engine"]["name"] == "athena"
        assert all(d["namespace"] == NAMESPACE for d in event["inputs"] + event["outputs"])
    assert parents[f"stage_a.{STAGE}.customers"][0] == "stage_a"
    assert parents[f"stage_b.{TARGET}.step0"][0] == f"stage_b.{TARGET}"
    # The lineage records name the same executions, so records and events meet on one id.
    records = {(r["job_name"], r.get("run_id")) for r in lineage_records(aws) if r["action_taken"] != "RAW_DATA_INPUT"}
    assert records == {(f"lakeline-dev/{job}", run_id) for job, run_id in parents.values()}
    # The parents and the root are runs with their own START and COMPLETE.
    own = {(e["job"]["name"], e["run"]["runId"], e["eventType"]) for e in events if "sql" not in e["job"]["facets"]}
    assert own == {
        (name, run_id, state)
        for name, run_id in [*parents.values(), ("pipeline", root_id)]
        for state in ("START", "COMPLETE")
    }
    # Each START is dated when the run was planned, before its COMPLETE.
    for name, event in by_job.items():
        (start,) = [e for e in events if e["job"]["name"] == name and e["eventType"] == "START"]
        assert start["run"]["runId"] == event["run"]["runId"]
        assert start["eventTime"] <= event["eventTime"]


def test_a_retried_post_update_rewrites_the_same_events(aws: dict[str, Any]) -> None:
    stage_a = run_stage_a(aws)
    first_keys, first = archived(aws)
    stage_a_post_update.handler({"plan": stage_a["plan"]}, CONTEXT)
    keys, events = archived(aws)
    assert keys == first_keys and len(keys) == 6
    assert [e["run"]["runId"] for e in events] == [e["run"]["runId"] for e in first]


def test_failed_runs_emit_fail_with_the_reason(aws: dict[str, Any]) -> None:
    stage_a = run_stage_a(aws)
    error = {"Error": "Athena.QueryFailed", "Cause": "HIVE_BAD_DATA: broken.parquet"}
    result = stage_a_failure.handler({"plan": stage_a["plan"], "error": error}, CONTEXT)
    assert result["openlineage_events"] == 6
    stage_b = plan_stage_b(aws)
    error = {"Error": "Athena.QueryFailed", "Cause": "COLUMN_NOT_FOUND: no_such_column"}
    result = stage_b_failure.handler({"plan": stage_b["plan"], "error": error}, CONTEXT)
    assert result["openlineage_events"] == 4
    _, events = archived(aws)
    failed = {e["job"]["name"]: e for e in events if e["eventType"] == "FAIL"}
    assert set(failed) == {
        "pipeline",
        "stage_a",
        f"stage_a.{STAGE}.customers",
        f"stage_b.{TARGET}",
        f"stage_b.{TARGET}.step0",
    }
    message = failed[f"stage_b.{TARGET}.step0"]["run"]["facets"]["errorMessage"]["message"]
    assert message == "steps failed: Athena.QueryFailed: COLUMN_NOT_FOUND: no_such_column"
    # A failed run adds no column lineage to follow.
    graph = ColumnGraph.from_events(e for e in events if e["eventType"] != "COMPLETE")
    assert graph.fields == []


def test_without_an_events_location_no_events_are_made(aws: dict[str, Any]) -> None:
    aws["monkeypatch"].delenv("OPENLINEAGE_EVENTS_LOCATION")
    clear_caches()
    run_stage_a(aws)
    assert archived(aws) == ([], [])


class _Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, str | None, dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, self.headers.get("Authorization"), json.loads(body)))
        self.send_response(201)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        del format, args


@pytest.fixture
def marquez() -> Iterator[str]:
    _Collector.received = []
    server = HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join()


def test_a_configured_http_transport_receives_the_archived_events(aws: dict[str, Any], marquez: str) -> None:
    aws["monkeypatch"].setenv("OPENLINEAGE_URL", marquez)
    aws["monkeypatch"].setenv("OPENLINEAGE_API_KEY", "secret-key")
    clear_caches()
    run_stage_a(aws)
    _, events = archived(aws)
    assert [(path, auth) for path, auth, _ in _Collector.received] == [("/api/v1/lineage", "Bearer secret-key")] * 6
    sent = sorted((body["run"]["runId"], body["eventType"]) for _, _, body in _Collector.received)
    assert sent == sorted((e["run"]["runId"], e["eventType"]) for e in events)


STEP_SQL = f"INSERT INTO {TARGET} SELECT customer_id, '$day' FROM {STAGE}.customers WHERE \"date\" = '$day'"


def three_steps() -> None:
    """The target's item with three steps (each writes the target, as a failing middle step needs)."""
    store = DependencyStore(boto3.client("dynamodb", region_name=REGION))
    store.put_items([parse_dependency_item(dependency_item(STEP_SQL, STEP_SQL, STEP_SQL))])
    backfill(store)


def stage_b_story(events: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each stage B run's event types, in time order (a tie keeps START first)."""
    ranked = sorted(events, key=lambda e: (e["eventTime"], e["eventType"] != "START"))
    story: dict[str, list[str]] = {}
    for event in ranked:
        if event["job"]["name"].startswith("stage_b"):
            story.setdefault(event["job"]["name"].removeprefix(f"stage_b.{TARGET}"), []).append(event["eventType"])
    return story


def athena_step_failure(index: int) -> dict[str, str]:
    """What the Map's Catch hands on when step ``index``'s query fails (``stage_b.failures``)."""
    query = {
        "QueryExecutionId": "q-2",
        "Query": STEP_SQL,
        "Status": {
            "State": "FAILED",
            "StateChangeReason": "COLUMN_NOT_FOUND: price",
            "SubmissionDateTime": "2022-01-20T10:16:00Z",
            "CompletionDateTime": "2022-01-20T10:16:02Z",
        },
    }
    return {"Error": "States.TaskFailed", "Cause": f"steps[{index}] failed: " + json.dumps({"QueryExecution": query})}


def test_a_stage_b_run_failing_in_its_middle_step_replays_each_step_s_life_cycle(aws: dict[str, Any]) -> None:
    """#21: before, the failure function never knew the failed step: the run's FAIL alone, no step events."""
    three_steps()
    run_stage_a(aws)
    stage_b = plan_stage_b(aws)
    request = {"plan": stage_b["plan"], "error": athena_step_failure(1), "failed_step": "steps"}
    result = stage_b_failure.handler(request, CONTEXT)
    assert result["openlineage_events"] == 7
    _, events = archived(aws)
    assert stage_b_story(events) == {
        "": ["START", "FAIL"],
        ".step0": ["START", "COMPLETE"],
        ".step1": ["START", "FAIL"],
        ".step2": ["ABORT"],
    }
    (failed,) = [e for e in events if e["job"]["name"].endswith(".step1") and e["eventType"] == "FAIL"]
    # The reason is the query's own, said first: the iteration's index was taken off the cause.
    assert failed["run"]["facets"]["errorMessage"]["message"] == (
        "steps failed: States.TaskFailed: Athena query q-2 FAILED: COLUMN_NOT_FOUND: price"
    )
    # The failed step is dated by its query (in the cause); the step before it, whose times the failed Map
    # lost, when the run was planned.
    dated = {(e["job"]["name"].rsplit(".", 1)[-1], e["eventType"]): e["eventTime"][:19] for e in events}
    assert dated[("step1", "START")] == "2022-01-20T10:16:00" and dated[("step1", "FAIL")] == "2022-01-20T10:16:02"
    assert dated[("step0", "COMPLETE")] == dated[("step0", "START")] <= dated[("step1", "START")]


def test_a_spark_job_run_failing_in_its_middle_step_names_it_in_its_error_message(aws: dict[str, Any]) -> None:
    three_steps()
    run_stage_a(aws)
    stage_b = plan_stage_b(aws)
    message = (
        f"StageBStepFailed: stage B {TARGET} {{'date': '20220120'}}: steps[1] (daily 1) failed: "
        "[UNRESOLVED_COLUMN] price"
    )
    run = {"Id": "jr_1", "JobName": "stage", "JobRunState": "FAILED", "ErrorMessage": message}
    error = {"Error": "States.TaskFailed", "Cause": json.dumps(run)}
    stage_b_failure.handler({"plan": stage_b["plan"], "error": error, "failed_step": "spark"}, CONTEXT)
    _, events = archived(aws)
    assert stage_b_story(events)[".step1"] == ["START", "FAIL"]
    assert stage_b_story(events)[".step2"] == ["ABORT"]


def test_a_failure_that_names_no_step_reports_the_run_s_fail_alone(aws: dict[str, Any]) -> None:
    """The DROP of the temp table after the steps (also ``steps``), or a reconcile: no step is blamed."""
    three_steps()
    run_stage_a(aws)
    stage_b = plan_stage_b(aws)
    error = {"Error": "States.TaskFailed", "Cause": "{}"}
    stage_b_failure.handler({"plan": stage_b["plan"], "error": error, "failed_step": "steps"}, CONTEXT)
    _, events = archived(aws)
    assert stage_b_story(events) == {"": ["START", "FAIL"]}


def test_a_finished_run_dates_its_steps_with_their_queries_times(aws: dict[str, Any]) -> None:
    """#21: before, every step's START and COMPLETE carried the run's planning time."""
    three_steps()
    run_stage_a(aws)
    stage_b = plan_stage_b(aws)
    times = [  # as the Athena task's result has them: epoch milliseconds, or ISO strings
        {"started": 1642673700000, "ended": 1642673760000},
        {"started": "2022-01-20T10:16:05Z", "ended": "2022-01-20T10:17:00Z"},
        {"started": "2022-01-20T10:17:01+00:00", "ended": "2022-01-20T10:18:30+00:00"},
    ]
    request = {"message": stage_b["message"], "plan": stage_b["plan"], "step_times": times}
    stage_b_post_update.handler(request, CONTEXT)
    _, events = archived(aws)
    dated = {
        (e["job"]["name"].rsplit(".", 1)[-1], e["eventType"]): e["eventTime"][:19]
        for e in events
        if ".step" in e["job"]["name"]
    }
    assert dated == {
        ("step0", "START"): "2022-01-20T10:15:00",
        ("step0", "COMPLETE"): "2022-01-20T10:16:00",
        ("step1", "START"): "2022-01-20T10:16:05",
        ("step1", "COMPLETE"): "2022-01-20T10:17:00",
        ("step2", "START"): "2022-01-20T10:17:01",
        ("step2", "COMPLETE"): "2022-01-20T10:18:30",
    }
