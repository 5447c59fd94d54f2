"""Shared setup of the reliability suite (no tests here): the stage A cloud path on moto, EventBridge
arrival events, a Lambda-like SQS poller that survives a dying invocation, fault hooks for moto-backed
clients, and one in-process synth of the CDK app per configuration.

Faults are injected with botocore event hooks on real (moto-backed) clients or on the default boto3
session the handlers build their clients from; nothing is replaced by a fake.
"""

from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from typing import Any

import boto3
import pytest
from moto import mock_aws

from harness.raw_objects import put_raw_object
from lakeline.dependencies.tables import DependencyTableNames, create_dependency_tables
from lakeline.runtimes.embedded.lambda_events import LambdaContext, QueuePoller
from stage_a.arrivals import Arrival

REGION = "us-east-1"
RAW_BUCKET = "raw-bucket"
ARRIVAL_TIME = "2022-01-20T10:15:00Z"
MAX_RECEIVE_COUNT = 3
Handler = Callable[[dict[str, Any], Any], Any]


# -- events ----------------------------------------------------------------------------------------------


def arrival_event(key: str, sequencer: str, *, time: str = ARRIVAL_TIME) -> dict[str, Any]:
    """The EventBridge "Object Created" event S3 sends for ``key`` (what the CDK rule puts on queue A),
    after the object it announces was put."""
    put_raw_object(key, RAW_BUCKET)
    return {
        "version": "0",
        "id": f"event-{sequencer}",
        "detail-type": "Object Created",
        "source": "aws.s3",
        "account": "123456789012",
        "time": time,
        "region": REGION,
        "resources": [f"arn:aws:s3:::{RAW_BUCKET}"],
        "detail": {
            "version": "0",
            "bucket": {"name": RAW_BUCKET},
            "object": {"key": key, "size": 1024, "etag": "0" * 32, "sequencer": sequencer},
            "reason": "PutObject",
        },
    }


def expected_execution_name(key: str, sequencer: str, *, time: str = ARRIVAL_TIME) -> str:
    """The execution name the router must give the run this arrival starts (when no other run holds its
    partition), computed here from the contract: fixed by the run, whose token is fixed by the arrival."""
    from stage_a.start import arrival_run_token, execution_name

    arrival = Arrival(
        bucket=RAW_BUCKET,
        key=key,
        sequencer=sequencer,
        event_time=datetime.fromisoformat(time.replace("Z", "+00:00")).astimezone(UTC),
    )
    return execution_name(arrival.raw.dataset, arrival.raw.table, arrival_run_token(arrival))


def lambda_sqs_event(bodies: list[str], source_arn: str = f"arn:aws:sqs:{REGION}:123456789012:queue") -> dict[str, Any]:
    """Lambda's SQS event for ``bodies``, for handlers called without a queue in between."""
    return {
        "Records": [
            {
                "messageId": f"message-{index}",
                "receiptHandle": f"handle-{index}",
                "body": body,
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": "1642673700000",
                    "SenderId": "AIDAIENQZJOLO23YVJ4VO",
                    "ApproximateFirstReceiveTimestamp": "1642673700001",
                },
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": source_arn,
                "awsRegion": REGION,
            }
            for index, body in enumerate(bodies)
        ]
    }


def send_bodies(sqs: Any, queue_url: str, bodies: list[str]) -> None:
    for start in range(0, len(bodies), 10):
        entries = [{"Id": str(i), "MessageBody": body} for i, body in enumerate(bodies[start : start + 10])]
        response = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
        assert not response.get("Failed"), response


# -- queues and pollers ----------------------------------------------------------------------------------


def create_queue_with_dead_letters(sqs: Any, name: str) -> tuple[str, str]:
    """A work queue whose messages go to its DLQ after ``MAX_RECEIVE_COUNT`` receives, as the stacks deploy."""
    dead_letters = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dead_letters, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": str(MAX_RECEIVE_COUNT)})
    queue = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": redrive})["QueueUrl"]
    return str(queue), str(dead_letters)


