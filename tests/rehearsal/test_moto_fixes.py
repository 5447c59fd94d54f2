"""The local endpoint answers as moto would where ``moto_fixes`` replaced moto's work with a bounded one:
a query on a table's key, a receive past a queue's retention period, the routing of every request; and where it refuses
what AWS refuses: a function environment over 4 KB."""

from __future__ import annotations

import time
import uuid
from typing import Any

from lakeline.runtimes.deployed.local_aws.deploy import Deployment


def test_a_query_on_a_table_s_key_gives_that_key_s_items_in_order_and_adds_no_key(deployment: Deployment) -> None:
    from moto.dynamodb.models import dynamodb_backends

    dynamodb = deployment.client("dynamodb")
    name = f"fixes-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    for key in ("a", "b", "c"):
        for order in (5, 1, 3, 2, 4):
            dynamodb.put_item(TableName=name, Item={"pk": {"S": key}, "sk": {"N": str(order)}, "v": {"S": key * order}})

    def query(key: str, **extra: Any) -> Any:
        return dynamodb.query(
            TableName=name,
            KeyConditionExpression="pk = :k",
            ExpressionAttributeValues={":k": {"S": key}},
            **extra,
        )

    found = query("b")["Items"]
    assert [(item["pk"]["S"], item["sk"]["N"]) for item in found] == [("b", str(n)) for n in range(1, 6)]
    backwards = query("c", ScanIndexForward=False)["Items"]
    assert [item["sk"]["N"] for item in backwards] == ["5", "4", "3", "2", "1"]
    first = query("a", Limit=2)
    rest = query("a", ExclusiveStartKey=first["LastEvaluatedKey"])
    assert [item["sk"]["N"] for item in first["Items"] + rest["Items"]] == ["1", "2", "3", "4", "5"]
    ranged = dynamodb.query(
        TableName=name,
        KeyConditionExpression="pk = :k AND sk BETWEEN :low AND :high",
        ExpressionAttributeValues={":k": {"S": "a"}, ":low": {"N": "2"}, ":high": {"N": "3"}},
    )
    assert [item["v"]["S"] for item in ranged["Items"]] == ["aa", "aaa"]
    assert query("missing")["Items"] == []
    table = dynamodb_backends[deployment.account][deployment.region].get_table(name)
    assert len(table.items) == 3  # the missing key's read added no empty entry to moto's defaultdict
    assert dynamodb.scan(TableName=name)["Count"] == 15


def test_a_message_past_its_queue_s_retention_period_is_not_received(deployment: Deployment) -> None:
    from moto.sqs.models import sqs_backends

    sqs = deployment.client("sqs")
    name = f"fixes-{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=name, Attributes={"MessageRetentionPeriod": "60"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="new")
    sqs.send_message(QueueUrl=url, MessageBody="old")  # (moto stops receiving at the first one past retention)
    queue: Any = sqs_backends[deployment.account][deployment.region].get_queue(name)
    (old,) = [message for message in queue._messages if message.body == "old"]
    old.sent_timestamp = int((time.time() - 120) * 1000)  # sent two minutes ago: past its 60 s
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [message["Body"] for message in received] == ["new"]


def test_a_fifo_queue_still_deduplicates_by_content_and_a_standard_queue_does_not(deployment: Deployment) -> None:
    sqs = deployment.client("sqs")
    name = f"fixes-{uuid.uuid4().hex[:8]}"
    fifo = sqs.create_queue(
        QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    )["QueueUrl"]
    standard = sqs.create_queue(QueueName=name)["QueueUrl"]
    for _ in range(2):
        sqs.send_message(QueueUrl=fifo, MessageBody="same", MessageGroupId="g")
        sqs.send_message(QueueUrl=standard, MessageBody="same")
    assert len(sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10)["Messages"]) == 1
    assert len(sqs.receive_message(QueueUrl=standard, MaxNumberOfMessages=10)["Messages"]) == 2
    attributes = sqs.get_queue_attributes(QueueUrl=standard, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "2"


def test_a_function_environment_over_4_kb_is_refused_as_lambda_refuses_it(deployment: Deployment) -> None:
    """Lambda refuses a function whose environment variables measure over 4 KB together, created or updated
    (``lakeline.aws.lambda_limits``); moto took any size, so a deployment AWS refuses stood up here."""
    import io
    import zipfile

    from botocore.exceptions import ClientError

    lambda_client = deployment.client("lambda")
    role = lambda_client.list_functions()["Functions"][0]["Role"]
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as files:
        files.writestr("index.py", "def handler(event, context):\n    return None\n")
    name = f"fixes-{uuid.uuid4().hex[:8]}"
    create = {
        "FunctionName": name,
        "Runtime": "python3.13",
        "Role": role,
        "Handler": "index.handler",
        "Code": {"ZipFile": archive.getvalue()},
    }
    over = {"TABLE_SETTINGS": "x" * 4_000, "QUEUE_URL": "q" * 100}
    try:
        lambda_client.create_function(**create, Environment={"Variables": over})
        raise AssertionError("a 4 KB environment was taken")
    except ClientError as error:
        assert error.response["Error"]["Code"] == "InvalidParameterValueException"
        message = error.response["Error"]["Message"]
        assert f"{name}: they measure 4136 bytes, over the 4096-byte (4 KB) limit" in message
        assert "the biggest: TABLE_SETTINGS (4014 bytes), QUEUE_URL (109 bytes)" in message
    within = {"TABLE_SETTINGS": "x" * 3_900, "QUEUE_URL": "q" * 100}  # 4036 bytes measured: taken
    lambda_client.create_function(**create, Environment={"Variables": within})
    try:
        lambda_client.update_function_configuration(FunctionName=name, Environment={"Variables": over})
        raise AssertionError("an update to a 4 KB environment was taken")
    except ClientError as error:
        assert error.response["Error"]["Code"] == "InvalidParameterValueException"
    configuration = lambda_client.get_function_configuration(FunctionName=name)
    assert configuration["Environment"]["Variables"] == within  # the refused update changed nothing
    lambda_client.delete_function(FunctionName=name)
