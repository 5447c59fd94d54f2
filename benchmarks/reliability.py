"""Reliability figures: a 1,000-arrival burst, lineage writes under DynamoDB pressure, recovery from a
throttling storm, and how much hostile input the generators of the reliability suite produce.

Everything runs on moto in-process with the deployed handlers, faults injected with botocore hooks
(as in ``tests/reliability``). moto's speed says nothing about AWS: the counts are the figures;
times only compare strategies within this run.

1. Burst: 1,000 distinct arrivals, 100 redeliveries and 10 hostile keys through queue A and the stage A
   router, against a naive router that starts one execution per message under a fresh name.
2. Lineage load: 1,000 records through the load function (SQS batches of 100) with no fault, with 20%
   of every call's items left in UnprocessedItems, and with a throttling storm; against PutItem per
   record.
3. Throttling storm on Step Functions: how many visibility timeouts the router needs to start every
   arrival, by storm length; a storm longer than the redrive budget parks arrivals in the DLQ, and a
   redrive starts them, once each.
4. Hostile input: accepted and rejected shares of the generated keys, dependency items and lineage
   messages, and whether any accepted key carries a quote or separator.

    .venv/bin/python -m benchmarks.reliability
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws
from rich.console import Console
from rich.table import Table

from harness.faults import (
    REGION,
    STAGE_A_TABLES,
    BatchWriteFaults,
    DrainReport,
    LambdaSqsSource,
    arrival_event,
    create_queue_with_dead_letters,
    drain_messages,
    error_answer,
    reason_of,
    send_bodies,
    stage_a_cloud,
)
from harness.hostile import json_values, mutated, raw_keys, to_json_text
from lakeline.dependencies.model import DependencyItemError, parse_dependency_item
from lakeline.errors import InvalidInputError
from lakeline.lineage.records.model import LineageRecord, build_records, parse_record
from lakeline.lineage.records.table import LINEAGE_TABLE
from lakeline.lineage.records.writer import send_records
from stage_a.keys import InvalidKey, parse_raw_key

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
QUEUE_A_VISIBILITY_MINUTES = 6  # stacks/constructs/stage_a.py


@contextmanager
def fresh_session() -> Iterator[boto3.Session]:
    """A new default boto3 session for the handlers' clients (hooks go on it), restored afterwards."""
    previous = boto3.DEFAULT_SESSION
    boto3.setup_default_session(region_name=REGION)
    assert boto3.DEFAULT_SESSION is not None
    try:
        yield boto3.DEFAULT_SESSION
    finally:
        boto3.DEFAULT_SESSION = previous


class TimedHandler:
    """Wraps a handler to add up the time spent inside it."""

    def __init__(self, handler: Callable[[dict[str, Any], Any], Any]) -> None:
        self.handler = handler
        self.seconds = 0.0

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.handler(event, context)
        finally:
            self.seconds += time.perf_counter() - started


# -- 1. burst ---------------------------------------------------------------------------------------------------

HOSTILE = [
    "eng/mysql/customers/date=2022';DROP TABLE x;--/f.csv",
    "eng/mysql/customers/date=20220120/../../../etc/passwd",
    "eng/mysql/Customers/date=20220120/f.csv",
    "eng/mysql/customers/date=2022%2701/f.csv",
    "eng/mysql/customers/date=2022\u00e9/f.csv",
    "eng/mysql/customers/date=20220120/f\u202e.csv",
    "eng/mysql/customers/date=20220120/" + "f" * 300 + ".csv",
    "eng/mysql/customers/date=20220120/.hidden",
    "eng/mysql/customers/date=20220120",
    "eng/mysql/customers/region=eu/f.csv",
]


def burst_bodies() -> list[list[str]]:
    """Ten waves: 100 new arrivals, 10 redeliveries of recent ones, one hostile key."""
    waves: list[list[str]] = []
    for wave in range(10):
        bodies = []
        for index in range(wave * 100, wave * 100 + 100):
            table = STAGE_A_TABLES[index % len(STAGE_A_TABLES)]
            key = f"eng/mysql/{table}/date=202201{index % 28 + 1:02d}/part-{index:04d}.csv"
            bodies.append(json.dumps(arrival_event(key, f"{index:018X}")))
            if index % 10 == 5:
                bodies.append(bodies[-1] if index < 100 else waves[-1][index % 100])
        bodies.append(json.dumps(arrival_event(HOSTILE[wave], f"{10_000 + wave:018X}")))
        waves.append(bodies)
    return waves


