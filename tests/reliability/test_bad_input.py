"""Bad input: hostile S3 keys, malformed dependency items, lineage messages and events.

Every property is checked on generated input (hypothesis, derandomized so CI sees the same examples
every run): a clear error naming what was wrong, nothing executed or half-written, and the valid
neighbours of a bad message processed as if it were not there. Each generator is also checked to have
produced both accepted and rejected input, so a property cannot pass by never reaching one side.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import quote_plus

import boto3
import pydantic
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from sqlglot.dialects.athena import Athena
from sqlglot.tokens import TokenType
from typer.testing import CliRunner

from harness.faults import (
    REGION,
    arrival_event,
    context,
    drain_messages,
    lambda_sqs_event,
    reason_of,
    stage_a_cloud,
)
from harness.hostile import (
    component,
    file_name,
    json_values,
    mutated,
    partition_value,
    raw_keys,
)
from lakeline.cli import app
from lakeline.dependencies.model import DependencyItem, DependencyItemError, parse_dependency_item
from lakeline.errors import InvalidInputError
from lakeline.lineage.records.model import build_records
from lakeline.lineage.records.table import LINEAGE_TABLE
from lakeline.names import IDENTIFIER_PATTERN, PARTITION_VALUE_PATTERN
from stage_a.arrivals import parse_arrivals
from stage_a.contract import file_format
from stage_a.keys import FILE_NAME_PATTERN, MAX_KEY_LENGTH, InvalidKey, RawObject, parse_raw_key

EXAMPLES = settings(max_examples=200, derandomize=True, deadline=None, database=None)
FEWER = settings(
    max_examples=80,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
# The router publishes no metric for a batch that started nothing; Powertools warns about it.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")


def run_property(check: Callable[..., None]) -> None:
    """Run a hypothesis-decorated check (a plain call runs all its examples)."""
    check()


# -- raw object keys ----------------------------------------------------------------------------------------


def assert_strict(raw: RawObject, key: str) -> None:
    assert len(key) <= MAX_KEY_LENGTH
    for name in (raw.team, raw.dataset, raw.table, *(column for column, _ in raw.partition)):
        assert IDENTIFIER_PATTERN.fullmatch(name), name
    for _, value in raw.partition:
        assert PARTITION_VALUE_PATTERN.fullmatch(value) and ".." not in value, value
    assert FILE_NAME_PATTERN.fullmatch(raw.file_name) and raw.file_name not in (".", "..")
    assert raw.partition_prefix + raw.file_name == key, "nothing dropped, added or altered"
    assert not set(key) & set("'\"`;\\%\x00 \t\n"), "no quote, separator, escape or space survives"


def test_every_key_is_rejected_with_a_reason_or_parsed_into_strict_parts() -> None:
    outcomes: Counter[str] = Counter()

    @EXAMPLES
    @given(raw_keys())
    def check(key: str) -> None:
        try:
            raw = parse_raw_key(key)
        except InvalidKey as error:
            outcomes["rejected"] += 1
            assert error.problem and str(error).startswith("raw object key ")
            return
        outcomes["accepted"] += 1
        assert_strict(raw, key)

    run_property(check)
    assert outcomes["accepted"] >= 10 and outcomes["rejected"] >= 100, outcomes


def test_notification_keys_are_decoded_exactly_once() -> None:
    """S3 notifications URL-encode keys: decoded once they are the key; encoded twice, the '%' that
    one decoding leaves is refused, so a key cannot smuggle characters through double encoding."""

    @EXAMPLES
    @given(raw_keys())
    def check(key: str) -> None:
        def verdict(candidate: str) -> RawObject | str:
            try:
                return parse_raw_key(candidate)
            except InvalidKey:
                return "rejected"

        once = quote_plus(key, safe="/")
        record = {"eventName": "ObjectCreated:Put", "s3": {"bucket": {"name": "raw"}, "object": {"key": once}}}
        (arrival,) = parse_arrivals({"Records": [record]})
        assert arrival.key == key
        twice = quote_plus(once, safe="/")
        record["s3"]["object"]["key"] = twice
        (smuggled,) = parse_arrivals({"Records": [record]})
        if smuggled.key != key:
            assert verdict(smuggled.key) == "rejected"
        else:
            assert verdict(smuggled.key) == verdict(key)

    run_property(check)


def sql_tokens(statement: str) -> list[Any]:
    # The Athena tokenizer marks Hive-style (backquoted DDL) statements with an empty first token.
    return [t for t in Athena().tokenize(statement) if t.token_type != TokenType.HIVE_TOKEN_STREAM]


def test_stage_a_plan_never_puts_key_text_outside_checked_names_and_literals() -> None:
    runner = CliRunner()
    outcomes: Counter[str] = Counter()
    columns = ["id", "amount"]

    @settings(max_examples=150, derandomize=True, deadline=None, database=None)
    @given(raw_keys())
    def check(key: str) -> None:
        args = ["stage-a", "plan", "--key", key, "--columns", ",".join(columns), "--environment", "dev"]
        result = runner.invoke(app, [*args, "--run-token", "20220120t101500000000_abcdef0123"])
        try:
            raw = parse_raw_key(key)
        except InvalidKey:
            outcomes["rejected"] += 1
            assert result.exit_code == 2, result.output
            assert result.stdout == "", "no statement is printed for a rejected key"
            assert "rejected" in result.stderr
            return
        outcomes["accepted"] += 1
        assert result.exit_code == 0, result.stderr
        plan = json.loads(result.stdout)
        values = [value for _, value in raw.partition]
        literals = {
            plan["plan"]["raw_partition_location"],
            plan["plan"]["target_location"],
            "PARQUET",
            "SNAPPY",
            "id",
            *values,
        }
        names = {
            plan["source_database"],
            plan["target_database"],
            raw.table,
            plan["plan"]["temp_table"],
            *columns,
            *(column for column, _ in raw.partition),
        }
        for statement in plan["statements"]:
            tokens = sql_tokens(statement)
            assert not any(t.token_type == TokenType.SEMICOLON for t in tokens), statement
            assert not any(t.comments for t in tokens), statement
            assert {t.text for t in tokens if t.token_type == TokenType.STRING} <= literals, statement
            assert {t.text for t in tokens if t.token_type == TokenType.IDENTIFIER} <= names, statement
        assert [sql_tokens(s)[0].token_type for s in plan["statements"]] == [
            *([TokenType.ALTER] if raw.partition else []),
            TokenType.CREATE,
            TokenType.DROP,
            *([TokenType.ALTER] * (2 if raw.partition else 1)),
        ]

    run_property(check)
    assert outcomes["accepted"] >= 8 and outcomes["rejected"] >= 60, outcomes


def finish_partition_runs() -> None:
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    for item in dynamodb.scan(TableName="pipeline-state")["Items"]:
        dynamodb.delete_item(TableName="pipeline-state", Key={"target_partition": item["target_partition"]})


def test_the_router_parks_hostile_keys_with_their_reason_and_starts_their_neighbours(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lambdas.stage_a_router import handler as router

    outcomes: Counter[str] = Counter()
    with stage_a_cloud(monkeypatch) as cloud:
        sequence = iter(range(1_000_000))

        @FEWER
        @given(
            st.one_of(
                raw_keys(table_prefix="eng/mysql/customers"),
                # A CSV by its name, as the raw table is: the router reads each file at the door.
                st.builds(
                    "eng/mysql/customers/date={}/{}.csv".format, component(partition_value), component(file_name)
                ),
            )
        )
        def check(key: str) -> None:
            number = next(sequence)
            # Each in a partition of its own: arrivals into a partition whose run is in flight wait for it.
            neighbour = f"eng/mysql/orders/date=n{number}/n.csv"
            bodies = [json.dumps(arrival_event(key, f"H{number:017X}")), json.dumps(arrival_event(neighbour, "N"))]
            before = len(cloud.executions())
            response = router.handler(lambda_sqs_event(bodies), context("stage-a-router"))
            assert response == {"batchItemFailures": []}
            started = len(cloud.executions()) - before
            try:
                parse_raw_key(key)
                accepted = key.split("/")[3].startswith("date=") and key.count("/") == 4
                # ... and a file of the table's format by its name: the router reads it at the door.
                accepted = accepted and file_format(key) == "csv"
            except InvalidKey:
                accepted = False
            outcomes["started" if accepted else "parked"] += 1
            assert started == (2 if accepted else 1), key
            finish_partition_runs()  # as if both runs ended: the next example's partitions are free

        run_property(check)
        parked = drain_messages(cloud.sqs, cloud.dead_letter_url)
    assert len(parked) == outcomes["parked"]
    for message in parked:
        key = json.loads(message["Body"])["detail"]["object"]["key"]
        reason = reason_of(message)
        assert repr(key)[:50] in reason or f"s3://raw-bucket/{key}: " in reason, "the reason names the key it refused"
        assert message["MessageAttributes"]["lakeline_source"]["StringValue"] == "stage-a-router"
    assert outcomes["started"] >= 3 and outcomes["parked"] >= 30, outcomes


# -- dependency items ---------------------------------------------------------------------------------------

VALID_ITEM: dict[str, Any] = {
    "dataset": "engineering_analytics_dev.destination_table",
    "dependencies": [
        {
            "TableName": "engineering_mysql_dev.customers",
            "FieldColumn": "date",
            "Usage": "overwrite",
            "DateExpression": "%Y%m%d",
            "relativedelta_attributes": {"weekday": "SA(-1)", "days": 0},
        }
    ],
    "partitionColumn": "date",
    "partitionPythonMask": "%Y%m%d",
    "steps": [{"db": "engineering_analytics_dev", "sql": "SELECT 1", "sql_file": "", "info": "load"}],
    "date_substitutions": [{"token": "$day", "format": "%Y%m%d", "relativedelta_attributes": {"days": -1}}],
    "triggerMode": "any",
}
# The same item as DynamoDB returns it: numbers as Decimal.
DYNAMODB_ITEM = json.loads(json.dumps(VALID_ITEM), parse_int=Decimal)


def test_malformed_dependency_items_are_refused_with_their_field_and_nothing_else_escapes() -> None:
    outcomes: Counter[str] = Counter()

    @EXAMPLES
    @given(
        st.one_of(
            st.sampled_from([VALID_ITEM, DYNAMODB_ITEM]), mutated(VALID_ITEM), mutated(DYNAMODB_ITEM), json_values
        )
    )
    def check(data: Any) -> None:
        try:
            item = parse_dependency_item(data)
        except DependencyItemError as error:
            outcomes["refused"] += 1
            assert error.problems and all(": " in problem for problem in error.problems), error.problems
            return
        outcomes["accepted"] += 1
        assert isinstance(item, DependencyItem)
        assert parse_dependency_item(item.to_item()) == item, "a valid item survives its own round trip"

    run_property(check)
    assert outcomes["accepted"] >= 3 and outcomes["refused"] >= 100, outcomes


# -- lineage messages -----------------------------------------------------------------------------------------

TABLE = "lineage"


@pytest.fixture
def lineage_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from lambdas.lineage_load import handler as load

    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        dynamodb.create_table(**LINEAGE_TABLE.create_table_kwargs(TABLE))
        dead_letters = boto3.client("sqs", region_name=REGION).create_queue(QueueName="lineage-dlq")["QueueUrl"]
        monkeypatch.setenv("LINEAGE_TABLE_NAME", TABLE)
        monkeypatch.setenv("LINEAGE_DEAD_LETTER_QUEUE_URL", dead_letters)
        monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
        caches = (load.loader, load.environment, load.sqs)
        for cached in caches:
            cached.cache_clear()
        try:
            yield dynamodb
        finally:
            for cached in caches:
                cached.cache_clear()


def record_message(root: str) -> dict[str, Any]:
    (record,) = build_records(
        {"root_id": root, "parent_id": root, "action_taken": "RAW_DATA_INPUT", "storage_location": f"s3://r/{root}"},
        now=NOW,
    )
    return record.to_message()


def malformed_lineage_messages() -> dict[str, tuple[str, str]]:
    """Lineage messages malformed on purpose, by name: ``(body, what its reason must name)``. Each is a
    valid record's message with one thing made wrong, so that it is malformed is known by construction,
    not by asking the validator under test."""
    template = record_message("template-root")

    def changed(**fields: Any) -> str:
        return json.dumps({**template, **fields})

    def without(field: str) -> str:
        return json.dumps({name: value for name, value in template.items() if name != field})

    cases = {
        "not JSON": ("{root_id: template-root}", "not JSON"),
        "empty body": ("", "not JSON"),
        "truncated JSON": (json.dumps(template)[:-1], "not JSON"),
        "a JSON list": (json.dumps([template]), "(top level)"),
        "a JSON string": (json.dumps("template-root"), "(top level)"),
        "JSON null": ("null", "(top level)"),
        "a number": ("42", "(top level)"),
        "unknown field": (changed(colour="red"), "colour"),
        "root_id a number": (changed(root_id=42), "root_id"),
        "root_id with a space": (changed(root_id="template root"), "root_id"),
        "node_id starting with _": (changed(node_id="_bookkeeping"), "node_id"),
        "parent_id too long": (changed(parent_id="p" * 201), "parent_id"),
        "action starting with a digit": (changed(action_taken="1_RAW_DATA_INPUT"), "action_taken"),
        "action with a space": (changed(action_taken="RAW DATA"), "action_taken"),
        "location not a URI": (changed(storage_location="bucket/key"), "storage_location"),
        "location with a space": (changed(storage_location="s3://r/a key"), "storage_location"),
        "recordedAt a word": (changed(recordedAt="yesterday"), "recordedAt"),
        "recordedAt negative": (changed(recordedAt=-1), "recordedAt"),
        "ttl_expiry negative": (changed(ttl_expiry=-1), "ttl_expiry"),
        "node is its own parent": (changed(parent_id=template["node_id"]), "own parent"),
        "node is the root": (changed(root_id=template["node_id"]), "equals root_id"),
        "run_id not a UUID": (changed(run_id="run-1"), "run_id"),
        "job_name without a namespace": (changed(job_name="stage_a"), "job_name"),
        "dataset with a space": (changed(dataset="sales orders"), "dataset"),
    }
    for field in ("root_id", "node_id", "parent_id", "action_taken", "storage_location", "recordedAt", "ttl_expiry"):
        cases[f"{field} missing"] = (without(field), f"{field}: required field is missing")
    return cases


MALFORMED_LINEAGE_MESSAGES = malformed_lineage_messages()


def test_malformed_lineage_messages_are_parked_with_a_reason_and_their_neighbours_load(lineage_table: Any) -> None:
    from lambdas.lineage_load import handler as load

    drawn: Counter[str] = Counter()
    sequence = iter(range(1_000_000))
    loaded: list[dict[str, Any]] = []

    @FEWER
    @example(list(MALFORMED_LINEAGE_MESSAGES))  # every case at once, whatever is drawn
    @given(st.lists(st.sampled_from(sorted(MALFORMED_LINEAGE_MESSAGES)), min_size=1, max_size=4))
    def check(names: list[str]) -> None:
        number = next(sequence)
        drawn.update(names)
        bad = [MALFORMED_LINEAGE_MESSAGES[name] for name in names]
        good = [json.dumps(record_message(f"good-{number}-{i}")) for i in range(3)]
        bodies = [body for body, _ in bad]
        batch = [good[0], *bodies[:2], good[1], *bodies[2:], good[2]]
        response = load.handler(lambda_sqs_event(batch), context("lineage-load"))
        # Never worth retrying: parked at once, each with its reason, none reported for redelivery.
        assert response["batchItemFailures"] == []
        sqs = boto3.client("sqs", region_name=REGION)
        letters = drain_messages(sqs, sqs.get_queue_url(QueueName="lineage-dlq")["QueueUrl"])
        # Exactly the malformed messages, each once, each with a reason naming what is wrong with it.
        assert Counter(letter["Body"] for letter in letters) == Counter(bodies)
        expected = dict(bad)
        for letter in letters:
            reason = reason_of(letter)
            assert reason.startswith("invalid lineage record: ") and expected[letter["Body"]] in reason, reason
        loaded.extend(json.loads(body) for body in good)
        # The good neighbours are loaded, and nothing else is.
        items = lineage_table.scan(TableName=TABLE)["Items"]
        stored = sorted((item["root_id"]["S"], item["node_id"]["S"]) for item in items)
        assert stored == sorted((record["root_id"], record["node_id"]) for record in loaded)

    run_property(check)
    assert set(drawn) == set(MALFORMED_LINEAGE_MESSAGES)


def test_a_lineage_request_batch_with_a_bad_request_queues_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from lambdas.lineage_input import handler as lineage_input

    good = {"root_id": "run-1", "parent_id": "run-1", "action_taken": "RAW_DATA_INPUT", "storage_location": "s3://r/1"}
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        queue = sqs.create_queue(QueueName="lineage")["QueueUrl"]
        monkeypatch.setenv("LINEAGE_QUEUE_URL", queue)
        monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
        lineage_input.writer.cache_clear()
        outcomes: Counter[str] = Counter()
        lineage_input.handler({"requests": [good, good]}, context("lineage-input"))
        assert len(drain_messages(sqs, queue)) == 2, "valid requests are queued"

        @FEWER
        @given(mutated(good))
        def check(request: Any) -> None:
            try:
                lineage_input.handler({"requests": [good, request, good]}, context("lineage-input"))
            except InvalidInputError as error:
                outcomes["refused"] += 1
                assert "lineage request" in str(error)
                assert drain_messages(sqs, queue) == [], "nothing is queued when any request is bad"
                return
            outcomes["accepted"] += 1
            assert len(drain_messages(sqs, queue)) >= 3

        try:
            run_property(check)
        finally:
            lineage_input.writer.cache_clear()
    assert outcomes["refused"] >= 40, outcomes


# -- malformed events -------------------------------------------------------------------------------------------

MALFORMED_ARRIVAL_BODIES = [
    "",
    "{",
    "null",
    "[]",
    '"Object Created"',
    json.dumps({"source": "aws.s3"}),
    json.dumps({"source": "aws.s3", "detail-type": "Object Created", "detail": {}}),
    json.dumps({"source": "aws.s3", "detail-type": "Object Deleted", "detail": {"object": {"key": "a/b/c/f"}}}),
    json.dumps({"source": "aws.s3", "detail-type": "Object Created", "detail": {"bucket": {}, "object": {"key": 7}}}),
    json.dumps({"Records": [{"eventName": "ObjectCreated:Put", "s3": {"object": {"key": "a/b/c/f"}}}]}),
    json.dumps({"Records": [{"eventName": "ObjectCreated:Put"}]}),
]


def test_malformed_arrival_events_are_parked_with_a_reason_and_neighbours_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lambdas.stage_a_router import handler as router

    with stage_a_cloud(monkeypatch) as cloud:
        good = json.dumps(arrival_event("eng/mysql/orders/date=20220120/f.csv", "GOOD"))
        response = router.handler(lambda_sqs_event([*MALFORMED_ARRIVAL_BODIES, good]), context("stage-a-router"))
        assert response == {"batchItemFailures": []}
        assert len(cloud.executions()) == 1
        parked = drain_messages(cloud.sqs, cloud.dead_letter_url)
        assert sorted(m["Body"] for m in parked) == sorted(MALFORMED_ARRIVAL_BODIES)
        assert all(reason_of(m).startswith("not an S3 arrival") for m in parked), [reason_of(m) for m in parked]
        with pytest.raises(Exception, match=r"(?i)event"):
            router.handler({"not": "an SQS event"}, context("stage-a-router"))
        assert len(cloud.executions()) == 1


def test_malformed_stage_b_messages_are_parked_with_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    from lambdas.stage_b_router import handler as router

    bodies = [
        "",
        "{}",
        json.dumps({"target_dataset": "a.b", "partition": {"date": "x"}, "usage": "append"}),
        json.dumps(
            {
                "target_dataset": "db.t; DROP TABLE x",
                "partition": {"date": "20220120"},
                "usage": "overwrite",
                "trigger": {"table": "a.b", "partition": {"date": "20220120"}},
            }
        ),
        json.dumps(
            {
                "target_dataset": "db.t",
                "partition": {"date": "2022'01"},
                "usage": "overwrite",
                "trigger": {"table": "a.b", "partition": {"date": "20220120"}},
            }
        ),
    ]
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        dead_letters = sqs.create_queue(QueueName="queue-b-dlq")["QueueUrl"]
        for name, value in {
            "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:stage-b",
            "DEAD_LETTER_QUEUE_URL": dead_letters,
            "DEPENDENCIES_TABLE": "dependencies",
            "PIPELINE_STATE_TABLE": "pipeline-state",
            "ARTIFACTS_BUCKET": "artifacts",
            "STAGE_B_QUEUE_URL": sqs.create_queue(QueueName="queue-b")["QueueUrl"],
            "STAGE_B_FOLLOW_UP_QUEUE_URL": sqs.create_queue(QueueName="queue-b-follow-ups")["QueueUrl"],
            "STAGE_BUCKET": "stage",
            "POWERTOOLS_TRACE_DISABLED": "true",
        }.items():
            monkeypatch.setenv(name, value)
        router.runtime.cache_clear()
        try:
            response = router.handler(lambda_sqs_event(bodies), context("stage-b-router"))
            parked = drain_messages(sqs, dead_letters)
        finally:
            router.runtime.cache_clear()
    assert response == {"batchItemFailures": []}
    assert sorted(m["Body"] for m in parked) == sorted(bodies)
    reasons = [reason_of(m) for m in parked]
    assert all(reasons), reasons
    assert any("target_dataset" in reason for reason in reasons)
    assert any("partition" in reason for reason in reasons)


def test_tampered_plans_are_refused_before_anything_is_deleted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The failure handlers delete a run's partial output: a plan pointing that delete anywhere else
    (a whole bucket, another partition) is refused and nothing is deleted."""
    from lakeline.engines.base import Column, TableSchema
    from lakeline.settings import PipelineSettings
    from lambdas.stage_a_failure import handler as failure
    from stage_a.plan import plan_stage_a

    settings = PipelineSettings(raw_root="s3://raw-bucket/", stage_root="s3://stage-bucket/", environment="dev")
    schema = TableSchema("eng_mysql_raw_dev", "orders", (Column("id", "bigint"),), (Column("date", "string"),))
    plan = plan_stage_a(
        parse_raw_key("eng/mysql/orders/date=20220120/f.csv"),
        settings,
        schema,
        run_token="20220120t101500000000_abcdef0123",
    ).to_dict()
    tampered = [
        {**plan, "target_location": "s3://stage-bucket/"},
        {**plan, "target_location": "s3://stage-bucket/eng/mysql/orders/date=20220119/"},
        {**plan, "run_token": "../../.."},
        {key: value for key, value in plan.items() if key != "stage_partition_root"},
    ]
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="stage-bucket")
        keys = ["other/data.parquet", "eng/mysql/orders/date=20220119/lakeline_run=x/part-0.parquet"]
        for key in keys:
            s3.put_object(Bucket="stage-bucket", Key=key, Body=b"x")
        monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
        # The function's clients are made as deployed (the plan is read before any of them is used).
        queue = f"https://sqs.{REGION}.amazonaws.com/123456789012"
        for name, value in {
            "PIPELINE_STATE_TABLE": "pipeline-state",
            "LINEAGE_QUEUE_URL": f"{queue}/lineage",
            "STAGE_A_FOLLOW_UP_QUEUE_URL": f"{queue}/stage-a-follow-up",
            "STAGE_A_DEAD_LETTER_QUEUE_URL": f"{queue}/stage-a-dlq",
        }.items():
            monkeypatch.setenv(name, value)
        failure.runtime.cache_clear()
        try:
            for bad in tampered:
                with pytest.raises((InvalidInputError, pydantic.ValidationError)):
                    failure.handler({"plan": bad, "error": {"Error": "x", "Cause": "y"}}, context("stage-a-failure"))
            left = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="stage-bucket")["Contents"])
        finally:
            failure.runtime.cache_clear()
    assert left == sorted(keys)