def create_pass_state_machine(sfn: Any, name: str) -> str:
    """A state machine named ``name`` that ends at once (a router's ``StartExecution`` target on moto); its ARN."""
    return str(
        sfn.create_state_machine(
            name=name,
            definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}),
            roleArn=f"arn:aws:iam::123456789012:role/{name}",
        )["stateMachineArn"]
    )


def drain_messages(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    """Receive and delete every message of a queue, with its attributes."""
    messages: list[dict[str, Any]] = []
    while True:
        batch = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            AttributeNames=["All"],
            VisibilityTimeout=30,
        ).get("Messages", [])
        if not batch:
            return messages
        for message in batch:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        messages.extend(batch)


def reason_of(message: dict[str, Any]) -> str:
    return str(message.get("MessageAttributes", {}).get("lakeline_reason", {}).get("StringValue", ""))


class InvocationDied(BaseException):
    """The Lambda invocation ended without answering (timeout, out of memory, crash). A ``BaseException``
    so that no handler code can catch it, as none can catch the runtime killing it."""


@dataclass
class DrainReport:
    invocations: int = 0
    messages: int = 0
    reported_failures: int = 0
    died: int = 0
    errors: int = 0
    error_messages: int = 0

    @property
    def failed_deliveries(self) -> int:
        """Deliveries that did not end in a delete: reported failures and whole failed invocations."""
        return self.reported_failures + self.error_messages


class LambdaSqsSource:
    """What Lambda's SQS event source does for one function, on a clock that moves by visibility timeouts.

    Each invocation receives up to ``batch_size`` messages (several receives, as within the batching
    window), hands them to the handler as one SQS event, and deletes the ones it did not report as
    failed. Failed messages, and the whole batch of an invocation that raised or died, stay invisible
    until the queue's visible messages are all taken: then their visibility timeout elapses and they
    return. SQS moves a message to the DLQ after ``MAX_RECEIVE_COUNT`` receives.
    """

    def __init__(self, sqs: Any, queue_url: str, function_name: str, *, batch_size: int = 10) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.function_name = function_name
        self.batch_size = batch_size
        self.timeouts_elapsed = 0
        self._events = QueuePoller(sqs, queue_url)
        self._invisible: list[str] = []

    def _receive(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        while len(messages) < self.batch_size:
            batch = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=min(10, self.batch_size - len(messages)),
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
                VisibilityTimeout=300,
            ).get("Messages", [])
            if not batch:
                break
            messages.extend(batch)
        return messages

    def _elapse_visibility_timeout(self) -> bool:
        """Make the messages that failed visible again; ``False`` if there were none."""
        if not self._invisible:
            return False
        for handle in self._invisible:
            self.sqs.change_message_visibility(QueueUrl=self.queue_url, ReceiptHandle=handle, VisibilityTimeout=0)
        self._invisible = []
        self.timeouts_elapsed += 1
        return True

    def invoke(self, handler: Handler, report: DrainReport) -> int:
        """One invocation; returns the number of messages it was given."""
        messages = self._receive()
        if not messages:
            return 0
        report.invocations += 1
        report.messages += len(messages)
        try:
            response = handler(self._events.event(messages), LambdaContext(self.function_name)) or {}
        except InvocationDied:
            report.died += 1
            self._invisible += [message["ReceiptHandle"] for message in messages]
            return len(messages)
        except Exception:
            # An invocation error (Powertools raises when every record of the batch failed): Lambda
            # retries the whole batch.
            report.errors += 1
            report.error_messages += len(messages)
            self._invisible += [message["ReceiptHandle"] for message in messages]
            return len(messages)
        failed = {item["itemIdentifier"] for item in response.get("batchItemFailures", [])}
        report.reported_failures += len(failed)
        for message in messages:
            if message["MessageId"] in failed:
                self._invisible.append(message["ReceiptHandle"])
            else:
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
        return len(messages)

    def run_until_empty(self, handler: Handler, *, max_invocations: int = 1_000) -> DrainReport:
        report = DrainReport()
        for _ in range(max_invocations):
            idle = self.invoke(handler, report) == 0 and not self._elapse_visibility_timeout()
            if idle and self._events.depth() == 0:
                return report
        raise AssertionError(f"{self.function_name}: queue not empty after {max_invocations} invocations")