def burst(console: Console) -> None:
    from lambdas.stage_a_router import handler as router

    waves = burst_bodies()
    messages = sum(len(wave) for wave in waves)
    with pytest.MonkeyPatch.context() as monkeypatch, stage_a_cloud(monkeypatch) as cloud:
        timed = TimedHandler(router.handler)
        source = LambdaSqsSource(cloud.sqs, cloud.queue_url, "stage-a-router")
        report = DrainReport()
        for wave in waves:
            send_bodies(cloud.sqs, cloud.queue_url, wave)
            wave_report = source.run_until_empty(timed)
            report.messages += wave_report.messages
            report.invocations += wave_report.invocations
        started = len(cloud.executions())
        parked = drain_messages(cloud.sqs, cloud.dead_letter_url)
        with_reason = sum(1 for message in parked if reason_of(message))

        # Baseline: one execution per message, under a fresh name, no validation.
        naive_started = naive_hostile = 0
        naive_seconds = 0.0
        for body in (body for wave in waves for body in wave):
            started_at = time.perf_counter()
            cloud.sfn.start_execution(stateMachineArn=cloud.machine_arn, name=uuid.uuid4().hex, input=body)
            naive_seconds += time.perf_counter() - started_at
            naive_started += 1
            naive_hostile += json.loads(body)["detail"]["object"]["key"] in HOSTILE

    table = Table(
        title=f"1. a burst of {messages:,} messages on queue A (1,000 arrivals, 100 redeliveries, 10 hostile)"
    )
    for column in ("router", "executions", "per arrival", "hostile keys started", "parked (with reason)", "msg/s"):
        table.add_column(column, justify="right")
    table.add_row(
        "Lakeline",
        f"{started:,}",
        f"{started / 1000:.2f}",
        "0",
        f"{len(parked)} ({with_reason})",
        f"{report.messages / timed.seconds:,.0f}",
    )
    table.add_row(
        "naive (fresh name per message)",
        f"{naive_started:,}",
        f"{naive_started / 1000:.2f}",
        str(naive_hostile),
        "0",
        f"{naive_started / naive_seconds:,.0f}",
    )
    console.print(table)
    deduplicated = messages - started - len(parked)
    console.print(
        f"redeliveries deduplicated: {deduplicated}; lost: {deduplicated - 100}; "
        f"router invocations: {report.invocations} (batches of 10); "
        f"executions ratio naive / Lakeline: {naive_started / started:.2f}"
    )


# -- 2. lineage load under DynamoDB pressure ------------------------------------------------------------------


def lineage_records(count: int) -> list[LineageRecord]:
    records: list[LineageRecord] = []
    for run in range(count // 100):
        root = f"run-{run}"
        [raw] = build_records(
            {"root_id": root, "parent_id": root, "action_taken": "RAW_DATA_INPUT", "storage_location": f"s3://r/{run}"},
            now=NOW,
        )
        outputs = [{"storage_location": f"s3://s/{run}/{i}"} for i in range(99)]
        step = {"root_id": root, "parent_id": raw.node_id, "action_taken": "STAGE_A_COMPLETE", "records": outputs}
        records += [raw, *build_records(step, now=NOW)]
    return records


def load_under(
    records: list[LineageRecord],
    throttle: Callable[[int], bool],
    hold: Callable[[int, list[dict[str, Any]]], list[int]],
) -> tuple[int, DrainReport, float, int, int]:
    """(BatchWriteItem calls, drain report, seconds in the handler, items stored, messages parked)."""
    from lambdas.lineage_load import handler as load

    with pytest.MonkeyPatch.context() as monkeypatch, mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        dynamodb.create_table(**LINEAGE_TABLE.create_table_kwargs("lineage"))
        sqs = boto3.client("sqs", region_name=REGION)
        queue, dead_letters = create_queue_with_dead_letters(sqs, "lineage")
        monkeypatch.setenv("LINEAGE_TABLE_NAME", "lineage")
        monkeypatch.setenv("LINEAGE_DEAD_LETTER_QUEUE_URL", dead_letters)
        monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
        monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "ERROR")
        caches = (load.loader, load.environment, load.sqs)
        for cached in caches:
            cached.cache_clear()
        with fresh_session() as session:
            faults = BatchWriteFaults(session.events, throttle=throttle, hold=hold)
            timed = TimedHandler(load.handler)
            source = LambdaSqsSource(sqs, queue, "lineage-load", batch_size=100)
            report = DrainReport()
            # Sent 100 at a time (moto's SQS slows down with depth), each batch drained before the next.
            for start in range(0, len(records), 100):
                send_records(sqs, queue, records[start : start + 100])
                wave = source.run_until_empty(timed)
                report.reported_failures += wave.failed_deliveries
                report.invocations += wave.invocations
        for cached in caches:
            cached.cache_clear()
        stored = dynamodb.scan(TableName="lineage", Select="COUNT")["Count"]
        parked = len(drain_messages(sqs, dead_letters))
    return faults.calls, report, timed.seconds, stored, parked


