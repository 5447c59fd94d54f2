"""A dependency item put into the deployed dependencies table, as users do: the table's stream runs the
bundled dependencies-by-table function, which writes one routing item per source (#20); an item it refuses is
parked with its reason in the stream's failure queue, and a passing failure goes Lambda's way: retried, then sent
there (#42)."""

from __future__ import annotations

import json
from pathlib import Path

from boto3.dynamodb.types import TypeSerializer

from lakeline.operations.dead_letters import DeadLetter, read_dead_letters
from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.functions import FunctionHost
from tests.rehearsal.support import function_role, output, put_item, refused

ITEMS = Path(__file__).parents[2] / "examples" / "demo" / "dependencies.json"


def test_a_dependency_item_reaches_dependencies_by_table_through_the_deployed_stream(
    deployment: Deployment, functions: FunctionHost
) -> None:
    outputs = deployment.outputs["Lakeline-dev-Pipeline"]
    item = json.loads(ITEMS.read_text())[0]
    serializer = TypeSerializer()
    dynamodb = deployment.client("dynamodb")
    dynamodb.put_item(
        TableName=outputs["DependenciesTable"],
        Item={key: serializer.serialize(value) for key, value in item.items()},
    )
    streamed = [(name, result) for name, _, result in functions.invocations if "-DependenciesStream" in name]
    assert streamed and not isinstance(streamed[-1][1], Exception), streamed
    routed = dynamodb.scan(TableName=outputs["DependenciesByTableTable"])["Items"]
    assert [(i["source_table"]["S"], i["target_dataset"]["S"]) for i in routed] == [
        ("engineering_mysql_dev.customers", "engineering_analytics_dev.customers_by_country")
    ]


def _stream_failures(deployment: Deployment) -> list[DeadLetter]:
    """The stream's failure queue, emptied: what each test parked there, and nothing of another's."""
    sqs, url = deployment.client("sqs"), output(deployment, "DependenciesStreamDeadLetterQueueUrl")
    letters = read_dead_letters(sqs, url)
    for letter in read_dead_letters(sqs, url):
        sqs.delete_message(QueueUrl=url, ReceiptHandle=letter.receipt)
    return letters


def _routed(deployment: Deployment) -> set[tuple[str, str]]:
    routed = deployment.client("dynamodb").scan(TableName=output(deployment, "DependenciesByTableTable"))["Items"]
    return {(item["source_table"]["S"], item["target_dataset"]["S"]) for item in routed}


def test_an_invalid_item_is_parked_with_its_reason_and_the_next_item_is_routed(
    deployment: Deployment, functions: FunctionHost
) -> None:
    _stream_failures(deployment)
    item = json.loads(ITEMS.read_text())[0]
    put_item(deployment, {**item, "dataset": "retail_reports_dev.refused", "partitionColumn": "Not Valid"})
    put_item(deployment, {**item, "dataset": "retail_reports_dev.after_refused"})
    (letter,) = _stream_failures(deployment)
    assert letter.source == "dependencies-by-table"
    assert "dependency item 'retail_reports_dev.refused'" in letter.reason and "partitionColumn" in letter.reason
    refused = json.loads(letter.body)["refused_dependency_item"]
    assert (refused["dataset"], refused["event_name"], refused["reason"]) == (
        "retail_reports_dev.refused",
        "INSERT",
        letter.reason,
    )
    source = item["dependencies"][0]["TableName"]
    assert (source, "retail_reports_dev.after_refused") in _routed(deployment)
    assert (source, "retail_reports_dev.refused") not in _routed(deployment)


def test_a_function_failing_for_a_passing_cause_is_retried_then_its_batch_goes_to_the_failure_queue(
    deployment: Deployment, functions: FunctionHost
) -> None:
    """Not the item's fault (here a grant taken away): Lambda's mapping retries the record (3 retries) and then
    sends the batch's sequence numbers to the failure queue, not the item's reason; the items put after the grant is
    back are routed, nothing behind the failed record held."""
    _stream_failures(deployment)
    item = json.loads(ITEMS.read_text())[0]
    stream = [name for name in functions.functions if "-DependenciesStream" in name]
    before = len([call for call in functions.invocations if call[0] in stream])
    with refused(deployment, function_role(functions, "-DependenciesStream"), "dynamodb:Query"):
        put_item(deployment, {**item, "dataset": "retail_reports_dev.ungranted"})
    calls = [call for call in functions.invocations if call[0] in stream][before:]
    assert len(calls) == 4, calls  # the first try and three retries
    (letter,) = _stream_failures(deployment)
    assert letter.reason.startswith("Lambda gave up on 1 stream records, sequence numbers ")
    assert "(RetryAttemptsExhausted, 4 invocations)" in letter.reason
    batch = json.loads(letter.body)["DDBStreamBatchInfo"]
    assert batch["startSequenceNumber"] == calls[0][1]["Records"][0]["dynamodb"]["SequenceNumber"]
    source = item["dependencies"][0]["TableName"]
    assert (source, "retail_reports_dev.ungranted") not in _routed(deployment)
    put_item(deployment, {**item, "dataset": "retail_reports_dev.granted_again"})
    assert (source, "retail_reports_dev.granted_again") in _routed(deployment)
    assert _stream_failures(deployment) == []


def test_without_its_send_grant_the_function_cannot_park_a_refused_item_with_its_reason(
    deployment: Deployment, functions: FunctionHost
) -> None:
    """The grant the function parks with is needed: without it the record fails, and only Lambda's record of the
    batch (no reason) reaches the queue."""
    _stream_failures(deployment)
    item = json.loads(ITEMS.read_text())[0]
    with refused(deployment, function_role(functions, "-DependenciesStream"), "sqs:SendMessage"):
        put_item(deployment, {**item, "dataset": "retail_reports_dev.unparked", "partitionColumn": "Not Valid"})
    (letter,) = _stream_failures(deployment)
    assert letter.reason.startswith("Lambda gave up on 1 stream records")
