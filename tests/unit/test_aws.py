"""``lakeline.aws``, the one home of AWS plumbing: clients made nowhere else, their retry
configuration, the retry helper, and stage B's messages going through the one SQS sender (its place
in the layers: tests/unit/test_layers.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from lakeline.aws.clients import MAX_ATTEMPTS, AwsClients
from lakeline.aws.retry import Backoff, RetriesExhausted, call_retrying
from lakeline.aws.sqs import MAX_BATCH_BYTES
from lakeline.errors import InvalidInputError
from stage_b.dispatch import send_stage_b_messages
from stage_b.messages import SourceArrival, StageBMessage

REPO = Path(__file__).parents[2]
SOURCES = ("lakeline", "lambdas", "stage_a", "stage_b", "stage_lineage", "stage_end")


def test_clients_are_made_in_one_place_only() -> None:
    """A client made elsewhere would miss the retry configuration."""
    made = []
    for package in SOURCES:
        for path in sorted((REPO / package).rglob("*.py")):
            if path.is_relative_to(REPO / "lakeline" / "aws"):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("client", "resource")
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "boto3"
                ):
                    made.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert made == []


def test_every_client_retries_the_same_way() -> None:
    clients = AwsClients(region="eu-west-1", endpoint_url="http://localhost:1")
    for client in (clients.sqs, clients.dynamodb, clients.stepfunctions, clients.s3, clients.athena):
        assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": MAX_ATTEMPTS}
        assert client.meta.region_name == "eu-west-1"
        assert client.meta.endpoint_url == "http://localhost:1"
    assert clients.sqs is clients.sqs  # made once, then kept


def throttled(code: str = "ThrottlingException") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "slow down"}}, "Operation")


def test_call_retrying_retries_what_passes_and_raises_the_rest_at_once() -> None:
    waits: list[float] = []
    backoff = Backoff(attempts=3, sleep=waits.append, jitter=lambda: 1.0)
    answers: list[object] = [throttled(), throttled(), "done"]

    def call() -> str:
        answer = answers.pop(0)
        if isinstance(answer, ClientError):
            raise answer
        return str(answer)

    assert call_retrying(call, backoff) == "done"
    assert waits == [0.05, 0.1]
    answers[:] = [throttled()] * 3
    with pytest.raises(ClientError, match="ThrottlingException"):
        call_retrying(call, backoff)  # the attempts are spent: the last error, as it is
    answers[:] = [throttled("AccessDeniedException"), "never"]
    with pytest.raises(ClientError, match="AccessDenied"):
        call_retrying(call, backoff)
    assert answers == ["never"]
    with pytest.raises(RetriesExhausted, match="writing t: still not done after 3 attempts"):
        backoff.before_retry(3, "writing t")


def message(partition: str, padding: str = "") -> StageBMessage:
    return StageBMessage(
        target_dataset="db.t",
        partition={"day": partition},
        trigger=SourceArrival(table="db.s", partition={"day": partition}, run="r"),
        usage="overwrite",
        path=[padding] if padding else [],
    )


def test_stage_b_messages_go_through_the_one_sender_within_the_batch_limits() -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue = sqs.create_queue(QueueName="queue-b")["QueueUrl"]
        calls: list[int] = []
        sqs.meta.events.register("before-call.sqs.SendMessageBatch", lambda **kw: calls.append(1))
        assert send_stage_b_messages(sqs, queue, [message(f"2024-01-{day:02d}") for day in range(1, 26)]) == 25
        assert len(calls) == 3  # 10 + 10 + 5
        # Before: stage B's own sender had no size limit; SQS refused the batch with a traceback.
        with pytest.raises(InvalidInputError, match=f"at most {MAX_BATCH_BYTES} bytes per message"):
            send_stage_b_messages(sqs, queue, [message("2024-02-01", "x" * MAX_BATCH_BYTES)])