def one_in_five(call: int, requests: list[dict[str, Any]]) -> list[int]:
    """A fifth of the items of every call, chosen afresh per call (as partition throttling would)."""
    return [
        index
        for index, request in enumerate(requests)
        if hashlib.sha256(f"{call}/{request['PutRequest']['Item']['node_id']['S']}".encode()).digest()[0] % 5 == 0
    ]


def lineage_load(console: Console) -> None:
    records = lineage_records(1_000)
    scenarios: list[tuple[str, Callable[[int], bool], Callable[[int, list[dict[str, Any]]], list[int]]]] = [
        ("no fault", lambda _c: False, lambda _c, _r: []),
        ("20% UnprocessedItems on every call", lambda _c: False, one_in_five),
        ("throttling storm: first 30 calls refused", lambda c: c <= 30, lambda _c, _r: []),
    ]
    table = Table(title=f"2. lineage load: {len(records):,} records, SQS batches of 100, 25 items per call (moto)")
    for column in ("DynamoDB", "write calls", "vs no fault", "redelivered", "stored", "parked", "s in handler"):
        table.add_column(column, justify="right")
    baseline_calls = 0
    for name, throttle, hold in scenarios:
        calls, report, seconds, stored, parked = load_under(records, throttle, hold)
        baseline_calls = baseline_calls or calls
        table.add_row(
            name,
            f"{calls:,}",
            f"{calls / baseline_calls:.2f}",
            str(report.reported_failures),
            f"{stored:,}",
            str(parked),
            f"{seconds:.2f}",
        )
    table.add_row(
        "naive PutItem per record", f"{len(records):,}", f"{len(records) / baseline_calls:.2f}", "", "", "", ""
    )
    console.print(table)
    console.print(f"ideal: ceil({len(records)} / 25) = {math.ceil(len(records) / 25)} calls")


# -- 3. recovery from a throttling storm ----------------------------------------------------------------------


