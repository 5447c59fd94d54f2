"""What the rehearsal's tests do as a team does with a deployed pipeline: find its buckets and queues,
create its tables, drop files, and read what came out."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from lakeline.lineage.openlineage.archive import EVENTS_FOLDER, EventArchive
from lakeline.lineage.records.archive import S3ArchiveStore
from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.executions import ExecutionHost
from lakeline.runtimes.deployed.local_aws.functions import FunctionHost

PIPELINE = "Lakeline-dev-Pipeline"
CSV_SERDE = "org.apache.hadoop.hive.serde2.OpenCSVSerde"
PARQUET = {
    "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    "OutputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
    "SerdeInfo": {"SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"},
}
JSON = {
    "InputFormat": "org.apache.hadoop.mapred.TextInputFormat",
    "OutputFormat": "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
    "SerdeInfo": {"SerializationLibrary": "org.openx.data.jsonserde.JsonSerDe"},
}
CSV = {
    "InputFormat": "org.apache.hadoop.mapred.TextInputFormat",
    "OutputFormat": "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
    "SerdeInfo": {"SerializationLibrary": CSV_SERDE, "Parameters": {"separatorChar": ","}},
}


CHECKED_TABLE_SETTINGS = {
    "retail_shop_dev.checked_orders": {
        "checks": [{"rule": 'IsComplete "order_id"'}, {"rule": 'IsUnique "order_id"'}],
    }
}
"""The deployed app's table with quality checks (#41): no NULL order id, each id once in a partition's version."""


def bucket(deployment: Deployment, kind: str) -> str:
    names = [b["Name"] for b in deployment.client("s3").list_buckets()["Buckets"]]
    (name,) = [n for n in names if f"{kind}bucket" in n.lower() and "accesslogs" not in n.lower()]
    return name


def output(deployment: Deployment, name: str) -> str:
    return deployment.outputs[PIPELINE][name]


def parked(deployment: Deployment, queue: str = "StageADeadLetterQueueUrl") -> dict[str, str]:
    """A dead-letter queue's messages, all of them, left in it: the arrival's key (or the body) → the reason."""
    sqs = deployment.client("sqs")
    url = output(deployment, queue)
    found: dict[str, str] = {}
    seen: dict[str, str] = {}  # message id → receipt, to make each visible again at the end
    while True:
        received = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], VisibilityTimeout=30
        ).get("Messages", [])
        new = [message for message in received if message["MessageId"] not in seen]
        if not new:
            break
        for message in new:
            seen[message["MessageId"]] = message["ReceiptHandle"]
            body = json.loads(message["Body"])
            key = body["detail"]["object"]["key"] if "detail" in body else message["Body"]
            attributes = message.get("MessageAttributes", {})
            # A message without a reason was moved by the queue's redrive policy, after its receives ran out.
            found[key] = attributes.get("lakeline_reason", {}).get("StringValue", "(moved by the redrive policy)")
    for receipt in seen.values():
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=receipt, VisibilityTimeout=0)
    return found


def create_table(
    deployment: Deployment,
    name: str,
    columns: list[tuple[str, str]],
    location: str,
    *,
    csv: bool = False,
    json_serde: bool = False,
    partition: str = "date",
) -> None:
    """A table in the deployed Glue catalog, as a team creates it (a raw CSV table skips its header; a
    raw JSON table reads through the OpenX SerDe)."""
    glue = deployment.client("glue")
    database, table = name.split(".")
    with contextlib.suppress(glue.exceptions.AlreadyExistsException):
        glue.create_database(DatabaseInput={"Name": database})
    glue.create_table(
        DatabaseName=database,
        TableInput={
            "Name": table,
            "TableType": "EXTERNAL_TABLE",
            "Parameters": {"skip.header.line.count": "1"}
            if csv
            else {"classification": "json" if json_serde else "parquet"},
            "StorageDescriptor": {
                "Columns": [{"Name": n, "Type": t} for n, t in columns],
                "Location": location,
                **(CSV if csv else JSON if json_serde else PARQUET),
            },
            "PartitionKeys": [{"Name": partition, "Type": "string"}],
        },
    )


def create_source_tables(deployment: Deployment, folder: str, columns: list[tuple[str, str]]) -> None:
    """The raw (CSV, its header skipped) and stage tables of the table folder ``<team>/<dataset>/<table>``,
    partitioned by ``date``, in the raw and stage buckets, as a team creates them before its first arrival."""
    team, dataset, table = folder.split("/")
    create_table(
        deployment,
        f"{team}_{dataset}_raw_dev.{table}",
        columns,
        f"s3://{bucket(deployment, 'raw')}/{folder}/",
        csv=True,
    )
    create_table(deployment, f"{team}_{dataset}_dev.{table}", columns, f"s3://{bucket(deployment, 'stage')}/{folder}/")


def query(deployment: Deployment, sql: str, *, database: str | None = None) -> list[list[str]]:
    """A statement through the deployment's Athena API; the rows of its result, header row left out."""
    athena = deployment.client("athena")
    started = athena.start_query_execution(
        QueryString=sql,
        WorkGroup="lakeline-dev",
        **({"QueryExecutionContext": {"Database": database}} if database else {}),
    )
    query_id = started["QueryExecutionId"]
    while True:
        status = athena.get_query_execution(QueryExecutionId=query_id)["QueryExecution"]["Status"]
        if status["State"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        time.sleep(0.05)
    assert status["State"] == "SUCCEEDED", status
    rows = athena.get_query_results(QueryExecutionId=query_id)["ResultSet"]["Rows"]
    return [[column.get("VarCharValue", "") for column in row["Data"]] for row in rows[1:]]


def executions_named(deployment: Deployment, machine: str, prefix: str) -> list[dict[str, Any]]:
    sfn = deployment.client("stepfunctions")
    found = sfn.list_executions(stateMachineArn=output(deployment, machine))["executions"]
    return [execution for execution in found if execution["name"].startswith(prefix)]


def without(document: dict[str, Any], action: str) -> dict[str, Any]:
    """A policy document with ``action`` taken out of every statement."""
    statements = []
    for statement in document["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        kept = [a for a in actions if a.lower() != action.lower()]  # IAM actions are case-insensitive
        if kept:
            statements.append({**statement, "Action": kept})
    return {**document, "Statement": statements}


def function_role(functions: FunctionHost, name_part: str) -> str:
    """The role name of the one deployed function whose name contains ``name_part`` (``-StageARouter``)."""
    (function,) = [name for name in functions.functions if name_part in name]
    return functions.functions[function].role.rsplit("/", 1)[-1]


@contextlib.contextmanager
def refused(deployment: Deployment, role: str, action: str) -> Iterator[None]:
    """``role``'s inline policies without ``action`` (a broken grant) inside the block; restored after."""
    iam = deployment.client("iam")
    policies = {
        name: iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"]
        for name in iam.list_role_policies(RoleName=role)["PolicyNames"]
    }
    try:
        for name, document in policies.items():
            iam.put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=json.dumps(without(document, action)))
        yield
    finally:
        for name, document in policies.items():
            iam.put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=json.dumps(document))