def context(function_name: str = "reliability") -> LambdaContext:
    return LambdaContext(function_name)


# -- fault hooks -----------------------------------------------------------------------------------------


@dataclass
class Response:
    """The two attributes of an HTTP response botocore reads after a ``before-call`` answer."""

    status_code: int
    headers: dict[str, str] = field(default_factory=dict)


def error_answer(code: str, message: str, status: int = 400) -> tuple[Any, dict[str, Any]]:
    """A ``before-call`` answer that makes botocore raise ``ClientError(code)`` without sending."""
    return Response(status), {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {}}


class BatchWriteFaults:
    """DynamoDB under pressure, on every ``BatchWriteItem`` of a client or session: ``throttle(call)``
    says whether call number ``call`` is refused with ProvisionedThroughputExceededException;
    ``hold(call, requests)`` picks put requests left unwritten and handed back in ``UnprocessedItems``
    (they are taken out of the request before it is sent, so they really are not written)."""

    def __init__(
        self,
        events: Any,
        *,
        throttle: Callable[[int], bool] = lambda _call: False,
        hold: Callable[[int, list[dict[str, Any]]], list[int]] = lambda _call, _requests: [],
    ) -> None:
        self.throttle = throttle
        self.hold = hold
        self.calls = 0
        self.throttled = 0
        self.unprocessed = 0
        self._held: list[dict[str, Any]] = []
        self._hold_all = False
        self._table = ""
        events.register("before-parameter-build.dynamodb.BatchWriteItem", self._before_build)
        events.register("before-call.dynamodb.BatchWriteItem", self._before_call)
        events.register("after-call.dynamodb.BatchWriteItem", self._after_call)

    def _before_build(self, params: dict[str, Any], **_: Any) -> None:
        self.calls += 1
        self._held = []
        self._hold_all = False
        if self.throttle(self.calls):
            return
        [(table, requests)] = params["RequestItems"].items()
        chosen = set(self.hold(self.calls, requests))
        self._table = table
        self._held = [copy.deepcopy(r) for i, r in enumerate(requests) if i in chosen]
        self._hold_all = len(self._held) == len(requests)
        if not self._hold_all:
            params["RequestItems"][table] = [r for i, r in enumerate(requests) if i not in chosen]

    def _before_call(self, **_: Any) -> Any:
        if self.throttle(self.calls):
            self.throttled += 1
            return error_answer("ProvisionedThroughputExceededException", "Rate of requests exceeds the throughput")
        if self._hold_all:  # nothing left to send: answered as DynamoDB would, nothing written
            return Response(200), {"UnprocessedItems": {}, "ResponseMetadata": {}}
        return None

    def _after_call(self, parsed: dict[str, Any], **_: Any) -> None:
        if self._held:
            self.unprocessed += len(self._held)
            parsed.setdefault("UnprocessedItems", {})[self._table] = self._held


@contextmanager
def fresh_default_session(monkeypatch: pytest.MonkeyPatch) -> Iterator[boto3.Session]:
    """A new default boto3 session (restored afterwards): hooks registered on it reach the clients the
    handlers create from it, and no other test's clients."""
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    boto3.setup_default_session(region_name=REGION)
    assert boto3.DEFAULT_SESSION is not None
    yield boto3.DEFAULT_SESSION


# -- the stage A cloud path on moto ------------------------------------------------------------------------


@dataclass
class StageACloud:
    sqs: Any
    sfn: Any
    glue: Any
    queue_url: str
    dead_letter_url: str
    machine_arn: str

    def executions(self) -> list[dict[str, Any]]:
        paginator = self.sfn.get_paginator("list_executions")
        return [e for page in paginator.paginate(stateMachineArn=self.machine_arn) for e in page["executions"]]

    def execution_input(self, execution_arn: str) -> dict[str, Any]:
        return dict(json.loads(self.sfn.describe_execution(executionArn=execution_arn)["input"]))