def storm(console: Console) -> None:
    from lambdas.stage_a_router import handler as router

    arrivals = 200
    table = Table(title=f"3. Step Functions throttling storm: {arrivals} arrivals on queue A, redrive after 3 receives")
    for column in ("throttled calls", "visibility timeouts", f"≈ minutes (at {QUEUE_A_VISIBILITY_MINUTES})"):
        table.add_column(column, justify="right")
    for column in ("started", "parked", "after redrive", "duplicates"):
        table.add_column(column, justify="right")
    for length in (0, arrivals // 2, arrivals, 2 * arrivals, 3 * arrivals):
        with pytest.MonkeyPatch.context() as monkeypatch, stage_a_cloud(monkeypatch) as cloud:
            keys = [
                (f"eng/mysql/orders/date=202201{i % 28 + 1:02d}/f{i:04d}.csv", f"{i:018X}") for i in range(arrivals)
            ]
            send_bodies(cloud.sqs, cloud.queue_url, [json.dumps(arrival_event(k, s)) for k, s in keys])
            with fresh_session() as session:
                calls = Counter[str]()

                def throttle(length: int = length, calls: Counter[str] = calls, **_: Any) -> Any:
                    calls["n"] += 1
                    return error_answer("ThrottlingException", "Rate exceeded") if calls["n"] <= length else None

                session.events.register("before-call.states.StartExecution", throttle)
                source = LambdaSqsSource(cloud.sqs, cloud.queue_url, "stage-a-router")
                source.run_until_empty(router.handler)
                started = len(cloud.executions())
                parked = drain_messages(cloud.sqs, cloud.dead_letter_url)
                send_bodies(cloud.sqs, cloud.queue_url, [m["Body"] for m in parked])  # the operator's redrive
                source.run_until_empty(router.handler)
                names = [e["name"] for e in cloud.executions()]
        table.add_row(
            str(length),
            str(source.timeouts_elapsed),
            str(source.timeouts_elapsed * QUEUE_A_VISIBILITY_MINUTES),
            str(started),
            str(len(parked)),
            str(len(names)),
            str(len(names) - len(set(names))),
        )
    console.print(table)


# -- 4. hostile input --------------------------------------------------------------------------------------------


def hostile_input(console: Console) -> None:
    examples = 1_000
    keys: Counter[str] = Counter()
    items: Counter[str] = Counter()
    messages: Counter[str] = Counter()

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None)
    @given(raw_keys())
    def classify_keys(key: str) -> None:
        try:
            parse_raw_key(key)
        except InvalidKey:
            keys["rejected"] += 1
            return
        except Exception:
            keys["other"] += 1
            return
        keys["accepted"] += 1
        keys["accepted with a quote, ';', '\\\\', '%' or a space"] += any(c in key for c in "'\";\\%` \t\n")

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None)
    @given(st.one_of(mutated(valid_item()), json_values))
    def classify_items(data: Any) -> None:
        try:
            parse_dependency_item(data)
        except DependencyItemError:
            items["rejected"] += 1
        except Exception:
            items["other"] += 1
        else:
            items["accepted"] += 1

    template = build_records(
        {"root_id": "r", "parent_id": "r", "action_taken": "RAW_DATA_INPUT", "storage_location": "s3://r/1"}, now=NOW
    )[0].to_message()

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None)
    @given(st.one_of(mutated(template).map(to_json_text), json_values.map(to_json_text), st.text(max_size=40)))
    def classify_messages(body: str) -> None:
        try:
            parse_record(body)
        except InvalidInputError:
            messages["rejected"] += 1
        except Exception:
            messages["other"] += 1
        else:
            messages["accepted"] += 1

    started = time.perf_counter()
    classify_keys()
    classify_items()
    classify_messages()
    table = Table(title=f"4. generated hostile input ({examples:,} examples each, derandomized)")
    for column in ("input", "accepted", "rejected", "other exception"):
        table.add_column(column, justify="right")
    for name, counts in (("raw object keys", keys), ("dependency items", items), ("lineage messages", messages)):
        table.add_row(name, str(counts["accepted"]), str(counts["rejected"]), str(counts["other"]))
    console.print(table)
    flagged = keys["accepted with a quote, ';', '\\\\', '%' or a space"]
    console.print(f"accepted keys carrying a quote, ';', '\\', '%' or a space: {flagged}")
    console.print(f"(generated and checked in {time.perf_counter() - started:.1f}s)")


def valid_item() -> dict[str, Any]:
    return {
        "dataset": "engineering_analytics_dev.destination_table",
        "dependencies": [
            {
                "TableName": "engineering_mysql_dev.customers",
                "FieldColumn": "date",
                "Usage": "overwrite",
                "DateExpression": "%Y%m%d",
                "relativedelta_attributes": {"weekday": "SA(-1)"},
            }
        ],
        "partitionColumn": "date",
        "partitionPythonMask": "%Y%m%d",
        "steps": [{"db": "engineering_analytics_dev", "sql": "SELECT 1"}],
        "date_substitutions": [{"token": "$day", "format": "%Y%m%d", "relativedelta_attributes": {"days": -1}}],
    }


def main() -> None:
    console = Console(width=140)
    started = time.perf_counter()
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "ERROR")
        monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
        monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "benchmark")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "benchmark")
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        for section in (burst, lineage_load, storm, hostile_input):
            section_started = time.perf_counter()
            section(console)
            console.print(f"[dim]({section.__name__}: {time.perf_counter() - section_started:.0f}s)[/]\n")
    console.print(f"total {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    main()