def put_item(deployment: Deployment, item: dict[str, object]) -> None:
    """A dependency item put into the deployed table (its stream keeps dependencies-by-table in step)."""
    from boto3.dynamodb.types import TypeSerializer

    serializer = TypeSerializer()
    deployment.client("dynamodb").put_item(
        TableName=output(deployment, "DependenciesTable"),
        Item={key: serializer.serialize(value) for key, value in item.items()},
    )


def create_report_table(deployment: Deployment, table: str, columns: str) -> None:
    """A target of stage B, created with Athena DDL as a team creates its analytics tables."""
    query(deployment, "CREATE DATABASE IF NOT EXISTS retail_reports_dev")
    query(
        deployment,
        f"CREATE EXTERNAL TABLE retail_reports_dev.{table} ({columns}) PARTITIONED BY (`date` STRING) "
        f"STORED AS PARQUET LOCATION 's3://{bucket(deployment, 'analytics')}/retail/reports/{table}/'",
    )


def writing(executions: ExecutionHost, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs that ran their steps. SQS delivers at least once (here, moto's delivery inside a send and
    the rehearsal's pollers may both take a message): a second delivery of a message already applied
    starts a run that only repeats the post-update, which the others must be."""
    ran = [run for run in runs if "RunStepsStep" in executions.records[str(run["executionArn"])].states()]
    repeats = [executions.records[str(run["executionArn"])] for run in runs if run not in ran]
    assert all(r.states() == ["PostUpdateTask"] and r.status == "SUCCEEDED" for r in repeats), repeats
    return ran


def stage_b_runs(deployment: Deployment, executions: ExecutionHost, table: str) -> list[dict[str, Any]]:
    """The stage B executions of target table ``table``."""
    found = deployment.client("stepfunctions").list_executions(
        stateMachineArn=output(deployment, "StageBStateMachineArn")
    )["executions"]
    return [run for run in found if executions.records[run["executionArn"]].input["plan"]["target_table"] == table]


def daily_item(
    dataset: str, usage: str, steps: list[dict[str, str]], *, source: str = "retail_shop_dev.orders"
) -> dict[str, Any]:
    """A dependency item of ``dataset``, one partition a day, fed by ``source``'s same day."""
    return {
        "dataset": dataset,
        "dependencies": [
            {
                "TableName": source,
                "FieldColumn": "date",
                "Usage": usage,
                "DateExpression": "%Y%m%d",
                "relativedelta_attributes": {"days": 0},
            }
        ],
        "partitionColumn": "date",
        "partitionPythonMask": "%Y%m%d",
        "steps": steps,
        "date_substitutions": [{"token": "$day", "format": "%Y%m%d", "relativedelta_attributes": {"days": 0}}],
    }


def archived_events(deployment: Deployment, job: str) -> list[dict[str, Any]]:
    """The OpenLineage events the deployed functions kept in the lineage archive bucket for ``job`` and its steps."""
    s3 = deployment.client("s3")
    (archive,) = [b["Name"] for b in s3.list_buckets()["Buckets"] if "lineagearchive" in b["Name"].lower()]
    events = EventArchive(S3ArchiveStore(s3, archive, EVENTS_FOLDER)).events()
    return [e for e in events if e["job"]["name"] == job or e["job"]["name"].startswith(f"{job}.step")]


def life_cycles(events: list[dict[str, Any]], job: str) -> dict[str, list[tuple[str, datetime]]]:
    """Each run's (eventType, eventTime), the execution's as ``run``, its steps' as ``.step<N>``."""
    told: dict[str, list[tuple[str, datetime]]] = {}
    for event in sorted(events, key=lambda e: (e["eventTime"], e["eventType"] != "START")):
        run = event["job"]["name"].removeprefix(job) or "run"
        told.setdefault(run, []).append((event["eventType"], datetime.fromisoformat(event["eventTime"])))
    return told