STAGE_A_TABLES = ("customers", "orders", "payments", "refunds")


@contextmanager
def stage_a_cloud(monkeypatch: pytest.MonkeyPatch, tables: tuple[str, ...] = STAGE_A_TABLES) -> Iterator[StageACloud]:
    """Queue A with its DLQ, the stage A state machine, and raw tables ``eng_mysql_raw_dev.<table>``
    (partitioned by ``date``) in the Glue catalog; the router's environment points at them."""
    from lambdas.stage_a_router import handler as router

    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        queue, dead_letters = create_queue_with_dead_letters(sqs, "queue-a")
        sfn = boto3.client("stepfunctions", region_name=REGION)
        machine = create_pass_state_machine(sfn, "stage-a")
        # Every leased plan writes its manifests there (stage_a.manifest).
        boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")
        glue = boto3.client("glue", region_name=REGION)
        glue.create_database(DatabaseInput={"Name": "eng_mysql_raw_dev"})
        for table in tables:
            glue.create_table(
                DatabaseName="eng_mysql_raw_dev",
                TableInput={
                    "Name": table,
                    "StorageDescriptor": {
                        "Columns": [{"Name": "id", "Type": "bigint"}, {"Name": "amount", "Type": "double"}]
                    },
                    "PartitionKeys": [{"Name": "date", "Type": "string"}],
                },
            )
        names = DependencyTableNames()
        create_dependency_tables(boto3.client("dynamodb", region_name=REGION), names)
        for name, value in {
            "STATE_MACHINE_ARN": machine,
            "DEAD_LETTER_QUEUE_URL": dead_letters,
            "STAGE_A_QUEUE_URL": queue,
            "STAGE_A_FOLLOW_UP_QUEUE_URL": queue,  # one queue here: what the router sends back is counted there
            # Runs here end only when a test ends them: the stage's bound on runs in flight (20 by default,
            # lakeline.commits.slots, tested on its own) would hold back the bursts these tests count.
            "RUNS_IN_FLIGHT": "1000",
            "PIPELINE_STATE_TABLE": names.pipeline_state,
            "RAW_BUCKET": RAW_BUCKET,
            "STAGE_BUCKET": "stage-bucket",
            "PIPELINE_ENVIRONMENT": "dev",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_METRICS_NAMESPACE": "Lakeline",
        }.items():
            monkeypatch.setenv(name, value)
        router.runtime.cache_clear()
        try:
            yield StageACloud(sqs, sfn, glue, queue, dead_letters, machine)
        finally:
            router.runtime.cache_clear()


# -- the CDK app, synthesized in-process once per configuration ---------------------------------------------


@cache
def synthesized_templates(engine: str, router_max_concurrency: int | None = None) -> tuple[dict[str, Any], ...]:
    """The storage and pipeline templates (CloudFormation JSON). ``app.synth()`` runs cdk-nag's
    AwsSolutions checks and raises if any finding is not acknowledged with a reason."""
    import aws_cdk as cdk

    from stacks.app import build_app

    context: dict[str, Any] = {"environment": "dev", "engine": engine}
    if router_max_concurrency is not None:
        context["router_max_concurrency"] = router_max_concurrency
    with tempfile.TemporaryDirectory(prefix="lakeline-synth-") as outdir:
        app = cdk.App(context=context, outdir=outdir)
        stacks = build_app(app)
        assembly = app.synth()
        return tuple(assembly.get_stack_by_name(stack.stack_name).template for stack in stacks)


def resources_of(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: r for name, r in template["Resources"].items() if r["Type"] == kind}


def state_machine_states(template: dict[str, Any], stage: str) -> dict[str, Any]:
    (machine,) = [
        m for name, m in resources_of(template, "AWS::StepFunctions::StateMachine").items() if name.startswith(stage)
    ]
    parts = machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    text = "".join(part if isinstance(part, str) else "TOKEN" for part in parts)
    return dict(json.loads(text)["States"])
